"""Build spec/vectors/mixture.json: priors, e-values, decisions, boundaries, runs (spec §7.3).

Run ``python -m spec.tools.vectors_mixture`` to rewrite the file; the conformance test
fails if the file differs from what :func:`build` returns. Floats (p, the informative
log statistic) are C99 hexadecimal strings (``float.hex()``), which round-trip
exactly; exact e-values are written as a numerator and denominator in decimal
strings, since they exceed 2^53.
"""

from __future__ import annotations

import hashlib
import math
from pathlib import Path
from typing import Any

from twinaudit.protocol import SPEC_VERSION, limits
from twinaudit.protocol.stats.base import Decision
from twinaudit.protocol.stats.mixture import (
    MixtureTest,
    detection_boundary,
    e_value,
    log_e_value,
    reaches,
)
from twinaudit.protocol.stats.mixture_prior import DEFAULT_PRIOR, GRID15_V1, get_prior

from .vectors_core import case, render

VECTOR_FILE = Path(__file__).resolve().parent.parent / "vectors" / "mixture.json"
#: The prior of the file's first cases, written when it was the only one; they stay.
PRIOR = GRID15_V1.name
#: The default prior of new claims (spec §7.3.8): its own cases, their names prefixed.
NEW = DEFAULT_PRIOR.name


def _hex(x: float) -> str:
    return float(x).hex()


def _prior_case(name: str) -> dict[str, Any]:
    def compute() -> dict[str, Any]:
        prior = get_prior(name)
        return {
            "resolution": prior.resolution,
            "atoms": [{"numerator": a, "weight": w} for a, w in prior.atoms],
        }

    return case(f"registered prior {name!r}", "prior", {"prior": name}, compute)


def _label(prior: str) -> str:
    return "" if prior == PRIOR else f"{prior}: "


def _e_value(t: int, s: int, prior: str = PRIOR) -> dict[str, Any]:
    inp = {"prior": prior, "draws": t, "successes": s}

    def compute() -> dict[str, Any]:
        m = e_value(t, s, get_prior(prior))
        return {
            "numerator": str(m.numerator),
            "denominator": str(m.denominator),
            "log_statistic": _hex(log_e_value(t, s, get_prior(prior))),
        }

    return case(f"{_label(prior)}t={t}, S={s}", "e-value", inp, compute)


def _decision(name: str, t: int, s: int, p: float, prior: str = PRIOR) -> dict[str, Any]:
    inp = {"prior": prior, "draws": t, "successes": s, "p": _hex(p)}
    return case(name, "decision", inp, lambda: {"detected": reaches(t, s, p, get_prior(prior))})


def _boundary(p: float, max_draws: int, prior: str = PRIOR) -> dict[str, Any]:
    inp = {"prior": prior, "p": _hex(p), "max_draws": max_draws}
    return case(
        f"{_label(prior)}p={p!r}, t<={max_draws}",
        "boundary",
        inp,
        lambda: {"boundary": detection_boundary(p, max_draws, get_prior(prior))},
    )


def _detector(name: str, n: int, p: float, bits: str, prior: str = PRIOR) -> dict[str, Any]:
    inp = {"n_pairs": n, "p": _hex(p), "prior": prior, "bits": bits}

    def compute() -> dict[str, Any]:
        test = MixtureTest(n, p, prior)
        for bit in bits:
            if test.update(int(bit)).decision is not Decision.CONTINUE:
                break
        return {"decision": test.decision.value, "draws": test.draws, "successes": test.successes}

    return case(name, "detector", inp, compute)


def _bits(label: str, count: int, ones_per_256: int) -> str:
    """A fixed bit string: bit i is 1 when byte 0 of SHA-256(label/i) < ones_per_256."""
    return "".join(
        "1" if hashlib.sha256(f"{label}/{i}".encode()).digest()[0] < ones_per_256 else "0"
        for i in range(count)
    )


def _e_value_cases() -> list[dict[str, Any]]:
    points = [(0, 0), (1, 0), (1, 1), (5, 5), (6, 6), (10, 9), (10, 5), (20, 15), (64, 40)]
    cases = [_e_value(t, s) for t, s in points]
    cases += [
        case(
            "invalid: S > t",
            "e-value",
            {"prior": PRIOR, "draws": 3, "successes": 4},
            lambda: e_value(3, 4),
        ),
        case(
            "invalid: unknown prior",
            "e-value",
            {"prior": "uniform", "draws": 3, "successes": 2},
            lambda: e_value(3, 2, get_prior("uniform")),
        ),
    ]
    return cases


def _near_tie_cases(name: str = PRIOR) -> list[dict[str, Any]]:
    """p at the binary64 value nearest 1/M_t on the boundary, and its two neighbours."""
    cases = []
    prior = get_prior(name)
    boundary = detection_boundary(0.05, 2000, prior)
    for t in (6, 25, 400, 2000):
        s = boundary[t]
        nearest = float(1 / e_value(t, s, prior))
        for label, p in (
            ("below", math.nextafter(nearest, 0)),
            ("nearest", nearest),
            ("above", math.nextafter(nearest, 1)),
        ):
            title = f"{_label(name)}near tie t={t}, S={s}, p {label} 1/M"
            cases.append(_decision(title, t, s, p, name))
    return cases


def _new_prior_cases() -> list[dict[str, Any]]:
    """The default prior's own cases (spec §7.3.8), after grid15-v1's."""
    points = [(6, 6), (10, 9), (20, 15), (64, 40), (1000, 540)]
    return [
        _prior_case(NEW),
        *[_e_value(t, s, NEW) for t, s in points],
        *_near_tie_cases(NEW),
        _decision(f"{NEW}: p=0.05, t=1000, S=540", 1000, 540, 0.05, NEW),
        _decision(f"{NEW}: p=0.001, t=2000, S=1100", 2000, 1100, 0.001, NEW),
        _boundary(0.05, 400, NEW),
        _boundary(0.001, 400, NEW),
        _detector(f"{NEW}: q≈0.55, N=3000", 3000, 0.05, _bits("mixture/d", 3000, 141), NEW),
        _detector(
            f"{NEW}: q≈0.6, N=2000, p=0.001", 2000, 0.001, _bits("mixture/b", 2000, 154), NEW
        ),
    ]


def _decision_cases() -> list[dict[str, Any]]:
    cases = [
        _decision("no majority never detects", 1000, 500, 0.999),
        _decision("p=0.05, t=100, S=70", 100, 70, 0.05),
        _decision("p=0.05, t=100, S=60", 100, 60, 0.05),
        _decision("p=0.001, t=1000, S=580", 1000, 580, 0.001),
        _decision("p=0.001, t=1000, S=560", 1000, 560, 0.001),
        _decision("at scale, t=MAX_PAIRS", limits.MAX_PAIRS, limits.MAX_PAIRS // 2 + 90_000, 0.05),
        _decision(
            "at scale, t=MAX_PAIRS, weak", limits.MAX_PAIRS, limits.MAX_PAIRS // 2 + 4000, 0.05
        ),
    ]
    cases += _near_tie_cases()
    cases += [
        _decision("invalid: p zero", 10, 9, 0.0),
        _decision("invalid: p one", 10, 9, 1.0),
        _decision("invalid: S > t", 10, 11, 0.05),
        _decision("invalid: t above MAX_PAIRS", limits.MAX_PAIRS + 1, 10, 0.05),
        _decision("invalid: unknown prior", 10, 9, 0.05, "uniform"),
    ]
    return cases


def _detector_cases() -> list[dict[str, Any]]:
    return [
        _detector("all ones", 100, 0.05, "1" * 100),
        _detector("q≈0.75, N=200", 200, 0.05, _bits("mixture/a", 200, 192)),
        _detector("q≈0.6, N=2000, p=0.001", 2000, 0.001, _bits("mixture/b", 2000, 154)),
        _detector("exhausts, N=40", 40, 0.05, "10" * 20),
        _detector("exhausts, N=300, q≈0.5", 300, 0.05, _bits("mixture/c", 300, 128)),
        _detector("invalid: p above one", 10, 1.5, "1"),
        _detector("invalid: no pairs", 0, 0.05, "1"),
        _detector("invalid: unknown prior", 10, 0.05, "1", "uniform"),
    ]


def build() -> dict[str, Any]:
    """Return the mixture-test vector document."""
    return {
        "spec_version": SPEC_VERSION,
        "topic": "mixture",
        "description": (
            "The mixture test (spec §7.3). 'prior': the registered prior's resolution R "
            "and atoms (theta = numerator/R, integer weight). 'e-value': M_t exactly as "
            "numerator/denominator (decimal strings, lowest terms) and the informative "
            "log statistic (binary64, compare under the agreement rule of §7.3.3). "
            "'decision': whether "
            "M_t >= 1/p, exactly. 'boundary': b[t], the fewest ones detecting at t "
            "(t + 1 if none), t = 0..max_draws. 'detector': feed 'bits' one at a time "
            "until the test decides; 'draws' says how many were consumed. Floats are C99 "
            "hex strings. Near-tie cases need the exact comparison: p is the binary64 "
            "value nearest 1/M_t and its neighbours. Invalid cases name the error code."
        ),
        "cases": [
            _prior_case(PRIOR),
            *_e_value_cases(),
            *_decision_cases(),
            _boundary(0.05, 400),
            _boundary(0.001, 400),
            *_detector_cases(),
            *_new_prior_cases(),
        ],
    }


def main() -> None:
    """Rewrite spec/vectors/mixture.json."""
    VECTOR_FILE.write_text(render(build()), encoding="utf-8")


if __name__ == "__main__":
    main()
