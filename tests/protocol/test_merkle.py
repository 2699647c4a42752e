"""twinaudit.protocol.merkle against RFC 6962's definitions, the CT test data, and mutations.

The reference below is deliberately naive: MTH, PATH and SUBPROOF written as the RFC
states them (recursion on lists of leaves, hashing with hashlib directly), sharing no
code with the module under test.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from functools import cache
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spec.tools.vectors_merkle import CT_LEAVES
from twinaudit.protocol import limits, merkle
from twinaudit.protocol.errors import InputError, ParameterError, ProofError, RootMismatchError
from twinaudit.protocol.merkle import (
    EMPTY_ROOT,
    MAX_TREE_SIZE,
    Frontier,
    MerkleTree,
    consistency_ranges,
    fold_nodes,
    inclusion_ranges,
    leaf_hash,
    node_hash,
    range_nodes,
    verify_consistency,
    verify_inclusion,
    verify_inclusion_hash,
)

FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# --- Reference: RFC 6962 §2.1, §2.1.1, §2.1.2, as written ------------------------------


def _sha(data: bytes) -> bytes:
    return hashlib.sha256(data).digest()


def _k(n: int) -> int:
    """The largest power of two smaller than n (n > 1)."""
    k = 1
    while 2 * k < n:
        k *= 2
    return k


def ref_mth(leaves: list[bytes]) -> bytes:
    n = len(leaves)
    if n == 0:
        return _sha(b"")
    if n == 1:
        return _sha(b"\x00" + leaves[0])
    k = _k(n)
    return _sha(b"\x01" + ref_mth(leaves[:k]) + ref_mth(leaves[k:]))


def ref_path(m: int, leaves: list[bytes]) -> list[bytes]:
    n = len(leaves)
    if n == 1:
        return []
    k = _k(n)
    if m < k:
        return [*ref_path(m, leaves[:k]), ref_mth(leaves[k:])]
    return [*ref_path(m - k, leaves[k:]), ref_mth(leaves[:k])]


def ref_subproof(m: int, leaves: list[bytes], b: bool) -> list[bytes]:
    n = len(leaves)
    if m == n:
        return [] if b else [ref_mth(leaves)]
    k = _k(n)
    if m <= k:
        return [*ref_subproof(m, leaves[:k], b), ref_mth(leaves[k:])]
    return [*ref_subproof(m - k, leaves[k:], False), ref_mth(leaves[:k])]


def ref_proof(m: int, leaves: list[bytes]) -> list[bytes]:
    """PROOF(m, D[n]) for 0 < m < n; the empty list for m = 0 and m = n (our convention)."""
    if m in (0, len(leaves)):
        return []
    return ref_subproof(m, leaves, True)


# The same recursions, recording only how each element is combined ("L": it is the left
# operand, "R": the right one, "S": the consistency proof's starting hash). Two inputs
# with the same shape make a verifier compute exactly the same hashes.


def path_shape(m: int, n: int) -> list[str]:
    if n == 1:
        return []
    k = _k(n)
    return [*path_shape(m, k), "R"] if m < k else [*path_shape(m - k, n - k), "L"]


def subproof_shape(m: int, n: int, b: bool) -> list[str]:
    if m == n:
        return [] if b else ["S"]
    k = _k(n)
    if m <= k:
        return [*subproof_shape(m, k, b), "R"]
    return [*subproof_shape(m - k, n - k, False), "L"]


def proof_shape(m: int, n: int) -> list[str]:
    return [] if m in (0, n) else subproof_shape(m, n, True)


# --- Test data ---------------------------------------------------------------------------

# Certificate Transparency's reference leaves (the vector builder's, spec/tools/vectors_merkle.py)
# and the published roots for sizes 0..8.
CT_ROOTS = [
    bytes.fromhex(h)
    for h in [
        "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
        "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
        "fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125",
        "aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77",
        "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
        "4e3bbb1f7b478dcfe71fb631631519a3bca12c9aefca1612bfce4c13a86264d4",
        "76e67dadbcdf1e10e1b74ddc608abd2f98dfb16fbce75277b5232a127f2087ef",
        "ddb89be403809e325750d3d263cd78929c2942b7942a34b77e122c9594a74c8c",
        "5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328",
    ]
]
_H = {
    "96a2": "96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7",
    "5f08": "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
    "6b47": "6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4",
    "bc1a": "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b",
    "ca85": "ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0",
    "d37e": "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
    "0ebc": "0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a",
}
# Published proofs for the same tree: (index, size) -> audit path; (old, new) -> proof.
CT_INCLUSION = {(0, 8): ["96a2", "5f08", "6b47"], (5, 8): ["bc1a", "ca85", "d37e"]}
CT_CONSISTENCY = {
    (2, 8): ["5f08", "6b47"],
    (6, 8): ["0ebc", "ca85", "d37e"],
    (2, 5): ["5f08", "bc1a"],
}

# A larger fixed tree: leaf i is SHA-256 of i as 8 big-endian bytes.
N_MAX = 300
LEAVES = [_sha(i.to_bytes(8, "big")) for i in range(N_MAX)]
TREE = MerkleTree(LEAVES)


@cache
def ref_root(n: int) -> bytes:
    return ref_mth(LEAVES[:n])


def flip(data: bytes, bit: int) -> bytes:
    out = bytearray(data)
    out[bit // 8] ^= 1 << (bit % 8)
    return bytes(out)


def expect_error(
    error: type[ProofError], call: Callable[..., None], /, **kwargs: Any
) -> ProofError:
    """Run ``call(**kwargs)`` and insist that it raises exactly ``error``."""
    with pytest.raises(ProofError) as info:
        call(**kwargs)
    assert type(info.value) is error, f"{type(info.value).__name__}: {info.value}"
    return info.value


def mutation_outcome(original: list[str], mutated: list[str]) -> type[ProofError] | None:
    """What a verifier must say when a proof of one shape is checked as another."""
    if mutated == original:
        return None  # identical computation: the sizes are not bound by the proof
    if len(mutated) != len(original):
        return ProofError
    return RootMismatchError


# --- Hashing known answers ----------------------------------------------------------------


def test_empty_tree_root_is_sha256_of_nothing() -> None:
    assert EMPTY_ROOT.hex() == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    assert MerkleTree().root() == EMPTY_ROOT == ref_mth([])


def test_leaf_and_node_hash_use_the_rfc_prefixes() -> None:
    assert leaf_hash(b"") == CT_ROOTS[1] == _sha(b"\x00")
    assert leaf_hash(bytearray(b"ab")) == leaf_hash(memoryview(b"ab")) == _sha(b"\x00ab")
    left, right = leaf_hash(b""), leaf_hash(b"\x00")
    assert node_hash(left, right) == CT_ROOTS[2] == _sha(b"\x01" + left + right)
    assert node_hash(left, right) != node_hash(right, left)


@pytest.mark.parametrize("size", range(9))
def test_ct_roots(size: int) -> None:
    assert ref_mth(CT_LEAVES[:size]) == CT_ROOTS[size]  # the reference agrees with CT
    assert MerkleTree(CT_LEAVES[:size]).root() == CT_ROOTS[size]  # built to this size
    assert MerkleTree(CT_LEAVES).root(size) == CT_ROOTS[size]  # historical root


def test_ct_published_proofs() -> None:
    tree = MerkleTree(CT_LEAVES)
    for (index, size), names in CT_INCLUSION.items():
        proof = [bytes.fromhex(_H[name]) for name in names]
        assert tree.inclusion_proof(index, size) == proof == ref_path(index, CT_LEAVES[:size])
        verify_inclusion(
            leaf_data=CT_LEAVES[index], index=index, size=size, proof=proof, root=CT_ROOTS[size]
        )
    for (old, new), names in CT_CONSISTENCY.items():
        proof = [bytes.fromhex(_H[name]) for name in names]
        assert tree.consistency_proof(old, new) == proof == ref_proof(old, CT_LEAVES[:new])
        verify_consistency(
            old_size=old, new_size=new, old_root=CT_ROOTS[old], new_root=CT_ROOTS[new], proof=proof
        )


# --- Agreement with the reference ----------------------------------------------------------


def test_every_proof_of_every_small_tree_matches_the_reference() -> None:
    for n in range(1, 33):
        leaves = LEAVES[:n]
        tree = MerkleTree(leaves)
        assert tree.size == n
        assert tree.root() == ref_root(n)
        for i in range(n):
            proof = tree.inclusion_proof(i)
            assert proof == ref_path(i, leaves)
            verify_inclusion(leaf_data=leaves[i], index=i, size=n, proof=proof, root=ref_root(n))
        for m in range(n + 1):
            proof = tree.consistency_proof(m)
            assert proof == ref_proof(m, leaves)
            verify_consistency(
                old_size=m, new_size=n, old_root=ref_root(m), new_root=ref_root(n), proof=proof
            )


@FAST
@given(st.data())
def test_inclusion_matches_reference_and_verifies(data: st.DataObject) -> None:
    size = data.draw(st.integers(1, N_MAX), label="size")
    index = data.draw(st.integers(0, size - 1), label="index")
    proof = TREE.inclusion_proof(index, size)
    assert proof == ref_path(index, LEAVES[:size])
    assert TREE.root(size) == ref_root(size)
    verify_inclusion(
        leaf_data=LEAVES[index], index=index, size=size, proof=proof, root=ref_root(size)
    )
    verify_inclusion_hash(
        leaf_hash=leaf_hash(LEAVES[index]), index=index, size=size, proof=proof, root=ref_root(size)
    )


@FAST
@given(st.data())
def test_consistency_matches_reference_and_verifies(data: st.DataObject) -> None:
    new = data.draw(st.integers(0, N_MAX), label="new_size")
    old = data.draw(st.integers(0, new), label="old_size")
    proof = TREE.consistency_proof(old, new)
    assert proof == ref_proof(old, LEAVES[:new])
    verify_consistency(
        old_size=old, new_size=new, old_root=ref_root(old), new_root=ref_root(new), proof=proof
    )


@FAST
@given(st.lists(st.binary(max_size=40), max_size=40))
def test_incremental_roots_of_arbitrary_leaves(leaves: list[bytes]) -> None:
    tree = MerkleTree()
    for i, leaf in enumerate(leaves):
        assert tree.append(leaf) == i
        assert tree.root() == ref_mth(leaves[: i + 1])
    for size in range(len(leaves) + 1):
        assert tree.root(size) == ref_mth(leaves[:size])


def test_extend_equals_appending_and_constructor() -> None:
    a, b = MerkleTree(), MerkleTree(LEAVES[:77])
    a.extend(iter(LEAVES[:40]))
    a.extend(LEAVES[40:77])
    assert a.size == b.size == 77
    assert a.root() == b.root() == ref_root(77)
    assert a.consistency_proof(33) == b.consistency_proof(33)


def test_storage_is_packed_bytes() -> None:
    # 2n - 1 stored hashes at most (every complete subtree), 32 bytes each, no objects.
    tree = MerkleTree(LEAVES)
    stored = tree._levels  # the packed layout is the point
    assert all(type(row) is bytearray for row in stored)
    assert sum(len(row) for row in stored) <= (2 * N_MAX - 1) * 32


# --- Stored nodes: the frontier and proofs from complete subtrees -----------------------


def test_a_frontier_gives_every_root_and_names_every_complete_subtree() -> None:
    """Appending to a frontier gives the reference root and, over all, every subtree once."""
    frontier = Frontier()
    nodes: dict[tuple[int, int], bytes] = {}
    for n in range(1, 130):
        made = frontier.append(leaf_hash(LEAVES[n - 1]))
        assert made[0][0] == (0, n - 1)
        for key, digest in made:
            assert key not in nodes
            height, index = key
            assert digest == ref_mth(LEAVES[index << height : (index + 1) << height])
            nodes[key] = digest
        assert frontier.size == n and frontier.root() == ref_root(n)
        assert len(frontier.hashes) == n.bit_count()
        assert [nodes[key] for key in range_nodes(0, n)] == frontier.hashes
        assert Frontier(n, frontier.hashes).root() == frontier.root()
    assert len(nodes) == 2 * 129 - (129).bit_count()


def test_proofs_from_stored_subtrees_equal_the_reference() -> None:
    """Folding the stored subtrees each proof range names gives the RFC's proofs."""
    tree = MerkleTree(LEAVES[:70])
    nodes: dict[tuple[int, int], bytes] = {}
    frontier = Frontier()
    for leaf in LEAVES[:70]:
        nodes.update(frontier.append(leaf_hash(leaf)))

    def prove(ranges: list[tuple[int, int]]) -> list[bytes]:
        return [fold_nodes([nodes[key] for key in range_nodes(lo, hi)]) for lo, hi in ranges]

    for size in range(1, 71):
        for index in range(size):
            assert prove(inclusion_ranges(index, size)) == tree.inclusion_proof(index, size)
        for old in range(size + 1):
            assert prove(consistency_ranges(old, size)) == tree.consistency_proof(old, size)
    assert fold_nodes([]) == EMPTY_ROOT


@pytest.mark.parametrize(
    ("call", "error"),
    [
        (lambda: range_nodes(3, 3), ParameterError),
        (lambda: range_nodes(1, 3), ParameterError),  # not a range the recursion visits
        (lambda: Frontier(3, [bytes(32)]), ParameterError),
        (lambda: Frontier(1, [bytes(31)]), ParameterError),
        (lambda: Frontier(-1), ParameterError),
        (lambda: Frontier().append(bytes(31)), InputError),
    ],
)
def test_stored_node_helpers_refuse_impossible_input(
    call: Callable[[], object], error: type[Exception]
) -> None:
    with pytest.raises(error):
        call()


# --- Mutations ------------------------------------------------------------------------------


def test_every_bit_flip_of_a_ct_inclusion_proof_fails() -> None:
    leaf, index, size, root = CT_LEAVES[5], 5, 8, CT_ROOTS[8]
    proof = MerkleTree(CT_LEAVES).inclusion_proof(index, size)
    for position in range(len(proof)):
        for bit in range(256):
            bad = [*proof]
            bad[position] = flip(bad[position], bit)
            expect_error(
                RootMismatchError, verify_inclusion,
                leaf_data=leaf, index=index, size=size, proof=bad, root=root,
            )  # fmt: skip
    for bit in range(256):
        expect_error(
            RootMismatchError, verify_inclusion,
            leaf_data=leaf, index=index, size=size, proof=proof, root=flip(root, bit),
        )  # fmt: skip
    for bit in range(len(leaf) * 8):
        expect_error(
            RootMismatchError, verify_inclusion,
            leaf_data=flip(leaf, bit), index=index, size=size, proof=proof, root=root,
        )  # fmt: skip


def test_every_bit_flip_of_a_ct_consistency_proof_fails() -> None:
    old, new = 6, 8
    proof = MerkleTree(CT_LEAVES).consistency_proof(old, new)
    args: dict[str, Any] = {
        "old_size": old,
        "new_size": new,
        "old_root": CT_ROOTS[old],
        "new_root": CT_ROOTS[new],
    }
    for position in range(len(proof)):
        for bit in range(256):
            bad = [*proof]
            bad[position] = flip(bad[position], bit)
            expect_error(RootMismatchError, verify_consistency, **args, proof=bad)
    for which in ("old_root", "new_root"):
        for bit in range(256):
            mutated = {**args, which: flip(args[which], bit)}
            expect_error(RootMismatchError, verify_consistency, **mutated, proof=proof)


@FAST
@given(st.data())
def test_mutated_inclusion_proofs_fail_with_the_right_error(data: st.DataObject) -> None:
    size = data.draw(st.integers(1, N_MAX), label="size")
    index = data.draw(st.integers(0, size - 1), label="index")
    proof, root, leaf = TREE.inclusion_proof(index, size), ref_root(size), LEAVES[index]
    good: dict[str, Any] = {
        "leaf_data": leaf,
        "index": index,
        "size": size,
        "proof": proof,
        "root": root,
    }
    shape = path_shape(index, size)

    if proof:
        position = data.draw(st.integers(0, len(proof) - 1), label="element")
        bit = data.draw(st.integers(0, 255), label="bit")
        bad = [*proof]
        bad[position] = flip(bad[position], bit)
        expect_error(RootMismatchError, verify_inclusion, **{**good, "proof": bad})
        for drop in range(len(proof)):
            shorter = proof[:drop] + proof[drop + 1 :]
            expect_error(ProofError, verify_inclusion, **{**good, "proof": shorter})
    bit = data.draw(st.integers(0, 255), label="root bit")
    expect_error(RootMismatchError, verify_inclusion, **{**good, "root": flip(root, bit)})
    expect_error(RootMismatchError, verify_inclusion, **{**good, "leaf_data": flip(leaf, bit)})
    expect_error(
        ProofError, verify_inclusion, **{**good, "proof": [*proof, proof[0] if proof else root]}
    )

    for other in (index - 1, index + 1):
        if not 0 <= other < size:
            expect_error(ProofError, verify_inclusion, **{**good, "index": other})
            continue
        outcome = mutation_outcome(shape, path_shape(other, size))
        assert outcome is not None  # a different index always changes the computation
        expect_error(outcome, verify_inclusion, **{**good, "index": other})

    for other in (size - 1, size + 1):
        if other <= index:
            expect_error(ProofError, verify_inclusion, **{**good, "size": other})
            continue
        outcome = mutation_outcome(shape, path_shape(index, other))
        if outcome is None:
            # Same shape, same hashes: the proof cannot tell these sizes apart, which is
            # why a verifier takes the size from the signed receipt, never from the prover.
            verify_inclusion(**{**good, "size": other})
        else:
            expect_error(outcome, verify_inclusion, **{**good, "size": other})


@FAST
@given(st.data())
def test_mutated_consistency_proofs_fail_with_the_right_error(data: st.DataObject) -> None:
    new = data.draw(st.integers(2, N_MAX), label="new_size")
    old = data.draw(st.integers(1, new - 1), label="old_size")
    proof = TREE.consistency_proof(old, new)
    good: dict[str, Any] = {
        "old_size": old,
        "new_size": new,
        "old_root": ref_root(old),
        "new_root": ref_root(new),
        "proof": proof,
    }
    shape = proof_shape(old, new)

    position = data.draw(st.integers(0, len(proof) - 1), label="element")
    bit = data.draw(st.integers(0, 255), label="bit")
    bad = [*proof]
    bad[position] = flip(bad[position], bit)
    expect_error(RootMismatchError, verify_consistency, **{**good, "proof": bad})
    for which in ("old_root", "new_root"):
        expect_error(
            RootMismatchError, verify_consistency, **{**good, which: flip(good[which], bit)}
        )
    swapped = {**good, "old_root": good["new_root"], "new_root": good["old_root"]}
    expect_error(RootMismatchError, verify_consistency, **swapped)
    for drop in range(len(proof)):
        expect_error(
            ProofError, verify_consistency, **{**good, "proof": proof[:drop] + proof[drop + 1 :]}
        )
    expect_error(ProofError, verify_consistency, **{**good, "proof": [*proof, proof[-1]]})

    for old2, new2 in ((old - 1, new), (old + 1, new), (old, new - 1), (old, new + 1)):
        mutated = {**good, "old_size": old2, "new_size": new2}
        if old2 > new2:
            expect_error(ProofError, verify_consistency, **mutated)
            continue
        outcome = mutation_outcome(shape, proof_shape(old2, new2))
        if outcome is None:
            verify_consistency(**mutated)  # same computation; sizes come from signed heads
        else:
            expect_error(outcome, verify_consistency, **mutated)


def test_root_mismatch_carries_both_roots() -> None:
    proof = TREE.inclusion_proof(3, 10)
    error = expect_error(
        RootMismatchError, verify_inclusion,
        leaf_data=LEAVES[3], index=3, size=10, proof=proof, root=ref_root(11),
    )  # fmt: skip
    assert isinstance(error, RootMismatchError)
    assert error.expected == ref_root(11)
    assert error.computed == ref_root(10)
    assert error.code == "root-mismatch"
    assert ref_root(10).hex() in error.diagnostics()


# --- Shapes are checked before anything is hashed ----------------------------------------------


@pytest.fixture
def no_hashing(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*_: object) -> bytes:
        raise AssertionError("hashed before the shape was checked")

    monkeypatch.setattr(merkle, "leaf_hash", refuse)
    monkeypatch.setattr(merkle, "node_hash", refuse)


_P = TREE.inclusion_proof(5, 8)
_INCLUSION = {"leaf_data": LEAVES[5], "index": 5, "size": 8, "proof": _P, "root": ref_root(8)}
BAD_INCLUSION = {
    "29-byte element": {"proof": [_P[0][:29], *_P[1:]]},
    "31-byte element": {"proof": [*_P[:2], _P[2][:31]]},
    "33-byte element": {"proof": [_P[0] + b"\x00", *_P[1:]]},
    "hex string element": {"proof": [_P[0].hex(), *_P[1:]]},
    "proof is bytes": {"proof": b"".join(_P)},
    "dropped element": {"proof": _P[:2]},
    "trailing element": {"proof": [*_P, _P[0]]},
    "empty proof": {"proof": []},
    "too long": {"proof": [_P[0]] * (limits.MAX_PROOF_HASHES + 1)},
    "index == size": {"index": 8},
    "index > size": {"index": 9},
    "negative index": {"index": -1},
    "bool index": {"index": True},
    "float index": {"index": 5.0},
    "empty tree": {"index": 0, "size": 0},
    "negative size": {"size": -8},
    "size above 2**64-1": {"index": 0, "size": MAX_TREE_SIZE + 1},
    "31-byte root": {"root": ref_root(8)[:31]},
    "hex root": {"root": ref_root(8).hex()},
    "leaf data is str": {"leaf_data": "leaf"},
}


@pytest.mark.usefixtures("no_hashing")
@pytest.mark.parametrize("change", BAD_INCLUSION.values(), ids=BAD_INCLUSION.keys())
def test_bad_inclusion_shapes_raise_proof_error_before_hashing(change: dict[str, object]) -> None:
    expect_error(ProofError, verify_inclusion, **{**_INCLUSION, **change})


@pytest.mark.usefixtures("no_hashing")
@pytest.mark.parametrize("bad_hash", [b"\x00" * 31, b"\x00" * 33, "00" * 32, None])
def test_bad_leaf_hash_raises_proof_error_before_hashing(bad_hash: object) -> None:
    args = {k: v for k, v in _INCLUSION.items() if k != "leaf_data"}
    expect_error(ProofError, verify_inclusion_hash, leaf_hash=bad_hash, **args)


_C = TREE.consistency_proof(6, 8)
_CONSISTENCY = {
    "old_size": 6,
    "new_size": 8,
    "old_root": ref_root(6),
    "new_root": ref_root(8),
    "proof": _C,
}
BAD_CONSISTENCY = {
    "29-byte element": {"proof": [_C[0][:29], *_C[1:]]},
    "dropped element": {"proof": _C[1:]},
    "trailing element": {"proof": [*_C, _C[0]]},
    "empty proof": {"proof": []},
    "too long": {"proof": [_C[0]] * (limits.MAX_PROOF_HASHES + 1)},
    "old > new": {"old_size": 9},
    "negative old": {"old_size": -1},
    "new above 2**64-1": {"new_size": MAX_TREE_SIZE + 1},
    "bool size": {"old_size": True},
    "proof from the empty tree": {"old_size": 0, "old_root": EMPTY_ROOT},
    "proof between equal sizes": {"old_size": 8, "old_root": ref_root(8)},
    "33-byte old root": {"old_root": ref_root(6) + b"\x00"},
    "31-byte new root": {"new_root": ref_root(8)[:31]},
}


@pytest.mark.usefixtures("no_hashing")
@pytest.mark.parametrize("change", BAD_CONSISTENCY.values(), ids=BAD_CONSISTENCY.keys())
def test_bad_consistency_shapes_raise_proof_error_before_hashing(change: dict[str, object]) -> None:
    expect_error(ProofError, verify_consistency, **{**_CONSISTENCY, **change})


def test_verifiers_take_keyword_arguments_only() -> None:
    with pytest.raises(TypeError):
        verify_inclusion(LEAVES[5], 5, 8, _P, ref_root(8))  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        verify_consistency(6, 8, ref_root(6), ref_root(8), _C)  # type: ignore[call-arg]


def test_the_largest_trees_have_proofs_within_the_cap() -> None:
    # The longest proofs run down the left edge: leaf 0 (64 hashes), and an old tree of
    # 3 leaves (65). They pass the shape checks, so they reach hashing and fail there.
    zero = bytes(32)
    args = {"leaf_hash": zero, "index": 0, "size": MAX_TREE_SIZE, "root": zero}
    expect_error(RootMismatchError, verify_inclusion_hash, **args, proof=[zero] * 64)
    expect_error(ProofError, verify_inclusion_hash, **args, proof=[zero] * 63)
    args = {"old_size": 3, "new_size": MAX_TREE_SIZE, "old_root": zero, "new_root": zero}
    expect_error(RootMismatchError, verify_consistency, **args, proof=[zero] * 65)
    assert limits.MAX_PROOF_HASHES == 65


# --- Edge cases --------------------------------------------------------------------------------


def test_consistency_from_the_empty_tree() -> None:
    # Every tree extends the empty one: the proof is empty and only the old root is checked.
    for new in (0, 1, 7, 8):
        verify_consistency(
            old_size=0, new_size=new, old_root=EMPTY_ROOT, new_root=ref_root(new), proof=[]
        )
        assert TREE.consistency_proof(0, new) == []
    expect_error(
        RootMismatchError, verify_consistency,
        old_size=0, new_size=8, old_root=ref_root(1), new_root=ref_root(8), proof=[],
    )  # fmt: skip


def test_consistency_between_equal_sizes() -> None:
    for size in (0, 1, 5, 8):
        verify_consistency(
            old_size=size, new_size=size, old_root=ref_root(size), new_root=ref_root(size), proof=[]
        )
        assert TREE.consistency_proof(size, size) == []
    expect_error(
        RootMismatchError, verify_consistency,
        old_size=5, new_size=5, old_root=ref_root(5), new_root=ref_root(6), proof=[],
    )  # fmt: skip
    expect_error(
        RootMismatchError, verify_consistency,
        old_size=0, new_size=0, old_root=EMPTY_ROOT, new_root=ref_root(1), proof=[],
    )  # fmt: skip


def test_single_leaf_tree_has_an_empty_inclusion_proof() -> None:
    assert TREE.inclusion_proof(0, 1) == []
    verify_inclusion(leaf_data=LEAVES[0], index=0, size=1, proof=[], root=ref_root(1))


@pytest.mark.parametrize(
    ("method", "args"),
    [
        ("root", (N_MAX + 1,)),
        ("root", (-1,)),
        ("inclusion_proof", (0, 0)),
        ("inclusion_proof", (5, 5)),
        ("inclusion_proof", (-1, 5)),
        ("inclusion_proof", (0, N_MAX + 1)),
        ("inclusion_proof", (1.0, 5)),
        ("consistency_proof", (6, 5)),
        ("consistency_proof", (1, N_MAX + 1)),
        ("consistency_proof", (-1, 5)),
        ("consistency_proof", (True, 5)),
    ],
)
def test_the_prover_refuses_impossible_requests(method: str, args: tuple[object, ...]) -> None:
    with pytest.raises(ParameterError):
        getattr(TREE, method)(*args)


def test_empty_tree_has_no_inclusion_proof() -> None:
    with pytest.raises(ParameterError):
        MerkleTree().inclusion_proof(0)


def test_append_refuses_non_bytes() -> None:
    tree = MerkleTree()
    with pytest.raises(InputError):
        tree.append("leaf")  # type: ignore[arg-type]
    assert tree.size == 0
