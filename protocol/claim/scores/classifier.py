"""The image-classifier score function, whole (spec §10.3; paper Alg. 3, appendix C).

A claim's score map ``{"function": "image-classifier", "k", "perturbation",
"knowledge"}`` (and ``statistic``, ``margin`` when they are not the default) asks for K
perturbed copies of each version of a pair, drawn from one of the perturbation families
(:mod:`.perturbations`), and names the knowledge condition: what the oracle reveals, and
whether the committed label ``y`` is used. Each version's K answers are averaged in
binary64 to a vector ``p``, which is scored:

====  ====================  ==================  ======================================
cond  oracle output used    label               score of the averaged answers ``p``
====  ====================  ==================  ======================================
C1    probability vectors   committed ``y``     negative modified entropy
C2    probability vectors   —                   negative entropy
C3    top labels            committed ``y``     negative modified entropy
C4    top labels            —                   negative entropy
====  ====================  ==================  ======================================

This module is the one place that table and its arithmetic live: the claim parameters
(:class:`ScoreSpec`) and the score of one version from the oracle's answers to its K
copies (:func:`score`). The verifier's window logic draws the copies and asks the
oracle (``twinaudit.verifier.windows.classifier``, with the draws of
``twinaudit.verifier.scoring.augment``) and calls :func:`score`; the knowledge words a
claim may name instead of a condition resolve to one of these four at claim start
(:mod:`.knowledge`, spec §10.1).

Exact arithmetic, all binary64, sums taken sequentially in index order:

- **Average (C1, C2).** ``acc = 0``; for ``k = 0..K-1``: ``acc = acc + P[k]``
  (elementwise); ``p = acc / K``. Answers are validated
  (:meth:`~twinaudit.protocol.oracles.base.ClassifyAnswer.validate`) and not renormalised.
- **Average (C3, C4).** ``p_c = count_c / K`` where ``count_c`` is the number of
  copies labelled ``c``; every ``p_c = 0`` becomes :data:`LABEL_FLOOR` (1e-5), so
  ``p`` then sums to slightly more than 1, as in the paper. An oracle that answers
  probabilities is reduced to labels by ``argmax`` (lowest index among equal maxima).
- **Negative entropy (C2, C4).** ``Σ_c t_c`` with ``t_c = p_c · ln(p_c)`` and
  ``t_c = 0`` when ``p_c = 0`` (``0·ln 0 = 0``).
- **Negative modified entropy (C1, C3).** ``Σ_c t_c`` with
  ``t_y = (1 − p_y) · ln(max(p_y, ε))`` and, for ``c ≠ y``, ``t_c = p_c · L(p_c)``
  where ``L(q) = log1p(−q)`` (that is ``ln(1 − q)``, accurately) if ``q ≤ 1 − ε``
  and ``L(q) = ln(ε)`` otherwise; ``ε =`` :data:`LOG_EPSILON` ``= 1e-12``. The
  clamp only matters for a (nearly) certain wrong class or a zero probability of
  the true class, where the unclamped value is −∞.

**Statistic** ``logit`` (C1, C2; the claim map's ``"statistic": "logit"``). Instead of
averaging first, every copy is scored on its own and the K copy scores are averaged:
copy ``k`` with probability vector ``P_k`` and label ``y`` scores
``ln(max(P_k[y], τ)) − ln(max(r_k, τ))`` where ``r_k`` is the sum of ``P_k[c]`` over
``c ≠ y`` in class order and ``τ =`` :data:`LOGIT_FLOOR`; the score is
``(Σ_k copy score) / K`` summed in copy order. ``y`` is the committed label (C1) or,
for C2, the class of largest mean probability over the version's K copies (lowest
index among equal maxima). It is the log-odds of the label, which keeps resolving
where the entropy of an averaged vector saturates: the probabilities a memorising
model gives its training items sit within 1e-6 of 1, and there the distance to 1 is
read from the other classes' probabilities, which binary64 holds to full relative
precision, not from ``1 − P_k[y]``. The paper's statistic (above) is ``entropy``, the
default, and its claim map has no ``statistic`` key.

**Tie margin** ``margin`` (C1, C2): a pair whose two scores differ by at most it ties
(spec §7.1, :mod:`twinaudit.protocol.claim.outcome`).

**Arithmetic** ``basic-v1`` (the claim map's ``"arithmetic": "basic-v1"``, which every
claim started since written carries, spec §10.3.1): the logarithms are the protocol's,
:func:`~twinaudit.protocol.basic_log.pln` and
:func:`~twinaudit.protocol.basic_log.pln1m`, built from ``+ − × ÷`` alone, so every
platform computes the same bits; and under C3 and C4 the terms are added in a canonical
order (increasing ``p_c``, the committed label's term last), so two versions whose label
counts have the same signature score the same bits and tie exactly. A claim map without
the key is a claim of the rule before (spec §1.2): its logarithms correctly rounded
(:mod:`twinaudit.protocol.numeric`, which :func:`score` keeps computing for it), and a
replay accepts its recorded scores within :func:`legacy_tolerance` of the value
recomputed with the protocol's logarithms (:func:`legacy_score`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import ClassVar, Final

import numpy as np
import numpy.typing as npt

from twinaudit.protocol.basic_log import pln, pln1m
from twinaudit.protocol.encoding import Value
from twinaudit.protocol.errors import OracleError, ParameterError
from twinaudit.protocol.items import ImageItem
from twinaudit.protocol.numeric import ln, log1p
from twinaudit.protocol.oracles.base import ClassifyAnswer

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
#: What a zero of an averaged one-hot vector becomes (C3, C4).
LABEL_FLOOR: Final = 1e-5
#: Clamp of the logarithms of the modified entropy (see the module docstring).
LOG_EPSILON: Final = 1e-12
#: Floor of both terms of a copy's log-odds (smallest positive normal binary64).
LOGIT_FLOOR: Final = 2.2250738585072014e-308

#: The arithmetic of spec §10.3.1, named in the score map of every claim started since.
BASIC_ARITHMETIC: Final = "basic-v1"
#: The rule of the claims before it (no ``arithmetic`` key in their score map, spec §1.2).
LEGACY_ARITHMETIC: Final = ""
#: The arithmetic values a :class:`ScoreSpec` holds.
ARITHMETICS: Final = (LEGACY_ARITHMETIC, BASIC_ARITHMETIC)
#: A recorded score of the rule before is accepted within this share of its terms'
#: magnitude of the recomputed one, plus :data:`LEGACY_FLOOR` (spec §1.2).
LEGACY_SCALE: Final = 2.0**-40
#: The absolute part of the tolerance (far below every term a normal float can hold).
LEGACY_FLOOR: Final = 2.0**-1000

_ONE_MINUS_EPSILON: Final = 1.0 - LOG_EPSILON


@dataclass(frozen=True)
class _Logs:
    """The two logarithms a score is computed with: ``ln x`` and ``ln(1 − q)``."""

    ln: Callable[[float], float]
    ln1m: Callable[[float], float]


#: The rule before ``basic-v1``: correctly rounded (§1.2), as the reference computes it.
_CORRECTLY_ROUNDED: Final = _Logs(ln, lambda q: log1p(-q))
#: The protocol's logarithms (§10.3.1).
_BASIC: Final = _Logs(pln, pln1m)

F64Vector = npt.NDArray[np.float64]


@dataclass(frozen=True, kw_only=True)
class ScoreSpec:
    """The score-function part of a claim: ``{"function", "k", "perturbation", "knowledge"}``.

    ``k`` (copies per version) is in ``1..MAX_COPIES``; ``perturbation`` one of
    :data:`~twinaudit.protocol.claim.scores.perturbations.FAMILIES`; ``knowledge`` one of C1–C4;
    ``statistic`` one of :data:`STATISTICS` (``logit`` for C1 and C2 only), in the
    claim map only when it is not the default ``entropy``. ``margin`` is the tie margin
    of spec §7.1 (a float in ``[0, MAX_MARGIN]``, C1 and C2 only): a pair whose two
    scores differ by at most it ties; in the claim map only when it is not 0.
    ``arithmetic`` is :data:`BASIC_ARITHMETIC` (spec §10.3.1, the claim map's
    ``"arithmetic": "basic-v1"``), or :data:`LEGACY_ARITHMETIC` for a claim map of the rule
    before, which has no such key (§1.2). Invalid values raise
    :class:`~twinaudit.protocol.errors.ParameterError`.
    """

    function: str = FUNCTION
    k: int
    perturbation: str
    knowledge: str
    statistic: str = "entropy"
    margin: float = 0.0
    arithmetic: str = BASIC_ARITHMETIC

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
        if self.arithmetic not in ARITHMETICS:
            raise ParameterError(
                f"unknown arithmetic {self.arithmetic!r}; known: {BASIC_ARITHMETIC!r}"
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
        if self.arithmetic:
            value["arithmetic"] = self.arithmetic
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
        """Parse a claim map strictly: the four keys; ``statistic``, ``margin`` unless default.

        ``arithmetic`` is ``basic-v1`` where present; a map without it is a claim of the
        rule before (spec §1.2).
        """
        keys = {"function", "k", "perturbation", "knowledge"}
        optional = {"statistic", "margin", "arithmetic"}
        if not isinstance(value, dict) or set(value) - optional != keys:
            raise ParameterError(
                f"a score map has exactly the keys {sorted(keys)}, and 'statistic', "
                "'margin' and 'arithmetic' when they are not the default"
            )
        if "arithmetic" in value and value["arithmetic"] != BASIC_ARITHMETIC:
            raise ParameterError(f"a score map's arithmetic is {BASIC_ARITHMETIC!r}")
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
            arithmetic=value.get("arithmetic", LEGACY_ARITHMETIC),
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


def mean_output(spec: ScoreSpec, answer: ClassifyAnswer, n_classes: int) -> F64Vector:
    """Validate the K answers of one version and average them to ``p`` (float64, C).

    Raises ``OracleError("invalid-answer")`` for a malformed answer, or when C1/C2
    receive labels only.
    """
    answer.validate(spec.k, n_classes)
    if spec.label_only:
        if answer.labels is not None:
            labels = answer.labels
        else:
            assert answer.probabilities is not None
            labels = np.argmax(answer.probabilities, axis=1).astype(np.int64)
        counts = np.bincount(labels, minlength=n_classes)
        p: F64Vector = counts.astype(np.float64) / float(spec.k)
        p[counts == 0] = LABEL_FLOOR
        return p
    if answer.probabilities is None:
        raise OracleError(
            "invalid-answer",
            f"knowledge condition {spec.knowledge} needs probability vectors, got labels",
        )
    acc = np.zeros(n_classes, dtype=np.float64)
    for row in answer.probabilities:
        acc = acc + row
    mean: F64Vector = acc / float(spec.k)
    return mean


def _sum(terms: Iterable[float]) -> tuple[float, float]:
    """Return the binary64 sum of ``terms`` in order from ``0.0``, and the sum of their sizes."""
    total = 0.0
    size = 0.0
    for term in terms:
        total += term
        size += abs(term)
    return total, size


def _entropy_terms(values: list[float], logs: _Logs) -> list[float]:
    return [value * logs.ln(value) for value in values if value > 0.0]


def _modified_terms(values: list[float], label: int, logs: _Logs) -> tuple[float, list[float]]:
    """Return the label's term and the other classes' terms (in class order)."""
    if isinstance(label, bool) or not isinstance(label, int) or not 0 <= label < len(values):
        raise ParameterError(f"label {label!r} outside 0..{len(values) - 1}")
    ln_epsilon = logs.ln(LOG_EPSILON)
    others = [
        value * (logs.ln1m(value) if value <= _ONE_MINUS_EPSILON else ln_epsilon)
        for c, value in enumerate(values)
        if c != label
    ]
    value = values[label]
    return (1.0 - value) * logs.ln(max(value, LOG_EPSILON)), others


def negative_entropy(p: F64Vector) -> float:
    """Return ``Σ_c p_c ln p_c`` with ``0·ln 0 = 0``, summed in class order (rule before)."""
    return _sum(_entropy_terms(p.tolist(), _CORRECTLY_ROUNDED))[0]


def negative_modified_entropy(p: F64Vector, label: int) -> float:
    """Return ``(1 − p_y) ln p_y + Σ_{c≠y} p_c ln(1 − p_c)`` with the ε clamps (rule before)."""
    first, others = _modified_terms(p.tolist(), label, _CORRECTLY_ROUNDED)
    others.insert(label, first)
    return _sum(others)[0]


def _log_odds(rows: list[list[float]], label: int, logs: _Logs) -> tuple[float, float]:
    """Return ``(Σ_k ℓ_k)/K`` and ``(Σ_k |ln a_k| + |ln b_k|)/K`` (module docstring)."""
    total = 0.0
    size = 0.0
    for row in rows:
        rest = 0.0
        for c, value in enumerate(row):
            if c != label:
                rest += value
        up, down = logs.ln(max(row[label], LOGIT_FLOOR)), logs.ln(max(rest, LOGIT_FLOOR))
        total += up - down
        size += abs(up) + abs(down)
    return total / float(len(rows)), size / float(len(rows))


def _logit_label(probabilities: npt.NDArray[np.float64], label: int | None) -> int:
    width = probabilities.shape[1]
    if label is None:
        acc = np.zeros(width, dtype=np.float64)
        for vector in probabilities:
            acc = acc + vector
        label = int(np.argmax(acc))  # the largest sum is the largest mean; lowest index wins
    if isinstance(label, bool) or not isinstance(label, int) or not 0 <= label < width:
        raise ParameterError(f"label {label!r} outside 0..{width - 1}")
    return label


def mean_log_odds(probabilities: npt.NDArray[np.float64], label: int | None) -> float:
    """Return the ``logit`` statistic of one version's K probability rows (rule before).

    ``label`` None picks the class of largest mean probability (C2).
    """
    label = _logit_label(probabilities, label)
    return _log_odds(probabilities.tolist(), label, _CORRECTLY_ROUNDED)[0]


def _measured(
    spec: ScoreSpec,
    answer: ClassifyAnswer,
    n_classes: int,
    label: int | None,
    *,
    logs: _Logs,
    canonical: bool,
) -> tuple[float, float]:
    """Return a version's score and its terms' magnitude under ``logs``.

    ``canonical`` adds the label-only terms in increasing ``p_c``, the label's last
    (``basic-v1``); otherwise every sum runs in class order (the rule before).
    """
    if isinstance(n_classes, bool) or not isinstance(n_classes, int) or n_classes < 2:
        raise ParameterError(f"n_classes must be an integer >= 2, got {n_classes!r}")
    if spec.uses_label and label is None:
        raise ParameterError(f"knowledge condition {spec.knowledge} needs the committed label")
    if spec.statistic == "logit":
        answer.validate(spec.k, n_classes)
        if answer.probabilities is None:
            raise OracleError("invalid-answer", "the logit statistic needs probability vectors")
        chosen = _logit_label(answer.probabilities, label if spec.uses_label else None)
        return _log_odds(answer.probabilities.tolist(), chosen, logs)
    values = mean_output(spec, answer, n_classes).tolist()
    canonical = canonical and spec.label_only
    if not spec.uses_label:
        return _sum(_entropy_terms(sorted(values) if canonical else values, logs))
    assert label is not None
    if canonical:  # the other classes in increasing p_c, then the label's term
        if isinstance(label, bool) or not isinstance(label, int) or not 0 <= label < n_classes:
            raise ParameterError(f"label {label!r} outside 0..{n_classes - 1}")
        values = [*sorted(values[:label] + values[label + 1 :]), values[label]]
        label = n_classes - 1
    first, others = _modified_terms(values, label, logs)
    others.insert(label, first)
    return _sum(others)


def score(spec: ScoreSpec, answer: ClassifyAnswer, *, n_classes: int, label: int | None) -> float:
    """Return the float64 score of one version from the oracle's answers to its K copies.

    ``label`` is the committed label (required for C1/C3, ignored for C2/C4) and
    must be below ``n_classes``, the oracle's announced number of classes. The claim's
    ``arithmetic`` says how: ``basic-v1`` with the protocol's logarithms, else the rule
    before, correctly rounded (module docstring).
    """
    if spec.arithmetic == BASIC_ARITHMETIC:
        return _measured(spec, answer, n_classes, label, logs=_BASIC, canonical=True)[0]
    return _measured(spec, answer, n_classes, label, logs=_CORRECTLY_ROUNDED, canonical=False)[0]


def legacy_score(
    spec: ScoreSpec, answer: ClassifyAnswer, *, n_classes: int, label: int | None
) -> tuple[float, float]:
    """Return a score of the rule before and the tolerance of its recorded value (§1.2).

    The score is recomputed with the protocol's logarithms, within an ulp of those
    rounded once (:func:`~twinaudit.protocol.basic_log.pln`), the sums in class order as
    that rule says; replay accepts a recorded score within the tolerance of it.
    """
    value, size = _measured(spec, answer, n_classes, label, logs=_BASIC, canonical=False)
    return value, legacy_tolerance(size)


def legacy_tolerance(size: float) -> float:
    """Return ``size · 2^-40 + 2^-1000``: the tolerance of a score whose terms add to ``size``.

    ``size`` is the sum of the absolute values of the score's terms (the logit
    statistic's: of its two logarithms per copy, over ``K``). Two computations of the
    same sum with logarithms a few ulps apart, in any order of ``n ≤ 256`` terms,
    differ by less than ``2^-43·size`` (spec §1.2).
    """
    return size * LEGACY_SCALE + LEGACY_FLOOR
