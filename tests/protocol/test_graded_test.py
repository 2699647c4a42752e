"""The graded mixture test (spec §7.5): grades, exactness, the martingale and the bound."""

import itertools
import random
from fractions import Fraction

import pytest

from twinaudit.protocol.errors import InputError, ParameterError, StateError
from twinaudit.protocol.stats import mixture
from twinaudit.protocol.stats.base import Decision
from twinaudit.protocol.stats.graded import (
    GRADE_QUARTERS,
    GradedMixtureTest,
    e_value,
    grade_of,
    log_e_value,
    reaches,
)
from twinaudit.protocol.stats.mixture_prior import DEFAULT_PRIOR
from twinaudit.protocol.stats.registry import make_test
from twinaudit.protocol.stats.registry import test_from_state as restore


def test_grades_by_decade_of_the_margin():
    assert grade_of(0.01, 0.01) == 0
    assert grade_of(-0.0100001, 0.01) == 1
    assert grade_of(0.1, 0.01) == 1
    assert grade_of(0.10000001, 0.01) == 2
    assert grade_of(-1.0, 0.01) == 2
    assert grade_of(1.0000001, 0.01) == 3
    assert grade_of(5e-324, 0.0) == 3 and grade_of(0.0, 0.0) == 0
    with pytest.raises(ParameterError):
        grade_of(0.5, -0.01)
    with pytest.raises(InputError):
        grade_of(float("nan"), 0.01)


def test_grade_three_alone_is_the_mixture_test():
    rng = random.Random(3)
    for _ in range(30):
        t = rng.randrange(0, 60)
        s = rng.randrange(0, t + 1)
        assert e_value(((0, 0), (0, 0), (s, t - s))) == mixture.e_value(t, s)
        for p in (0.05, 0.01):
            assert reaches(((0, 0), (0, 0), (s, t - s)), p) == mixture.reaches(t, s, p)


def test_order_does_not_matter_and_state_round_trips():
    outcomes = [(1, 1), (1, 3), (0, 2), (1, 2), (1, 1), (0, 1), (1, 3)]
    a, b = GradedMixtureTest(50), GradedMixtureTest(50)
    for bit, grade in outcomes:
        a.update(bit, grade)
    for bit, grade in reversed(outcomes):
        b.update(bit, grade)
    assert a.state() == b.state()
    restored = restore(a.state())
    assert restored.state() == a.state()
    assert restored.update(1, 3).log_statistic == a.update(1, 3).log_statistic


def test_needs_a_grade_and_stops_after_deciding():
    test = make_test("mixture-graded", 30, 0.05)
    with pytest.raises(InputError):
        test.update(1)
    with pytest.raises(InputError):
        test.update(1, 0)
    while test.decision is Decision.CONTINUE:
        test.update(1, 3)
    assert test.decision is Decision.DETECTED and test.draws == 6
    with pytest.raises(StateError):
        test.update(1, 3)


def test_smaller_bets_need_more_ones():
    full = GradedMixtureTest(100)
    half = GradedMixtureTest(100)
    while full.decision is Decision.CONTINUE:
        full.update(1, 3)
    while half.decision is Decision.CONTINUE:
        half.update(1, 1)
    assert full.draws < half.draws


def test_float_path_agrees_with_the_integers():
    rng = random.Random(5)
    for _ in range(200):
        counts = tuple((rng.randrange(0, 40), rng.randrange(0, 25)) for _ in range(3))
        exact = e_value(counts)
        for p in (0.05, 0.001):
            assert reaches(counts, p) == (exact * Fraction(p) >= 1), counts
        if exact:
            assert abs(log_e_value(counts) - _ln(exact)) < 1e-9


def _ln(fraction):
    import math

    return math.log(fraction.numerator) - math.log(fraction.denominator)


def test_every_factor_has_mean_one_under_h0():
    """E[M_{t+1} | past, grade] = M_t exactly, for every atom and grade (spec §7.5.5)."""
    r = DEFAULT_PRIOR.resolution
    for a, _ in DEFAULT_PRIOR.atoms:
        for j in GRADE_QUARTERS:
            up = Fraction(4 * r + (2 * a - r) * j, 4 * r)
            down = Fraction(4 * r - (2 * a - r) * j, 4 * r)
            assert up >= 0 and down >= 0
            assert (up + down) / 2 == 1
    start = ((2, 1), (0, 1), (1, 0))
    for grade in range(3):
        plus = [list(c) for c in start]
        minus = [list(c) for c in start]
        plus[grade][0] += 1
        minus[grade][1] += 1
        mean = (e_value(tuple(map(tuple, plus))) + e_value(tuple(map(tuple, minus)))) / 2
        assert mean == e_value(start)


def test_false_detection_at_most_p_exactly():
    """P(detect within 24 fair bits) <= p, in exact rationals, for fixed grade sequences."""
    p = 0.05
    for pattern in ((1,), (3,), (1, 2, 3), (1, 1, 3), (3, 2, 1, 1)):
        grades = list(itertools.islice(itertools.cycle(pattern), 24))
        alive = {((0, 0), (0, 0), (0, 0)): Fraction(1)}
        detected = Fraction(0)
        for g in grades:
            nxt: dict = {}
            for counts, mass in alive.items():
                for bit in (0, 1):
                    c = [list(x) for x in counts]
                    c[g - 1][0 if bit else 1] += 1
                    key = tuple(map(tuple, c))
                    if reaches(key, p):
                        detected += mass / 2
                    else:
                        nxt[key] = nxt.get(key, Fraction(0)) + mass / 2
            alive = nxt
        assert detected <= Fraction(p), (pattern, float(detected))


def test_restoring_checks_the_grades():
    test = GradedMixtureTest(20)
    test.update(1, 2)
    state = test.state()
    state["grades"] = [0, 0, 1, 0, 0, 1]
    with pytest.raises(InputError):
        GradedMixtureTest.from_state(state)
    state = test.state()
    del state["grades"]
    with pytest.raises(InputError):
        GradedMixtureTest.from_state(state)


def test_before_any_bit_a_graded_step_has_six_zero_grades() -> None:
    """A claim that stops before feeding a bit (every pair tied) still reports grades."""
    graded = make_test("mixture-graded", 10, 0.05)
    assert graded.initial_step().grades == (0, 0, 0, 0, 0, 0)
    assert graded.initial_step().log_statistic is None
    assert make_test("mixture-e", 10, 0.05).initial_step().grades is None
