"""Score functions of the arbiter's verifier (spec §10.3–§10.6); numpy only, never torch.

Their claim parameters (score specs) and the table of score functions are the claim
protocol's (:mod:`twinaudit.protocol.claim.scores`,
:mod:`twinaudit.protocol.claim.functions`); here is
how the oracle's answers become scores.

- :mod:`twinaudit.verifier.scoring.augment` — the perturbation families and their PRG draws;
- :mod:`twinaudit.verifier.scoring.classifier` — the image-classifier score (knowledge
  conditions C1–C4);
- :mod:`twinaudit.verifier.scoring.encoder` — the self-supervised image-encoder score (sum of
  pairwise cosines of K crops and flips);
- :mod:`twinaudit.verifier.scoring.language` — the language-model score (mean token
  log-probability);
- :mod:`twinaudit.verifier.scoring.image_text` — the CLIP-style score (image-caption cosine);
- :mod:`twinaudit.verifier.scoring.cosine` — exactly rounded dot products and cosines.
"""
