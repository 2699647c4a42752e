"""Build spec/vectors/pln.json: hard cases of the protocol logarithm (spec §10.3.1).

Run ``python -m spec.tools.vectors_pln`` to rewrite the file; the conformance test fails
if the file differs from what :func:`build` returns. Every argument and result is a C99
hexadecimal string (``float.hex()``), exact. The arguments are chosen, deterministically,
where an almost-right implementation computes other bits: where the platform's ``log``
or ``log1p`` (Python's :mod:`math`, the C library's) differs from the protocol's; where
a fused multiply–add in a step, the series summed as ``2s + s·R``, ``ln 2`` as one
constant or the two halves of ``k·ln 2`` added first changes the result (each
computed here by a variant of the steps); near the reduction's limits; at powers of
two, subnormals and ``1 ± ulps``; and at the score's own arguments, ``n/K`` for every
``K ≤ 256`` where one of those differs, every ``n/K`` for ``K ≤ 32``, and the clamps.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Iterable
from fractions import Fraction
from pathlib import Path
from typing import Any

from twinaudit.protocol import SPEC_VERSION
from twinaudit.protocol.basic_log import (
    COEFFICIENTS,
    DIRECT_LIMIT,
    LN2_HI,
    LN2_LO,
    REDUCTION_LIMIT,
    pln,
    pln1m,
    reduce_ln,
    reduce_ln1m,
)
from twinaudit.protocol.numeric import ln, log1p

from .vectors_core import render

VECTOR_FILE = Path(__file__).resolve().parent.parent / "vectors" / "pln.json"
#: How many arguments each search keeps, and how many it tries at most.
_KEEP = 300
_TRIES = 40_000
_LN2 = math.log(2.0)
_Core = Callable[[float, int], float]


def _fma(a: float, b: float, c: float) -> float:
    """``a·b + c`` rounded once (what a fused multiply–add computes)."""
    return float(Fraction(a) * Fraction(b) + Fraction(c))


def _series(z: float, fused: bool) -> float:
    p = COEFFICIENTS[9]
    for c in COEFFICIENTS[8::-1]:
        p = _fma(z, p, c) if fused else c + z * p
    return p


def _core_variant(
    fused_horner: bool = False,
    fused_r: bool = False,
    naive: bool = False,
    one_ln2: bool = False,
    halves_first: bool = False,
) -> _Core:
    """Return the core of step 4 computed another way (one change per variant)."""

    def core(f: float, k: int) -> float:
        s = f / (2.0 + f)
        z = s * s
        big_r = z * _series(z, fused_horner)
        if naive:
            r = 2.0 * s + s * big_r
        elif fused_r:
            r = _fma(-s, f - big_r, f)
        else:
            r = f - s * (f - big_r)
        dk = float(k)
        if one_ln2:
            return dk * _LN2 + r
        if halves_first:
            return (dk * LN2_HI + dk * LN2_LO) + r
        return dk * LN2_HI + (dk * LN2_LO + r)

    return core


def _ln_with(variant: _Core) -> Callable[[float], float]:
    return lambda x: variant(*reduce_ln(x))


def _ln1m_with(variant: _Core) -> Callable[[float], float]:
    return lambda q: variant(*reduce_ln1m(q))


#: The variants searched for. A fused multiply-add in the series' Horner steps
#: (``_core_variant(fused_horner=True)``) changed no result of the 40,000 arguments of
#: each search when it was one of them, so it is left out (its search took a minute).
_VARIANTS = {
    "r = f - s·(f - R) with a fused multiply-add": _core_variant(fused_r=True),
    "the series summed as 2s + s·R": _core_variant(naive=True),
    "k·ln 2 with one constant": _core_variant(one_ln2=True),
    "k·LN2_HI + k·LN2_LO added first": _core_variant(halves_first=True),
}


def _platform_ln1m(q: float) -> float:
    return math.log1p(-q)


def _differing(
    candidates: Iterable[float], ours: Callable[[float], float], other: Callable[[float], float]
) -> list[float]:
    """The first :data:`_KEEP` candidates where ``other`` differs from ``ours``."""
    found: list[float] = []
    for _, x in zip(range(_TRIES), candidates, strict=False):
        if ours(x) != other(x) and x not in found:
            found.append(x)
            if len(found) == _KEEP:
                break
    return found


def _wide(rng: random.Random) -> Iterable[float]:
    """Arguments over the whole positive range, most near 1 where the terms live."""
    while True:
        if rng.random() < 0.5:
            yield math.ldexp(rng.random() + 0.5, rng.randint(-1073, 1023))
        else:
            yield 1.0 + rng.uniform(-0.3, 0.45)


def _unit(rng: random.Random) -> Iterable[float]:
    """Arguments of ``pln1m`` in ``[0, 1)``, of every magnitude."""
    while True:
        yield rng.random() * 2.0 ** -rng.randint(0, 60)


def _ulps(x: float, count: int) -> list[float]:
    out, up, down = [x], x, x
    for _ in range(count):
        up, down = math.nextafter(up, math.inf), math.nextafter(down, 0.0)
        out += [down, up]
    return sorted(out)


def _fractions(limit: int) -> list[float]:
    return sorted({n / k for k in range(1, limit + 1) for n in range(1, k + 1)})


def _batch(name: str, kind: str, args: list[float], fn: Callable[[float], float]) -> dict[str, Any]:
    return {
        "name": f"{kind}: {name}",
        "kind": kind,
        "valid": True,
        "input": {"x": [x.hex() for x in args]},
        "expected": {"y": [fn(x).hex() for x in args]},
    }


def _pln_cases() -> list[dict[str, Any]]:
    rng = random.Random(42)
    powers = [math.ldexp(1.0, e) for e in range(-1074, 1024)]
    subnormals = sorted(
        {math.ldexp(1.0, -1074) * j for j in range(1, 65)}
        | {math.ldexp(rng.random(), -1022) for _ in range(200)}
    ) + _ulps(2.0**-1022, 8)
    near_one = _ulps(1.0, 64)
    limits = sorted(
        {
            y
            for e in (-1074, -1030, -1022, -60, -1, 0, 1, 60, 1023)
            for y in _ulps(math.ldexp(REDUCTION_LIMIT, e), 8)
            if y > 0 and math.isfinite(y)
        }
        | set(_ulps(math.ldexp(REDUCTION_LIMIT, -1), 8))
    )
    clamps = [1e-12, 1e-5, 2.0**-1022, 1.0 - 1e-12, math.ulp(0.0), 1.7976931348623157e308]
    all_k32 = _fractions(32)
    tricky = [
        x
        for x in _fractions(256)
        if x not in set(all_k32) and (pln(x) != math.log(x) or pln(x) != ln(x))
    ]
    cases = [
        _batch("powers of two 2^-1074 ... 2^1023", "pln", powers, pln),
        _batch("subnormals and the smallest normals", "pln", subnormals, pln),
        _batch("1 and 64 ulps either side", "pln", near_one, pln),
        _batch(
            "the reduction limit 45/32 (and its halves) at several exponents", "pln", limits, pln
        ),
        _batch("the score's clamps and the extremes", "pln", clamps, pln),
        _batch("n/K for every K <= 32", "pln", all_k32, pln),
        _batch(
            "n/K for 32 < K <= 256 where the platform or the correctly rounded value differs",
            "pln",
            tricky,
            pln,
        ),
        _batch(
            "where the platform's log differs", "pln", _differing(_wide(rng), pln, math.log), pln
        ),
    ]
    for name, core in _VARIANTS.items():
        found = _differing(_wide(rng), pln, _ln_with(core))
        if found:
            cases.append(_batch(f"where {name} differs", "pln", found, pln))
    return cases


def _pln1m_cases() -> list[dict[str, Any]]:
    rng = random.Random(43)
    small = [math.ldexp(1.0, -e) for e in range(1, 1075)][::7] + _ulps(2.0**-53, 4)
    limits = sorted(
        set(
            _ulps(DIRECT_LIMIT, 16)
            + _ulps(0.5, 16)
            + _ulps(1.0 - 1e-12, 4)
            + [math.nextafter(1.0, 0.0), 1e-5, 1e-12, 0.0]
        )
    )
    all_k32 = [x for x in _fractions(32) if x < 1.0]
    tricky = [
        x
        for x in _fractions(256)
        if x < 1.0
        and x not in set(all_k32)
        and (pln1m(x) != math.log1p(-x) or pln1m(x) != log1p(-x))
    ]
    cases = [
        _batch(
            "small q: 2^-1 ... 2^-1074 (every seventh) and 2^-53 +- ulps", "pln1m", small, pln1m
        ),
        _batch(
            "the branch limits 19/64 and 1/2, the clamp 1 - 1e-12, the floor",
            "pln1m",
            limits,
            pln1m,
        ),
        _batch("n/K for every K <= 32 (n < K)", "pln1m", all_k32, pln1m),
        _batch(
            "n/K for 32 < K <= 256 where the platform or the correctly rounded value differs",
            "pln1m",
            tricky,
            pln1m,
        ),
        _batch(
            "where the platform's log1p(-q) differs",
            "pln1m",
            _differing(_unit(rng), pln1m, _platform_ln1m),
            pln1m,
        ),
    ]
    for name, core in _VARIANTS.items():
        found = _differing(_unit(rng), pln1m, _ln1m_with(core))
        if found:
            cases.append(_batch(f"where {name} differs", "pln1m", found, pln1m))
    return cases


def build() -> dict[str, Any]:
    """Return the vector document."""
    return {
        "spec_version": SPEC_VERSION,
        "topic": "pln",
        "description": (
            "The protocol logarithm (spec 10.3.1). Each case is a batch: 'pln' maps every "
            "x of input.x to y = pln(x), 'pln1m' every q of input.x to y = pln1m(q) = "
            "ln(1 - q), in the same order; an implementation MUST give every y bit for bit. "
            "The arguments are where an almost-right implementation computes other bits: "
            "the platform's log or log1p (the case names say which), one step computed "
            "another way (a fused multiply-add, the series as 2s + s*R, ln 2 as one "
            "constant, the halves of k*ln 2 added first), the limits of the reduction and "
            "of pln1m's branches, powers of two, subnormals, 1 +- ulps, n/K and the clamps "
            "of the score. (A fused multiply-add in the series' Horner steps changed no "
            "result of 40,000 random arguments of either function, so no case pins it; "
            "it is still not allowed.) Floats are C99 hex strings."
        ),
        "cases": [*_pln_cases(), *_pln1m_cases()],
    }


def main() -> None:
    """Rewrite spec/vectors/pln.json."""
    VECTOR_FILE.write_text(render(build()), encoding="utf-8")


if __name__ == "__main__":
    main()
