"""The protocol logarithm: ``ln`` from IEEE 754 basic operations only (spec §10.3.1).

The image-classifier score under the arithmetic ``basic-v1`` (spec §10.3) takes its
logarithms from the two functions here, :func:`pln` (``ln x``) and :func:`pln1m`
(``ln(1 − q)``, accurate for small ``q``). Each is a fixed sequence of binary64
operations ``+ − × ÷``, every one rounded to nearest (no fused multiply–add, no extended
precision), so every conforming platform computes the same bits without any
transcendental function from its libm. They are not correctly rounded: measured against
the correctly rounded logarithm (:mod:`twinaudit.protocol.numeric`) they are within a
few units in the last place (``tests/protocol/test_basic_log.py`` measures it). What
matters is that the spec fixes the bits.

The steps (spec §10.3.1), for finite ``x > 0``:

1. Below ``2^-1022`` (subnormal), ``x`` is multiplied by ``2^54`` (exact) and ``k``
   starts at ``−54``; else at ``0``.
2. ``x = m · 2^e`` with ``1 ≤ m < 2`` (exact: read from the bits); ``k += e``. If
   ``m >`` :data:`REDUCTION_LIMIT` (``45/32``), ``m = m/2`` and ``k += 1`` (exact).
3. ``f = m − 1`` (exact, Sterbenz), so ``−19/64 < f ≤ 13/32``.
4. The core: ``s = f/(2 + f)``, ``z = s·s``, ``P = c₁₀``, then ``P = c_j + z·P`` for
   ``j = 9 … 1``, ``R = z·P``, ``r = f − s·(f − R)``, and the result is
   ``k·LN2_HI + (k·LN2_LO + r)``. The coefficients ``c_j`` are the binary64 values of
   ``2/(2j + 1)`` (:data:`COEFFICIENTS`); ``LN2_HI`` has 32 trailing zero bits, so
   ``k·LN2_HI`` is exact for every ``|k| ≤ 1128``.

``r`` is ``ln(1 + f) = 2·artanh(s)`` rewritten as ``f − s·(f − R)`` (since
``2s = f − s·f``): the rounding of ``s`` then only reaches the correction ``s·(f − R)``,
at most a fifth of ``r``. With ``|z| ≤ 0.0304`` the first series term left out is below
``2^-60`` of the result.

:func:`pln1m` takes ``0 ≤ q < 1``: ``f = −q`` and ``k = 0`` where ``q ≤ 19/64``;
``f = 1 − 2q`` (exact) and ``k = −1`` where ``19/64 < q ≤ 1/2`` (``1 − q = (1 + f)/2``);
and ``pln(1 − q)`` (``1 − q`` exact) where ``q > 1/2``.
"""

from __future__ import annotations

import math
from typing import Final

__all__ = [
    "COEFFICIENTS",
    "LN2_HI",
    "LN2_LO",
    "REDUCTION_LIMIT",
    "core",
    "pln",
    "pln1m",
    "reduce_ln",
    "reduce_ln1m",
]

#: The reduced mantissa's upper limit (``45/32``): above it ``m`` is halved.
REDUCTION_LIMIT: Final = float.fromhex("0x1.68p+0")
#: The largest ``q`` that :func:`pln1m` takes as ``f = −q`` (``19/64``).
DIRECT_LIMIT: Final = float.fromhex("0x1.3p-2")
#: ``ln 2`` split in two: ``LN2_HI`` (its low 32 bits zero) and the rest ``LN2_LO``.
LN2_HI: Final = float.fromhex("0x1.62e42feep-1")
LN2_LO: Final = float.fromhex("0x1.a39ef35793c76p-33")
#: ``c_1 … c_10``: the binary64 values of ``2/3, 2/5, …, 2/21`` (spec §10.3.1).
COEFFICIENTS: Final = (
    float.fromhex("0x1.5555555555555p-1"),
    float.fromhex("0x1.999999999999ap-2"),
    float.fromhex("0x1.2492492492492p-2"),
    float.fromhex("0x1.c71c71c71c71cp-3"),
    float.fromhex("0x1.745d1745d1746p-3"),
    float.fromhex("0x1.3b13b13b13b14p-3"),
    float.fromhex("0x1.1111111111111p-3"),
    float.fromhex("0x1.e1e1e1e1e1e1ep-4"),
    float.fromhex("0x1.af286bca1af28p-4"),
    float.fromhex("0x1.8618618618618p-4"),
)
_SUBNORMAL_LIMIT: Final = 2.0**-1022
_SUBNORMAL_SCALE: Final = 2.0**54


def core(f: float, k: int) -> float:
    """Return ``k·ln 2 + ln(1 + f)`` by step 4, for ``−19/64 ≤ f ≤ 13/32``."""
    s = f / (2.0 + f)
    z = s * s
    p = COEFFICIENTS[9]
    for c in COEFFICIENTS[8::-1]:
        p = c + z * p
    r = f - s * (f - z * p)
    dk = float(k)
    return dk * LN2_HI + (dk * LN2_LO + r)


def reduce_ln(x: float) -> tuple[float, int]:
    """Return ``(f, k)`` with ``x = (1 + f)·2^k`` exactly, by steps 1–3, for finite ``x > 0``."""
    k = 0
    if x < _SUBNORMAL_LIMIT:
        x *= _SUBNORMAL_SCALE
        k = -54
    half, e = math.frexp(x)  # x = half·2^e, 1/2 ≤ half < 1, exact
    m = half * 2.0
    k += e - 1
    if m > REDUCTION_LIMIT:
        m *= 0.5
        k += 1
    return m - 1.0, k


def reduce_ln1m(q: float) -> tuple[float, int]:
    """Return ``(f, k)`` with ``1 − q = (1 + f)·2^k`` exactly, for ``0 ≤ q < 1``."""
    if q <= DIRECT_LIMIT:
        return -q, 0
    if q <= 0.5:
        return 1.0 - 2.0 * q, -1
    return reduce_ln(1.0 - q)


def pln(x: float) -> float:
    """Return the protocol's ``ln x`` for finite ``x > 0`` (spec §10.3.1).

    Raises ``ValueError`` for zero, a negative, an infinite or a NaN argument: the
    score never takes one (its arguments are clamped above zero).
    """
    if not (math.isfinite(x) and x > 0.0):
        raise ValueError(f"pln is defined for finite x > 0, got {x!r}")
    return core(*reduce_ln(x))


def pln1m(q: float) -> float:
    """Return the protocol's ``ln(1 − q)`` for ``0 ≤ q < 1`` (spec §10.3.1)."""
    if not 0.0 <= q < 1.0:
        raise ValueError(f"pln1m is defined for 0 <= q < 1, got {q!r}")
    return core(*reduce_ln1m(q))
