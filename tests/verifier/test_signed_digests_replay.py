"""Replay compares a pair record's query digests with the digests the oracle signed (§12).

Where a pair record holds the digest of one query (the image-classifier with ``K`` = 1,
whose version digest is that of its single copy, and image-text's two images; the
image-encoder's ``K`` is at least 2), replay
requires the digest that an answers record signs at that query's slot to be the
record's. So an arbiter who changes a pair record's query digest and signs the verdict
again with its own key fails replay, on a signed oracle, without the openings. On an
unsigned oracle, and where a version's digest is over ``K`` > 1 copies together, the
same change still replays and only the openings check catches it: the known limit.
Each claim runs through an oracle served over gRPC on 127.0.0.1 (tiny untrained models).
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
import torch

from tests.support.claims import make_pairset
from tests.support.fake_oracle import LinearOracle
from tests.support.grpc_serving import OracleServers
from tests.support.keys import KEY
from tests.verifier.test_claim_foundation_models import _run, _session
from tests.verifier.test_signed_answers import ANSWER_KEY
from tests.verifier.test_signed_digests_openings import CASES as OPENINGS_CASES
from tests.verifier.test_signed_digests_openings import _signed
from twinaudit.practitioner.grpc_server import OracleServicer
from twinaudit.protocol.claim.openings import OpenedPair, encode_openings
from twinaudit.protocol.claim.scores.classifier import ScoreSpec
from twinaudit.protocol.claim.transcript import iter_records
from twinaudit.protocol.errors import VerificationError
from twinaudit.protocol.keys import key_id
from twinaudit.verifier.oracles.grpc_client import GrpcOracle
from twinaudit.verifier.reexecute import check_openings
from twinaudit.verifier.replay import replay

torch.set_num_threads(1)


def _classifier(k: int) -> tuple[str, Any, Any, Any, dict[str, int]]:
    """A classifier case with ``k`` dithered copies per version, windows of one request."""
    return (
        "image",
        make_pairset(8, seed=3),
        ScoreSpec(k=k, perturbation="dither", knowledge="C1"),
        LinearOracle,
        {},
    )


#: name: (item kind, pairs, score, oracle, client options), and whether a pair record
#: holds one query's digest, which replay compares with the signed one.
CASES: dict[str, tuple[tuple[str, Any, Any, Any, dict[str, int]], bool]] = {
    "classifier K=1": (_classifier(1), True),
    "clip split": (OPENINGS_CASES["clip split"], True),
    "classifier K=2": (_classifier(2), False),
}

_CLAIMS: dict[tuple[str, bool], tuple[dict[str, Any], list[dict[str, Any]], bytes]] = {}


def _claim(name: str, signed: bool) -> tuple[dict[str, Any], list[dict[str, Any]], bytes]:
    """Run case ``name``'s claim once, on an oracle with an answer key when ``signed``;
    return its verdict payload, records and openings."""
    if (name, signed) not in _CLAIMS:
        (kind, pairs, score, make, client), _ = CASES[name]
        servers = OracleServers(GrpcOracle)
        try:
            key = ANSWER_KEY if signed else None
            oracle, _ = servers.start(OracleServicer(make(), answer_key=key), **client)
            case = {"pair_set": pairs, "kind": kind, "score": score}
            session = _run(_session(case, oracle, window=2), pairs)
        finally:
            servers.close()
        payload = session.verdict_payload(
            arbiter=key_id(KEY.public_key()), time="2026-11-28T17:00:00Z", environment={}
        )
        opened = [
            OpenedPair(i, pairs.pair_opening(i), pairs.opening(i).proof) for i in session.opened
        ]
        records = list(iter_records(session.transcript.to_bytes()))
        _CLAIMS[name, signed] = payload, records, encode_openings(pairs.root, opened)
    return _CLAIMS[name, signed]


def _zero_version(version: int):
    def apply(record: dict[str, Any]) -> None:
        digests = record["query_digests"]
        digests[version] = bytes(32)

    return apply


def _swap_versions(record: dict[str, Any]) -> None:
    record["query_digests"] = record["query_digests"][::-1]


#: Changes of one pair record's query digests; the verdict is signed again with the
#: ARBITER's key, the answers records are left as the oracle signed them.
FORGERIES = {"version 0 zeroed": _zero_version(0), "version 1 zeroed": _zero_version(1)}


def _forged(name: str, signed: bool, forge: Any) -> tuple[Any, bytes, bytes, int]:
    """The claim with the last pair record's query digests changed by ``forge``, chained
    and re-signed with the arbiter's key; return verdict, transcript, openings, pair."""
    payload, records, openings = _claim(name, signed)
    records = copy.deepcopy(records)
    pair = [r for r in records if r["type"] == "pair"][-1]
    forge(pair)
    verdict, transcript = _signed(payload, records)
    return verdict, transcript, openings, pair["index"]


@pytest.mark.parametrize("signed", [True, False], ids=["signed", "unsigned"])
@pytest.mark.parametrize("name", list(CASES))
def test_the_honest_claim_replays_and_passes_the_openings(name, signed):
    payload, records, openings = _claim(name, signed)
    verdict, transcript = _signed(payload, records)
    assert replay(verdict, transcript).answers_signed is signed
    assert check_openings(verdict, transcript, openings) == len(payload["opened"])


@pytest.mark.parametrize("forge", list(FORGERIES))
@pytest.mark.parametrize("name", [n for n, case in CASES.items() if case[1]])
def test_a_pair_record_digest_changed_and_resigned_by_the_arbiter_fails_replay(name, forge):
    verdict, transcript, _, index = _forged(name, True, FORGERIES[forge])
    version = int(forge.split()[1])
    with pytest.raises(VerificationError, match=rf"pair {index}, slot \[{index}, {version}\]"):
        replay(verdict, transcript)


@pytest.mark.parametrize("name", [n for n, case in CASES.items() if case[1]])
def test_the_two_versions_digests_swapped_fail_replay(name):
    verdict, transcript, _, index = _forged(name, True, _swap_versions)
    with pytest.raises(VerificationError, match=rf"pair {index}, slot \[{index}, [01]\]"):
        replay(verdict, transcript)


@pytest.mark.parametrize(
    ("name", "signed"),
    [("classifier K=1", False), ("clip split", False), ("classifier K=2", True)],
    ids=["classifier K=1 unsigned", "clip split unsigned", "classifier K=2 signed"],
)
def test_where_no_signed_digest_fixes_the_record_only_the_openings_catch_it(name, signed):
    """The known limit: an unsigned oracle signs no digest, and with K = 2 a version's
    digest is over both copies together, which no per-query digest determines."""
    verdict, transcript, openings, _ = _forged(name, signed, FORGERIES["version 0 zeroed"])
    assert replay(verdict, transcript).answers_signed is signed
    with pytest.raises(VerificationError, match=r"pair \d+: the recorded query_digests"):
        check_openings(verdict, transcript, openings)
