"""Knowledge words: a classifier claim may leave its condition to the oracle (spec §10.1).

Instead of one of the conditions C1–C4 (the table of
:mod:`twinaudit.protocol.claim.scores.classifier`, spec §10.3) a claim's ``knowledge``
field may hold one of two words, which the verifier resolves when the claim starts,
from the ``classify_output`` of the oracle's Describe answer:

============  =================  =========
word          oracle answers     condition
============  =================  =========
labelled      probabilities      C3
labelled      label              C3
unlabelled    probabilities      C4
unlabelled    label              C4
============  =================  =========

That is the condition that detected most often with the committed labels
(``labelled``) or without them (``unlabelled``), among those the oracle supports:
in both cases the top label (from the answer's largest probability when the oracle
gives probabilities), which counts a pair only when the model answers its twins
differently, and those pairs carry the signal, where the confidence a model has in
two twins it answers alike is mostly noise. With labels, C3 detected 5/5 on the
regime ladder against 3/5 for C1 on the same models and claims; without them, C4 with
32 shifted, flipped and dithered copies a version (one copy gives every version the
same score, so C4 needs copies that differ) detected 4/5 at rung (a) and 3/5 at rung
(b) where C2 from probabilities detected 3/5 and 1/5 (``docs/results.md``). C1 and C2
stay available by name. Only the resolved condition enters the claim map, so
transcripts, verdicts and replay never see a word, and
:class:`~twinaudit.protocol.claim.scores.classifier.ScoreSpec` holds C1–C4 only.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from twinaudit.protocol.errors import ParameterError

from .classifier import KNOWLEDGE_CONDITIONS, PROBABILITY_CONDITIONS, ScoreSpec
from .oracle_view import OracleDescription

#: The words, each with its condition for an oracle answering probabilities and for one
#: answering labels only.
KNOWLEDGE_WORDS: Final[Mapping[str, tuple[str, str]]] = {
    "labelled": ("C3", "C3"),
    "unlabelled": ("C4", "C4"),
}
#: Everything a claim's ``knowledge`` field may hold.
KNOWLEDGE_CHOICES: Final = (*KNOWLEDGE_CONDITIONS, *KNOWLEDGE_WORDS)


def resolve_knowledge(knowledge: str, info: OracleDescription) -> str:
    """Return the condition ``knowledge`` names against an oracle described by ``info``.

    A condition C1–C4 is returned as it is (whether the oracle can serve it is
    :meth:`ScoreSpec.check_oracle`'s question); a word resolves by the table of the
    module docstring, for an oracle that offers ``classify``.

    Raises:
        ParameterError: ``knowledge`` is neither a condition nor a word, or the oracle
            does not offer ``classify``.

    """
    if knowledge in KNOWLEDGE_CONDITIONS:
        return knowledge
    if knowledge not in KNOWLEDGE_WORDS:
        raise ParameterError(
            f"unknown knowledge condition {knowledge!r}; known: {KNOWLEDGE_CHOICES}"
        )
    info.check_offers("classify")
    with_probabilities, with_labels = KNOWLEDGE_WORDS[knowledge]
    return with_probabilities if info.classify_output == "probabilities" else with_labels


@dataclass(frozen=True)
class PendingScoreSpec:
    """An image-classifier score whose knowledge condition is a word, until the claim starts.

    ``template`` is the score with the word's condition for an oracle answering
    probabilities, so that every other field is validated when the claim arrives;
    :meth:`resolve` replaces its condition by the one the oracle supports.
    """

    word: str
    template: ScoreSpec

    def __post_init__(self) -> None:
        """Check the word and that the template carries its probabilities condition."""
        if self.word not in KNOWLEDGE_WORDS:
            raise ParameterError(
                f"unknown knowledge word {self.word!r}; known: {tuple(KNOWLEDGE_WORDS)}"
            )
        if self.template.knowledge != KNOWLEDGE_WORDS[self.word][0]:
            raise ParameterError(
                f"the template of {self.word!r} must have condition {KNOWLEDGE_WORDS[self.word][0]}"
            )

    @property
    def function(self) -> str:
        """The score function's claim name (``image-classifier``)."""
        return self.template.function

    @property
    def item_kind(self) -> str:
        """The item kind the score reads."""
        return self.template.item_kind

    @property
    def knowledge(self) -> str:
        """The knowledge field as asked: the word."""
        return self.word

    @property
    def k(self) -> int:
        """Copies per version."""
        return self.template.k

    @property
    def perturbation(self) -> str:
        """The perturbation family of the copies."""
        return self.template.perturbation

    @property
    def queries_per_version(self) -> int:
        """Oracle queries per version (K)."""
        return self.template.k

    def to_fields(self) -> dict[str, int | str | float]:
        """Return the fields of the claim's ``ScoreSpec`` message, the word as ``knowledge``."""
        return {**self.template.to_fields(), "knowledge": self.word}

    def resolve(self, info: OracleDescription) -> ScoreSpec:
        """Return the score with the condition the word names for this oracle.

        A tie margin is kept where the condition reads probabilities (C1, C2) and dropped
        where it reads labels (spec §10.3): there it has nothing to separate.
        """
        knowledge = resolve_knowledge(self.word, info)
        margin = self.template.margin if knowledge in PROBABILITY_CONDITIONS else 0.0
        return dataclasses.replace(self.template, knowledge=knowledge, margin=margin)
