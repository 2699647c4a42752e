"""Build spec/vectors/log.json: claims and verdicts as log entries (spec §9.6).

Run ``python -m spec.tools.vectors_log`` to rewrite the file; the conformance test fails
if the file differs from what :func:`build` returns. Four kinds of case:

- ``digest``: a tag (``claim-id``, ``claim-map``, ``verdict-payload``) and the value it
  hashes (a text, a typed value of appendix A, bytes); the 32-byte digest;
- ``log-leaf``: the leaf data of a log entry (hex); its kind (``escrow``, ``claim-start``,
  ``verdict``), its canonical map (typed), and its Merkle leaf hash (§6.2.1), or the
  error; the valid leaves are built from fields, byte for byte;
- ``recount``: a log's first entries (hex), a verdict's ``claim_entry`` (index and
  root), the claim it names (record, claim digest, claim-map digest, claim key or
  null) and its ``earlier_claims``; the count, or the error (§9.6.3);
- ``claim-entry``: a verdict's ``claim_entry`` value (typed); its index, root and the
  size of the log the root is of, or the error (§11).

Every byte comes from fixed values: no key but the claim key of appendix B's test key.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from twinaudit.protocol import SPEC_VERSION
from twinaudit.protocol.claim.log_count import check_claim_count
from twinaudit.protocol.claim.verdict import ClaimEntryRef
from twinaudit.protocol.encoding import encode
from twinaudit.protocol.escrow_messages import LogEntry
from twinaudit.protocol.keys import raw_public_key
from twinaudit.protocol.log_entries import (
    CLAIM_START_TAG,
    VERDICT_TAG,
    ClaimStartEntry,
    VerdictEntry,
    claim_digest,
    claim_map_digest,
    decode_log_leaf,
    verdict_digest,
)
from twinaudit.protocol.merkle import MerkleTree, leaf_hash

from .typed_json import from_typed, to_typed
from .vectors_core import TEST_KEY_SEED, case, render

VECTOR_FILE = Path(__file__).resolve().parents[1] / "vectors" / "log.json"

#: The claim key of the cases: the public half of appendix B's test key.
CLAIM_KEY = raw_public_key(Ed25519PrivateKey.from_private_bytes(TEST_KEY_SEED).public_key())
TIME = "2026-11-28T12:00:00Z"
MAP_DIGEST = claim_map_digest({"record": {"index": 0}})


def run_digest(given: dict[str, Any]) -> dict[str, Any]:
    """Hash the case's value under its tag."""
    tag = given["tag"]
    if tag == "claim-id":
        return {"digest": claim_digest(given["value"]).hex()}
    if tag == "claim-map":
        return {"digest": claim_map_digest(from_typed(given["value"])).hex()}
    return {"digest": verdict_digest(bytes.fromhex(given["value"])).hex()}


def run_leaf(given: dict[str, Any]) -> dict[str, Any]:
    """Read one leaf of the log: its kind, map and leaf hash."""
    data = bytes.fromhex(given["leaf"])
    leaf = decode_log_leaf(data)
    kind = (
        "escrow"
        if isinstance(leaf, LogEntry)
        else "claim-start"
        if isinstance(leaf, ClaimStartEntry)
        else "verdict"
    )
    value = leaf.to_value()
    fields = value if isinstance(value, dict) else value[1]
    return {"kind": kind, "fields": to_typed(fields), "leaf_hash": leaf_hash(data).hex()}


def run_claim_entry(given: dict[str, Any]) -> dict[str, Any]:
    """Read a verdict's ``claim_entry`` map (§11): its index, root and log size."""
    ref = ClaimEntryRef.from_value(from_typed(given["claim_entry"]))
    return {"index": ref.index, "log_root": ref.log_root.hex(), "log_size": ref.log_size}


def run_recount(given: dict[str, Any]) -> dict[str, Any]:
    """Recount a claim's earlier claims from the given entries (§9.6.3)."""
    leaves = [bytes.fromhex(leaf) for leaf in given["leaves"]]
    position = ClaimEntryRef(
        given["claim_entry"]["index"], bytes.fromhex(given["claim_entry"]["log_root"])
    )
    key = given["claim_key"]
    expected = ClaimStartEntry(
        index=position.index,
        record=given["record"],
        claim=bytes.fromhex(given["claim"]),
        claim_map=bytes.fromhex(given["claim_map"]),
        time=TIME,
        claim_key=None if key is None else bytes.fromhex(key),
    )
    counted = check_claim_count(leaves, position, expected, given["earlier_claims"])
    return {"earlier_claims": counted.earlier_claims}


RUNNERS: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
    "digest": run_digest,
    "log-leaf": run_leaf,
    "recount": run_recount,
    "claim-entry": run_claim_entry,
}


def _case(name: str, kind: str, given: dict[str, Any]) -> dict[str, Any]:
    return case(name, kind, given, lambda: RUNNERS[kind](given))


def _escrow(index: int, root_byte: int) -> bytes:
    return LogEntry(
        index=index,
        root=bytes([root_byte]) * 32,
        n_pairs=100,
        item_kind="image",
        owner="alice",
        time=TIME,
        rho_digest=bytes(32),
        claim_key=CLAIM_KEY,
    ).encode()


def _start(index: int, record: int, claim_id: str, key: bytes | None = CLAIM_KEY) -> bytes:
    return ClaimStartEntry(
        index=index,
        record=record,
        claim=claim_digest(claim_id),
        claim_map=MAP_DIGEST,
        time=TIME,
        claim_key=key,
    ).encode()


def _verdict(index: int, record: int, claim_id: str, claim_entry: int) -> bytes:
    return VerdictEntry(
        index=index,
        record=record,
        claim=claim_digest(claim_id),
        claim_entry=claim_entry,
        verdict=verdict_digest(b"payload"),
        decision="not-detected",
        time=TIME,
    ).encode()


#: A log of two records, three claims and a verdict: entries 0 to 6.
LOG = [
    _escrow(0, 1),
    _escrow(1, 2),
    _start(2, 0, "a"),
    _start(3, 1, "b", key=None),
    _verdict(4, 0, "a", 2),
    _start(5, 0, "c"),
    _start(6, 0, "d"),
]


def _digest_cases() -> list[dict[str, Any]]:
    return [
        _case("a claim id", "digest", {"tag": "claim-id", "value": "0123456789abcdef"}),
        _case(
            "a claim map",
            "digest",
            {"tag": "claim-map", "value": to_typed({"record": {"index": 0}})},
        ),
        _case("a verdict payload", "digest", {"tag": "verdict-payload", "value": b"payload".hex()}),
    ]


def _leaf_cases() -> list[dict[str, Any]]:
    start = ClaimStartEntry(2, 0, claim_digest("a"), MAP_DIGEST, TIME, CLAIM_KEY).to_value()[1]
    assert isinstance(start, dict)
    broken: list[tuple[str, Any]] = [
        ("an unknown tag", ["twinaudit/v0/claim-end-entry", start]),
        ("a hash tag, not a leaf tag", ["twinaudit/v0/claim-id", start]),
        ("three elements", [CLAIM_START_TAG, start, 0]),
        ("a claim-start entry with a key missing", [CLAIM_START_TAG, _without(start, "claim_map")]),
        ("a claim-start entry with an extra key", [CLAIM_START_TAG, {**start, "extra": 1}]),
        (
            "a claim-start entry whose claim_key is nil",
            [CLAIM_START_TAG, {**start, "claim_key": None}],
        ),
        ("a claim-start entry at or before its record", [CLAIM_START_TAG, {**start, "record": 2}]),
        ("a claim digest of 31 bytes", [CLAIM_START_TAG, {**start, "claim": bytes(31)}]),
        ("another spec version", [CLAIM_START_TAG, {**start, "spec": "9.9"}]),
        (
            "a verdict entry before its claim-start entry",
            [VERDICT_TAG, {**_fields(LOG[4]), "claim_entry": 4}],
        ),
        (
            "a verdict entry with another decision",
            [VERDICT_TAG, {**_fields(LOG[4]), "decision": "maybe"}],
        ),
    ]
    cases = [
        _case("an escrow entry", "log-leaf", {"leaf": LOG[0].hex()}),
        _case("a claim-start entry on a keyed record", "log-leaf", {"leaf": LOG[2].hex()}),
        _case("a claim-start entry on a keyless record", "log-leaf", {"leaf": LOG[3].hex()}),
        _case("a verdict entry", "log-leaf", {"leaf": LOG[4].hex()}),
    ]
    cases += [_case(name, "log-leaf", {"leaf": encode(value).hex()}) for name, value in broken]
    return cases


def _without(fields: dict[str, Any], key: str) -> dict[str, Any]:
    return {k: v for k, v in fields.items() if k != key}


def _fields(leaf: bytes) -> dict[str, Any]:
    value = decode_log_leaf(leaf).to_value()
    assert isinstance(value, list)
    assert isinstance(value[1], dict)
    return value[1]


def _recount(
    index: int, record: int, claim_id: str, earlier: int, **changes: Any
) -> dict[str, Any]:
    given: dict[str, Any] = {
        "leaves": [leaf.hex() for leaf in LOG[: index + 1]],
        "claim_entry": {"index": index, "log_root": MerkleTree(LOG[: index + 1]).root().hex()},
        "record": record,
        "claim": claim_digest(claim_id).hex(),
        "claim_map": MAP_DIGEST.hex(),
        "claim_key": CLAIM_KEY.hex(),
        "earlier_claims": earlier,
    }
    given.update(changes)
    return given


def _recount_cases() -> list[dict[str, Any]]:
    rows = [
        ("the first claim on a record", _recount(2, 0, "a", 0)),
        ("a claim on another record in between", _recount(3, 1, "b", 0, claim_key=None)),
        ("the second claim: a verdict in between counts nothing", _recount(5, 0, "c", 1)),
        ("the third claim", _recount(6, 0, "d", 2)),
        ("a count one too small", _recount(6, 0, "d", 1)),
        ("a count one too large", _recount(6, 0, "d", 3)),
        ("another claim's entry", _recount(5, 0, "d", 1)),
        ("another claim map", _recount(6, 0, "d", 2, claim_map=bytes(32).hex())),
        ("another claim key", _recount(6, 0, "d", 2, claim_key=None)),
        ("a verdict entry, not a claim-start entry", _recount(4, 0, "a", 0)),
        (
            "a root that is not the entries'",
            _recount(6, 0, "d", 2, claim_entry={"index": 6, "log_root": bytes(32).hex()}),
        ),
        ("an entry missing", _recount(6, 0, "d", 2, leaves=[leaf.hex() for leaf in LOG[:6]])),
    ]
    return [_case(name, "recount", given) for name, given in rows]


def _claim_entry_cases() -> list[dict[str, Any]]:
    root = MerkleTree(LOG[:3]).root()
    rows: list[tuple[str, Any]] = [
        ("a claim-start entry's position", {"index": 2, "log_root": root}),
        ("index 0, which no claim-start entry has", {"index": 0, "log_root": root}),
        ("a negative index", {"index": -1, "log_root": root}),
        ("a boolean index", {"index": True, "log_root": root}),
        ("a root of 31 bytes", {"index": 2, "log_root": root[:31]}),
        ("a key missing", {"index": 2}),
        ("an extra key", {"index": 2, "log_root": root, "size": 3}),
        ("not a map", [2, root]),
    ]
    return [_case(name, "claim-entry", {"claim_entry": to_typed(value)}) for name, value in rows]


def build() -> dict[str, Any]:
    """Return the vector document of §9.6."""
    return {
        "spec_version": SPEC_VERSION,
        "topic": "log",
        "description": (
            "Claims and verdicts as log entries (spec §9.6): the digests they carry, leaves "
            "of every kind read and refused, and earlier_claims recounted from a log's "
            "first entries. Bytes are lowercase hex; maps and values use appendix A's "
            "typed notation."
        ),
        "cases": [
            *_digest_cases(),
            *_leaf_cases(),
            *_recount_cases(),
            *_claim_entry_cases(),
        ],
    }


def main() -> None:
    """Rewrite spec/vectors/log.json."""
    VECTOR_FILE.write_text(render(build()), encoding="utf-8")


if __name__ == "__main__":
    main()
