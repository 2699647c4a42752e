"""The interface every score function's window logic implements (spec §10.2 steps 5–6)."""

from __future__ import annotations

import abc
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from protocol.encoding import Value
from protocol.errors import ParameterError, VerificationError
from protocol.items import Item
from protocol.prg import Prg
from verifier.oracles.base import Oracle, OracleInfo


@dataclass(frozen=True)
class QueryBatch:
    """A window's queries, shuffled, with what is needed to put the answers back.

    ``images`` (float32 (N, H, W, C) or None) and ``texts`` are sent to the oracle in
    this order; ``image_order[n]`` (``text_order[n]``) is the position, in the
    unshuffled list, of the query sent n-th. ``params`` and ``query_digests`` hold one
    entry per pair (what its record lists), ``queries`` the unshuffled image queries
    per version (for the digests).
    """

    images: npt.NDArray[np.float32] | None
    texts: list[str]
    image_order: list[int]
    text_order: list[int]
    params: list[Value] = field(default_factory=list)
    queries: list[npt.NDArray[np.float32]] = field(default_factory=list)


@dataclass(frozen=True)
class PairScores:
    """One pair's scores and the score function's fields of its transcript record."""

    fields: dict[str, Value]
    scores: tuple[float, float]


def shuffled(seed: bytes, number: int, *sizes: int) -> list[list[int]]:
    """Return one permutation per size, drawn in turn from the stream ``shuffle/<number>``.

    Each is the forward Fisher–Yates shuffle of ``[0, …, size−1]`` (spec §5.3); the
    second continues the stream where the first stopped.
    """
    prg = Prg(seed, f"shuffle/{number}")
    orders = []
    for size in sizes:
        order = list(range(size))
        prg.shuffle(order)
        orders.append(order)
    return orders


def unshuffle(order: list[int]) -> npt.NDArray[np.intp]:
    """Return the inverse permutation: answers[inverse] is in the unshuffled order."""
    return np.argsort(np.asarray(order, dtype=np.intp))


def replay_error(index: object, message: str) -> VerificationError:
    """Return the replay failure for pair ``index``."""
    return VerificationError(f"replay: pair {index!r}: {message}")


class WindowScorer(abc.ABC):
    """One score function's window logic. Subclasses fix ``spec``'s type."""

    #: The oracle interface (an :class:`Oracle` subclass) the function queries.
    oracle_type: type = Oracle

    def check_oracle(self, oracle: Oracle, info: OracleInfo) -> None:
        """Raise ``ParameterError`` unless ``oracle`` can answer this function's queries."""
        if not isinstance(oracle, self.oracle_type):
            raise ParameterError(
                f"the oracle ({type(oracle).__name__}) is not a {self.oracle_type.__name__}"
            )

    @abc.abstractmethod
    def check_item(self, item: Item) -> None:
        """Raise a typed error unless ``item`` is one this function scores."""

    @abc.abstractmethod
    def build(
        self, seed: bytes, number: int, indices: list[int], items: list[tuple[Item, Item]]
    ) -> QueryBatch:
        """Return window ``number``'s shuffled queries for the pairs ``indices``."""

    @abc.abstractmethod
    def ask(self, oracle: Oracle, info: OracleInfo, batch: QueryBatch) -> object:
        """Send the batch to the oracle; return its validated answer (in shuffled order)."""

    @abc.abstractmethod
    def score(
        self,
        info: OracleInfo,
        batch: QueryBatch,
        answer: object,
        items: list[tuple[Item, Item]],
    ) -> list[PairScores]:
        """Put the answer back in order and score both versions of every pair."""

    @abc.abstractmethod
    def replay(self, info: OracleInfo, seed: bytes, record: dict[str, Value]) -> list[float]:
        """Recompute a pair record's two scores from the record (raise on a mismatch)."""
