"""Build spec/vectors/merkle.json: Merkle roots, inclusion and consistency proofs (spec §6.2).

Run ``python -m spec.tools.vectors_merkle`` to rewrite the file; the conformance test
fails if the file differs from what :func:`build` returns.

Two trees are used. ``ct`` is Certificate Transparency's reference tree of eight
leaves (its roots are published). ``sha256-index`` has 257 leaves, leaf ``i`` being
SHA-256 of ``i`` as 8 big-endian bytes. Root cases list their leaves in full; proof
cases name their tree, so a conformance runner can also regenerate the proofs.
Tree sizes and indices are uint64, so they are written as decimal strings (spec §10).
The error codes of the broken cases are chosen by hand from the rules of §6.2: a
proof of the wrong length, or any malformed field, is ``invalid-proof``; a
well-formed proof that leads to another root is ``root-mismatch``.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from twinaudit.protocol import SPEC_VERSION
from twinaudit.protocol.merkle import EMPTY_ROOT, MAX_TREE_SIZE, MerkleTree

from .vectors_core import render

VECTOR_FILE = Path(__file__).resolve().parent.parent / "vectors" / "merkle.json"

CT_LEAVES = [
    bytes.fromhex(h)
    for h in [
        "",
        "00",
        "10",
        "2021",
        "3031",
        "40414243",
        "5051525354555657",
        "606162636465666768696a6b6c6d6e6f",
    ]
]
DERIVED_LEAVES = [hashlib.sha256(i.to_bytes(8, "big")).digest() for i in range(257)]
TREES = {"ct": CT_LEAVES, "sha256-index": DERIVED_LEAVES}
_BUILT = {name: MerkleTree(leaves) for name, leaves in TREES.items()}

INVALID_PROOF = "invalid-proof"
ROOT_MISMATCH = "root-mismatch"


def _hexes(items: list[bytes]) -> list[str]:
    return [item.hex() for item in items]


def _flip(data: bytes, byte: int = 0, bit: int = 0) -> bytes:
    out = bytearray(data)
    out[byte] ^= 1 << bit
    return bytes(out)


def _case(name: str, kind: str, inp: dict[str, Any], error: str | None = None) -> dict[str, Any]:
    if error is None:
        return {
            "name": name,
            "kind": kind,
            "valid": True,
            "input": inp,
            "expected": {"verified": True},
        }
    return {"name": name, "kind": kind, "valid": False, "input": inp, "error": error}


def _root_cases() -> list[dict[str, Any]]:
    sizes = {"ct": range(9), "sha256-index": [13, 64, 100, 257]}
    cases = []
    for tree, tree_sizes in sizes.items():
        for size in tree_sizes:
            leaves = TREES[tree][:size]
            cases.append(
                {
                    "name": f"root {tree} size {size}",
                    "kind": "root",
                    "valid": True,
                    "input": {"tree": tree, "leaves": _hexes(leaves)},
                    "expected": {"root": MerkleTree(leaves).root().hex()},
                }
            )
    return cases


def _inclusion_input(tree: str, index: int, size: int) -> dict[str, Any]:
    built = _BUILT[tree]
    return {
        "tree": tree,
        "leaf": TREES[tree][index].hex(),
        "index": str(index),
        "size": str(size),
        "proof": _hexes(built.inclusion_proof(index, size)),
        "root": built.root(size).hex(),
    }


def _inclusion_cases() -> list[dict[str, Any]]:
    points = [("ct", i, n) for n in range(1, 9) for i in range(n)]
    derived = [(0, 13), (6, 13), (12, 13), (0, 64), (31, 64), (63, 64), (37, 100), (99, 100)]
    derived += [(0, 257), (128, 257), (256, 257)]
    points += [("sha256-index", i, n) for i, n in derived]
    cases = [
        _case(f"inclusion {tree} index {i} size {n}", "inclusion", _inclusion_input(tree, i, n))
        for tree, i, n in points
    ]
    good = _inclusion_input("ct", 5, 8)
    proof, root = good["proof"], good["root"]
    broken: list[tuple[str, dict[str, Any], str]] = [
        ("index + 1", {"index": "6"}, ROOT_MISMATCH),
        ("index - 1", {"index": "4"}, ROOT_MISMATCH),
        ("size + 1", {"size": "9"}, INVALID_PROOF),
        ("index equal to size", {"index": "8"}, INVALID_PROOF),
        ("negative index", {"index": "-1"}, INVALID_PROOF),
        ("empty tree", {"index": "0", "size": "0"}, INVALID_PROOF),
        ("size above 2**64 - 1", {"size": str(MAX_TREE_SIZE + 1)}, INVALID_PROOF),
        ("trailing extra hash", {"proof": [*proof, proof[0]]}, INVALID_PROOF),
        ("dropped first hash", {"proof": proof[1:]}, INVALID_PROOF),
        ("dropped last hash", {"proof": proof[:-1]}, INVALID_PROOF),
        ("empty proof", {"proof": []}, INVALID_PROOF),
        ("66 hashes", {"proof": [proof[0]] * 66}, INVALID_PROOF),
        ("31-byte hash", {"proof": [proof[0], proof[1][:62], proof[2]]}, INVALID_PROOF),
        ("33-byte root", {"root": root + "00"}, INVALID_PROOF),
        ("hashes swapped", {"proof": [proof[1], proof[0], proof[2]]}, ROOT_MISMATCH),
        (
            "flipped bit in a hash",
            {"proof": [proof[0], _flip(bytes.fromhex(proof[1])).hex(), proof[2]]},
            ROOT_MISMATCH,
        ),
        ("flipped bit in the leaf", {"leaf": _flip(CT_LEAVES[5], 3, 7).hex()}, ROOT_MISMATCH),
        (
            "flipped bit in the root",
            {"root": _flip(bytes.fromhex(root), 31, 0).hex()},
            ROOT_MISMATCH,
        ),
        ("root of another size", {"root": _BUILT["ct"].root(7).hex()}, ROOT_MISMATCH),
    ]
    cases += [
        _case(f"inclusion ct index 5 size 8, {what}", "inclusion", {**good, **change}, error)
        for what, change, error in broken
    ]
    cases += [
        _case(
            "inclusion sha256-index index 37 size 100, index + 1",
            "inclusion",
            {**_inclusion_input("sha256-index", 37, 100), "index": "38"},
            ROOT_MISMATCH,
        ),
        _case(
            "inclusion sha256-index index 99 size 100, size + 1",
            "inclusion",
            {**_inclusion_input("sha256-index", 99, 100), "size": "101"},
            INVALID_PROOF,
        ),
    ]
    return cases


def _consistency_input(tree: str, old: int, new: int) -> dict[str, Any]:
    built = _BUILT[tree]
    return {
        "tree": tree,
        "old_size": str(old),
        "new_size": str(new),
        "old_root": built.root(old).hex(),
        "new_root": built.root(new).hex(),
        "proof": _hexes(built.consistency_proof(old, new)),
    }


def _consistency_cases() -> list[dict[str, Any]]:
    points = [("ct", m, n) for n in range(9) for m in range(n + 1)]
    derived = [(0, 13), (13, 13), (1, 257), (13, 64), (37, 100), (63, 64), (64, 100)]
    derived += [(64, 257), (100, 257), (255, 257)]
    points += [("sha256-index", m, n) for m, n in derived]
    cases = [
        _case(f"consistency {tree} {m} to {n}", "consistency", _consistency_input(tree, m, n))
        for tree, m, n in points
    ]
    good = _consistency_input("ct", 6, 8)
    proof, old_root, new_root = good["proof"], good["old_root"], good["new_root"]
    broken: list[tuple[str, dict[str, Any], str]] = [
        ("roots swapped", {"old_root": new_root, "new_root": old_root}, ROOT_MISMATCH),
        (
            "sizes and roots swapped",
            {"old_size": "8", "new_size": "6", "old_root": new_root, "new_root": old_root},
            INVALID_PROOF,
        ),
        ("old size + 1", {"old_size": "7"}, INVALID_PROOF),
        ("old size - 1", {"old_size": "5"}, INVALID_PROOF),
        ("new size + 1", {"new_size": "9"}, INVALID_PROOF),
        ("negative old size", {"old_size": "-1"}, INVALID_PROOF),
        ("new size above 2**64 - 1", {"new_size": str(MAX_TREE_SIZE + 1)}, INVALID_PROOF),
        ("trailing extra hash", {"proof": [*proof, proof[0]]}, INVALID_PROOF),
        ("dropped first hash", {"proof": proof[1:]}, INVALID_PROOF),
        ("dropped last hash", {"proof": proof[:-1]}, INVALID_PROOF),
        ("empty proof", {"proof": []}, INVALID_PROOF),
        ("31-byte hash", {"proof": [proof[0][:62], *proof[1:]]}, INVALID_PROOF),
        (
            "flipped bit in a hash",
            {"proof": [*proof[:2], _flip(bytes.fromhex(proof[2])).hex()]},
            ROOT_MISMATCH,
        ),
        (
            "flipped bit in the old root",
            {"old_root": _flip(bytes.fromhex(old_root), 9, 4).hex()},
            ROOT_MISMATCH,
        ),
        (
            "flipped bit in the new root",
            {"new_root": _flip(bytes.fromhex(new_root), 0, 7).hex()},
            ROOT_MISMATCH,
        ),
        ("equal sizes with a proof", {"old_size": "8", "old_root": new_root}, INVALID_PROOF),
        (
            "from the empty tree with a proof",
            {"old_size": "0", "old_root": EMPTY_ROOT.hex()},
            INVALID_PROOF,
        ),
    ]
    cases += [
        _case(f"consistency ct 6 to 8, {what}", "consistency", {**good, **change}, error)
        for what, change, error in broken
    ]
    ct = _BUILT["ct"]
    cases += [
        _case(
            "consistency ct 5 to 5, different roots",
            "consistency",
            {**_consistency_input("ct", 5, 5), "new_root": ct.root(6).hex()},
            ROOT_MISMATCH,
        ),
        _case(
            "consistency ct 0 to 8, old root not the empty root",
            "consistency",
            {**_consistency_input("ct", 0, 8), "old_root": ct.root(1).hex()},
            ROOT_MISMATCH,
        ),
    ]
    # The old tree is a complete subtree: the proof leaves its root out, and only a
    # wrong old root reveals itself through the new one.
    subtree = _consistency_input("sha256-index", 64, 100)
    cases += [
        _case(
            "consistency sha256-index 64 to 100, flipped bit in the old root",
            "consistency",
            {**subtree, "old_root": _flip(bytes.fromhex(subtree["old_root"]), 5, 5).hex()},
            ROOT_MISMATCH,
        ),
        _case(
            "consistency sha256-index 64 to 100, old root prepended to the proof",
            "consistency",
            {**subtree, "proof": [subtree["old_root"], *subtree["proof"]]},
            INVALID_PROOF,
        ),
    ]
    return cases


def build() -> dict[str, Any]:
    """Return the Merkle vector document."""
    return {
        "spec_version": SPEC_VERSION,
        "topic": "merkle",
        "description": (
            "RFC 6962 / RFC 9162 Merkle trees (spec §6.2): roots of the CT reference tree "
            "(sizes 0-8) and of trees whose leaf i is SHA-256(8-byte big-endian i); "
            "inclusion and consistency proofs that MUST verify; and broken ones that MUST "
            "fail with the given code. Sizes and indices are decimal strings. A proof "
            "case's 'tree' names the leaves of the root cases it was generated from."
        ),
        "cases": _root_cases() + _inclusion_cases() + _consistency_cases(),
    }


def main() -> None:
    """Rewrite spec/vectors/merkle.json."""
    VECTOR_FILE.write_text(render(build()), encoding="utf-8")


if __name__ == "__main__":
    main()
