"""PPRM confidence sequence for the number of ones in a finite population sampled WoR.

Waudby-Smith & Ramdas (2020), "Confidence sequences for sampling without replacement"
(NeurIPS), §3: the prior-posterior-ratio martingale (PPRM). Huang, Gong, Reiter
(CCS 2024, §4.2 and algorithm 2) use it with a beta-binomial(N, 1, 1) prior, i.e. the
uniform prior on {0, …, N}, which is what this module implements.

After t draws with S ones and F = t − S zeros:

- the probability of the observed sequence when the population holds n ones is
  L_t(n) = [n]_S·[N − n]_F / [N]_t (falling factorials), zero outside [S, N − F];
- its prior average, the marginal probability, is B(S + 1, F + 1) = S!·F!/(t + 1)!;
- M_t(n) = B(S + 1, F + 1)/L_t(n) is the prior-posterior ratio. At the true count it
  is a nonnegative martingale with M_0 = 1, so by Ville's inequality
  C_t = {n ∈ [S, N − F] : M_t(n) < 1/α} contains the true count at every t at once
  with probability at least 1 − α.

L_t(n + 1)/L_t(n) = (n + 1)(N − n − F)/((n + 1 − S)(N − n)) is decreasing in n, so L_t
is log-concave: C_t is an integer interval around the mode m = ⌊(S·N − F)/t⌋ + 1
(clamped to [S, N − F]; M_t(m) ≤ 1 because L_t(m) is at least the prior average), and
each end is found by binary search in O(log N) evaluations of log L_t with lgamma.
Every integer n is a candidate; no grid is involved.

Exactness. Writing α = a/d exactly (α is a binary64 number), n ∈ C_t if and only if
a·S!·F!·[N]_t < d·(t + 1)!·[n]_S·[N − n]_F. Each membership test answers that integer
comparison exactly, in up to three tiers:

1. binary64 ``math.lgamma``: decides when |log(α·M_t(n))| exceeds a rigorous margin
   (64 ulps of the sum of the magnitudes of the terms, plus 2**-40);
2. if the integers would be large, ``decimal`` at 60 digits with Stirling's series,
   whose remainder is bounded by the first neglected term (DLMF 5.11(ii)): decides
   when the value clears its error bound;
3. the integer comparison itself (exact ties, and small problems where it is cheap).
"""

from __future__ import annotations

import decimal
import functools
import math
import sys
from collections.abc import Callable
from decimal import Decimal
from fractions import Fraction

from .. import limits
from ..errors import LimitExceededError, ParameterError
from .base import check_probability

#: Relative error allowed for each binary64 term (lgamma and log: a few ulps at most).
_FLOAT_MARGIN = 64 * sys.float_info.epsilon
#: Absolute slack on top of the relative margin.
_TINY = 2.0**-40
#: Above this many bits (t·bitlength(N)), tier 2 runs before the exact comparison.
_SMALL_EXACT_BITS = 1 << 14
#: Significant digits of the ``decimal`` tier.
_DECIMAL_DIGITS = 60
#: Stirling's series serves ln Γ(z) for z at least this; below, exact factorials do.
_STIRLING_MIN_Z = 80
#: Most terms of Stirling's series tried (about 22 suffice at z = 80, 60 digits).
_STIRLING_MAX_TERMS = 40


def _check_arguments(n_pairs: int, draws: int, successes: int, alpha: float) -> float:
    """Validate the arguments of :func:`pprm_interval`; return α as a float."""
    for name, value in (("n_pairs", n_pairs), ("draws", draws), ("successes", successes)):
        if isinstance(value, bool) or not isinstance(value, int):
            raise ParameterError(f"{name} must be an integer, got {value!r}")
    if n_pairs < 1:
        raise ParameterError(f"n_pairs must be positive, got {n_pairs}")
    if n_pairs > limits.MAX_PAIRS:
        raise LimitExceededError("n_pairs", n_pairs, limits.MAX_PAIRS)
    if not 0 <= successes <= draws <= n_pairs:
        raise ParameterError(
            f"need 0 <= successes <= draws <= n_pairs, got {successes}, {draws}, {n_pairs}"
        )
    return check_probability("alpha", alpha)


# --- tier 3: exact integers ------------------------------------------------------------


def _member_exact(n_pairs: int, draws: int, successes: int, n: int, alpha: float) -> bool:
    """Decide M_t(n) < 1/α by the integer comparison (module docstring)."""
    failures = draws - successes
    num, den = alpha.as_integer_ratio()
    lhs = num * math.factorial(successes) * math.factorial(failures) * math.perm(n_pairs, draws)
    rhs = (
        den * math.factorial(draws + 1) * math.perm(n, successes) * math.perm(n_pairs - n, failures)
    )
    return lhs < rhs


# --- tier 2: decimal with Stirling's series --------------------------------------------


@functools.cache
def _stirling_coefficients(digits: int) -> tuple[Decimal, ...]:
    """Return B_2k/(2k(2k − 1)) for k = 1, 2, … as decimals of ``digits`` digits."""
    # Bernoulli numbers from Σ_{j=0}^{m} C(m + 1, j)·B_j = 0 (m ≥ 1), B_0 = 1.
    bernoulli = [Fraction(1)]
    for m in range(1, 2 * _STIRLING_MAX_TERMS + 1):
        total = sum((math.comb(m + 1, j) * bernoulli[j] for j in range(m)), Fraction(0))
        bernoulli.append(-total / (m + 1))
    coefficients = (
        bernoulli[2 * k] / (2 * k * (2 * k - 1)) for k in range(1, _STIRLING_MAX_TERMS + 1)
    )
    with decimal.localcontext(decimal.Context(prec=digits)):
        return tuple(Decimal(c.numerator) / c.denominator for c in coefficients)


def _stirling_core(z: int) -> tuple[Decimal, Decimal]:
    """Return (z − ½)·ln z − z + Σ_k B_2k/(2k(2k − 1)·z^(2k − 1)) and its remainder bound.

    ln Γ(z) is this plus ½·ln(2π); for real z > 0 the series' remainder is bounded by
    its first neglected term (DLMF 5.11(ii)). Runs in the caller's decimal context; the
    bound is infinite if the series has not converged within the allowed terms.
    """
    digits = decimal.getcontext().prec
    dz = Decimal(z)
    value = (dz - Decimal("0.5")) * dz.ln() - dz
    inverse = 1 / dz
    inverse_sq = inverse * inverse
    power = inverse
    cutoff = Decimal(10) ** -digits
    for coeff in _stirling_coefficients(digits):
        term = coeff * power
        if abs(term) < cutoff:
            return value, abs(term)
        value += term
        power *= inverse_sq
    return value, Decimal("Infinity")  # pragma: no cover - converges by z = 80


@functools.cache
def _half_log_2pi(digits: int) -> tuple[Decimal, Decimal]:
    """Return ½·ln(2π) and an error bound, calibrated as ln((z − 1)!) − core(z), z = 80."""
    with decimal.localcontext(decimal.Context(prec=digits)):
        z = _STIRLING_MIN_Z
        exact = Decimal(math.factorial(z - 1)).ln()
        core, remainder = _stirling_core(z)
        value = exact - core
        error = remainder + Decimal(10) ** (3 - digits) * (exact + abs(core) + z)
        return value, error


def _log_factorial(m: int) -> tuple[Decimal, Decimal]:
    """Return ln(m!) and a bound on its error, in the caller's decimal context."""
    digits = decimal.getcontext().prec
    rounding = Decimal(10) ** (3 - digits)  # a few roundings, each under one final unit
    if m + 1 < _STIRLING_MIN_Z:
        value = Decimal(math.factorial(m)).ln()
        return value, rounding * (value + 1)
    core, remainder = _stirling_core(m + 1)
    constant, constant_error = _half_log_2pi(digits)
    value = core + constant
    return value, remainder + constant_error + rounding * (abs(core) + m + 2)


def _sign_decimal(n_pairs: int, draws: int, successes: int, n: int, alpha: float) -> int:
    """Return the sign of log(α·M_t(n)) from tier 2, or 0 when it cannot tell."""
    failures = draws - successes
    plus = (successes, failures, n_pairs, n - successes, n_pairs - n - failures)
    minus = (draws + 1, n_pairs - draws, n, n_pairs - n)
    with decimal.localcontext(decimal.Context(prec=_DECIMAL_DIGITS)):
        total = Decimal(alpha).ln()  # Decimal(float) is exact; ln is correctly rounded
        size = abs(total) + 1
        error = Decimal(0)
        for sign, args in ((1, plus), (-1, minus)):
            for m in args:
                value, value_error = _log_factorial(m)
                total += sign * value
                size += value
                error += value_error
        error += Decimal(10) ** (3 - _DECIMAL_DIGITS) * size  # the additions above
    if total > error:
        return 1
    if total < -error:
        return -1
    return 0


# --- tier 1: binary64 filter and the interval search -----------------------------------


def _member_precise(n_pairs: int, draws: int, successes: int, n: int, alpha: float) -> bool:
    """Decide membership where binary64 could not: tier 2 if the integers are large, then 3."""
    if draws * n_pairs.bit_length() > _SMALL_EXACT_BITS:
        sign = _sign_decimal(n_pairs, draws, successes, n, alpha)
        if sign:
            return sign < 0
    return _member_exact(n_pairs, draws, successes, n, alpha)


def _membership(n_pairs: int, draws: int, successes: int, alpha: float) -> Callable[[int], bool]:
    """Return the exact predicate n ↦ (M_t(n) < 1/α) for n in [S, N − F], t ≥ 1."""
    lgamma = math.lgamma
    failures = draws - successes
    # log(α·M_t(n)) = log S! + log F! − log (t+1)! + log N! − log (N−t)! + log α
    #                 − (log n! − log (n−S)! + log (N−n)! − log (N−n−F)!)
    fixed = (
        lgamma(successes + 1),
        lgamma(failures + 1),
        -lgamma(draws + 2),
        lgamma(n_pairs + 1),
        -lgamma(n_pairs - draws + 1),
        math.log(alpha),
    )
    fixed_value = sum(fixed)
    fixed_size = sum(map(abs, fixed))

    def member(n: int) -> bool:
        a = lgamma(n + 1)
        b = lgamma(n - successes + 1)
        c = lgamma(n_pairs - n + 1)
        d = lgamma(n_pairs - n - failures + 1)
        value = fixed_value - (a - b + c - d)
        margin = _FLOAT_MARGIN * (fixed_size + a + b + c + d) + _TINY  # lgamma ≥ 0 here
        if value < -margin:
            return True
        if value > margin:
            return False
        return _member_precise(n_pairs, draws, successes, n, alpha)

    return member


def _first_true(pred: Callable[[int], bool], lo: int, hi: int, guess: int | None = None) -> int:
    """Return the least x in [lo, hi] with pred(x), or hi + 1 if none.

    ``pred`` must be false then true on [lo, hi]. With a ``guess``, the search gallops
    out from it (1, 2, 4, … steps) before bisecting, so a good guess costs O(1) calls.
    """
    end = hi + 1  # the answer lies in [lo, end]
    if guess is not None and lo <= guess <= hi:
        step = 1
        if pred(guess):
            end = guess
            while guess - step >= lo:
                if not pred(guess - step):
                    lo = guess - step + 1
                    break
                end = guess - step
                step *= 2
        else:
            lo = guess + 1
            while guess + step <= hi:
                if pred(guess + step):
                    end = guess + step
                    break
                lo = guess + step + 1
                step *= 2
    while lo < end:
        mid = (lo + end) // 2
        if pred(mid):
            end = mid
        else:
            lo = mid + 1
    return lo


def _mode(n_pairs: int, draws: int, successes: int) -> int:
    """Return a maximiser of L_t over [S, N − F]: L_t(n + 1) ≥ L_t(n) iff t·n ≤ S·N − F."""
    failures = draws - successes
    return min(max((successes * n_pairs - failures) // draws + 1, successes), n_pairs - failures)


def _lower_end(n_pairs: int, draws: int, successes: int, alpha: float) -> int:
    """Return min C_t for validated arguments."""
    if draws == 0:
        return 0
    member = _membership(n_pairs, draws, successes, alpha)
    mode = _mode(n_pairs, draws, successes)
    return _first_true(member, successes, mode - 1)  # the mode is always in C_t


def pprm_interval(n_pairs: int, draws: int, successes: int, alpha: float) -> tuple[int, int]:
    """Return C_t = [lower, upper], the PPRM confidence set for the number of ones.

    ``draws`` = t pairs opened so far out of ``n_pairs`` = N, ``successes`` = S of them
    ones, confidence level 1 − ``alpha``. The result is every integer n in [S, N − F]
    with M_t(n) < 1/α, decided exactly (module docstring); at t = 0 it is [0, N].
    O(log N) lgamma evaluations.

    Raises :class:`ParameterError` unless 0 ≤ S ≤ t ≤ N and 0 < α < 1, and
    :class:`LimitExceededError` when N exceeds ``limits.MAX_PAIRS``.
    """
    alpha = _check_arguments(n_pairs, draws, successes, alpha)
    if draws == 0:
        return 0, n_pairs
    member = _membership(n_pairs, draws, successes, alpha)
    mode = _mode(n_pairs, draws, successes)
    lower = _first_true(member, successes, mode - 1)
    upper = _first_true(lambda n: not member(n), mode + 1, n_pairs - (draws - successes)) - 1
    return lower, upper


def min_successes_for_lower(n_pairs: int, alpha: float, target: int, max_draws: int) -> list[int]:
    """Return, for t = 0 … ``max_draws``, the least S with min C_t ≥ ``target`` (t + 1 if none).

    The lower end of C_t is nondecreasing in S at fixed (N, t, α). Raising S by one
    multiplies the posterior at n by r(n) = F·(n − S)/((S + 1)·(N − n − F + 1)), and
    r(n) ≤ 1 for every n ≤ (S·N − F)/t, i.e. below the mode; so a point left of C_t
    (where M_t(n) ≥ 1/α) stays out when S grows. Hence the least S is found by
    bisection, starting from the previous t's answer.
    """
    alpha = _check_arguments(n_pairs, 0, 0, alpha)
    if isinstance(target, bool) or not isinstance(target, int):
        raise ParameterError(f"target must be an integer, got {target!r}")
    if isinstance(max_draws, bool) or not isinstance(max_draws, int):
        raise ParameterError(f"max_draws must be an integer, got {max_draws!r}")
    if not 0 <= max_draws <= n_pairs:
        raise ParameterError(f"max_draws must lie in [0, {n_pairs}], got {max_draws}")
    boundary: list[int] = []
    guess = 0
    for t in range(max_draws + 1):

        def reaches(s: int, t: int = t) -> bool:
            return _lower_end(n_pairs, t, s, alpha) >= target

        guess = _first_true(reaches, 0, t, min(guess, t))
        boundary.append(guess)
    return boundary
