"""``earlier_claims`` recounted from the log by a client, without the arbiter's database.

Real servers on 127.0.0.1 (an arbiter on SQLite, a linear oracle): an owner files claims
on her record while another owner files one on his. Each verdict binds its claim-start
entry's index and the log's root there (spec §9.6, §11); the test fetches the entries
with ``GetEntries``, as any client can, recounts each verdict's ``earlier_claims`` from
them, and proves that log a prefix of the latest checkpoint. An arbiter that signs a
smaller count, or points a verdict at another claim's entry, is caught.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Iterator
from typing import Any

import grpc
import pytest

from tests.support.arbiter_world import keyed_record_world
from tests.support.claims import linear_claim, make_pairset
from tests.support.keys import KEY
from twinaudit.cli.log_recount import NOT_BOUND
from twinaudit.cli.main import main
from twinaudit.owner.claim_client import run_claim
from twinaudit.protocol.claim.log_count import recount_earlier_claims
from twinaudit.protocol.claim.verdict import (
    CLAIM_ENTRY_KEY,
    VERDICT_KIND,
    ClaimEntryRef,
    Verdict,
    check_verdict,
)
from twinaudit.protocol.encoding import encode
from twinaudit.protocol.errors import RootMismatchError, VerificationError
from twinaudit.protocol.keys import public_key_pem
from twinaudit.protocol.log_entries import (
    MAX_ENTRIES_PER_CALL,
    ClaimStartEntry,
    VerdictEntry,
    decode_log_leaf,
)
from twinaudit.protocol.merkle import MerkleTree
from twinaudit.protocol.signer import KeySigner
from twinaudit.verifier.escrow.store import ClaimLease
from twinaudit.wire.escrow.log_client import fetch_entries, latest_checkpoint, recount_from_log
from twinaudit.wire.escrow.v1 import escrow_pb2, escrow_pb2_grpc


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    with keyed_record_world(
        tmp_path_factory.mktemp("arbiter"), seed=5, salt_seed=b"recount", max_open_claims=4
    ) as world:
        other = make_pairset(24, seed=6, salt_seed=b"recount-other")
        world["other"] = other
        world["other_record"] = other.escrow(world["channel"], KEY.public_key(), "bob").entry.index
        yield world


def _claim(world: dict[str, Any], pairs: Any, record: int) -> Verdict:
    params = linear_claim(record, pairs.root, world["oracle"])
    outcome = run_claim(world["channel"], params, pairs.opening, claim_key=pairs.claim_key)
    return check_verdict(outcome.verdict, KEY.public_key())


def _resign(verdict: Verdict, **changes: Any) -> Verdict:
    """The verdict as a lying arbiter would sign it, with ``changes`` to its payload."""
    payload = dict(verdict.payload)
    payload.update(changes)
    envelope = KeySigner(KEY).sign(encode(payload), VERDICT_KIND).to_json()
    return check_verdict(envelope, KEY.public_key())


def test_every_verdict_s_count_is_recounted_from_the_entries(world):
    channel = world["channel"]
    mine = [_claim(world, world["pairs"], world["record"])]
    other = _claim(world, world["other"], world["other_record"])
    mine += [_claim(world, world["pairs"], world["record"]) for _ in range(2)]
    # The module's other tests file claims on the record too, before or after this one
    # (the suite runs in any order): the counts are relative to this test's first claim.
    first = mine[0].earlier_claims
    assert [v.earlier_claims for v in mine] == [first, first + 1, first + 2]
    assert other.earlier_claims == 0
    for verdict in [*mine, other]:
        position = verdict.claim_entry
        assert position is not None
        # Only what any client can fetch: the entries, over the escrow service.
        stub = escrow_pb2_grpc.EscrowStub(channel)
        leaves = fetch_entries(stub, 0, position.log_size, deadline=_deadline())
        assert recount_earlier_claims(verdict, leaves).earlier_claims == verdict.earlier_claims
        recount = recount_from_log(channel, verdict, KEY.public_key())
        assert recount.count.earlier_claims == verdict.earlier_claims
        assert recount.head.checkpoint.size >= position.log_size
    # Each verdict is itself in the log, after its claim-start entry.
    entries = [decode_log_leaf(leaf) for leaf in fetch_entries(stub, 0, _size(stub), _deadline())]
    verdict_entries = {e.claim_entry: e for e in entries if isinstance(e, VerdictEntry)}
    starts = {e.index: e for e in entries if isinstance(e, ClaimStartEntry)}
    for verdict in [*mine, other]:
        position = verdict.claim_entry
        assert position is not None
        entry = verdict_entries[position.index]
        assert starts[position.index].claim == entry.claim
        assert entry.index > position.index


def _second_claim(world: dict[str, Any]) -> Verdict:
    """A verdict on the shared record with at least one earlier claim, in any test order."""
    _claim(world, world["pairs"], world["record"])
    verdict = _claim(world, world["pairs"], world["record"])
    assert verdict.earlier_claims >= 1
    return verdict


def test_a_lying_count_or_position_is_refused(world):
    verdict = _second_claim(world)
    leaves = fetch_entries(
        escrow_pb2_grpc.EscrowStub(world["channel"]),
        0,
        verdict.claim_entry.log_size,
        deadline=_deadline(),
    )
    fewer = _resign(verdict, earlier_claims=verdict.earlier_claims - 1)
    with pytest.raises(VerificationError, match="earlier_claims"):
        recount_earlier_claims(fewer, leaves)
    with pytest.raises(VerificationError, match="earlier_claims"):
        recount_from_log(world["channel"], fewer, KEY.public_key())
    # An earlier position with the root of the log there: another claim's entry.
    earlier = _previous_claim_start(leaves, verdict)
    moved_ref = ClaimEntryRef(earlier, _root(leaves[: earlier + 1]))
    moved = _resign(verdict, **{CLAIM_ENTRY_KEY: moved_ref.to_value()})
    with pytest.raises(VerificationError, match="another claim"):
        recount_earlier_claims(moved, leaves)
    # A root that is not the log's.
    forged = dataclasses.replace(verdict.claim_entry, log_root=bytes(32))
    with pytest.raises(RootMismatchError):
        recount_earlier_claims(_resign(verdict, **{CLAIM_ENTRY_KEY: forged.to_value()}), leaves)
    # A verdict signed before claims were logged binds no position.
    older = dict(verdict.payload)
    del older[CLAIM_ENTRY_KEY]
    unbound = check_verdict(
        KeySigner(KEY).sign(encode(older), VERDICT_KIND).to_json(), KEY.public_key()
    )
    with pytest.raises(VerificationError, match="binds no log position"):
        recount_earlier_claims(unbound, leaves)


def _previous_claim_start(leaves: list[bytes], verdict: Verdict) -> int:
    assert verdict.claim_entry is not None
    for index in range(verdict.claim_entry.index - 1, -1, -1):
        if isinstance(decode_log_leaf(leaves[index]), ClaimStartEntry):
            return index
    raise AssertionError("no earlier claim-start entry")


def _root(leaves: list[bytes]) -> bytes:
    return MerkleTree(leaves).root()


def _size(stub: Any) -> int:
    return latest_checkpoint(stub, KEY.public_key(), _deadline()).checkpoint.size


def _deadline() -> float:
    return time.monotonic() + 30.0


def test_get_entries_is_capped_and_refuses_bad_ranges(world):
    stub = escrow_pb2_grpc.EscrowStub(world["channel"])
    size = _size(stub)
    answer = stub.GetEntries(escrow_pb2.GetEntriesRequest(start=0, count=10**6), timeout=30)
    assert 1 <= len(answer.entries) <= min(size, MAX_ENTRIES_PER_CALL)
    assert answer.log_size >= size
    assert [bytes(e) for e in answer.entries] == fetch_entries(
        stub, 0, len(answer.entries), _deadline()
    )
    for start, count, code in (
        (0, 0, grpc.StatusCode.INVALID_ARGUMENT),
        (size + 5, 1, grpc.StatusCode.NOT_FOUND),
    ):
        with pytest.raises(grpc.RpcError) as info:
            stub.GetEntries(escrow_pb2.GetEntriesRequest(start=start, count=count), timeout=30)
        assert info.value.code() == code


def test_verify_and_verifier_check_recount_with_log(world, tmp_path, capsys):
    verdict = _second_claim(world)
    key = tmp_path / "arbiter.pub"
    key.write_bytes(public_key_pem(KEY.public_key()))
    files = {}
    for name, payload in (
        ("good", dict(verdict.payload)),
        ("fewer", {**verdict.payload, "earlier_claims": verdict.earlier_claims - 1}),
        ("unbound", {k: v for k, v in verdict.payload.items() if k != CLAIM_ENTRY_KEY}),
    ):
        files[name] = tmp_path / f"{name}.json"
        files[name].write_bytes(KeySigner(KEY).sign(encode(payload), VERDICT_KIND).to_json())
    for command in (["verify"], ["verifier", "check"]):

        def run(name: str, *extra: str, command: list[str] = command) -> int:
            argv = [*command, str(files[name]), "--pubkey", str(key)]
            return main([*argv, "--log", world["address"], *extra])

        assert run("good", "--json") == 0
        report = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
        assert report["log"]["recounted"] is True
        assert report["log"]["earlier_claims"] == verdict.earlier_claims
        assert run("good") == 0
        assert "earlier_claims recounted from the arbiter's log" in capsys.readouterr().out
        assert run("fewer") == 1
        assert "earlier_claims" in capsys.readouterr().err
        assert run("unbound", "--json") == 0
        report = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
        assert report["log"] == {"recounted": False, "note": NOT_BOUND}


def test_a_record_with_claims_filed_before_logging_gets_no_position(world):
    """A claim with no claim-start entry (filed before schema 6) keeps later verdicts unbound.

    The log would count fewer claims than were filed, so the verdict carries no
    claim_entry: a recount is never smaller than earlier_claims (spec §9.6.2).
    """
    # A record of its own: the unlogged claim would leave any later verdict on the record
    # unbound, and the module's other tests, in any order, expect their verdicts bound.
    legacy = make_pairset(24, seed=7, salt_seed=b"recount-legacy")
    record = legacy.escrow(world["channel"], KEY.public_key(), "carol").entry.index
    world["store"].create_claim(  # as a claim filed before claims were logged
        "legacy-claim", record, "failed", b"state", lease=ClaimLease("legacy", 5.0)
    )
    verdict = _claim(world, legacy, record)
    assert verdict.earlier_claims == 1
    assert verdict.claim_entry is None
    with pytest.raises(VerificationError, match="binds no log position"):
        recount_from_log(world["channel"], verdict, KEY.public_key())
