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

from protocol.encoding import Value
from protocol.errors import ParameterError
from protocol.items import CaptionedImageItem
from verifier.oracles.base import OracleInfo

from .augment import to_unit
from .cosine import cosine

#: The score function's claim name.
FUNCTION: Final = "image-text"
#: The oracle capability it needs.
CAPABILITY: Final = "embed-image-text"


@dataclass(frozen=True, kw_only=True)
class ImageTextSpec:
    """The score part of a claim: ``{"function": "image-text"}``."""

    function: str = FUNCTION

    #: The item kind this score reads.
    item_kind: ClassVar[str] = "captioned-image"

    def __post_init__(self) -> None:
        """Validate the name."""
        if self.function != FUNCTION:
            raise ParameterError(f"score function {self.function!r} is not {FUNCTION!r}")

    @property
    def queries_per_version(self) -> int:
        """Oracle queries per version (1 image; the pair's caption is asked once)."""
        return 1

    def to_value(self) -> dict[str, Value]:
        """Return the canonical claim map (spec §10.1)."""
        return {"function": self.function}

    @classmethod
    def from_value(cls, value: object) -> ImageTextSpec:
        """Parse the claim map strictly (exactly the key ``function``)."""
        if not isinstance(value, dict) or set(value) != {"function"}:
            raise ParameterError("an image-text score map has exactly the key 'function'")
        return cls(function=value["function"])

    def check_item(self, item: object) -> CaptionedImageItem:
        """Return ``item`` if it is a captioned-image item, else raise ``ParameterError``."""
        if not isinstance(item, CaptionedImageItem):
            raise ParameterError("the image-text score scores captioned-image items")
        return item

    def check_oracle(self, info: OracleInfo) -> None:
        """Check the oracle offers ``embed-image-text``."""
        if CAPABILITY not in info.capabilities:
            raise ParameterError(f"oracle {info.model_name!r} does not offer {CAPABILITY!r}")


def make_query(item: CaptionedImageItem) -> npt.NDArray[np.float32]:
    """Return the version's image as the float32 (H, W, C) query in [0, 1]."""
    return np.ascontiguousarray(to_unit(item.image.pixels).astype(np.float32))


def score(
    image_embedding: npt.NDArray[np.float64], caption_embedding: npt.NDArray[np.float64]
) -> float:
    """Return ``cos(image embedding, caption embedding)`` in binary64."""
    return cosine(image_embedding, caption_embedding)
