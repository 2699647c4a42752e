"""The image-classifier score function (paper Alg. 3, appendix C; spec §10.3).

For one version of an opened pair the verifier queries the oracle on K perturbed
copies (:mod:`twinaudit.verifier.scoring.augment`), averages the K answers in float64 to a
vector ``p`` and scores it. Knowledge conditions (what the oracle reveals, and
whether the committed label ``y`` is used; the claim parameters,
:class:`~twinaudit.protocol.claim.scores.classifier.ScoreSpec`, live in the claim protocol):

====  ====================  ==================  ======================================
cond  oracle output used    label               score of ``p``
====  ====================  ==================  ======================================
C1    probability vectors   committed ``y``     negative modified entropy
C2    probability vectors   —                   negative entropy
C3    top labels            committed ``y``     negative modified entropy
C4    top labels            —                   negative entropy
====  ====================  ==================  ======================================

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

``ln`` and ``log1p`` are correctly rounded (:mod:`twinaudit.protocol.numeric`), as the spec
defines them: never the platform's (Python's :mod:`math` and numpy call the C library,
whose ``log1p`` is a unit in the last place off for a few percent of arguments, and
numpy's vectorised versions can also depend on the CPU's instruction set).
"""

from __future__ import annotations

from typing import Final

import numpy as np
import numpy.typing as npt

from twinaudit.protocol.claim.scores.classifier import ScoreSpec
from twinaudit.protocol.encoding import Value
from twinaudit.protocol.errors import OracleError, ParameterError
from twinaudit.protocol.items import ImageItem
from twinaudit.protocol.numeric import ln, log1p
from twinaudit.protocol.oracles.base import ClassifyAnswer
from twinaudit.protocol.prg import Prg

from .augment import draw_copies

#: The spec class is the claim protocol's; it is re-exported for the scoring code's callers.
__all__ = [
    "LABEL_FLOOR",
    "LOGIT_FLOOR",
    "LOG_EPSILON",
    "ScoreSpec",
    "make_queries",
    "mean_log_odds",
    "mean_output",
    "negative_entropy",
    "negative_modified_entropy",
    "score",
]

#: What a zero of an averaged one-hot vector becomes (C3, C4).
LABEL_FLOOR: Final = 1e-5
#: Clamp of the logarithms of the modified entropy (see the module docstring).
LOG_EPSILON: Final = 1e-12
#: Floor of both terms of a copy's log-odds (smallest positive normal binary64).
LOGIT_FLOOR: Final = 2.2250738585072014e-308

_ONE_MINUS_EPSILON: Final = 1.0 - LOG_EPSILON
_LN_EPSILON: Final = ln(LOG_EPSILON)

F64Vector = npt.NDArray[np.float64]


def make_queries(
    spec: ScoreSpec, item: ImageItem, prg: Prg
) -> tuple[list[dict[str, Value]], npt.NDArray[np.float32]]:
    """Draw the K copies of one version from its stream; return parameters and images.

    ``prg`` is the version's ``augment/<i>/<v>`` stream. The images are float32
    (K, H, W, C) in [0, 1], ready for :meth:`ClassifierOracle.classify`.
    """
    spec.check_item(item)
    return draw_copies(spec.perturbation, spec.k, item.pixels, prg)


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


def negative_entropy(p: F64Vector) -> float:
    """Return ``Σ_c p_c ln p_c`` with ``0·ln 0 = 0``, summed in class order."""
    total = 0.0
    for value in p.tolist():
        if value > 0.0:
            total += value * ln(value)
    return total


def _log_one_minus(q: float) -> float:
    return log1p(-q) if q <= _ONE_MINUS_EPSILON else _LN_EPSILON


def negative_modified_entropy(p: F64Vector, label: int) -> float:
    """Return ``(1 − p_y) ln p_y + Σ_{c≠y} p_c ln(1 − p_c)`` with the ε clamps, in class order."""
    values = p.tolist()
    if isinstance(label, bool) or not isinstance(label, int) or not 0 <= label < len(values):
        raise ParameterError(f"label {label!r} outside 0..{len(values) - 1}")
    total = 0.0
    for c, value in enumerate(values):
        if c == label:
            total += (1.0 - value) * ln(max(value, LOG_EPSILON))
        else:
            total += value * _log_one_minus(value)
    return total


def mean_log_odds(probabilities: npt.NDArray[np.float64], label: int | None) -> float:
    """Return the ``logit`` statistic of one version's K probability rows (module docstring).

    ``label`` None picks the class of largest mean probability (C2).
    """
    rows = probabilities.tolist()
    width = len(rows[0])
    if label is None:
        acc = np.zeros(width, dtype=np.float64)
        for vector in probabilities:
            acc = acc + vector
        label = int(np.argmax(acc))  # the largest sum is the largest mean; lowest index wins
    if isinstance(label, bool) or not isinstance(label, int) or not 0 <= label < width:
        raise ParameterError(f"label {label!r} outside 0..{width - 1}")
    total = 0.0
    for row in rows:
        rest = 0.0
        for c, value in enumerate(row):
            if c != label:
                rest += value
        total += ln(max(row[label], LOGIT_FLOOR)) - ln(max(rest, LOGIT_FLOOR))
    return total / float(len(rows))


def score(spec: ScoreSpec, answer: ClassifyAnswer, *, n_classes: int, label: int | None) -> float:
    """Return the float64 score of one version from the oracle's answers to its K copies.

    ``label`` is the committed label (required for C1/C3, ignored for C2/C4) and
    must be below ``n_classes``, the oracle's announced number of classes.
    """
    if isinstance(n_classes, bool) or not isinstance(n_classes, int) or n_classes < 2:
        raise ParameterError(f"n_classes must be an integer >= 2, got {n_classes!r}")
    if spec.statistic == "logit":
        answer.validate(spec.k, n_classes)
        if answer.probabilities is None:
            raise OracleError("invalid-answer", "the logit statistic needs probability vectors")
        if spec.uses_label and label is None:
            raise ParameterError(f"knowledge condition {spec.knowledge} needs the committed label")
        return mean_log_odds(answer.probabilities, label if spec.uses_label else None)
    p = mean_output(spec, answer, n_classes)
    if not spec.uses_label:
        return negative_entropy(p)
    if label is None:
        raise ParameterError(f"knowledge condition {spec.knowledge} needs the committed label")
    return negative_modified_entropy(p, label)
