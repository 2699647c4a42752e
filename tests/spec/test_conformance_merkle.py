"""Run every case of spec/vectors/merkle.json against twinaudit.protocol.merkle.

Each case is read from its JSON alone, as a second implementation would: valid proof
cases must verify and must be exactly what the prover generates for the named tree;
broken ones must fail with exactly the named error code. The last test checks that
the committed file is what spec/tools/vectors_merkle.py builds today.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from spec.tools import vectors_merkle
from spec.tools.vectors_core import render
from twinaudit.protocol.errors import TwinauditError
from twinaudit.protocol.merkle import (
    MerkleTree,
    leaf_hash,
    verify_consistency,
    verify_inclusion,
    verify_inclusion_hash,
)

VECTOR_FILE = Path(__file__).resolve().parents[2] / "spec" / "vectors" / "merkle.json"
DOC = json.loads(VECTOR_FILE.read_text(encoding="utf-8"))


def _trees() -> dict[str, MerkleTree]:
    """The leaves of each named tree: those of its largest root case."""
    leaves: dict[str, list[str]] = {}
    for case in DOC["cases"]:
        if case["kind"] == "root":
            name, hexes = case["input"]["tree"], case["input"]["leaves"]
            if len(hexes) >= len(leaves.get(name, [])):
                leaves[name] = hexes
    return {name: MerkleTree(bytes.fromhex(h) for h in hexes) for name, hexes in leaves.items()}


TREES = _trees()


def _cases(kind: str) -> list[Any]:
    return [pytest.param(case, id=case["name"]) for case in DOC["cases"] if case["kind"] == kind]


def _hashes(items: list[str]) -> list[bytes]:
    return [bytes.fromhex(item) for item in items]


def _inclusion_args(inp: dict[str, Any]) -> dict[str, Any]:
    return {
        "index": int(inp["index"]),
        "size": int(inp["size"]),
        "proof": _hashes(inp["proof"]),
        "root": bytes.fromhex(inp["root"]),
    }


def _consistency_args(inp: dict[str, Any]) -> dict[str, Any]:
    return {
        "old_size": int(inp["old_size"]),
        "new_size": int(inp["new_size"]),
        "old_root": bytes.fromhex(inp["old_root"]),
        "new_root": bytes.fromhex(inp["new_root"]),
        "proof": _hashes(inp["proof"]),
    }


def _expect_code(code: str, call: Any, **kwargs: Any) -> None:
    with pytest.raises(TwinauditError) as info:
        call(**kwargs)
    assert info.value.code == code, info.value.diagnostics()


def test_the_document_is_the_merkle_topic() -> None:
    assert DOC["topic"] == "merkle"
    assert {case["kind"] for case in DOC["cases"]} == {"root", "inclusion", "consistency"}
    assert len({case["name"] for case in DOC["cases"]}) == len(DOC["cases"])


@pytest.mark.parametrize("case", _cases("root"))
def test_root(case: dict[str, Any]) -> None:
    tree = MerkleTree(_hashes(case["input"]["leaves"]))
    assert tree.root().hex() == case["expected"]["root"]


@pytest.mark.parametrize("case", _cases("inclusion"))
def test_inclusion(case: dict[str, Any]) -> None:
    inp = case["input"]
    leaf = bytes.fromhex(inp["leaf"])
    args = _inclusion_args(inp)
    if not case["valid"]:
        _expect_code(case["error"], verify_inclusion, leaf_data=leaf, **args)
        _expect_code(case["error"], verify_inclusion_hash, leaf_hash=leaf_hash(leaf), **args)
        return
    assert case["expected"] == {"verified": True}
    verify_inclusion(leaf_data=leaf, **args)
    verify_inclusion_hash(leaf_hash=leaf_hash(leaf), **args)
    tree = TREES[inp["tree"]]
    assert tree.inclusion_proof(args["index"], args["size"]) == args["proof"]
    assert tree.root(args["size"]) == args["root"]


@pytest.mark.parametrize("case", _cases("consistency"))
def test_consistency(case: dict[str, Any]) -> None:
    inp = case["input"]
    args = _consistency_args(inp)
    if not case["valid"]:
        _expect_code(case["error"], verify_consistency, **args)
        return
    assert case["expected"] == {"verified": True}
    verify_consistency(**args)
    tree = TREES[inp["tree"]]
    assert tree.consistency_proof(args["old_size"], args["new_size"]) == args["proof"]
    assert tree.root(args["old_size"]) == args["old_root"]
    assert tree.root(args["new_size"]) == args["new_root"]


def test_vector_file_matches_the_builder() -> None:
    text = VECTOR_FILE.read_text(encoding="utf-8")
    assert text == render(vectors_merkle.build()), (
        "spec/vectors/merkle.json is stale: run python -m spec.tools.vectors_merkle and review"
    )
