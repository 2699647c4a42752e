"""Windows of the ``image-classifier`` score (spec §10.3): K perturbed copies per version.

The copies are drawn here (:func:`~twinaudit.verifier.scoring.augment.draw_copies`) and
the oracle asked; each version's score is the claim protocol's
(:func:`twinaudit.protocol.claim.scores.classifier.score`, where §10.3 is written).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from twinaudit.protocol.claim.scores.classifier import (
    BASIC_ARITHMETIC,
    ScoreSpec,
    legacy_score,
    score,
)
from twinaudit.protocol.encoding import Value
from twinaudit.protocol.errors import InputError
from twinaudit.protocol.items import ImageItem, Item
from twinaudit.protocol.oracles.base import ClassifierOracle, ClassifyAnswer, OracleInfo
from twinaudit.protocol.prg import Prg
from twinaudit.verifier.scoring.augment import draw_copies

from .base import AgreedScores, QueryBatch, by_shape, replay_error, unshuffle
from .copies import CopiesWindows


class ClassifierWindows(CopiesWindows[ScoreSpec, ClassifyAnswer]):
    """K copies per version, shuffled across the window; negative (modified) entropy."""

    oracle_type = ClassifierOracle
    answer_type = ClassifyAnswer

    def check_item(self, item: Item) -> None:
        """Image items only; C1/C3 need a committed label."""
        if not isinstance(item, ImageItem):
            raise InputError("the image-classifier score needs image items")
        self.spec.check_item(item)

    def draw(self, item: Item, prg: Prg) -> tuple[list[dict[str, Value]], npt.NDArray[np.float32]]:
        """Draw one version's K copies from its stream ``augment/<i>/<v>`` (``prg``).

        Returns the copies' parameters and their float32 (K, H, W, C) images in [0, 1].
        """
        assert isinstance(item, ImageItem)
        self.spec.check_item(item)
        return draw_copies(self.spec.perturbation, self.spec.k, item.pixels, prg)

    def query(self, oracle: Any, batch: QueryBatch) -> object:
        """Classify the batch."""
        assert batch.images is not None
        return by_shape(
            batch.images,
            oracle.classify,
            ClassifyAnswer.concatenate,
            _rows,
            lambda shape: oracle.queries_per_request(shape, "classify"),
        )

    def validate(
        self, info: OracleInfo, batch: QueryBatch, answer: ClassifyAnswer
    ) -> ClassifyAnswer:
        """Check the answer's shape and values."""
        return answer.validate(len(batch.image_order), info.n_classes)

    def in_order(self, batch: QueryBatch, answer: ClassifyAnswer) -> ClassifyAnswer:
        """Return the probabilities (or labels) in the unshuffled order."""
        return _rows(answer, unshuffle(batch.image_order))

    def score_pair(
        self,
        info: OracleInfo,
        batch: QueryBatch,
        answer: ClassifyAnswer,
        j: int,
        pair: tuple[Item, Item],
    ) -> tuple[dict[str, Value], list[float]]:
        """Average each version's K answers and score them (§10.3)."""
        spec = self.spec
        answers: list[Value] = []
        scores: list[float] = []
        for version, item in enumerate(pair):
            assert isinstance(item, ImageItem)
            if answer.probabilities is not None:
                part = ClassifyAnswer(
                    probabilities=self.rows(answer.probabilities, j, version).astype(np.float64)
                )
            else:
                assert answer.labels is not None
                part = ClassifyAnswer(labels=self.rows(answer.labels, j, version).astype(np.int64))
            label = spec.check_item(item)
            scores.append(score(spec, part, n_classes=info.n_classes, label=label))
            answers.append(part.to_value())
        return {**self.item_fields(batch, j, pair), "answers": answers}, scores

    def item_fields(self, batch: QueryBatch, j: int, pair: tuple[Item, Item]) -> dict[str, Value]:
        """Return the pair's ``label``, ``shape``, ``params`` and ``query_digests``."""
        first = pair[0]
        assert isinstance(first, ImageItem)
        return {"label": first.label, **self.copy_fields(batch, j, first)}

    def replay(self, info: OracleInfo, seed: bytes, record: dict[str, Value]) -> list[float]:
        """Check the parameters and recompute both scores from the recorded answers."""
        spec = self.spec
        answers, label = self._recorded(seed, record)
        return [
            score(
                spec,
                ClassifyAnswer.from_value(answers[version], info.classify_output),
                n_classes=info.n_classes,
                label=label,
            )
            for version in (0, 1)
        ]

    def agreed_scores(
        self, info: OracleInfo, seed: bytes, record: dict[str, Value]
    ) -> AgreedScores:
        """Spec §12, and for a claim of the rule before ``basic-v1`` the erratum of §1.2.

        Such a claim's recorded scores are accepted within :func:`legacy_score`'s
        tolerance of the scores recomputed with the protocol's logarithms, and the
        outcome follows from the *recorded* scores, so the decision replays exactly.
        """
        if self.spec.arithmetic == BASIC_ARITHMETIC:
            return super().agreed_scores(info, seed, record)
        answers, label = self._recorded(seed, record)
        recorded = record.get("scores")
        index = record.get("index")
        if not isinstance(recorded, list) or len(recorded) != 2:
            raise replay_error(index, "malformed pair record")
        scores: list[float] = []
        recomputed: list[float] = []
        tolerances: list[float] = []
        for version, value in enumerate(recorded):
            again, tolerance = legacy_score(
                self.spec,
                ClassifyAnswer.from_value(answers[version], info.classify_output),
                n_classes=info.n_classes,
                label=label,
            )
            if not isinstance(value, float) or not abs(value - again) <= tolerance:
                raise replay_error(
                    index,
                    f"recorded score {value!r} of version {version} is not within "
                    f"{tolerance:.3g} of the recomputed {again!r} (spec 1.2)",
                )
            scores.append(value)
            recomputed.append(again)
            tolerances.append(tolerance)
        return AgreedScores(scores, recomputed, tolerances)

    def _recorded(self, seed: bytes, record: dict[str, Value]) -> tuple[list[Value], int | None]:
        """Return the record's two checked answers and the label its score uses."""
        answers = self.recorded_answers(seed, record)
        label = record.get("label")
        return answers, label if self.spec.uses_label and isinstance(label, int) else None


def _rows(answer: ClassifyAnswer, index: npt.NDArray[np.intp]) -> ClassifyAnswer:
    """Return the rows ``index`` of an answer (probabilities or labels)."""
    if answer.probabilities is not None:
        return ClassifyAnswer(probabilities=answer.probabilities[index])
    assert answer.labels is not None
    return ClassifyAnswer(labels=answer.labels[index])
