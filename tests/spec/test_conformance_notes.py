"""Run every case of spec/vectors/notes.json: signed notes, checkpoints, cosignatures (§9.5).

Each case is read from its JSON alone, as a second implementation would, by the runner of
its kind in spec/tools/vectors_notes.py (``RUNNERS``, which build the file too). The last
test checks that the committed file is what that module builds today.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from spec.tools import vectors_notes
from spec.tools.vectors_core import render
from tests.support.vectors import raises_its_error

VECTOR_FILE = Path(__file__).resolve().parents[2] / "spec" / "vectors" / "notes.json"
DOC = json.loads(VECTOR_FILE.read_text(encoding="utf-8"))


def test_the_document_covers_every_kind_valid_and_invalid() -> None:
    assert DOC["topic"] == "notes"
    kinds = {(c["kind"], c["valid"]) for c in DOC["cases"]}
    for kind in ("vkey", "sign", "open", "checkpoint-text", "checkpoint-note"):
        assert {(kind, True), (kind, False)} <= kinds
    assert ("key-id", True) in kinds
    errors = {c["error"] for c in DOC["cases"] if not c["valid"]}
    assert {"invalid-input", "invalid-signature", "non-canonical-encoding"} <= errors
    assert {"limit-exceeded", "verification-failed", "root-mismatch"} <= errors
    assert len({c["name"] for c in DOC["cases"]}) == len(DOC["cases"])


@pytest.mark.parametrize("case", [pytest.param(c, id=c["name"]) for c in DOC["cases"]])
def test_case(case: dict[str, Any]) -> None:
    run = vectors_notes.RUNNERS[case["kind"]]
    if not case["valid"]:
        raises_its_error(case, lambda: run(case["input"]))
        return
    assert run(case["input"]) == case["expected"]


def test_the_committed_file_is_what_the_builder_makes() -> None:
    assert VECTOR_FILE.read_text(encoding="utf-8") == render(vectors_notes.build())
