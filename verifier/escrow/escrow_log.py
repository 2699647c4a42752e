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

**The tree.** The log's Merkle tree lives in the database beside the entries, as the
hashes of its complete subtrees (:mod:`.log_tables`); the log holds only the head's
frontier, the O(log n) subtree roots that make up the tree. Opening reads the head,
checks that the last entry is where the head says, that the frontier's stored nodes
fold to the head's root, and that the last checkpoint's root is the one the stored
nodes give at its size: O(log n) rows, whatever the log's length. Before every
operation the log reads the head again; when another process appended, it reads the
new frontier (O(log n) rows, however many entries were appended) and checks it
against the head root, so several arbiter processes may share one database. An entry
read for a claim is checked against the head root through its inclusion proof. What
opening does not read, every entry and every node, is checked by :func:`.log_check.check_log`
(``twinaudit verifier store-check``), which streams the whole log.

**One record per root** (§9.1). The table ``escrow_roots`` indexes every entry's root.
An append looks its requests' roots up there with the head row locked, so no two
processes can both escrow one root; a refused request fails alone, the rest of its
batch is appended.
"""

from __future__ import annotations

import secrets
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Final

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from twinaudit.protocol import limits
from twinaudit.protocol.checkpoint_note import arbiter_text, checkpoint_note_from_signature
from twinaudit.protocol.errors import (
    InputError,
    ParameterError,
    RootAlreadyEscrowedError,
    StateError,
    TwinauditError,
    UnknownRecordError,
)
from twinaudit.protocol.escrow_messages import (
    Checkpoint,
    EscrowRequest,
    LogEntry,
    Receipt,
    format_time,
    make_entry,
    rho_digest,
    sign_checkpoint,
    sign_receipt,
    verify_checkpoint,
)
from twinaudit.protocol.log_entries import decode_log_leaf
from twinaudit.protocol.merkle import (
    Frontier,
    consistency_ranges,
    inclusion_ranges,
    verify_inclusion,
)
from twinaudit.protocol.signer import NoteSigner, Signer

from ..signing import as_signer
from .cursor import Cursor
from .log_tables import append_entries, find_roots, read_frontier, read_proof, read_root
from .sql import SqlDatabase, utc_now
from .store import (
    EscrowLog,
    SignedCheckpoint,
    StoredEntry,
    check_index,
)

#: Most escrow requests appended in one transaction.
MAX_COMMIT_BATCH: Final = 256


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
        """Open the log in ``db`` (open, its schema made) and check its head (see above).

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
        self._frontier = Frontier()  # the head's, as last read and checked
        self._head_root = self._frontier.root()
        self._note: tuple[int, bytes, bytes] | None = None  # the last note: size, root, note
        with self._lock:
            self._open_checks()

    def _catch_up(self, cur: Cursor, *, lock: bool = False) -> int:
        """Read the head; when it moved, read its frontier and check it. Return the size.

        O(log n) rows when another process appended, one row otherwise. ``lock`` locks
        the head row (write transactions only).
        """
        size, root = self._db.head(cur, lock=lock)
        if size == self._frontier.size and root == self._head_root:
            return size
        if size < self._frontier.size:
            raise StateError(
                f"the stored log has {size} entries, fewer than {self._frontier.size} seen:"
                " the escrow store was rolled back"
            )
        frontier = read_frontier(cur, size)
        if frontier.root() != root:
            raise StateError(
                f"the stored tree's root at size {size} is {frontier.root().hex()}, not the"
                f" head root {root.hex()}: the escrow store is corrupt"
            )
        self._frontier, self._head_root = frontier, root
        return size

    def _sync(self) -> int:
        """Catch up with the database in a read transaction and return the log size."""
        with self._db.transaction(write=False) as cur:
            return self._catch_up(cur)

    # --- Opening -------------------------------------------------------------------------

    def _open_checks(self) -> None:
        """Check the head against the entries, the tree and the last checkpoint (O(log n))."""
        with self._db.transaction(write=False) as cur:
            size, _ = self._db.head(cur, lock=False)
            cur.execute("SELECT MAX(idx) FROM escrow_entries")
            high = cur.fetchone()[0]
            if (-1 if high is None else int(high)) != size - 1:
                raise StateError(
                    f"the escrow store's last entry is {high} but its head says {size} entries"
                )
            self._catch_up(cur)
            cur.execute("SELECT size, root FROM escrow_checkpoints ORDER BY size DESC LIMIT 1")
            last = cur.fetchone()
            if last is not None:
                checkpoint_size, checkpoint_root = int(last[0]), bytes(last[1])
                if checkpoint_size > size or read_root(cur, checkpoint_size) != checkpoint_root:
                    raise StateError(
                        f"a stored checkpoint of size {checkpoint_size} does not match the log:"
                        " the escrow store is corrupt or was rolled back"
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
        with self._db.transaction(write=True) as cur:
            size = self._catch_up(cur, lock=True)  # the head is locked: roots are final
            held = find_roots(cur, [request.root for request in requests])
            drawn: list[tuple[LogEntry, bytes, bytes]] = []
            outcomes: list[int | RootAlreadyEscrowedError] = []  # int: position in drawn
            for request in requests:
                index = held.get(request.root)
                if index is not None:
                    outcomes.append(RootAlreadyEscrowedError(request.root, index))
                    continue
                rho = (self._entropy or secrets.token_bytes)(limits.RHO_BYTES)  # fresh (§9.2)
                entry = make_entry(request, index=size + len(drawn), time=now, rho=rho)
                held[request.root] = entry.index  # a later request of the batch is refused
                outcomes.append(len(drawn))
                drawn.append((entry, rho, entry.encode()))
            frontier = self._frontier.copy()  # kept only once the transaction commits
            log_roots = append_entries(
                cur, frontier, [(data, rho, entry.root) for entry, rho, data in drawn]
            )
        if drawn:
            self._frontier, self._head_root = frontier, log_roots[-1]
        # Committed and durable: the receipts may now be signed (§9.3).
        results: list[_Appended | RootAlreadyEscrowedError] = []
        for outcome in outcomes:
            if isinstance(outcome, RootAlreadyEscrowedError):
                results.append(outcome)
            else:
                entry, rho, _ = drawn[outcome]
                results.append(_Appended(entry, rho, log_roots[outcome]))
        return results

    def entry(self, index: int) -> StoredEntry:
        """Return log entry ``index`` and its secret ``rho``."""
        index = check_index(index, "log index")
        with self._lock, self._db.transaction(write=False) as cur:
            size = self._catch_up(cur)
            if index >= size:
                raise UnknownRecordError(f"the log has no entry {index} (size {size})")
            cur.execute("SELECT entry, rho FROM escrow_entries WHERE idx = ?", (index,))
            row = cur.fetchone()
            if row is None:
                raise StateError(f"the stored log has no entry {index}: the store is corrupt")
            data, rho = (bytes(value) for value in row)
            proof = read_proof(cur, inclusion_ranges(index, size))
            root = self._head_root
        try:
            # The head's root vouches for the entry: a changed entry or node shows here.
            verify_inclusion(leaf_data=data, index=index, size=size, proof=proof, root=root)
            leaf = decode_log_leaf(data)
        except TwinauditError as exc:
            raise StateError(f"stored entry {index} is corrupt: {exc}") from None
        if not isinstance(leaf, LogEntry):
            raise UnknownRecordError(
                f"log entry {index} is a claim or verdict entry, not an escrow record"
            )
        entry = leaf
        try:
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
            root = self._head_root
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

    def checkpoint_note(self, checkpoint: SignedCheckpoint) -> bytes | None:
        """Return ``checkpoint`` as the arbiter's signed checkpoint note (spec §9.5.4).

        Ed25519 signatures are deterministic, so the note of one size is the same bytes
        each time: the last one is kept in memory, none is stored. None where the
        signer signs no notes.
        """
        if not isinstance(self._signer, NoteSigner):
            return None
        size, root = checkpoint.checkpoint.size, checkpoint.checkpoint.root
        kept = self._note
        if kept is not None and kept[0] == size and kept[1] == root:
            return kept[2]
        text = arbiter_text(size, root, self._public).encode("utf-8")
        signature = self._signer.sign_note(text)
        note = checkpoint_note_from_signature(size, root, self._public, signature)
        self._note = (size, root, note)
        return note

    def leaves(self, start: int, count: int) -> list[bytes]:
        """Return the leaf data of up to ``count`` entries from ``start`` (no ``rho``)."""
        start = check_index(start, "log index")
        count = check_index(count, "entry count")
        with self._lock, self._db.transaction(write=False) as cur:
            size = self._catch_up(cur)
            if start >= size:
                raise UnknownRecordError(f"the log has no entry {start} (size {size})")
            end = min(size, start + count)
            cur.execute(
                "SELECT idx, entry FROM escrow_entries WHERE idx >= ? AND idx < ? ORDER BY idx",
                (start, end),
            )
            rows = cur.fetchall()
        if [int(row[0]) for row in rows] != list(range(start, end)):
            raise StateError(f"the stored log lacks entries in {start}..{end - 1}: it is corrupt")
        return [bytes(row[1]) for row in rows]

    def inclusion_proof(self, index: int, size: int) -> list[bytes]:
        """Return the inclusion proof of entry ``index`` in the log of ``size`` entries."""
        index = check_index(index, "log index")
        size = check_index(size, "log size")
        with self._lock, self._db.transaction(write=False) as cur:
            current = self._catch_up(cur)
            if size > current:
                raise UnknownRecordError(f"the log has {current} entries, not {size}")
            if index >= size:
                raise ParameterError(f"index {index} is not below the log size {size}")
            return read_proof(cur, inclusion_ranges(index, size))

    def consistency_proof(self, old_size: int, new_size: int) -> list[bytes]:
        """Return the consistency proof between two sizes of the log."""
        old_size = check_index(old_size, "old log size")
        new_size = check_index(new_size, "new log size")
        with self._lock, self._db.transaction(write=False) as cur:
            current = self._catch_up(cur)
            if new_size > current:
                raise UnknownRecordError(f"the log has {current} entries, not {new_size}")
            if old_size > new_size:
                raise ParameterError(f"old size {old_size} is larger than new size {new_size}")
            return read_proof(cur, consistency_ranges(old_size, new_size))
