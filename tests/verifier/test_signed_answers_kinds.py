"""Signed answers (spec §10.8) for every score function, and batches split or repeated.

Each claim runs through a keyed oracle served on 127.0.0.1 (tiny untrained models): the
client checks every reply's signature, the transcript names which queries each signed
batch answered, and the verdict, signed with the arbiter's key, replays with every
signature checked. The classifier's windows are cut into several requests (a small
message cap) and send identical queries (copies of ``none``), which the slots must still
name as they were sent.
"""

from __future__ import annotations

import pytest
import torch

from tests.support import foundation as fm
from tests.support.claims import make_pairset
from tests.support.fake_oracle import LinearOracle
from tests.support.grpc_serving import OracleServers
from tests.support.keys import KEY
from tests.verifier.test_claim_foundation_models import _openings, _run, _session
from tests.verifier.test_signed_answers import ANSWER_KEY
from twinaudit.practitioner.grpc_server import OracleServicer
from twinaudit.practitioner.tokenizer import ByteTokenizer
from twinaudit.practitioner.torch_encoder import TorchEncoderOracle, TorchImageTextOracle
from twinaudit.practitioner.torch_lm import TorchLanguageModelOracle
from twinaudit.protocol.claim.scores.classifier import ScoreSpec
from twinaudit.protocol.claim.scores.encoder import EncoderSpec
from twinaudit.protocol.claim.scores.function_only import ImageTextSpec, LanguageSpec
from twinaudit.protocol.claim.transcript import iter_records
from twinaudit.protocol.claim.verdict import check_verdict
from twinaudit.protocol.encoding import encode
from twinaudit.protocol.envelope import payload_type, sign_envelope
from twinaudit.protocol.keys import key_id
from twinaudit.verifier.claim import ClaimSession
from twinaudit.verifier.oracles.grpc_client import GrpcOracle
from twinaudit.verifier.replay import replay

torch.set_num_threads(1)


def _cases():
    yield (
        "encoder",
        "image",
        fm.commit("image", fm.marked_images(8, seed=0)),
        EncoderSpec(k=2),
        (lambda: TorchEncoderOracle(fm.train_encoder([], steps=0), max_batch=4)),
        {},
    )
    yield (
        "lm",
        "text",
        fm.commit("text", fm.text_pairs(8, seed=0)),
        LanguageSpec(),
        (lambda: TorchLanguageModelOracle(fm.train_lm([], steps=0), ByteTokenizer(), max_batch=3)),
        {},
    )
    clip = fm.commit("captioned-image", fm.captioned_pairs(8, seed=0))
    dual = fm.train_dual([], steps=0)
    for name, client in (("clip", {}), ("clip split", {"max_message_bytes": 60_000})):
        yield (
            name,
            "captioned-image",
            clip,
            ImageTextSpec(),
            (lambda: TorchImageTextOracle(dual, ByteTokenizer(bos=False), max_batch=6)),
            client,
        )
    pairs = make_pairset(8, seed=3)
    for name, score in (
        ("classifier split", ScoreSpec(k=4, perturbation="pad-shift-flip", knowledge="C1")),
        ("classifier identical copies", ScoreSpec(k=3, perturbation="none", knowledge="C1")),
    ):
        yield name, "image", pairs, score, LinearOracle, {"max_message_bytes": 20_000}


def signed_session(kind, pair_set, score, make, client) -> ClaimSession:
    """Run a claim, in windows of 2 pairs, on ``make()`` served with the answer key."""
    servers = OracleServers(GrpcOracle)
    try:
        oracle, _ = servers.start(OracleServicer(make(), answer_key=ANSWER_KEY), **client)
        return _run(
            _session({"pair_set": pair_set, "kind": kind, "score": score}, oracle, window=2),
            pair_set,
        )
    finally:
        servers.close()


@pytest.mark.parametrize(
    ("kind", "pair_set", "score", "make", "client"),
    [pytest.param(*case[1:], id=case[0]) for case in _cases()],
)
def test_every_function_s_signed_claim_replays_with_its_signatures(
    kind, pair_set, score, make, client
):
    session = signed_session(kind, pair_set, score, make, client)
    transcript = session.transcript.to_bytes()
    records = list(iter_records(transcript))
    batches = [r for r in records if r["type"] == "answers"]
    assert len(batches) >= session.windows
    assert sum(len(b["slots"]) for b in batches) == session.queries + (
        len(session.opened) if kind == "captioned-image" else 0  # each pair's caption
    )
    payload = session.verdict_payload(
        arbiter=key_id(KEY.public_key()), time="2026-11-28T13:00:00Z", environment={}
    )
    envelope = sign_envelope(encode(payload), payload_type("verdict"), KEY).to_json()
    assert replay(check_verdict(envelope, KEY.public_key()), transcript).answers_signed


def test_a_resumed_signed_claim_ends_as_the_claim_run_at_once():
    pair_set, score = make_pairset(8, seed=3), ScoreSpec(k=2, perturbation="dither", knowledge="C1")
    case = {"pair_set": pair_set, "kind": "image", "score": score}
    servers = OracleServers(GrpcOracle)
    try:
        oracle, _ = servers.start(OracleServicer(LinearOracle(), answer_key=ANSWER_KEY))
        serial = _run(_session(case, oracle, window=2), pair_set)
        part = _session(case, oracle, window=2)
        part.submit(_openings(pair_set, part.next_request()))
        snapshot, records = part.checkpoint()
        resumed = _run(
            ClaimSession.resume(snapshot, records, part.record, part.params, oracle), pair_set
        )
    finally:
        servers.close()
    assert resumed.transcript.to_bytes() == serial.transcript.to_bytes()
    assert any(r["type"] == "answers" for r in iter_records(records))
