"""Replay with the openings compares the query digests the oracle signed (spec §10.8, §12).

An answers record lists, for each query of a signed batch, the digest of the query the
oracle says it answered. Replay verifies the signature over those digests but cannot
tell whether they are the claim's queries: the pair records hold one digest per
version (the image functions, over the ``K`` copies together) or none (a language
model's texts, an image-text caption). So a practitioner who signed answers to other
queries than the claim's, re-signed with her own answer key, replays (these cases have
``K`` > 1, a caption or texts: where a pair record holds one query's digest, replay
compares it with the signed one, ``test_signed_digests_replay.py``); given the
openings, the check rebuilds every query from the items and refuses the digest that is
not its query's, naming the window and the slot. Each case is a claim run through a
keyed oracle over gRPC on 127.0.0.1 (tiny untrained models), with windows of one
request and windows cut into several (a small message cap).
"""

from __future__ import annotations

import copy
import hashlib
from typing import Any

import pytest
import torch

from tests.support import foundation as fm
from tests.support.claims import make_pairset
from tests.support.fake_oracle import LinearOracle
from tests.support.keys import KEY
from tests.verifier.test_signed_answers import ANSWER_KEY
from tests.verifier.test_signed_answers_kinds import signed_session
from twinaudit.practitioner.tokenizer import ByteTokenizer
from twinaudit.practitioner.torch_encoder import TorchImageTextOracle
from twinaudit.practitioner.torch_lm import TorchLanguageModelOracle
from twinaudit.protocol.claim.answer_records import pair_rows
from twinaudit.protocol.claim.openings import OpenedPair, encode_openings
from twinaudit.protocol.claim.scores.classifier import ScoreSpec
from twinaudit.protocol.claim.scores.function_only import ImageTextSpec, LanguageSpec
from twinaudit.protocol.claim.transcript import TranscriptWriter, iter_records
from twinaudit.protocol.claim.verdict import Verdict, check_verdict
from twinaudit.protocol.encoding import encode
from twinaudit.protocol.envelope import payload_type, sign_envelope
from twinaudit.protocol.errors import VerificationError
from twinaudit.protocol.keys import key_id
from twinaudit.protocol.oracles.signed_answers import sign_answer_batch
from twinaudit.verifier.reexecute import check_openings
from twinaudit.verifier.replay import replay

torch.set_num_threads(1)

#: name: (item kind, pairs, score, oracle, client options)
CASES: dict[str, tuple[str, Any, Any, Any, dict[str, int]]] = {
    "classifier": (
        "image",
        make_pairset(8, seed=3),
        ScoreSpec(k=2, perturbation="pad-shift-flip", knowledge="C1"),
        LinearOracle,
        {},
    ),
    "classifier split": (
        "image",
        make_pairset(8, seed=3),
        ScoreSpec(k=4, perturbation="pad-shift-flip", knowledge="C1"),
        LinearOracle,
        {"max_message_bytes": 20_000},
    ),
    "lm": (
        "text",
        fm.commit("text", fm.text_pairs(8, seed=0)),
        LanguageSpec(),
        lambda: TorchLanguageModelOracle(fm.train_lm([], steps=0), ByteTokenizer(), max_batch=3),
        {},
    ),
    "clip split": (
        "captioned-image",
        fm.commit("captioned-image", fm.captioned_pairs(8, seed=0)),
        ImageTextSpec(),
        lambda: TorchImageTextOracle(
            fm.train_dual([], steps=0), ByteTokenizer(bos=False), max_batch=6
        ),
        {"max_message_bytes": 60_000},
    ),
}

_CLAIMS: dict[str, tuple[dict[str, Any], list[dict[str, Any]], bytes]] = {}


def _claim(name: str) -> tuple[dict[str, Any], list[dict[str, Any]], bytes]:
    """Run case ``name``'s claim once; return its verdict payload, records and openings."""
    if name not in _CLAIMS:
        kind, pairs, score, make, client = CASES[name]
        session = signed_session(kind, pairs, score, make, client)
        payload = session.verdict_payload(
            arbiter=key_id(KEY.public_key()), time="2026-11-28T16:00:00Z", environment={}
        )
        opened = [
            OpenedPair(i, pairs.pair_opening(i), pairs.opening(i).proof) for i in session.opened
        ]
        records = list(iter_records(session.transcript.to_bytes()))
        _CLAIMS[name] = payload, records, encode_openings(pairs.root, opened)
    return _CLAIMS[name]


def _signed(payload: dict[str, Any], records: list[dict[str, Any]]) -> tuple[Verdict, bytes]:
    """Chain ``records``, sign the verdict for them with the arbiter's key; check it."""
    writer = TranscriptWriter()
    for record in records:
        writer.append(record)
    payload = dict(payload, transcript={"hash": writer.head, "records": writer.count})
    envelope = sign_envelope(encode(payload), payload_type("verdict"), KEY).to_json()
    return check_verdict(envelope, KEY.public_key()), writer.to_bytes()


def _resign_batch(verdict: Verdict, records: list[dict[str, Any]], batch: dict[str, Any]) -> None:
    """Sign ``batch`` again with the ORACLE's key over its digests and the recorded rows."""
    claim = verdict.claim
    function, k = claim.score.function, claim.score.queries_per_version
    rows = {
        r["index"]: pair_rows(function, k, r)
        for r in records
        if r.get("type") == "pair" and r["window"] == batch["window"]
    }
    answers = [rows[i][q] for i, q in batch["slots"]]
    batch["signature"] = sign_answer_batch(
        ANSWER_KEY, claim.claim_nonce, batch["query_digests"], answers
    )


def _another_query(batch: dict[str, Any]) -> None:
    """The first query of the batch is one the claim did not send."""
    batch["query_digests"][0] = hashlib.sha256(b"a query the claim never sent").digest()


def _swapped(batch: dict[str, Any]) -> None:
    """The batch's first two digests swapped: each answer signed as another query's."""
    digests = batch["query_digests"]
    digests[0], digests[1] = digests[1], digests[0]


@pytest.mark.parametrize("name", list(CASES))
def test_the_honest_signed_claim_passes_the_openings_check(name):
    payload, records, openings = _claim(name)
    verdict, transcript = _signed(payload, records)
    assert replay(verdict, transcript).answers_signed
    assert any(r["type"] == "answers" for r in records)
    assert check_openings(verdict, transcript, openings) == len(payload["opened"])


@pytest.mark.parametrize("forge", [_another_query, _swapped], ids=["another query", "swapped"])
@pytest.mark.parametrize("name", list(CASES))
def test_a_signed_digest_of_another_query_fails_the_openings_check(name, forge):
    payload, records, openings = _claim(name)
    records = copy.deepcopy(records)
    verdict, _ = _signed(payload, records)
    batches = [r for r in records if r["type"] == "answers"]
    if "split" in name:  # the windows are cut into several requests: forge a later one
        assert len(batches) > len({b["window"] for b in batches})
    batch = next(b for b in reversed(batches) if len(b["query_digests"]) > 1)
    if forge is _swapped and batch["query_digests"][0] == batch["query_digests"][1]:
        pytest.skip("the batch's first two queries are identical")
    forge(batch)
    _resign_batch(verdict, records, batch)
    forged, transcript = _signed(payload, records)
    assert replay(forged, transcript).answers_signed  # the oracle's signature verifies
    i, q = batch["slots"][0]
    with pytest.raises(VerificationError, match=rf"window {batch['window']}: .*slot \[{i}, {q}\]"):
        check_openings(forged, transcript, openings)
