"""Several arbiter replicas on one PostgreSQL database (issue #22 item 7, spec §10.2 step 8).

A claim started on one replica is resumed on another; a claim is never run by two
replicas at once: a second run is refused with ``ABORTED`` (``claim-busy``) while the
first holds the claim's lease, and takes the claim over once the first has stopped or
died and its lease has lapsed. Needs PostgreSQL (``TWINAUDIT_TEST_PG_DSN``, started by
``scripts/ci-postgres.sh`` in CI); skipped with the reason without it.
"""

from __future__ import annotations

import queue
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import grpc
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from tests.support.claims import claim_params, make_pairset
from tests.support.cli_processes import ROOT, cli, stop
from tests.support.fake_oracle import LinearOracle
from tests.support.postgres import fresh_schema, with_search_path
from twinaudit.owner.claim_client import ClaimOutcome, arbiter_key_id, run_claim, sign_start
from twinaudit.practitioner.grpc_server import serve_oracle
from twinaudit.protocol.claim.params import ClaimParams
from twinaudit.protocol.claim.verdict import check_verdict
from twinaudit.protocol.keys import load_public_key
from twinaudit.verifier.replay import replay
from twinaudit.verifier.server import serve_arbiter
from twinaudit.wire.claim_start import to_claim_start
from twinaudit.wire.transport import make_channel
from twinaudit.wire.verifier.v1 import verifier_pb2 as pb
from twinaudit.wire.verifier.v1 import verifier_pb2_grpc as pb_grpc

KEY = Ed25519PrivateKey.from_private_bytes(bytes(range(7, 39)))
PAIRS = make_pairset(48, seed=9)
MAX_PAIRS = 24


@pytest.fixture(scope="module")
def oracle() -> Iterator[str]:
    # Scale 0: the same (uniform) answer for every image, so every pair ties and each
    # claim opens all MAX_PAIRS pairs whatever the arbiter's fresh randomness; a model
    # that answers the twins apart can detect by chance within the first window, which
    # made the pair counts below fail now and then.
    server, port = serve_oracle(LinearOracle(scale=0.0), "127.0.0.1:0")
    try:
        yield f"127.0.0.1:{port}"
    finally:
        server.stop(None)


def _request(record: int, oracle: str) -> ClaimParams:
    return claim_params(
        record,
        PAIRS.root,
        oracle,
        "linear",
        k=1,
        perturbation="none",
        knowledge="C1",
        max_pairs=MAX_PAIRS,
        window=8,
    )


@contextmanager
def _replicas(dsn: str, schema: str, count: int, lease_s: float) -> Iterator[list[Any]]:
    """Serve ``count`` arbiters in this process, each on its own store of one database.

    Yields ``(address, store)`` for each.
    """
    from twinaudit.verifier.escrow.postgres_store import PostgresEscrowStore

    stores, servers, addresses = [], [], []
    try:
        for _ in range(count):
            store = PostgresEscrowStore(dsn, KEY, schema=schema)
            stores.append(store)
            server, port = serve_arbiter(
                store, KEY, "127.0.0.1:0", escrow_rate_limit=None, claim_lease_s=lease_s
            )
            servers.append(server)
            addresses.append(f"127.0.0.1:{port}")
        yield list(zip(addresses, stores, strict=True))
    finally:
        for server in servers:
            server.stop(None)
        for store in stores:
            store.close()


class _StalledClaim:
    """A claim stream that starts a claim, reads its first request, and answers nothing."""

    def __init__(self, channel: grpc.Channel, request: ClaimParams) -> None:
        self._outbox: queue.Queue[pb.ClaimMessage | None] = queue.Queue()
        start = to_claim_start(request)
        sign_start(start, PAIRS.claim_key, arbiter_key_id(channel, 10))
        self._outbox.put(pb.ClaimMessage(start=start))
        stub = pb_grpc.VerifierStub(channel)
        self.call = stub.FileClaim(self._messages(), timeout=120)
        accepted = next(self.call)
        assert accepted.WhichOneof("kind") == "accepted"
        self.claim_id = accepted.accepted.claim_id
        assert next(self.call).WhichOneof("kind") == "request"  # now the replica waits

    def _messages(self) -> Iterator[pb.ClaimMessage]:
        while (message := self._outbox.get()) is not None:
            yield message

    def hang_up(self) -> grpc.StatusCode:
        """End the owner's side of the stream; return the status the replica answers."""
        self._outbox.put(None)
        with pytest.raises(grpc.RpcError) as ended:
            for _ in self.call:
                pass
        return ended.value.code()


def _resume(address: str, request: ClaimParams, claim_id: str) -> ClaimOutcome:
    channel = make_channel(address)
    try:
        return run_claim(
            channel,
            request,
            PAIRS.opening,
            claim_key=PAIRS.claim_key,
            resume_claim_id=claim_id,
            timeout_s=120,
        )
    finally:
        channel.close()


def _refused_busy(call: Callable[[], Any]) -> str:
    with pytest.raises(grpc.RpcError) as refused:
        call()
    assert refused.value.code() == grpc.StatusCode.ABORTED, refused.value.details()
    details = refused.value.details()
    assert "[claim-busy]" in details
    return details


def _check(outcome: ClaimOutcome, address: str, claim_id: str) -> dict[str, Any]:
    verdict = check_verdict(outcome.verdict, KEY.public_key())
    assert outcome.claim_id == claim_id == verdict.claim_id
    assert len(verdict.opened) == MAX_PAIRS
    channel = make_channel(address)
    try:
        stored = pb_grpc.VerifierStub(channel).GetVerdict(
            pb.GetVerdictRequest(claim_id=claim_id), timeout=10
        )
    finally:
        channel.close()
    assert replay(verdict, stored.transcript).decision == verdict.decision
    return verdict


def test_a_claim_started_on_one_replica_is_resumed_on_another(oracle):
    with fresh_schema("replicas") as (dsn, schema), _replicas(dsn, schema, 2, 30.0) as replicas:
        (a, _), (b, b_store) = replicas
        channel = make_channel(a)
        try:
            receipt = PAIRS.escrow(channel, KEY.public_key(), "replica owner")
            request = _request(receipt.entry.index, oracle)

            def goes_away_after_one_window(progress: pb.Progress) -> None:
                raise ConnectionError("the owner's link to replica a went down")

            with pytest.raises((grpc.RpcError, ConnectionError)):
                run_claim(
                    channel,
                    request,
                    PAIRS.opening,
                    claim_key=PAIRS.claim_key,
                    on_progress=goes_away_after_one_window,
                    timeout_s=60,
                )
        finally:
            channel.close()
        (claim,) = b_store.claims_for_record(receipt.entry.index)
        claim_id = claim.claim_id
        assert claim.status == "open"
        outcome = _resume_when_free(b, request, claim_id)
        # Resumed after a saved window: a went on to window 2 (or saved it) before it
        # noticed the owner had gone, so b opens the rest or only signs.
        assert not outcome.progress or outcome.progress[0].pairs_opened > 8
        _check(outcome, a, claim_id)  # the verdict is stored for every replica


def test_a_claim_is_never_run_by_two_replicas_at_once(oracle):
    with fresh_schema("replicas") as (dsn, schema), _replicas(dsn, schema, 2, 30.0) as replicas:
        (a, _), (b, _) = replicas
        channel = make_channel(a)
        try:
            receipt = PAIRS.escrow(channel, KEY.public_key(), "replica owner")
            request = _request(receipt.entry.index, oracle)
            stalled = _StalledClaim(channel, request)
            # While replica a runs it, neither b nor a second stream on a may run it.
            details = _refused_busy(lambda: _resume(b, request, stalled.claim_id))
            assert "another verifier process" in details
            _refused_busy(lambda: _resume(a, request, stalled.claim_id))
            # The owner hangs up: a stops, the claim stays open, and b can take it at once.
            assert stalled.hang_up() == grpc.StatusCode.ABORTED
        finally:
            channel.close()
        outcome = _resume_when_free(b, request, stalled.claim_id)
        _check(outcome, b, stalled.claim_id)
        with pytest.raises(grpc.RpcError) as finished:
            _resume(a, request, stalled.claim_id)
        assert finished.value.code() == grpc.StatusCode.FAILED_PRECONDITION


def _resume_when_free(address: str, request: ClaimParams, claim_id: str) -> ClaimOutcome:
    """Resume the claim on ``address``, retrying while another run still holds it (≤ 10 s)."""
    deadline = time.monotonic() + 10
    while True:
        try:
            return _resume(address, request, claim_id)
        except grpc.RpcError as exc:
            if exc.code() != grpc.StatusCode.ABORTED or time.monotonic() > deadline:
                raise
            time.sleep(0.2)


# --- Two `verifier serve` processes -------------------------------------------------------


def _serve(db: str, key: Path, lease_s: float) -> tuple[subprocess.Popen[str], str]:
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "twinaudit",
            *("verifier", "serve", "--listen", "127.0.0.1:0", "--db", db, "--key", str(key)),
            *("--claim-lease", str(lease_s), "--escrow-rate", "0", "--log-level", "warning"),
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    line = process.stdout.readline()
    assert "serving on" in line, line
    return process, line.split()[-1]


@pytest.mark.slow
def test_a_replica_takes_over_the_claims_of_one_that_died(oracle, tmp_path):
    """SIGKILL the replica running a claim: the other refuses it until the lease lapses."""
    lease_s = 4.0
    with fresh_schema("replicas") as (dsn, schema):
        db = with_search_path(dsn, schema)
        cli("verifier", "keygen", "--key", str(tmp_path / "arbiter.key"))
        public = load_public_key(tmp_path / "arbiter.key.pub")
        first, a = _serve(db, tmp_path / "arbiter.key", lease_s)
        second, b = _serve(db, tmp_path / "arbiter.key", lease_s)
        try:
            channel = make_channel(a)
            try:
                receipt = PAIRS.escrow(channel, public, "replica owner")
                request = _request(receipt.entry.index, oracle)
                stalled = _StalledClaim(channel, request)
                time.sleep(lease_s / 2)  # a renews the lease: b still may not take it
                _refused_busy(lambda: _resume(b, request, stalled.claim_id))
                first.send_signal(signal.SIGKILL)  # a dies holding the claim
                killed = time.monotonic()
                first.wait(timeout=30)
                _refused_busy(lambda: _resume(b, request, stalled.claim_id))
            finally:
                channel.close()
            outcome = _resume_when_free(b, request, stalled.claim_id)
            assert time.monotonic() - killed >= lease_s / 2  # not before the lease lapsed
            verdict = check_verdict(outcome.verdict, public)
            assert verdict.claim_id == stalled.claim_id
            assert len(verdict.opened) == MAX_PAIRS
        finally:
            if first.poll() is None:
                first.kill()
            stop(second)
