"""Only the record's owner files claims, and only filed claims count (issue #40 N1; spec §10.7).

Real servers on 127.0.0.1: an arbiter on SQLite and a model oracle. On main (30eb2ba) a
third party who read the public log filed 40 claims on an owner's record in 1.7 s, every
one counted, and her next verdict read a bound of (42 + 1)·p = 1. Here every claim on a
keyed record carries a request signed by the owner's claim key, once; the rest are
refused before anything is stored, and every failure says whether it counted.
"""

from __future__ import annotations

import dataclasses
import queue
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from demo.seeded import SeededEntropy
from tests.support.arbiter_world import keyed_record_world
from tests.support.claims import claim_params, linear_claim, make_pairset
from tests.support.fake_oracle import LinearOracle
from tests.support.keys import KEY
from twinaudit.cli.results import bound_line, claims_authenticated, verdict_reading
from twinaudit.owner.claim_client import dry_run_claim, run_claim, sign_start
from twinaudit.practitioner.grpc_server import serve_oracle
from twinaudit.protocol.claim.filing import verify_claim_request
from twinaudit.protocol.claim.verdict import check_verdict
from twinaudit.protocol.escrow_messages import EscrowRequest, open_receipt
from twinaudit.protocol.keys import key_id, public_key_from_raw
from twinaudit.verifier.escrow.sqlite_store import SqliteEscrowStore
from twinaudit.verifier.server import serve_arbiter
from twinaudit.wire.claim_start import start_map, to_claim_start
from twinaudit.wire.transport import error_details, make_channel
from twinaudit.wire.verifier.v1 import verifier_pb2 as pb

TIMEOUT_S = 30.0
ARBITER_ID = key_id(KEY.public_key())


@pytest.fixture
def world(tmp_path: Path) -> Iterator[dict[str, Any]]:
    """An arbiter (two open claims at most per record), an oracle, one keyed record.

    One per test: the tests leave claims open on the record, and the arbiter counts them
    against its limit, so a shared world made each test's outcome depend on the order.
    """
    (tmp_path / "arbiter").mkdir()
    with keyed_record_world(
        tmp_path / "arbiter", seed=11, salt_seed=b"authentication", max_open_claims=2
    ) as world:
        yield world


def _params(world: dict[str, Any], endpoint: str = "", **fields: Any) -> Any:
    return linear_claim(world["record"], world["pairs"].root, endpoint or world["oracle"], **fields)


def _stream(channel: grpc.Channel, start: pb.ClaimStart, openings: Any = None) -> grpc.RpcError:
    """Send ``start``; answer a first opening request with ``openings`` (junk by default)."""
    outbox: queue.Queue[pb.ClaimMessage | None] = queue.Queue()
    outbox.put(pb.ClaimMessage(start=start))

    def messages() -> Iterator[pb.ClaimMessage]:
        while (message := outbox.get()) is not None:
            yield message

    try:
        for message in pb_stub(channel).FileClaim(messages(), timeout=TIMEOUT_S):
            if message.WhichOneof("kind") == "request":
                outbox.put(openings or pb.ClaimMessage(openings=pb.Openings()))
    except grpc.RpcError as error:
        return error
    finally:
        outbox.put(None)
    raise AssertionError("the claim stream was not refused")


def pb_stub(channel: grpc.Channel) -> Any:
    from twinaudit.wire.verifier.v1 import verifier_pb2_grpc

    return verifier_pb2_grpc.VerifierStub(channel)


def _claims(world: dict[str, Any]) -> list[str]:
    return [c.claim_id for c in world["store"].claims_for_record(world["record"])]


def test_a_third_party_files_nothing_and_the_owner_s_bound_stays_p(world):
    """#40 N1 as reported: 40 claims from someone who read the log; none is filed."""
    before = _claims(world)
    stranger = Ed25519PrivateKey.generate()
    codes = []
    for attempt in range(40):
        start = to_claim_start(_params(world))
        if attempt % 2:  # signed, but by the stranger's key
            sign_start(start, stranger, ARBITER_ID)
        error = _stream(world["channel"], start)
        details = error_details(error)
        assert details is not None and details.counted is False, error.details()
        assert "does not count" in error.details()
        codes.append((error.code(), details.code))
    assert set(codes) == {(grpc.StatusCode.INVALID_ARGUMENT, "invalid-signature")}
    assert _claims(world) == before  # nothing stored
    # The owner's claim: its verdict counts only her own earlier claims.
    outcome = run_claim(
        world["channel"], _params(world), world["pairs"].opening, claim_key=world["pairs"].claim_key
    )
    verdict = check_verdict(outcome.verdict, KEY.public_key())
    assert verdict.earlier_claims == len(before)
    assert verdict.filing is not None and claims_authenticated(verdict)
    assert verdict.filing.claim_key == world["pairs"].claim_public_key()
    reading = verdict_reading(verdict)
    assert reading[0] == bound_line(verdict) and reading[0].startswith("false-detection bound")
    assert "signed by its owner's claim key" in reading[1]


def test_a_request_is_good_once_at_one_arbiter_for_its_parameters(world):
    start = to_claim_start(_params(world, max_pairs=4))
    sign_start(start, world["pairs"].claim_key, ARBITER_ID)
    captured = pb.ClaimStart()
    captured.CopyFrom(start)
    # Sent once, it files a claim (which fails on the junk openings, and counts); a copy
    # sent again, by anyone, is refused and files nothing.
    before = _claims(world)
    first = _stream(world["channel"], captured)
    assert error_details(first).counted is True
    assert len(_claims(world)) == len(before) + 1
    replayed = _stream(world["channel"], captured)
    assert replayed.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert "good once" in replayed.details() and error_details(replayed).counted is False
    # Changed after signing: the signature covers every field.
    changed = pb.ClaimStart()
    changed.CopyFrom(start)
    changed.window_max = 32
    altered = _stream(world["channel"], changed)
    assert error_details(altered).code == "verification-failed"
    # Signed for another arbiter.
    elsewhere = to_claim_start(_params(world))
    sign_start(elsewhere, world["pairs"].claim_key, "ab" * 32)
    assert error_details(_stream(world["channel"], elsewhere)).code == "verification-failed"
    assert len(_claims(world)) == len(before) + 1


def test_failures_say_whether_they_count(world):
    """#40: 'No failure message said that the attempt was counted.'"""
    before = _claims(world)
    unreachable = to_claim_start(_params(world, endpoint="127.0.0.1:1"))
    sign_start(unreachable, world["pairs"].claim_key, ARBITER_ID)
    refused = _stream(world["channel"], unreachable)
    assert refused.code() == grpc.StatusCode.UNAVAILABLE
    assert error_details(refused).counted is False and _claims(world) == before
    filed = []
    with pytest.raises(grpc.RpcError) as failed:
        run_claim(
            world["channel"],
            _params(world),
            lambda i: dataclasses.replace(world["pairs"].opening(i), salt=bytes(32)),  # wrong
            claim_key=world["pairs"].claim_key,
            on_accepted=filed.append,
        )
    details = error_details(failed.value)
    assert details.counted is True and details.claim_id == filed[0]
    assert f"claim {filed[0]} was filed" in failed.value.details()
    assert _claims(world) == [*before, filed[0]]
    outcome = run_claim(
        world["channel"], _params(world), world["pairs"].opening, claim_key=world["pairs"].claim_key
    )
    assert check_verdict(outcome.verdict, KEY.public_key()).earlier_claims == len(before) + 1


def test_a_dry_run_checks_the_oracle_and_files_nothing(world):
    before = _claims(world)
    report = dry_run_claim(
        world["channel"],
        _params(world),
        claim_key=world["pairs"].claim_key,
        probes=((28, 28, 1), (32, 32, 3)),
    )
    assert report.n_pairs == len(world["pairs"]) and report.earlier_claims == len(before)
    (ok_shape, ok_error), (bad_shape, bad_error) = report.probes
    assert ok_shape == (28, 28, 1) and ok_error == ""
    assert bad_shape == (32, 32, 3) and bad_error  # the linear model takes 28x28x1 only
    assert _claims(world) == before
    with pytest.raises(grpc.RpcError) as unsigned:
        dry_run_claim(world["channel"], _params(world), claim_key=None)
    assert error_details(unsigned.value).code == "invalid-signature"


def test_a_record_with_too_many_open_claims_refuses_another(world):
    """Per-owner limits (spec §10.7): the fixture's arbiter allows 2 open claims a record."""
    store = world["store"]

    def open_claims() -> int:
        return sum(c.status == "open" for c in store.claims_for_record(world["record"]))

    while open_claims() < 2:

        def vanish(index: int) -> Any:
            raise ConnectionError("the owner's machine went away")

        with pytest.raises((grpc.RpcError, ConnectionError)):
            run_claim(world["channel"], _params(world), vanish, claim_key=world["pairs"].claim_key)
    before = _claims(world)
    start = to_claim_start(_params(world))
    sign_start(start, world["pairs"].claim_key, ARBITER_ID)
    refused = _stream(world["channel"], start)
    assert refused.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert "open claims" in refused.details() and error_details(refused).counted is False
    assert _claims(world) == before


def test_a_keyless_record_takes_unsigned_claims_and_its_verdict_says_so(tmp_path: Path):
    """Records escrowed before claim keys: claims stay open to anyone, and verdicts say so."""
    store = SqliteEscrowStore(tmp_path / "escrow.db", KEY, entropy=SeededEntropy(b"rho"))
    pairs = make_pairset(16, seed=12, salt_seed=b"keyless")
    receipt = open_receipt(
        store.commit(EscrowRequest(pairs.root, len(pairs), "image", "before keys")),
        KEY.public_key(),
    )
    assert receipt.entry.claim_key is None
    server, port = serve_arbiter(store, KEY, "127.0.0.1:0")
    oracle, oracle_port = serve_oracle(LinearOracle(), "127.0.0.1:0")
    try:
        with make_channel(f"127.0.0.1:{port}") as channel:
            params = claim_params(
                0, pairs.root, f"127.0.0.1:{oracle_port}", "linear", k=1,
                perturbation="dither", knowledge="C1", max_pairs=4, window=4,
            )  # fmt: skip
            verdict = check_verdict(
                run_claim(channel, params, pairs.opening).verdict, KEY.public_key()
            )
            assert verdict.filing is None and not claims_authenticated(verdict)
            assert "not authenticated" in verdict_reading(verdict)[1]
            signed = to_claim_start(params)
            sign_start(signed, pairs.claim_key, ARBITER_ID)
            refused = _stream(channel, signed)
            assert error_details(refused).code == "invalid-input"
            assert "binds no claim key" in refused.details()
    finally:
        server.stop(None)
        oracle.stop(None)
        store.close()


def test_the_signed_request_covers_the_message_as_sent():
    """The start map is the message's fields as sent: any change breaks the signature."""
    pairs = make_pairset(4, seed=1)
    params = claim_params(0, pairs.root, "h:1", "m", k=1, perturbation="dither", knowledge="C1")
    start = to_claim_start(params)
    sign_start(start, pairs.claim_key, ARBITER_ID)
    claim_key = public_key_from_raw(pairs.claim_public_key())
    request = verify_claim_request(
        start.authorization, claim_key, arbiter=ARBITER_ID, start=start_map(start)
    )
    assert request.start["endpoint"] == "h:1" and not request.dry_run
    for field, value in (("max_pairs", 3), ("fresh_pairs", True), ("tie_rule", "coin")):
        changed = pb.ClaimStart()
        changed.CopyFrom(start)
        setattr(changed, field, value)
        with pytest.raises(Exception, match="differs"):
            verify_claim_request(
                start.authorization, claim_key, arbiter=ARBITER_ID, start=start_map(changed)
            )
