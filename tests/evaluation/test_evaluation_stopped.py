"""A table run stopped before its end (Ctrl-C, SIGTERM) is recorded as one, without a traceback."""

from __future__ import annotations

import json
import os
import signal

import pytest

from evaluation.__main__ import EXIT_STOPPED, _stop_on_sigterm
from evaluation.__main__ import main as evaluation_main
from evaluation.build import Workspace
from tests.support.fashion import DEBIAN, needs_data


def test_sigterm_stops_a_run_as_ctrl_c_does_and_the_handler_is_put_back():
    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(KeyboardInterrupt), _stop_on_sigterm():
        os.kill(os.getpid(), signal.SIGTERM)
    assert signal.getsignal(signal.SIGTERM) == before


@needs_data
def test_a_stopped_table_is_in_runs_json_and_the_report_says_it_stopped(
    tmp_path, capsys, monkeypatch
):
    def stopped(self, *args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(Workspace, "train_missing", stopped)
    work, out = tmp_path / "work", tmp_path / "results.md"
    command = ["main", "--n-train", "300", "--epochs", "1", "--repeats", "1"]
    command += ["--work", str(work), "--data", str(DEBIAN), "--out", str(out)]
    assert evaluation_main(command) == EXIT_STOPPED
    err = capsys.readouterr().err
    assert "stopped in main; what is done is kept, and the same command resumes it" in err
    assert "Traceback" not in err and not out.exists()  # nothing rewritten half-way
    (run,) = json.loads((work / "runs.json").read_text())
    assert run["tables"] == ["main"] and run["stopped"] is True and run["wall_seconds"] >= 0
    report = ["report", "--work", str(work), "--out", str(out), "--repeats", "1"]
    assert evaluation_main([*report, "--n-train", "300", "--epochs", "1"]) == 0
    assert "; stopped before its end)" in out.read_text()
