"""A monitor of the arbiter's log (spec §9.6.5): follow it, check it, report what concerns you.

A monitor keeps a :class:`MonitorState`, the last checkpoint it verified and the
frontier of its tree, in a file of its own. :func:`watch_log` follows the log from it
to the arbiter's latest checkpoint (:func:`~.log_client.follow_log`: the log did not
shrink, a consistency proof connects the two, the new entries hash to the new root)
and returns the :class:`Finding` s among the new entries that concern the records
and claim keys its user names:

- ``claim``: a claim-start entry on a watched record, or filed under a watched key;
- ``verdict``: a verdict entry on a watched record (or on a claim found above);
- ``escrow``: an escrow entry under a watched key, or under the claim key or owner label
  of a watched record: another record for the same owner. A refused escrow request (a
  second escrow of one root, spec §9.1) leaves nothing in the log, and no monitor can
  report it; ``escrow`` is what the log can show of a re-escrow attempt. A watched
  record's own entry is reported when the monitor first reads it.

A log that does not follow from the saved state raises
:class:`~twinaudit.protocol.errors.VerificationError`, and the state is then not to be
replaced: it is the evidence.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Final

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from twinaudit.protocol.errors import InputError
from twinaudit.protocol.escrow_messages import (
    Checkpoint,
    LogEntry,
    verify_checkpoint,
)
from twinaudit.protocol.keys import key_id
from twinaudit.protocol.log_entries import (
    ClaimStartEntry,
    LogLeaf,
    VerdictEntry,
    decode_log_leaf,
)
from twinaudit.protocol.merkle import EMPTY_ROOT, Frontier, verify_inclusion
from twinaudit.wire.transport import DEFAULT_DEADLINE_S

from .log_client import FollowedLog, fetch_entries, follow_log
from .v1 import escrow_pb2, escrow_pb2_grpc

#: The ``format`` of a monitor's state file.
STATE_FORMAT: Final = "twinaudit-monitor-v1"
#: Largest state file read (a checkpoint envelope and at most 64 hashes).
MAX_STATE_BYTES: Final = 64 * 1024
#: Most records and keys one monitor watches.
MAX_WATCHED: Final = 1024


@dataclass(frozen=True, slots=True)
class MonitorState:
    """What a monitor verified last: the checkpoint (None: the empty log) and its frontier."""

    arbiter: str
    checkpoint: Checkpoint | None
    envelope: bytes | None
    frontier: Frontier | None

    @property
    def size(self) -> int:
        """The size of the log verified last."""
        return 0 if self.checkpoint is None else self.checkpoint.size

    def as_checkpoint(self) -> Checkpoint:
        """Return the checkpoint to follow from: the saved one, or the empty log's."""
        if self.checkpoint is not None:
            return self.checkpoint
        return Checkpoint(
            arbiter=self.arbiter, size=0, root=EMPTY_ROOT, time="1970-01-01T00:00:00Z"
        )

    def to_json(self) -> bytes:
        """Return the state file's bytes."""
        frontier = self.frontier if self.frontier is not None else Frontier()
        value = {
            "format": STATE_FORMAT,
            "arbiter": self.arbiter,
            "checkpoint": None if self.envelope is None else self.envelope.decode("utf-8"),
            "frontier": [digest.hex() for digest in frontier.hashes],
        }
        return (json.dumps(value, indent=1) + "\n").encode("utf-8")


def empty_state(arbiter_public_key: Ed25519PublicKey) -> MonitorState:
    """Return the state of a monitor that starts from the empty log (it reads every entry)."""
    return MonitorState(key_id(arbiter_public_key), None, None, Frontier())


def load_state(data: bytes, arbiter_public_key: Ed25519PublicKey) -> MonitorState:
    """Read a state file, or a bare checkpoint envelope (DSSE JSON, ``log-checkpoint``).

    The checkpoint must verify under the arbiter's key; a saved frontier must fold to
    its root. A bare checkpoint has no frontier: the first run reads the entries up to
    it. Anything else is ``invalid-input``.
    """
    if len(data) > MAX_STATE_BYTES:
        raise InputError(f"a monitor state file is at most {MAX_STATE_BYTES} bytes")
    try:
        value = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise InputError(
            "the checkpoint file is neither a monitor state nor a checkpoint"
        ) from None
    if not isinstance(value, dict):
        raise InputError("the checkpoint file is not a JSON object")
    arbiter = key_id(arbiter_public_key)
    if "payloadType" in value:  # a bare checkpoint envelope
        checkpoint = verify_checkpoint(data, arbiter_public_key)
        return MonitorState(arbiter, checkpoint, data, None)
    if value.get("format") != STATE_FORMAT or set(value) != {
        "format",
        "arbiter",
        "checkpoint",
        "frontier",
    }:
        raise InputError(f"a monitor state file has format {STATE_FORMAT!r} and four keys")
    if value["arbiter"] != arbiter:
        raise InputError("the monitor state was saved for another arbiter's key")
    frontier = _frontier(value["frontier"], value["checkpoint"], arbiter_public_key)
    if value["checkpoint"] is None:
        if frontier.size:
            raise InputError("a monitor state without a checkpoint has an empty frontier")
        return MonitorState(arbiter, None, None, frontier)
    envelope = str(value["checkpoint"]).encode("utf-8")
    checkpoint = verify_checkpoint(envelope, arbiter_public_key)
    if frontier.size != checkpoint.size or frontier.root() != checkpoint.root:
        raise InputError("the saved frontier is not the saved checkpoint's tree")
    return MonitorState(arbiter, checkpoint, envelope, frontier)


def _frontier(hashes: Any, envelope: Any, arbiter_public_key: Ed25519PublicKey) -> Frontier:
    """Rebuild a saved frontier: its size is the checkpoint's, its hashes its subtrees'."""
    if not isinstance(hashes, list) or len(hashes) > 64:
        raise InputError("a saved frontier is a list of at most 64 hashes")
    try:
        digests = [bytes.fromhex(item) for item in hashes]
    except (TypeError, ValueError):
        raise InputError("a saved frontier holds hex hashes") from None
    if any(len(digest) != 32 for digest in digests):
        raise InputError("a saved frontier holds 32-byte hashes")
    size = 0
    if envelope is not None:
        if not isinstance(envelope, str):
            raise InputError("a saved checkpoint is the envelope's JSON text")
        size = verify_checkpoint(envelope.encode("utf-8"), arbiter_public_key).size
    if size.bit_count() != len(digests):
        raise InputError("the saved frontier does not have the checkpoint's subtrees")
    return Frontier(size, digests)


@dataclass(frozen=True, slots=True)
class Watch:
    """What to report: entries on these records, or under these claim keys (raw bytes)."""

    records: frozenset[int] = frozenset()
    keys: frozenset[bytes] = frozenset()

    def __post_init__(self) -> None:
        """Check the sizes and forms."""
        if len(self.records) + len(self.keys) > MAX_WATCHED:
            raise InputError(f"a monitor watches at most {MAX_WATCHED} records and keys")
        if any(isinstance(r, bool) or not isinstance(r, int) or r < 0 for r in self.records):
            raise InputError("a watched record is a log index, an integer >= 0")
        if any(not isinstance(k, bytes) or len(k) != 32 for k in self.keys):
            raise InputError("a watched key is a raw Ed25519 public key of 32 bytes")


@dataclass(frozen=True, slots=True)
class Finding:
    """One entry that concerns what is watched: its kind, index, record, and why."""

    kind: str
    index: int
    record: int
    why: str
    detail: dict[str, Any] = field(default_factory=dict)

    def to_value(self) -> dict[str, Any]:
        """Return the finding as a JSON-ready map."""
        return {
            "kind": self.kind,
            "index": self.index,
            "record": self.record,
            "why": self.why,
            **self.detail,
        }


@dataclass(frozen=True, slots=True)
class MonitorRun:
    """A run that found the log consistent: the sizes, the findings, the state to save."""

    old_size: int
    new_size: int
    findings: list[Finding]
    state: MonitorState


def watch_log(
    channel: Any,
    arbiter_public_key: Ed25519PublicKey,
    state: MonitorState,
    watch: Watch,
    *,
    timeout_s: float = DEFAULT_DEADLINE_S,
) -> MonitorRun:
    """Follow the log from ``state`` and report the new entries that ``watch`` names.

    Raises :class:`~twinaudit.protocol.errors.VerificationError` for a log that does not
    follow from ``state`` (a fork or a rollback), and ``invalid-input`` for a watched
    record that is not an escrow record of the log.
    """
    followed = follow_log(
        channel, arbiter_public_key, state.as_checkpoint(), state.frontier, timeout_s=timeout_s
    )
    leaves = [decode_log_leaf(data) for data in followed.entries]
    watched = _watched_records(channel, followed, leaves, watch, timeout_s)
    findings = list(_findings(leaves, watch, watched))
    head = followed.head
    new_state = MonitorState(state.arbiter, head.checkpoint, head.envelope, followed.frontier)
    return MonitorRun(followed.old_size, head.checkpoint.size, findings, new_state)


def _watched_records(
    channel: Any,
    followed: FollowedLog,
    leaves: list[LogLeaf],
    watch: Watch,
    timeout_s: float,
) -> dict[int, LogEntry]:
    """Return each watched record's escrow entry, proven in the new checkpoint's tree."""
    deadline = time.monotonic() + timeout_s
    new = followed.head.checkpoint
    stub = escrow_pb2_grpc.EscrowStub(channel)  # type: ignore[no-untyped-call]
    found: dict[int, LogEntry] = {}
    for record in sorted(watch.records):
        if record >= new.size:
            raise InputError(f"the arbiter's log has no record {record} ({new.size} entries)")
        if record >= followed.old_size:
            leaf: LogLeaf = leaves[record - followed.old_size]
        else:
            (data,) = fetch_entries(stub, record, record + 1, deadline)
            proof = stub.GetInclusionProof(
                escrow_pb2.GetInclusionProofRequest(index=record, size=new.size),
                timeout=max(0.0, deadline - time.monotonic()),
            ).proof
            verify_inclusion(
                leaf_data=data,
                index=record,
                size=new.size,
                proof=[bytes(p) for p in proof],
                root=new.root,
            )
            leaf = decode_log_leaf(data)
        if not isinstance(leaf, LogEntry):
            raise InputError(f"log entry {record} is a claim or verdict entry, not a record")
        found[record] = leaf
    return found


def _findings(
    leaves: Iterable[LogLeaf], watch: Watch, watched: dict[int, LogEntry]
) -> Iterable[Finding]:
    """Yield what concerns the watched records and keys among the new entries."""
    keys = set(watch.keys) | {e.claim_key for e in watched.values() if e.claim_key is not None}
    owners = {entry.owner for entry in watched.values()}
    claims: set[int] = set()  # claim-start entries reported, for their verdicts
    for leaf in leaves:
        if isinstance(leaf, LogEntry):
            why = _escrow_reason(leaf, watch, keys, owners)
            if why:
                yield Finding("escrow", leaf.index, leaf.index, why, _escrow_detail(leaf))
        elif isinstance(leaf, ClaimStartEntry):
            on_record = leaf.record in watch.records
            if on_record or (leaf.claim_key is not None and leaf.claim_key in keys):
                claims.add(leaf.index)
                why = "on a watched record" if on_record else "filed under a watched claim key"
                yield Finding("claim", leaf.index, leaf.record, why, _claim_detail(leaf))
        elif isinstance(leaf, VerdictEntry) and (
            leaf.record in watch.records or leaf.claim_entry in claims
        ):
            yield Finding(
                "verdict",
                leaf.index,
                leaf.record,
                "on a watched record or claim",
                {
                    "claim_entry": leaf.claim_entry,
                    "decision": leaf.decision,
                    "verdict_digest": leaf.verdict.hex(),
                    "time": leaf.time,
                },
            )


def _escrow_reason(entry: LogEntry, watch: Watch, keys: set[bytes], owners: set[str]) -> str:
    """Say why an escrow entry concerns what is watched ("" where it does not)."""
    if entry.index in watch.records:
        return "the watched record itself"
    if entry.claim_key is not None and entry.claim_key in keys:
        return "another record under a watched claim key"
    if entry.owner in owners:
        return "another record under a watched record's owner label"
    return ""


def _escrow_detail(entry: LogEntry) -> dict[str, Any]:
    return {
        "root": entry.root.hex(),
        "owner": entry.owner,
        "n_pairs": entry.n_pairs,
        "claim_key": entry.claim_key.hex() if entry.claim_key is not None else None,
        "time": entry.time,
    }


def _claim_detail(entry: ClaimStartEntry) -> dict[str, Any]:
    return {
        "claim_digest": entry.claim.hex(),
        "claim_key": entry.claim_key.hex() if entry.claim_key is not None else None,
        "time": entry.time,
    }


__all__ = [
    "Finding",
    "MonitorRun",
    "MonitorState",
    "Watch",
    "empty_state",
    "load_state",
    "watch_log",
]
