"""The self-supervised image-encoder score function (paper §6.1, Alg. 5; spec §10.4).

For one version of an opened pair the verifier draws K perturbed copies (default 64
SimCLR-style crops and flips, :mod:`twinaudit.verifier.scoring.augment`) from the version's
stream ``augment/<i>/<v>``, asks the encoder for their K embeddings, and scores the
version by how alike they are: the sum of the cosine similarities of the K(K−1)/2
pairs of distinct copies (:func:`~twinaudit.verifier.scoring.cosine.pairwise_cosine_sum`,
exactly rounded binary64). A model trained on an image tends to map its crops to
nearby embeddings (EncoderMI's observation, which the paper's score uses).

The paper's Algorithm 5 sums ``cos`` over all K² ordered pairs, the K self-pairs
included; for non-zero embeddings that is ``K + 2·S`` where ``S`` is the score here,
so both rank versions alike. The sum over distinct pairs is specified because it
adds no constant and no duplicate terms. The claim parameters,
:class:`~twinaudit.protocol.claim.scores.encoder.EncoderSpec`, live in the claim protocol.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from twinaudit.protocol.claim.scores.encoder import EncoderSpec
from twinaudit.protocol.encoding import Value
from twinaudit.protocol.items import ImageItem
from twinaudit.protocol.oracles.embedding import EmbeddingAnswer
from twinaudit.protocol.prg import Prg

from .augment import draw_copies
from .cosine import pairwise_cosine_sum

#: The spec class is the claim protocol's; it is re-exported for the scoring code's callers.
__all__ = ["EncoderSpec", "make_queries", "score"]


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
