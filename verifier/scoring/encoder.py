"""The self-supervised image-encoder score function (paper §6.1, Alg. 5; spec §10.4).

For one version of an opened pair the verifier draws K perturbed copies (default 64
SimCLR-style crops and flips, :mod:`verifier.scoring.augment`) from the version's
stream ``augment/<i>/<v>``, asks the encoder for their K embeddings, and scores the
version by how alike they are: the sum of the cosine similarities of the K(K−1)/2
pairs of distinct copies (:func:`~verifier.scoring.cosine.pairwise_cosine_sum`,
exactly rounded binary64). A model trained on an image tends to map its crops to
nearby embeddings (EncoderMI's observation, which the paper's score uses).

The paper's Algorithm 5 sums ``cos`` over all K² ordered pairs, the K self-pairs
included; for non-zero embeddings that is ``K + 2·S`` where ``S`` is the score here,
so both rank versions alike. The sum over distinct pairs is specified because it
adds no constant and no duplicate terms.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Final

import numpy as np
import numpy.typing as npt

from protocol.encoding import Value
from protocol.errors import ParameterError
from protocol.items import ImageItem
from protocol.prg import Prg
from verifier.oracles.base import OracleInfo
from verifier.oracles.embedding import EmbeddingAnswer

from .augment import FAMILIES, MAX_COPIES, draw_copies
from .cosine import pairwise_cosine_sum

#: The score function's claim name.
FUNCTION: Final = "image-encoder"
#: The oracle capability it needs.
CAPABILITY: Final = "embed-images"
#: Copies per version unless the claim says otherwise (the paper's K).
DEFAULT_K: Final = 64
#: Perturbation family unless the claim says otherwise (crops and flips).
DEFAULT_PERTURBATION: Final = "random-resized-crop-flip"
#: Families that move the view (``none`` and ``dither`` copies are the image, or all but
#: the image, so every pair would score alike).
PERTURBING_FAMILIES: Final = tuple(f for f in FAMILIES if f not in ("none", "dither"))


@dataclass(frozen=True, kw_only=True)
class EncoderSpec:
    """The score part of a claim: ``{"function": "image-encoder", "k", "perturbation"}``.

    ``k`` is in ``2..MAX_COPIES`` (one copy has no pair to compare);
    ``perturbation`` one of :data:`PERTURBING_FAMILIES`. Invalid values raise
    :class:`~protocol.errors.ParameterError`.
    """

    function: str = FUNCTION
    k: int = DEFAULT_K
    perturbation: str = DEFAULT_PERTURBATION

    #: The item kind this score reads.
    item_kind: ClassVar[str] = "image"

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

    def to_value(self) -> dict[str, Value]:
        """Return the canonical claim map (spec §10.1)."""
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

    def check_oracle(self, info: OracleInfo) -> None:
        """Check the oracle offers ``embed-images``."""
        info.check_offers(CAPABILITY)


def make_queries(
    spec: EncoderSpec, item: ImageItem, prg: Prg
) -> tuple[list[dict[str, Value]], npt.NDArray[np.float32]]:
    """Draw the K copies of one version from its stream; return parameters and images."""
    spec.check_item(item)
    return draw_copies(spec.perturbation, spec.k, item.pixels, prg)


def score(spec: EncoderSpec, answer: EmbeddingAnswer) -> float:
    """Return the float64 score of one version from the embeddings of its K copies."""
    answer.validate(spec.k)
    return pairwise_cosine_sum(answer.embeddings)
