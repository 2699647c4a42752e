"""The Chernoff threshold T of the paper's detector (Huang, Gong, Reiter, CCS 2024).

Theorem 1 of the paper (proof in its appendix B): for an integer T in [⌈N/2⌉, N] with

    (e^(2T/N − 1) / (2T/N)^(2T/N))^(N/2) ≤ p − α,

rejecting H0 once the PPRM lower bound for N⁺ reaches T has false-detection rate
below p. The left side is the Chernoff bound P(N⁺ ≥ T) for N⁺ ~ Binomial(N, 1/2)
(Mitzenmacher & Upfal, eq. 4.1). Algorithm 2 of the paper takes the smallest such T.

In natural logs the condition reads g(T) ≤ ln(b) with b = p − α and

    g(T) = T − N/2 − T·ln(2T/N),

and g'(T) = −ln(2T/N) < 0 for T > N/2, so the smallest T is found by binary search.
Each comparison is exact: a binary64 evaluation decides when it is farther from the
boundary than a rigorous error margin, and otherwise Python's ``decimal`` (whose ln is
correctly rounded) decides at growing precision. The two sides are never equal
(e^r is irrational for rational r ≠ 0, Lindemann), so the refinement terminates.
"""

from __future__ import annotations

import decimal
import math
import sys
from fractions import Fraction

from .. import limits
from ..errors import LimitExceededError, ParameterError

#: Relative error allowed for each binary64 term (log may be off by a few ulps).
_FLOAT_MARGIN = 64 * sys.float_info.epsilon
#: Absolute slack on top of the relative margin.
_TINY = 2.0**-40
#: First ``decimal`` precision (significant digits) tried near the boundary.
_DECIMAL_START_DIGITS = 60
#: Give up (never reached: the sides cannot be equal) beyond this precision.
_DECIMAL_MAX_DIGITS = 1 << 16


def _sign_float(n_pairs: int, t: int, ln_budget: float) -> int:
    """Return the sign of g(T) − ln(b) in binary64, or 0 where it is too close to call."""
    log_x = math.log(2 * t / n_pairs)
    value = t - n_pairs / 2 - t * log_x - ln_budget
    margin = _FLOAT_MARGIN * (t + n_pairs / 2 + t * abs(log_x) + abs(ln_budget)) + _TINY
    if value > margin:
        return 1
    if value < -margin:
        return -1
    return 0


def _sign_decimal(n_pairs: int, t: int, budget: Fraction, digits: int) -> int:
    """Return the sign of g(T) − ln(b) in ``decimal`` at ``digits`` digits, or 0 if unsure."""
    ctx = decimal.Context(prec=digits, rounding=decimal.ROUND_HALF_EVEN)
    with decimal.localcontext(ctx):
        log_x = (decimal.Decimal(2 * t) / n_pairs).ln()
        ln_budget = (decimal.Decimal(budget.numerator) / budget.denominator).ln()
        value = t - decimal.Decimal(n_pairs) / 2 - t * log_x - ln_budget
        # Each of the few operations errs by at most one unit in the last digit of its
        # result; 10**(3 - digits) times the magnitudes bounds their sum generously.
        error = decimal.Decimal(10) ** (3 - digits) * (
            t * (1 + abs(log_x)) + n_pairs + abs(ln_budget) + 1
        )
    if value > error:
        return 1
    if value < -error:
        return -1
    return 0


def _meets(n_pairs: int, t: int, budget: Fraction, ln_budget: float) -> bool:
    """Return whether T = ``t`` satisfies the theorem-1 condition g(T) ≤ ln(b), exactly."""
    sign = _sign_float(n_pairs, t, ln_budget)
    digits = _DECIMAL_START_DIGITS
    while sign == 0:
        if digits > _DECIMAL_MAX_DIGITS:  # pragma: no cover - the sides are never equal
            raise ArithmeticError(f"cannot separate g({t}) from ln(b) for N={n_pairs}")
        sign = _sign_decimal(n_pairs, t, budget, digits)
        digits *= 2
    return sign < 0


def _check_budget(budget: float | Fraction) -> tuple[Fraction, float]:
    """Validate ``0 < budget < 1``; return it as an exact rational and its float log."""
    if not isinstance(budget, float | Fraction):
        raise ParameterError(f"budget must be a number, got {type(budget).__name__}")
    if isinstance(budget, float) and not math.isfinite(budget):
        raise ParameterError(f"budget must be finite, got {budget!r}")
    exact = Fraction(budget)
    if not 0 < exact < 1:
        raise ParameterError(f"budget p − α must lie strictly between 0 and 1, got {budget}")
    as_float = float(exact)
    if as_float == 0.0:
        raise ParameterError(f"budget {budget} is below the smallest binary64 value")
    return exact, math.log(as_float)


def pairs_needed(budget: float | Fraction) -> int:
    """Return the least N for which some T ≤ N meets theorem 1 at ``budget``.

    At T = N the condition reads N·(1/2 − ln 2) ≤ ln(b), so N ≥ ln(1/b)/(ln 2 − 1/2).
    """
    exact, ln_budget = _check_budget(budget)
    n = max(1, math.ceil(-ln_budget / (math.log(2) - 0.5)) - 2)
    while not _meets(n, n, exact, ln_budget):
        n += 1
    return n


def chernoff_threshold(n_pairs: int, budget: float | Fraction) -> int:
    """Return the smallest integer T in [⌈N/2⌉, N] meeting theorem 1 for ``budget`` = p − α.

    ``budget`` is taken as the exact rational it denotes (a binary64 float is one), so
    callers holding p and α should pass ``Fraction(p) - Fraction(alpha)``. The search is
    O(log N) comparisons, each decided exactly (see the module docstring).

    Raises :class:`ParameterError` when ``budget`` is not in (0, 1) or when no T ≤ N
    qualifies (the message says how many pairs would be needed), and
    :class:`LimitExceededError` when ``n_pairs`` exceeds ``limits.MAX_PAIRS``.
    """
    if isinstance(n_pairs, bool) or not isinstance(n_pairs, int) or n_pairs < 1:
        raise ParameterError(f"n_pairs must be a positive integer, got {n_pairs!r}")
    if n_pairs > limits.MAX_PAIRS:
        raise LimitExceededError("n_pairs", n_pairs, limits.MAX_PAIRS)
    exact, ln_budget = _check_budget(budget)
    if not _meets(n_pairs, n_pairs, exact, ln_budget):
        raise ParameterError(
            f"{n_pairs} pairs are too few for p − α = {float(exact)!r}: "
            f"the Chernoff threshold needs at least {pairs_needed(exact)} pairs"
        )
    lo, hi = (n_pairs + 1) // 2, n_pairs  # g is decreasing on [N/2, N]: first T that meets it
    while lo < hi:
        mid = (lo + hi) // 2
        if _meets(n_pairs, mid, exact, ln_budget):
            hi = mid
        else:
            lo = mid + 1
    return lo
