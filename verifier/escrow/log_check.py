"""The full check of an escrow log: every entry, node, root and checkpoint (spec §9).

Opening a store reads O(log n) rows (:mod:`.escrow_log`); :func:`check_log` reads them
all, in one read transaction (one snapshot), streaming: memory stays O(log n) plus
one chunk of entries, time is O(n). ``twinaudit verifier store-check`` runs it. It
checks that

1. the entries are numbered ``0 .. size-1`` with nothing else stored, each decodes
   strictly, names its own index and, for an escrow entry (§9.2), commits to its
   stored ``rho`` (a claim-start or verdict entry, §9.6, has an empty one);
2. ``escrow_roots`` maps each escrow entry's root to its index and holds nothing else
   (the one-record-per-root rule, §9.1);
3. the tree rebuilt from the entries has exactly the stored nodes of ``escrow_tree``
   (every leaf hash and every complete subtree), and its root is the head's;
4. every stored checkpoint carries the arbiter's valid signature over the size and
   root it is stored under, and that root is the rebuilt tree's at that size.

Any difference raises :class:`~twinaudit.protocol.errors.StateError` naming the first one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from twinaudit.protocol.errors import StateError, TwinauditError
from twinaudit.protocol.escrow_messages import LogEntry, rho_digest, verify_checkpoint
from twinaudit.protocol.log_entries import decode_log_leaf
from twinaudit.protocol.merkle import Frontier, NodeKey, leaf_hash

from .cursor import Cursor
from .log_tables import LOAD_CHUNK, find_roots
from .sql import SqlDatabase

#: The message every failed check ends with.
_CORRUPT: Final = "the escrow store is corrupt"


@dataclass(frozen=True)
class LogCheck:
    """What a full check read: entries, tree nodes and checkpoints, all found sound."""

    entries: int
    nodes: int
    checkpoints: int
    root: bytes


def check_log(db: SqlDatabase, public_key: Ed25519PublicKey) -> LogCheck:
    """Check every row of the log in ``db`` (see the module's notes); StateError if any is off."""
    with db.lock, db.transaction(write=False) as cur:
        size, head_root = db.head(cur, lock=False)
        cur.execute("SELECT size, root, envelope FROM escrow_checkpoints ORDER BY size")
        checkpoints = [(int(s), bytes(r), bytes(e)) for s, r, e in cur.fetchall()]
        _check_counts(cur, size)
        expected_roots = _check_checkpoint_signatures(checkpoints, public_key, size)
        frontier = Frontier()
        if 0 in expected_roots and expected_roots[0] != frontier.root():
            raise StateError(f"the checkpoint of size 0 does not match the log: {_CORRUPT}")
        escrows = 0
        while frontier.size < size:
            end = min(size, frontier.size + LOAD_CHUNK)
            escrows += _check_chunk(cur, frontier, end, expected_roots)
        cur.execute("SELECT COUNT(*) FROM escrow_roots")
        if int(cur.fetchone()[0]) != escrows:
            raise StateError(f"escrow_roots holds roots of no escrow entry: {_CORRUPT}")
        if frontier.root() != head_root:
            raise StateError(
                f"the entries hash to {frontier.root().hex()}, not the head root"
                f" {head_root.hex()}: {_CORRUPT}"
            )
    return LogCheck(size, 2 * size - size.bit_count(), len(checkpoints), head_root)


def _check_counts(cur: Cursor, size: int) -> None:
    """Check that no table holds a row beyond the log's ``size`` entries."""
    counts = {
        "entries": ("SELECT COUNT(*), MIN(idx), MAX(idx) FROM escrow_entries", size),
        "tree nodes": ("SELECT COUNT(*), 0, 0 FROM escrow_tree", 2 * size - size.bit_count()),
    }
    cur.execute("SELECT COUNT(*), MIN(idx), MAX(idx) FROM escrow_roots")
    count, low, high = cur.fetchone()
    if int(count) and not 0 <= int(low) <= int(high) < size:
        raise StateError(f"escrow_roots names entries {low}..{high} of {size}: {_CORRUPT}")
    for what, (query, expected) in counts.items():
        cur.execute(query)
        count, low, high = cur.fetchone()
        if int(count) != expected or (
            what != "tree nodes" and size and (int(low), int(high)) != (0, size - 1)
        ):
            raise StateError(
                f"the store holds {count} {what} (indices {low}..{high}) where a log of"
                f" {size} entries has {expected}: {_CORRUPT}"
            )


def _check_checkpoint_signatures(
    checkpoints: list[tuple[int, bytes, bytes]], public_key: Ed25519PublicKey, size: int
) -> dict[int, bytes]:
    """Verify each checkpoint's signature and fields; return the root each size must have."""
    roots: dict[int, bytes] = {}
    for checkpoint_size, root, envelope in checkpoints:
        try:
            signed = verify_checkpoint(envelope, public_key)
        except TwinauditError as exc:
            raise StateError(
                f"the checkpoint of size {checkpoint_size} does not verify ({exc}): {_CORRUPT}"
            ) from None
        if (signed.size, signed.root) != (checkpoint_size, root) or checkpoint_size > size:
            raise StateError(
                f"the checkpoint of size {checkpoint_size} does not match its row or the"
                f" log: {_CORRUPT} or was rolled back"
            )
        roots[checkpoint_size] = root
    return roots


def _check_chunk(cur: Cursor, frontier: Frontier, end: int, expected: dict[int, bytes]) -> int:
    """Check the entries ``[frontier.size, end)``, their roots and nodes; advance ``frontier``.

    Returns how many of them are escrow entries (each has its row in ``escrow_roots``).
    """
    start = frontier.size
    cur.execute(
        "SELECT idx, entry, rho FROM escrow_entries WHERE idx >= ? AND idx < ? ORDER BY idx",
        (start, end),
    )
    rows = cur.fetchall()
    made: dict[NodeKey, bytes] = {}
    roots: dict[bytes, int] = {}
    for idx, raw, rho in rows:
        index, data = int(idx), bytes(raw)
        if index != frontier.size:
            raise StateError(f"the stored log has no entry {frontier.size}: {_CORRUPT}")
        try:
            entry = decode_log_leaf(data)
            digest = rho_digest(bytes(rho)) if isinstance(entry, LogEntry) else b""
        except TwinauditError as exc:
            raise StateError(f"stored entry {index} does not decode ({exc}): {_CORRUPT}") from None
        if isinstance(entry, LogEntry):
            if entry.rho_digest != digest:
                raise StateError(f"stored entry {index}'s rho does not match: {_CORRUPT}")
            roots[entry.root] = index
        elif bytes(rho):
            raise StateError(f"stored entry {index} is a claim entry with a rho: {_CORRUPT}")
        if entry.index != index:
            raise StateError(f"stored entry {index} names index {entry.index}: {_CORRUPT}")
        made.update(frontier.append(leaf_hash(data)))
        if frontier.size in expected and expected[frontier.size] != frontier.root():
            raise StateError(
                f"the checkpoint of size {frontier.size} does not match the log: {_CORRUPT}"
            )
    if frontier.size != end:
        raise StateError(f"the stored log has no entry {frontier.size}: {_CORRUPT}")
    if find_roots(cur, list(roots)) != roots:
        raise StateError(f"escrow_roots does not index entries {start}..{end - 1}: {_CORRUPT}")
    if _stored_nodes(cur, start, end) != made:
        raise StateError(
            f"the stored tree nodes of entries {start}..{end - 1} are not those of the"
            f" entries: {_CORRUPT}"
        )
    return len(roots)


def _stored_nodes(cur: Cursor, start: int, end: int) -> dict[NodeKey, bytes]:
    """Return the stored nodes that the leaves ``[start, end)`` complete."""
    nodes: dict[NodeKey, bytes] = {}
    height = 0
    while (end >> height) > 0:
        # Node (height, i) is completed by leaf (i + 1)·2**height - 1.
        low = ((start + (1 << height)) >> height) - 1
        high = end >> height
        if low < high:
            cur.execute(
                "SELECT idx, hash FROM escrow_tree WHERE height = ? AND idx >= ? AND idx < ?",
                (height, low, high),
            )
            nodes.update(((height, int(i)), bytes(h)) for i, h in cur.fetchall())
        height += 1
    return nodes
