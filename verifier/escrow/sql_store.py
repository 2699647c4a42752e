"""The SQL core shared by the SQLite and PostgreSQL escrow stores.

Everything but connecting and a handful of dialect strings lives here, so the two
backends cannot drift apart. The schema:

- ``escrow_head``: one row, the log's ``size`` and ``root``. Every write transaction
  locks it first (SQLite: ``BEGIN IMMEDIATE`` takes the database's write lock;
  PostgreSQL: ``SELECT ... FOR UPDATE``), so appends are serialised across threads,
  processes and hosts, and index ``size`` is assigned exactly once.
- ``escrow_entries``: ``(idx, entry, rho)``; ``entry`` is the canonical log entry (the
  leaf data, §9.2), ``rho`` the secret randomness it commits to.
- ``escrow_checkpoints``: at most one signed checkpoint per log size (§9.4).
- ``escrow_claims``: claim state, then verdict and transcript (§10-§12).
- ``escrow_claim_parts``: an unfinished claim's transcript, one part per save, so a
  save writes only what is new; folded into ``escrow_claims`` when the claim finishes.
- ``escrow_meta``: schema version and the arbiter's key id; a store refuses to open
  with another signing key.

**Durability.** An append is one transaction: insert the entries, update the head's
size and root, commit. The backend's commit is synchronous (SQLite WAL with
``synchronous=FULL``; PostgreSQL ``synchronous_commit=on``), so when it returns the
entries survive a crash or power loss. Only then are receipts signed and returned
(§9.3). A crash before the commit leaves nothing: no entry, no head change.

**Group commit.** Concurrent :meth:`~SqlEscrowStore.commit` calls queue their requests;
one of them at a time leads, taking everything queued (up to :data:`MAX_COMMIT_BATCH`)
into one transaction, so one disk flush serves many receipts. The others wait until
their request is settled (or it is their turn to lead); each signs its own receipt.
The clock is read once per transaction: the entries of one batch share their time.

**The in-memory log.** The Merkle tree of the log is rebuilt from the stored entries on
open and checked against the stored head root and the last stored checkpoint. Before
every operation the store catches up with entries other processes appended and checks
the head root again, so several arbiter processes may share one database.

**One record per root** (§9.1). Beside the tree the store keeps the root of every
entry. An append checks its requests against them after catching up, with the head
row locked, so no two processes can both escrow one root; a refused request fails
alone, the rest of its batch is appended.
"""

from __future__ import annotations

import contextlib
import secrets
import threading
from abc import abstractmethod
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, ClassVar, Final, Protocol

import msgpack
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from protocol import limits
from protocol.errors import (
    InputError,
    LimitExceededError,
    ParameterError,
    StateError,
    TwinauditError,
)
from protocol.escrow_messages import (
    Checkpoint,
    EscrowRequest,
    LogEntry,
    Receipt,
    decode_entry,
    format_time,
    make_entry,
    rho_digest,
    sign_checkpoint,
    sign_receipt,
    verify_checkpoint,
)
from protocol.keys import key_id
from protocol.merkle import EMPTY_ROOT, MerkleTree

from .store import (
    FINISHED_STATUS,
    MAX_CLAIM_STATE_BYTES,
    MAX_TRANSCRIPT_BYTES,
    MAX_VERDICT_BYTES,
    ClaimSummary,
    EscrowStore,
    RootAlreadyEscrowedError,
    UnknownClaimError,
    UnknownRecordError,
    check_blob,
    check_claim_id,
    check_index,
    check_status,
)

#: Version of the table layout below, recorded in ``escrow_meta``.
SCHEMA_VERSION: Final = "2"
#: Most escrow requests appended in one transaction.
MAX_COMMIT_BATCH: Final = 256
#: Entries read per query when the in-memory log catches up with the database.
LOAD_CHUNK: Final = 10_000

#: The tables, with ``{int}``, ``{blob}`` and ``{serial}`` filled in by each dialect.
_SCHEMA: Final = (
    "CREATE TABLE IF NOT EXISTS escrow_meta (name TEXT PRIMARY KEY, value TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS escrow_head (id INTEGER PRIMARY KEY CHECK (id = 1),"
    " size {int} NOT NULL, root {blob} NOT NULL)",
    "CREATE TABLE IF NOT EXISTS escrow_entries (idx {int} PRIMARY KEY,"
    " entry {blob} NOT NULL, rho {blob} NOT NULL)",
    "CREATE TABLE IF NOT EXISTS escrow_checkpoints (size {int} PRIMARY KEY,"
    " root {blob} NOT NULL, envelope {blob} NOT NULL)",
    "CREATE TABLE IF NOT EXISTS escrow_claims (seq {serial}, claim_id TEXT NOT NULL UNIQUE,"
    " record_index {int} NOT NULL, status TEXT NOT NULL, state {blob} NOT NULL,"
    " finished INTEGER NOT NULL DEFAULT 0, verdict {blob}, transcript {blob})",
    "CREATE INDEX IF NOT EXISTS escrow_claims_by_record ON escrow_claims (record_index, seq)",
    "CREATE TABLE IF NOT EXISTS escrow_claim_parts (claim_id TEXT NOT NULL, part {int} NOT NULL,"
    " data {blob} NOT NULL, PRIMARY KEY (claim_id, part))",
)


class Cursor(Protocol):
    """The part of a DB-API cursor the core uses; SQL text uses ``?`` placeholders."""

    def execute(self, sql: str, params: Sequence[Any] = ..., /) -> object:
        """Run one statement."""

    def executemany(self, sql: str, params: Iterable[Sequence[Any]], /) -> object:
        """Run one statement once per parameter row."""

    def fetchone(self) -> Any:
        """Return the next row of the last query, or None."""

    def fetchall(self) -> list[Any]:
        """Return the remaining rows of the last query."""


def utc_now() -> datetime:
    """Return the current time, timezone-aware in UTC (the stores' default clock)."""
    return datetime.now(UTC)


def _entry_root(data: bytes, index: int) -> bytes:
    """Return the ``root`` of a stored log entry.

    Only for entries read back from the store once the head root vouches for their
    bytes (:meth:`SqlEscrowStore._catch_up`): a plain decode keeps rebuilding a long
    log fast, where the strict one costs twenty times more.
    """
    try:
        root = msgpack.unpackb(data, raw=False)["root"]
    except Exception:  # any malformation: the store is corrupt, whatever msgpack says
        root = None
    if not isinstance(root, bytes) or len(root) != limits.HASH_BYTES:
        raise StateError(f"stored entry {index} has no 32-byte root: the escrow store is corrupt")
    return root


@dataclass
class _Ticket:
    """One queued commit: its request, then its result or error."""

    request: EscrowRequest
    result: tuple[LogEntry, bytes, bytes] | None = None
    error: BaseException | None = None
    done: bool = False


class SqlEscrowStore(EscrowStore):
    """An :class:`EscrowStore` on a SQL database; subclasses supply the connection.

    A subclass sets the dialect strings below, implements :meth:`_connect` and
    :meth:`_disconnect`, and calls ``super().__init__`` once it can connect.
    """

    #: Starts a transaction that only reads; it should see one snapshot.
    BEGIN_READ: ClassVar[str] = "BEGIN"
    #: Starts a transaction that writes.
    BEGIN_WRITE: ClassVar[str] = "BEGIN"
    #: Appended to the head-row query in write transactions to lock the row.
    LOCK_HEAD_SUFFIX: ClassVar[str] = ""
    #: Run first in the schema transaction, to serialise concurrent schema creation.
    SCHEMA_LOCK: ClassVar[str | None] = None
    #: Column types: ``int`` (64-bit), ``blob`` (bytes), ``serial`` (auto-increment key).
    TYPES: ClassVar[dict[str, str]]

    def __init__(
        self,
        signing_key: Ed25519PrivateKey,
        *,
        clock: Callable[[], datetime] | None = None,
        entropy: Callable[[int], bytes] | None = None,
    ) -> None:
        """Connect, create the schema if needed, and rebuild and check the log.

        ``entropy(n)`` returns ``n`` random bytes for each record's ``rho``; it is the
        OS CSPRNG unless a test injects a seeded source to make a run reproducible.
        """
        if not isinstance(signing_key, Ed25519PrivateKey):
            raise InputError("the arbiter's signing key must be an Ed25519PrivateKey")
        self._key = signing_key
        self._public = signing_key.public_key()
        self._key_id = key_id(self._public)
        self._clock = clock or utc_now
        self._entropy = entropy  # None: the OS CSPRNG, looked up at each draw
        self._lock = threading.RLock()  # the connection and the tree
        self._queue = threading.Condition()  # the queue of pending commits
        self._pending: deque[_Ticket] = deque()
        self._appending = False  # a thread is appending queued requests
        self._tree: MerkleTree | None = None  # None: rebuild from the database
        self._roots: dict[bytes, int] = {}  # each entry's root -> its index, with the tree
        self._closed = False
        self._cur = self._connect()
        try:
            self._create_schema()
            self._verify_log()
        except BaseException:
            self._closed = True
            self._disconnect()
            raise

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
        :meth:`_transaction` then reconnects; the embedded default never loses its file.
        """
        return False

    # --- Transactions --------------------------------------------------------------------

    @contextmanager
    def _transaction(self, *, write: bool) -> Iterator[Cursor]:
        """Run the body in one transaction; commit on success, roll back on any error.

        A connection found lost before or while the transaction starts is reopened
        once (nothing of the transaction has run yet, so nothing is repeated). One lost
        in the middle fails this transaction (rolled back by the server); the next
        one reconnects.
        """
        begin = self.BEGIN_WRITE if write else self.BEGIN_READ
        if self._connection_lost(None):
            self._reconnect()
        try:
            self._cur.execute(begin)
        except Exception as exc:
            if not self._connection_lost(exc):
                raise
            self._reconnect()
            self._cur.execute(begin)
        cur = self._cur
        try:
            yield cur
            cur.execute("COMMIT")
        except BaseException:
            self._rollback()
            raise

    def _reconnect(self) -> None:
        """Drop the lost connection and open a new one (the log is unchanged by this)."""
        with contextlib.suppress(Exception):
            self._disconnect()
        self._cur = self._connect()

    def _rollback(self) -> None:
        # The transaction may already be gone (a failed COMMIT); the caller raises the cause.
        with contextlib.suppress(Exception):
            self._cur.execute("ROLLBACK")

    def _check_open(self) -> None:
        if self._closed:
            raise StateError("the escrow store is closed")

    def _head(self, cur: Cursor, *, lock: bool) -> tuple[int, bytes]:
        suffix = self.LOCK_HEAD_SUFFIX if lock else ""
        cur.execute("SELECT size, root FROM escrow_head WHERE id = 1" + suffix)
        row = cur.fetchone()
        if row is None:
            raise StateError("the escrow store has no head row")
        return int(row[0]), bytes(row[1])

    def _catch_up(self, cur: Cursor, *, lock: bool = False) -> int:
        """Append to the in-memory log what the database has beyond it; check the root.

        Returns the log size. ``lock`` locks the head row (write transactions only).
        """
        size, root = self._head(cur, lock=lock)
        if self._tree is None:
            self._tree = MerkleTree()
            self._roots = {}
        tree = self._tree
        if tree.size > size:
            raise StateError(f"the stored log has {size} entries, fewer than {tree.size} seen")
        try:
            new: list[tuple[int, bytes]] = []
            while tree.size < size:
                cur.execute(
                    "SELECT idx, entry FROM escrow_entries WHERE idx >= ? AND idx < ? ORDER BY idx",
                    (tree.size, min(size, tree.size + LOAD_CHUNK)),
                )
                rows = cur.fetchall()
                for idx, data in rows:
                    if int(idx) != tree.size:
                        raise StateError(f"the stored log has no entry {tree.size}")
                    tree.append(bytes(data))
                    new.append((int(idx), bytes(data)))
                if not rows:
                    raise StateError(f"the stored log has no entry {tree.size}")
            if tree.root() != root:
                raise StateError(
                    f"the stored entries hash to {tree.root().hex()}, not the head root"
                    f" {root.hex()}: the escrow store is corrupt"
                )
            for idx, data in new:  # vouched for by the head root
                self._roots.setdefault(_entry_root(data, idx), idx)
        except BaseException:
            self._tree = None  # holds leaves that did not check out
            raise
        return size

    def _sync(self) -> int:
        """Catch up with the database in a read transaction and return the log size."""
        self._check_open()
        with self._transaction(write=False) as cur:
            return self._catch_up(cur)

    def _current_tree(self) -> MerkleTree:
        if self._tree is None:  # pragma: no cover - _catch_up sets it
            raise StateError("the in-memory log is not loaded")
        return self._tree

    # --- Opening -------------------------------------------------------------------------

    def _create_schema(self) -> None:
        with self._transaction(write=True) as cur:
            if self.SCHEMA_LOCK is not None:
                cur.execute(self.SCHEMA_LOCK)
            for statement in _SCHEMA:
                cur.execute(statement.format(**self.TYPES))
            cur.execute(
                "INSERT INTO escrow_head (id, size, root) VALUES (1, 0, ?)"
                " ON CONFLICT (id) DO NOTHING",
                (EMPTY_ROOT,),
            )
            for name, value in (("schema", SCHEMA_VERSION), ("arbiter", self._key_id)):
                cur.execute(
                    "INSERT INTO escrow_meta (name, value) VALUES (?, ?)"
                    " ON CONFLICT (name) DO NOTHING",
                    (name, value),
                )
                cur.execute("SELECT value FROM escrow_meta WHERE name = ?", (name,))
                stored = cur.fetchone()[0]
                if stored != value:
                    raise StateError(f"the escrow store's {name} is {stored!r}, not {value!r}")

    def _verify_log(self) -> None:
        """Rebuild the log from scratch and check it against the head and last checkpoint."""
        with self._transaction(write=False) as cur:
            size, _ = self._head(cur, lock=False)
            cur.execute("SELECT COUNT(*), MIN(idx), MAX(idx) FROM escrow_entries")
            count, low, high = cur.fetchone()
            if int(count) != size or (size and (int(low), int(high)) != (0, size - 1)):
                raise StateError(
                    f"the escrow store holds {count} entries (indices {low}..{high})"
                    f" but its head says {size}"
                )
            self._tree = None
            self._catch_up(cur)
            cur.execute("SELECT size, root FROM escrow_checkpoints ORDER BY size DESC LIMIT 1")
            last = cur.fetchone()
        if last is not None:
            self._check_checkpoint_root(int(last[0]), bytes(last[1]))

    def _check_checkpoint_root(self, size: int, root: bytes) -> None:
        tree = self._current_tree()
        if size > tree.size or tree.root(size) != root:
            raise StateError(
                f"a stored checkpoint of size {size} does not match the log: the escrow"
                " store is corrupt or was rolled back"
            )

    # --- The log -------------------------------------------------------------------------

    @property
    def public_key(self) -> Ed25519PublicKey:
        """The arbiter's public key."""
        return self._public

    def commit(self, request: EscrowRequest) -> bytes:
        """Escrow ``request``; return the signed receipt once its entry is durable."""
        if not isinstance(request, EscrowRequest):
            raise InputError(f"expected an EscrowRequest, got {type(request).__name__}")
        ticket = _Ticket(request)
        with self._queue:
            self._pending.append(ticket)
            # Group commit: wait while another thread appends; its batch may hold ours.
            while not ticket.done and self._appending:
                self._queue.wait()
            lead = not ticket.done
            if lead:
                self._appending = True
        if lead:
            self._lead(ticket)
        if ticket.error is not None:
            raise ticket.error
        if ticket.result is None:  # pragma: no cover - settled without error means a result
            raise StateError("escrow append settled without a result")
        entry, rho, log_root = ticket.result
        receipt = Receipt(
            arbiter=self._key_id,
            entry=entry,
            rho=rho,
            log_size=entry.index + 1,
            log_root=log_root,
        )
        return sign_receipt(receipt, self._key)  # only now: the entry is durable (§9.3)

    def _lead(self, ticket: _Ticket) -> None:
        """Append queued requests, oldest first, in batches until ``ticket`` is settled."""
        try:
            while not ticket.done:
                with self._queue:
                    count = min(MAX_COMMIT_BATCH, len(self._pending))
                    batch = [self._pending.popleft() for _ in range(count)]
                with self._lock:
                    self._append_batch(batch)
                with self._queue:
                    self._queue.notify_all()  # wake the batch's owners at once
        finally:
            with self._queue:
                self._appending = False
                self._queue.notify_all()  # a waiter whose request is still queued leads next

    def _append_batch(self, batch: list[_Ticket]) -> None:
        """Append a batch of queued requests in one transaction; settle every ticket."""
        try:
            self._check_open()
            results = self._append([ticket.request for ticket in batch], self._clock())
        except BaseException as exc:
            for ticket in batch:
                ticket.error, ticket.done = exc, True
            if not isinstance(exc, Exception):
                raise
            return
        for ticket, result in zip(batch, results, strict=True):
            # done last: waiters read result or error
            if isinstance(result, RootAlreadyEscrowedError):
                ticket.error, ticket.done = result, True
            else:
                ticket.result, ticket.done = result, True

    def _append(
        self, requests: list[EscrowRequest], now: datetime
    ) -> list[tuple[LogEntry, bytes, bytes] | RootAlreadyEscrowedError]:
        """Append one entry per new root, durably; return (entry, rho, log root) for each.

        A request whose root is in the log, or earlier in ``requests``, gets a
        :class:`RootAlreadyEscrowedError` in its place and draws no ``rho`` (§9.1).
        """
        appended = False
        try:
            with self._transaction(write=True) as cur:
                size = self._catch_up(cur, lock=True)  # the head is locked: roots are final
                drawn: list[tuple[LogEntry, bytes, bytes]] = []
                outcomes: list[int | RootAlreadyEscrowedError] = []  # int: position in drawn
                batch_roots: dict[bytes, int] = {}
                for request in requests:
                    held = self._roots.get(request.root, batch_roots.get(request.root))
                    if held is not None:
                        outcomes.append(RootAlreadyEscrowedError(request.root, held))
                        continue
                    rho = (self._entropy or secrets.token_bytes)(
                        limits.RHO_BYTES
                    )  # fresh per record (§9.2)
                    entry = make_entry(request, index=size + len(drawn), time=now, rho=rho)
                    batch_roots[request.root] = entry.index
                    outcomes.append(len(drawn))
                    drawn.append((entry, rho, entry.encode()))
                tree = self._current_tree()
                if drawn:
                    cur.executemany(
                        "INSERT INTO escrow_entries (idx, entry, rho) VALUES (?, ?, ?)",
                        [(entry.index, data, rho) for entry, rho, data in drawn],
                    )
                    appended = True
                    for _, _, data in drawn:
                        tree.append(data)
                    self._roots.update(batch_roots)
                    cur.execute(
                        "UPDATE escrow_head SET size = ?, root = ? WHERE id = 1",
                        (tree.size, tree.root()),
                    )
        except BaseException:
            if appended:
                self._tree = None  # it and the roots may hold entries never committed
            raise
        # Committed and durable: the receipts may now be signed (§9.3).
        results: list[tuple[LogEntry, bytes, bytes] | RootAlreadyEscrowedError] = []
        for outcome in outcomes:
            if isinstance(outcome, RootAlreadyEscrowedError):
                results.append(outcome)
            else:
                entry, rho, _ = drawn[outcome]
                results.append((entry, rho, tree.root(entry.index + 1)))
        return results

    def entry(self, index: int) -> tuple[LogEntry, bytes]:
        """Return log entry ``index`` and its secret ``rho``."""
        index = check_index(index, "log index")
        with self._lock:
            self._check_open()
            with self._transaction(write=False) as cur:
                size = self._catch_up(cur)
                if index >= size:
                    raise UnknownRecordError(f"the log has no entry {index} (size {size})")
                cur.execute("SELECT entry, rho FROM escrow_entries WHERE idx = ?", (index,))
                data, rho = (bytes(value) for value in cur.fetchone())
        try:
            entry = decode_entry(data)
            digest = rho_digest(rho)
        except TwinauditError as exc:
            raise StateError(f"stored entry {index} is corrupt: {exc}") from None
        if entry.index != index or entry.rho_digest != digest:
            raise StateError(f"stored entry {index} is corrupt: index or rho does not match")
        return entry, rho

    def size(self) -> int:
        """Return the number of entries in the log."""
        with self._lock:
            return self._sync()

    def latest_checkpoint(self) -> tuple[Checkpoint, bytes]:
        """Return the signed checkpoint of the current log (one per size, reused)."""
        with self._lock:
            self._check_open()
            with self._transaction(write=False) as cur:
                size = self._catch_up(cur)
                cur.execute("SELECT envelope FROM escrow_checkpoints WHERE size = ?", (size,))
                row = cur.fetchone()
            root = self._current_tree().root(size)
            if row is None:
                # The time is read once, when the checkpoint is first signed.
                checkpoint = Checkpoint(
                    arbiter=self._key_id, size=size, root=root, time=format_time(self._clock())
                )
                signed = sign_checkpoint(checkpoint, self._key)
                with self._transaction(write=True) as cur:
                    cur.execute(
                        "INSERT INTO escrow_checkpoints (size, root, envelope) VALUES (?, ?, ?)"
                        " ON CONFLICT (size) DO NOTHING",
                        (size, root, signed),
                    )
                    cur.execute("SELECT envelope FROM escrow_checkpoints WHERE size = ?", (size,))
                    row = cur.fetchone()
        envelope = bytes(row[0])
        stored = verify_checkpoint(envelope, self._public)
        if stored.size != size or stored.root != root:
            raise StateError(f"the stored checkpoint of size {size} does not match the log")
        return stored, envelope

    def inclusion_proof(self, index: int, size: int) -> list[bytes]:
        """Return the inclusion proof of entry ``index`` in the log of ``size`` entries."""
        index = check_index(index, "log index")
        size = check_index(size, "log size")
        with self._lock:
            current = self._sync()
            if size > current:
                raise UnknownRecordError(f"the log has {current} entries, not {size}")
            if index >= size:
                raise ParameterError(f"index {index} is not below the log size {size}")
            return self._current_tree().inclusion_proof(index, size)

    def consistency_proof(self, old_size: int, new_size: int) -> list[bytes]:
        """Return the consistency proof between two sizes of the log."""
        old_size = check_index(old_size, "old log size")
        new_size = check_index(new_size, "new log size")
        with self._lock:
            current = self._sync()
            if new_size > current:
                raise UnknownRecordError(f"the log has {current} entries, not {new_size}")
            if old_size > new_size:
                raise ParameterError(f"old size {old_size} is larger than new size {new_size}")
            return self._current_tree().consistency_proof(old_size, new_size)

    # --- Claims --------------------------------------------------------------------------

    def save_claim(
        self,
        claim_id: str,
        record_index: int,
        status: str,
        state: bytes,
        transcript_part: bytes = b"",
    ) -> None:
        """Create or update an unfinished claim, appending ``transcript_part`` to its transcript."""
        claim_id = check_claim_id(claim_id)
        record_index = check_index(record_index, "record index")
        status = check_status(status)
        state = check_blob(state, "claim state", MAX_CLAIM_STATE_BYTES)
        part = check_blob(transcript_part, "transcript part", MAX_TRANSCRIPT_BYTES)
        with self._lock:
            self._check_open()
            with self._transaction(write=True) as cur:
                size, _ = self._head(cur, lock=True)
                if record_index >= size:
                    raise UnknownRecordError(f"the log has no record {record_index}")
                cur.execute(
                    "SELECT record_index, finished FROM escrow_claims WHERE claim_id = ?",
                    (claim_id,),
                )
                row = cur.fetchone()
                if row is None:
                    cur.execute(
                        "INSERT INTO escrow_claims (claim_id, record_index, status, state)"
                        " VALUES (?, ?, ?, ?)",
                        (claim_id, record_index, status, state),
                    )
                else:
                    if int(row[1]):
                        raise StateError(f"claim {claim_id} is finished")
                    if int(row[0]) != record_index:
                        raise StateError(f"claim {claim_id} is against record {row[0]}")
                    cur.execute(
                        "UPDATE escrow_claims SET status = ?, state = ? WHERE claim_id = ?",
                        (status, state, claim_id),
                    )
                if part:
                    self._append_part(cur, claim_id, part)

    def _append_part(self, cur: Cursor, claim_id: str, part: bytes) -> None:
        cur.execute(
            "SELECT COUNT(*), COALESCE(SUM(LENGTH(data)), 0) FROM escrow_claim_parts"
            " WHERE claim_id = ?",
            (claim_id,),
        )
        row = cur.fetchone()
        assert row is not None  # an aggregate always returns one row
        parts, total = int(row[0]), int(row[1])
        if total + len(part) > MAX_TRANSCRIPT_BYTES:
            raise LimitExceededError("transcript size", total + len(part), MAX_TRANSCRIPT_BYTES)
        cur.execute(
            "INSERT INTO escrow_claim_parts (claim_id, part, data) VALUES (?, ?, ?)",
            (claim_id, parts, part),
        )

    def load_transcript(self, claim_id: str) -> bytes | None:
        """Return the transcript parts saved for an unfinished claim, joined; None if unknown."""
        claim_id = check_claim_id(claim_id)
        with self._lock:
            self._check_open()
            with self._transaction(write=False) as cur:
                cur.execute("SELECT 1 FROM escrow_claims WHERE claim_id = ?", (claim_id,))
                if cur.fetchone() is None:
                    return None
                cur.execute(
                    "SELECT data FROM escrow_claim_parts WHERE claim_id = ? ORDER BY part",
                    (claim_id,),
                )
                rows = cur.fetchall()
        return b"".join(bytes(row[0]) for row in rows)

    def load_claim(self, claim_id: str) -> tuple[int, str, bytes] | None:
        """Return a claim's record index, status and state, or None."""
        claim_id = check_claim_id(claim_id)
        with self._lock:
            self._check_open()
            with self._transaction(write=False) as cur:
                cur.execute(
                    "SELECT record_index, status, state FROM escrow_claims WHERE claim_id = ?",
                    (claim_id,),
                )
                row = cur.fetchone()
        return None if row is None else (int(row[0]), str(row[1]), bytes(row[2]))

    def finish_claim(self, claim_id: str, verdict: bytes, transcript: bytes) -> None:
        """Store the verdict and transcript and mark the claim finished, atomically."""
        claim_id = check_claim_id(claim_id)
        verdict = check_blob(verdict, "verdict", MAX_VERDICT_BYTES)
        transcript = check_blob(transcript, "transcript", MAX_TRANSCRIPT_BYTES)
        with self._lock:
            self._check_open()
            with self._transaction(write=True) as cur:
                self._head(cur, lock=True)  # serialise with every other write
                cur.execute("SELECT finished FROM escrow_claims WHERE claim_id = ?", (claim_id,))
                row = cur.fetchone()
                if row is None:
                    raise UnknownClaimError(f"no claim {claim_id}")
                if int(row[0]):
                    raise StateError(f"claim {claim_id} is already finished")
                cur.execute(
                    "UPDATE escrow_claims SET status = ?, finished = 1, verdict = ?,"
                    " transcript = ? WHERE claim_id = ?",
                    (FINISHED_STATUS, verdict, transcript, claim_id),
                )
                cur.execute("DELETE FROM escrow_claim_parts WHERE claim_id = ?", (claim_id,))

    def get_verdict(self, claim_id: str) -> tuple[bytes, bytes] | None:
        """Return a finished claim's verdict and transcript, or None."""
        claim_id = check_claim_id(claim_id)
        with self._lock:
            self._check_open()
            with self._transaction(write=False) as cur:
                cur.execute(
                    "SELECT verdict, transcript FROM escrow_claims"
                    " WHERE claim_id = ? AND finished = 1",
                    (claim_id,),
                )
                row = cur.fetchone()
        return None if row is None else (bytes(row[0]), bytes(row[1]))

    def claims_for_record(self, record_index: int) -> list[ClaimSummary]:
        """Return the claims against a record, oldest first."""
        record_index = check_index(record_index, "record index")
        with self._lock:
            self._check_open()
            with self._transaction(write=False) as cur:
                cur.execute(
                    "SELECT claim_id, status, finished FROM escrow_claims"
                    " WHERE record_index = ? ORDER BY seq",
                    (record_index,),
                )
                rows = cur.fetchall()
        return [
            ClaimSummary(str(claim_id), record_index, str(status), bool(finished))
            for claim_id, status, finished in rows
        ]

    def close(self) -> None:
        """Close the connection; later calls raise StateError."""
        with self._lock:
            if not self._closed:
                self._closed = True
                self._disconnect()
