"""The rule for running a failed claim again, and the recount of a history (spec §10.7)."""

from __future__ import annotations

import pytest

from twinaudit.protocol.claim.restart import recount, restart_refusal
from twinaudit.protocol.errors import InputError


def _refusal(**changes: object) -> str | None:
    fields: dict[str, object] = {
        "status": "failed",
        "outcome_computed": False,
        "claim_record": 0,
        "record": 0,
        "filed_on_record": ["x", "a"],
        **changes,
    }
    return restart_refusal("a", **fields)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("changes", "words"),
    [
        ({}, None),
        ({"record": 1}, "filed on record 0, not 1"),
        ({"status": "finished"}, "is finished"),
        ({"status": "abandoned"}, "is abandoned"),
        ({"outcome_computed": True}, "computed a pair's outcome"),
        ({"filed_on_record": ["a", "b", "c"]}, "2 claim(s) were filed on record 0 after it"),
        ({"filed_on_record": ["x"]}, "not filed on record 0"),
        # An open claim resumes as any does, whatever was filed after it (§10.2 step 8).
        ({"status": "open", "filed_on_record": ["a", "b"]}, None),
        ({"status": "open", "record": 1}, "filed on record 0, not 1"),
    ],
)
def test_a_failed_claim_runs_again_only_as_the_rule_says(changes, words):
    refusal = _refusal(**changes)
    assert refusal is None if words is None else words in refusal


@pytest.mark.parametrize(
    "events",
    [
        [{"claim": "a", "answer": "filed", "request": "restart"}],
        [{"claim": "a"}],
        [{"claim": "a", "answer": "won"}],
        [{"claim": "a", "request": "rerun"}],
        [{"claim": "a", "answer": "failed-no-outcome"}],
        [{"claim": "a", "answer": "filed"}, {"claim": "a", "answer": "filed"}],
        [{"claim": "a", "record": True, "answer": "filed"}],
        [{"claim": 1, "answer": "filed"}],
    ],
)
def test_a_history_that_cannot_happen_is_refused(events):
    with pytest.raises(InputError):
        recount(events)


def test_a_restart_of_a_claim_never_filed_is_refused():
    assert recount([{"claim": "a", "request": "restart"}]).restarts == ["refused"]
