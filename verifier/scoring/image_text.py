"""The image-text (CLIP-style) score function (paper §6.3; spec §10.6).

A version of a captioned-image pair is scored by the cosine similarity of the
model's embedding of its image and of its caption
(:func:`~twinaudit.verifier.scoring.cosine.cosine`, binary64 with exactly rounded sums). Both
versions of a pair share the caption, so the pair is decided by which marked image
the model places nearer to it. The image is sent unperturbed (float32 ``p/255``).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from twinaudit.protocol.claim.scores.function_only import ImageTextSpec
from twinaudit.protocol.items import CaptionedImageItem

from .augment import to_unit
from .cosine import cosine

#: The spec class is the claim protocol's; it is re-exported for the scoring code's callers.
__all__ = ["ImageTextSpec", "make_query", "score"]


def make_query(item: CaptionedImageItem) -> npt.NDArray[np.float32]:
    """Return the version's image as the float32 (H, W, C) query in [0, 1]."""
    return np.ascontiguousarray(to_unit(item.image.pixels).astype(np.float32))


def score(
    image_embedding: npt.NDArray[np.float64], caption_embedding: npt.NDArray[np.float64]
) -> float:
    """Return ``cos(image embedding, caption embedding)`` in binary64."""
    return cosine(image_embedding, caption_embedding)
