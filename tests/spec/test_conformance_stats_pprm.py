"""Run every case of spec/vectors/pprm.json against twinaudit.protocol.stats (spec §7.2).

Each case is read from its JSON alone, as a second implementation would: floats come
from their hex strings, valid cases must give exactly the expected values, invalid
ones must fail with exactly the named error code. The last test checks that the
committed file is what spec/tools/vectors_pprm.py builds today.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from spec.tools import vectors_pprm
from spec.tools.vectors_core import render
from tests.support.vectors import raises_its_error
from twinaudit.protocol.errors import StateError
from twinaudit.protocol.stats.base import Decision
from twinaudit.protocol.stats.paper_test import PaperTest
from twinaudit.protocol.stats.pprm import pprm_interval

VECTOR_FILE = Path(__file__).resolve().parents[2] / "spec" / "vectors" / "pprm.json"
DOC = json.loads(VECTOR_FILE.read_text(encoding="utf-8"))


def _cases(kind: str) -> list[Any]:
    return [pytest.param(case, id=case["name"]) for case in DOC["cases"] if case["kind"] == kind]


def _float(text: str) -> float:
    return float.fromhex(text)


def _outcome(case: dict[str, Any], call: Any) -> Any:
    """Return ``call()``'s result for a valid case; check the error code of an invalid one."""
    if case["valid"]:
        return call()
    raises_its_error(case, call)
    return None


def test_the_document_is_the_pprm_topic() -> None:
    assert DOC["topic"] == "pprm"
    assert {case["kind"] for case in DOC["cases"]} == {"threshold", "interval", "detector"}
    assert len({case["name"] for case in DOC["cases"]}) == len(DOC["cases"])
    for case in DOC["cases"]:
        assert ("expected" in case) == case["valid"] != ("error" in case)


@pytest.mark.parametrize("case", _cases("threshold"))
def test_threshold(case: dict[str, Any]) -> None:
    inp = case["input"]
    test = _outcome(case, lambda: PaperTest(inp["n_pairs"], _float(inp["p"]), _float(inp["alpha"])))
    if case["valid"]:
        assert {"threshold": test.threshold} == case["expected"]


@pytest.mark.parametrize("case", _cases("interval"))
def test_interval(case: dict[str, Any]) -> None:
    inp = case["input"]
    args = (inp["n_pairs"], inp["draws"], inp["successes"], _float(inp["alpha"]))
    got = _outcome(case, lambda: pprm_interval(*args))
    if case["valid"]:
        assert {"lower": got[0], "upper": got[1]} == case["expected"]


@pytest.mark.parametrize("case", _cases("detector"))
def test_detector(case: dict[str, Any]) -> None:
    inp = case["input"]
    test = _outcome(case, lambda: PaperTest(inp["n_pairs"], _float(inp["p"]), _float(inp["alpha"])))
    if not case["valid"]:
        return
    expected = case["expected"]
    assert test.threshold == expected["threshold"]
    intervals = []
    for bit in inp["bits"]:
        step = test.update(int(bit))
        intervals.append(list(step.interval))
        if step.decision is not Decision.CONTINUE:
            break
    assert intervals == expected["intervals"]
    assert (test.decision.value, test.draws, test.successes) == (
        expected["decision"],
        expected["draws"],
        expected["successes"],
    )
    with pytest.raises(StateError):
        test.update(0)


def test_vector_file_matches_the_builder() -> None:
    text = VECTOR_FILE.read_text(encoding="utf-8")
    assert text == render(vectors_pprm.build()), (
        "spec/vectors/pprm.json is stale: run python -m spec.tools.vectors_pprm and review"
    )
