"""Windows of the ``image-encoder`` score (spec §10.4): K perturbed copies per version."""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from twinaudit.protocol.encoding import Value
from twinaudit.protocol.errors import TwinauditError
from twinaudit.protocol.items import Item
from twinaudit.protocol.oracles.base import OracleInfo
from twinaudit.protocol.oracles.embedding import EmbeddingAnswer, EncoderOracle
from twinaudit.protocol.prg import Prg
from twinaudit.verifier.scoring.encoder import EncoderSpec, make_queries, score

from .base import QueryBatch, by_shape, replay_error, unshuffle
from .copies import CopiesWindows


class EncoderWindows(CopiesWindows[EncoderSpec, EmbeddingAnswer]):
    """K copies per version, shuffled across the window; sum of pairwise cosines."""

    oracle_type = EncoderOracle
    answer_type = EmbeddingAnswer

    def draw(self, item: Item, prg: Prg) -> tuple[list[dict[str, Value]], npt.NDArray[np.float32]]:
        """Draw one version's K copies (:func:`.scoring.encoder.make_queries`)."""
        return make_queries(self.spec, self.spec.check_item(item), prg)

    def query(self, oracle: Any, batch: QueryBatch) -> object:
        """Embed the batch."""
        assert batch.images is not None
        return by_shape(
            batch.images,
            oracle.embed_images,
            EmbeddingAnswer.concatenate,
            lambda answer, index: EmbeddingAnswer(answer.embeddings[index]),
            lambda shape: oracle.queries_per_request(shape, "embed-images"),
        )

    def validate(
        self, info: OracleInfo, batch: QueryBatch, answer: EmbeddingAnswer
    ) -> EmbeddingAnswer:
        """Check the answer's shape and values."""
        return answer.validate(len(batch.image_order))

    def in_order(self, batch: QueryBatch, answer: EmbeddingAnswer) -> EmbeddingAnswer:
        """Return the embeddings in the unshuffled order."""
        return EmbeddingAnswer(answer.embeddings[unshuffle(batch.image_order)])

    def score_pair(
        self,
        info: OracleInfo,
        batch: QueryBatch,
        answer: EmbeddingAnswer,
        j: int,
        pair: tuple[Item, Item],
    ) -> tuple[dict[str, Value], list[float]]:
        """Score each version by the pairwise cosines of its K embeddings (§10.4)."""
        answers: list[Value] = []
        scores: list[float] = []
        for version in (0, 1):
            block = EmbeddingAnswer(np.ascontiguousarray(self.rows(answer.embeddings, j, version)))
            scores.append(score(self.spec, block))
            answers.append(block.to_value())
        return {**self.item_fields(batch, j, pair), "answers": answers}, scores

    def item_fields(self, batch: QueryBatch, j: int, pair: tuple[Item, Item]) -> dict[str, Value]:
        """Return the pair's ``shape``, ``params`` and ``query_digests``."""
        return self.copy_fields(batch, j, self.spec.check_item(pair[0]))

    def replay(self, info: OracleInfo, seed: bytes, record: dict[str, Value]) -> list[float]:
        """Check the parameters and recompute both scores from the recorded embeddings."""
        answers = self.recorded_answers(seed, record)
        try:
            return [
                score(self.spec, EmbeddingAnswer.from_value(answers[v], self.spec.k))
                for v in (0, 1)
            ]
        except TwinauditError as exc:
            raise replay_error(record.get("index"), f"recorded answers: {exc}") from None
