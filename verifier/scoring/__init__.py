"""Score functions of the arbiter's verifier (spec draft §10.3); numpy only, never torch.

- :mod:`verifier.scoring.augment` — the perturbation families and their PRG draws;
- :mod:`verifier.scoring.classifier` — the image-classifier score (knowledge
  conditions C1–C4) and :class:`~verifier.scoring.classifier.ScoreSpec`.
"""
