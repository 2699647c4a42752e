"""The mixture test: a one-sided mixture e-value rejected at 1/p by Ville's inequality.

After t indicators with S ones and F = t − S zeros, the statistic is

    M_t = ∫ ∏_i (2θ)^{X_i} (2(1 − θ))^{1 − X_i} π(dθ) = Σ_k π_k (2θ_k)^S (2(1 − θ_k))^F

for a discrete prior π on (1/2, 1] (:mod:`.mixture_prior`). Under H0 each indicator
is Bernoulli(1/2) given the past (the publication bit is a fair coin independent of
the model; ties are broken by a fair PRG coin or skipped), so every factor has
conditional mean 1 and M_t is a nonnegative martingale with M_0 = 1. Ville's
inequality gives P(∃t: M_t ≥ 1/p) ≤ p at every stopping time, whatever N is; the
test detects as soon as M_t ≥ 1/p (spec §7.3).

Exactness. M_t is a ratio of integers and p = P/Q exactly (a binary64 number), so
M_t ≥ 1/p ⇔ P·Σ_k w_k a_k^S (R − a_k)^F ≥ Q·W·(R/2)^t. :func:`reaches` decides it
with a binary64 log-sum-exp when that is farther than a rigorous margin from
log(1/p), and with the integer comparison otherwise. Since every θ_k > 1/2,
M_t ≤ 1 whenever S ≤ F, and M_t is nondecreasing in S at fixed t.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable
from fractions import Fraction
from typing import ClassVar

from .. import limits
from ..encoding import Value
from ..errors import InputError, LimitExceededError, ParameterError
from .base import (
    Decision,
    Reported,
    SequentialTest,
    Step,
    check_probability,
    restore_counts,
    state_parameters,
)
from .mixture_prior import DEFAULT_PRIOR, GridPrior, get_prior

#: Relative error allowed for each binary64 term (log and exp: a few ulps at most).
_FLOAT_MARGIN = 64 * sys.float_info.epsilon
#: Absolute slack on top of the relative margin (covers the log-sum-exp itself).
_TINY = 2.0**-40

_PARAMETER_KEYS = frozenset({"n_pairs", "p", "prior"})


def _check_counts(draws: int, successes: int) -> None:
    for label, value in (("draws", draws), ("successes", successes)):
        if isinstance(value, bool) or not isinstance(value, int):
            raise ParameterError(f"{label} must be an integer, got {value!r}")
    if not 0 <= successes <= draws:
        raise ParameterError(f"need 0 <= successes <= draws, got {successes} of {draws}")
    if draws > limits.MAX_PAIRS:
        raise LimitExceededError("draws", draws, limits.MAX_PAIRS)


def _log_terms(prior: GridPrior, draws: int, successes: int) -> tuple[float, float]:
    """Return (log M_t in binary64, a bound on its error)."""
    failures = draws - successes
    r = prior.resolution
    total = prior.total_weight
    scale = math.log(total) + draws * math.log(prior.half_resolution)
    terms: list[float] = []
    size = 0.0
    for a, w in prior.atoms:
        if failures and a == r:
            continue  # θ = 1 is ruled out by any zero: the term is exactly 0
        term = math.log(w) + successes * math.log(a)
        if failures:
            term += failures * math.log(r - a)
        terms.append(term)  # every part is ≥ 0, so the term bounds their magnitudes
        size = max(size, term)
    top = max(terms)
    value = top + math.log(math.fsum(math.exp(x - top) for x in terms)) - scale
    error = _FLOAT_MARGIN * (size + scale + 1.0) + _TINY
    return value, error


def log_e_value(draws: int, successes: int, prior: GridPrior = DEFAULT_PRIOR) -> float:
    """Return log M_t in binary64 (informative; decisions use :func:`reaches`)."""
    _check_counts(draws, successes)
    if draws == 0:
        return 0.0
    return _log_terms(prior, draws, successes)[0]


def e_value(draws: int, successes: int, prior: GridPrior = DEFAULT_PRIOR) -> Fraction:
    """Return M_t exactly as a Fraction (cost grows with t; meant for checks and vectors)."""
    _check_counts(draws, successes)
    return Fraction(prior.numerator(successes, draws - successes), prior.denominator(draws))


def _reaches_exact(prior: GridPrior, draws: int, successes: int, p: float) -> bool:
    num, den = p.as_integer_ratio()
    lhs = num * prior.numerator(successes, draws - successes)
    return lhs >= den * prior.denominator(draws)


def reaches(draws: int, successes: int, p: float, prior: GridPrior = DEFAULT_PRIOR) -> bool:
    """Return whether M_t ≥ 1/p, decided exactly (module docstring)."""
    _check_counts(draws, successes)
    p = check_probability("p", p)
    if 2 * successes <= draws:
        return False  # M_t ≤ 1 < 1/p
    value, error = _log_terms(prior, draws, successes)
    gap = value + math.log(p)  # log(p·M_t)
    if gap > error + _FLOAT_MARGIN * abs(math.log(p)):
        return True
    if gap < -error - _FLOAT_MARGIN * abs(math.log(p)):
        return False
    return _reaches_exact(prior, draws, successes, p)


def detection_boundary(
    p: float = 0.05, max_draws: int = 10_000, prior: GridPrior = DEFAULT_PRIOR
) -> list[int]:
    """Return b with b[t] the fewest ones among t draws at which the test detects.

    Index t runs over 0 … ``max_draws``; b[t] = t + 1 where no count detects. Because
    every θ_k > 1/2, M_{t+1}(S) ≤ M_t(S) ≤ M_{t+1}(S + 1), so b[t + 1] is b[t] or
    b[t] + 1 and one exact decision per t suffices. The boundary does not depend on N.
    """
    p = check_probability("p", p)
    return stepwise_boundary(lambda t, s: reaches(t, s, p, prior), max_draws)


def stepwise_boundary(detects: Callable[[int, int], bool], max_draws: int) -> list[int]:
    """Return b[0 … ``max_draws``] of a test that detects after t draws when S ≥ b[t].

    ``detects(t, S)`` decides one count exactly; it must be nondecreasing in S and, as
    for every statistic that is a likelihood ratio against 1/2 of rates θ > 1/2,
    b[t + 1] must be b[t] or b[t] + 1, so one decision per t suffices.
    """
    if isinstance(max_draws, bool) or not isinstance(max_draws, int) or max_draws < 0:
        raise ParameterError(f"max_draws must be a nonnegative integer, got {max_draws!r}")
    if max_draws > limits.MAX_PAIRS:
        raise LimitExceededError("max_draws", max_draws, limits.MAX_PAIRS)
    boundary = [1]
    for t in range(1, max_draws + 1):
        c = boundary[-1]
        boundary.append(c if c <= t and detects(t, c) else c + 1)
    return boundary


class MixtureTest(SequentialTest):
    """Mixture e-value M_t over a discrete prior on θ ∈ (1/2, 1], detecting at M_t ≥ 1/p.

    Anytime-valid: P(detect | H0) ≤ p for any number of draws, so ``n_pairs`` only
    marks when the population is EXHAUSTED. ``prior`` names a registered prior.
    """

    name: ClassVar[str] = "mixture-e"
    reports: ClassVar[Reported] = "log_statistic"

    def __init__(self, n_pairs: int, p: float = 0.05, prior: str = DEFAULT_PRIOR.name) -> None:
        """Set up the test over ``n_pairs`` pairs at false-detection bound ``p``."""
        super().__init__(n_pairs)
        if n_pairs > limits.MAX_PAIRS:
            raise LimitExceededError("n_pairs", n_pairs, limits.MAX_PAIRS)
        self.p = check_probability("p", p)
        self.prior = get_prior(prior)

    def _evaluate(self) -> Step:
        t, s = self.draws, self.successes
        if reaches(t, s, self.p, self.prior):
            decision = Decision.DETECTED
        elif t == self.n_pairs:
            decision = Decision.EXHAUSTED
        else:
            decision = Decision.CONTINUE
        return Step(t, s, decision, None, log_e_value(t, s, self.prior))

    def parameters(self) -> dict[str, Value]:
        """Return ``{"n_pairs", "p", "prior"}``."""
        return {"n_pairs": self.n_pairs, "p": self.p, "prior": self.prior.name}

    @classmethod
    def from_state(cls, state: dict[str, Value]) -> MixtureTest:
        """Rebuild a test from :meth:`state`, recomputing (never trusting) the decision.

        Raises :class:`InputError` for a malformed state or counts that disagree with
        the recorded decision, and :class:`ParameterError` for invalid parameters.
        """
        params, n_pairs = state_parameters(state, cls.name, _PARAMETER_KEYS)
        p, prior = params["p"], params["prior"]
        if not isinstance(p, float):
            raise InputError("p must be recorded as a float")
        if not isinstance(prior, str):
            raise InputError(f"prior must be recorded as a name, got {prior!r}")
        test = cls(n_pairs, p, prior)
        restore_counts(test, state)
        return test
