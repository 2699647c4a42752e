"""The escrow store's behaviour, run on every backend: SQLite always, PostgreSQL when available.

PostgreSQL runs when ``TWINAUDIT_TEST_PG_DSN`` names a reachable server (CI starts one
with ``scripts/ci-postgres.sh``); otherwise its cases are skipped with the reason.
Each PostgreSQL case gets a fresh schema, dropped afterwards.
"""

from __future__ import annotations

import functools
import os
import secrets
import sqlite3
import threading
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from protocol.errors import InputError, LimitExceededError, ParameterError, StateError
from protocol.escrow_messages import (
    EscrowRequest,
    Receipt,
    open_receipt,
    verify_checkpoint,
    verify_log_extension,
    verify_receipt,
)
from protocol.merkle import EMPTY_ROOT, MerkleTree
from verifier.escrow.sql_store import SqlEscrowStore
from verifier.escrow.sqlite_store import SqliteEscrowStore
from verifier.escrow.store import (
    MAX_TRANSCRIPT_BYTES,
    ClaimSummary,
    RootAlreadyEscrowedError,
    UnknownClaimError,
    UnknownRecordError,
)

KEY = Ed25519PrivateKey.from_private_bytes(bytes(range(32)))
OTHER = Ed25519PrivateKey.from_private_bytes(bytes(range(1, 33)))
PG_DSN_VAR = "TWINAUDIT_TEST_PG_DSN"


def _request(n: int = 0, **overrides: Any) -> EscrowRequest:
    fields: dict[str, Any] = {
        "root": n.to_bytes(32, "big"),
        "n_pairs": 100 + n,
        "item_kind": "image",
        "owner": f"owner-{n}",
    }
    fields.update(overrides)
    return EscrowRequest(**fields)


def _verify(store: SqlEscrowStore, receipt_json: bytes, request: EscrowRequest) -> Receipt:
    position = open_receipt(receipt_json, store.public_key)
    return verify_receipt(
        receipt_json,
        store.public_key,
        expected_root=request.root,
        expected_n_pairs=request.n_pairs,
        expected_item_kind=request.item_kind,
        inclusion_proof=store.inclusion_proof(position.entry.index, position.log_size),
        expected_owner=request.owner,
    )


# --- Backends ---------------------------------------------------------------------------


class Backend:
    """Opens stores on one database and can run raw SQL on it (to simulate corruption)."""

    name = "abstract"

    def open(
        self, key: Ed25519PrivateKey = KEY, clock: Callable[[], datetime] | None = None
    ) -> SqlEscrowStore:
        raise NotImplementedError

    def raw(self, statement: str, params: tuple[Any, ...] = ()) -> None:
        raise NotImplementedError

    def cleanup(self) -> None:
        pass


class SqliteBackend(Backend):
    name = "sqlite"

    def __init__(self, path: Path) -> None:
        self.path = path

    def open(self, key=KEY, clock=None):
        return SqliteEscrowStore(self.path, key, clock=clock)

    def raw(self, statement, params=()):
        conn = sqlite3.connect(self.path, isolation_level=None)
        try:
            conn.execute(statement, params)
        finally:
            conn.close()


class PostgresBackend(Backend):
    name = "postgres"

    def __init__(self, dsn: str) -> None:
        self.dsn = dsn
        self.schema = f"escrow_test_{uuid.uuid4().hex[:12]}"

    def open(self, key=KEY, clock=None):
        from verifier.escrow.postgres_store import PostgresEscrowStore

        return PostgresEscrowStore(self.dsn, key, schema=self.schema, clock=clock)

    def raw(self, statement, params=()):
        import psycopg

        with psycopg.connect(self.dsn, autocommit=True) as conn:
            conn.execute(f"SET search_path TO {self.schema}")
            conn.execute(statement.replace("?", "%s"), params)

    def cleanup(self):
        import psycopg

        with psycopg.connect(self.dsn, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA IF EXISTS {self.schema} CASCADE")


@functools.cache
def _probe_postgres() -> tuple[str | None, str]:
    """Return ``(dsn, "")`` for a reachable test server, else ``(None, why not)``; once."""
    dsn = os.environ.get(PG_DSN_VAR)
    if not dsn:
        return None, f"PostgreSQL tests need {PG_DSN_VAR} (see scripts/ci-postgres.sh)"
    try:
        import psycopg
    except ImportError:
        return None, "PostgreSQL tests need psycopg (pip install -e '.[postgres]')"
    try:
        psycopg.connect(dsn, connect_timeout=3).close()
    except psycopg.Error as exc:
        return None, f"PostgreSQL at {PG_DSN_VAR} is unreachable: {exc}"
    return dsn, ""


def postgres_dsn() -> str:
    """Return the test server's DSN, or skip (with the reason) when there is none."""
    dsn, why = _probe_postgres()
    if dsn is None:
        pytest.skip(why)
    return dsn


@pytest.fixture(params=["sqlite", "postgres"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    chosen: Backend
    if request.param == "sqlite":
        chosen = SqliteBackend(tmp_path / "escrow.db")
    else:
        chosen = PostgresBackend(postgres_dsn())
    try:
        yield chosen
    finally:
        chosen.cleanup()


@pytest.fixture
def store(backend: Backend) -> Iterator[SqlEscrowStore]:
    opened = backend.open()
    try:
        yield opened
    finally:
        opened.close()


# --- The log ----------------------------------------------------------------------------


def test_commit_returns_a_receipt_that_verifies(store):
    request = _request(7)
    receipt = _verify(store, store.commit(request), request)
    assert receipt.entry.index == 0
    assert receipt.log_size == 1
    entry, rho = store.entry(0)
    assert entry == receipt.entry
    assert rho == receipt.rho
    assert store.size() == 1


def test_indices_are_sequential(store):
    indices = [open_receipt(store.commit(_request(n)), KEY.public_key()).entry.index
               for n in range(5)]  # fmt: skip
    assert indices == [0, 1, 2, 3, 4]
    rhos = {store.entry(i)[1] for i in range(5)}
    assert len(rhos) == 5  # new randomness for every record
    assert store.size() == 5


# Issue #22 D10: escrowing a root again drew a new rho each time, so an owner could
# pick among many publication bit strings for one commitment. Spec §9.1: refused.
def test_a_root_already_escrowed_is_refused_and_nothing_is_stored(backend):
    with backend.open() as store:
        store.commit(_request(1))
        store.commit(_request(2))
        checkpoint = store.checkpoint()
        for again in (_request(1), _request(1, owner="someone else", n_pairs=7)):
            with pytest.raises(RootAlreadyEscrowedError, match="record 0") as refused:
                store.commit(again)
            assert refused.value.index == 0
            assert store.entry(0)[1].hex() not in str(refused.value)  # never rho again
        assert store.size() == 2
        assert store.checkpoint() == checkpoint
    with backend.open() as reopened:  # the roots are rebuilt from the stored log
        with pytest.raises(RootAlreadyEscrowedError):
            reopened.commit(_request(2))
        assert open_receipt(reopened.commit(_request(3)), KEY.public_key()).entry.index == 2


def test_one_root_sent_at_once_to_two_stores_is_escrowed_once(backend):
    """Concurrent commits of one root, through two instances on one database (as two
    replicas would), and in one group-commit batch: exactly one record."""
    with backend.open() as first, backend.open() as second:
        outcomes: list[object] = []
        lock = threading.Lock()
        start = threading.Barrier(8)

        def work(store: SqlEscrowStore) -> None:
            start.wait()
            try:
                outcome: object = open_receipt(store.commit(_request(9)), KEY.public_key())
            except RootAlreadyEscrowedError as exc:
                outcome = exc
            with lock:
                outcomes.append(outcome)

        workers = [threading.Thread(target=work, args=(s,)) for s in (first, second) * 4]
        for thread in workers:
            thread.start()
        for thread in workers:
            thread.join()
        receipts = [o for o in outcomes if not isinstance(o, RootAlreadyEscrowedError)]
        assert len(outcomes) == 8 and len(receipts) == 1
        assert first.size() == second.size() == 1
        assert {o.index for o in outcomes if isinstance(o, RootAlreadyEscrowedError)} == {0}


def test_clock_is_recorded_in_the_entry(backend):
    moment = datetime(2027, 3, 4, 5, 6, 7, 891, tzinfo=UTC)
    with backend.open(clock=lambda: moment) as store:
        receipt = open_receipt(store.commit(_request()), KEY.public_key())
        assert receipt.entry.time == "2027-03-04T05:06:07Z"
        checkpoint, _ = store.latest_checkpoint()
        assert checkpoint.time == "2027-03-04T05:06:07Z"


def test_checkpoints_and_consistency_between_any_two_sizes(store):
    checkpoints = [store.latest_checkpoint()]
    assert checkpoints[0][0].size == 0
    assert checkpoints[0][0].root == EMPTY_ROOT
    for n in range(9):
        store.commit(_request(n))
        checkpoints.append(store.latest_checkpoint())
    # One checkpoint per size: asking again returns the same signed bytes.
    assert store.checkpoint() == checkpoints[-1][1]
    for size, (checkpoint, signed) in enumerate(checkpoints):
        assert checkpoint.size == size
        assert verify_checkpoint(signed, KEY.public_key()) == checkpoint
    for old, _ in checkpoints:
        for new, _ in checkpoints[old.size :]:
            verify_log_extension(old, new, store.consistency_proof(old.size, new.size))


def test_log_matches_a_tree_rebuilt_from_the_entries(store):
    for n in range(6):
        store.commit(_request(n))
    tree = MerkleTree(store.entry(i)[0].encode() for i in range(6))
    assert store.latest_checkpoint()[0].root == tree.root()
    for index in range(6):
        assert store.inclusion_proof(index, 6) == tree.inclusion_proof(index, 6)


def test_reopening_restores_everything(backend):
    with backend.open() as store:
        receipts = [store.commit(_request(n)) for n in range(4)]
        checkpoint = store.checkpoint()
        store.commit(_request(9))
        store.save_claim("claim-1", 2, "opening", b"state-1")
        store.save_claim("claim-2", 2, "opening", b"state-2")
        store.finish_claim("claim-2", b"verdict", b"transcript")
        entries = [store.entry(i) for i in range(5)]
        latest = store.checkpoint()
    with backend.open() as store:
        assert store.size() == 5
        assert [store.entry(i) for i in range(5)] == entries
        assert store.checkpoint() == latest
        old = verify_checkpoint(checkpoint, KEY.public_key())
        new = verify_checkpoint(latest, KEY.public_key())
        verify_log_extension(old, new, store.consistency_proof(old.size, new.size))
        for n, receipt in enumerate(receipts):
            _verify(store, receipt, _request(n))
        assert store.load_claim("claim-1") == (2, "opening", b"state-1")
        assert store.get_verdict("claim-2") == (b"verdict", b"transcript")
        assert [c.claim_id for c in store.claims_for_record(2)] == ["claim-1", "claim-2"]
        assert open_receipt(store.commit(_request(5)), KEY.public_key()).entry.index == 5


def test_reopening_with_another_key_is_refused(backend):
    with backend.open() as store:
        store.commit(_request())
    with pytest.raises(StateError):
        backend.open(key=OTHER)


@pytest.mark.parametrize(
    "corruption",
    [
        "UPDATE escrow_entries SET entry = ? WHERE idx = 1",
        "DELETE FROM escrow_entries WHERE idx = 2",
        "UPDATE escrow_head SET root = ? WHERE id = 1",
        "UPDATE escrow_head SET size = 2 WHERE id = 1",
        "UPDATE escrow_checkpoints SET root = ?",
    ],
    ids=["entry changed", "entry deleted", "head root", "head size", "checkpoint root"],
)
def test_corruption_is_detected_on_open(backend, corruption):
    with backend.open() as store:
        for n in range(3):
            store.commit(_request(n))
        store.checkpoint()
    backend.raw(corruption, (b"\x00" * 32,) if "?" in corruption else ())
    with pytest.raises(StateError):
        backend.open()


def test_stored_entry_that_does_not_decode_is_a_state_error(backend):
    with backend.open() as store:
        store.commit(_request())
        backend.raw("UPDATE escrow_entries SET rho = ? WHERE idx = 0", (bytes(32),))
        with pytest.raises(StateError):
            store.entry(0)


def test_bad_arguments_change_nothing(store):
    store.commit(_request())
    with pytest.raises(InputError):
        store.commit(_request().to_value())  # type: ignore[arg-type]
    with pytest.raises(InputError):
        store.entry(-1)
    with pytest.raises(InputError):
        store.entry(True)
    with pytest.raises(UnknownRecordError):
        store.entry(1)
    with pytest.raises(UnknownRecordError):
        store.inclusion_proof(0, 2)
    with pytest.raises(ParameterError):
        store.inclusion_proof(1, 1)
    with pytest.raises(UnknownRecordError):
        store.consistency_proof(0, 2)
    with pytest.raises(ParameterError):
        store.consistency_proof(1, 0)
    assert store.size() == 1


def test_closed_store_refuses_everything(backend):
    store = backend.open()
    store.close()
    store.close()  # idempotent
    for call in (store.size, store.checkpoint, lambda: store.commit(_request())):
        with pytest.raises(StateError):
            call()


def test_concurrent_commits_get_distinct_indices(store):
    threads, per_thread = 8, 25
    receipts: list[tuple[int, bytes]] = []
    lock = threading.Lock()

    def work(worker: int) -> None:
        for n in range(worker * per_thread, (worker + 1) * per_thread):
            signed = store.commit(_request(n))
            with lock:
                receipts.append((n, signed))

    workers = [threading.Thread(target=work, args=(w,)) for w in range(threads)]
    for thread in workers:
        thread.start()
    for thread in workers:
        thread.join()
    total = threads * per_thread
    assert store.size() == total
    indices = sorted(open_receipt(r, KEY.public_key()).entry.index for _, r in receipts)
    assert indices == list(range(total))
    for n, signed in receipts:
        _verify(store, signed, _request(n))
    tree = MerkleTree(store.entry(i)[0].encode() for i in range(total))
    assert store.latest_checkpoint()[0].root == tree.root()


def test_two_stores_on_one_database_share_the_log(backend):
    """Two arbiter instances (as two processes would) never assign the same index."""
    with backend.open() as first, backend.open() as second:
        receipts: list[bytes] = []
        lock = threading.Lock()

        def work(store: SqlEscrowStore, worker: int) -> None:
            for n in range(worker * 15, (worker + 1) * 15):
                signed = store.commit(_request(n))
                with lock:
                    receipts.append(signed)

        workers = [
            threading.Thread(target=work, args=(s, w)) for w, s in enumerate((first, second) * 2)
        ]
        for thread in workers:
            thread.start()
        for thread in workers:
            thread.join()
        assert first.size() == second.size() == 60
        indices = sorted(open_receipt(r, KEY.public_key()).entry.index for r in receipts)
        assert indices == list(range(60))
        assert first.checkpoint() == second.checkpoint()
        for signed in receipts:
            receipt = open_receipt(signed, KEY.public_key())
            index = receipt.entry.index
            assert first.inclusion_proof(index, 60) == second.inclusion_proof(index, 60)


# --- Claims -----------------------------------------------------------------------------


def test_claims_save_load_finish(store):
    for n in range(3):
        store.commit(_request(n))
    assert store.load_claim("c1") is None
    store.save_claim("c1", 1, "opening", b"s0")
    store.save_claim("c1", 1, "querying", b"s1")
    assert store.load_claim("c1") == (1, "querying", b"s1")
    store.save_claim("c2", 1, "opening", b"")
    store.save_claim("c3", 2, "opening", b"x")
    assert store.get_verdict("c1") is None
    store.finish_claim("c1", b"signed verdict", b"transcript bytes")
    assert store.get_verdict("c1") == (b"signed verdict", b"transcript bytes")
    assert store.load_claim("c1") == (1, "finished", b"s1")
    assert store.claims_for_record(1) == [
        ClaimSummary("c1", 1, "finished", True),
        ClaimSummary("c2", 1, "opening", False),
    ]
    assert store.claims_for_record(0) == []


def test_transcript_parts_are_appended_with_the_state_and_folded_at_finish(store):
    store.commit(_request())
    assert store.load_transcript("c1") is None
    store.save_claim("c1", 0, "open", b"s0", b"header|")
    store.save_claim("c1", 0, "open", b"s1")  # no new records
    store.save_claim("c1", 0, "open", b"s2", b"window-0|")
    store.save_claim("c2", 0, "open", b"t0", b"other claim|")
    assert store.load_transcript("c1") == b"header|window-0|"
    assert store.load_claim("c1") == (0, "open", b"s2")
    store.finish_claim("c1", b"verdict", b"header|window-0|")
    assert store.get_verdict("c1") == (b"verdict", b"header|window-0|")
    assert store.load_transcript("c1") == b""  # parts folded into the finished claim
    assert store.load_transcript("c2") == b"other claim|"


def test_a_part_over_the_transcript_cap_changes_nothing(store, monkeypatch):
    store.commit(_request())
    store.save_claim("c1", 0, "open", b"s0", b"12345")
    monkeypatch.setattr("verifier.escrow.sql_store.MAX_TRANSCRIPT_BYTES", 8)
    with pytest.raises(LimitExceededError):
        store.save_claim("c1", 0, "open", b"s1", b"6789")
    assert store.load_claim("c1") == (0, "open", b"s0")
    assert store.load_transcript("c1") == b"12345"


def test_claim_rules(store):
    store.commit(_request())
    store.commit(_request(1))
    store.save_claim("c1", 0, "opening", b"s")
    with pytest.raises(UnknownRecordError):
        store.save_claim("c2", 2, "opening", b"s")
    with pytest.raises(StateError):
        store.save_claim("c1", 1, "opening", b"s")  # another record
    with pytest.raises(ParameterError):
        store.save_claim("c1", 0, "finished", b"s")  # only finish_claim finishes
    with pytest.raises(InputError):
        store.save_claim("bad id!", 0, "opening", b"s")
    with pytest.raises(InputError):
        store.save_claim("c1", 0, "Opening", b"s")
    with pytest.raises(InputError):
        store.save_claim("c1", 0, "opening", "text")  # type: ignore[arg-type]
    with pytest.raises(UnknownClaimError):
        store.finish_claim("nobody", b"v", b"t")
    store.finish_claim("c1", b"v", b"t")
    with pytest.raises(StateError):
        store.finish_claim("c1", b"v2", b"t2")
    with pytest.raises(StateError):
        store.save_claim("c1", 0, "opening", b"s")
    assert store.get_verdict("c1") == (b"v", b"t")
    assert store.load_claim("c2") is None


def test_rejected_finish_leaves_the_claim_as_it_was(store, monkeypatch):
    store.commit(_request())
    store.save_claim("c1", 0, "querying", b"s")
    monkeypatch.setattr("verifier.escrow.sql_store.MAX_TRANSCRIPT_BYTES", 8)
    with pytest.raises(LimitExceededError):
        store.finish_claim("c1", b"verdict", b"a transcript above the cap")
    assert store.load_claim("c1") == (0, "querying", b"s")
    assert store.get_verdict("c1") is None
    assert MAX_TRANSCRIPT_BYTES > 8


def test_failed_finish_transaction_rolls_back(backend):
    """A failure between the statements of finish_claim leaves nothing half-written."""
    with backend.open() as store:
        store.commit(_request())
        store.save_claim("c1", 0, "querying", b"s")
        cursor = store._cur  # the store's own cursor: fail its UPDATE
        real_execute = cursor.execute

        def failing(sql: str, params: Any = ()) -> Any:
            if sql.startswith("UPDATE escrow_claims SET status = ?, finished = 1"):
                real_execute(sql, params)
                raise RuntimeError("crash after the update, before commit")
            return real_execute(sql, params)

        store._cur = _Proxy(cursor, failing)
        with pytest.raises(RuntimeError):
            store.finish_claim("c1", b"v", b"t")
        store._cur = cursor
        assert store.load_claim("c1") == (0, "querying", b"s")
        assert store.get_verdict("c1") is None


def test_failed_append_transaction_leaves_no_entry(backend):
    with backend.open() as store:
        store.commit(_request())
        cursor = store._cur
        real_execute = cursor.execute

        def failing(sql: str, params: Any = ()) -> Any:
            result = real_execute(sql, params)
            if sql.startswith("UPDATE escrow_head"):
                raise RuntimeError("crash after the head update, before commit")
            return result

        store._cur = _Proxy(cursor, failing)
        with pytest.raises(RuntimeError):
            store.commit(_request(1))
        store._cur = cursor
        assert store.size() == 1
        receipt = store.commit(_request(2))
        assert _verify(store, receipt, _request(2)).entry.index == 1
    with backend.open() as store:
        assert store.size() == 2


class _Proxy:
    """A cursor whose ``execute`` is replaced; everything else goes to the real one."""

    def __init__(self, cursor: Any, execute: Callable[..., Any]) -> None:
        self._cursor = cursor
        self.execute = execute

    def __getattr__(self, name: str) -> Any:
        return getattr(self._cursor, name)


def test_sqlite_durability_settings(tmp_path):
    path = tmp_path / "escrow.db"
    with SqliteEscrowStore(path, KEY) as store:
        assert store._conn is not None
        assert store._conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert store._conn.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL
    assert path.stat().st_mode & 0o077 == 0  # it holds every rho
    with pytest.raises(InputError):
        SqliteEscrowStore(":memory:", KEY)


def test_rho_is_fresh_randomness(store, monkeypatch):
    drawn: list[int] = []
    real = secrets.token_bytes

    def spy(n: int) -> bytes:
        drawn.append(n)
        return real(n)

    monkeypatch.setattr("verifier.escrow.sql_store.secrets.token_bytes", spy)
    store.commit(_request())
    assert drawn == [32]


def test_postgres_store_reconnects_after_the_server_drops_it():
    import psycopg

    backend = PostgresBackend(postgres_dsn())
    store = backend.open()
    try:
        first = open_receipt(store.commit(_request(1)), KEY.public_key())
        pid = store._conn.info.backend_pid
        with psycopg.connect(backend.dsn, autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
        # The next transaction finds the connection gone, reconnects and carries on.
        second = open_receipt(store.commit(_request(2)), KEY.public_key())
        assert store._conn.info.backend_pid != pid
        assert (first.entry.index, second.entry.index) == (0, 1)
        assert store.size() == 2
        assert store.entry(0) == (first.entry, first.rho)
    finally:
        store.close()
        backend.cleanup()
