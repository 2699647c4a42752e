"""The image-encoder score's claim parameters (spec §10.4; paper §6.1, Alg. 5).

A claim's score map ``{"function": "image-encoder", "k", "perturbation"}``: K
perturbed copies per version (default 64 SimCLR-style crops and flips), scored by the
verifier as the sum of the cosine similarities of their embeddings
(:mod:`twinaudit.verifier.scoring.encoder`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Final

from twinaudit.protocol.encoding import Value
from twinaudit.protocol.errors import ParameterError
from twinaudit.protocol.items import ImageItem

from .oracle_view import OracleDescription
from .perturbations import FAMILIES, MAX_COPIES

#: The score function's claim name.
FUNCTION: Final = "image-encoder"
#: The oracle capability it needs.
CAPABILITY: Final = "embed-images"
#: Copies per version unless the claim says otherwise (the paper's K).
DEFAULT_K: Final = 64
#: Perturbation family unless the claim says otherwise (the paper's crops and flips, drawn
#: without libm; claims before it named ``random-resized-crop-flip``, spec §10.3).
DEFAULT_PERTURBATION: Final = "random-resized-crop-flip-v2"
#: Families that move the view (``none`` and ``dither`` copies are the image, or all but
#: the image, so every pair would score alike).
PERTURBING_FAMILIES: Final = tuple(f for f in FAMILIES if f not in ("none", "dither"))


@dataclass(frozen=True, kw_only=True)
class EncoderSpec:
    """The score part of a claim: ``{"function": "image-encoder", "k", "perturbation"}``.

    ``k`` is in ``2..MAX_COPIES`` (one copy has no pair to compare);
    ``perturbation`` one of :data:`PERTURBING_FAMILIES`. Invalid values raise
    :class:`~twinaudit.protocol.errors.ParameterError`.
    """

    function: str = FUNCTION
    k: int = DEFAULT_K
    perturbation: str = DEFAULT_PERTURBATION

    #: The item kind this score reads.
    item_kind: ClassVar[str] = "image"
    #: The oracle capability it needs.
    CAPABILITY: ClassVar[str] = CAPABILITY

    def __post_init__(self) -> None:
        """Validate every field."""
        if self.function != FUNCTION:
            raise ParameterError(f"score function {self.function!r} is not {FUNCTION!r}")
        if isinstance(self.k, bool) or not isinstance(self.k, int) or not 2 <= self.k <= MAX_COPIES:
            raise ParameterError(f"k must be an integer in 2..{MAX_COPIES}, got {self.k!r}")
        if self.perturbation not in PERTURBING_FAMILIES:
            raise ParameterError(
                f"perturbation {self.perturbation!r} not one of {PERTURBING_FAMILIES}"
            )

    @property
    def queries_per_version(self) -> int:
        """Oracle queries per version (K)."""
        return self.k

    @property
    def tie_margin(self) -> float:
        """The tie margin of spec §7.1: 0, only equal scores tie."""
        return 0.0

    def to_value(self) -> dict[str, Value]:
        """Return the canonical claim map (spec §10.1)."""
        return {"function": self.function, "k": self.k, "perturbation": self.perturbation}

    def to_fields(self) -> dict[str, int | str | float]:
        """Return the fields of the claim's ``ScoreSpec`` message."""
        return {"function": self.function, "k": self.k, "perturbation": self.perturbation}

    @classmethod
    def from_value(cls, value: object) -> EncoderSpec:
        """Parse the claim map strictly (exactly the three keys)."""
        keys = {"function", "k", "perturbation"}
        if not isinstance(value, dict) or set(value) != keys:
            raise ParameterError(f"an image-encoder score map has exactly the keys {sorted(keys)}")
        return cls(function=value["function"], k=value["k"], perturbation=value["perturbation"])

    def check_item(self, item: object) -> ImageItem:
        """Return ``item`` if it is an image item, else raise ``ParameterError``."""
        if not isinstance(item, ImageItem):
            raise ParameterError("the image-encoder score scores image items")
        return item

    def check_oracle(self, info: OracleDescription) -> None:
        """Check the oracle offers ``embed-images``."""
        info.check_offers(CAPABILITY)
