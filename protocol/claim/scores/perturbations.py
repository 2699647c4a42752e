"""The perturbation families an image score may name, and the cap on K (spec §10.3, §10.4).

Only the names live here, so that a claim's score parameters can be checked without
numpy's image code; how each family draws and applies a copy is the verifier's
(:mod:`twinaudit.verifier.scoring.augment`).
"""

from __future__ import annotations

from typing import Final

#: The perturbation families, by their claim names. The crops with ``-v2`` draw without
#: libm (spec §10.3); those without it draw their aspect with ``exp``, so their draws
#: depend on the platform's C library, and stay for claims and verdicts that name them.
FAMILIES: Final = (
    "none",
    "random-resized-crop",
    "pad-shift-flip",
    "random-resized-crop-flip",
    "simclr-crop-flip",
    "dither",
    "pad-shift-flip-dither",
    "random-resized-crop-v2",
    "random-resized-crop-flip-v2",
    "simclr-crop-flip-v2",
    "noise",
)
#: Families whose one copy is the image itself (``none``) or within one intensity level
#: of it (``dither``): K = 1 queries them fully, where the others draw copies that differ.
SINGLE_COPY: Final = ("none", "dither")
#: Most perturbed copies per version (the claim parameter K).
MAX_COPIES: Final = 256
