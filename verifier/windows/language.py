"""Windows of the ``language-model`` score (spec §10.5): each version's text, once."""

from __future__ import annotations

import numpy as np

from protocol.encoding import Value
from protocol.errors import OracleError, TwinauditError
from protocol.items import Item, TextItem
from verifier.oracles.base import Oracle, OracleInfo
from verifier.oracles.language import F64Vector, LanguageModelOracle, LogprobAnswer
from verifier.scoring.language import LanguageSpec, score

from .base import PairScores, QueryBatch, WindowScorer, replay_error, shuffled


class LanguageWindows(WindowScorer):
    """The 2w texts of a window, shuffled; mean token log-probability."""

    oracle_type = LanguageModelOracle

    def __init__(self, spec: LanguageSpec) -> None:
        """Score with ``spec``."""
        self.spec = spec

    def check_item(self, item: Item) -> None:
        """Text items only."""
        self.spec.check_item(item)

    def build(
        self, seed: bytes, number: int, indices: list[int], items: list[tuple[Item, Item]]
    ) -> QueryBatch:
        """Both versions' texts (pair order, version 0 then 1), shuffled together."""
        texts = []
        for pair in items:
            for item in pair:
                assert isinstance(item, TextItem)
                texts.append(item.text)
        (order,) = shuffled(seed, number, len(texts))
        return QueryBatch(None, [texts[n] for n in order], [], order)

    def ask(self, oracle: Oracle, info: OracleInfo, batch: QueryBatch) -> object:
        """Ask for the texts' token log-probabilities; validate the answer."""
        assert isinstance(oracle, LanguageModelOracle)
        answer = oracle.token_logprobs(list(batch.texts))
        if not isinstance(answer, LogprobAnswer):
            raise OracleError("invalid-answer", "token_logprobs did not return a LogprobAnswer")
        return answer.validate(len(batch.texts))

    def score(
        self,
        info: OracleInfo,
        batch: QueryBatch,
        answer: object,
        items: list[tuple[Item, Item]],
    ) -> list[PairScores]:
        """Score each version by its mean token log-probability (§10.5)."""
        assert isinstance(answer, LogprobAnswer)
        ordered: list[F64Vector] = [np.zeros(0)] * len(batch.text_order)
        for sent, position in enumerate(batch.text_order):
            ordered[position] = answer.logprobs[sent]
        results = []
        for j in range(len(items)):
            pair = LogprobAnswer((ordered[2 * j], ordered[2 * j + 1]))
            scores = [score(values) for values in pair.logprobs]
            fields: dict[str, Value] = {
                "answers": pair.to_value(),
                "scores": list[Value](scores),
            }
            results.append(PairScores(fields, (scores[0], scores[1])))
        return results

    def replay(self, info: OracleInfo, seed: bytes, record: dict[str, Value]) -> list[float]:
        """Recompute both scores from the recorded log-probabilities."""
        try:
            answer = LogprobAnswer.from_value(record.get("answers"), 2)
        except TwinauditError as exc:
            raise replay_error(record.get("index"), f"recorded answers: {exc}") from None
        return [score(values) for values in answer.logprobs]
