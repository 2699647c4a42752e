"""Score functions of the arbiter's verifier (spec §10.3–§10.6); numpy only, never torch.

- :mod:`verifier.scoring.augment` — the perturbation families and their PRG draws;
- :mod:`verifier.scoring.classifier` — the image-classifier score (knowledge
  conditions C1–C4) and :class:`~verifier.scoring.classifier.ScoreSpec`;
- :mod:`verifier.scoring.encoder` — the self-supervised image-encoder score (sum of
  pairwise cosines of K crops and flips);
- :mod:`verifier.scoring.language` — the language-model score (mean token
  log-probability);
- :mod:`verifier.scoring.image_text` — the CLIP-style score (image-caption cosine);
- :mod:`verifier.scoring.cosine` — exactly rounded dot products and cosines;
- :mod:`verifier.scoring.knowledge` — the knowledge words ``labelled``/``unlabelled``,
  resolved from the oracle's description when a claim starts;
- :mod:`verifier.scoring.registry` — parsing a claim's score map or proto fields.
"""
