"""Checking a spec vector case against this implementation (tests/spec)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from twinaudit.protocol.errors import TwinauditError
from twinaudit.protocol.stats.base import log_statistics_agree


def raises_its_error(case: dict[str, Any], call: Callable[[], object]) -> None:
    """Assert that ``call()`` raises the typed error the invalid ``case`` names.

    Its code, and its refusal rule (spec §2.2): the case's ``rule``, or none where the
    case names none.
    """
    with pytest.raises(TwinauditError) as info:
        call()
    assert info.value.code == case["error"], info.value.diagnostics()
    assert info.value.rule == case.get("rule"), info.value.diagnostics()


def check_test_case(case: dict[str, Any], run: Callable[[dict[str, Any]], dict[str, Any]]) -> None:
    """Check a sequential test's case: its error, or ``run(case)`` equal to its expectation.

    An ``e-value`` case's ``log_statistic`` is informative and compared under the
    agreement rule of spec §7.3.3 (its draws are the case's ``draws``, or the sum of
    its ``grades``); every other figure exactly.
    """
    if not case["valid"]:
        raises_its_error(case, lambda: run(case))
        return
    got = run(case)
    expected = case["expected"]
    if case["kind"] == "e-value":
        want = float.fromhex(expected["log_statistic"])
        inp = case["input"]
        draws = inp["draws"] if "draws" in inp else sum(inp["grades"])
        assert log_statistics_agree(got.pop("log_statistic"), want, draws)
        expected = {k: v for k, v in expected.items() if k != "log_statistic"}
    assert got == expected
