"""A claim that fails before any outcome runs again as itself, counted once (issue #40; §10.7).

Real servers on 127.0.0.1: an arbiter on SQLite, a model oracle that can fail on cue,
two keyed records. On main (096967b) a failed claim could never resume ("claim ... is
failed; it cannot resume"), so an owner whose claim failed at its first window (the
model's host overloaded) had to file a new claim, and every later verdict on the
record carried a bound one p higher. Here it is resumed from its saved state: the
same claim id, claim map, audit seed and order, counted once. Grinding gains nothing:
the restart asks for the same pairs in the same order, and once another claim is
filed on the record, or once the claim computed an outcome, it cannot run again.
"""

from __future__ import annotations

import dataclasses
import queue
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import grpc
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from demo.seeded import SeededEntropy
from tests.support.claims import linear_claim, make_pairset
from tests.support.fake_oracle import FlakyOracle
from tests.support.keys import KEY
from twinaudit.owner.claim_client import dry_run_claim, run_claim, sign_start
from twinaudit.practitioner.grpc_server import serve_oracle
from twinaudit.protocol.claim.verdict import check_verdict
from twinaudit.protocol.keys import key_id
from twinaudit.verifier.escrow.sqlite_store import SqliteEscrowStore
from twinaudit.verifier.replay import replay
from twinaudit.verifier.server import serve_arbiter
from twinaudit.wire.claim_start import to_claim_start
from twinaudit.wire.transport import error_details, make_channel
from twinaudit.wire.verifier.v1 import verifier_pb2 as pb
from twinaudit.wire.verifier.v1 import verifier_pb2_grpc

TIMEOUT_S = 30.0
ARBITER_ID = key_id(KEY.public_key())


@dataclass(frozen=True)
class World:
    """An arbiter on SQLite, a model that fails on cue, and two keyed records."""

    store: SqliteEscrowStore
    channel: grpc.Channel
    model: FlakyOracle
    oracle: str
    records: dict[int, Any]  # record index: the pair set escrowed as that record

    @property
    def record(self) -> int:
        """The first record, on which the claims are filed."""
        return min(self.records)

    @property
    def pairs(self) -> Any:
        """The first record's pairs."""
        return self.records[self.record]


@pytest.fixture
def world(tmp_path) -> Iterator[World]:
    store = SqliteEscrowStore(tmp_path / "escrow.db", KEY, entropy=SeededEntropy(b"rho"))
    server, port = serve_arbiter(store, KEY, "127.0.0.1:0", entropy=SeededEntropy(b"r"))
    model = FlakyOracle(failures=0)
    oracle, oracle_port = serve_oracle(model, "127.0.0.1:0")
    channel = make_channel(f"127.0.0.1:{port}")
    records = {}
    for owner, seed in (("alice", 21), ("bob", 22)):
        pairs = make_pairset(32, seed=seed, salt_seed=owner.encode())
        records[pairs.escrow(channel, KEY.public_key(), owner).entry.index] = pairs
    try:
        yield World(store, channel, model, f"127.0.0.1:{oracle_port}", records)
    finally:
        channel.close()
        server.stop(None)
        oracle.stop(None)
        store.close()


def _params(world: World, **fields: Any) -> Any:
    return linear_claim(world.record, world.pairs.root, world.oracle, **fields)


def _claims(world: World) -> list[tuple[str, str]]:
    return [(c.claim_id, c.status) for c in world.store.claims_for_record(world.record)]


def _stored(world: World, claim_id: str) -> tuple[Any, bytes | None]:
    store = world.store
    return store.load_claim(claim_id), store.load_transcript(claim_id)


def _drive(
    world: World, start: pb.ClaimStart, bad_at: int | None
) -> tuple[list[list[int]], str, grpc.RpcError | None]:
    """Run a claim stream, opening honestly but for request ``bad_at`` (a wrong salt).

    Returns the opening requests the arbiter sent, the claim id, and the error the
    stream ended with (None once a verdict came).
    """
    pairs = world.pairs
    outbox: queue.Queue[pb.ClaimMessage | None] = queue.Queue()
    outbox.put(pb.ClaimMessage(start=start))
    requests: list[list[int]] = []
    claim_id = ""

    def messages() -> Iterator[pb.ClaimMessage]:
        while (message := outbox.get()) is not None:
            yield message

    def opening(index: int, wrong: bool) -> pb.PairOpening:
        given = pairs.opening(index)
        if wrong:
            given = dataclasses.replace(given, salt=bytes(32))
        return pb.PairOpening(
            index=index,
            salt=given.salt,
            version0=given.version0,
            version1=given.version1,
            proof=given.proof,
        )

    stub = verifier_pb2_grpc.VerifierStub(world.channel)  # type: ignore[no-untyped-call]
    try:
        for message in stub.FileClaim(messages(), timeout=TIMEOUT_S):
            kind = message.WhichOneof("kind")
            if kind == "accepted":
                claim_id = message.accepted.claim_id
            elif kind == "request":
                wrong = len(requests) == bad_at
                requests.append(list(message.request.indices))
                pairs_sent = [opening(i, wrong) for i in message.request.indices]
                outbox.put(pb.ClaimMessage(openings=pb.Openings(pairs=pairs_sent)))
            elif kind == "verdict":
                return requests, claim_id, None
    except grpc.RpcError as error:
        return requests, claim_id, error
    finally:
        outbox.put(None)
    raise AssertionError("the stream ended without a verdict or an error")


def _signed(world: World, resume: str = "", key: Any = None, **fields: Any) -> Any:
    start = to_claim_start(_params(world, **fields), resume)
    sign_start(start, key or world.pairs.claim_key, ARBITER_ID)
    return start


def test_a_claim_whose_oracle_failed_at_its_first_window_runs_again_and_counts_once(world):
    before = len(_claims(world))
    world.model.failures = 1  # the model's host fails the first window's queries
    filed: list[str] = []
    with pytest.raises(grpc.RpcError) as failed:
        run_claim(
            world.channel,
            _params(world),
            world.pairs.opening,
            claim_key=world.pairs.claim_key,
            on_accepted=filed.append,
        )
    details = error_details(failed.value)
    assert details.counted is True and details.restart is True and details.claim_id == filed[0]
    assert f"resuming claim {filed[0]} runs it again as the same claim" in failed.value.details()
    assert _claims(world)[-1] == (filed[0], "failed")
    # The owner resumes it: the same claim runs to a verdict.
    outcome = run_claim(
        world.channel,
        _params(world),
        world.pairs.opening,
        claim_key=world.pairs.claim_key,
        resume_claim_id=filed[0],
    )
    assert outcome.claim_id == filed[0]
    verdict = check_verdict(outcome.verdict, KEY.public_key())
    assert verdict.earlier_claims == before and verdict.claim_id == filed[0]
    assert verdict.filing is not None and verdict.filing.request.start["resume_claim_id"] == ""
    transcript = world.store.get_verdict(filed[0]).transcript
    replayed = replay(verdict, transcript)
    assert replayed.decision == verdict.decision
    assert _claims(world)[before:] == [(filed[0], "finished")]
    # The failed try and its run again were one claim: the next counts one before it.
    report = dry_run_claim(world.channel, _params(world), claim_key=world.pairs.claim_key)
    assert report.earlier_claims == before + 1
    later = run_claim(
        world.channel, _params(world), world.pairs.opening, claim_key=world.pairs.claim_key
    )
    assert check_verdict(later.verdict, KEY.public_key()).earlier_claims == before + 1


def test_failing_on_cue_meets_the_same_order_and_a_later_claim_ends_the_restart(world):
    """Grinding: fail once the first window's answers are known; the restart asks the same."""
    # Request 0 is answered, so its queries reach the model; request 1 (asked ahead,
    # before request 0's outcomes are computed) gets a bad opening and fails the claim.
    first, claim, error = _drive(world, _signed(world, max_pairs=16), bad_at=1)
    assert error is not None and error.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert error_details(error).restart is True and len(first) == 2
    queried, world.model.seen[:] = list(world.model.seen), []
    assert queried  # the model answered the first window's queries before the failure
    again, same, error = _drive(world, _signed(world, claim, max_pairs=16), bad_at=1)
    assert same == claim and error_details(error).restart is True
    assert again == first  # the same pairs in the same order: the same audit seed
    assert world.model.seen == queried  # and the same queries, byte for byte
    honest, same, error = _drive(world, _signed(world, claim, max_pairs=16), bad_at=None)
    assert error is None and same == claim and honest[:2] == first
    # Another claim fails before any outcome; once a claim is filed after it, it is done.
    _, abandoned, error = _drive(world, _signed(world), bad_at=0)
    assert error_details(error).restart is True
    _, later, error = _drive(world, _signed(world), bad_at=None)
    assert error is None and later != abandoned
    claims, stored = _claims(world), _stored(world, abandoned)
    requests, _, refused = _drive(world, _signed(world, abandoned), bad_at=None)
    assert requests == [] and refused.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert error_details(refused).code == "invalid-state"
    assert error_details(refused).counted is False
    assert "1 claim(s) were filed on record" in refused.details()
    assert _claims(world) == claims and _stored(world, abandoned) == stored


def test_a_claim_that_computed_an_outcome_cannot_run_again(world):
    # Request 2 is asked once window 0 was scored and saved: its failure comes after.
    requests, claim, error = _drive(world, _signed(world, max_pairs=16), bad_at=2)
    assert len(requests) == 3 and error is not None
    details = error_details(error)
    assert details.counted is True and details.restart is False
    assert "resuming claim" not in error.details()
    claims, stored = _claims(world), _stored(world, claim)
    again, _, refused = _drive(world, _signed(world, claim, max_pairs=16), bad_at=None)
    assert again == [] and error_details(refused).code == "invalid-state"
    assert "computed a pair's outcome" in refused.details()
    assert _claims(world) == claims and _stored(world, claim) == stored


def test_only_the_owner_restarts_her_claim_and_only_on_its_record(world):
    _, claim, error = _drive(world, _signed(world), bad_at=0)
    assert error_details(error).restart is True
    claims, stored = _claims(world), _stored(world, claim)
    attempts: list[Callable[[], pb.ClaimStart]] = [
        lambda: to_claim_start(_params(world), claim),  # unsigned
        lambda: _signed(world, claim, key=Ed25519PrivateKey.generate()),  # another key
    ]
    for attempt in attempts:
        requests, _, refused = _drive(world, attempt(), bad_at=None)
        assert requests == [] and error_details(refused).code == "invalid-signature"
    assert _claims(world) == claims and _stored(world, claim) == stored
    # A copy of the owner's own signed resume, sent again by anyone, is good once.
    start = _signed(world, claim)
    _, _, first = _drive(world, start, bad_at=0)  # the owner's try, which fails again
    assert error_details(first).restart is True
    _, _, copied = _drive(world, start, bad_at=None)
    assert "good once" in copied.details() and error_details(copied).counted is False
    # Named on another record (signed by that record's owner), it is not that record's.
    other = max(world.records)
    params = _params(world)
    elsewhere = to_claim_start(
        dataclasses.replace(params, record_index=other, record_root=world.records[other].root),
        claim,
    )
    sign_start(elsewhere, world.records[other].claim_key, ARBITER_ID)
    _, _, refused = _drive(world, elsewhere, bad_at=None)
    assert error_details(refused).code == "invalid-state"
    assert f"filed on record {world.record}, not {other}" in refused.details()
    assert _claims(world) == claims and _stored(world, claim)[0].status == "failed"
    _, same, error = _drive(world, _signed(world, claim), bad_at=None)
    assert error is None and same == claim and _claims(world) == [*claims[:-1], (claim, "finished")]
