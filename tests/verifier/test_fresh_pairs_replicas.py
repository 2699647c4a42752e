"""Claims on fresh pairs started on two replicas of one database (spec §10.2 step 2).

A claim on fresh pairs excludes every pair that the claims filed before it may have
disclosed, and abandons those left open. Two replicas (two stores, two servers) share
one database: SQLite here, PostgreSQL as well where ``TWINAUDIT_TEST_PG_DSN`` names
one. Replica ``a`` is paused between computing its exclusions and filing its claim
while replica ``b`` files a claim on the same record, on fresh pairs or not. That claim
is filed before ``a``'s, so ``a`` must exclude what it opened, or be refused with
``claim-busy`` while it is being run; it must never file a claim that counts it as
earlier without excluding it. The store's half, :meth:`create_claim` with
``earlier``, is tested on its own as well.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import grpc
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from demo.seeded import SeededEntropy
from tests.support.claims import claim_params, make_pairset
from tests.support.fake_oracle import LinearOracle
from tests.support.postgres import fresh_schema
from twinaudit.owner.claim_client import ClaimOutcome, run_claim, sign_start
from twinaudit.protocol.claim.params import ClaimParams
from twinaudit.protocol.claim.verdict import check_verdict
from twinaudit.protocol.errors import (
    ClaimBusyError,
    ClaimsChangedError,
    StateError,
    UnknownClaimError,
)
from twinaudit.protocol.escrow_messages import EscrowRequest
from twinaudit.protocol.keys import key_id
from twinaudit.verifier.escrow.sql_store import SqlEscrowStore
from twinaudit.verifier.escrow.sqlite_store import SqliteEscrowStore
from twinaudit.verifier.escrow.store import (
    ClaimLease,
)
from twinaudit.verifier.server import serve_arbiter
from twinaudit.verifier.service import FRESH_START_ATTEMPTS, VerifierService
from twinaudit.wire.claim_start import to_claim_start
from twinaudit.wire.transport import make_channel
from twinaudit.wire.verifier.v1 import verifier_pb2 as pb
from twinaudit.wire.verifier.v1 import verifier_pb2_grpc as pb_grpc

KEY = Ed25519PrivateKey.from_private_bytes(bytes(range(11, 43)))
PAIRS = make_pairset(48, seed=5)
WAIT_S = 30.0

StoreFactory = Callable[[], SqlEscrowStore]


@pytest.fixture(params=["sqlite", "postgres"])
def open_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StoreFactory]:
    """Open stores on one database: each call, a new store (a replica's connection)."""
    if request.param == "sqlite":
        yield lambda: SqliteEscrowStore(tmp_path / "escrow.db", KEY)
        return
    with fresh_schema("fresh_pairs") as (dsn, schema):  # skips without PostgreSQL
        from twinaudit.verifier.escrow.postgres_store import PostgresEscrowStore

        yield lambda: PostgresEscrowStore(dsn, KEY, schema=schema)


@contextmanager
def _replicas(open_store: StoreFactory) -> Iterator[list[tuple[str, SqlEscrowStore]]]:
    """Serve two arbiters, each on its own store of one database; yield (address, store)."""
    stores, servers, replicas = [], [], []
    try:
        for seed in (b"replica-a", b"replica-b"):
            store = open_store()
            stores.append(store)
            server, port = serve_arbiter(
                store,
                KEY,
                "127.0.0.1:0",
                escrow_rate_limit=None,
                oracle_factory=lambda endpoint: LinearOracle(),
                entropy=SeededEntropy(seed),  # distinct claim ids and nonces per replica
            )
            servers.append(server)
            replicas.append((f"127.0.0.1:{port}", store))
        yield replicas
    finally:
        for server in servers:
            server.stop(None)
        for store in stores:
            store.close()


def _request(record: int, *, fresh_pairs: bool) -> ClaimParams:
    return claim_params(
        record,
        PAIRS.root,
        "127.0.0.1:9",  # the in-process oracle factory ignores it
        "linear",
        k=1,
        perturbation="none",
        knowledge="C1",
        test_name="mixture-e",
        max_pairs=8,
        window=4,
        fresh_pairs=fresh_pairs,
    )


class _PauseBeforeFiling:
    """Hold replica ``store``'s first claim start between its exclusions and its filing."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, store: SqlEscrowStore) -> None:
        self.paused = threading.Event()
        self.go = threading.Event()
        original = VerifierService._excluded_pairs

        def excluded_pairs(service: VerifierService, *args: Any) -> Any:
            computed = original(service, *args)
            if getattr(service, "_store", None) is store and not self.paused.is_set():
                self.paused.set()
                assert self.go.wait(WAIT_S), "the test never let the paused start go on"
            return computed

        monkeypatch.setattr(VerifierService, "_excluded_pairs", excluded_pairs)


class _InThread:
    """Run ``call`` in a thread; :meth:`result` returns its value or raises its error."""

    def __init__(self, call: Callable[[], ClaimOutcome]) -> None:
        self._outcome: list[Any] = []
        self._thread = threading.Thread(target=self._run, args=(call,), daemon=True)
        self._thread.start()

    def _run(self, call: Callable[[], ClaimOutcome]) -> None:
        try:
            self._outcome.append(call())
        except BaseException as exc:  # handed to the test's thread
            self._outcome.append(exc)

    def result(self) -> ClaimOutcome:
        self._thread.join(WAIT_S)
        assert self._outcome, "the claim did not end"
        (outcome,) = self._outcome
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome


class _StalledClaim:
    """A claim stream that starts a claim and then answers no request: it stays running."""

    def __init__(self, channel: grpc.Channel, request: ClaimParams) -> None:
        self._outbox: queue.Queue[pb.ClaimMessage | None] = queue.Queue()
        start = to_claim_start(request)
        sign_start(start, PAIRS.claim_key, key_id(KEY.public_key()))
        self._outbox.put(pb.ClaimMessage(start=start))
        self.call = pb_grpc.VerifierStub(channel).FileClaim(self._messages(), timeout=WAIT_S)
        accepted = next(self.call)
        assert accepted.WhichOneof("kind") == "accepted"
        self.claim_id = accepted.accepted.claim_id
        assert next(self.call).WhichOneof("kind") == "request"

    def _messages(self) -> Iterator[pb.ClaimMessage]:
        while (message := self._outbox.get()) is not None:
            yield message

    def hang_up(self) -> None:
        self._outbox.put(None)
        with pytest.raises(grpc.RpcError):
            for _ in self.call:
                pass


def _claim(address: str, request: ClaimParams) -> ClaimOutcome:
    channel = make_channel(address)
    try:
        return run_claim(
            channel, request, PAIRS.opening, claim_key=PAIRS.claim_key, timeout_s=WAIT_S
        )
    finally:
        channel.close()


@pytest.mark.parametrize("b_fresh", [True, False], ids=["b-fresh", "b-ordinary"])
def test_a_claim_filed_by_another_replica_meanwhile_is_excluded(open_store, monkeypatch, b_fresh):
    with _replicas(open_store) as [(a, a_store), (b, _)]:
        channel = make_channel(a)
        try:
            record = PAIRS.escrow(channel, KEY.public_key(), "owner").entry.index
        finally:
            channel.close()
        pause = _PauseBeforeFiling(monkeypatch, a_store)
        first = _InThread(lambda: _claim(a, _request(record, fresh_pairs=True)))
        assert pause.paused.wait(WAIT_S)  # a has read the record's claims: none yet
        # Meanwhile b files a claim on the record and runs it to its verdict.
        earlier = check_verdict(
            _claim(b, _request(record, fresh_pairs=b_fresh)).verdict, KEY.public_key()
        )
        pause.go.set()
        later = check_verdict(first.result().verdict, KEY.public_key())
    assert earlier.earlier_claims == 0
    assert later.earlier_claims == 1  # b's claim was filed first ...
    assert later.claim.excluded == tuple(sorted(earlier.opened))  # ... so it is excluded
    assert not set(later.opened) & set(earlier.opened)


@pytest.mark.parametrize("b_fresh", [True, False], ids=["b-fresh", "b-ordinary"])
def test_a_claim_another_replica_runs_meanwhile_makes_the_start_claim_busy(
    open_store, monkeypatch, b_fresh
):
    with _replicas(open_store) as [(a, a_store), (b, b_store)]:
        channel = make_channel(a)
        try:
            record = PAIRS.escrow(channel, KEY.public_key(), "owner").entry.index
        finally:
            channel.close()
        pause = _PauseBeforeFiling(monkeypatch, a_store)
        first = _InThread(lambda: _claim(a, _request(record, fresh_pairs=True)))
        assert pause.paused.wait(WAIT_S)
        b_channel = make_channel(b)
        try:
            running = _StalledClaim(b_channel, _request(record, fresh_pairs=b_fresh))
            pause.go.set()
            # b's claim was filed first and is being run: a's start is refused, and
            # files nothing; b's claim is neither abandoned nor taken from its run.
            with pytest.raises(grpc.RpcError) as refused:
                first.result()
            assert refused.value.code() == grpc.StatusCode.ABORTED
            assert "[claim-busy]" in (refused.value.details() or "")
            (claim,) = b_store.claims_for_record(record)
            assert (claim.claim_id, claim.status) == (running.claim_id, "open")
            running.hang_up()
        finally:
            b_channel.close()


def test_a_start_that_keeps_losing_the_race_is_claim_busy_and_files_nothing(
    open_store, monkeypatch
):
    with _replicas(open_store) as [(a, a_store), _]:
        channel = make_channel(a)
        try:
            record = PAIRS.escrow(channel, KEY.public_key(), "owner").entry.index
        finally:
            channel.close()
        tries = []

        def always_raced(*args: Any, **kwargs: Any) -> None:
            tries.append(kwargs["earlier"])
            raise ClaimsChangedError("another claim was filed on the record meanwhile")

        monkeypatch.setattr(a_store, "create_claim", always_raced)
        with pytest.raises(grpc.RpcError) as refused:
            _claim(a, _request(record, fresh_pairs=True))
        assert refused.value.code() == grpc.StatusCode.ABORTED
        assert "[claim-busy]" in (refused.value.details() or "")
        assert tries == [[]] * FRESH_START_ATTEMPTS  # exclusions computed again each time
        assert a_store.claims_for_record(record) == []


# --- The store: create_claim --------------------------------------------------------------


def test_create_claim_files_only_after_the_claims_named(open_store):
    with open_store() as one, open_store() as two:
        one.commit(EscrowRequest(root=PAIRS.root, n_pairs=len(PAIRS), item_kind="image", owner="o"))
        record = one.size() - 1
        lease = ClaimLease("run-1", 30.0)
        one.create_claim("c1", record, "open", b"s1", b"header|", lease=lease, earlier=[])
        # The other replica read the record's claims before c1 was filed.
        with pytest.raises(ClaimsChangedError) as changed:
            two.create_claim(
                "c2", record, "open", b"s2", lease=ClaimLease("run-2", 30.0), earlier=[]
            )
        assert isinstance(changed.value, ClaimBusyError) and changed.value.code == "claim-busy"
        assert [c.claim_id for c in one.claims_for_record(record)] == ["c1"]  # nothing filed
        # Named, but open (a failed claim run again meanwhile, spec §10.7): not yet.
        with pytest.raises(ClaimsChangedError):
            two.create_claim(
                "c2", record, "open", b"s2", lease=ClaimLease("run-2", 30.0), earlier=["c1"]
            )
        one.save_claim("c1", record, "failed", b"s1", lease=lease)
        two.create_claim(
            "c2", record, "open", b"s2", lease=ClaimLease("run-2", 30.0), earlier=["c1"]
        )
        two.create_claim("c3", record, "open", b"s3", lease=ClaimLease("run-3", 30.0))  # no check
        assert [c.claim_id for c in one.claims_for_record(record)] == ["c1", "c2", "c3"]
        assert one.load_transcript("c1") == b"header|"
        # Created held: another run may not take it while the lease runs.
        with pytest.raises(ClaimBusyError):
            two.acquire_claim("c1", ClaimLease("run-4", 30.0))
        with pytest.raises(StateError):  # an id is filed once
            two.create_claim("c1", record, "open", b"again", lease=ClaimLease("run-5", 30.0))


def test_a_failed_claim_runs_again_only_while_no_claim_followed_it(open_store):
    """restart_claim (spec §10.7): atomic with every filing, so no fresh claim misses it."""
    with open_store() as one, open_store() as two:
        one.commit(EscrowRequest(root=PAIRS.root, n_pairs=len(PAIRS), item_kind="image", owner="o"))
        record = one.size() - 1
        first, second = ClaimLease("run-1", 30.0), ClaimLease("run-2", 30.0)
        one.create_claim("f1", record, "failed", b"s1", b"header|", lease=first)
        with pytest.raises(UnknownClaimError):
            two.restart_claim("f0", lease=second)
        with pytest.raises(ClaimBusyError):  # the run that failed it still holds it
            two.restart_claim("f1", lease=second)
        one.release_claim("f1", first)
        assert two.acquire_claim("f1", second) is not None
        two.restart_claim("f1", lease=second)
        assert one.load_claim("f1").status == "open"
        with pytest.raises(StateError, match="is open"):
            two.restart_claim("f1", lease=second)
        # A claim on fresh pairs that read f1 failed cannot be filed once f1 runs again.
        with pytest.raises(ClaimsChangedError):
            one.create_claim("c2", record, "open", b"s2", lease=first, earlier=["f1"])
        two.save_claim("f1", record, "failed", b"s1", lease=second)
        one.create_claim("c2", record, "open", b"s2", lease=first, earlier=["f1"])
        # Filed after it: f1 can no longer run again, and nothing changes.
        with pytest.raises(StateError, match="1 claim"):
            two.restart_claim("f1", lease=second)
        assert [(c.claim_id, c.status) for c in one.claims_for_record(record)] == [
            ("f1", "failed"),
            ("c2", "open"),
        ]
