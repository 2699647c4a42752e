"""``verifier check`` and ``verifier replay`` refuse every malformed verdict and transcript.

Issue #20: a red team found a signed verdict with ``claim.model = 5`` reported VALID,
``claim.test = 5`` crashing with a TypeError, crafted transcripts crashing replay
(no records, a record without ``published``) or accepted (extra keys, a wrong
``type``, altered digests or shape), and a deeply nested envelope raising
RecursionError. Each case here is signed with the arbiter's key (or re-chained into
the verdict it belongs to), so only the check under test can refuse it; each must
fail with a typed error, and the CLI with exit 1 and no traceback.
"""

from __future__ import annotations

import copy
from dataclasses import FrozenInstanceError
from typing import Any

import pytest

from spec.tools.vectors_verdicts import (
    CHECK_CASES,
    REPLAY_CASES,
    first_pair,
    set_field,
)
from tests.support.claims import make_pairset, run_session
from tests.support.keys import KEY
from twinaudit.cli.main import main as cli_main
from twinaudit.protocol.claim.claim_map import ClaimMap
from twinaudit.protocol.claim.transcript import TranscriptWriter, iter_records
from twinaudit.protocol.claim.verdict import (
    FinalState,
    TranscriptHead,
    check_verdict,
    parse_verdict,
)
from twinaudit.protocol.encoding import decode, encode
from twinaudit.protocol.envelope import Envelope, payload_type, sign_envelope
from twinaudit.protocol.errors import EncodingError, InputError, VerificationError
from twinaudit.protocol.keys import key_id, public_key_pem
from twinaudit.protocol.oracles.base import OracleInfo
from twinaudit.verifier.replay import replay


@pytest.fixture(scope="module")
def claim():
    """A finished claim: (verdict payload, transcript records), the same on every run.

    Its salts and nonce are fixed: with fresh ones the claim was sometimes detected, and
    a case that edits the decision to "detected" then changed nothing and was accepted.
    """
    session = run_session(
        make_pairset(24, salt_seed=b"strictness"),
        max_pairs=16,
        rho=bytes(32),
        claim_nonce=bytes(32),
    )
    payload = session.verdict_payload(
        arbiter=key_id(KEY.public_key()), time="2026-11-21T21:00:00Z", environment={"os": "x"}
    )
    assert (payload["decision"], payload["stop"]) == ("not-detected", "budget")
    return payload, list(iter_records(session.transcript.to_bytes()))


def _signed(payload: dict[str, Any]) -> bytes:
    return sign_envelope(encode(payload), payload_type("verdict"), KEY).to_json()


VERDICT_CASES = {
    **CHECK_CASES,  # the vector file's, plus:
    "claim.score is a list": set_field("claim.score", [1]),
    "claim.record.n_pairs 0": set_field("claim.record.n_pairs", 0),
    "claim.claim_nonce text": set_field("claim.claim_nonce", "nonce"),
    "claim.model.oracle not a Describe map": set_field("claim.model.oracle", {"model_name": "m"}),
    "claim.model.name a number": set_field("claim.model.name", 7),
    "claim.score unknown function": set_field("claim.score.function", "image-guesser"),
    "claim.test unknown": set_field("claim.test.name", "t-test"),
    "claim.test.params p out of range": set_field("claim.test.params.p", 1.5),
    "claim.test.params another prior": set_field("claim.test.params.prior", "uniform"),
    "claim.test.params p text": set_field("claim.test.params.p", "0.05"),
    "claim.window 0": set_field("claim.window", 0),
    "claim.max_pairs negative": set_field("claim.max_pairs", -1),
    "claim extra key": set_field("claim.extra", 0),
    "queries negative": set_field("queries", -1),
    "final.log_statistic text": set_field("final.log_statistic", "1.0"),
}


@pytest.mark.parametrize("case", list(VERDICT_CASES))
def test_check_refuses_a_signed_verdict_with_a_malformed_field(claim, case):
    payload = copy.deepcopy(claim[0])
    VERDICT_CASES[case](payload)
    with pytest.raises(InputError):
        check_verdict(_signed(payload), KEY.public_key())


def test_the_untouched_verdict_checks_and_replays(claim):
    payload, records = claim
    verdict = check_verdict(_signed(payload), KEY.public_key())
    transcript = _chain(records)[0]
    assert replay(verdict, transcript).decision == payload["decision"]


def test_a_checked_verdict_is_typed_and_immutable(claim):
    payload, _ = claim
    verdict = check_verdict(_signed(payload), KEY.public_key())
    assert isinstance(verdict.claim, ClaimMap) and isinstance(verdict.final, FinalState)
    assert encode(verdict.claim.to_value()) == encode(payload["claim"])
    assert verdict.final.to_value() == payload["final"]
    assert verdict.opened == tuple(payload["opened"])
    assert verdict.transcript == TranscriptHead(**payload["transcript"])
    assert (verdict.decision, verdict.stop, verdict.queries) == (
        payload["decision"],
        payload["stop"],
        payload["queries"],
    )
    assert encode(dict(verdict.payload)) == encode(payload)
    with pytest.raises(FrozenInstanceError):
        verdict.decision = "detected"  # type: ignore[misc]
    with pytest.raises(FrozenInstanceError):
        verdict.final.successes += 1  # type: ignore[misc]
    with pytest.raises(TypeError):
        verdict.environment["os"] = "y"  # type: ignore[index]


def test_replay_reads_the_checked_verdict_and_parses_nothing_again(claim, monkeypatch):
    """The claim map and its Describe map are parsed once, by check (issue #41)."""
    payload, records = claim
    verdict = check_verdict(_signed(payload), KEY.public_key())

    def parsed_again(*args: object) -> None:
        raise AssertionError("parsed again")

    monkeypatch.setattr(ClaimMap, "from_value", parsed_again)
    monkeypatch.setattr(OracleInfo, "from_value", parsed_again)
    assert replay(verdict, _chain(records)[0]).decision == verdict.decision


def _chain(records: list[dict[str, Any]]) -> tuple[bytes, dict[str, Any]]:
    """Frame ``records``; return the transcript and the verdict's ``transcript`` field."""
    writer = TranscriptWriter()
    for record in records:
        writer.append(record)
    return writer.to_bytes(), {"hash": writer.head, "records": writer.count}


def _header_extra(records: list[dict[str, Any]]) -> None:
    records[0] = {**records[0], "note": "x"}


TRANSCRIPT_CASES = {
    **REPLAY_CASES,  # the vector file's, plus:
    "header with an extra key": _header_extra,
    "pair digests not two": first_pair(set_field("digests", [bytes(32)])),
    "pair shape with no rows": first_pair(set_field("shape", [0, 28, 1])),
    "pair shape of two channels": first_pair(set_field("shape", [28, 28, 2])),
    "pair label negative": first_pair(set_field("label", -1)),
    "pair published 2": first_pair(set_field("published", 2)),
    "pair window text": first_pair(set_field("window", "0")),
    "pair outcome unknown": first_pair(set_field("outcome", "x")),
    "pair answers missing a version": first_pair(set_field("answers", [[[0.5, 0.5]]])),
}


@pytest.mark.parametrize("case", list(TRANSCRIPT_CASES))
def test_replay_refuses_a_crafted_transcript(claim, case):
    payload, records = copy.deepcopy(claim)
    TRANSCRIPT_CASES[case](records)
    transcript, chained = _chain(records)
    payload["transcript"] = chained
    verdict = parse_verdict(payload)
    with pytest.raises(VerificationError):
        replay(verdict, transcript)


def test_a_deeply_nested_envelope_is_an_encoding_error():
    with pytest.raises(EncodingError, match="nested"):
        Envelope.from_json(b"[" * 100_000 + b"]" * 100_000)


def test_the_cli_answers_every_case_with_exit_1_and_no_traceback(claim, tmp_path, capsys):
    pub = tmp_path / "arbiter.pub"
    pub.write_bytes(public_key_pem(KEY.public_key()))
    payload = copy.deepcopy(claim[0])
    payload["claim"]["test"] = 5
    (tmp_path / "verdict.json").write_bytes(_signed(payload))
    assert (
        cli_main(["verifier", "check", str(tmp_path / "verdict.json"), "--pubkey", str(pub)]) == 1
    )
    assert "INVALID" in capsys.readouterr().err
    good = copy.deepcopy(claim[0])
    good["transcript"] = _chain([])[1]
    (tmp_path / "good.json").write_bytes(_signed(good))
    (tmp_path / "empty.bin").write_bytes(b"")
    args = ["verifier", "replay", str(tmp_path / "good.json"), "--transcript"]
    assert cli_main([*args, str(tmp_path / "empty.bin"), "--pubkey", str(pub)]) == 1
    err = capsys.readouterr().err
    assert "REPLAY FAILED" in err and "Traceback" not in err
    (tmp_path / "deep.json").write_bytes(b"[" * 50_000 + b"]" * 50_000)
    assert cli_main(["verifier", "check", str(tmp_path / "deep.json"), "--pubkey", str(pub)]) == 1
    assert "nested" in capsys.readouterr().err
    # The decoded payload of every signed case above is what the checks saw.
    assert decode(Envelope.from_json(_signed(payload)).payload)["claim"]["test"] == 5


def _no_draw(payload: dict[str, Any]) -> None:
    payload["final"].update(draws=0, successes=0, interval=None, log_statistic=0.5)


@pytest.mark.parametrize(
    "edit",
    [set_field("transcript.records", True), _no_draw],
    ids=["transcript.records true", "log_statistic 0.5 with 0 draws"],
)
def test_issue_40_n7_verifier_check_refuses(claim, tmp_path, capsys, edit):
    # Issue #40 N7: `verifier check` said VALID to both on main.
    pub = tmp_path / "arbiter.pub"
    pub.write_bytes(public_key_pem(KEY.public_key()))
    payload = copy.deepcopy(claim[0])
    edit(payload)
    (tmp_path / "verdict.json").write_bytes(_signed(payload))
    assert (
        cli_main(["verifier", "check", str(tmp_path / "verdict.json"), "--pubkey", str(pub)]) == 1
    )
    err = capsys.readouterr().err
    assert "INVALID" in err and "Traceback" not in err
