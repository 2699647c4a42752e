"""The report that keeps the ``slow`` marker true (tests/support/slow_report.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

SAMPLE = """
import time

import pytest


def test_quick():
    pass


def test_unmarked_and_long():
    time.sleep(0.3)


@pytest.mark.slow
def test_marked_and_long():
    time.sleep(0.3)
"""


def _run(folder: Path, **env: str) -> subprocess.CompletedProcess[str]:
    (folder / "test_sample.py").write_text(SAMPLE)
    (folder / "pytest.ini").write_text("[pytest]\nmarkers =\n    slow: slow\n")
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "tests.support.slow_report", "-p",
         "no:cacheprovider", "test_sample.py"],
        cwd=folder, capture_output=True, text=True, timeout=60, check=False,
        env={**os.environ, "PYTHONPATH": str(ROOT), "TWINAUDIT_UNMARKED_LIMIT_S": "0.2", **env},
    )  # fmt: skip


def test_an_unmarked_test_over_the_limit_is_named_and_a_marked_one_is_not(tmp_path):
    run = _run(tmp_path)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "unmarked tests over 0.2 s" in run.stdout
    assert "test_sample.py::test_unmarked_and_long" in run.stdout
    assert "test_marked_and_long" not in run.stdout.split("unmarked tests over")[1]
    assert "test_quick" not in run.stdout


def test_strict_fails_the_run(tmp_path):
    run = _run(tmp_path, TWINAUDIT_STRICT_SLOW="1")
    assert run.returncode == 1
    assert "3 passed" in run.stdout
