"""The score functions' claim parameters (spec §10.3–§10.6); no numpy image code, no torch.

- :mod:`.perturbations` — the perturbation families' names and the cap on K;
- :mod:`.classifier` — the image-classifier score (§10.3), whole: its parameters, its
  knowledge conditions C1–C4 and the score of a version from the oracle's answers;
- :mod:`.knowledge` — the words ``labelled``/``unlabelled`` (§10.1), resolved to C1–C4;
- :mod:`.encoder` — the image-encoder score (§10.4);
- :mod:`.function_only` — the language-model (§10.5) and image-text (§10.6) scores;
- :mod:`.oracle_view` — what a score reads of the oracle's description (§10.1).

The table that names them all is :mod:`twinaudit.protocol.claim.functions`.
"""
