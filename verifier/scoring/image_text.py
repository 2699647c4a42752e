"""The image-text (CLIP-style) score function (paper §6.3; spec §10.6).

A version of a captioned-image pair is scored by the cosine similarity of the
model's embedding of its image and of its caption
(:func:`~verifier.scoring.cosine.cosine`, binary64 with exactly rounded sums). Both
versions of a pair share the caption, so the pair is decided by which marked image
the model places nearer to it. The image is sent unperturbed (float32 ``p/255``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Final

import numpy as np
import numpy.typing as npt

from protocol.errors import ParameterError
from protocol.items import CaptionedImageItem

from .augment import to_unit
from .cosine import cosine
from .function_only import FunctionOnlySpec

#: The score function's claim name.
FUNCTION: Final = "image-text"
#: The oracle capability it needs.
CAPABILITY: Final = "embed-image-text"


@dataclass(frozen=True, kw_only=True)
class ImageTextSpec(FunctionOnlySpec):
    """The score part of a claim: ``{"function": "image-text"}``.

    One query per version: its image; the pair's caption is asked once.
    """

    FUNCTION: ClassVar[str] = FUNCTION
    CAPABILITY: ClassVar[str] = CAPABILITY
    item_kind: ClassVar[str] = "captioned-image"

    function: str = FUNCTION

    def check_item(self, item: object) -> CaptionedImageItem:
        """Return ``item`` if it is a captioned-image item, else raise ``ParameterError``."""
        if not isinstance(item, CaptionedImageItem):
            raise ParameterError("the image-text score scores captioned-image items")
        return item


def make_query(item: CaptionedImageItem) -> npt.NDArray[np.float32]:
    """Return the version's image as the float32 (H, W, C) query in [0, 1]."""
    return np.ascontiguousarray(to_unit(item.image.pixels).astype(np.float32))


def score(
    image_embedding: npt.NDArray[np.float64], caption_embedding: npt.NDArray[np.float64]
) -> float:
    """Return ``cos(image embedding, caption embedding)`` in binary64."""
    return cosine(image_embedding, caption_embedding)
