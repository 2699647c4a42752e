"""Run every case of spec/vectors/claims.json against verifier.schedule (spec §10.2).

Each case is read from its JSON alone, as a second implementation would. The last
test checks that the committed file is what spec/tools/vectors_claims.py builds today.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from protocol.errors import TwinauditError
from spec.tools import vectors_claims
from spec.tools.vectors_core import render
from verifier.schedule import WindowSchedule

VECTOR_FILE = Path(__file__).resolve().parent.parent / "spec" / "vectors" / "claims.json"
DOC = json.loads(VECTOR_FILE.read_text(encoding="utf-8"))


def test_the_document_is_the_claims_topic() -> None:
    assert DOC["topic"] == "claims"
    assert {case["kind"] for case in DOC["cases"]} == {"schedule"}
    assert len({case["name"] for case in DOC["cases"]}) == len(DOC["cases"])
    assert any(not case["valid"] for case in DOC["cases"])


@pytest.mark.parametrize("case", [pytest.param(c, id=c["name"]) for c in DOC["cases"]])
def test_schedule(case: dict[str, Any]) -> None:
    inp = case["input"]

    def build() -> WindowSchedule:
        return WindowSchedule(
            inp["window"],
            inp["window_max"],
            inp["limit"],
            inp["queries_per_pair"],
            inp["query_budget"],
        )

    if not case["valid"]:
        with pytest.raises(TwinauditError) as info:
            build()
        assert info.value.code == case["error"]
        return
    schedule = build()
    assert schedule.sizes() == case["expected"]["sizes"]
    total = sum(case["expected"]["sizes"])
    numbers = schedule.windows_of(total)
    assert [numbers.count(j) for j in range(len(case["expected"]["sizes"]))] == case["expected"][
        "sizes"
    ]


def test_the_committed_file_is_what_the_builder_makes() -> None:
    assert VECTOR_FILE.read_text(encoding="utf-8") == render(vectors_claims.build())
