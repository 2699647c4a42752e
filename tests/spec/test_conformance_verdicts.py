"""Run every case of spec/vectors/verdicts.json: whole claims checked (§11) and replayed (§12).

An ``openings`` case is also checked against the openings of its pairs (§12, §12.1); a
case whose ``expected`` has ``score_agreement`` also says how the replay's recorded
scores agreed with the recomputed ones (bit for bit, or within the tolerance of §1.2).

Each case is read from its JSON alone, as a second implementation would: the public
key is appendix B's, the envelope and transcript are the file's. The last test checks
that the committed file is what spec/tools/vectors_verdicts.py builds today.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from spec.tools import vectors_verdicts
from spec.tools.vectors_core import render
from tests.support.vectors import raises_its_error
from twinaudit.protocol.claim.verdict import check_verdict
from twinaudit.protocol.keys import public_key_from_raw
from twinaudit.protocol.stats.base import log_statistics_agree
from twinaudit.verifier.reexecute import check_openings
from twinaudit.verifier.replay import replay

VECTOR_FILE = Path(__file__).resolve().parents[2] / "spec" / "vectors" / "verdicts.json"
DOC = json.loads(VECTOR_FILE.read_text(encoding="utf-8"))
KEY = public_key_from_raw(bytes.fromhex(DOC["description"].split("public key ")[1][:64]))


def test_the_document_covers_every_test_both_tie_rules_a_budget_stop_and_a_detection() -> None:
    assert DOC["topic"] == "verdicts"
    valid = [c for c in DOC["cases"] if c["valid"]]
    envelopes = [check_verdict(c["input"]["envelope"].encode(), KEY) for c in valid]
    tests = {v.claim.test_name for v in envelopes}
    assert tests == {"mixture-e", "pprm-chernoff", "mixture-graded"}
    assert {v.claim.tie_rule.value for v in envelopes} == {"coin", "skip"}
    assert {v.stop for v in envelopes} == {"detected", "exhausted", "budget"}
    assert any(v.claim.excluded and v.earlier_claims > 0 for v in envelopes)
    assert {c["kind"] for c in DOC["cases"] if not c["valid"]} == {"check", "replay", "openings"}
    assert len({c["name"] for c in DOC["cases"]}) == len(DOC["cases"])


@pytest.mark.parametrize("case", [pytest.param(c, id=c["name"]) for c in DOC["cases"]])
def test_case(case: dict[str, Any]) -> None:
    envelope = case["input"]["envelope"].encode()
    if case["kind"] == "check":
        raises_its_error(case, lambda: check_verdict(envelope, KEY))
        return
    verdict = check_verdict(envelope, KEY)
    transcript = bytes.fromhex(case["input"]["transcript"])
    if case["kind"] == "openings":
        replay(verdict, transcript)  # the verdict replays: only the openings can refuse it
        openings = bytes.fromhex(case["input"]["openings"])
        if case["valid"]:
            assert check_openings(verdict, transcript, openings) == case["expected"]["pairs"]
        else:
            raises_its_error(case, lambda: check_openings(verdict, transcript, openings))
        return
    if not case["valid"]:
        raises_its_error(case, lambda: replay(verdict, transcript))
        return
    result = replay(verdict, transcript)
    expected = case["expected"]
    assert result.decision == expected["decision"] == verdict.decision
    assert verdict.stop == expected["stop"] and list(verdict.opened) == expected["opened"]
    assert result.indicators == expected["indicators"]
    final = result.final
    assert (final.draws, final.successes) == (expected["draws"], expected["successes"])
    assert final.to_value()["interval"] == expected["interval"]
    if expected["log_statistic"] is None:
        assert final.log_statistic is None
    else:
        want = float.fromhex(expected["log_statistic"])
        assert final.log_statistic is not None
        assert log_statistics_agree(final.log_statistic, want, final.draws)
    if "score_agreement" in expected:  # spec §1.2, §12: what a replayer reports
        agreement = result.agreement
        assert {
            "scores": agreement.recomputed,
            "bit_identical": agreement.bit_identical,
            "within_tolerance": agreement.within_tolerance,
        } == expected["score_agreement"]


def test_the_agreement_cases_tell_a_replay_within_the_tolerance_from_an_identical_one() -> None:
    agreement = [
        c["expected"]["score_agreement"]
        for c in DOC["cases"]
        if c["valid"] and "score_agreement" in c["expected"]
    ]
    assert {a["bit_identical"] for a in agreement} == {True, False}
    assert all(a["bit_identical"] == (a["within_tolerance"] == 0) for a in agreement)


def test_the_committed_file_is_what_the_builder_makes() -> None:
    assert VECTOR_FILE.read_text(encoding="utf-8") == render(vectors_verdicts.build())
