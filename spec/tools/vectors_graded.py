"""Build spec/vectors/graded.json: grades, e-values, decisions, runs and states (spec §7.5).

Run ``python -m spec.tools.vectors_graded`` to rewrite the file; the conformance test
fails if the file differs from what :func:`build` returns. Floats are C99 hexadecimal
strings (``float.hex()``); exact e-values are decimal numerator/denominator strings.
Per-grade counts are written ``[S_1, F_1, S_2, F_2, S_3, F_3]``, as in the test state.
"""

from __future__ import annotations

import hashlib
import math
from pathlib import Path
from typing import Any

from twinaudit.protocol import SPEC_VERSION
from twinaudit.protocol.stats.base import Decision
from twinaudit.protocol.stats.graded import (
    Counts,
    GradedMixtureTest,
    counts_from_list,
    e_value,
    grade_of,
    log_e_value,
    reaches,
)
from twinaudit.protocol.stats.mixture_prior import DEFAULT_PRIOR, GRID15_V1, get_prior

from .vectors_core import case, render

VECTOR_FILE = Path(__file__).resolve().parent.parent / "vectors" / "graded.json"
#: The prior of the file's first cases, written when it was the only one; they stay.
PRIOR = GRID15_V1.name
#: The default prior of new claims (spec §7.3.8): its own cases, their names prefixed.
NEW = DEFAULT_PRIOR.name


def _hex(x: float) -> str:
    return float(x).hex()


def state_to_json(state: dict[str, Any]) -> dict[str, Any]:
    """Return a test state (§7.4) as the file writes it: ``params.p`` as a C99 hex float.

    Before 2026-11-28 this file wrote ``p`` as a JSON number, unlike every other float
    of the vectors (spec §14, §1.2); the value is the same.
    """
    params = state["params"]
    return {**state, "params": {**params, "p": _hex(params["p"])}}


def state_from_json(state: dict[str, Any]) -> dict[str, Any]:
    """Return the test state a case writes with :func:`state_to_json`."""
    params = state["params"]
    return {**state, "params": {**params, "p": float.fromhex(params["p"])}}


def counts_of(flat: list[int]) -> Counts:
    """Return ``((S_1, F_1), (S_2, F_2), (S_3, F_3))`` from the flat list of the vectors."""
    return counts_from_list(flat)


def _grade(name: str, difference: float, margin: float) -> dict[str, Any]:
    inp = {"difference": _hex(difference), "margin": _hex(margin)}
    return case(name, "grade", inp, lambda: {"grade": grade_of(difference, margin)})


def _grade_cases() -> list[dict[str, Any]]:
    m = 0.01
    ten, hundred = m * 10.0, m * 100.0
    return [
        _grade("tie at the margin", m, m),
        _grade("tie below the margin, negative", -0.004, m),
        _grade("just above the margin", math.nextafter(m, 1.0), m),
        _grade("grade 1 at 10m", ten, m),
        _grade("grade 2 just above 10m", math.nextafter(ten, 1.0), m),
        _grade("grade 2 at 100m, negative", -hundred, m),
        _grade("grade 3 just above 100m", math.nextafter(hundred, 2.0), m),
        _grade("grade 3, large", -27.5, m),
        _grade("margin 0.1: grade 1", 0.5, 0.1),
        _grade("margin 0.3: at the product 10m", 0.3 * 10.0, 0.3),
        _grade("margin 0.3: just above the product 10m", math.nextafter(0.3 * 10.0, 4.0), 0.3),
        _grade("margin 0.3: at the product 100m", 0.3 * 100.0, 0.3),
        _grade("margin 0: every untied pair is grade 3", 1e-300, 0.0),
        _grade("margin 0: a tie", -0.0, 0.0),
        _grade("invalid: negative margin", 0.5, -0.01),
        _grade("invalid: infinite difference", math.inf, 0.01),
    ]


def _e_value(flat: list[int], name: str = PRIOR) -> dict[str, Any]:
    inp = {"prior": name, "grades": flat}

    def compute() -> dict[str, Any]:
        prior = get_prior(name)
        m = e_value(counts_of(flat), prior)
        return {
            "numerator": str(m.numerator),
            "denominator": str(m.denominator),
            "log_statistic": _hex(log_e_value(counts_of(flat), prior)),
        }

    label = "" if name == PRIOR else f"{name}: "
    return case(f"{label}grades={flat}", "e-value", inp, compute)


def _decision(name: str, flat: list[int], p: float) -> dict[str, Any]:
    inp = {"prior": PRIOR, "grades": flat, "p": _hex(p)}
    return case(
        name, "decision", inp, lambda: {"detected": reaches(counts_of(flat), p, get_prior(PRIOR))}
    )


def _near_tie_cases() -> list[dict[str, Any]]:
    """p at the binary64 value nearest 1/M_t, and its two neighbours."""
    cases = []
    for flat in ([3, 0, 2, 0, 4, 0], [20, 4, 9, 2, 6, 1], [120, 80, 40, 15, 12, 2]):
        nearest = float(1 / e_value(counts_of(flat), get_prior(PRIOR)))
        for label, p in (
            ("below", math.nextafter(nearest, 0)),
            ("nearest", nearest),
            ("above", math.nextafter(nearest, 1)),
        ):
            cases.append(_decision(f"near tie {flat}, p {label} 1/M", flat, p))
    return cases


def _bits(label: str, count: int, ones_per_256: int) -> str:
    """Fixed outcomes: pair i is '1'/'0' by SHA-256(label/i)[0], its grade by byte 1 mod 3."""
    out = []
    for i in range(count):
        digest = hashlib.sha256(f"{label}/{i}".encode()).digest()
        out.append(("1" if digest[0] < ones_per_256 else "0") + str(1 + digest[1] % 3))
    return ",".join(out)


def _detector(name: str, n: int, p: float, outcomes: str, prior: str = PRIOR) -> dict[str, Any]:
    inp = {"n_pairs": n, "p": _hex(p), "prior": prior, "outcomes": outcomes}

    def compute() -> dict[str, Any]:
        test = GradedMixtureTest(n, p, prior)
        for item in outcomes.split(","):
            if test.update(int(item[0]), int(item[1:])).decision is not Decision.CONTINUE:
                break
        return {"decision": test.decision.value, "state": state_to_json(test.state())}

    return case(name, "detector", inp, compute)


def _state(name: str, state: dict[str, Any]) -> dict[str, Any]:
    def compute() -> dict[str, Any]:
        return {"state": state_to_json(GradedMixtureTest.from_state(state).state())}

    return case(name, "state", {"state": state_to_json(state)}, compute)


def _state_cases() -> list[dict[str, Any]]:
    params = {"n_pairs": 100, "p": 0.05, "prior": PRIOR}

    def state(draws: int, successes: int, decision: str, grades: Any) -> dict[str, Any]:
        return {
            "test": "mixture-graded",
            "params": params,
            "draws": draws,
            "successes": successes,
            "decision": decision,
            "grades": grades,
        }

    detected = state(10, 10, "detected", [2, 0, 2, 0, 6, 0])
    without = {k: v for k, v in state(3, 2, "continue", [1, 0, 1, 1, 0, 0]).items()}
    del without["grades"]
    return [
        _state("continuing", state(3, 2, "continue", [1, 0, 1, 1, 0, 0])),
        _state("detected", detected),
        _state("invalid: grades do not add up", state(3, 2, "continue", [1, 0, 1, 0, 0, 0])),
        _state("invalid: recorded decision wrong", state(10, 10, "continue", [2, 0, 2, 0, 6, 0])),
        _state("invalid: grades missing", without),
        _state("invalid: five counts", state(3, 2, "continue", [1, 0, 1, 1, 0])),
        _state("invalid: negative count", state(3, 2, "continue", [2, 0, 1, 1, -1, 0])),
    ]


def _detector_cases() -> list[dict[str, Any]]:
    return [
        _detector("all ones at grade 3 (as mixture-e)", 100, 0.05, ",".join(["13"] * 100)),
        _detector("all ones at grade 1", 100, 0.05, ",".join(["11"] * 100)),
        _detector("q≈0.75, N=200", 200, 0.05, _bits("graded/a", 200, 192)),
        _detector("q≈0.6, N=1000, p=0.001", 1000, 0.001, _bits("graded/b", 1000, 154)),
        _detector("exhausts, N=300, q≈0.5", 300, 0.05, _bits("graded/c", 300, 128)),
        _detector("invalid: grade 0", 10, 0.05, "10"),
        _detector("invalid: grade 4", 10, 0.05, "14"),
        _detector("invalid: p above one", 10, 1.5, "13"),
        _e_value([20, 4, 9, 2, 6, 1], NEW),
        _detector(f"{NEW}: q≈0.6, N=1000, p=0.001", 1000, 0.001, _bits("graded/b", 1000, 154), NEW),
    ]


def build() -> dict[str, Any]:
    """Return the graded-test vector document."""
    return {
        "spec_version": SPEC_VERSION,
        "topic": "graded",
        "description": (
            "The graded mixture test (spec §7.5), prior grid15-v1 unless the case names "
            "grid16-v1, the default of new claims (§7.3.8). 'grade': the grade of a "
            "score difference under a tie margin (0 is a tie). 'e-value': M_t exactly as "
            "numerator/denominator (decimal strings, lowest terms) and the informative log "
            "statistic (compare under the agreement rule of §7.3.3) for per-grade counts "
            "[S_1, F_1, S_2, F_2, S_3, F_3]. 'decision': whether M_t >= 1/p, exactly; "
            "near-tie cases put p at the binary64 value nearest 1/M_t and its neighbours. "
            "'detector': feed 'outcomes' (comma-separated bit then grade, e.g. '13' is a one "
            "at grade 3) until the test decides; the expected state is §7.5.4's. 'state': "
            "restore a state and write it back. Floats are C99 hex strings, a state's "
            "params.p too (before 2026-11-28 this file wrote that one as a JSON number). "
            "Invalid cases name the error code."
        ),
        "cases": [
            *_grade_cases(),
            *[
                _e_value(f)
                for f in (
                    [0, 0, 0, 0, 0, 0],
                    [1, 0, 0, 0, 0, 0],
                    [0, 1, 0, 0, 0, 0],
                    [4, 1, 3, 1, 2, 0],
                    [0, 0, 0, 0, 7, 3],
                    [30, 12, 8, 2, 5, 1],
                )
            ],
            case(
                "invalid: five counts",
                "e-value",
                {"prior": PRIOR, "grades": [1, 0, 1, 0, 1]},
                lambda: e_value(counts_of([1, 0, 1, 0, 1])),
            ),
            _decision("grades all 3, t=100, S=70", [0, 0, 0, 0, 70, 30], 0.05),
            _decision("grade 1 only, t=100, S=70", [70, 30, 0, 0, 0, 0], 0.05),
            _decision("no grade ahead never detects", [10, 10, 5, 5, 3, 3], 0.999),
            *_near_tie_cases(),
            _decision("invalid: p zero", [3, 0, 3, 0, 3, 0], 0.0),
            *_detector_cases(),
            *_state_cases(),
        ],
    }


def main() -> None:
    """Rewrite spec/vectors/graded.json."""
    VECTOR_FILE.write_text(render(build()), encoding="utf-8")


if __name__ == "__main__":
    main()
