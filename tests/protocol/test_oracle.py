"""The SPRT that knows q (the yardstick of issue #39) and the lower bound for any test."""

import math
from fractions import Fraction

import numpy as np
import pytest

from twinaudit.protocol.errors import ParameterError
from twinaudit.protocol.stats import power
from twinaudit.protocol.stats.base import TiePolicy
from twinaudit.protocol.stats.minimax import bayes_rule, oracle_pairs, ratio_lower_bound
from twinaudit.protocol.stats.mixture import detection_boundary
from twinaudit.protocol.stats.oracle import oracle_boundary


def _least_exact(q: float, p: float, t: int) -> int:
    """The fewest ones among t draws with (2q)^S (2(1 − q))^F ≥ 1/p, in rationals."""
    two_q, two_rest, bound = 2 * Fraction(q), 2 * (1 - Fraction(q)), 1 / Fraction(p)
    return next((s for s in range(t + 1) if two_q**s * two_rest ** (t - s) >= bound), t + 1)


@pytest.mark.parametrize("q", [0.55, 0.6, 0.75, 0.9, 0.99, 1.0])
@pytest.mark.parametrize("p", [0.05, 0.001])
def test_oracle_boundary_is_the_exact_least_count(q, p):
    boundary = oracle_boundary(q, p, 60)
    assert boundary == [1] + [_least_exact(q, p, t) for t in range(1, 61)]


def test_oracle_boundary_decides_exact_equality_as_detection():
    # q = 1: Λ_5 = 2^5 = 32, exactly 1/p at p = 1/32; one ulp either side decides the other way.
    assert oracle_boundary(1.0, 2.0**-5, 6)[5] == 5
    assert oracle_boundary(1.0, math.nextafter(2.0**-5, 1.0), 6)[5] == 5
    assert oracle_boundary(1.0, math.nextafter(2.0**-5, 0.0), 6)[5] == 6


def test_oracle_plan_matches_the_issue_and_the_walk_to_five_ones():
    at_one = power.oracle_plan(5000, 1.0, 0.05)
    assert at_one is not None and at_one.expected_pairs == 5.0  # 2^5 > 20 > 2^4
    low = power.oracle_plan(5000, 0.55, 0.05)
    assert low is not None and 600 < low.expected_pairs < 615  # issue #39: 607
    assert power.oracle_plan(5000, 0.5, 0.05) is None
    # Under coin ties the oracle knows the rate it is fed, (1 − τ)q + τ/2.
    coin = power.oracle_plan(500, 0.8, 0.05, tie_fraction=0.5, tie_rule=TiePolicy.COIN)
    assert coin == power.oracle_plan(500, 0.65, 0.05)
    assert power.oracle_plan(500, 0.45, 0.05, tie_fraction=0.9) is None
    skip = power.oracle_plan(500, 0.8, 0.05, tie_fraction=0.5, tie_rule=TiePolicy.SKIP)
    assert (
        skip is not None and skip.expected_pairs > power.oracle_plan(500, 0.8, 0.05).expected_pairs
    )
    with pytest.raises(ParameterError):
        power.oracle_plan(500, 0.8, 0.05, tie_fraction=1.0)
    with pytest.raises(ParameterError):
        oracle_boundary(0.5, 0.05, 10)


def _weighted_cost(boundary, rates, costs, price, n):
    total = 0.0
    for q, cost in zip(rates, costs, strict=True):
        figures = power.Power.from_survival(power.iid_survival(boundary, n, q))
        total += cost * figures.expected_pairs
    null = power.Power.from_survival(power.iid_survival(boundary, n, 0.5))
    return total + price * null.detection_probability


def test_bayes_rule_attains_its_value_and_no_test_does_better():
    rates, costs, price, n = [0.6, 0.8, 0.95], [0.02, 0.05, 0.1], 7.0, 80
    rule = bayes_rule(rates, costs, price, n)
    assert _weighted_cost(rule.boundary, rates, costs, price, n) == pytest.approx(rule.value)
    others = [detection_boundary(p, n) for p in (0.2, 0.05, 0.001)]
    others += [oracle_boundary(q, 0.05, n) for q in rates]
    for boundary in others:
        assert _weighted_cost(boundary, rates, costs, price, n) >= rule.value - 1e-12


def test_ratio_lower_bound_is_below_every_level_p_test():
    n, p = 300, 0.05
    weights = {0.6: 0.4, 0.75: 0.2, 0.95: 0.4}
    bound = ratio_lower_bound(weights, 8.0, p, n)
    assert bound > 0.5
    for boundary in (detection_boundary(p, n), oracle_boundary(0.7, p, n)):
        worst = max(
            power.Power.from_survival(power.iid_survival(boundary, n, q)).expected_pairs
            / oracle_pairs(q, p, n)
            for q in weights
        )
        assert worst >= bound
    with pytest.raises(ParameterError):
        ratio_lower_bound({0.6: 0.0}, 8.0, p, n)
    with pytest.raises(ParameterError):
        bayes_rule([0.5], [1.0], 1.0, 10)
    assert np.isfinite(bound)
