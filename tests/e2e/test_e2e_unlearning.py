"""The unlearning procedure of docs/unlearning.md, end to end over gRPC on a tiny model.

An owner escrows 200 pairs and publishes; the practitioner trains a tiny CNN on the
published versions (it memorises them); claim 1 finds it DETECTED. The practitioner
then retrains without her data (a model trained on other items: exact unlearning), and
claim 2, on the same record with fresh pairs, opens none of claim 1's pairs, runs its
test over the pairs left, is NOT DETECTED, checks, replays from its transcript alone,
and counts one earlier claim. A claim left open when a claim with fresh pairs starts
is abandoned: its pairs are excluded too, and it can no longer be resumed.
"""

from __future__ import annotations

import time

import grpc
import numpy as np
import pytest
import torch
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from owner.claim_client import ClaimRequest, run_claim
from protocol.encoding import decode
from protocol.envelope import Envelope
from protocol.items import encode_item
from protocol.seeds import publication_bits
from tests.support.claims import SeededEntropy, fixed_salts
from tests.support.data import synthetic_pairs
from tests.support.models import train_classifier
from tests.support.pairset import PairSet
from twinaudit.results import false_detection_bound, unopened_pairs
from verifier.escrow.sqlite_store import SqliteEscrowStore
from verifier.oracles.grpc_server import serve_oracle
from verifier.oracles.torch_oracle import TorchClassifierOracle
from verifier.replay import replay
from verifier.server import serve_arbiter
from verifier.verdict import check_verdict
from wire.transport import make_channel
from wire.verifier.v1 import verifier_pb2 as pb
from wire.verifier.v1 import verifier_pb2_grpc as pb_grpc

N_PAIRS = 200
EPSILON = 32  # as tests/e2e/test_e2e_claim.py: q ≈ 0.77 for a width-16 CNN, detected at N = 200


@pytest.fixture(scope="module")
def practice(tmp_path_factory):
    """An arbiter, an owner's escrowed pairs, the memorising model and the retrained one."""
    torch.set_num_threads(2)
    tmp = tmp_path_factory.mktemp("unlearning")
    key = Ed25519PrivateKey.generate()
    entropy = SeededEntropy(b"unlearning arbiter")
    store = SqliteEscrowStore(tmp / "escrow.db", key, entropy=entropy)
    arbiter, port = serve_arbiter(store, key, "127.0.0.1:0", entropy=entropy)
    channel = make_channel(f"127.0.0.1:{port}")
    pairs = synthetic_pairs(N_PAIRS, seed=11, epsilon=EPSILON)
    versions = [tuple(encode_item(item) for item in pairs.items(i)) for i in range(N_PAIRS)]
    owner_set = PairSet("image", versions, fixed_salts(N_PAIRS))
    receipt = owner_set.escrow(channel, key.public_key(), "unlearning owner")
    bits = np.array(publication_bits(owner_set.root, receipt.rho, N_PAIRS), dtype=int)
    # Before: trained on her published versions. After: retrained without them (on
    # other items of the same distribution), which is what exact unlearning yields.
    before = train_classifier(pairs.version(bits), pairs.labels, epochs=40, seed=0, width=16)
    other = synthetic_pairs(N_PAIRS, seed=12, epsilon=EPSILON)
    after = train_classifier(other.version0, other.labels, epochs=40, seed=0, width=16)
    servers, endpoints = [], {}
    for name, model in (("before", before), ("after", after)):
        server, oracle_port = serve_oracle(
            TorchClassifierOracle(model, n_classes=10, model_name=name), "127.0.0.1:0"
        )
        servers.append(server)
        endpoints[name] = f"127.0.0.1:{oracle_port}"
    yield {
        "key": key,
        "channel": channel,
        "pairs": owner_set,
        "receipt": receipt,
        "endpoints": endpoints,
        "store": store,
    }
    for server in [*servers, arbiter]:
        server.stop(None)
    channel.close()
    store.close()


def _request(practice, model, **fields):
    return ClaimRequest(
        record_index=practice["receipt"].entry.index,
        record_root=practice["pairs"].root,
        oracle_endpoint=practice["endpoints"][model],
        model_name=model,
        k=1,
        perturbation="none",
        knowledge="C1",
        **fields,
    )


def _claim(practice, model, opening=None, **fields):
    """File a claim; return its checked verdict, after replaying it from its transcript."""
    opening = opening or practice["pairs"].opening
    outcome = run_claim(practice["channel"], _request(practice, model, **fields), opening)
    verdict = check_verdict(outcome.verdict, practice["key"].public_key())
    stored = pb_grpc.VerifierStub(practice["channel"]).GetVerdict(
        pb.GetVerdictRequest(claim_id=outcome.claim_id), timeout=10
    )
    result = replay(verdict, stored.transcript)  # the transcript alone, no database
    assert result.decision == verdict["decision"]
    assert result.indicators == verdict["indicators"]
    return verdict


def test_audit_unlearn_and_audit_again_on_fresh_pairs(practice):
    first = _claim(practice, "before")
    assert first["decision"] == "detected"
    assert first["earlier_claims"] == 0
    assert "excluded" not in first["claim"]

    second = _claim(practice, "after", fresh_pairs=True, max_pairs=80)
    assert second["earlier_claims"] == 1
    assert second["claim"]["excluded"] == sorted(first["opened"])
    assert not set(second["opened"]) & set(first["opened"])
    left = N_PAIRS - len(first["opened"])
    assert second["claim"]["test"]["params"]["n_pairs"] == left
    assert second["decision"] == "not-detected"
    # What the owner is told: the bound across both claims, and the pairs still unseen.
    assert false_detection_bound(second) == pytest.approx(2 * 0.05)
    assert unopened_pairs(second) == left - len(second["opened"])


def test_an_open_claim_is_abandoned_by_a_claim_on_fresh_pairs(practice):
    owner_set = practice["pairs"]
    store = practice["store"]
    index = practice["receipt"].entry.index
    calls = []

    def flaky_opening(pair):
        calls.append(pair)
        if len(calls) > 8:
            raise ConnectionError("the owner's machine went away")
        return owner_set.opening(pair)

    before = {c.claim_id for c in store.claims_for_record(index)}
    with pytest.raises((grpc.RpcError, ConnectionError)):
        run_claim(practice["channel"], _request(practice, "after", window=8), flaky_opening)
    (left_open,) = [c for c in store.claims_for_record(index) if c.claim_id not in before]
    earlier = store.claims_for_record(index)
    opened_before = set()
    for claim in earlier:
        if claim.finished:
            found = store.get_verdict(claim.claim_id)
            opened_before |= set(decode(Envelope.from_json(found.verdict).payload)["opened"])
    # The first run may still hold the claim it is abandoning (claim-busy): retry.
    deadline = time.monotonic() + 10
    while True:
        try:
            fresh = _claim(practice, "after", fresh_pairs=True, max_pairs=16)
            break
        except grpc.RpcError as exc:
            if "[claim-busy]" not in (exc.details() or "") or time.monotonic() > deadline:
                raise
            time.sleep(0.1)
    assert fresh["earlier_claims"] == len(earlier)
    excluded = set(fresh["claim"]["excluded"])
    assert opened_before < excluded  # the open claim's pairs are excluded as well
    assert len(excluded - opened_before) >= 8
    assert not set(fresh["opened"]) & excluded
    status = {c.claim_id: c.status for c in store.claims_for_record(index)}
    assert status[left_open.claim_id] == "abandoned"
    with pytest.raises(grpc.RpcError) as info:
        run_claim(
            practice["channel"],
            _request(practice, "after", window=8),
            owner_set.opening,
            resume_claim_id=left_open.claim_id,
            timeout_s=30,
        )
    assert info.value.code() == grpc.StatusCode.FAILED_PRECONDITION
