"""Claims and verdicts as log entries (spec §9.6): the two entry types after escrows.

The arbiter's log holds three kinds of leaf. An escrow entry (§9.2,
:class:`~.escrow_messages.LogEntry`) is the canonical encoding of a map; the two kinds
defined here are the canonical encoding of a two-element array, a tag text and a map:

- a :class:`ClaimStartEntry` (tag ``twinaudit/v0/claim-start-entry``), appended when a
  claim is *filed* (§10.7): which record, which claim (a digest of its id), the filing
  key where the record binds one, and a digest of the claim map;
- a :class:`VerdictEntry` (tag ``twinaudit/v0/verdict-entry``), appended when the
  claim's verdict is stored: which claim-start entry it answers, a digest of the
  verdict's payload, and its decision.

A map never encodes as an array, so no leaf of one kind reads as another, and the tag
names the kind. :func:`decode_log_leaf` reads any leaf of the log.
:func:`count_earlier_claims` is what anyone holding the log's first entries can
recompute: the claim-start entries on a record before a given one (a verdict's
``earlier_claims``, §11).

This module is pure: no I/O, no clock.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from . import SPEC_VERSION
from .encoding import Value, check, decode, encode
from .errors import InputError
from .escrow_messages import (
    MAX_LOG_INDEX,
    LogEntry,
    check_claim_key,
    check_hash,
    check_log_index,
    entry_fields,
    parse_entry,
    parse_time,
)
from .hashing import TAG_PREFIX, tagged_hash

#: Leaf tag of a claim-start entry (spec §4.2, §9.6).
CLAIM_START_TAG: Final = TAG_PREFIX + "claim-start-entry"
#: Leaf tag of a verdict entry (spec §4.2, §9.6).
VERDICT_TAG: Final = TAG_PREFIX + "verdict-entry"
#: Largest leaf of the log of any kind, in bytes (an escrow entry's cap, §9.2).
MAX_LEAF_BYTES: Final = 1024
#: Most values (map keys included) a leaf of any kind holds.
MAX_LEAF_VALUES: Final = 34

#: Most entries one ``GetEntries`` answer holds (spec §9.6.4).
MAX_ENTRIES_PER_CALL: Final = 256
#: Most bytes of leaf data one ``GetEntries`` answer holds (spec §9.6.4).
MAX_ENTRIES_BYTES: Final = 256 * 1024

_CLAIM_START_KEYS: Final = frozenset({"spec", "index", "record", "claim", "claim_map", "time"})
_VERDICT_KEYS: Final = frozenset(
    {"spec", "index", "record", "claim", "claim_entry", "verdict", "decision", "time"}
)
_DECISIONS: Final = frozenset({"detected", "not-detected"})


def claim_digest(claim_id: str) -> bytes:
    """Return ``tagged_hash("claim-id", claim_id)``: how the log names a claim (§9.6).

    The log never holds the id itself, which is the handle ``GetVerdict`` answers on.
    """
    if not isinstance(claim_id, str) or not claim_id:
        raise InputError("a claim id is a non-empty text")
    return tagged_hash("claim-id", claim_id)


def claim_map_digest(claim_map: Value) -> bytes:
    """Return ``tagged_hash("claim-map", claim_map)`` of a claim map value (§10.1)."""
    return tagged_hash("claim-map", claim_map)


def verdict_digest(payload: bytes) -> bytes:
    """Return ``tagged_hash("verdict-payload", payload)`` of a verdict's canonical payload."""
    if not isinstance(payload, bytes):
        raise InputError("a verdict payload is bytes")
    return tagged_hash("verdict-payload", payload)


@dataclass(frozen=True, slots=True)
class ClaimStartEntry:
    """A claim filed on record ``record`` (spec §9.6): leaf ``index`` of the log."""

    index: int
    record: int
    claim: bytes
    claim_map: bytes
    time: str
    claim_key: bytes | None = None
    spec: str = SPEC_VERSION

    def __post_init__(self) -> None:
        """Check every field (an instance is always well formed)."""
        check_log_index(self.index, "index")
        check_log_index(self.record, "record")
        if self.record >= self.index:
            raise InputError("a claim-start entry follows the record it names")
        check_hash(self.claim, "claim")
        check_hash(self.claim_map, "claim_map")
        parse_time(self.time, "claim-start time")
        if self.claim_key is not None and check_claim_key(self.claim_key) is None:
            raise InputError("claim_key, where present, is a raw Ed25519 public key")

    def to_value(self) -> list[Value]:
        """Return the leaf's value: ``[tag, map]`` (§9.6)."""
        fields: dict[str, Value] = {
            "spec": self.spec,
            "index": self.index,
            "record": self.record,
            "claim": self.claim,
            "claim_map": self.claim_map,
            "time": self.time,
        }
        if self.claim_key is not None:
            fields["claim_key"] = self.claim_key
        return [CLAIM_START_TAG, fields]

    def encode(self) -> bytes:
        """Return the leaf data (the canonical encoding of :meth:`to_value`)."""
        return encode(self.to_value())


@dataclass(frozen=True, slots=True)
class VerdictEntry:
    """The verdict of the claim filed at ``claim_entry`` (spec §9.6): leaf ``index``."""

    index: int
    record: int
    claim: bytes
    claim_entry: int
    verdict: bytes
    decision: str
    time: str
    spec: str = SPEC_VERSION

    def __post_init__(self) -> None:
        """Check every field (an instance is always well formed)."""
        check_log_index(self.index, "index")
        check_log_index(self.record, "record")
        check_log_index(self.claim_entry, "claim_entry")
        if not self.record < self.claim_entry < self.index:
            raise InputError("a verdict entry follows its claim entry, which follows its record")
        check_hash(self.claim, "claim")
        check_hash(self.verdict, "verdict")
        if self.decision not in _DECISIONS:
            raise InputError(f"decision must be one of {sorted(_DECISIONS)}")
        parse_time(self.time, "verdict entry time")

    def to_value(self) -> list[Value]:
        """Return the leaf's value: ``[tag, map]`` (§9.6)."""
        return [
            VERDICT_TAG,
            {
                "spec": self.spec,
                "index": self.index,
                "record": self.record,
                "claim": self.claim,
                "claim_entry": self.claim_entry,
                "verdict": self.verdict,
                "decision": self.decision,
                "time": self.time,
            },
        ]

    def encode(self) -> bytes:
        """Return the leaf data (the canonical encoding of :meth:`to_value`)."""
        return encode(self.to_value())


#: Any leaf of the arbiter's log.
LogLeaf = LogEntry | ClaimStartEntry | VerdictEntry


def parse_log_leaf(value: Value) -> LogLeaf:
    """Return the entry held by a decoded leaf of any kind (§9.2, §9.6)."""
    if isinstance(value, dict):
        return parse_entry(value)
    tag = value[0] if isinstance(value, list) and len(value) == 2 else None
    if not isinstance(value, list) or not isinstance(tag, str):
        raise InputError("a log leaf is an escrow entry map or a [tag, map] array")
    body = value[1]
    if tag == CLAIM_START_TAG:
        fields = entry_fields(
            body, _CLAIM_START_KEYS, "claim-start entry", frozenset({"claim_key"})
        )
        key = fields.get("claim_key")
        if "claim_key" in fields and check_claim_key(key) is None:
            raise InputError("claim_key, where present, is a raw Ed25519 public key, never nil")
        return ClaimStartEntry(
            spec=_text(fields["spec"], "spec"),
            index=check_log_index(fields["index"], "index"),
            record=check_log_index(fields["record"], "record"),
            claim=check_hash(fields["claim"], "claim"),
            claim_map=check_hash(fields["claim_map"], "claim_map"),
            time=_text(fields["time"], "claim-start time"),
            claim_key=key if isinstance(key, bytes) else None,
        )
    if tag == VERDICT_TAG:
        fields = entry_fields(body, _VERDICT_KEYS, "verdict entry", frozenset())
        return VerdictEntry(
            spec=_text(fields["spec"], "spec"),
            index=check_log_index(fields["index"], "index"),
            record=check_log_index(fields["record"], "record"),
            claim=check_hash(fields["claim"], "claim"),
            claim_entry=check_log_index(fields["claim_entry"], "claim_entry"),
            verdict=check_hash(fields["verdict"], "verdict"),
            decision=_text(fields["decision"], "decision"),
            time=_text(fields["time"], "verdict entry time"),
        )
    raise InputError(f"unknown log leaf tag {tag[:64]!r}")


def decode_log_leaf(data: bytes) -> LogLeaf:
    """Decode one leaf of the log strictly (§3.3), whatever its kind (§9.2, §9.6)."""
    if check(data, max_bytes=MAX_LEAF_BYTES) > MAX_LEAF_VALUES:
        raise InputError(f"a log leaf holds more than {MAX_LEAF_VALUES} values")
    return parse_log_leaf(decode(data, max_bytes=MAX_LEAF_BYTES))


def count_earlier_claims(leaves: Sequence[LogLeaf], claim_entry: ClaimStartEntry) -> int:
    """Return how many claim-start entries on ``claim_entry``'s record precede it (§9.6).

    ``leaves`` are the log's entries from index 0, in order, at least up to the one
    before ``claim_entry`` (later ones are not read); each one's index must be its
    position. Fewer leaves, or one out of place, is ``invalid-input``: a count over
    part of the log would be too small.
    """
    if len(leaves) < claim_entry.index:
        raise InputError(
            f"counting the claims before log entry {claim_entry.index} needs every entry"
            f" before it; {len(leaves)} given"
        )
    count = 0
    for position in range(claim_entry.index):
        leaf = leaves[position]
        if leaf.index != position:
            raise InputError(f"log leaf {position} says it is entry {leaf.index}")
        if isinstance(leaf, ClaimStartEntry) and leaf.record == claim_entry.record:
            count += 1
    return count


def _text(value: Value, what: str) -> str:
    if not isinstance(value, str):
        raise InputError(f"{what} must be a text string, got {type(value).__name__}")
    return value


__all__ = [
    "CLAIM_START_TAG",
    "MAX_ENTRIES_BYTES",
    "MAX_ENTRIES_PER_CALL",
    "MAX_LOG_INDEX",
    "VERDICT_TAG",
    "ClaimStartEntry",
    "LogLeaf",
    "VerdictEntry",
    "claim_digest",
    "claim_map_digest",
    "count_earlier_claims",
    "decode_log_leaf",
    "parse_log_leaf",
    "verdict_digest",
]
