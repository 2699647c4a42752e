"""The protocol logarithm (protocol/basic_log.py; spec §10.3.1): accuracy and domain.

pln.json pins the bits (tests/spec/test_conformance_pln.py); here the functions are
checked against the correctly rounded logarithm (protocol/numeric.py) and the platform's
over many random arguments: within one unit in the last place of the former, as
measured, and so within a few of the platform's.
"""

import math
import random

import pytest

from twinaudit.protocol.basic_log import LN2_HI, LN2_LO, pln, pln1m
from twinaudit.protocol.numeric import ln, log1p


def _ulps(value, exact):
    return abs(value - exact) / math.ulp(exact)


def test_pln_is_within_one_ulp_of_the_correctly_rounded_log():
    rng = random.Random(7)
    worst = 0.0
    for _ in range(3000):
        x = math.ldexp(rng.random() + 0.5, rng.randint(-1073, 1023))
        y = 1.0 + rng.uniform(-0.3, 0.45)
        worst = max(worst, _ulps(pln(x), ln(x)), _ulps(pln(y), ln(y)))
    assert worst <= 1.0


def test_pln1m_is_within_one_ulp_of_the_correctly_rounded_log1p():
    rng = random.Random(8)
    worst = 0.0
    for _ in range(3000):
        q = rng.random() * 2.0 ** -rng.randint(0, 60)
        if q:
            worst = max(worst, _ulps(pln1m(q), log1p(-q)))
    assert worst <= 1.0


def test_within_a_few_ulps_of_the_platform_and_not_always_equal():
    rng = random.Random(9)
    differ = 0
    for _ in range(5000):
        x = 1.0 + rng.uniform(-0.3, 0.45)
        assert _ulps(pln(x), math.log(x)) <= 2.0
        differ += pln(x) != math.log(x)
    assert differ > 0  # the platform's log is not the protocol's, so the spec fixes the bits


def test_exact_values():
    assert pln(1.0) == 0.0 and pln1m(0.0) == 0.0
    assert pln(2.0) == LN2_HI + LN2_LO == math.log(2.0)
    assert pln(0.5) == -pln(2.0)
    assert pln1m(0.5) == -pln(2.0)
    assert pln(math.ulp(0.0)) == -1074 * LN2_HI + -1074 * LN2_LO


def test_tiny_q_keeps_its_relative_precision():
    for e in (53, 300, 1074):
        q = 2.0**-e
        assert pln1m(q) == -q  # ln(1 - q) = -q - q²/2 - …, below half an ulp of q


@pytest.mark.parametrize("bad", [0.0, -1.0, math.inf, math.nan, -0.0])
def test_pln_refuses_arguments_outside_its_domain(bad):
    with pytest.raises(ValueError, match="pln is defined"):
        pln(bad)


@pytest.mark.parametrize("bad", [-0.25, 1.0, 1.5, math.nan, math.inf])
def test_pln1m_refuses_arguments_outside_its_domain(bad):
    with pytest.raises(ValueError, match="pln1m is defined"):
        pln1m(bad)
