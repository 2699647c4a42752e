"""Label-only answers in words, for the opened-pairs table of the HTML report.

A classifier claim under knowledge C3 or C4 reads only the top label of each of a
version's K copies (spec §10.3): its score is a negative (modified) entropy of the
labels' shares, a number such as ``-4e-10`` or ``-39.14`` that means nothing to a
judge. What it stands for is plain: under C3, how many copies of each version got the
committed label (the label of the pair's images); under C4, how far the copies' labels
agree. :func:`label_answers` reads those labels from a replayed transcript's pair
record and :func:`label_words` says them.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from twinaudit.protocol.claim.functions import AnyScoreSpec
from twinaudit.protocol.claim.scores.classifier import LABEL_ONLY, LABELLED, ScoreSpec

#: What the table says above a label-only claim's pairs, by knowledge condition.
LABEL_NOTES: Final[Mapping[str, str]] = {
    "C3": "The model answered with labels only here (knowledge C3). Each version was sent "
    "as {k} perturbed cop{ies}; its score is higher the more copies got the committed label "
    "(the label of the pair's images), and lower the more the other copies agree on one "
    "other label. Each cell says what the copies were labelled; the score the test "
    "compared is in small print. {rounding}",
    "C4": "The model answered with labels only here (knowledge C4, no committed label). "
    "Each version was sent as {k} perturbed copies; its score is higher the more their "
    "labels agree. Each cell says what the copies were labelled; the score the test "
    "compared is in small print. {rounding}",
}
#: Why two versions whose labels read alike can still have a decided outcome.
ROUNDING: Final = (
    "Two versions whose cells read alike can get scores that differ in their last binary "
    "digit, from the order in which the score adds its terms (spec 10.3): the test then "
    "counts the pair as decided, not tied."
)


@dataclass(frozen=True)
class LabelAnswers:
    """The top labels a label-only score read for a pair's two versions.

    ``copies`` holds the top label of each copy, version 0's then version 1's, in copy
    order; ``committed`` is the label the score compares them with (C3), or None (C4);
    ``knowledge`` is the claim's condition.
    """

    copies: tuple[tuple[int, ...], tuple[int, ...]]
    committed: int | None
    knowledge: str


def label_only_knowledge(score: AnyScoreSpec) -> str | None:
    """Return the knowledge condition of a label-only classifier score, else None."""
    if isinstance(score, ScoreSpec) and score.knowledge in LABEL_ONLY:
        return score.knowledge
    return None


def top_label(answer: Any) -> int:
    """Return the label an answer gives: itself, or a vector's largest entry (lowest index).

    This is how a label-only score reads an answer (spec §10.3); the answer is one a
    replay has accepted.
    """
    if isinstance(answer, int):
        return answer
    values = [float(v) for v in answer]
    return max(range(len(values)), key=values.__getitem__)  # the first of equal maxima


def label_answers(record: Mapping[str, Any], knowledge: str) -> LabelAnswers:
    """Return the labels of a replayed ``image-classifier`` pair record (C3 or C4)."""
    answers: Sequence[Sequence[Any]] = record["answers"]
    first, second = (tuple(top_label(a) for a in version) for version in answers)
    label = record.get("label")
    committed = int(label) if knowledge in LABELLED and label is not None else None
    return LabelAnswers((first, second), committed, knowledge)


def label_words(labels: Sequence[int], committed: int | None) -> str:
    """Say what one version's copies were labelled, against the committed label if any."""
    k = len(labels)
    if committed is not None:
        if k == 1:
            if labels[0] == committed:
                return f"label {labels[0]}: the committed label"
            return f"label {labels[0]}, not the committed label {committed}"
        hits = sum(1 for label in labels if label == committed)
        return f"the committed label {committed} on {hits} of {k} copies"
    counts = Counter(labels)
    if len(counts) == 1:
        return f"all {k} copies labelled {labels[0]}"
    shares = ", ".join(f"{label} ({n})" for label, n in sorted(counts.items()))
    return f"{k} copies in {len(counts)} labels: {shares}"


def label_note(knowledge: str, k: int) -> str:
    """Return the sentence that says how to read a label-only claim's table."""
    words = LABEL_NOTES[knowledge]
    return words.format(k=k, ies="y" if k == 1 else "ies", rounding=ROUNDING)
