"""The image-classifier score's claim parameters (spec §10.3; paper appendix C).

A claim's score map ``{"function": "image-classifier", "k", "perturbation",
"knowledge"}`` (and ``statistic``, ``margin`` when they are not the default): K
perturbed copies per version drawn from one of the perturbation families, and the
knowledge condition — what the oracle reveals and whether the committed label is used:

====  ====================  ==================  ======================================
cond  oracle output used    label               score of the averaged answers ``p``
====  ====================  ==================  ======================================
C1    probability vectors   committed ``y``     negative modified entropy
C2    probability vectors   —                   negative entropy
C3    top labels            committed ``y``     negative modified entropy
C4    top labels            —                   negative entropy
====  ====================  ==================  ======================================

How the answers become a score, in binary64, is the verifier's
(:mod:`twinaudit.verifier.scoring.classifier`); this module holds what a claim may ask for.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar, Final

from twinaudit.protocol.encoding import Value
from twinaudit.protocol.errors import ParameterError
from twinaudit.protocol.items import ImageItem

from .oracle_view import OracleDescription
from .perturbations import FAMILIES, MAX_COPIES

#: The score function's claim name.
FUNCTION: Final = "image-classifier"
#: The oracle capability it needs.
CAPABILITY: Final = "classify"
#: The knowledge conditions of the paper's appendix C.
KNOWLEDGE_CONDITIONS: Final = ("C1", "C2", "C3", "C4")
#: Conditions that use the committed label (modified entropy).
LABELLED: Final = frozenset({"C1", "C3"})
#: Conditions that only see the top label.
LABEL_ONLY: Final = frozenset({"C3", "C4"})
#: How a version's K answers become its score: the paper's entropy of the averaged
#: vector (the default, no key in the claim map) or the mean per-copy log-odds.
STATISTICS: Final = ("entropy", "logit")
#: The largest tie margin a score map may carry (a score's scale: the modified entropy
#: of 256 classes is above −7,100, a copy's log-odds within ±1,416).
MAX_MARGIN: Final = 1.0e4
#: Conditions that read probability vectors: the only ones the ``logit`` statistic and a
#: tie margin serve (label-only scores move in steps of a label).
PROBABILITY_CONDITIONS: Final = frozenset({"C1", "C2"})
#: The refusal rule (spec §2.2) of the ``invalid-parameter`` error that refuses C4 with
#: one copy per version (named, or the word ``unlabelled`` asked with K = 1): a client
#: that sent it can change its request to copies that differ, having read this rule.
C4_ONE_COPY_RULE: Final = "c4-one-copy"


@dataclass(frozen=True, kw_only=True)
class ScoreSpec:
    """The score-function part of a claim: ``{"function", "k", "perturbation", "knowledge"}``.

    ``k`` (copies per version) is in ``1..MAX_COPIES``; ``perturbation`` one of
    :data:`~twinaudit.protocol.claim.scores.perturbations.FAMILIES`; ``knowledge`` one of C1–C4;
    ``statistic`` one of :data:`STATISTICS` (``logit`` for C1 and C2 only), in the
    claim map only when it is not the default ``entropy``. ``margin`` is the tie margin
    of spec §7.1 (a float in ``[0, MAX_MARGIN]``, C1 and C2 only): a pair whose two
    scores differ by at most it ties; in the claim map only when it is not 0. Invalid
    values raise :class:`~twinaudit.protocol.errors.ParameterError`.
    """

    function: str = FUNCTION
    k: int
    perturbation: str
    knowledge: str
    statistic: str = "entropy"
    margin: float = 0.0

    #: The item kind this score reads.
    item_kind: ClassVar[str] = "image"
    #: The oracle capability it needs.
    CAPABILITY: ClassVar[str] = CAPABILITY

    def __post_init__(self) -> None:
        """Validate every field."""
        if self.function != FUNCTION:
            raise ParameterError(f"score function {self.function!r} is not {FUNCTION!r}")
        if (
            isinstance(self.k, bool)
            or not isinstance(self.k, int)
            or not (1 <= self.k <= MAX_COPIES)
        ):
            raise ParameterError(f"k must be an integer in 1..{MAX_COPIES}, got {self.k!r}")
        if self.perturbation not in FAMILIES:
            raise ParameterError(f"unknown perturbation {self.perturbation!r}; known: {FAMILIES}")
        if self.knowledge not in KNOWLEDGE_CONDITIONS:
            raise ParameterError(
                f"unknown knowledge condition {self.knowledge!r}; known: {KNOWLEDGE_CONDITIONS}"
            )
        if self.knowledge == "C4" and self.k == 1:
            raise ParameterError(
                "knowledge condition C4 with k = 1 scores every version alike (the "
                "entropy of one label), so every pair would tie: use k >= 2 copies "
                "that perturb"
            ).with_rule(C4_ONE_COPY_RULE)
        if self.statistic not in STATISTICS:
            raise ParameterError(f"unknown statistic {self.statistic!r}; known: {STATISTICS}")
        if self.statistic == "logit" and self.knowledge not in PROBABILITY_CONDITIONS:
            raise ParameterError(
                f"the logit statistic needs probability vectors (C1, C2), not {self.knowledge}"
            )
        if (
            not isinstance(self.margin, float)
            or not math.isfinite(self.margin)
            or not (0.0 <= self.margin <= MAX_MARGIN)
        ):
            raise ParameterError(
                f"the tie margin must be a float in [0, {MAX_MARGIN:g}], got {self.margin!r}"
            )
        if self.margin and self.knowledge not in PROBABILITY_CONDITIONS:
            raise ParameterError(
                f"a tie margin needs probability vectors (C1, C2), not {self.knowledge}"
            )

    @property
    def queries_per_version(self) -> int:
        """Oracle queries per version (K)."""
        return self.k

    @property
    def tie_margin(self) -> float:
        """The tie margin of spec §7.1 (``margin``)."""
        return self.margin

    @property
    def uses_label(self) -> bool:
        """Whether the score needs the committed label (C1, C3)."""
        return self.knowledge in LABELLED

    @property
    def label_only(self) -> bool:
        """Whether only the top label of each answer is used (C3, C4)."""
        return self.knowledge in LABEL_ONLY

    def to_value(self) -> dict[str, Value]:
        """Return the canonical claim map of spec §10.1 (defaults of the options left out)."""
        value: dict[str, Value] = {
            "function": self.function,
            "k": self.k,
            "perturbation": self.perturbation,
            "knowledge": self.knowledge,
        }
        if self.statistic != "entropy":
            value["statistic"] = self.statistic
        if self.margin:
            value["margin"] = self.margin
        return value

    def to_fields(self) -> dict[str, int | str | float]:
        """Return the fields of the claim's ``ScoreSpec`` message (the entropy as "")."""
        return {
            "function": self.function,
            "k": self.k,
            "perturbation": self.perturbation,
            "knowledge": self.knowledge,
            "statistic": "" if self.statistic == "entropy" else self.statistic,
            "margin": self.margin,
        }

    @classmethod
    def from_value(cls, value: object) -> ScoreSpec:
        """Parse a claim map strictly: the four keys; ``statistic``, ``margin`` unless default."""
        keys = {"function", "k", "perturbation", "knowledge"}
        if not isinstance(value, dict) or set(value) - {"statistic", "margin"} != keys:
            raise ParameterError(
                f"a score map has exactly the keys {sorted(keys)}, and 'statistic' and "
                "'margin' when they are not the default"
            )
        if value.get("statistic") == "entropy":
            raise ParameterError("the default statistic 'entropy' is left out of the score map")
        margin = value.get("margin", 0.0)
        if "margin" in value and (not isinstance(margin, float) or margin == 0.0):
            raise ParameterError(
                "a score map's margin is a float above 0 (a margin of 0 is left out)"
            )
        return cls(
            function=value["function"],
            k=value["k"],
            perturbation=value["perturbation"],
            knowledge=value["knowledge"],
            statistic=value.get("statistic", "entropy"),
            margin=margin,
        )

    def check_item(self, item: ImageItem) -> int | None:
        """Return the label the score uses for ``item``; C1/C3 need a committed label."""
        if not isinstance(item, ImageItem):
            raise ParameterError("the image-classifier score scores image items")
        if self.uses_label and item.label is None:
            raise ParameterError(
                f"knowledge condition {self.knowledge} needs committed labels; the item has none"
            )
        return item.label if self.uses_label else None

    def check_oracle(self, info: OracleDescription) -> None:
        """Check the oracle can serve this score: ``classify``; C1/C2 need probabilities."""
        info.check_offers(CAPABILITY)
        if not self.label_only and info.classify_output != "probabilities":
            raise ParameterError(
                f"knowledge condition {self.knowledge} needs probability vectors; "
                f"the oracle answers {info.classify_output!r}"
            )
