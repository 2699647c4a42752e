"""PPRM confidence sets (twinaudit.protocol.stats.pprm): exactness, shape, coverage, cost."""

from __future__ import annotations

import decimal
import math
import sys
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.special import gammaln

from twinaudit.protocol import limits
from twinaudit.protocol.errors import LimitExceededError, ParameterError
from twinaudit.protocol.stats import pprm
from twinaudit.protocol.stats.pprm import min_successes_for_lower, pprm_interval


def ratio(N: int, t: int, S: int, n: int) -> Fraction:
    """M_t(n) = B(S+1, F+1) / L_t(n), as an exact rational (n in [S, N-F])."""
    F = t - S
    marginal = Fraction(math.factorial(S) * math.factorial(F), math.factorial(t + 1))
    likelihood = Fraction(math.perm(n, S) * math.perm(N - n, F), math.perm(N, t))
    return marginal / likelihood


def float_log_ratio(N: int, t: int, S: int, n: int) -> float:
    """log M_t(n) in plain binary64 from lgamma, with no error control."""
    F, lg = t - S, math.lgamma
    fixed = lg(S + 1) + lg(F + 1) - lg(t + 2) + lg(N + 1) - lg(N - t + 1)
    return fixed - (lg(n + 1) - lg(n - S + 1) + lg(N - n + 1) - lg(N - n - F + 1))


def brute_force(N: int, t: int, S: int, alpha: float) -> list[int]:
    """Every n in [S, N-F] with M_t(n) < 1/alpha, by exact rational arithmetic."""
    bound = 1 / Fraction(alpha)
    return [n for n in range(S, N - (t - S) + 1) if ratio(N, t, S, n) < bound]


def as_interval(members: list[int]) -> tuple[int, int]:
    assert members, "the confidence set is never empty"
    assert members == list(range(members[0], members[-1] + 1)), "not an interval"
    return members[0], members[-1]


alphas = st.one_of(
    st.sampled_from([0.5, 0.1, 0.05, 0.025, 0.01, 1e-3, 1e-9]),
    st.floats(min_value=1e-12, max_value=0.999, allow_nan=False, allow_infinity=False),
)


@st.composite
def samples(draw: st.DrawFn, max_n: int = 150) -> tuple[int, int, int, float]:
    N = draw(st.integers(1, max_n))
    t = draw(st.integers(0, N))
    S = draw(st.integers(0, t))
    return N, t, S, draw(alphas)


# --- definition and exactness ----------------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(samples())
def test_interval_equals_exact_brute_force(case: tuple[int, int, int, float]) -> None:
    N, t, S, alpha = case
    assert pprm_interval(N, t, S, alpha) == as_interval(brute_force(N, t, S, alpha))


@pytest.mark.parametrize(("N", "t", "S"), [(7, 3, 1), (12, 5, 5), (20, 9, 0), (30, 30, 17)])
def test_marginal_is_the_prior_average_of_the_likelihood(N: int, t: int, S: int) -> None:
    # B(S+1, F+1) = sum_n L_t(n)/(N+1): the uniform (beta-binomial a=b=1) prior.
    F = t - S
    average = sum(
        Fraction(math.perm(n, S) * math.perm(N - n, F), math.perm(N, t)) for n in range(N + 1)
    ) / (N + 1)
    assert average == Fraction(math.factorial(S) * math.factorial(F), math.factorial(t + 1))


@pytest.mark.parametrize(
    ("N", "t", "S", "alpha"),
    [(10_000, 500, 280, 0.025), (20_000, 3000, 1400, 0.05), (12_345, 12_000, 6000, 0.01)]
    + [(10_000, t, s, 0.0301) for t, s in [(1, 1), (2, 0), (50, 49), (9999, 5000)]],
)
def test_interval_matches_vectorised_float_scan(N: int, t: int, S: int, alpha: float) -> None:
    F = t - S
    n = np.arange(S, N - F + 1, dtype=np.float64)
    log_ratio = (
        gammaln(S + 1) + gammaln(F + 1) - gammaln(t + 2) + gammaln(N + 1) - gammaln(N - t + 1)
    ) - (gammaln(n + 1) - gammaln(n - S + 1) + gammaln(N - n + 1) - gammaln(N - n - F + 1))
    gap = log_ratio + math.log(alpha)
    inside = np.flatnonzero(gap < 0) + S
    assert np.min(np.abs(gap)) > 1e-6, "float scan is ambiguous here; pick another case"
    assert pprm_interval(N, t, S, alpha) == (int(inside[0]), int(inside[-1]))


def _spy(monkeypatch: pytest.MonkeyPatch, name: str) -> list[tuple[int, ...]]:
    calls: list[tuple[int, ...]] = []
    original = getattr(pprm, name)

    def wrapper(*args: int) -> object:
        calls.append(args)
        return original(*args)

    monkeypatch.setattr(pprm, name, wrapper)
    return calls


def test_float_near_tie_is_decided_by_exact_arithmetic(monkeypatch: pytest.MonkeyPatch) -> None:
    # alpha is the binary64 number nearest 1/M_t(n) at the lower end, so log(alpha*M)
    # is within rounding of zero; its two float neighbours straddle the exact tie.
    N, t, S = 60, 20, 14
    lower, _ = pprm_interval(N, t, S, 0.05)
    M = ratio(N, t, S, lower)
    alpha = float(1 / M)
    assert alpha * M != 1
    assert abs(math.log(M) + math.log(alpha)) < 1e-12
    below, above = math.nextafter(alpha, 0), math.nextafter(alpha, 1)
    assert below * M < 1 < above * M  # exact: lower is in C_t at `below`, out at `above`
    # Plain binary64 (lgamma sums against -log alpha) cannot follow the exact answer
    # across three consecutive floats: it gets at least one of them wrong.
    naive = [float_log_ratio(N, t, S, lower) < -math.log(a) for a in (below, alpha, above)]
    assert naive != [a * M < 1 for a in (below, alpha, above)]
    exact_calls = _spy(monkeypatch, "_member_exact")
    for a in (below, alpha, above):
        exact_calls.clear()
        got = pprm_interval(N, t, S, a)
        assert got == as_interval(brute_force(N, t, S, a))
        assert (N, t, S, lower, a) in exact_calls
    assert pprm_interval(N, t, S, below)[0] == lower
    assert pprm_interval(N, t, S, above)[0] == lower + 1


def test_exact_ties_are_excluded() -> None:
    # t=1, S=1: M_1(n) = N/(2n). With N = 1024 and alpha = 1/32, M(16) = 32 = 1/alpha
    # exactly, and membership needs M < 1/alpha strictly.
    assert pprm_interval(1024, 1, 1, 1 / 32) == (17, 1024)
    assert pprm_interval(1024, 1, 1, math.nextafter(1 / 32, 0)) == (16, 1024)
    assert pprm_interval(10_000, 1, 1, 0.025) == (126, 10_000)  # M(125) = 40 = 1/alpha


def test_large_tie_goes_through_decimal_then_exact(monkeypatch: pytest.MonkeyPatch) -> None:
    # t = N-2 ones out of N-2 draws: M(N-2) = N/2 exactly; alpha = 2/N ties it.
    N = 4096
    decimal_calls = _spy(monkeypatch, "_sign_decimal")
    exact_calls = _spy(monkeypatch, "_member_exact")
    assert pprm_interval(N, N - 2, N - 2, 2 / N) == (N - 1, N)
    assert decimal_calls == [(N, N - 2, N - 2, N - 2, 2 / N)]
    assert exact_calls == decimal_calls
    assert pprm_interval(N, N - 2, N - 2, math.nextafter(2 / N, 0)) == (N - 2, N)


def test_decimal_tier_decides_near_ties_at_scale(monkeypatch: pytest.MonkeyPatch) -> None:
    # Large t: tier 2 decides a float near-tie without the (costly) integer comparison.
    N, t, S = 1_000_000, 5000, 3100
    lower, _ = pprm_interval(N, t, S, 0.025)
    log_m = float_log_ratio(N, t, S, lower)
    alpha = math.exp(-log_m)  # log(alpha*M) is now within float noise of zero
    exact_calls = _spy(monkeypatch, "_member_exact")
    decimal_calls = _spy(monkeypatch, "_sign_decimal")
    got = pprm_interval(N, t, S, alpha)
    assert decimal_calls
    assert not exact_calls
    assert got[0] in (lower, lower + 1)
    # The same answer from the integer comparison itself.
    assert pprm._member_exact(N, t, S, got[0], alpha)
    assert not pprm._member_exact(N, t, S, got[0] - 1, alpha)


def test_lgamma_error_is_far_inside_the_float_margin() -> None:
    # The tier-1 margin assumes each lgamma value is within 64 ulps of ln(m!); check
    # that assumption against the decimal tier (60 digits) on many arguments.
    rng = np.random.default_rng(20240601)
    ms = {*range(200), *rng.integers(0, limits.MAX_PAIRS + 1, 300).tolist(), limits.MAX_PAIRS}
    worst = 0.0
    with decimal.localcontext(decimal.Context(prec=60)):
        for m in sorted(ms):
            exact, bound = pprm._log_factorial(m)
            assert bound < decimal.Decimal("1e-40")
            error = abs(decimal.Decimal(math.lgamma(m + 1)) - exact)
            worst = max(worst, float(error) / max(float(exact), 1.0) / sys.float_info.epsilon)
            assert error <= decimal.Decimal(64 * sys.float_info.epsilon) * exact + decimal.Decimal(
                2**-40
            )
    assert worst < 8, f"lgamma off by {worst} ulps"


# --- shape -----------------------------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 400), st.floats(0.001, 0.5), st.data())
def test_bounds_are_monotone_in_successes(N: int, alpha: float, data: st.DataObject) -> None:
    t = data.draw(st.integers(1, N))
    ends = [pprm_interval(N, t, S, alpha) for S in range(t + 1)]
    lowers, uppers = [e[0] for e in ends], [e[1] for e in ends]
    assert lowers == sorted(lowers)
    assert uppers == sorted(uppers)


@settings(max_examples=100, deadline=None)
@given(samples(max_n=5000))
def test_swapping_ones_and_zeros_mirrors_the_interval(case: tuple[int, int, int, float]) -> None:
    N, t, S, alpha = case
    lower, upper = pprm_interval(N, t, S, alpha)
    assert pprm_interval(N, t, t - S, alpha) == (N - upper, N - lower)
    assert S <= lower <= upper <= N - (t - S)


def test_boundary_cases() -> None:
    assert pprm_interval(50, 0, 0, 0.05) == (0, 50)
    assert pprm_interval(1, 1, 1, 0.05) == (1, 1)
    assert pprm_interval(1, 1, 0, 0.05) == (0, 0)
    for S in (0, 17, 50):
        assert pprm_interval(50, 50, S, 0.05) == (S, S)  # full census: the count is known
    assert pprm_interval(limits.MAX_PAIRS, 1, 1, 0.05)[1] == limits.MAX_PAIRS


def test_min_successes_for_lower_matches_interval() -> None:
    N, alpha, target = 300, 0.05, 170
    boundary = min_successes_for_lower(N, alpha, target, N)
    assert len(boundary) == N + 1
    for t, b in enumerate(boundary):
        if b <= t:
            assert pprm_interval(N, t, b, alpha)[0] >= target
        if b >= 1:
            assert pprm_interval(N, t, b - 1, alpha)[0] < target


# --- coverage: the confidence-sequence guarantee under sampling without replacement -----


def miss_probability(N: int, ones: int, alpha: float) -> float:
    """Exact P(exists t: ones not in C_t) when drawing WoR from `ones` ones among N."""
    too_high = np.array(min_successes_for_lower(N, alpha, ones + 1, N))  # lower > ones
    # upper < ones  <=>  (mirror) the lower end for F ones exceeds N - ones
    too_low = np.array(min_successes_for_lower(N, alpha, N - ones + 1, N))
    prob = np.zeros(N + 1)
    prob[0] = 1.0
    missed = 0.0
    s = np.arange(N + 1)
    for t in range(N):
        p_one = np.clip((ones - s) / (N - t), 0.0, 1.0)
        nxt = prob * (1 - p_one)
        nxt[1:] += (prob * p_one)[:-1]
        failures = t + 1 - s
        out = (s >= too_high[t + 1]) | ((failures >= too_low[t + 1]) & (failures >= 0))
        missed += nxt[out].sum()
        nxt[out] = 0.0
        prob = nxt
    return float(missed)


@pytest.mark.parametrize("ones", [0, 23, 100, 131, 200])
def test_exact_coverage_without_replacement(ones: int) -> None:
    alpha = 0.05
    assert miss_probability(200, ones, alpha) <= alpha


def test_simulated_coverage_without_replacement() -> None:
    N, ones, alpha, runs = 200, 120, 0.1, 4000
    rng = np.random.default_rng(7)
    population = np.zeros(N, dtype=np.int64)
    population[:ones] = 1
    orders = rng.permuted(np.tile(population, (runs, 1)), axis=1)
    counts = np.cumsum(orders, axis=1)
    t = np.arange(1, N + 1)
    high = np.array(min_successes_for_lower(N, alpha, ones + 1, N))[1:]
    low = np.array(min_successes_for_lower(N, alpha, N - ones + 1, N))[1:]
    missed = ((counts >= high) | (t - counts >= low)).any(axis=1).mean()
    assert missed <= alpha
    assert abs(missed - miss_probability(N, ones, alpha)) < 0.02


# --- cost and validation ---------------------------------------------------------------


def test_each_call_costs_logarithmically_many_lgamma_calls(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    count = 0
    original = math.lgamma

    def counting(x: float) -> float:
        nonlocal count
        count += 1
        return original(x)

    monkeypatch.setattr(math, "lgamma", counting)
    for N, t, S in [(10**6, 10**4, 6000), (limits.MAX_PAIRS, 123_456, 70_000), (10**6, 7, 3)]:
        count = 0
        pprm_interval(N, t, S, 0.025)
        assert count <= 5 + 4 * 2 * (N.bit_length() + 1)


@pytest.mark.parametrize(
    ("args", "error"),
    [
        ((10, 3, 4, 0.05), ParameterError),  # S > t
        ((10, 11, 4, 0.05), ParameterError),  # t > N
        ((10, -1, 0, 0.05), ParameterError),
        ((0, 0, 0, 0.05), ParameterError),
        ((10, 3, 1, 0.0), ParameterError),
        ((10, 3, 1, 1.0), ParameterError),
        ((10, 3, 1, math.nan), ParameterError),
        ((10, 3, 1, True), ParameterError),
        ((10.0, 3, 1, 0.05), ParameterError),
        ((10, True, 1, 0.05), ParameterError),
        ((limits.MAX_PAIRS + 1, 3, 1, 0.05), LimitExceededError),
    ],
)
def test_invalid_arguments(args: tuple[int, int, int, float], error: type[Exception]) -> None:
    with pytest.raises(error):
        pprm_interval(*args)
