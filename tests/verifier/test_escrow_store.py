"""The escrow store's behaviour, run on every backend: SQLite always, PostgreSQL when available.

PostgreSQL runs when ``TWINAUDIT_TEST_PG_DSN`` names a reachable server (CI starts one
with ``scripts/ci-postgres.sh``); otherwise its cases are skipped with the reason.
Each PostgreSQL case gets a fresh schema, dropped afterwards.
"""

from __future__ import annotations

import secrets
import sqlite3
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from tests.support.keys import KEY, OTHER
from tests.support.postgres import postgres_dsn
from twinaudit.protocol.errors import (
    ClaimBusyError,
    InputError,
    LimitExceededError,
    ParameterError,
    RootAlreadyEscrowedError,
    StateError,
    UnknownClaimError,
    UnknownRecordError,
)
from twinaudit.protocol.escrow_messages import (
    EscrowRequest,
    Receipt,
    make_entry,
    open_receipt,
    verify_checkpoint,
    verify_log_extension,
    verify_receipt,
)
from twinaudit.protocol.merkle import EMPTY_ROOT, MerkleTree
from twinaudit.verifier.escrow.log_check import check_log
from twinaudit.verifier.escrow.sql_store import SqlEscrowStore
from twinaudit.verifier.escrow.sqlite_store import SqliteEscrowStore
from twinaudit.verifier.escrow.store import (
    MAX_TRANSCRIPT_BYTES,
    ClaimLease,
    ClaimSummary,
    StoredClaim,
    StoredEntry,
    StoredVerdict,
)


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

    def scalar(self, query: str) -> Any:
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

    def scalar(self, query):
        conn = sqlite3.connect(self.path, isolation_level=None)
        try:
            return conn.execute(query).fetchone()[0]
        finally:
            conn.close()


class PostgresBackend(Backend):
    name = "postgres"

    def __init__(self, dsn: str) -> None:
        self.dsn = dsn
        self.schema = f"escrow_test_{uuid.uuid4().hex[:12]}"

    def open(self, key=KEY, clock=None):
        from twinaudit.verifier.escrow.postgres_store import PostgresEscrowStore

        return PostgresEscrowStore(self.dsn, key, schema=self.schema, clock=clock)

    def raw(self, statement, params=()):
        import psycopg

        with psycopg.connect(self.dsn, autocommit=True) as conn:
            conn.execute(f"SET search_path TO {self.schema}")
            conn.execute(statement.replace("?", "%s"), params)

    def scalar(self, query):
        import psycopg

        with psycopg.connect(self.dsn, autocommit=True) as conn:
            conn.execute(f"SET search_path TO {self.schema}")
            return conn.execute(query).fetchone()[0]

    def cleanup(self):
        import psycopg

        with psycopg.connect(self.dsn, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA IF EXISTS {self.schema} CASCADE")


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
    stored = store.entry(0)
    assert stored.entry == receipt.entry
    assert stored.rho == receipt.rho
    assert store.size() == 1


def test_indices_are_sequential(store):
    indices = [open_receipt(store.commit(_request(n)), KEY.public_key()).entry.index
               for n in range(5)]  # fmt: skip
    assert indices == [0, 1, 2, 3, 4]
    rhos = {store.entry(i).rho for i in range(5)}
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
            assert store.entry(0).rho.hex() not in str(refused.value)  # never rho again
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
        checkpoint = store.latest_checkpoint().checkpoint
        assert checkpoint.time == "2027-03-04T05:06:07Z"


def test_checkpoints_and_consistency_between_any_two_sizes(store):
    checkpoints = [store.latest_checkpoint()]
    assert checkpoints[0].checkpoint.size == 0
    assert checkpoints[0].checkpoint.root == EMPTY_ROOT
    for n in range(9):
        store.commit(_request(n))
        checkpoints.append(store.latest_checkpoint())
    # One checkpoint per size: asking again returns the same signed bytes.
    assert store.checkpoint() == checkpoints[-1].envelope
    for size, signed in enumerate(checkpoints):
        assert signed.checkpoint.size == size
        assert verify_checkpoint(signed.envelope, KEY.public_key()) == signed.checkpoint
    heads = [signed.checkpoint for signed in checkpoints]
    for old in heads:
        for new in heads[old.size :]:
            verify_log_extension(old, new, store.consistency_proof(old.size, new.size))


def test_log_matches_a_tree_rebuilt_from_the_entries(store):
    for n in range(6):
        store.commit(_request(n))
    tree = MerkleTree(store.entry(i).entry.encode() for i in range(6))
    assert store.latest_checkpoint().checkpoint.root == tree.root()
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
        assert store.load_claim("claim-1") == StoredClaim(2, "opening", b"state-1")
        assert store.get_verdict("claim-2") == StoredVerdict(b"verdict", b"transcript")
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
        "DELETE FROM escrow_entries WHERE idx = 2",
        "UPDATE escrow_head SET root = ? WHERE id = 1",
        "UPDATE escrow_head SET size = 2 WHERE id = 1",
        "UPDATE escrow_checkpoints SET root = ?",
        "UPDATE escrow_tree SET hash = ? WHERE height = 1 AND idx = 0",
        "DELETE FROM escrow_tree WHERE height = 0 AND idx = 2",
    ],
    ids=[
        "last entry deleted",
        "head root",
        "head size",
        "checkpoint root",
        "frontier node",
        "frontier node deleted",
    ],
)
def test_corruption_of_what_an_open_reads_is_detected_on_open(backend, corruption):
    """Opening reads the head, the last entry's index, the frontier and the last checkpoint."""
    with backend.open() as store:
        for n in range(3):
            store.commit(_request(n))
        store.checkpoint()
    backend.raw(corruption, (b"\x00" * 32,) if "?" in corruption else ())
    with pytest.raises(StateError, match=r"corrupt|head says|rolled back"):
        backend.open()


def _entry_bytes(n: int) -> bytes:
    """A well-formed entry for index 1 that escrows another root than the stored one."""
    return make_entry(
        _request(n), index=1, time=datetime(2026, 1, 1, tzinfo=UTC), rho=bytes(32)
    ).encode()


@pytest.mark.parametrize(
    ("corruption", "params", "found_by_entry"),
    [
        ("UPDATE escrow_entries SET entry = ? WHERE idx = 1", "entry", True),
        ("UPDATE escrow_entries SET rho = ? WHERE idx = 1", "zeros", True),
        ("UPDATE escrow_tree SET hash = ? WHERE height = 0 AND idx = 0", "zeros", True),
        ("UPDATE escrow_tree SET hash = ? WHERE height = 0 AND idx = 3", "zeros", False),
        ("DELETE FROM escrow_roots WHERE idx = 1", None, False),
        ("INSERT INTO escrow_tree (height, idx, hash) VALUES (5, 9, ?)", "zeros", False),
        ("UPDATE escrow_checkpoints SET envelope = ? WHERE size = 2", "envelope", False),
    ],
    ids=[
        "entry",
        "rho",
        "leaf node",
        "unread leaf node",
        "root index",
        "stray node",
        "checkpoint signature",
    ],
)
def test_corruption_open_does_not_read_is_found_by_the_full_check(
    backend, corruption, params, found_by_entry
):
    """What an open does not read, the full check does; an entry read checks its own path."""
    with backend.open() as store:
        for n in range(4):
            store.commit(_request(n))
            store.checkpoint()
        sound = check_log(store.db, store.public_key)
        assert (sound.entries, sound.nodes, sound.checkpoints) == (4, 7, 4)
        with store.db.transaction(write=False) as cur:
            cur.execute("SELECT envelope FROM escrow_checkpoints WHERE size = 3")
            envelope = bytes(cur.fetchone()[0])  # a valid signature, over another size
    values = {
        "entry": (_entry_bytes(50),),
        "zeros": (b"\x00" * 32,),
        "envelope": (envelope,),
        None: (),
    }[params]
    backend.raw(corruption, values)
    with backend.open() as store:  # the head, frontier and last checkpoint are intact
        with pytest.raises(StateError, match="corrupt"):
            check_log(store.db, store.public_key)
        if found_by_entry:
            with pytest.raises(StateError):
                store.entry(1)


def test_proofs_from_stored_nodes_match_the_reference_tree(store):
    """Every inclusion and consistency proof of every size up to 19 entries."""
    requests = [_request(n) for n in range(19)]
    tree = MerkleTree()
    for request in requests:
        store.commit(request)
        tree.append(store.entry(tree.size).entry.encode())
        size = tree.size
        assert verify_checkpoint(store.checkpoint(), KEY.public_key()).root == tree.root()
        for index in range(size):
            assert store.inclusion_proof(index, size) == tree.inclusion_proof(index, size)
        for old in range(size + 1):
            assert store.consistency_proof(old, size) == tree.consistency_proof(old, size)
    assert check_log(store.db, store.public_key).entries == 19


def test_a_schema_4_database_is_upgraded_with_its_tree_and_root_index(backend):
    """A store made before the tree tables opens once they are filled from its entries.

    The filled tables give the proofs and the one-record-per-root rule, and the full
    check passes; a schema 4 log whose entries do not hash to its head is refused, and
    stays at schema 4.
    """
    with backend.open() as store:
        receipts = [store.commit(_request(n)) for n in range(11)]
        checkpoint = store.checkpoint()
    backend.raw("DROP TABLE escrow_tree")
    backend.raw("DROP TABLE escrow_roots")
    backend.raw("UPDATE escrow_meta SET value = '4' WHERE name = 'schema'")
    with backend.open() as store:
        assert store.checkpoint() == checkpoint
        for n, receipt in enumerate(receipts):
            _verify(store, receipt, _request(n))
        with pytest.raises(RootAlreadyEscrowedError):
            store.commit(_request(7))
        assert check_log(store.db, store.public_key).entries == 11
    backend.raw("DROP TABLE escrow_tree")
    backend.raw("DROP TABLE escrow_roots")
    backend.raw("UPDATE escrow_meta SET value = '4' WHERE name = 'schema'")
    backend.raw("UPDATE escrow_entries SET entry = ? WHERE idx = 1", (_entry_bytes(50),))
    with pytest.raises(StateError, match="corrupt"):
        backend.open()
    assert backend.scalar("SELECT value FROM escrow_meta WHERE name = 'schema'") == "4"


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
    tree = MerkleTree(store.entry(i).entry.encode() for i in range(total))
    assert store.latest_checkpoint().checkpoint.root == tree.root()


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
    assert store.load_claim("c1") == StoredClaim(1, "querying", b"s1")
    store.save_claim("c2", 1, "opening", b"")
    store.save_claim("c3", 2, "opening", b"x")
    assert store.get_verdict("c1") is None
    store.finish_claim("c1", b"signed verdict", b"transcript bytes")
    assert store.get_verdict("c1") == StoredVerdict(b"signed verdict", b"transcript bytes")
    assert store.load_claim("c1") == StoredClaim(1, "finished", b"s1", finished=True)
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
    assert store.load_transcript_start("c1") == b"header|"  # the part saved first
    assert store.load_transcript_start("c3") is None
    assert store.load_claim("c1") == StoredClaim(0, "open", b"s2")
    store.finish_claim("c1", b"verdict", b"header|window-0|")
    assert store.get_verdict("c1") == StoredVerdict(b"verdict", b"header|window-0|")
    assert store.load_transcript("c1") == b""  # parts folded into the finished claim
    assert store.load_transcript("c2") == b"other claim|"


def test_a_part_over_the_transcript_cap_changes_nothing(store, monkeypatch):
    store.commit(_request())
    store.save_claim("c1", 0, "open", b"s0", b"12345")
    monkeypatch.setattr("twinaudit.verifier.escrow.claim_store.MAX_TRANSCRIPT_BYTES", 8)
    with pytest.raises(LimitExceededError):
        store.save_claim("c1", 0, "open", b"s1", b"6789")
    assert store.load_claim("c1") == StoredClaim(0, "open", b"s0")
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
    assert store.get_verdict("c1") == StoredVerdict(b"v", b"t")
    assert store.load_claim("c2") is None


def test_rejected_finish_leaves_the_claim_as_it_was(store, monkeypatch):
    store.commit(_request())
    store.save_claim("c1", 0, "querying", b"s")
    monkeypatch.setattr("twinaudit.verifier.escrow.claim_store.MAX_TRANSCRIPT_BYTES", 8)
    with pytest.raises(LimitExceededError):
        store.finish_claim("c1", b"verdict", b"a transcript above the cap")
    assert store.load_claim("c1") == StoredClaim(0, "querying", b"s")
    assert store.get_verdict("c1") is None
    assert MAX_TRANSCRIPT_BYTES > 8


def test_failed_finish_transaction_rolls_back(backend):
    """A failure between the statements of finish_claim leaves nothing half-written."""
    with backend.open() as store:
        store.commit(_request())
        store.save_claim("c1", 0, "querying", b"s")
        cursor = store.db._cur  # the store's own cursor: fail its UPDATE
        real_execute = cursor.execute

        def failing(sql: str, params: Any = ()) -> Any:
            if sql.startswith("UPDATE escrow_claims SET status = ?, finished = 1"):
                real_execute(sql, params)
                raise RuntimeError("crash after the update, before commit")
            return real_execute(sql, params)

        store.db._cur = _Proxy(cursor, failing)
        with pytest.raises(RuntimeError):
            store.finish_claim("c1", b"v", b"t")
        store.db._cur = cursor
        assert store.load_claim("c1") == StoredClaim(0, "querying", b"s")
        assert store.get_verdict("c1") is None


def test_failed_append_transaction_leaves_no_entry(backend):
    with backend.open() as store:
        store.commit(_request())
        cursor = store.db._cur
        real_execute = cursor.execute

        def failing(sql: str, params: Any = ()) -> Any:
            result = real_execute(sql, params)
            if sql.startswith("UPDATE escrow_head"):
                raise RuntimeError("crash after the head update, before commit")
            return result

        store.db._cur = _Proxy(cursor, failing)
        with pytest.raises(RuntimeError):
            store.commit(_request(1))
        store.db._cur = cursor
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
        assert store.db._conn is not None
        assert store.db._conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert store.db._conn.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL
    assert path.stat().st_mode & 0o077 == 0  # it holds every rho
    with pytest.raises(InputError):
        SqliteEscrowStore(":memory:", KEY)


def test_rho_is_fresh_randomness(store, monkeypatch):
    drawn: list[int] = []
    real = secrets.token_bytes

    def spy(n: int) -> bytes:
        drawn.append(n)
        return real(n)

    monkeypatch.setattr("twinaudit.verifier.escrow.escrow_log.secrets.token_bytes", spy)
    store.commit(_request())
    assert drawn == [32]


def test_postgres_store_reconnects_after_the_server_drops_it():
    import psycopg

    backend = PostgresBackend(postgres_dsn())
    store = backend.open()
    try:
        first = open_receipt(store.commit(_request(1)), KEY.public_key())
        pid = store.db._conn.info.backend_pid
        with psycopg.connect(backend.dsn, autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
        # The next transaction finds the connection gone, reconnects and carries on.
        second = open_receipt(store.commit(_request(2)), KEY.public_key())
        assert store.db._conn.info.backend_pid != pid
        assert (first.entry.index, second.entry.index) == (0, 1)
        assert store.size() == 2
        assert store.entry(0) == StoredEntry(first.entry, first.rho)
    finally:
        store.close()
        backend.cleanup()


# --- Claim leases (replicas on one database) --------------------------------------------


def _lease(name: str, duration_s: float = 30.0) -> ClaimLease:
    return ClaimLease(f"replica-{name}", duration_s)


def test_one_lease_holder_at_a_time_across_two_stores(backend):
    """Two arbiter processes on one database: a claim is held by one run at a time."""
    a, b = _lease("a"), _lease("b")
    with backend.open() as first, backend.open() as second:
        first.commit(_request())
        first.save_claim("c1", 0, "open", b"s0", b"header|", lease=a)  # created held by a
        assert second.acquire_claim("nobody", b) is None
        with pytest.raises(ClaimBusyError) as busy:
            second.acquire_claim("c1", b)
        assert busy.value.code == "claim-busy" and 0 < busy.value.retry_after_s <= 30
        with pytest.raises(ClaimBusyError):  # no write without the lease either
            second.save_claim("c1", 0, "open", b"stolen", b"x|", lease=b)
        with pytest.raises(ClaimBusyError):
            second.save_claim("c1", 0, "open", b"stolen")
        with pytest.raises(ClaimBusyError):
            second.finish_claim("c1", b"v", b"t", lease=b)
        assert second.load_claim("c1") == StoredClaim(0, "open", b"s0")
        assert second.load_transcript("c1") == b"header|"
        assert first.acquire_claim("c1", a) == StoredClaim(0, "open", b"s0")  # a renewal
        first.save_claim("c1", 0, "open", b"s1", b"w0|", lease=a)
        second.release_claim("c1", b)  # not b's: nothing happens
        with pytest.raises(ClaimBusyError):
            second.acquire_claim("c1", b)
        first.release_claim("c1", a)
        # Released: the other process resumes it from the last save, and the first is fenced.
        assert second.acquire_claim("c1", b) == StoredClaim(0, "open", b"s1")
        assert second.load_transcript("c1") == b"header|w0|"
        assert not first.renew_lease("c1", a)
        with pytest.raises(ClaimBusyError):
            first.save_claim("c1", 0, "open", b"late", b"late|", lease=a)
        assert second.renew_lease("c1", b)
        second.finish_claim("c1", b"verdict", b"header|w0|", lease=b)
        assert first.get_verdict("c1") == StoredVerdict(b"verdict", b"header|w0|")
        # A finished claim is returned without a lease; nothing is held any more.
        assert first.acquire_claim("c1", a) == StoredClaim(0, "finished", b"s1", finished=True)
        assert not second.renew_lease("c1", b)


def test_a_lapsed_lease_is_taken_over(backend):
    """A holder that stops renewing (it died) loses the claim once its lease expires."""
    short, b = _lease("a", 0.3), _lease("b")
    with backend.open() as first, backend.open() as second:
        first.commit(_request())
        first.save_claim("c1", 0, "open", b"s0", lease=short)
        with pytest.raises(ClaimBusyError):
            second.acquire_claim("c1", b)
        time.sleep(0.5)
        second.save_claim("c1", 0, "open", b"s0")  # no live lease: an unleased write goes
        assert second.acquire_claim("c1", b) == StoredClaim(0, "open", b"s0")
        with pytest.raises(ClaimBusyError):  # the first holder comes back: fenced off
            first.save_claim("c1", 0, "failed", b"s0", lease=short)
        assert not first.renew_lease("c1", short)
        assert first.load_claim("c1") == StoredClaim(0, "open", b"s0")


def test_lease_arguments_are_checked():
    with pytest.raises(InputError):
        ClaimLease("", 30.0)
    with pytest.raises(InputError):
        ClaimLease("x" * 129, 30.0)
    for duration in (0.0, -1.0, float("nan"), 86_401.0):
        with pytest.raises(ParameterError):
            ClaimLease("holder", duration)


def test_a_schema_2_database_is_upgraded_and_keeps_its_claims(backend):
    """A database made before leases (schema 2) opens, keeps its data, and gets the table."""
    with backend.open() as store:
        receipt = open_receipt(store.commit(_request()), KEY.public_key())
        store.save_claim("c1", 0, "open", b"s0", b"header|")
    backend.raw("DROP TABLE escrow_claim_leases")
    backend.raw("UPDATE escrow_meta SET value = '2' WHERE name = 'schema'")
    with backend.open() as store:
        assert store.entry(0) == StoredEntry(receipt.entry, receipt.rho)
        assert store.load_claim("c1") == StoredClaim(0, "open", b"s0")
        assert store.acquire_claim("c1", _lease("a")) == StoredClaim(0, "open", b"s0")
    backend.raw("UPDATE escrow_meta SET value = '1' WHERE name = 'schema'")
    with pytest.raises(StateError, match="schema"):  # no upgrade path from older layouts
        backend.open()


def test_a_schema_3_database_is_upgraded_to_record_filings_and_nonces(backend):
    """A database made before claim keys (schema 3) opens and gets the filing tables.

    Its claims keep counting (they are listed by claims_for_record as before), have no
    filing row (nothing was signed for them), and its nonces start empty (spec §10.7).
    """
    with backend.open() as store:
        store.commit(_request())
        store.save_claim("old", 0, "failed", b"s0", b"header|")
    backend.raw("DROP TABLE escrow_claim_filings")
    backend.raw("DROP TABLE escrow_claim_nonces")
    backend.raw("UPDATE escrow_meta SET value = '3' WHERE name = 'schema'")
    with backend.open() as store:
        assert [c.claim_id for c in store.claims_for_record(0)] == ["old"]
        assert store.claim_authorization("old") is None
        store.use_claim_nonce(0, bytes(32))
        with pytest.raises(StateError, match="good once"):
            store.use_claim_nonce(0, bytes(32))
        store.use_claim_nonce(1, bytes(32))  # nonces are per record
        store.create_claim("new", 0, "open", b"s", lease=_lease("a"), authorization=b"{}")
        assert store.claim_authorization("new") == b"{}"
        load = store.claim_load(0, 86_400.0)
        assert (load.open, load.failed_recently) == (1, 0)  # "old" has no filing time


def test_claim_load_counts_open_and_recently_failed_claims(backend):
    with backend.open() as store:
        store.commit(_request())
        for name, status in (("a", "open"), ("b", "failed"), ("c", "open")):
            store.create_claim(name, 0, "open", b"s", lease=_lease(name))
            if status != "open":
                store.save_claim(name, 0, status, b"s", lease=_lease(name))
        load = store.claim_load(0, 86_400.0)
        assert (load.open, load.failed_recently) == (2, 1)
        assert store.claim_load(0, -1.0).failed_recently == 0  # filed before the window
        with pytest.raises(InputError):
            store.use_claim_nonce(0, bytes(31))
