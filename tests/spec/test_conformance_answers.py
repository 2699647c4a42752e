"""Run every case of spec/vectors/answers.json: answers the practitioner signs (§10.8).

Each case is read from its JSON alone, as a second implementation would, by the runner of
its kind in spec/tools/vectors_answers.py (``RUNNERS``, which build the file too). The
last test checks that the committed file is what that module builds today.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from spec.tools import vectors_answers
from spec.tools.vectors_core import render
from tests.support.vectors import raises_its_error

VECTOR_FILE = Path(__file__).resolve().parents[2] / "spec" / "vectors" / "answers.json"
DOC = json.loads(VECTOR_FILE.read_text(encoding="utf-8"))


def test_the_document_covers_every_kind_valid_and_invalid() -> None:
    assert DOC["topic"] == "answers"
    kinds = {(c["kind"], c["valid"]) for c in DOC["cases"]}
    assert {("receive", True), ("receive", False), ("window", True), ("window", False)} <= kinds
    assert ("sign", True) in kinds
    errors = {c["kind"]: c["error"] for c in DOC["cases"] if not c["valid"]}
    assert errors == {"receive": "oracle-failed", "window": "verification-failed"}
    assert len({c["name"] for c in DOC["cases"]}) == len(DOC["cases"])


@pytest.mark.parametrize("case", [pytest.param(c, id=c["name"]) for c in DOC["cases"]])
def test_case(case: dict[str, Any]) -> None:
    run = vectors_answers.RUNNERS[case["kind"]]
    if not case["valid"]:
        raises_its_error(case, lambda: run(case["input"]))
        return
    assert run(case["input"]) == case["expected"]


def test_the_committed_file_is_what_the_builder_makes() -> None:
    assert VECTOR_FILE.read_text(encoding="utf-8") == render(vectors_answers.build())
