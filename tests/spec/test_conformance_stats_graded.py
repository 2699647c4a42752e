"""Run every graded-test vector (spec/vectors/graded.json) against the implementation.

Each case is interpreted from its JSON alone, as a second implementation would; the
last test checks that the committed file is exactly what the builder produces.
"""

import json
from fractions import Fraction
from pathlib import Path

import pytest

from spec.tools import vectors_graded
from spec.tools.vectors_core import render
from spec.tools.vectors_graded import state_from_json, state_to_json
from tests.support.vectors import check_test_case
from twinaudit.protocol.stats.base import Decision
from twinaudit.protocol.stats.graded import (
    GradedMixtureTest,
    counts_from_list,
    e_value,
    grade_of,
    log_e_value,
    reaches,
)
from twinaudit.protocol.stats.mixture_prior import get_prior

VECTORS = Path(__file__).resolve().parents[2] / "spec" / "vectors"
DOC = json.loads((VECTORS / "graded.json").read_text(encoding="utf-8"))


def _counts(flat):
    return counts_from_list(flat)


def _run(case):
    kind, inp = case["kind"], case["input"]
    if kind == "grade":
        margin = float.fromhex(inp["margin"])
        return {"grade": grade_of(float.fromhex(inp["difference"]), margin)}
    if kind == "e-value":
        prior = get_prior(inp["prior"])
        m = e_value(_counts(inp["grades"]), prior)
        return {
            "numerator": str(m.numerator),
            "denominator": str(m.denominator),
            "log_statistic": log_e_value(_counts(inp["grades"]), prior),
        }
    if kind == "decision":
        p = float.fromhex(inp["p"])
        return {"detected": reaches(_counts(inp["grades"]), p, get_prior(inp["prior"]))}
    if kind == "detector":
        test = GradedMixtureTest(inp["n_pairs"], float.fromhex(inp["p"]), inp["prior"])
        for item in inp["outcomes"].split(","):
            if test.update(int(item[0]), int(item[1:])).decision is not Decision.CONTINUE:
                break
        return {"decision": test.decision.value, "state": state_to_json(test.state())}
    if kind == "state":
        restored = GradedMixtureTest.from_state(state_from_json(inp["state"]))
        return {"state": state_to_json(restored.state())}
    raise AssertionError(kind)


@pytest.mark.parametrize("case", [pytest.param(c, id=c["name"]) for c in DOC["cases"]])
def test_case(case):
    check_test_case(case, _run)


def test_decisions_agree_with_the_rational_rule():
    for case in DOC["cases"]:
        if case["kind"] == "decision" and case["valid"]:
            inp = case["input"]
            prior = get_prior(inp["prior"])
            exact = e_value(_counts(inp["grades"]), prior) * Fraction(float.fromhex(inp["p"])) >= 1
            assert case["expected"]["detected"] == exact, case["name"]


def test_near_ties_really_are_near():
    near = [c for c in DOC["cases"] if "near tie" in c["name"]]
    assert len(near) == 9
    assert {c["expected"]["detected"] for c in near} == {True, False}


def test_file_matches_builder():
    assert (VECTORS / "graded.json").read_text(encoding="utf-8") == render(vectors_graded.build())
