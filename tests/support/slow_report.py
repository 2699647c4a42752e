"""A pytest plugin that keeps the ``slow`` marker true: it names unmarked tests that took long.

Every test not marked ``slow`` adds up its setup, call and teardown times; at the end of
the run, those above :data:`UNMARKED_LIMIT_S` (or ``TWINAUDIT_UNMARKED_LIMIT_S``) are
listed in a section of their own, longest first, with what to do about them. The list
is a report, not a failure, since a shared machine can slow any test down; set
``TWINAUDIT_STRICT_SLOW=1`` to fail the run when it is not empty. ``tests/conftest.py``
loads it for every run; ``-p tests.support.slow_report`` loads it elsewhere.
"""

from __future__ import annotations

import os
from typing import Final

import pytest

#: Seconds an unmarked test may take (setup, call and teardown together) before it is
#: named: twice the "few seconds" of the marker's definition, so that only a test that
#: is clearly slow, not one slowed by a busy machine, is reported.
UNMARKED_LIMIT_S: Final = 10.0


class UnmarkedTimes:
    """The time each unmarked test took, and those over the limit once the run is over."""

    def __init__(self, limit_s: float, strict: bool) -> None:
        """Report tests over ``limit_s``; fail the run over them if ``strict``."""
        self.limit_s = limit_s
        self.strict = strict
        self.times: dict[str, float] = {}
        self.over: list[tuple[float, str]] = []

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """Add the phase's duration to its test's, unless the test is marked slow."""
        if "slow" not in report.keywords:
            self.times[report.nodeid] = self.times.get(report.nodeid, 0.0) + report.duration

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        """Find the unmarked tests over the limit; fail the run if strict."""
        self.over = sorted(
            ((seconds, nodeid) for nodeid, seconds in self.times.items() if seconds > self.limit_s),
            reverse=True,
        )
        if self.over and self.strict:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        """List the unmarked tests over the limit, longest first."""
        if not self.over:
            return
        terminalreporter.section(f"unmarked tests over {self.limit_s:g} s", yellow=True)
        for seconds, nodeid in self.over:
            terminalreporter.write_line(f"{seconds:7.2f}s {nodeid}")
        terminalreporter.write_line(
            "mark each @pytest.mark.slow, or make it faster (docs/development.md, Tests)"
        )


def pytest_configure(config: pytest.Config) -> None:
    """Register the report, with the limit and strictness the environment gives."""
    limit_s = float(os.environ.get("TWINAUDIT_UNMARKED_LIMIT_S", UNMARKED_LIMIT_S))
    strict = os.environ.get("TWINAUDIT_STRICT_SLOW") == "1"
    config.pluginmanager.register(UnmarkedTimes(limit_s, strict), "twinaudit-unmarked-times")
