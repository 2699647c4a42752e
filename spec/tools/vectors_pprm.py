"""Build spec/vectors/pprm.json: thresholds, PPRM intervals and detector runs (spec §7.2).

Run ``python -m spec.tools.vectors_pprm`` to rewrite the file; the conformance test
fails if the file differs from what :func:`build` returns. Floats are written as C99
hexadecimal strings (``float.hex()``), which are exact (spec §10).
"""

from __future__ import annotations

import hashlib
import math
from fractions import Fraction
from pathlib import Path
from typing import Any

from twinaudit.protocol import SPEC_VERSION, limits
from twinaudit.protocol.stats.base import Decision
from twinaudit.protocol.stats.paper_test import PaperTest
from twinaudit.protocol.stats.pprm import pprm_interval

from .vectors_core import case, render

VECTOR_FILE = Path(__file__).resolve().parent.parent / "vectors" / "pprm.json"


def _hex(x: float) -> str:
    return float(x).hex()


def _threshold(name: str, n: int, p: float, alpha: float) -> dict[str, Any]:
    inp = {"n_pairs": n, "p": _hex(p), "alpha": _hex(alpha)}
    return case(name, "threshold", inp, lambda: {"threshold": PaperTest(n, p, alpha).threshold})


def _interval(name: str, n: int, t: int, s: int, alpha: float) -> dict[str, Any]:
    inp = {"n_pairs": n, "draws": t, "successes": s, "alpha": _hex(alpha)}

    def compute() -> dict[str, int]:
        lower, upper = pprm_interval(n, t, s, alpha)
        return {"lower": lower, "upper": upper}

    return case(name, "interval", inp, compute)


def _detector(name: str, n: int, p: float, alpha: float, bits: str) -> dict[str, Any]:
    inp = {"n_pairs": n, "p": _hex(p), "alpha": _hex(alpha), "bits": bits}

    def compute() -> dict[str, Any]:
        test = PaperTest(n, p, alpha)
        intervals: list[list[int]] = []
        for bit in bits:
            step = test.update(int(bit))
            assert step.interval is not None
            intervals.append(list(step.interval))
            if step.decision is not Decision.CONTINUE:
                break
        return {
            "threshold": test.threshold,
            "decision": test.decision.value,
            "draws": test.draws,
            "successes": test.successes,
            "intervals": intervals,
        }

    return case(name, "detector", inp, compute)


def _bits(label: str, count: int, ones_per_256: int) -> str:
    """A fixed bit string: bit i is 1 when byte 0 of SHA-256(label ‖ i) < ones_per_256."""
    return "".join(
        "1" if hashlib.sha256(f"{label}/{i}".encode()).digest()[0] < ones_per_256 else "0"
        for i in range(count)
    )


def _lgamma_log_ratio(n: int, t: int, s: int, m: int) -> float:
    """log M_t(m) in binary64 (used only to place near-tie cases)."""
    f, lg = t - s, math.lgamma
    fixed = lg(s + 1) + lg(f + 1) - lg(t + 2) + lg(n + 1) - lg(n - t + 1)
    return fixed - (lg(m + 1) - lg(m - s + 1) + lg(n - m + 1) - lg(n - m - f + 1))


def _threshold_cases() -> list[dict[str, Any]]:
    cases = [
        _threshold(f"paper defaults, N={n}", n, 0.05, 0.025)
        for n in (20, 21, 50, 100, 101, 200, 1000, 2500, 5000, 10_000, 65_536, 10**6)
    ]
    cases += [
        _threshold(f"p=0.001, alpha=0.0005, N={n}", n, 0.001, 0.0005)
        for n in (40, 100, 1000, 5000, 10_000)
    ]
    cases += [
        _threshold("p=0.05, alpha=0.01, N=1000", 1000, 0.05, 0.01),
        _threshold("p=0.1, alpha=0.05, N=300", 300, 0.1, 0.05),
        _threshold("p=0.01, alpha=0.001, N=777", 777, 0.01, 0.001),
        _threshold("p=0.05, alpha=0.025, N=MAX_PAIRS", limits.MAX_PAIRS, 0.05, 0.025),
    ]
    # p − α equal to the binary64 number nearest the Chernoff bound at T = 700, N = 1200:
    # binary64 cannot tell whether T = 700 qualifies; exact arithmetic can.
    budget = math.exp(700 - 600 - 700 * math.log(1400 / 1200))
    cases.append(_threshold("near tie at T=700, N=1200", 1200, 2 * budget, budget))
    cases += [
        _threshold("invalid: alpha equals p", 1000, 0.05, 0.05),
        _threshold("invalid: alpha above p", 1000, 0.05, 0.06),
        _threshold("invalid: alpha zero", 1000, 0.05, 0.0),
        _threshold("invalid: p one", 1000, 1.0, 0.025),
        _threshold("invalid: too few pairs (19 < 20)", 19, 0.05, 0.025),
        _threshold("invalid: no pairs", 0, 0.05, 0.025),
        _threshold("invalid: above MAX_PAIRS", limits.MAX_PAIRS + 1, 0.05, 0.025),
    ]
    return cases


def _interval_cases() -> list[dict[str, Any]]:
    cases = [
        _interval("t=0", 100, 0, 0, 0.05),
        _interval("S=0", 100, 10, 0, 0.05),
        _interval("S=t", 100, 10, 10, 0.05),
        _interval("t=N", 100, 100, 37, 0.05),
        _interval("N=1, one", 1, 1, 1, 0.05),
        _interval("N=1, zero", 1, 1, 0, 0.05),
        _interval("small", 100, 10, 7, 0.05),
        _interval("N=1000", 1000, 100, 60, 0.025),
        _interval("N=10^6", 10**6, 10**4, 6000, 0.025),
        _interval("N=10^6, early", 10**6, 7, 7, 0.025),
        _interval("N=MAX_PAIRS", limits.MAX_PAIRS, 123_456, 70_000, 0.025),
        _interval("t=N-1", 10_000, 9999, 5000, 0.025),
        # Exact ties: M_t(n) = 1/α exactly, so n is outside (membership is M < 1/α).
        _interval("tie t=1: M(16)=32", 1024, 1, 1, 1 / 32),
        _interval("tie t=1: M(125)=40", 10_000, 1, 1, 0.025),
        _interval("tie t=N-2: M(N-2)=N/2", 4096, 4094, 4094, 2 / 4096),
        _interval("below tie t=N-2", 4096, 4094, 4094, math.nextafter(2 / 4096, 0)),
    ]
    # Near ties: α is the binary64 number nearest 1/M_t(n) at the lower end n, and its
    # two neighbours; the decision at n differs between them.
    n, t, s = 60, 20, 14
    lower = pprm_interval(n, t, s, 0.05)[0]
    m = Fraction(math.factorial(s) * math.factorial(t - s), math.factorial(t + 1)) / Fraction(
        math.perm(lower, s) * math.perm(n - lower, t - s), math.perm(n, t)
    )
    nearest = float(1 / m)
    for label, a in (
        ("below", math.nextafter(nearest, 0)),
        ("nearest", nearest),
        ("above", math.nextafter(nearest, 1)),
    ):
        cases.append(_interval(f"near tie at n={lower}, alpha {label}", n, t, s, a))
    # At scale: α = exp(−log M) at the lower end, within binary64 noise of a tie.
    n, t, s = 10**6, 5000, 3100
    lower = pprm_interval(n, t, s, 0.025)[0]
    cases.append(
        _interval("near tie at scale", n, t, s, math.exp(-_lgamma_log_ratio(n, t, s, lower)))
    )
    cases += [
        _interval("invalid: S > t", 100, 10, 11, 0.05),
        _interval("invalid: t > N", 100, 101, 50, 0.05),
        _interval("invalid: negative draws", 100, -1, 0, 0.05),
        _interval("invalid: alpha zero", 100, 10, 5, 0.0),
        _interval("invalid: alpha one", 100, 10, 5, 1.0),
        _interval("invalid: no pairs", 0, 0, 0, 0.05),
        _interval("invalid: above MAX_PAIRS", limits.MAX_PAIRS + 1, 10, 5, 0.05),
    ]
    return cases


def _detector_cases() -> list[dict[str, Any]]:
    return [
        _detector("detects, N=200, q≈0.75", 200, 0.05, 0.025, _bits("pprm/a", 200, 192)),
        _detector("detects, N=1000, p=0.001", 1000, 0.001, 0.0005, _bits("pprm/b", 1000, 176)),
        _detector("exhausts, N=40", 40, 0.05, 0.025, "10" * 20),
        _detector("exhausts, N=300, q≈0.5", 300, 0.05, 0.025, _bits("pprm/c", 300, 128)),
        _detector("invalid: alpha equals p", 200, 0.05, 0.05, "1"),
    ]


def build() -> dict[str, Any]:
    """Return the PPRM vector document."""
    return {
        "spec_version": SPEC_VERSION,
        "topic": "pprm",
        "description": (
            "The paper's test (spec §7.2). 'threshold': the Chernoff threshold T for "
            "n_pairs, p and alpha. 'interval': the PPRM confidence set [lower, upper] for "
            "the number of ones after 'draws' draws with 'successes' ones at level alpha. "
            "'detector': feed 'bits' one at a time until the test decides; 'intervals' "
            "lists the interval after each consumed bit, 'draws' how many were consumed "
            "(bits after that are never fed). Floats (p, alpha) are C99 hex strings; "
            "invalid cases name the error code an implementation MUST report. Near-tie "
            "cases need the exact comparison rule: binary64 arithmetic alone gets them "
            "wrong or cannot tell."
        ),
        "cases": _threshold_cases() + _interval_cases() + _detector_cases(),
    }


def main() -> None:
    """Rewrite spec/vectors/pprm.json."""
    VECTOR_FILE.write_text(render(build()), encoding="utf-8")


if __name__ == "__main__":
    main()
