"""Answers the practitioner signs (spec §10.8), over real gRPC on 127.0.0.1.

An arbiter on SQLite and linear oracles, one served with an answer key and one without:
the keyed oracle's verdict binds its key and its transcript keeps every batch's
signature, so an answer altered in the transcript and re-signed with the arbiter's own
key fails replay; the same forgery of an unsigned oracle's transcript replays, with the
remark that its answers are unsigned. A keyed oracle whose signature is bad fails the
claim with ``oracle-failed``, and nothing is signed.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from typing import Any

import grpc
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from tests.support.arbiter_world import keyed_record_world
from tests.support.claims import linear_claim
from tests.support.fake_oracle import LinearOracle
from tests.support.keys import KEY
from twinaudit.cli.main import main
from twinaudit.owner.claim_client import run_claim
from twinaudit.practitioner.grpc_server import OracleServicer, serve_oracle
from twinaudit.protocol.claim.outcome import outcome
from twinaudit.protocol.claim.transcript import TranscriptWriter, iter_records
from twinaudit.protocol.claim.verdict import Verdict, check_verdict
from twinaudit.protocol.encoding import decode, encode
from twinaudit.protocol.envelope import Envelope, payload_type, sign_envelope
from twinaudit.protocol.errors import VerificationError
from twinaudit.protocol.keys import public_key_pem, raw_public_key
from twinaudit.verifier.replay import replay
from twinaudit.verifier.windows import scorer_for
from twinaudit.wire import transport
from twinaudit.wire.oracle.v1 import oracle_pb2, oracle_pb2_grpc
from twinaudit.wire.verifier.v1 import verifier_pb2 as pb
from twinaudit.wire.verifier.v1 import verifier_pb2_grpc as pb_grpc

#: The practitioner's answer key: never the arbiter's (KEY).
ANSWER_KEY = Ed25519PrivateKey.from_private_bytes(bytes(range(32)))


class _BadSignature(OracleServicer):
    """A keyed oracle that answers correctly but flips one bit of every signature."""

    def Classify(self, request, context):
        response = super().Classify(request, context)
        signature = bytearray(response.answer_signature)
        signature[0] ^= 1
        response.answer_signature = bytes(signature)
        return response


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """An arbiter, a keyed oracle (the world's), an unsigned one and a bad signer."""
    with keyed_record_world(
        tmp_path_factory.mktemp("arbiter"), seed=5, salt_seed=b"signed", answer_key=ANSWER_KEY
    ) as world:
        unsigned, port = serve_oracle(LinearOracle(), "127.0.0.1:0")
        bad, bad_port = transport.make_server(
            "127.0.0.1:0",
            lambda server: oracle_pb2_grpc.add_OracleServicer_to_server(
                _BadSignature(LinearOracle(), answer_key=ANSWER_KEY), server
            ),
        )
        world["unsigned"], world["bad"] = f"127.0.0.1:{port}", f"127.0.0.1:{bad_port}"
        try:
            yield world
        finally:
            unsigned.stop(None)
            bad.stop(None)


def _claim(world: dict[str, Any], endpoint: str) -> tuple[Verdict, bytes, bytes]:
    """File a claim on ``endpoint``; return the verdict, its signed bytes and transcript."""
    params = linear_claim(world["record"], world["pairs"].root, endpoint, max_pairs=12)
    outcome_ = run_claim(
        world["channel"], params, world["pairs"].opening, claim_key=world["pairs"].claim_key
    )
    stored = pb_grpc.VerifierStub(world["channel"]).GetVerdict(
        pb.GetVerdictRequest(claim_id=outcome_.claim_id), timeout=30
    )
    return check_verdict(outcome_.verdict, KEY.public_key()), outcome_.verdict, stored.transcript


def _forge(verdict: Verdict, signed: bytes, transcript: bytes) -> tuple[Verdict, bytes]:
    """Alter one recorded answer by one ulp, keep its pair's outcome, re-sign with KEY.

    What whoever holds the arbiter's key can do: the scores are recomputed from the
    altered answer, the chain rebuilt, and the verdict signed again over the new chain.
    """
    claim = verdict.claim
    scorer = scorer_for(claim.score, claim.fit_shape)
    records = list(iter_records(transcript))
    for record in records[1:]:
        if record.get("type") != "pair" or record["outcome"] == "":
            continue
        row = record["answers"][0][0]
        top = max(range(len(row)), key=row.__getitem__)
        row[top] = math.nextafter(row[top], 0.0)
        scores = scorer.replay(claim.oracle_info, verdict.audit_seed, record)
        char = outcome(
            scores,
            record["published"],
            margin=claim.score.tie_margin,
            tie_rule=claim.tie_rule,
            seed=verdict.audit_seed,
            index=record["index"],
        )
        if char == record["outcome"]:
            record["scores"] = scores
            break
        row[top] = math.nextafter(row[top], 1.0)  # undo; try the next pair
    else:
        raise AssertionError("no answer could be altered without changing its outcome")
    writer = TranscriptWriter()
    for record in records:
        writer.append(record)
    forged = writer.to_bytes()
    assert forged != transcript
    payload = decode(Envelope.from_json(signed).payload)
    payload["transcript"] = {"hash": writer.head, "records": writer.count}
    envelope = sign_envelope(encode(payload), payload_type("verdict"), KEY).to_json()
    return check_verdict(envelope, KEY.public_key()), forged


def test_a_keyed_oracle_s_verdict_binds_its_key_and_replays(world):
    verdict, _, transcript = _claim(world, world["oracle"])
    assert verdict.claim.oracle_info.answer_key == raw_public_key(ANSWER_KEY.public_key())
    kinds = [record["type"] for record in iter_records(transcript)]
    assert kinds[0] == "header" and kinds.count("answers") >= 1
    assert kinds.count("pair") == len(verdict.opened)
    result = replay(verdict, transcript)
    assert result.answers_signed


def test_an_answer_altered_and_re_signed_by_the_arbiter_fails_replay(world):
    verdict, signed, transcript = _claim(world, world["oracle"])
    forged_verdict, forged = _forge(verdict, signed, transcript)
    with pytest.raises(VerificationError, match="signature does not verify"):
        replay(forged_verdict, forged)


def test_the_same_forgery_of_unsigned_answers_replays_with_the_remark(world):
    verdict, signed, transcript = _claim(world, world["unsigned"])
    assert not verdict.claim.oracle_info.answer_key
    assert all(r["type"] != "answers" for r in iter_records(transcript))
    assert not replay(verdict, transcript).answers_signed
    forged_verdict, forged = _forge(verdict, signed, transcript)
    assert not replay(forged_verdict, forged).answers_signed  # nothing can tell


def test_a_bad_signature_fails_the_claim_and_nothing_is_signed(world):
    before = world["store"].claims_for_record(world["record"])
    with pytest.raises(grpc.RpcError) as failed:
        _claim(world, world["bad"])
    details = transport.error_details(failed.value)
    assert details is not None and details.code == "oracle-failed"
    assert "signature" in failed.value.details()
    after = world["store"].claims_for_record(world["record"])
    assert len(after) == len(before) + 1
    assert world["store"].get_verdict(after[-1].claim_id) is None


@pytest.mark.parametrize(
    ("oracle", "words"), [("oracle", "answers signed"), ("unsigned", "answers unsigned")]
)
def test_verify_and_the_html_report_say_whether_answers_are_signed(
    world, oracle, words, tmp_path, capsys
):
    _, signed, transcript = _claim(world, world[oracle])
    files = {name: tmp_path / name for name in ("verdict.json", "t.bin", "a.pub", "r.html")}
    files["verdict.json"].write_bytes(signed.encode() if isinstance(signed, str) else signed)
    files["t.bin"].write_bytes(transcript)
    files["a.pub"].write_bytes(public_key_pem(KEY.public_key()))
    code = main(
        [
            "verify",
            str(files["verdict.json"]),
            "--pubkey",
            str(files["a.pub"]),
            "--transcript",
            str(files["t.bin"]),
            "--html",
            str(files["r.html"]),
        ]
    )
    out = capsys.readouterr().out
    assert code == 0
    assert f"  {words}" in out
    assert words.capitalize() in files["r.html"].read_text()
    args = ["verify", str(files["verdict.json"]), "--pubkey", str(files["a.pub"]), "--json"]
    assert main([*args, "--transcript", str(files["t.bin"])]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["answers_signed"] is (words == "answers signed")


def test_a_keyed_oracle_refuses_a_nonce_that_is_not_32_bytes(world):
    channel = transport.make_channel(world["oracle"])
    try:
        stub = oracle_pb2_grpc.OracleStub(channel)
        image = oracle_pb2.Image(height=28, width=28, channels=1, pixels_f32le=bytes(4 * 784))
        reply = stub.Classify(oracle_pb2.ClassifyRequest(images=[image]), timeout=10)
        assert len(reply.answer_signature) == 64  # no nonce: signed, binding no claim
        with pytest.raises(grpc.RpcError) as refused:
            stub.Classify(
                oracle_pb2.ClassifyRequest(images=[image], claim_nonce=b"short"), timeout=10
            )
        assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    finally:
        channel.close()
