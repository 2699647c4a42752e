"""Windows of K perturbed copies per version: ``image-classifier`` and ``image-encoder``.

Both functions draw each version's K copies from its stream ``augment/<i>/<v>``, send
the 2wK copies of a window shuffled together, give every version the K answers of its
own copies, and record the drawn parameters, the image shape and the digests of the
queries; replay checks that the recorded parameters are the ones the PRG draws.
:class:`CopiesWindows` holds that part; a subclass draws the copies
(:meth:`~CopiesWindows.draw`) and scores them.
"""

from __future__ import annotations

import abc
from typing import Any, Protocol, TypeVar

import numpy as np
import numpy.typing as npt

from twinaudit.protocol.encoding import Value, encode
from twinaudit.protocol.items import ImageItem, Item
from twinaudit.protocol.prg import Prg
from twinaudit.verifier.scoring.augment import draw_params, stream_label

from .base import (
    ItemChecker,
    QueryBatch,
    WindowScorer,
    image_shape_value,
    in_sent_order,
    query_digests,
    replay_error,
    shuffled,
)


class CopiesSpec(ItemChecker, Protocol):
    """A score spec that asks for K perturbed copies of each version."""

    @property
    def k(self) -> int:
        """Copies per version."""
        ...

    @property
    def perturbation(self) -> str:
        """The perturbation family the copies are drawn from."""
        ...


SpecT = TypeVar("SpecT", bound=CopiesSpec)
AnswerT = TypeVar("AnswerT")


def image_shape(record: dict[str, Value]) -> tuple[int, int]:
    """Return (H, W) of a pair record's ``shape`` field, or raise a replay error."""
    shape = record.get("shape")
    if not (
        isinstance(shape, list)
        and len(shape) == 3
        and all(isinstance(d, int) and not isinstance(d, bool) for d in shape)
    ):
        raise replay_error(record.get("index"), "malformed image shape")
    return int(shape[0]), int(shape[1])  # type: ignore[arg-type]


def check_params(
    record: dict[str, Value],
    seed: bytes,
    family: str,
    k: int,
    params: Value,
    *,
    fit: tuple[int, int] | None = None,
) -> None:
    """Check a record's perturbation parameters are the ones the PRG draws (both versions).

    The copies are drawn for the record's image shape, or for ``fit`` (H, W) where the
    claim fits its queries to the model's input (§10.2 step 5).
    """
    index = record.get("index")
    if not isinstance(index, int) or not isinstance(params, list) or len(params) != 2:
        raise replay_error(index, "malformed pair record")
    height, width = image_shape(record)
    if fit is not None:
        height, width = fit
    for version in (0, 1):
        expected = draw_params(family, Prg(seed, stream_label(index, version)), height, width, k)
        if encode(expected) != encode(params[version]):
            raise replay_error(index, "augmentation parameters are not the PRG's")


class CopiesWindows(WindowScorer[SpecT, AnswerT]):
    """K copies per version (``spec.k``, ``spec.perturbation``), shuffled across the window."""

    @abc.abstractmethod
    def draw(self, item: Item, prg: Prg) -> tuple[list[dict[str, Value]], npt.NDArray[np.float32]]:
        """Draw one version's K copies from ``prg``; return their parameters and images."""

    def build(
        self, seed: bytes, number: int, indices: list[int], items: list[tuple[Item, Item]]
    ) -> QueryBatch:
        """Every version's K copies (pair order, version 0 then 1), shuffled together."""
        queries = []
        params: list[Value] = []
        for index, pair in zip(indices, items, strict=True):
            per_version: list[Value] = []
            for version, item in enumerate(pair):
                image = self.fitted(item) if isinstance(item, ImageItem) else item
                drawn, images = self.draw(image, Prg(seed, stream_label(index, version)))
                per_version.append(list(drawn))
                queries.append(images)
            params.append(per_version)
        singles = [copy for version_copies in queries for copy in version_copies]
        (order,) = shuffled(seed, number, len(singles))
        return QueryBatch(in_sent_order(singles, order), [], order, [], params, queries)

    def rows(self, rows: npt.NDArray[Any], j: int, version: int) -> npt.NDArray[Any]:
        """Return the K unshuffled answer rows of pair ``j``'s ``version``."""
        k = self.spec.k
        return rows[(2 * j + version) * k : (2 * j + version + 1) * k]

    def copy_fields(self, batch: QueryBatch, j: int, first: ImageItem) -> dict[str, Value]:
        """Return pair ``j``'s ``shape``, ``params`` and ``query_digests`` record fields."""
        return {
            "shape": image_shape_value(first),
            "params": batch.params[j],
            "query_digests": query_digests(batch, j),
        }

    def recorded_answers(self, seed: bytes, record: dict[str, Value]) -> list[Value]:
        """Check a record's parameters against the PRG; return its two recorded answers."""
        answers = record.get("answers")
        if not isinstance(answers, list) or len(answers) != 2:
            raise replay_error(record.get("index"), "malformed pair record")
        check_params(
            record,
            seed,
            self.spec.perturbation,
            self.spec.k,
            record.get("params"),
            fit=self.query_side(record),
        )
        return answers
