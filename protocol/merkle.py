"""RFC 6962 / RFC 9162 Merkle trees: roots, inclusion and consistency proofs (spec §6.2).

The tree hash is the one Certificate Transparency defines (RFC 6962 §2.1, restated in
RFC 9162 §2.1.1), with plain SHA-256 and no tags:

- the hash of the empty tree is ``SHA-256()``;
- a leaf hashes as ``SHA-256(0x00 ‖ data)``, an interior node as
  ``SHA-256(0x01 ‖ left ‖ right)``;
- a tree of ``n > 1`` leaves splits at ``k``, the largest power of two below ``n``:
  the first ``k`` leaves form the left subtree, the rest the right one.

:class:`MerkleTree` is the prover's side, append-only. It keeps, for each level, the
hashes of the *complete* subtrees of that level in one ``bytearray`` (32 bytes per
node), which is about 64 bytes per leaf and all it ever needs: every subtree the RFC's
recursion visits is either complete (stored) or a right-hand remainder whose hash is
folded from stored nodes in O(log n). So roots and proofs for any earlier size cost
O(log n) hashes too.

A prover that keeps its nodes elsewhere (the arbiter's escrow log keeps them in its
database) uses the same pieces without the in-memory tree: :class:`Frontier` holds the
O(log n) roots of the complete subtrees that make up the tree (its "compact range"),
enough to compute the root and to append, and says which nodes each append completes;
:func:`inclusion_ranges`, :func:`consistency_ranges` and :func:`range_nodes` name the
stored nodes a proof needs (O(log n) of them), and :func:`fold_nodes` combines them.

:func:`verify_inclusion`, :func:`verify_inclusion_hash` and :func:`verify_consistency`
are the verifier's side. They check the shape of their input (sizes in range, every
hash exactly 32 bytes, the proof exactly as long as the RFC's definitions make it for
the given sizes) before hashing anything, and raise :class:`~twinaudit.protocol.errors.ProofError`
when it is wrong; a well-shaped proof that leads elsewhere raises
:class:`~twinaudit.protocol.errors.RootMismatchError`, which carries both roots. They return
``None`` on success: a verification never answers ``False``.

An inclusion proof does not by itself bind the tree size: for some pairs of sizes the
verification computes exactly the same hashes (e.g. index 5 in trees of 7 and 8 leaves).
A verifier MUST take the size from the same authenticated source as the root (the
signed escrow receipt), never from the prover alone.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from typing import Final, NamedTuple, TypeAlias

from . import limits
from .errors import InputError, ParameterError, ProofError, RootMismatchError

#: Root of the tree with no leaves: SHA-256 of the empty string (RFC 6962 §2.1).
EMPTY_ROOT: Final = hashlib.sha256(b"").digest()

#: Largest tree size a proof can be about: tree sizes and indices travel as uint64.
MAX_TREE_SIZE: Final = (1 << 64) - 1

_LEAF_PREFIX: Final = b"\x00"
_NODE_PREFIX: Final = b"\x01"
_HASH: Final = limits.HASH_BYTES

#: What a leaf's data may be: a bytes-like object, hashed as it stands.
LeafData: TypeAlias = bytes | bytearray | memoryview

#: A complete subtree, ``(height, index)``: leaves ``[index·2**height, (index+1)·2**height)``.
NodeKey: TypeAlias = tuple[int, int]


def leaf_hash(data: LeafData) -> bytes:
    """Return the RFC 6962 leaf hash ``SHA-256(0x00 ‖ data)`` (32 bytes)."""
    digest = hashlib.sha256(_LEAF_PREFIX)
    digest.update(data)
    return digest.digest()


def node_hash(left: bytes, right: bytes) -> bytes:
    """Return the RFC 6962 interior node hash ``SHA-256(0x01 ‖ left ‖ right)``."""
    return hashlib.sha256(_NODE_PREFIX + left + right).digest()


# --- The shape of a proof -------------------------------------------------------------
#
# Both proofs are defined by a recursion on D[lo:hi] that splits at the largest power of
# two below the range's size. The functions below walk that recursion without hashing,
# and say which subtree hash each proof element is and on which side it is combined.
# The prover uses the ranges; the verifier uses only the sides and the count, which is
# the exact proof length.


class _Step(NamedTuple):
    """One proof element: the hash of leaves [lo, hi), combined on the given side."""

    lo: int
    hi: int
    on_right: bool  # the element's subtree lies right of the path being hashed upward


def _split(n: int) -> int:
    """Return k, the largest power of two smaller than ``n`` (RFC 6962 §2.1), for n > 1."""
    return 1 << ((n - 1).bit_length() - 1)


def _inclusion_steps(index: int, size: int) -> list[_Step]:
    """Return the elements of PATH(index, D[0:size]) (RFC 6962 §2.1.1), leaf first.

    PATH(m, D[n]) = PATH(m, D[0:k]) : MTH(D[k:n]) when m < k, and
    PATH(m - k, D[k:n]) : MTH(D[0:k]) otherwise; the path of a single leaf is empty.
    Requires 0 <= index < size.
    """
    steps: list[_Step] = []
    lo, hi = 0, size
    while hi - lo > 1:
        mid = lo + _split(hi - lo)
        if index < mid:
            steps.append(_Step(mid, hi, on_right=True))
            hi = mid
        else:
            steps.append(_Step(lo, mid, on_right=False))
            lo = mid
    steps.reverse()  # the recursion appends on the way out: deepest sibling first
    return steps


def _consistency_steps(old_size: int, new_size: int) -> tuple[tuple[int, int] | None, list[_Step]]:
    """Return the elements of PROOF(old_size, D[0:new_size]) (RFC 6962 §2.1.2).

    SUBPROOF(m, D[n], b) is [] when m = n and b holds, [MTH(D[n])] when m = n and not b;
    otherwise SUBPROOF(m, D[0:k], b) : MTH(D[k:n]) when m <= k, and
    SUBPROOF(m - k, D[k:n], false) : MTH(D[0:k]) when m > k.

    Returns ``(seed, steps)``: ``seed`` is the range whose hash is the first proof
    element (None where b still held at the bottom, so the old root itself is that
    subtree and is not sent), ``steps`` the remaining elements, bottom first. A step on
    the left lies in both trees; one on the right only in the new tree.
    Requires 0 < old_size < new_size.
    """
    steps: list[_Step] = []
    lo, hi = 0, new_size
    old_is_subtree = True  # b in the RFC: true until the walk descends to a right child
    while hi != old_size:  # m = old_size - lo differs from n = hi - lo
        mid = lo + _split(hi - lo)
        if old_size <= mid:
            steps.append(_Step(mid, hi, on_right=True))
            hi = mid
        else:
            steps.append(_Step(lo, mid, on_right=False))
            lo = mid
            old_is_subtree = False
    steps.reverse()
    return (None if old_is_subtree else (lo, hi)), steps


def inclusion_ranges(index: int, size: int) -> list[tuple[int, int]]:
    """Return the leaf ranges ``[lo, hi)`` whose hashes form PATH(index, D[0:size]), in order.

    Requires ``0 <= index < size``; each range is one the RFC's recursion visits, so
    :func:`range_nodes` splits it into stored complete subtrees.
    """
    return [(step.lo, step.hi) for step in _inclusion_steps(index, size)]


def consistency_ranges(old_size: int, new_size: int) -> list[tuple[int, int]]:
    """Return the leaf ranges whose hashes form PROOF(old_size, D[0:new_size]), in order.

    Empty when ``old_size`` is 0 or equals ``new_size`` (spec §6.2); requires
    ``0 <= old_size <= new_size``.
    """
    if old_size in (0, new_size):
        return []
    seed, steps = _consistency_steps(old_size, new_size)
    head = [] if seed is None else [seed]
    return head + [(step.lo, step.hi) for step in steps]


def range_nodes(lo: int, hi: int) -> list[NodeKey]:
    """Return the complete subtrees whose hashes fold to MTH(D[lo:hi]), largest first.

    For a range the RFC's recursion visits (``lo`` a multiple of the smallest power
    of two not below ``hi - lo``): the recursion splits it into a complete left
    subtree and a shorter remainder, so the subtrees are those of the binary digits of
    ``hi - lo``, left to right. ``range_nodes(0, n)`` is the tree's frontier.
    """
    if not 0 <= lo < hi:
        raise ParameterError(f"[{lo}, {hi}) is not a non-empty leaf range")
    keys: list[NodeKey] = []
    while lo < hi:
        height = (hi - lo).bit_length() - 1
        if lo & ((1 << height) - 1):
            raise ParameterError(f"[{lo}, {hi}) is not a range the RFC 6962 recursion visits")
        keys.append((height, lo >> height))
        lo += 1 << height
    return keys


def fold_nodes(hashes: Sequence[bytes]) -> bytes:
    """Return the hash of a range from its :func:`range_nodes` hashes (largest first).

    MTH of a range is NODE(left subtree, MTH(remainder)), so the hashes fold from the
    right; no hashes is the empty tree.
    """
    if not hashes:
        return EMPTY_ROOT
    digest = hashes[-1]
    for left in reversed(hashes[:-1]):
        digest = node_hash(left, digest)
    return digest


class Frontier:
    """The roots of the complete subtrees that make up a tree of ``size`` leaves.

    One hash per binary digit set in ``size``, largest subtree first (the nodes
    :func:`range_nodes` names for ``[0, size)``): enough to compute the tree's root and
    to append leaves, in O(log n) memory. :meth:`append` returns the nodes each leaf
    completes, which a prover that answers proofs stores.
    """

    __slots__ = ("_hashes", "_size")

    def __init__(self, size: int = 0, hashes: Sequence[bytes] = ()) -> None:
        """Make the frontier of a tree of ``size`` leaves from its subtree roots."""
        if isinstance(size, bool) or not isinstance(size, int) or not 0 <= size <= MAX_TREE_SIZE:
            raise ParameterError(f"tree size {size!r} is outside [0, 2**64 - 1]")
        if len(hashes) != size.bit_count() or any(len(h) != _HASH for h in hashes):
            raise ParameterError(
                f"a tree of {size} leaves has {size.bit_count()} subtree roots of 32 bytes"
            )
        self._size = size
        self._hashes = [bytes(h) for h in hashes]

    @property
    def size(self) -> int:
        """The number of leaves."""
        return self._size

    @property
    def hashes(self) -> list[bytes]:
        """The subtree roots, largest subtree first."""
        return list(self._hashes)

    def copy(self) -> Frontier:
        """Return an independent copy."""
        return Frontier(self._size, self._hashes)

    def root(self) -> bytes:
        """Return MTH of the tree (:data:`EMPTY_ROOT` when it has no leaves)."""
        return fold_nodes(self._hashes)

    def append(self, leaf: bytes) -> list[tuple[NodeKey, bytes]]:
        """Append a leaf by its 32-byte leaf hash; return the nodes it completes.

        The first is the leaf itself, ``(0, index)``; then every subtree it closes,
        lowest first: amortised two nodes per leaf.
        """
        if len(leaf) != _HASH:
            raise InputError(f"a leaf hash is {_HASH} bytes, not {len(leaf)}")
        position, height, digest = self._size, 0, bytes(leaf)
        made: list[tuple[NodeKey, bytes]] = [((0, position), digest)]
        while position & 1:  # a right child: merge with the subtree on its left
            digest = node_hash(self._hashes.pop(), digest)
            height += 1
            position >>= 1
            made.append(((height, position), digest))
        self._hashes.append(digest)
        self._size += 1
        return made


# --- The prover -------------------------------------------------------------------------


class MerkleTree:
    """An append-only RFC 6962 Merkle tree that can prove any of its earlier states.

    Level ``h`` holds the hashes of the complete subtrees of ``2**h`` leaves, left to
    right, packed 32 bytes each in one ``bytearray``; leaf hashes are level 0. Appending
    a leaf adds its hash and the hashes of the subtrees it completes (amortised O(1)
    hashes); roots and proofs combine stored nodes (O(log n) hashes each).
    """

    __slots__ = ("_levels", "_size")

    def __init__(self, leaves: Iterable[LeafData] = ()) -> None:
        """Create a tree holding ``leaves`` (raw leaf data, not leaf hashes), in order."""
        self._levels: list[bytearray] = [bytearray()]
        self._size = 0
        self.extend(leaves)

    @property
    def size(self) -> int:
        """The number of leaves appended so far."""
        return self._size

    def append(self, leaf_data: LeafData) -> int:
        """Append one leaf (its raw data; the tree hashes it) and return its index."""
        if not isinstance(leaf_data, bytes | bytearray | memoryview):
            raise InputError(f"leaf data must be bytes, got {type(leaf_data).__name__}")
        index = self._size
        self._store(leaf_hash(leaf_data))
        return index

    def extend(self, leaves: Iterable[LeafData]) -> None:
        """Append every leaf of ``leaves``, in order."""
        for leaf_data in leaves:
            self.append(leaf_data)

    def root(self, size: int | None = None) -> bytes:
        """Return MTH of the first ``size`` leaves (default: all of them).

        Raises :class:`ParameterError` unless ``0 <= size <= self.size``.
        """
        size = self._check_size("size", self._size if size is None else size)
        if size == 0:
            return EMPTY_ROOT
        return self._range_hash(0, size)

    def inclusion_proof(self, index: int, size: int | None = None) -> list[bytes]:
        """Return the audit path of leaf ``index`` in the tree of the first ``size`` leaves.

        This is PATH(index, D[0:size]) of RFC 6962 §2.1.1 (RFC 9162 §2.1.3.1), ordered
        from the leaf's sibling up to the root's child. Raises :class:`ParameterError`
        unless ``0 <= index < size <= self.size``.
        """
        size = self._check_size("size", self._size if size is None else size)
        index = self._check_size("index", index)
        if index >= size:
            raise ParameterError(f"leaf index {index} is not below the tree size {size}")
        return [self._range_hash(lo, hi) for lo, hi in inclusion_ranges(index, size)]

    def consistency_proof(self, old_size: int, new_size: int | None = None) -> list[bytes]:
        """Return the proof that the first ``old_size`` leaves are a prefix of ``new_size``.

        This is PROOF(old_size, D[0:new_size]) of RFC 6962 §2.1.2 (RFC 9162 §2.1.4.1)
        for ``0 < old_size < new_size``, and the empty list when ``old_size`` is 0 or
        equal to ``new_size`` (spec §6.2). Raises :class:`ParameterError` unless
        ``0 <= old_size <= new_size <= self.size``.
        """
        new_size = self._check_size("new_size", self._size if new_size is None else new_size)
        old_size = self._check_size("old_size", old_size)
        if old_size > new_size:
            raise ParameterError(f"old_size {old_size} is larger than new_size {new_size}")
        return [self._range_hash(lo, hi) for lo, hi in consistency_ranges(old_size, new_size)]

    def _store(self, digest: bytes) -> None:
        """Add a leaf hash, then the hash of every subtree it completes."""
        levels = self._levels
        levels[0] += digest
        position = self._size  # of the new node within its level
        height = 0
        while position & 1:  # a right child: its parent subtree is now complete
            row = levels[height]
            # NODE(left, right): the two children are the last 64 bytes of the row.
            parent = hashlib.sha256(_NODE_PREFIX + row[-2 * _HASH :]).digest()
            height += 1
            position >>= 1
            if height == len(levels):
                levels.append(bytearray())
            levels[height] += parent
        self._size += 1

    def _range_hash(self, lo: int, hi: int) -> bytes:
        """Return MTH(D[lo:hi]) for a range the RFC's recursion can visit.

        Such a range starts at a multiple of the smallest power of two not below its
        size, so a range of 2**h leaves is a stored complete subtree, and any other one
        splits into a stored left subtree and a shorter right remainder.
        """
        n = hi - lo
        if n & (n - 1) == 0:
            height = n.bit_length() - 1
            start = (lo >> height) * _HASH
            return bytes(self._levels[height][start : start + _HASH])
        mid = lo + _split(n)
        return node_hash(self._range_hash(lo, mid), self._range_hash(mid, hi))

    def _check_size(self, name: str, value: int) -> int:
        """Return ``value`` if it is an int in [0, self.size], else raise ParameterError."""
        if isinstance(value, bool) or not isinstance(value, int):
            raise ParameterError(f"{name} must be an int, got {type(value).__name__}")
        if not 0 <= value <= self._size:
            raise ParameterError(f"{name} {value} is outside [0, {self._size}]")
        return value


# --- The verifier -----------------------------------------------------------------------


def verify_inclusion(
    *, leaf_data: LeafData, index: int, size: int, proof: Sequence[bytes], root: bytes
) -> None:
    """Check that ``leaf_data`` is leaf ``index`` of the tree of ``size`` leaves with ``root``.

    ``leaf_data`` is the leaf's raw data; it is hashed here as RFC 6962 prescribes. Use
    :func:`verify_inclusion_hash` when you hold the leaf hash instead.

    Raises:
        ProofError: the input is malformed (``index`` not in [0, size), ``size`` not in
            [1, MAX_TREE_SIZE], a hash not 32 bytes, ``proof`` not exactly as long as
            PATH(index, D[size]) is); nothing has been hashed.
        RootMismatchError: the proof leads to a different root than ``root``.

    """
    if not isinstance(leaf_data, bytes | bytearray | memoryview):
        raise ProofError(f"leaf_data must be bytes, got {type(leaf_data).__name__}")
    steps, hashes, expected = _check_inclusion(index, size, proof, root)
    _finish_inclusion(leaf_hash(leaf_data), steps, hashes, expected)


def verify_inclusion_hash(
    *, leaf_hash: bytes, index: int, size: int, proof: Sequence[bytes], root: bytes
) -> None:
    """Like :func:`verify_inclusion`, for a caller that holds the 32-byte leaf hash.

    Raises:
        ProofError: the input is malformed (see :func:`verify_inclusion`) or
            ``leaf_hash`` is not 32 bytes.
        RootMismatchError: the proof leads to a different root than ``root``.

    """
    start = _require_hash("leaf_hash", leaf_hash)
    steps, hashes, expected = _check_inclusion(index, size, proof, root)
    _finish_inclusion(start, steps, hashes, expected)


def verify_consistency(
    *, old_size: int, new_size: int, old_root: bytes, new_root: bytes, proof: Sequence[bytes]
) -> None:
    """Check that the tree of ``old_size`` leaves is a prefix of the one of ``new_size``.

    The proof is RFC 6962 §2.1.2's PROOF(old_size, D[new_size]) for
    ``0 < old_size < new_size``. When ``old_size == new_size`` the proof MUST be empty
    and the roots equal. When ``old_size == 0`` the proof MUST be empty and ``old_root``
    MUST be :data:`EMPTY_ROOT`; every tree extends the empty one, so ``new_root`` is
    then only checked for its length.

    Raises:
        ProofError: the input is malformed (sizes not 0 <= old_size <= new_size <=
            MAX_TREE_SIZE, a hash not 32 bytes, ``proof`` not exactly as long as the
            sizes require); nothing has been hashed.
        RootMismatchError: the proof does not lead to ``old_root`` and ``new_root``.

    """
    _require_tree_size("old_size", old_size, minimum=0)
    _require_tree_size("new_size", new_size, minimum=0)
    if old_size > new_size:
        raise ProofError(f"old_size {old_size} is larger than new_size {new_size}")
    old = _require_hash("old_root", old_root)
    new = _require_hash("new_root", new_root)
    if old_size in (0, new_size):
        _require_proof(proof, 0)
        _check_trivial_consistency(old_size, new_size, old, new)
        return
    seed, steps = _consistency_steps(old_size, new_size)
    hashes = _require_proof(proof, len(steps) + (seed is not None))
    # Rebuild both roots bottom-up (RFC 9162 §2.1.4.2 computes the same two hashes).
    # Where the old tree is itself a complete subtree of the new one, the proof omits
    # it and the old root stands in for it.
    if seed is None:
        old_hash = new_hash = old
    else:
        old_hash = new_hash = hashes.pop(0)
    for sibling, step in zip(hashes, steps, strict=True):
        if step.on_right:  # a subtree only the new tree has
            new_hash = node_hash(new_hash, sibling)
        else:  # a subtree both trees share, left of the path
            old_hash = node_hash(sibling, old_hash)
            new_hash = node_hash(sibling, new_hash)
    if old_hash != old:
        raise RootMismatchError(old, old_hash, what="old root")
    if new_hash != new:
        raise RootMismatchError(new, new_hash, what="new root")


def _check_trivial_consistency(old_size: int, new_size: int, old: bytes, new: bytes) -> None:
    """Check the roots where the proof is empty: from the empty tree, or to the same size."""
    if old_size == 0 and old != EMPTY_ROOT:
        raise RootMismatchError(old, EMPTY_ROOT, what="old root (of the empty tree)")
    if old_size == new_size and new != old:
        raise RootMismatchError(new, old, what="new root (same size as the old)")


def _check_inclusion(
    index: int, size: int, proof: Sequence[bytes], root: bytes
) -> tuple[list[_Step], list[bytes], bytes]:
    """Check an inclusion proof's shape; return its steps, its hashes and the root."""
    _require_tree_size("size", size, minimum=1)
    if isinstance(index, bool) or not isinstance(index, int):
        raise ProofError(f"index must be an int, got {type(index).__name__}")
    if not 0 <= index < size:
        raise ProofError(f"leaf index {index} is not in [0, {size})")
    expected = _require_hash("root", root)
    steps = _inclusion_steps(index, size)
    return steps, _require_proof(proof, len(steps)), expected


def _finish_inclusion(
    start: bytes, steps: list[_Step], hashes: list[bytes], expected: bytes
) -> None:
    """Hash from the leaf up along a checked path (RFC 9162 §2.1.3.2) and compare roots."""
    node = start
    for sibling, step in zip(hashes, steps, strict=True):
        node = node_hash(node, sibling) if step.on_right else node_hash(sibling, node)
    if node != expected:
        raise RootMismatchError(expected, node)


def _require_tree_size(name: str, value: int, *, minimum: int) -> None:
    """Raise ProofError unless ``value`` is an int in [minimum, MAX_TREE_SIZE]."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ProofError(f"{name} must be an int, got {type(value).__name__}")
    if not minimum <= value <= MAX_TREE_SIZE:
        raise ProofError(f"{name} {value} is outside [{minimum}, 2**64 - 1]")


def _require_hash(name: str, value: bytes) -> bytes:
    """Return ``value`` as bytes if it is exactly one 32-byte hash, else raise ProofError."""
    if not isinstance(value, bytes | bytearray):
        raise ProofError(f"{name} must be bytes, got {type(value).__name__}")
    if len(value) != _HASH:
        raise ProofError(f"{name} is {len(value)} bytes, not {_HASH}")
    return bytes(value)


def _require_proof(proof: Sequence[bytes], length: int) -> list[bytes]:
    """Return the proof's hashes if it is a list of exactly ``length`` 32-byte hashes."""
    if not isinstance(proof, list | tuple):
        raise ProofError(f"proof must be a list of hashes, got {type(proof).__name__}")
    if len(proof) > limits.MAX_PROOF_HASHES:
        raise ProofError(
            f"proof has {len(proof)} hashes, above the limit of {limits.MAX_PROOF_HASHES}"
        )
    if len(proof) != length:
        raise ProofError(f"proof has {len(proof)} hashes; these sizes need exactly {length}")
    return [_require_hash(f"proof[{i}]", element) for i, element in enumerate(proof)]
