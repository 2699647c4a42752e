"""The shuffled-suite recorder (``scripts/shuffled_suite.py``, ``make test-shuffled-record``).

Its record is the evidence that the suite passes in shuffled orders (issue #44 item 5),
so what it counts is tested here: the JUnit tallies, a real shuffled run of a small file
with one failing test, and the shape of every archived record.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "shuffled_suite.py"
RECORD_KEYS = {
    "started",
    "commit",
    "clean_tree",
    "seed",
    "command",
    "extra_args",
    "exit_code",
    "tests",
    "passed",
    "failed",
    "errors",
    "skipped",
    "failed_ids",
    "wall_s",
    "cpu_s",
    "load_1min",
    "machine",
}


@pytest.fixture(scope="module")
def recorder() -> ModuleType:
    spec = importlib.util.spec_from_file_location("shuffled_suite", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_junit_counts_every_outcome(recorder: ModuleType, tmp_path: Path) -> None:
    junit = tmp_path / "junit.xml"
    junit.write_text(
        '<?xml version="1.0"?><testsuites><testsuite tests="4" failures="1" errors="1" '
        'skipped="1"><testcase classname="a.b" name="ok"/>'
        '<testcase classname="a.b" name="bad"><failure message="x"/></testcase>'
        '<testcase classname="a.c" name="broken"><error message="y"/></testcase>'
        '<testcase classname="a.c" name="later"><skipped/></testcase>'
        "</testsuite></testsuites>"
    )
    counts = recorder._junit_counts(junit)
    assert counts == {
        "tests": 4,
        "passed": 1,
        "failed": 1,
        "errors": 1,
        "skipped": 1,
        "failed_ids": ["a.b::bad", "a.c::broken"],
    }


def test_a_shuffled_run_records_its_failure(recorder: ModuleType, tmp_path: Path) -> None:
    target = tmp_path / "test_two.py"
    target.write_text("def test_passes():\n    pass\n\ndef test_fails():\n    assert False\n")
    # Its own rootdir: the test ids do not depend on where the repository lies (a clone
    # under /tmp, beside pytest's temporary folders, named them ../pytest-of-…).
    record = recorder.run_once(3, [f"--rootdir={tmp_path}", str(target)])
    assert set(record) == RECORD_KEYS
    assert record["seed"] == 3
    assert "--randomly-seed=3" in record["command"]
    assert (record["tests"], record["passed"], record["failed"]) == (2, 1, 1)
    assert record["exit_code"] == 1
    assert record["failed_ids"] == ["test_two::test_fails"]
    assert record["machine"]["cpus"] >= 1


def test_archived_records_have_the_recorder_shape() -> None:
    path = ROOT / "docs" / "results-data" / "shuffled-suite.jsonl"
    if not path.exists():
        pytest.skip("no shuffled-suite record archived yet")
    for line in path.read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        assert set(record) == RECORD_KEYS
        assert (
            record["passed"] + record["failed"] + record["errors"] + record["skipped"]
            == (record["tests"])
        )
        assert (record["exit_code"] == 0) == (record["failed"] + record["errors"] == 0)
