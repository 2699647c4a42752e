"""Windows of the ``image-encoder`` score (spec §10.4): K perturbed copies per version."""

from __future__ import annotations

import hashlib

import numpy as np

from protocol.encoding import Value
from protocol.errors import OracleError, TwinauditError
from protocol.items import Item
from protocol.prg import Prg
from verifier.oracles.base import Oracle, OracleInfo
from verifier.oracles.embedding import EmbeddingAnswer, EncoderOracle
from verifier.scoring.augment import stream_label
from verifier.scoring.encoder import EncoderSpec, make_queries, score

from .base import PairScores, QueryBatch, WindowScorer, replay_error, shuffled, unshuffle
from .classifier import check_params


class EncoderWindows(WindowScorer):
    """K copies per version, shuffled across the window; sum of pairwise cosines."""

    oracle_type = EncoderOracle

    def __init__(self, spec: EncoderSpec) -> None:
        """Score with ``spec``."""
        self.spec = spec

    def check_item(self, item: Item) -> None:
        """Image items only."""
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
                image = self.spec.check_item(item)
                drawn, copies = make_queries(
                    self.spec, image, Prg(seed, stream_label(index, version))
                )
                per_version.append(list(drawn))
                queries.append(copies)
            params.append(per_version)
        flat = np.concatenate(queries, axis=0)
        (order,) = shuffled(seed, number, flat.shape[0])
        return QueryBatch(np.ascontiguousarray(flat[order]), [], order, [], params, queries)

    def ask(self, oracle: Oracle, info: OracleInfo, batch: QueryBatch) -> object:
        """Embed the batch; validate the answer."""
        assert isinstance(oracle, EncoderOracle)
        assert batch.images is not None
        answer = oracle.embed_images(np.ascontiguousarray(batch.images))
        if not isinstance(answer, EmbeddingAnswer):
            raise OracleError("invalid-answer", "embed_images did not return an EmbeddingAnswer")
        return answer.validate(len(batch.image_order))

    def score(
        self,
        info: OracleInfo,
        batch: QueryBatch,
        answer: object,
        items: list[tuple[Item, Item]],
    ) -> list[PairScores]:
        """Score each version by the pairwise cosines of its K embeddings (§10.4)."""
        assert isinstance(answer, EmbeddingAnswer)
        k = self.spec.k
        rows = answer.embeddings[unshuffle(batch.image_order)]
        results = []
        for j, pair in enumerate(items):
            answers: list[Value] = []
            scores: list[float] = []
            for version in (0, 1):
                block = EmbeddingAnswer(
                    np.ascontiguousarray(rows[(2 * j + version) * k : (2 * j + version + 1) * k])
                )
                scores.append(score(self.spec, block))
                answers.append(block.to_value())
            first = self.spec.check_item(pair[0])
            digests: list[Value] = [
                hashlib.sha256(q.tobytes()).digest() for q in batch.queries[2 * j : 2 * j + 2]
            ]
            fields: dict[str, Value] = {
                "shape": [int(d) for d in first.pixels.shape],
                "params": batch.params[j],
                "query_digests": digests,
                "answers": answers,
                "scores": list[Value](scores),
            }
            results.append(PairScores(fields, (scores[0], scores[1])))
        return results

    def replay(self, info: OracleInfo, seed: bytes, record: dict[str, Value]) -> list[float]:
        """Check the parameters and recompute both scores from the recorded embeddings."""
        answers = record.get("answers")
        if not isinstance(answers, list) or len(answers) != 2:
            raise replay_error(record.get("index"), "malformed pair record")
        check_params(record, seed, self.spec.perturbation, self.spec.k, record.get("params"))
        try:
            return [
                score(self.spec, EmbeddingAnswer.from_value(answers[v], self.spec.k))
                for v in (0, 1)
            ]
        except TwinauditError as exc:
            raise replay_error(record.get("index"), f"recorded answers: {exc}") from None
