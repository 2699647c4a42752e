"""Replay with the openings: what a transcript records of the items, recomputed from them.

Issue #40 N7: ``verifier replay`` accepted a verdict whose transcript record had another
``shape``, chained and signed again. Replay alone cannot refuse it: a record's shape, like
its version digests and query digests, follows from the pair's items, which replay does
not hold (spec §12; the copy parameters it draws depend on the shape only for the crop
families). Given the openings of the opened pairs (spec §12.1, which the owner writes with
``owner openings``), ``verifier replay --openings`` rebuilds every window's queries from
the items and the PRG, as ``reexecute`` does without the model, and refuses every record
field the items fix that differs.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

import pytest

from tests.support.claims import make_pairset, run_session
from tests.support.keys import KEY
from twinaudit.cli.main import main as cli_main
from twinaudit.protocol.claim.openings import OpenedPair, encode_openings
from twinaudit.protocol.claim.transcript import TranscriptWriter, iter_records
from twinaudit.protocol.claim.verdict import check_verdict
from twinaudit.protocol.encoding import encode
from twinaudit.protocol.envelope import payload_type, sign_envelope
from twinaudit.protocol.errors import VerificationError
from twinaudit.protocol.keys import key_id, public_key_pem
from twinaudit.verifier.reexecute import check_openings
from twinaudit.verifier.replay import replay


@pytest.fixture(scope="module")
def claim():
    """A finished claim: its verdict payload, transcript records and openings file."""
    pairs = make_pairset(24, salt_seed=b"issue 40 N7")
    session = run_session(pairs, max_pairs=16, rho=bytes(32), claim_nonce=bytes(32))
    payload = session.verdict_payload(
        arbiter=key_id(KEY.public_key()), time="2026-11-21T21:00:00Z", environment={"os": "x"}
    )
    opened = [
        OpenedPair(i, pairs.pair_opening(i), pairs.opening(i).proof) for i in payload["opened"]
    ]
    records = list(iter_records(session.transcript.to_bytes()))
    return payload, records, encode_openings(pairs.root, opened)


def _signed(payload: dict[str, Any], records: list[dict[str, Any]]) -> tuple[bytes, bytes]:
    """Chain ``records`` into the payload's transcript and sign it; return both files."""
    writer = TranscriptWriter()
    for record in records:
        writer.append(record)
    payload = dict(payload, transcript={"hash": writer.head, "records": writer.count})
    return sign_envelope(encode(payload), payload_type("verdict"), KEY).to_json(), writer.to_bytes()


def _first(key: str, change: Callable[[Any], Any]) -> Callable[[list[dict[str, Any]]], None]:
    def edit(records: list[dict[str, Any]]) -> None:
        records[1][key] = change(records[1][key])

    return edit


#: Record fields that follow from the items, changed in the first pair record.
CHANGES = {
    "shape one row more": _first("shape", lambda s: [s[0] + 1, s[1], s[2]]),
    "shape of three channels": _first("shape", lambda s: [s[0], s[1], 3]),
    "label another class": _first("label", lambda y: (y + 1) % 10),
    "a version digest": _first("digests", lambda d: [d[1], d[0]]),
    "a query digest": _first("query_digests", lambda d: [bytes(32), d[1]]),
}


def test_the_untouched_verdict_replays_with_its_openings(claim):
    payload, records, openings = claim
    envelope, transcript = _signed(payload, records)
    verdict = check_verdict(envelope, KEY.public_key())
    replay(verdict, transcript)
    assert check_openings(verdict, transcript, openings) == len(payload["opened"])


@pytest.mark.parametrize("change", list(CHANGES))
def test_a_field_the_items_fix_is_refused_with_the_openings(claim, change):
    payload, records, openings = claim
    records = copy.deepcopy(records)
    CHANGES[change](records)
    envelope, transcript = _signed(payload, records)
    verdict = check_verdict(envelope, KEY.public_key())
    if change.startswith("shape"):
        replay(verdict, transcript)  # replay alone cannot see it (spec §12)
    with pytest.raises(VerificationError, match="pair"):
        replay(verdict, transcript)
        check_openings(verdict, transcript, openings)


def test_issue_40_n7_verifier_replay_refuses_a_changed_shape_given_the_openings(
    claim, tmp_path, capsys
):
    payload, records, openings = claim
    records = copy.deepcopy(records)
    CHANGES["shape one row more"](records)
    envelope, transcript = _signed(payload, records)
    files = {"verdict.json": envelope, "transcript.bin": transcript, "openings.bin": openings}
    files["arbiter.pub"] = public_key_pem(KEY.public_key())
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
    args = ["verifier", "replay", str(tmp_path / "verdict.json")]
    args += ["--transcript", str(tmp_path / "transcript.bin")]
    args += ["--pubkey", str(tmp_path / "arbiter.pub")]
    assert cli_main([*args, "--openings", str(tmp_path / "openings.bin")]) == 1
    err = capsys.readouterr().err
    assert "REPLAY FAILED" in err and "recorded shape" in err and "Traceback" not in err
    # Without the openings the shape cannot be recomputed: replay says so.
    assert cli_main(args) == 0
    assert "not recomputed without --openings" in capsys.readouterr().out
    untouched, transcript = _signed(payload, claim[1])
    (tmp_path / "verdict.json").write_bytes(untouched)
    (tmp_path / "transcript.bin").write_bytes(transcript)
    assert cli_main([*args, "--openings", str(tmp_path / "openings.bin"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["openings_checked"] == len(payload["opened"])
