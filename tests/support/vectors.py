"""Checking a spec vector case against this implementation (tests/spec)."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import pytest

from protocol.errors import TwinauditError


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

    An ``e-value`` case's ``log_statistic`` is informative and compared within 1e-12
    absolute (spec §7.3.4, §7.5); every other figure exactly.
    """
    if not case["valid"]:
        raises_its_error(case, lambda: run(case))
        return
    got = run(case)
    expected = case["expected"]
    if case["kind"] == "e-value":
        want = float.fromhex(expected["log_statistic"])
        assert math.isclose(got.pop("log_statistic"), want, rel_tol=0, abs_tol=1e-12)
        expected = {k: v for k, v in expected.items() if k != "log_statistic"}
    assert got == expected
