"""Correctly rounded ln and log1p (protocol/numeric.py; spec §10.3).

A fixed table of exact answers (hex binary64), checked without any other library; and,
where mpmath is installed, a few thousand arguments against mpmath at 600 bits rounded
once, exactly, to binary64.
"""

import math
import random
from decimal import ROUND_HALF_EVEN, Context, Decimal
from fractions import Fraction

import pytest

from twinaudit.protocol import numeric
from twinaudit.protocol.numeric import ln, log1p

# (x, ln(x)) and (x, log1p(x)), correctly rounded, computed once with mpmath at 600 bits.
# "glibc" marks the arguments whose libm result (glibc 2.36, x86-64) is a unit off.
LN_TABLE = [
    ("0x1.0000000000000p-5", "-0x1.bb9d3beb8c86bp+1"),
    ("0x1.8000000000000p-4", "-0x1.2efde816246e6p+1"),
    ("0x1.4000000000000p-3", "-0x1.db365858403a3p+0"),
    ("0x1.8000000000000p-3", "-0x1.ac89b834770d4p+0"),
    ("0x1.c000000000000p-3", "-0x1.85134cf3f367fp+0"),
    ("0x1.6000000000000p-2", "-0x1.115e00e73223fp+0"),  # 11/32
    ("0x1.9000000000000p-1", "-0x1.f991c6cb3b379p-3"),  # 25/32
    ("0x1.a000000000000p-1", "-0x1.a93ed3c8ad9e3p-3"),  # 26/32
    ("0x1.f000000000000p-1", "-0x1.0415d89e74444p-5"),
    ("0x1.1e58000000000p-1", "-0x1.298a152fee6a1p-1"),  # 9163/16384, glibc
    ("0x1.1fd8000000000p-1", "-0x1.26dd4275bc816p-1"),  # 9211/16384, glibc
    ("0x1.fffffffffdcd1p-1", "-0x1.19780000009acp-40"),  # 1 - 1e-12
    ("0x1.19799812dea11p-40", "-0x1.ba18a998fffa0p+4"),  # 1e-12
    ("0x1.4f8b588e368f1p-17", "-0x1.7069e2aa2aa5bp+3"),  # 1e-5
    ("0x1.0000000000001p+0", "0x1.fffffffffffffp-53"),
    ("0x1.fffffffffffffp-1", "-0x1.0000000000000p-53"),
    ("0x1.0000000000000p-1022", "-0x1.6232bdd7abcd2p+9"),
    ("0x1.8000000000000p-1021", "-0x1.61a61e83d6651p+9"),
    ("0x0.0000000000001p-1022", "-0x1.74385446d71c3p+9"),  # the least subnormal
    ("0x1.fffffffffffffp+1023", "0x1.62e42fefa39efp+9"),
    ("0x1.999999999999ap-4", "-0x1.26bb1bbb55515p+1"),  # 0.1
    ("0x1.4000000000000p+3", "0x1.26bb1bbb55516p+1"),  # 10
    ("0x1.0000000000000p+1", "0x1.62e42fefa39efp-1"),  # 2
]
LOG1P_TABLE = [
    ("-0x1.0000000000000p-5", "-0x1.0415d89e74444p-5"),
    ("-0x1.0000000000000p-3", "-0x1.1178e8227e47cp-3"),
    ("-0x1.8000000000000p-3", "-0x1.a93ed3c8ad9e3p-3"),  # -6/32, glibc
    ("-0x1.c000000000000p-3", "-0x1.f991c6cb3b379p-3"),  # -7/32, glibc
    ("-0x1.0000000000000p-1", "-0x1.62e42fefa39efp-1"),
    ("-0x1.5000000000000p-1", "-0x1.115e00e73223fp+0"),  # -21/32, glibc
    ("-0x1.f000000000000p-1", "-0x1.bb9d3beb8c86bp+1"),  # -31/32
    ("-0x1.11f2665e52fc2p-2", "-0x1.3eccb4d0c23d9p-2"),  # glibc
    ("-0x1.9113381523498p-3", "-0x1.be5e9528d4b51p-3"),  # glibc
    ("-0x1.e92ccbb887708p-2", "-0x1.4c8f7b81e98e3p-1"),  # glibc
    ("-0x1.fffffffffdcd1p-1", "-0x1.ba18c0cb51d2ap+4"),  # -(1 - 1e-12)
    ("0x1.4f8b588e368f1p-17", "0x1.4f8aea9ae7317p-17"),  # 1e-5
    ("-0x1.4f8b588e368f1p-17", "-0x1.4f8bc681e6006p-17"),  # -1e-5
    ("0x1.0000000000000p-60", "0x1.0000000000000p-60"),
    ("-0x1.0000000000000p-60", "-0x1.0000000000000p-60"),
    ("0x1.0000000000000p-59", "0x1.0000000000000p-59"),
    ("-0x1.0000000000000p-59", "-0x1.0000000000000p-59"),
    ("0x1.56e1fc2f8f359p-997", "0x1.56e1fc2f8f359p-997"),  # 1e-300
    ("0x1.0000000000000p+0", "0x1.62e42fefa39efp-1"),  # 1
    ("0x1.7e43c8800759cp+996", "0x1.5963447f87fb5p+9"),  # 1e300
]


@pytest.mark.parametrize(("x", "expected"), LN_TABLE)
def test_ln_table(x, expected):
    assert ln(float.fromhex(x)).hex() == float.fromhex(expected).hex()


@pytest.mark.parametrize(("x", "expected"), LOG1P_TABLE)
def test_log1p_table(x, expected):
    assert log1p(float.fromhex(x)).hex() == float.fromhex(expected).hex()


def test_ln_of_one_minus_q_is_log1p_of_minus_q_for_exact_differences():
    # 1 - k/32 is exact, so ln(1 - k/32) and log1p(-k/32) are one real number.
    for k in range(1, 32):
        assert ln(1.0 - k / 32) == log1p(-k / 32)


def test_special_values():
    assert ln(1.0) == 0.0
    assert math.copysign(1.0, ln(1.0)) == 1.0
    assert ln(math.inf) == math.inf
    assert math.isnan(ln(math.nan))
    for bad in (0.0, -0.0, -1.0, -math.inf, -5e-324):
        with pytest.raises(ValueError, match="x > 0"):
            ln(bad)
    assert log1p(0.0) == 0.0
    assert math.copysign(1.0, log1p(0.0)) == 1.0
    assert math.copysign(1.0, log1p(-0.0)) == -1.0
    assert log1p(math.inf) == math.inf
    assert math.isnan(log1p(math.nan))
    for bad in (-1.0, -1.5, -math.inf):
        with pytest.raises(ValueError, match="x > -1"):
            log1p(bad)
    assert log1p(5e-324) == 5e-324
    assert log1p(-5e-324) == -5e-324
    assert log1p(-1.0 + 2.0**-53) == ln(2.0**-53)
    assert ln(3) == ln(3.0)


def _arguments():
    rng = random.Random(20)
    ln_args = [k / 32 for k in range(1, 32)] + [k / 16384 for k in range(1, 16384, 7)]
    ln_args += [1.0 + k * 2.0**-52 for k in range(1, 40)]
    ln_args += [1.0 - k * 2.0**-53 for k in range(1, 40)]
    ln_args += [1.0 - 1e-12, 1e-12, 1e-5, 2.0**-1022, 2.0**-1074, 2.0**-1070 * 3]
    ln_args += [math.ldexp(rng.random() + 0.5, rng.randint(-1074, 1023)) for _ in range(800)]
    ln_args += [rng.random() for _ in range(800)]
    l1p_args = [-k / 32 for k in range(1, 32)] + [-k / 1024 for k in range(1, 1024)]
    l1p_args += [-(1.0 - 1e-12), -1.0 + 2.0**-53, 2.0**-60, -(2.0**-60), 2.0**-61, 1e-12]
    l1p_args += [math.nextafter(2.0**-60, 1.0), -math.nextafter(2.0**-60, 1.0)]
    l1p_args += [-rng.random() for _ in range(800)]
    l1p_args += [rng.random() * 4 for _ in range(200)]
    l1p_args += [
        rng.choice((-1.0, 1.0)) * math.ldexp(rng.random() + 0.5, rng.randint(-80, -1))
        for _ in range(800)
    ]
    l1p_args += [math.ldexp(rng.random() + 0.5, rng.randint(-1074, 1023)) for _ in range(200)]
    return ln_args, l1p_args


def test_against_mpmath():
    mpmath = pytest.importorskip("mpmath")

    def rounded(value):
        sign, mantissa, exponent, _ = value._mpf_
        exact = Fraction(int(mantissa)) * Fraction(2) ** exponent
        return float(-exact if sign else exact)  # Fraction → float rounds correctly

    ln_args, l1p_args = _arguments()
    with mpmath.workprec(600):
        for x in ln_args:
            assert ln(x).hex() == rounded(mpmath.log(mpmath.mpf(x))).hex(), x.hex()
        for x in l1p_args:
            assert log1p(x).hex() == rounded(mpmath.log1p(mpmath.mpf(x))).hex(), x.hex()


def test_an_undecided_pass_retries_at_more_digits(monkeypatch):
    # Five digits never decide a binary64: the first pass must fail and the second decide.
    def context(prec):
        return Context(prec=prec, rounding=ROUND_HALF_EVEN, Emin=-999999, Emax=999999)

    monkeypatch.setattr(numeric, "_CONTEXTS", (context(5), context(40)))
    assert numeric._round_ln(Decimal(26) / Decimal(32)).hex() == "-0x1.a93ed3c8ad9e3p-3"
    monkeypatch.setattr(numeric, "_CONTEXTS", (context(5),))
    with pytest.raises(ArithmeticError, match="not resolved"):
        numeric._round_ln(Decimal(26) / Decimal(32))
