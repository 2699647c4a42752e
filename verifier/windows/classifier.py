"""Windows of the ``image-classifier`` score (spec §10.3): K perturbed copies per version."""

from __future__ import annotations

import hashlib

import numpy as np

from protocol.encoding import Value, encode
from protocol.errors import InputError
from protocol.items import ImageItem, Item
from protocol.prg import Prg
from verifier.oracles.base import ClassifierOracle, ClassifyAnswer, Oracle, OracleInfo
from verifier.scoring.augment import draw_params, stream_label
from verifier.scoring.classifier import ScoreSpec, make_queries, score

from .base import PairScores, QueryBatch, WindowScorer, replay_error, shuffled, unshuffle


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


def check_params(record: dict[str, Value], seed: bytes, family: str, k: int, params: Value) -> None:
    """Check a record's perturbation parameters are the ones the PRG draws (both versions)."""
    index = record.get("index")
    if not isinstance(index, int) or not isinstance(params, list) or len(params) != 2:
        raise replay_error(index, "malformed pair record")
    height, width = image_shape(record)
    for version in (0, 1):
        expected = draw_params(family, Prg(seed, stream_label(index, version)), height, width, k)
        if encode(expected) != encode(params[version]):
            raise replay_error(index, "augmentation parameters are not the PRG's")


class ClassifierWindows(WindowScorer):
    """K copies per version, shuffled across the window; negative (modified) entropy."""

    oracle_type = ClassifierOracle

    def __init__(self, spec: ScoreSpec) -> None:
        """Score with ``spec``."""
        self.spec = spec

    def check_item(self, item: Item) -> None:
        """Image items only; C1/C3 need a committed label."""
        if not isinstance(item, ImageItem):
            raise InputError("the image-classifier score needs image items")
        self.spec.check_item(item)

    def build(
        self, seed: bytes, number: int, indices: list[int], items: list[tuple[Item, Item]]
    ) -> QueryBatch:
        """Every version's K copies (pair order, version 0 then 1), shuffled together."""
        queries = []
        params: list[Value] = []
        for index, pair in zip(indices, items, strict=True):
            per_version: list[Value] = []
            for version, item in enumerate(pair):
                assert isinstance(item, ImageItem)
                drawn, images = make_queries(
                    self.spec, item, Prg(seed, stream_label(index, version))
                )
                per_version.append(list(drawn))
                queries.append(images)
            params.append(per_version)
        flat = np.concatenate(queries, axis=0)
        (order,) = shuffled(seed, number, flat.shape[0])
        batch = np.ascontiguousarray(flat[order])
        return QueryBatch(batch, [], order, [], params, queries)

    def ask(self, oracle: Oracle, info: OracleInfo, batch: QueryBatch) -> object:
        """Classify the batch; validate the answer's shape and values."""
        assert isinstance(oracle, ClassifierOracle)
        assert batch.images is not None
        answer = oracle.classify(np.ascontiguousarray(batch.images))
        return answer.validate(len(batch.image_order), info.n_classes)

    def score(
        self,
        info: OracleInfo,
        batch: QueryBatch,
        answer: object,
        items: list[tuple[Item, Item]],
    ) -> list[PairScores]:
        """Average each version's K answers and score them (§10.3)."""
        assert isinstance(answer, ClassifyAnswer)
        spec, k = self.spec, self.spec.k
        rows = answer.probabilities if answer.probabilities is not None else answer.labels
        assert rows is not None
        unshuffled = rows[unshuffle(batch.image_order)]
        results = []
        for j, pair in enumerate(items):
            answers: list[Value] = []
            scores: list[float] = []
            for version, item in enumerate(pair):
                assert isinstance(item, ImageItem)
                block = unshuffled[(2 * j + version) * k : (2 * j + version + 1) * k]
                part = (
                    ClassifyAnswer(probabilities=block.astype(np.float64))
                    if answer.probabilities is not None
                    else ClassifyAnswer(labels=block.astype(np.int64))
                )
                label = spec.check_item(item)
                scores.append(score(spec, part, n_classes=info.n_classes, label=label))
                answers.append(part.to_value())
            first = pair[0]
            assert isinstance(first, ImageItem)
            digests: list[Value] = [
                hashlib.sha256(q.tobytes()).digest() for q in batch.queries[2 * j : 2 * j + 2]
            ]
            fields: dict[str, Value] = {
                "label": first.label,
                "shape": [int(d) for d in first.pixels.shape],
                "params": batch.params[j],
                "query_digests": digests,
                "answers": answers,
                "scores": list[Value](scores),
            }
            results.append(PairScores(fields, (scores[0], scores[1])))
        return results

    def replay(self, info: OracleInfo, seed: bytes, record: dict[str, Value]) -> list[float]:
        """Check the parameters and recompute both scores from the recorded answers."""
        spec = self.spec
        answers, label = record.get("answers"), record.get("label")
        if not isinstance(answers, list) or len(answers) != 2:
            raise replay_error(record.get("index"), "malformed pair record")
        check_params(record, seed, spec.perturbation, spec.k, record.get("params"))
        return [
            score(
                spec,
                ClassifyAnswer.from_value(answers[version], info.classify_output),
                n_classes=info.n_classes,
                label=label if spec.uses_label and isinstance(label, int) else None,
            )
            for version in (0, 1)
        ]
