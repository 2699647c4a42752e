"""Windows of the ``language-model`` score (spec §10.5): each version's text, once."""

from __future__ import annotations

from typing import Any

from twinaudit.protocol.encoding import Value
from twinaudit.protocol.errors import TwinauditError
from twinaudit.protocol.items import Item, TextItem
from twinaudit.protocol.oracles.base import OracleInfo
from twinaudit.protocol.oracles.language import LanguageModelOracle, LogprobAnswer
from twinaudit.verifier.scoring.language import LanguageSpec, score

from .base import QueryBatch, WindowScorer, replay_error, shuffled, unshuffle


class LanguageWindows(WindowScorer[LanguageSpec, LogprobAnswer]):
    """The 2w texts of a window, shuffled; mean token log-probability."""

    oracle_type = LanguageModelOracle
    answer_type = LogprobAnswer

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

    def query(self, oracle: Any, batch: QueryBatch) -> object:
        """Ask for the texts' token log-probabilities."""
        return oracle.token_logprobs(list(batch.texts))

    def validate(self, info: OracleInfo, batch: QueryBatch, answer: LogprobAnswer) -> LogprobAnswer:
        """Check one vector of finite log-probabilities per text."""
        return answer.validate(len(batch.texts))

    def in_order(self, batch: QueryBatch, answer: LogprobAnswer) -> LogprobAnswer:
        """Return the texts' log-probabilities in the unshuffled order."""
        return LogprobAnswer(tuple(answer.logprobs[n] for n in unshuffle(batch.text_order)))

    def score_pair(
        self,
        info: OracleInfo,
        batch: QueryBatch,
        answer: LogprobAnswer,
        j: int,
        pair: tuple[Item, Item],
    ) -> tuple[dict[str, Value], list[float]]:
        """Score each version by its mean token log-probability (§10.5)."""
        versions = LogprobAnswer(answer.logprobs[2 * j : 2 * j + 2])
        return {"answers": versions.to_value()}, [score(v) for v in versions.logprobs]

    def replay(self, info: OracleInfo, seed: bytes, record: dict[str, Value]) -> list[float]:
        """Recompute both scores from the recorded log-probabilities."""
        try:
            answer = LogprobAnswer.from_value(record.get("answers"), 2)
        except TwinauditError as exc:
            raise replay_error(record.get("index"), f"recorded answers: {exc}") from None
        return [score(values) for values in answer.logprobs]
