"""The copies' draws (spec §10.3, §10.4) and the scores of §10.4–§10.6; numpy, never torch.

Their claim parameters (score specs) and the table of score functions are the claim
protocol's (:mod:`twinaudit.protocol.claim.scores`,
:mod:`twinaudit.protocol.claim.functions`); here is how the oracle's answers become the
other functions' scores, and how every image score draws its copies. The
image-classifier score (§10.3) is the claim protocol's, whole:
:mod:`twinaudit.protocol.claim.scores.classifier`.

- :mod:`twinaudit.verifier.scoring.augment` — the perturbation families and their PRG draws;
- :mod:`twinaudit.verifier.scoring.encoder` — the self-supervised image-encoder score (sum of
  pairwise cosines of K crops and flips);
- :mod:`twinaudit.verifier.scoring.language` — the language-model score (mean token
  log-probability);
- :mod:`twinaudit.verifier.scoring.image_text` — the CLIP-style score (image-caption cosine);
- :mod:`twinaudit.verifier.scoring.cosine` — exactly rounded dot products and cosines.
"""
