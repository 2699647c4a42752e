"""The graded mixture test: bets sized by how far apart a pair's two scores are (spec §7.5).

A tie margin ``m > 0`` (spec §7.1) already drops the pairs whose scores differ by ``m``
or less. Among the pairs it keeps, a large gap is more often the published twin's
than a small one on a model that learnt its training items, yet the mixture test of
:mod:`.mixture` weighs every kept pair alike. This test sizes each bet by the pair's
*grade*, the decade of its gap above the margin:

====== ============================== ========================
grade  ``d = |s_pub − s_hid|``        bet fraction ``j_g / 4``
====== ============================== ========================
1      ``m < d ≤ 10·m``               1/2
2      ``10·m < d ≤ 100·m``           3/4
3      ``d > 100·m``                  1
====== ============================== ========================

and averages over the prior of :mod:`.mixture_prior`:

    M_t = Σ_k (w_k / W) · Π_g (1 + c_k·j_g/4)^{S_g} · (1 − c_k·j_g/4)^{F_g},   c_k = 2θ_k − 1,

where ``S_g``/``F_g`` count the ones and zeros fed at grade ``g``. With ``θ_k = a_k/R``
every factor is ``(4R ± (2a_k − R)·j_g) / (4R)``, so ``M_t`` is again a ratio of
integers and the decision ``M_t ≥ 1/p`` is made exactly. At grade 3 the factor is the
mixture test's ``2θ_k`` or ``2(1 − θ_k)``; a claim whose pairs all reach grade 3 is the
mixture test, and so is every claim whose score has no margin (``m = 0``: every untied
pair has grade 3), except that a tie decided by the coin is a half bet.

Validity. The grade depends on ``|s_pub − s_hid|`` alone, which is the same whichever
twin is published, and under H0 the publication bit is independent of both scores:
given the grade and the past, each fed bit is a fair coin. Every factor then has
conditional mean 1, each atom's product is a nonnegative martingale, so is their
average, and Ville's inequality bounds the false-detection probability by ``p`` at
every stopping time, whatever the grades are.
"""

from __future__ import annotations

import math
import sys
from fractions import Fraction
from typing import ClassVar, Final

from .. import limits
from ..encoding import Value
from ..errors import InputError, LimitExceededError, ParameterError, StateError
from .base import (
    STATE_KEYS,
    Decision,
    Reported,
    SequentialTest,
    Step,
    check_probability,
    state_parameters,
)
from .mixture_prior import DEFAULT_PRIOR, GridPrior, get_prior

#: Bet fractions in quarters, by grade 1, 2, 3 (spec §7.5.1).
GRADE_QUARTERS: Final = (2, 3, 4)
#: The number of grades.
GRADES: Final = len(GRADE_QUARTERS)
#: How many margins wide each grade's upper bound is (grade 3 has none).
GRADE_BOUNDS: Final = (10.0, 100.0)
#: The state key holding the per-grade counts (spec §7.5.4).
GRADES_KEY: Final = "grades"

#: Relative error allowed for each binary64 term (log and exp: a few ulps at most).
_FLOAT_MARGIN = 64 * sys.float_info.epsilon
#: Absolute slack on top of the relative margin (covers the log-sum-exp itself).
_TINY = 2.0**-40
_PARAMETER_KEYS = frozenset({"n_pairs", "p", "prior"})

#: Per-grade counts: ``((S_1, F_1), (S_2, F_2), (S_3, F_3))``.
Counts = tuple[tuple[int, int], ...]


def counts_from_list(flat: object) -> Counts:
    """Return per-grade counts from the list ``[S_1, F_1, S_2, F_2, S_3, F_3]`` (ParameterError)."""
    if not (
        isinstance(flat, list | tuple)
        and len(flat) == 2 * GRADES
        and all(type(n) is int and n >= 0 for n in flat)
    ):
        raise ParameterError(f"per-grade counts are {2 * GRADES} integers >= 0, got {flat!r}")
    return tuple((int(flat[i]), int(flat[i + 1])) for i in range(0, len(flat), 2))


def grade_of(difference: float, margin: float) -> int:
    """Return the grade of a pair whose scores differ by ``difference`` (0: a tie).

    ``difference`` is ``s_pub − s_hid`` rounded to binary64 and ``margin`` the score's
    tie margin ``m ≥ 0``; the bounds ``10·m`` and ``100·m`` are binary64 products. With
    ``m = 0`` every untied pair has grade 3, so the test is ``mixture-e``'s.
    """
    if not (isinstance(margin, float) and math.isfinite(margin) and margin >= 0.0):
        raise ParameterError(f"a tie margin is a finite float >= 0, got {margin!r}")
    if not math.isfinite(difference):
        raise InputError("score differences must be finite")
    gap = abs(difference)
    if gap <= margin:
        return 0
    for grade, factor in enumerate(GRADE_BOUNDS, start=1):
        if gap <= margin * factor:
            return grade
    return GRADES


def _factors(prior: GridPrior) -> list[tuple[int, list[tuple[int, int]]]]:
    """Return, per atom, its weight and the integer (win, loss) factor of every grade."""
    r = prior.resolution
    table = []
    for a, w in prior.atoms:
        edge = 2 * a - r
        table.append((w, [(4 * r + edge * j, 4 * r - edge * j) for j in GRADE_QUARTERS]))
    return table


def _check_counts(counts: Counts) -> tuple[int, int]:
    """Validate per-grade counts; return (draws, successes)."""
    if not isinstance(counts, tuple) or len(counts) != GRADES:
        raise ParameterError(f"need {GRADES} (ones, zeros) counts, got {counts!r}")
    draws = successes = 0
    for pair in counts:
        if not (isinstance(pair, tuple) and len(pair) == 2):
            raise ParameterError(f"a grade's counts are (ones, zeros), got {pair!r}")
        for value in pair:
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ParameterError(f"counts must be integers >= 0, got {value!r}")
        successes += pair[0]
        draws += pair[0] + pair[1]
    if draws > limits.MAX_PAIRS:
        raise LimitExceededError("draws", draws, limits.MAX_PAIRS)
    return draws, successes


def numerator(counts: Counts, prior: GridPrior = DEFAULT_PRIOR) -> int:
    """Return ``Σ_k w_k Π_g (4R + e_k j_g)^{S_g} (4R − e_k j_g)^{F_g}``, ``e_k = 2a_k − R``."""
    _check_counts(counts)
    total = 0
    for w, grades in _factors(prior):
        term = w
        for (up, down), (ones, zeros) in zip(grades, counts, strict=True):
            term *= up**ones * down**zeros
        total += term
    return total


def denominator(counts: Counts, prior: GridPrior = DEFAULT_PRIOR) -> int:
    """Return ``W · (4R)^t``."""
    draws, _ = _check_counts(counts)
    scale: int = (4 * prior.resolution) ** draws
    return prior.total_weight * scale


def e_value(counts: Counts, prior: GridPrior = DEFAULT_PRIOR) -> Fraction:
    """Return ``M_t`` exactly (cost grows with t; meant for checks and vectors)."""
    return Fraction(numerator(counts, prior), denominator(counts, prior))


def _log_terms(prior: GridPrior, counts: Counts) -> tuple[float, float]:
    """Return (ln M_t in binary64, a bound on its error)."""
    draws, _ = _check_counts(counts)
    scale = math.log(prior.total_weight) + draws * math.log(4 * prior.resolution)
    terms: list[float] = []
    size = 0.0
    for w, grades in _factors(prior):
        term = math.log(w)
        zero = False
        for (up, down), (ones, zeros) in zip(grades, counts, strict=True):
            if ones:
                term += ones * math.log(up)
            if zeros:
                if down == 0:
                    zero = True  # θ = 1 at a full bet: any zero ends this atom
                    break
                term += zeros * math.log(down)
        if zero:
            continue
        terms.append(term)
        size = max(size, abs(term))
    top = max(terms)
    value = top + math.log(math.fsum(math.exp(x - top) for x in terms)) - scale
    error = _FLOAT_MARGIN * (size + scale + 1.0) + _TINY
    return value, error


def log_e_value(counts: Counts, prior: GridPrior = DEFAULT_PRIOR) -> float:
    """Return ``ln M_t`` in binary64 (informative; decisions use :func:`reaches`)."""
    draws, _ = _check_counts(counts)
    if draws == 0:
        return 0.0
    return _log_terms(prior, counts)[0]


def reaches(counts: Counts, p: float, prior: GridPrior = DEFAULT_PRIOR) -> bool:
    """Return whether ``M_t ≥ 1/p``, decided exactly.

    Binary64 decides where a proven margin separates ``ln M_t`` from ``ln(1/p)``;
    otherwise the integers are compared (spec §7.5.3).
    """
    _check_counts(counts)
    p = check_probability("p", p)
    if all(ones <= zeros for ones, zeros in counts):
        return False  # per grade ((1 + x)(1 − x))^S (1 − x)^(F − S) ≤ 1, so M_t ≤ 1 < 1/p
    value, error = _log_terms(prior, counts)
    gap = value + math.log(p)
    slack = error + _FLOAT_MARGIN * abs(math.log(p))
    if gap > slack:
        return True
    if gap < -slack:
        return False
    num, den = p.as_integer_ratio()
    return num * numerator(counts, prior) >= den * denominator(counts, prior)


class GradedMixtureTest(SequentialTest):
    """The mixture e-value with bets sized by each pair's grade (spec §7.5).

    Fed with :meth:`update` ``(bit, grade)``, grade 1–3 from :func:`grade_of`.
    Anytime-valid like ``mixture-e``: ``n_pairs`` only marks exhaustion.
    """

    name: ClassVar[str] = "mixture-graded"
    graded: ClassVar[bool] = True
    reports: ClassVar[Reported] = "log_statistic"

    def __init__(self, n_pairs: int, p: float = 0.05, prior: str = DEFAULT_PRIOR.name) -> None:
        """Set up the test over ``n_pairs`` pairs at false-detection bound ``p``."""
        super().__init__(n_pairs)
        if n_pairs > limits.MAX_PAIRS:
            raise LimitExceededError("n_pairs", n_pairs, limits.MAX_PAIRS)
        self.p = check_probability("p", p)
        self.prior = get_prior(prior)
        self.counts: list[list[int]] = [[0, 0] for _ in range(GRADES)]

    @property
    def grade_counts(self) -> Counts:
        """Return the per-grade counts ``((S_1, F_1), (S_2, F_2), (S_3, F_3))``."""
        return tuple((ones, zeros) for ones, zeros in self.counts)

    def update(self, bit: bool | int, grade: int | None = None) -> Step:
        """Consume one indicator bit at its grade (1–3) and return the new step record."""
        if self.decision is not Decision.CONTINUE:
            raise StateError(f"test already ended with {self.decision.value}")
        if isinstance(grade, bool) or not isinstance(grade, int) or not 1 <= grade <= GRADES:
            raise InputError(f"test {self.name} needs each bit's grade (1 to {GRADES})")
        if bit not in (0, 1) or isinstance(bit, float):
            raise InputError(f"indicator must be 0 or 1, got {bit!r}")
        self.counts[grade - 1][0 if bit else 1] += 1
        return super().update(bit, grade)

    def initial_step(self) -> Step:
        """Return the step before any observation, with its six grade counts at zero."""
        return Step(0, 0, Decision.CONTINUE, None, None, (0,) * (2 * GRADES))

    def _evaluate(self) -> Step:
        counts = self.grade_counts
        if reaches(counts, self.p, self.prior):
            decision = Decision.DETECTED
        elif self.draws == self.n_pairs:
            decision = Decision.EXHAUSTED
        else:
            decision = Decision.CONTINUE
        flat = tuple(n for pair in counts for n in pair)
        statistic = log_e_value(counts, self.prior)
        return Step(self.draws, self.successes, decision, None, statistic, flat)

    def parameters(self) -> dict[str, Value]:
        """Return ``{"n_pairs", "p", "prior"}``."""
        return {"n_pairs": self.n_pairs, "p": self.p, "prior": self.prior.name}

    def state(self) -> dict[str, Value]:
        """Return the state of spec §7.4 plus ``grades``: ``[S_1, F_1, S_2, F_2, S_3, F_3]``."""
        state = super().state()
        state[GRADES_KEY] = [n for pair in self.counts for n in pair]
        return state

    @classmethod
    def from_state(cls, state: dict[str, Value]) -> GradedMixtureTest:
        """Rebuild a test from :meth:`state`, recomputing (never trusting) the decision.

        The per-grade counts must add up to ``draws`` and ``successes``; otherwise,
        and for any malformed field, :class:`InputError`.
        """
        if not isinstance(state, dict) or set(state) != STATE_KEYS | {GRADES_KEY}:
            raise InputError(
                f"{cls.name} state needs exactly the keys {sorted(STATE_KEYS | {GRADES_KEY})}"
            )
        plain = {key: state[key] for key in STATE_KEYS}
        params, n_pairs = state_parameters(plain, cls.name, _PARAMETER_KEYS)
        p, prior = params["p"], params["prior"]
        if not isinstance(p, float):
            raise InputError("p must be recorded as a float")
        if not isinstance(prior, str):
            raise InputError(f"prior must be recorded as a name, got {prior!r}")
        grades = state[GRADES_KEY]
        if not (
            isinstance(grades, list)
            and len(grades) == 2 * GRADES
            and all(type(n) is int and n >= 0 for n in grades)
        ):
            raise InputError(f"grades must be a list of {2 * GRADES} integers >= 0")
        test = cls(n_pairs, p, prior)
        draws, successes, decision = state["draws"], state["successes"], state["decision"]
        if not (
            isinstance(draws, int) and isinstance(successes, int) and isinstance(decision, str)
        ):
            raise InputError("test state needs integer draws/successes and a decision string")
        flat = [n for n in grades if isinstance(n, int)]
        counts = [[flat[2 * g], flat[2 * g + 1]] for g in range(GRADES)]
        if sum(s + f for s, f in counts) != draws or sum(s for s, _ in counts) != successes:
            raise InputError("the grades' counts do not add up to draws and successes")
        if draws > n_pairs:
            raise InputError(f"impossible counts: {draws} draws, N={n_pairs}")
        test.counts = counts
        test.draws, test.successes = draws, successes
        if draws > 0:
            test.decision = test._evaluate().decision
        if test.decision.value != decision:
            raise InputError(
                f"recorded decision {decision!r} disagrees with the recomputed "
                f"{test.decision.value!r}"
            )
        return test
