"""The escrow log's rows: entries, their roots, the Merkle tree's nodes (spec §6.2, §9).

Nothing here grows with the log's history: every function reads or writes O(log n)
rows, or the rows of the entries it appends.

- ``escrow_tree`` holds every complete subtree of the log's tree, ``(height, idx,
  hash)``: leaf hashes at height 0, and at height ``h`` the subtree of leaves
  ``[idx·2**h, (idx+1)·2**h)``. An append writes its leaf and the subtrees it
  completes (amortised two rows per entry). The head's frontier
  (:class:`~twinaudit.protocol.merkle.Frontier`, O(log n) rows) gives the root; a proof is
  O(log n) rows (:func:`read_proof`).
- ``escrow_roots`` maps each escrowed root to its entry's index; its primary key is
  the one-record-per-root rule (§9.1) as an index, so an append checks its roots
  with one lookup each.

:func:`fill_tree` derives both tables from the entries when a database made before
they existed (schema 4 or older) is upgraded.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Final, TypeVar

import msgpack

from twinaudit.protocol import limits
from twinaudit.protocol.errors import StateError
from twinaudit.protocol.merkle import Frontier, NodeKey, fold_nodes, leaf_hash, range_nodes

from .cursor import Cursor

#: Keys looked up per query (each key is two parameters).
LOOKUP_CHUNK: Final = 100
#: Entries read per query when a whole log is read (upgrade, full check).
LOAD_CHUNK: Final = 10_000


def entry_root(data: bytes, index: int) -> bytes:
    """Return the ``root`` of a stored log entry (a plain decode: fast on a long log).

    Raises StateError when the entry has no 32-byte root.
    """
    try:
        root = msgpack.unpackb(data, raw=False)["root"]
    except Exception:  # any malformation: the store is corrupt, whatever msgpack says
        root = None
    if not isinstance(root, bytes) or len(root) != limits.HASH_BYTES:
        raise StateError(f"stored entry {index} has no 32-byte root: the escrow store is corrupt")
    return root


_T = TypeVar("_T")


def _chunks(items: Sequence[_T], size: int) -> Iterable[Sequence[_T]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def read_nodes(cur: Cursor, keys: Iterable[NodeKey]) -> dict[NodeKey, bytes]:
    """Return the stored hashes of the subtrees ``keys``; StateError if one is missing."""
    wanted = sorted(set(keys))
    found: dict[NodeKey, bytes] = {}
    for chunk in _chunks(wanted, LOOKUP_CHUNK):
        where = " OR ".join(["(height = ? AND idx = ?)"] * len(chunk))
        cur.execute(
            "SELECT height, idx, hash FROM escrow_tree WHERE " + where,
            [value for key in chunk for value in key],
        )
        for height, idx, digest in cur.fetchall():
            found[(int(height), int(idx))] = bytes(digest)
    for key in wanted:
        if key not in found or len(found[key]) != limits.HASH_BYTES:
            raise StateError(
                f"the escrow store has no tree node at height {key[0]}, index {key[1]}:"
                " the escrow store is corrupt"
            )
    return found


def read_frontier(cur: Cursor, size: int) -> Frontier:
    """Return the frontier of the stored tree of ``size`` leaves (O(log n) rows)."""
    keys = range_nodes(0, size) if size else []
    nodes = read_nodes(cur, keys)
    return Frontier(size, [nodes[key] for key in keys])


def read_proof(cur: Cursor, ranges: Sequence[tuple[int, int]]) -> list[bytes]:
    """Return the hash of each leaf range (those of a proof), from stored subtrees."""
    split = [range_nodes(lo, hi) for lo, hi in ranges]
    nodes = read_nodes(cur, (key for keys in split for key in keys))
    return [fold_nodes([nodes[key] for key in keys]) for keys in split]


def read_root(cur: Cursor, size: int) -> bytes:
    """Return the root of the log's first ``size`` entries, from stored subtrees."""
    return read_frontier(cur, size).root()


def find_roots(cur: Cursor, roots: Sequence[bytes]) -> dict[bytes, int]:
    """Return the index of each of ``roots`` already escrowed (the others are absent)."""
    found: dict[bytes, int] = {}
    for chunk in _chunks(sorted(set(roots)), LOOKUP_CHUNK):
        cur.execute(
            "SELECT root, idx FROM escrow_roots WHERE root IN ("
            + ", ".join(["?"] * len(chunk))
            + ")",
            list(chunk),
        )
        for root, idx in cur.fetchall():
            found[bytes(root)] = int(idx)
    return found


def append_entries(
    cur: Cursor, frontier: Frontier, entries: Sequence[tuple[bytes, bytes, bytes | None]]
) -> list[bytes]:
    """Store entries ``(entry, rho, root)`` after the log ``frontier``; set the head.

    Run in a write transaction that locked the head row and found ``frontier`` to be
    the head's; ``frontier`` is advanced past the entries (copy it first to keep the
    old one). ``root`` is None, and ``rho`` empty, for a claim-start or verdict entry
    (spec §9.6), which escrows no root. Returns the log's root after each entry, for
    the receipts.
    """
    first = frontier.size
    nodes: list[tuple[int, int, bytes]] = []
    roots: list[bytes] = []
    for data, _, _ in entries:
        for (height, idx), digest in frontier.append(leaf_hash(data)):
            nodes.append((height, idx, digest))
        roots.append(frontier.root())
    if not entries:
        return roots
    cur.executemany(
        "INSERT INTO escrow_entries (idx, entry, rho) VALUES (?, ?, ?)",
        [(first + i, data, rho) for i, (data, rho, _) in enumerate(entries)],
    )
    cur.executemany(
        "INSERT INTO escrow_roots (root, idx) VALUES (?, ?)",
        [(root, first + i) for i, (_, _, root) in enumerate(entries) if root is not None],
    )
    cur.executemany("INSERT INTO escrow_tree (height, idx, hash) VALUES (?, ?, ?)", nodes)
    cur.execute(
        "UPDATE escrow_head SET size = ?, root = ? WHERE id = 1", (frontier.size, roots[-1])
    )
    return roots


def append_leaf(cur: Cursor, make: Callable[[int], bytes]) -> tuple[int, bytes]:
    """Append one claim-start or verdict entry (spec §9.6) to the log; set the head.

    Run in a write transaction that locked the head row. ``make(index)`` returns the
    leaf data of the entry at ``index``, the log's size. Reads the head's frontier
    (O(log n) rows) and checks it against the head root, so the cost does not grow
    with the log. Returns the entry's index and the log's root once it is appended.
    """
    cur.execute("SELECT size, root FROM escrow_head WHERE id = 1")
    row = cur.fetchone()
    if row is None:
        raise StateError("the escrow store has no head row")
    size, head_root = int(row[0]), bytes(row[1])
    frontier = read_frontier(cur, size)
    if frontier.root() != head_root:
        raise StateError(
            f"the stored tree's root at size {size} is not the head root: the escrow store"
            " is corrupt"
        )
    (root,) = append_entries(cur, frontier, [(make(size), b"", None)])
    return size, root


def fill_tree(cur: Cursor) -> None:
    """Derive ``escrow_tree`` and ``escrow_roots`` from the stored entries (the upgrade).

    Run once, in the transaction that raises the schema to 5 (so O(n), once). The
    entries must hash to the head's root; otherwise StateError (the store is corrupt,
    and the upgrade is rolled back).
    """
    cur.execute("SELECT size, root FROM escrow_head WHERE id = 1")
    row = cur.fetchone()
    if row is None:
        raise StateError("the escrow store has no head row")
    size, head_root = int(row[0]), bytes(row[1])
    cur.execute("DELETE FROM escrow_tree")
    cur.execute("DELETE FROM escrow_roots")
    frontier = Frontier()
    seen: set[bytes] = set()
    while frontier.size < size:
        cur.execute(
            "SELECT idx, entry FROM escrow_entries WHERE idx >= ? AND idx < ? ORDER BY idx",
            (frontier.size, min(size, frontier.size + LOAD_CHUNK)),
        )
        rows = cur.fetchall()
        if not rows:
            raise StateError(f"the stored log has no entry {frontier.size}")
        nodes: list[tuple[int, int, bytes]] = []
        roots: list[tuple[bytes, int]] = []
        for idx, data in rows:
            if int(idx) != frontier.size:
                raise StateError(f"the stored log has no entry {frontier.size}")
            root = entry_root(bytes(data), int(idx))
            if root in seen:
                raise StateError(f"stored entry {idx} escrows a root escrowed before it")
            seen.add(root)
            roots.append((root, int(idx)))
            for (height, position), digest in frontier.append(leaf_hash(bytes(data))):
                nodes.append((height, position, digest))
        cur.executemany("INSERT INTO escrow_tree (height, idx, hash) VALUES (?, ?, ?)", nodes)
        cur.executemany("INSERT INTO escrow_roots (root, idx) VALUES (?, ?)", roots)
    if frontier.root() != head_root:
        raise StateError(
            f"the stored entries hash to {frontier.root().hex()}, not the head root"
            f" {head_root.hex()}: the escrow store is corrupt"
        )
