"""The SQL database under the escrow log and the claim store: connection, transactions, schema.

The SQLite and PostgreSQL backends subclass :class:`SqlDatabase` to connect and to
name a handful of dialect strings; :mod:`.escrow_log` and :mod:`.claim_store` run the
same SQL on either, so the backends cannot drift apart. The schema:

- ``escrow_head``: one row, the log's ``size`` and ``root``. Every write transaction
  locks it first (SQLite: ``BEGIN IMMEDIATE`` takes the database's write lock;
  PostgreSQL: ``SELECT ... FOR UPDATE``), so writes are serialised across threads,
  processes and hosts, and index ``size`` is assigned exactly once.
- ``escrow_entries``: ``(idx, entry, rho)``; ``entry`` is the canonical log entry (the
  leaf data, §9.2), ``rho`` the secret randomness it commits to.
- ``escrow_roots``: each escrowed root and its entry's index (one record per root).
- ``escrow_tree``: the hash of every complete subtree of the log's Merkle tree, so
  that the root, appends and proofs read O(log n) rows (:mod:`.log_tables`).
- ``escrow_checkpoints``: at most one signed checkpoint per log size (§9.4).
- ``escrow_claims``: claim state, then verdict and transcript (§10-§12).
- ``escrow_claim_parts``: an unfinished claim's transcript, one part per save, so a
  save writes only what is new; folded into ``escrow_claims`` when the claim finishes.
- ``escrow_claim_leases``: which run of a claim holds it, until when (the database's
  clock, in seconds since the epoch); one row per claim being run.
- ``escrow_claim_filings``: when each claim was filed (the database's clock) and the
  signed claim request that filed it (§10.7; empty on a record that binds no claim key).
- ``escrow_claim_nonces``: every claim request nonce used on each record, so that no
  signed request is ever accepted twice (§10.7).
- ``escrow_claim_entries``: the claim-start entry (spec §9.6) of each claim filed
  since schema 6: its log index and the log's root once it was appended, and the
  claim's record, so a record's logged claims are counted by the index.
- ``escrow_meta``: schema version and the arbiter's key id; a database refuses to open
  with another signing key.

Schema 3 added ``escrow_claim_leases``, schema 4 ``escrow_claim_filings`` and
``escrow_claim_nonces``, schema 5 ``escrow_roots`` and ``escrow_tree``, schema 6
``escrow_claim_entries`` (claims and verdicts became log entries); an older
database is upgraded when it is opened (the tables are created, schema 5's filled from
the entries, which must hash to the head's root, and the version raised, in one
transaction), after which older code refuses it rather than run claims without
leases, accept a claim request twice, or append entries without their tree nodes.
Claims filed before schema 4 have no filing row: nothing was signed for them.
"""

from __future__ import annotations

import contextlib
import threading
from abc import ABC, abstractmethod
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import ClassVar, Final

from twinaudit.protocol.errors import StateError
from twinaudit.protocol.merkle import EMPTY_ROOT

from .cursor import Cursor
from .log_tables import fill_tree

#: Version of the table layout below, recorded in ``escrow_meta``.
SCHEMA_VERSION: Final = "6"
#: Earlier versions a database is upgraded from when opened (the change is additive).
UPGRADABLE_SCHEMAS: Final = frozenset({"2", "3", "4", "5"})
#: Versions whose upgrade fills ``escrow_tree`` and ``escrow_roots`` from the entries.
_TREELESS_SCHEMAS: Final = frozenset({"2", "3", "4"})

#: The tables, with ``{int}``, ``{real}``, ``{blob}``, ``{serial}`` and ``{keyed}`` (the
#: suffix of a table stored in its primary key's order) filled in by each dialect.
_SCHEMA: Final = (
    "CREATE TABLE IF NOT EXISTS escrow_meta (name TEXT PRIMARY KEY, value TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS escrow_head (id INTEGER PRIMARY KEY CHECK (id = 1),"
    " size {int} NOT NULL, root {blob} NOT NULL)",
    "CREATE TABLE IF NOT EXISTS escrow_entries (idx {int} PRIMARY KEY,"
    " entry {blob} NOT NULL, rho {blob} NOT NULL)",
    "CREATE TABLE IF NOT EXISTS escrow_roots (root {blob} PRIMARY KEY, idx {int} NOT NULL){keyed}",
    "CREATE TABLE IF NOT EXISTS escrow_tree (height {int} NOT NULL, idx {int} NOT NULL,"
    " hash {blob} NOT NULL, PRIMARY KEY (height, idx)){keyed}",
    "CREATE TABLE IF NOT EXISTS escrow_checkpoints (size {int} PRIMARY KEY,"
    " root {blob} NOT NULL, envelope {blob} NOT NULL)",
    "CREATE TABLE IF NOT EXISTS escrow_claims (seq {serial}, claim_id TEXT NOT NULL UNIQUE,"
    " record_index {int} NOT NULL, status TEXT NOT NULL, state {blob} NOT NULL,"
    " finished INTEGER NOT NULL DEFAULT 0, verdict {blob}, transcript {blob})",
    "CREATE INDEX IF NOT EXISTS escrow_claims_by_record ON escrow_claims (record_index, seq)",
    "CREATE TABLE IF NOT EXISTS escrow_claim_parts (claim_id TEXT NOT NULL, part {int} NOT NULL,"
    " data {blob} NOT NULL, PRIMARY KEY (claim_id, part))",
    "CREATE TABLE IF NOT EXISTS escrow_claim_leases (claim_id TEXT PRIMARY KEY,"
    " holder TEXT NOT NULL, expires {real} NOT NULL)",
    "CREATE TABLE IF NOT EXISTS escrow_claim_filings (claim_id TEXT PRIMARY KEY,"
    " record_index {int} NOT NULL, filed_at {real} NOT NULL, request {blob} NOT NULL)",
    "CREATE INDEX IF NOT EXISTS escrow_claim_filings_by_record"
    " ON escrow_claim_filings (record_index, filed_at)",
    "CREATE TABLE IF NOT EXISTS escrow_claim_nonces (record_index {int} NOT NULL,"
    " nonce {blob} NOT NULL, PRIMARY KEY (record_index, nonce))",
    "CREATE TABLE IF NOT EXISTS escrow_claim_entries (claim_id TEXT PRIMARY KEY,"
    " record_index {int} NOT NULL, idx {int} NOT NULL UNIQUE, log_root {blob} NOT NULL)",
    "CREATE INDEX IF NOT EXISTS escrow_claim_entries_by_record"
    " ON escrow_claim_entries (record_index, idx)",
)


def utc_now() -> datetime:
    """Return the current time, timezone-aware in UTC (the stores' default clock)."""
    return datetime.now(UTC)


class SqlDatabase(ABC):
    """One connection to the database of an escrow store, shared by its log and claims.

    A subclass sets the dialect strings below and implements :meth:`_connect` and
    :meth:`_disconnect`. :attr:`lock` serialises every use of the connection; hold it
    around each :meth:`transaction`.
    """

    #: Starts a transaction that only reads; it should see one snapshot.
    BEGIN_READ: ClassVar[str] = "BEGIN"
    #: Starts a transaction that writes.
    BEGIN_WRITE: ClassVar[str] = "BEGIN"
    #: Appended to the head-row query in write transactions to lock the row.
    LOCK_HEAD_SUFFIX: ClassVar[str] = ""
    #: Run first in the schema transaction, to serialise concurrent schema creation.
    SCHEMA_LOCK: ClassVar[str | None] = None
    #: A query of one row, one column: the database's clock in seconds since the epoch.
    NOW_QUERY: ClassVar[str]
    #: Column types: ``int`` (64-bit), ``real`` (binary64), ``blob`` (bytes), ``serial``;
    #: ``keyed``, the suffix of a table stored in its primary key's order.
    TYPES: ClassVar[dict[str, str]]

    def __init__(self) -> None:
        """Prepare; :meth:`open` connects."""
        self.lock = threading.RLock()
        self._cur: Cursor | None = None
        self._closed = False

    # --- Backend hooks -------------------------------------------------------------------

    @abstractmethod
    def _connect(self) -> Cursor:
        """Open the connection, configure durability, and return its cursor."""

    @abstractmethod
    def _disconnect(self) -> None:
        """Close the connection."""

    def _connection_lost(self, error: BaseException | None) -> bool:
        """Return whether the connection is gone (``error``: what starting a transaction raised).

        A backend whose server can drop connections (PostgreSQL) says so, and
        :meth:`transaction` then reconnects; the embedded default never loses its file.
        """
        return False

    # --- Life cycle ----------------------------------------------------------------------

    def open(self, arbiter_key_id: str) -> None:
        """Connect and create (or upgrade) the schema for the arbiter ``arbiter_key_id``."""
        with self.lock:
            self._cur = self._connect()
            try:
                self._create_schema(arbiter_key_id)
            except BaseException:
                self.close()
                raise

    def check_open(self) -> None:
        """Raise StateError once the database is closed."""
        if self._closed or self._cur is None:
            raise StateError("the escrow store is closed")

    def close(self) -> None:
        """Close the connection; later transactions raise StateError."""
        with self.lock:
            if not self._closed:
                self._closed = True
                self._disconnect()

    # --- Transactions --------------------------------------------------------------------

    @contextmanager
    def transaction(self, *, write: bool) -> Iterator[Cursor]:
        """Run the body in one transaction; commit on success, roll back on any error.

        A connection found lost before or while the transaction starts is reopened
        once (nothing of the transaction has run yet, so nothing is repeated). One lost
        in the middle fails this transaction (rolled back by the server); the next
        one reconnects.
        """
        self.check_open()
        begin = self.BEGIN_WRITE if write else self.BEGIN_READ
        if self._connection_lost(None):
            self._reconnect()
        try:
            self._cursor().execute(begin)
        except Exception as exc:
            if not self._connection_lost(exc):
                raise
            self._reconnect()
            self._cursor().execute(begin)
        cur = self._cursor()
        try:
            yield cur
            cur.execute("COMMIT")
        except BaseException:
            # The transaction may already be gone (a failed COMMIT); the caller raises the cause.
            with contextlib.suppress(Exception):
                cur.execute("ROLLBACK")
            raise

    def _cursor(self) -> Cursor:
        if self._cur is None:  # pragma: no cover - open() sets it before any transaction
            raise StateError("the escrow store is not connected")
        return self._cur

    def _reconnect(self) -> None:
        """Drop the lost connection and open a new one (the data is unchanged by this)."""
        with contextlib.suppress(Exception):
            self._disconnect()
        self._cur = self._connect()

    # --- Shared queries ------------------------------------------------------------------

    def head(self, cur: Cursor, *, lock: bool) -> tuple[int, bytes]:
        """Return the log's size and root; ``lock`` locks the head row (write transactions)."""
        suffix = self.LOCK_HEAD_SUFFIX if lock else ""
        cur.execute("SELECT size, root FROM escrow_head WHERE id = 1" + suffix)
        row = cur.fetchone()
        if row is None:
            raise StateError("the escrow store has no head row")
        return int(row[0]), bytes(row[1])

    def now(self, cur: Cursor) -> float:
        """Return the database's clock, in seconds since the epoch (leases use it)."""
        cur.execute(self.NOW_QUERY)
        return float(cur.fetchone()[0])

    def _create_schema(self, arbiter_key_id: str) -> None:
        with self.transaction(write=True) as cur:
            if self.SCHEMA_LOCK is not None:
                cur.execute(self.SCHEMA_LOCK)
            for statement in _SCHEMA:
                cur.execute(statement.format(**self.TYPES))
            cur.execute(
                "INSERT INTO escrow_head (id, size, root) VALUES (1, 0, ?)"
                " ON CONFLICT (id) DO NOTHING",
                (EMPTY_ROOT,),
            )
            cur.execute("SELECT value FROM escrow_meta WHERE name = 'schema'")
            row = cur.fetchone()
            if row is not None and row[0] in UPGRADABLE_SCHEMAS:
                # Schemas 3, 4 and 6 added tables only; schema 5's are filled from the log.
                if row[0] in _TREELESS_SCHEMAS:
                    fill_tree(cur)
                cur.execute(
                    "UPDATE escrow_meta SET value = ? WHERE name = 'schema'", (SCHEMA_VERSION,)
                )
            for name, value in (("schema", SCHEMA_VERSION), ("arbiter", arbiter_key_id)):
                cur.execute(
                    "INSERT INTO escrow_meta (name, value) VALUES (?, ?)"
                    " ON CONFLICT (name) DO NOTHING",
                    (name, value),
                )
                cur.execute("SELECT value FROM escrow_meta WHERE name = ?", (name,))
                stored = cur.fetchone()[0]
                if stored != value:
                    raise StateError(f"the escrow store's {name} is {stored!r}, not {value!r}")
