"""evaluation.tamper tallies chosen flips as the rules say, on two tiny real claims.

An arbiter on SQLite and two linear oracles over gRPC, one that signs its answers
(spec §10.8) and one that does not, each audited with a claim of 4 pairs; the flips
are chosen so that each way a flip can end is met: an answer bit fails replay under
the signing oracle, the same kind of flip passes unsigned exactly when it leaves the
pair's scores unchanged, a version digest fails only the openings check, and a pair
record's query digest (K = 1) fails replay under the signing oracle, only the openings
check unsigned.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from evaluation.tamper import Flip, Tamperer, flipped, main
from tests.support.arbiter_world import keyed_record_world
from tests.support.claims import linear_claim
from tests.support.fake_oracle import LinearOracle
from tests.support.keys import KEY
from twinaudit.owner.claim_client import run_claim
from twinaudit.practitioner.grpc_server import serve_oracle
from twinaudit.protocol.claim.openings import OpenedPair, encode_openings
from twinaudit.protocol.claim.verdict import check_verdict
from twinaudit.protocol.errors import TwinauditError
from twinaudit.protocol.keys import private_key_pem
from twinaudit.verifier.windows import scorer_for
from twinaudit.wire.verifier.v1 import verifier_pb2 as pb
from twinaudit.wire.verifier.v1 import verifier_pb2_grpc as pb_grpc

#: The practitioner's answer key (never the arbiter's).
ANSWER_KEY = Ed25519PrivateKey.from_private_bytes(bytes(range(1, 33)))


@pytest.fixture(scope="module")
def tamperers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Tamperer]]:
    """A signed and an unsigned claim of 4 pairs, each ready to tamper with."""
    directory = tmp_path_factory.mktemp("arbiter")
    server, port = serve_oracle(LinearOracle(), "127.0.0.1:0")  # unsigned
    try:
        with keyed_record_world(
            directory, seed=6, salt_seed=b"tamper", answer_key=ANSWER_KEY
        ) as world:
            endpoints = {"signed": world["oracle"], "unsigned": f"127.0.0.1:{port}"}
            yield {kind: _tamperer(world, at) for kind, at in endpoints.items()}
    finally:
        server.stop(None)


def _tamperer(world: dict[str, Any], endpoint: str) -> Tamperer:
    pairs = world["pairs"]
    params = linear_claim(world["record"], pairs.root, endpoint, max_pairs=4)
    done = run_claim(world["channel"], params, pairs.opening, claim_key=pairs.claim_key)
    stored = pb_grpc.VerifierStub(world["channel"]).GetVerdict(
        pb.GetVerdictRequest(claim_id=done.claim_id), timeout=30
    )
    verdict = check_verdict(done.verdict, KEY.public_key())
    opened = [OpenedPair(i, pairs.pair_opening(i), pairs.opening(i).proof) for i in verdict.opened]
    openings = encode_openings(pairs.root, opened)
    return Tamperer(done.verdict, stored.transcript, openings, KEY)


def _first_pair(tamperer: Tamperer) -> int:
    return next(n for n, r in enumerate(tamperer.records) if r["type"] == "pair")


def _answer_flips(tamperer: Tamperer) -> list[tuple[Flip, bool]]:
    """Each answer value's lowest bit in the first pair, and whether its scores stay."""
    claim = tamperer.verdict.claim
    scorer = scorer_for(claim.score, claim.fit_shape)
    number = _first_pair(tamperer)
    record = tamperer.records[number]
    flips = []
    for q, row in enumerate(record["answers"]):
        for c, value in enumerate(row[0]):
            altered = {**record, "answers": [[list(r[0])] for r in record["answers"]]}
            altered["answers"][q][0][c] = flipped(value, 0)
            try:
                scores = scorer.replay(claim.oracle_info, tamperer.verdict.audit_seed, altered)
            except TwinauditError:  # e.g. a probability of 1 made larger than 1
                scores = None
            flips.append((Flip(number, ("answers", q, 0, c), 0), scores == record["scores"]))
    return flips


def test_an_answer_bit_under_a_signing_oracle_fails_replay(tamperers):
    tamperer = tamperers["signed"]
    assert tamperer.verdict.claim.oracle_info.answer_key
    outcomes = {tamperer.outcome(flip) for flip, _ in _answer_flips(tamperer)}
    assert outcomes == {"replay"}


def test_unsigned_an_answer_bit_passes_exactly_when_the_scores_stay(tamperers):
    tamperer = tamperers["unsigned"]
    assert not tamperer.verdict.claim.oracle_info.answer_key
    flips = _answer_flips(tamperer)
    assert any(stays for _, stays in flips), "no flip leaves the scores: choose others"
    assert any(not stays for _, stays in flips)
    for flip, stays in flips:
        assert tamperer.outcome(flip) == ("passes" if stays else "replay"), flip


@pytest.mark.parametrize("kind", ["signed", "unsigned"])
def test_a_version_digest_fails_only_the_openings_and_a_publication_bit_replay(tamperers, kind):
    tamperer = tamperers[kind]
    number = _first_pair(tamperer)
    assert tamperer.outcome(Flip(number, ("digests", 0), 5)) == "openings"
    assert tamperer.records[number]["outcome"] in ("0", "1")  # a decided pair
    assert tamperer.outcome(Flip(number, ("published",), 0)) == "replay"
    assert tamperer.outcome(Flip(0, ("claim", "claim_nonce"), 0)) == "replay"


def test_a_query_digest_bit_fails_replay_only_when_the_oracle_signed_it(tamperers):
    """K = 1: a pair record's query digest is its one query's, which the answers records
    sign; replay compares them (spec §12). Unsigned, only the openings rebuild it."""
    for kind, expected in (("signed", "replay"), ("unsigned", "openings")):
        tamperer = tamperers[kind]
        assert tamperer.verdict.claim.score.queries_per_version == 1
        number = _first_pair(tamperer)
        for version in (0, 1):
            flip = Flip(number, ("query_digests", version), 5)
            assert tamperer.outcome(flip) == expected, (kind, version)


def test_a_signature_bit_fails_replay_and_non_text_is_unencodable(tamperers):
    tamperer = tamperers["signed"]
    batch = next(n for n, r in enumerate(tamperer.records) if r["type"] == "answers")
    assert tamperer.outcome(Flip(batch, ("signature",), 0)) == "replay"
    assert tamperer.outcome(Flip(batch, ("type",), 0)) == "unencodable"  # 0xE1: not UTF-8


def test_flipped_flips_one_bit_of_each_kind_of_value():
    assert flipped(1.0, 63) == -1.0
    assert flipped(1.0, 0) == math.nextafter(1.0, 2.0)
    assert flipped(0, 63) == -(2**63)
    assert flipped(5, 1) == 7
    assert flipped(True, 0) is False
    assert flipped(b"\x00\x00", 15) == b"\x00\x01"
    assert flipped("a", 2) == "A"  # 0x61 ^ 0x20: bits count from each byte's highest


def test_main_records_a_json_line_and_counts_every_tried_flip(tamperers, tmp_path: Path, capsys):
    tamperer = tamperers["signed"]
    files = {name: tmp_path / name for name in ("v.json", "t.bin", "o.bin", "a.key", "r.jsonl")}
    files["v.json"].write_bytes(tamperer.signed)
    files["t.bin"].write_bytes(tamperer.transcript)
    files["o.bin"].write_bytes(tamperer.openings)
    files["a.key"].write_bytes(private_key_pem(KEY))
    files["a.key"].chmod(0o600)
    args = [str(files[n]) for n in ("v.json", "t.bin", "o.bin", "a.key")]
    assert main([*args, "--per-class", "2", "--record", str(files["r.jsonl"])]) == 0
    line = json.loads(files["r.jsonl"].read_text())
    assert line == json.loads(capsys.readouterr().out)
    assert line["answers_signed"] is True
    for name, counts in line["classes"].items():
        assert counts["tried"] == min(2, counts["bits"]), name
        assert (
            sum(counts[o] for o in ("replay", "openings", "passes", "unencodable"))
            == (counts["tried"])
        )
    assert line["classes"]["pair.digests"]["openings"] == 2
