"""The escrow log on SQL (spec §9): group commit, the in-memory Merkle tree, checkpoints.

:class:`SqlEscrowLog` runs on a :class:`~.sql.SqlDatabase` (SQLite or PostgreSQL),
which it may share with a :class:`~.claim_store.SqlClaimStore`; the tables are
described in :mod:`.sql`.

**Durability.** An append is one transaction: insert the entries, update the head's
size and root, commit. The backend's commit is synchronous (SQLite WAL with
``synchronous=FULL``; PostgreSQL ``synchronous_commit=on``), so when it returns the
entries survive a crash or power loss. Only then are receipts signed and returned
(§9.3). A crash before the commit leaves nothing: no entry, no head change.

**Group commit.** Concurrent :meth:`~SqlEscrowLog.commit` calls queue their requests;
one of them at a time leads, taking everything queued (up to :data:`MAX_COMMIT_BATCH`)
into one transaction, so one disk flush serves many receipts. The others wait until
their request is settled (or it is their turn to lead); each signs its own receipt.
The clock is read once per transaction: the entries of one batch share their time.

**The in-memory log.** The Merkle tree of the log is rebuilt from the stored entries on
open and checked against the stored head root and the last stored checkpoint. Before
every operation the log catches up with entries other processes appended and checks
the head root again, so several arbiter processes may share one database.

**One record per root** (§9.1). Beside the tree the log keeps the root of every
entry. An append checks its requests against them after catching up, with the head
row locked, so no two processes can both escrow one root; a refused request fails
alone, the rest of its batch is appended.
"""

from __future__ import annotations

import secrets
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Final

import msgpack
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from protocol import limits
from protocol.errors import InputError, ParameterError, StateError, TwinauditError
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
from protocol.merkle import MerkleTree
from protocol.signer import Signer

from ..signing import as_signer
from .sql import Cursor, SqlDatabase, utc_now
from .store import (
    EscrowLog,
    RootAlreadyEscrowedError,
    SignedCheckpoint,
    StoredEntry,
    UnknownRecordError,
    check_index,
)

#: Most escrow requests appended in one transaction.
MAX_COMMIT_BATCH: Final = 256
#: Entries read per query when the in-memory log catches up with the database.
LOAD_CHUNK: Final = 10_000


def _entry_root(data: bytes, index: int) -> bytes:
    """Return the ``root`` of a stored log entry.

    Only for entries read back from the store once the head root vouches for their
    bytes (:meth:`SqlEscrowLog._catch_up`): a plain decode keeps rebuilding a long
    log fast, where the strict one costs twenty times more.
    """
    try:
        root = msgpack.unpackb(data, raw=False)["root"]
    except Exception:  # any malformation: the store is corrupt, whatever msgpack says
        root = None
    if not isinstance(root, bytes) or len(root) != limits.HASH_BYTES:
        raise StateError(f"stored entry {index} has no 32-byte root: the escrow store is corrupt")
    return root


@dataclass(frozen=True, slots=True)
class _Appended:
    """A durable new entry, its ``rho``, and the log's root once it was appended."""

    entry: LogEntry
    rho: bytes
    log_root: bytes


@dataclass
class _Ticket:
    """One queued commit: its request, then its result or error."""

    request: EscrowRequest
    result: _Appended | None = None
    error: BaseException | None = None
    done: bool = False


class SqlEscrowLog(EscrowLog):
    """An :class:`~.store.EscrowLog` in a SQL database (see the module's notes)."""

    def __init__(
        self,
        db: SqlDatabase,
        signing_key: Signer | Ed25519PrivateKey,
        *,
        clock: Callable[[], datetime] | None = None,
        entropy: Callable[[int], bytes] | None = None,
    ) -> None:
        """Rebuild the log from ``db`` (open, its schema made) and check it.

        ``entropy(n)`` returns ``n`` random bytes for each record's ``rho``; it is the
        OS CSPRNG unless a test injects a seeded source to make a run reproducible.
        """
        self._db = db
        self._signer = as_signer(signing_key)
        self._public = self._signer.public_key
        self._key_id = self._signer.key_id
        self._clock = clock or utc_now
        self._entropy = entropy  # None: the OS CSPRNG, looked up at each draw
        self._lock = db.lock  # the connection and the tree
        self._queue = threading.Condition()  # the queue of pending commits
        self._pending: deque[_Ticket] = deque()
        self._appending = False  # a thread is appending queued requests
        self._tree: MerkleTree | None = None  # None: rebuild from the database
        self._roots: dict[bytes, int] = {}  # each entry's root -> its index, with the tree
        with self._lock:
            self._verify_log()

    def _catch_up(self, cur: Cursor, *, lock: bool = False) -> int:
        """Append to the in-memory log what the database has beyond it; check the root.

        Returns the log size. ``lock`` locks the head row (write transactions only).
        """
        size, root = self._db.head(cur, lock=lock)
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
        with self._db.transaction(write=False) as cur:
            return self._catch_up(cur)

    def _current_tree(self) -> MerkleTree:
        if self._tree is None:  # pragma: no cover - _catch_up sets it
            raise StateError("the in-memory log is not loaded")
        return self._tree

    # --- Opening -------------------------------------------------------------------------

    def _verify_log(self) -> None:
        """Rebuild the log from scratch and check it against the head and last checkpoint."""
        with self._db.transaction(write=False) as cur:
            size, _ = self._db.head(cur, lock=False)
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
        appended = ticket.result
        receipt = Receipt(
            arbiter=self._key_id,
            entry=appended.entry,
            rho=appended.rho,
            log_size=appended.entry.index + 1,
            log_root=appended.log_root,
        )
        return sign_receipt(receipt, self._signer)  # only now: the entry is durable (§9.3)

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
            self._db.check_open()
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
    ) -> list[_Appended | RootAlreadyEscrowedError]:
        """Append one entry per new root, durably; return the appended entry for each.

        A request whose root is in the log, or earlier in ``requests``, gets a
        :class:`RootAlreadyEscrowedError` in its place and draws no ``rho`` (§9.1).
        """
        appended = False
        try:
            with self._db.transaction(write=True) as cur:
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
        results: list[_Appended | RootAlreadyEscrowedError] = []
        for outcome in outcomes:
            if isinstance(outcome, RootAlreadyEscrowedError):
                results.append(outcome)
            else:
                entry, rho, _ = drawn[outcome]
                results.append(_Appended(entry, rho, tree.root(entry.index + 1)))
        return results

    def entry(self, index: int) -> StoredEntry:
        """Return log entry ``index`` and its secret ``rho``."""
        index = check_index(index, "log index")
        with self._lock, self._db.transaction(write=False) as cur:
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
        return StoredEntry(entry, rho)

    def size(self) -> int:
        """Return the number of entries in the log."""
        with self._lock:
            return self._sync()

    def latest_checkpoint(self) -> SignedCheckpoint:
        """Return the signed checkpoint of the current log (one per size, reused)."""
        with self._lock:
            with self._db.transaction(write=False) as cur:
                size = self._catch_up(cur)
                cur.execute("SELECT envelope FROM escrow_checkpoints WHERE size = ?", (size,))
                row = cur.fetchone()
            root = self._current_tree().root(size)
            if row is None:
                # The time is read once, when the checkpoint is first signed.
                checkpoint = Checkpoint(
                    arbiter=self._key_id, size=size, root=root, time=format_time(self._clock())
                )
                signed = sign_checkpoint(checkpoint, self._signer)
                with self._db.transaction(write=True) as cur:
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
        return SignedCheckpoint(stored, envelope)

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
