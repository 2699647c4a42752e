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
import pytest

from tests.support.claims import claim_params
from tests.support.dispute import N_PAIRS, served_dispute
from twinaudit.cli.results import false_detection_bound, unopened_pairs
from twinaudit.owner.claim_client import run_claim
from twinaudit.protocol.claim.verdict import check_verdict
from twinaudit.protocol.encoding import decode
from twinaudit.protocol.envelope import Envelope
from twinaudit.verifier.replay import replay
from twinaudit.wire.verifier.v1 import verifier_pb2 as pb
from twinaudit.wire.verifier.v1 import verifier_pb2_grpc as pb_grpc

#: Whole disputes over gRPC with trained models: run by CI, left out of make test-fast.
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def practice(tmp_path_factory):
    """An arbiter, an owner's escrowed pairs, the memorising model and the retrained one."""
    tmp = tmp_path_factory.mktemp("practice")
    with served_dispute(tmp, "unlearning", ("before", "after")) as served:
        yield served


def _request(practice, model, **fields):
    return claim_params(
        practice["receipt"].entry.index,
        practice["pairs"].root,
        practice["endpoints"][model],
        model,
        k=1,
        perturbation="none",
        knowledge="C1",
        **fields,
    )


def _claim(practice, model, opening=None, **fields):
    """File a claim; return its checked verdict, after replaying it from its transcript."""
    opening = opening or practice["pairs"].opening
    outcome = run_claim(
        practice["channel"],
        _request(practice, model, **fields),
        opening,
        claim_key=practice["pairs"].claim_key,
    )
    verdict = check_verdict(outcome.verdict, practice["key"].public_key())
    stored = pb_grpc.VerifierStub(practice["channel"]).GetVerdict(
        pb.GetVerdictRequest(claim_id=outcome.claim_id), timeout=10
    )
    result = replay(verdict, stored.transcript)  # the transcript alone, no database
    assert result.decision == verdict.decision
    assert result.indicators == verdict.indicators
    return verdict


def test_audit_unlearn_and_audit_again_on_fresh_pairs(practice):
    # The module's other test files claims on the same record, before or after this one
    # (the suite runs in any order): counts and exclusions are taken relative to the
    # claims filed before this test's first.
    index = practice["receipt"].entry.index
    before = practice["store"].claims_for_record(index)
    first = _claim(practice, "before")
    assert first.decision == "detected"
    assert first.earlier_claims == len(before)
    assert first.claim.excluded == ()

    second = _claim(practice, "after", fresh_pairs=True, max_pairs=80)
    assert second.earlier_claims == len(before) + 1
    excluded = set(second.claim.excluded)
    assert set(first.opened) <= excluded
    if not before:  # only the first claim opened pairs: exactly those are excluded
        assert second.claim.excluded == tuple(sorted(first.opened))
    assert not set(second.opened) & excluded
    left = N_PAIRS - len(excluded)
    assert second.claim.test_params["n_pairs"] == second.claim.population == left
    assert second.decision == "not-detected"
    # What the owner is told: the bound across every claim, and the pairs still unseen.
    assert false_detection_bound(second) == pytest.approx((len(before) + 2) * 0.05)
    assert unopened_pairs(second) == left - len(second.opened)


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
        run_claim(
            practice["channel"],
            _request(practice, "after", window=8),
            flaky_opening,
            claim_key=practice["pairs"].claim_key,
        )
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
    assert fresh.earlier_claims == len(earlier)
    excluded = set(fresh.claim.excluded)
    assert opened_before < excluded  # the open claim's pairs are excluded as well
    assert len(excluded - opened_before) >= 8
    assert not set(fresh.opened) & excluded
    status = {c.claim_id: c.status for c in store.claims_for_record(index)}
    assert status[left_open.claim_id] == "abandoned"
    with pytest.raises(grpc.RpcError) as info:
        run_claim(
            practice["channel"],
            _request(practice, "after", window=8),
            owner_set.opening,
            claim_key=owner_set.claim_key,
            resume_claim_id=left_open.claim_id,
            timeout_s=30,
        )
    assert info.value.code() == grpc.StatusCode.FAILED_PRECONDITION
