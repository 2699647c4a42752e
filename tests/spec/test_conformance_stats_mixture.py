"""Run every mixture-test vector (spec/vectors/mixture.json) against the implementation.

Each case is interpreted from its JSON alone, as a second implementation would; the
last test checks that the committed file is exactly what the builder produces.
"""

import json
from fractions import Fraction
from pathlib import Path

import pytest

from spec.tools import vectors_mixture
from spec.tools.vectors_core import render
from tests.support.vectors import check_test_case
from twinaudit.protocol.stats.base import Decision
from twinaudit.protocol.stats.mixture import (
    MixtureTest,
    detection_boundary,
    e_value,
    log_e_value,
    reaches,
)
from twinaudit.protocol.stats.mixture_prior import get_prior

VECTORS = Path(__file__).resolve().parents[2] / "spec" / "vectors"
DOC = json.loads((VECTORS / "mixture.json").read_text(encoding="utf-8"))


def _cases():
    return [pytest.param(case, id=case["name"]) for case in DOC["cases"]]


def _run(case):
    kind, inp = case["kind"], case["input"]
    if kind == "prior":
        prior = get_prior(inp["prior"])
        return {
            "resolution": prior.resolution,
            "atoms": [{"numerator": a, "weight": w} for a, w in prior.atoms],
        }
    if kind == "e-value":
        prior = get_prior(inp["prior"])
        m = e_value(inp["draws"], inp["successes"], prior)
        return {
            "numerator": str(m.numerator),
            "denominator": str(m.denominator),
            "log_statistic": log_e_value(inp["draws"], inp["successes"], prior),
        }
    if kind == "decision":
        p = float.fromhex(inp["p"])
        return {"detected": reaches(inp["draws"], inp["successes"], p, get_prior(inp["prior"]))}
    if kind == "boundary":
        p = float.fromhex(inp["p"])
        return {"boundary": detection_boundary(p, inp["max_draws"], get_prior(inp["prior"]))}
    if kind == "detector":
        test = MixtureTest(inp["n_pairs"], float.fromhex(inp["p"]), inp["prior"])
        for bit in inp["bits"]:
            if test.update(int(bit)).decision is not Decision.CONTINUE:
                break
        return {"decision": test.decision.value, "draws": test.draws, "successes": test.successes}
    raise AssertionError(kind)


@pytest.mark.parametrize("case", _cases())
def test_case(case):
    check_test_case(case, _run)


def test_decisions_agree_with_the_rational_rule():
    for case in DOC["cases"]:
        if case["kind"] == "decision" and case["valid"] and case["input"]["draws"] <= 5000:
            inp = case["input"]
            m = e_value(inp["draws"], inp["successes"], get_prior(inp["prior"]))
            exact = m * Fraction(float.fromhex(inp["p"])) >= 1
            assert case["expected"]["detected"] == exact, case["name"]


def test_near_ties_really_are_near():
    near = [c for c in DOC["cases"] if "near tie" in c["name"]]
    assert len(near) >= 9
    assert {c["expected"]["detected"] for c in near} == {True, False}


def test_file_matches_builder():
    assert (VECTORS / "mixture.json").read_text(encoding="utf-8") == render(vectors_mixture.build())
