"""The interface every score function's window logic implements (spec §10.2 steps 5–6)."""

from __future__ import annotations

import abc
import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

import numpy as np
import numpy.typing as npt

from twinaudit.protocol.claim.requests import Shape, request_runs
from twinaudit.protocol.encoding import Value, encode
from twinaudit.protocol.errors import OracleError, ParameterError, VerificationError
from twinaudit.protocol.items import ImageItem, Item
from twinaudit.protocol.oracles.base import Oracle, OracleInfo
from twinaudit.protocol.prg import Prg
from twinaudit.verifier.scoring.fit import fit_image


@dataclass(frozen=True)
class QueryBatch:
    """A window's queries, shuffled, with what is needed to put the answers back.

    ``images`` (float32 (N, H, W, C); a list of (H, W, C) queries when they do not
    all have one shape, sent one request per shape by :func:`by_shape`; or None) and
    ``texts`` are sent to the oracle in this order; ``image_order[n]``
    (``text_order[n]``) is the position, in the unshuffled list, of the query sent
    n-th. ``params`` and ``query_digests`` hold one
    entry per pair (what its record lists), ``queries`` the unshuffled image queries
    per version (for the digests).
    """

    images: npt.NDArray[np.float32] | list[npt.NDArray[np.float32]] | None
    texts: list[str]
    image_order: list[int]
    text_order: list[int]
    params: list[Value] = field(default_factory=list)
    queries: list[npt.NDArray[np.float32]] = field(default_factory=list)


@dataclass(frozen=True)
class AgreedScores:
    """A pair record's scores as its outcome reads them, and the scores replay recomputed.

    ``tolerances`` is None where the recorded scores must equal the recomputed ones bit
    for bit (spec §12); for an image-classifier claim of the rule before ``basic-v1``
    it holds each version's tolerance of spec §1.2, within which ``scores`` (the
    recorded ones) were accepted although they may differ from ``recomputed``.
    """

    scores: list[float]
    recomputed: list[float]
    tolerances: list[float] | None = None


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


def in_sent_order(
    queries: list[npt.NDArray[np.float32]], order: list[int]
) -> npt.NDArray[np.float32] | list[npt.NDArray[np.float32]]:
    """Return ``queries`` (unshuffled, one (H, W, C) each) permuted by ``order``.

    One float32 (N, H, W, C) array when every query has one shape, else the list of
    queries (spec §10.2 step 5: one request per shape).
    """
    sent = [queries[n] for n in order]
    if len({query.shape for query in sent}) <= 1:
        return np.ascontiguousarray(np.stack(sent)) if sent else np.empty((0, 1, 1, 1), np.float32)
    return sent


class Rows(Protocol):
    """An answer with one row per image query (what :func:`by_shape` joins)."""

    def __len__(self) -> int:
        """Return the number of rows."""
        ...


RowsT = TypeVar("RowsT", bound=Rows)


def by_shape(
    images: npt.NDArray[np.float32] | list[npt.NDArray[np.float32]],
    ask: Callable[[npt.NDArray[np.float32]], RowsT],
    join: Callable[[list[RowsT]], RowsT],
    take: Callable[[RowsT, npt.NDArray[np.intp]], RowsT],
    per_request: Callable[[Shape], int],
) -> RowsT:
    """Send image queries to the oracle in requests; return the rows in sent order.

    The requests are those of :func:`~twinaudit.protocol.claim.requests.request_runs` (spec
    §10.2 step 5): one shape's queries in their sent order, at most
    ``per_request(shape)`` of them, the shapes in the order they first occur; the
    answers' rows are put back in sent order (``join`` concatenates answers, ``take``
    selects rows). Each request must be answered with one row per query, or the
    oracle's answer is invalid.
    """
    shapes = [_shape(image) for image in images]
    runs = request_runs(shapes, per_request)
    if len(runs) == 1 and isinstance(images, np.ndarray):
        return ask(np.ascontiguousarray(images))  # one request: the answer is checked whole
    parts = []
    for run in runs:
        if isinstance(images, np.ndarray):
            request = np.ascontiguousarray(images[run[0] : run[-1] + 1])
        else:
            request = np.ascontiguousarray(np.stack([images[n] for n in run]))
        part = ask(request)
        if len(part) != len(run):
            raise OracleError(
                "invalid-answer",
                f"the oracle answered {len(part)} rows for a request of {len(run)} images",
            )
        parts.append(part)
    joined = join(parts)
    if isinstance(images, np.ndarray):
        return joined  # one shape: the runs are consecutive, already in sent order
    return take(joined, np.argsort(np.concatenate([np.asarray(r, np.intp) for r in runs])))


def _shape(image: npt.NDArray[np.float32]) -> Shape:
    height, width, channels = (int(d) for d in image.shape)
    return height, width, channels


def unshuffle(order: list[int]) -> npt.NDArray[np.intp]:
    """Return the inverse permutation: answers[inverse] is in the unshuffled order."""
    return np.argsort(np.asarray(order, dtype=np.intp))


def replay_error(index: object, message: str) -> VerificationError:
    """Return the replay failure for pair ``index``."""
    return VerificationError(f"replay: pair {index!r}: {message}")


def query_digests(batch: QueryBatch, j: int) -> list[Value]:
    """Return the SHA-256 digests of pair ``j``'s two unshuffled image queries."""
    return [hashlib.sha256(q.tobytes()).digest() for q in batch.queries[2 * j : 2 * j + 2]]


def image_shape_value(item: ImageItem) -> list[Value]:
    """Return an image's (H, W, C) as a record's ``shape`` field."""
    return [int(d) for d in item.pixels.shape]


class ItemChecker(Protocol):
    """What a window scorer needs of its score spec: a check of the items it scores."""

    def check_item(self, item: Any) -> object:
        """Return what the score reads of ``item``, or raise a typed error."""
        ...


SpecT = TypeVar("SpecT", bound=ItemChecker)
AnswerT = TypeVar("AnswerT")


class WindowScorer(abc.ABC, Generic[SpecT, AnswerT]):
    """One score function's window logic, for a spec of type ``SpecT``.

    A subclass builds the queries (:meth:`build`), sends them (:meth:`query`, whose
    answer must be an :attr:`answer_type`, then :meth:`validate`), puts the answer
    back in the unshuffled order (:meth:`in_order`), scores each pair from it
    (:meth:`score_pair`), and recomputes a pair's scores from its record
    (:meth:`replay`). This class holds the steps common to every function.
    """

    #: The oracle interface (an :class:`Oracle` subclass) the function queries.
    oracle_type: type = Oracle
    #: The answer type the oracle's query method returns (every subclass sets it).
    answer_type: type[AnswerT]

    def __init__(self, spec: SpecT, fit: tuple[int, int, int] | None = None) -> None:
        """Score with ``spec``; ``fit`` is the shape image queries are fitted to, if any.

        A claim whose map carries ``input_fit`` fits every version's image to the
        oracle's declared input shape before its queries are made (§10.2 step 5).
        """
        self.spec = spec
        self.fit = fit

    def fitted(self, image: ImageItem) -> ImageItem:
        """Return ``image`` fitted to :attr:`fit` (rule ``area``), or as it is without one."""
        if self.fit is None:
            return image
        return ImageItem(fit_image(image.pixels, self.fit), image.label)

    def query_side(self, record: dict[str, Value]) -> tuple[int, int] | None:
        """Return the (H, W) a pair record's queries have when fitted, else None."""
        return None if self.fit is None else (self.fit[0], self.fit[1])

    def check_oracle(self, oracle: Oracle, info: OracleInfo) -> None:
        """Raise ``ParameterError`` unless ``oracle`` can answer this function's queries."""
        if not isinstance(oracle, self.oracle_type):
            raise ParameterError(
                f"the oracle ({type(oracle).__name__}) is not a {self.oracle_type.__name__}"
            )

    def check_item(self, item: Item) -> None:
        """Raise a typed error unless ``item`` is one this function scores."""
        self.spec.check_item(item)

    @abc.abstractmethod
    def build(
        self, seed: bytes, number: int, indices: list[int], items: list[tuple[Item, Item]]
    ) -> QueryBatch:
        """Return window ``number``'s shuffled queries for the pairs ``indices``."""

    def ask(self, oracle: Oracle, info: OracleInfo, batch: QueryBatch) -> object:
        """Send the batch to the oracle; return its validated answer (in shuffled order)."""
        assert isinstance(oracle, self.oracle_type)
        answer = self.query(oracle, batch)
        if not isinstance(answer, self.answer_type):
            raise OracleError(
                "invalid-answer",
                f"the oracle answered a {type(answer).__name__}, not a {self.answer_type.__name__}",
            )
        return self.validate(info, batch, answer)

    @abc.abstractmethod
    def query(self, oracle: Any, batch: QueryBatch) -> object:
        """Send the batch to ``oracle`` (an :attr:`oracle_type`); return its raw answer."""

    @abc.abstractmethod
    def validate(self, info: OracleInfo, batch: QueryBatch, answer: AnswerT) -> AnswerT:
        """Return ``answer`` if it answers every query of ``batch``, else raise."""

    def score(
        self,
        info: OracleInfo,
        batch: QueryBatch,
        answer: object,
        items: list[tuple[Item, Item]],
    ) -> list[PairScores]:
        """Put the answer back in order and score both versions of every pair."""
        assert isinstance(answer, self.answer_type)
        ordered = self.in_order(batch, answer)
        results = []
        for j, pair in enumerate(items):
            fields, scores = self.score_pair(info, batch, ordered, j, pair)
            fields["scores"] = list[Value](scores)
            results.append(PairScores(fields, (scores[0], scores[1])))
        return results

    @abc.abstractmethod
    def in_order(self, batch: QueryBatch, answer: AnswerT) -> AnswerT:
        """Return the (validated, shuffled) answer with its rows in the unshuffled order."""

    @abc.abstractmethod
    def score_pair(
        self, info: OracleInfo, batch: QueryBatch, answer: AnswerT, j: int, pair: tuple[Item, Item]
    ) -> tuple[dict[str, Value], list[float]]:
        """Score pair ``j`` of the window; return its record fields (but ``scores``) and scores."""

    def item_fields(self, batch: QueryBatch, j: int, pair: tuple[Item, Item]) -> dict[str, Value]:
        """Return pair ``j``'s record fields that its items and the PRG fix, not the answers.

        The image functions' ``label``, ``shape``, ``params`` and ``query_digests`` (those
        the function records, spec §12); none for a function that records none. A claim
        records them, and a check with the openings (§12.1 steps 3–4) recomputes them.
        """
        return {}

    @abc.abstractmethod
    def replay(self, info: OracleInfo, seed: bytes, record: dict[str, Value]) -> list[float]:
        """Recompute a pair record's two scores from the record (raise on a mismatch)."""

    def agreed_scores(
        self, info: OracleInfo, seed: bytes, record: dict[str, Value]
    ) -> AgreedScores:
        """Check a pair record's scores against the recomputed ones; return the outcome's.

        Spec §12: the recorded scores must be the recomputed ones bit for bit, and the
        outcome follows from them. (The image-classifier's claims of the rule before
        ``basic-v1`` are checked within a tolerance instead, spec §1.2.)
        """
        scores = self.replay(info, seed, record)
        if encode(scores) != encode(record.get("scores")):
            raise replay_error(
                record.get("index"), "recorded scores differ from the recomputed ones"
            )
        return AgreedScores(scores, scores)


#: A window scorer of any score function (what a claim holds).
AnyWindowScorer = WindowScorer[Any, Any]
