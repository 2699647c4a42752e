"""The window-schedule section of the results: replaying recorded claims' pair counts."""

from __future__ import annotations

from evaluation.windows import requests_until, window_section
from twinaudit.protocol.claim.schedule import WindowSchedule


def _result(audit: str, needed: int, n_pairs: int, detected: bool) -> dict[str, object]:
    opened = requests_until(WindowSchedule(8, 8, n_pairs, 64), needed)[0] if detected else n_pairs
    return {
        "audit": audit,
        "n_pairs": n_pairs,
        "decision": "detected" if detected else "not-detected",
        "indicators": "1" * needed,
        "pairs_opened": opened,
    }


def test_requests_until_counts_whole_requests() -> None:
    schedule = WindowSchedule(8, 16, limit=200, per_pair=64)
    assert requests_until(schedule, 1) == (8, 1)
    assert requests_until(schedule, 8) == (8, 1)
    assert requests_until(schedule, 9) == (24, 2)
    assert requests_until(schedule, 41) == (56, 4)
    assert requests_until(schedule, 200) == (200, 13)


def test_constant_eight_reproduces_what_the_claims_opened() -> None:
    results = {
        "a": _result("C1-k32", 9, 200, True),
        "b": _result("C1-k32", 40, 200, True),
        "c": _result("C3-k32", 200, 200, False),
    }
    lines = window_section(results, {"C1-k32": 32, "C3-k32": 32})
    rows = {line.split(" | ")[0]: line for line in lines if line.startswith("| ")}
    # Constant 8: the detecting claims opened 16 and 40 pairs (mean 28) in 2 and 5
    # requests; the clean claim opened all 200 in 25.
    assert rows["| 8 → 8"] == "| 8 → 8 | 28.0 | +0% | 10.7 |"
    # One pair at a time: exactly what the test needed (9 and 40), 200 requests for the clean one.
    assert rows["| 1 → 1"] == "| 1 → 1 | 24.5 | -12% | 83.0 |"
    # 8, 16, 16, …: 24 and 40 pairs.
    assert rows["| 8 → 16"].startswith("| 8 → 16 | 32.0 | +14% |")


def test_no_audits_no_section() -> None:
    assert window_section({}, {}) == []
