"""Reading the arbiter's log as an outsider (spec §9.4, §9.6): entries, checkpoints, proofs.

Everything here trusts only the arbiter's public key and what the caller saved before:

- :func:`latest_checkpoint` fetches the signed checkpoint (and its note, where the
  arbiter sends one, which must state the same tree);
- :func:`fetch_entries` fetches a range of entries with ``GetEntries``, each answer
  checked against the caps of §9.6.4 before it is used;
- :func:`follow_log` takes a log from a saved checkpoint (and its frontier) to the
  latest one: the log must not shrink, a consistency proof must connect the two, and
  the new entries must hash, after the saved ones, to the new root; a fork or a
  rollback is a :class:`~twinaudit.protocol.errors.VerificationError`;
- :func:`recount_from_log` recounts a verdict's ``earlier_claims`` from the entries
  before its claim and proves that log a prefix of the arbiter's latest checkpoint.

Every call runs under one deadline for the whole operation.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from twinaudit.protocol.checkpoint_note import NO_WITNESSES, WitnessPolicy, verify_checkpoint_note
from twinaudit.protocol.claim.log_count import LogCount, recount_earlier_claims
from twinaudit.protocol.claim.verdict import Verdict
from twinaudit.protocol.errors import (
    InputError,
    LimitExceededError,
    SignatureError,
    VerificationError,
)
from twinaudit.protocol.escrow_messages import (
    Checkpoint,
    verify_checkpoint,
    verify_log_extension,
)
from twinaudit.protocol.log_entries import MAX_ENTRIES_BYTES, MAX_ENTRIES_PER_CALL, MAX_LEAF_BYTES
from twinaudit.protocol.merkle import Frontier, leaf_hash, verify_consistency
from twinaudit.wire.escrow.v1 import escrow_pb2, escrow_pb2_grpc
from twinaudit.wire.transport import DEFAULT_DEADLINE_S

#: Most entries a client fetches in one operation (a monitor's first run reads the log
#: up to its saved checkpoint; an arbiter's log of this size is some 400 MiB).
MAX_FETCH_ENTRIES = 1_000_000


def _remaining(deadline: float) -> float:
    """Seconds left before ``deadline`` (a ``time.monotonic`` value), never negative."""
    return max(0.0, deadline - time.monotonic())


def _stub(channel: Any) -> Any:
    return escrow_pb2_grpc.EscrowStub(channel)  # type: ignore[no-untyped-call]


@dataclass(frozen=True, slots=True)
class SignedHead:
    """A verified checkpoint and its signed envelope (DSSE JSON), as fetched."""

    checkpoint: Checkpoint
    envelope: bytes


def latest_checkpoint(
    stub: Any,
    arbiter_public_key: Ed25519PublicKey,
    deadline: float,
    *,
    witness_policy: WitnessPolicy | None = None,
) -> SignedHead:
    """Fetch and verify the arbiter's latest checkpoint (§9.4) and its note (§9.5.4).

    Where the answer carries the note, it must verify under the same key and name the
    same tree; with ``witness_policy`` it must carry one, and meet the policy at the
    time of the call (:class:`SignatureError` without a note).
    """
    answer = stub.GetCheckpoint(escrow_pb2.GetCheckpointRequest(), timeout=_remaining(deadline))
    envelope = bytes(answer.checkpoint)
    checkpoint = verify_checkpoint(envelope, arbiter_public_key)
    if witness_policy is not None and not answer.checkpoint_note:
        raise SignatureError("the arbiter serves no checkpoint note: a witness policy needs one")
    if answer.checkpoint_note:
        note = verify_checkpoint_note(
            bytes(answer.checkpoint_note),
            arbiter_public_key,
            witness_policy or NO_WITNESSES,
            now=int(time.time()),
        )
        note.require_same_tree(checkpoint)
    return SignedHead(checkpoint, envelope)


def consistency_proof(stub: Any, old_size: int, new_size: int, deadline: float) -> list[bytes]:
    """Fetch the consistency proof between two sizes of the log (checked by the caller)."""
    proof = stub.GetConsistencyProof(
        escrow_pb2.GetConsistencyProofRequest(old_size=old_size, new_size=new_size),
        timeout=_remaining(deadline),
    ).proof
    return [bytes(element) for element in proof]


def fetch_entries(stub: Any, start: int, end: int, deadline: float) -> list[bytes]:
    """Fetch the leaf data of entries ``start .. end - 1`` with ``GetEntries`` (§9.6.4).

    Each answer must hold at least one entry and no more than asked, none above
    MAX_LEAF_BYTES and all together at most MAX_ENTRIES_BYTES, and say a log size that
    covers them; otherwise :class:`VerificationError` (the arbiter misbehaves) or
    :class:`LimitExceededError`. What the entries are is checked by the caller,
    against a root.
    """
    if not 0 <= start <= end:
        raise InputError(f"an entry range is 0 <= start <= end, not {start}..{end}")
    if end - start > MAX_FETCH_ENTRIES:
        raise LimitExceededError("log entries fetched at once", end - start, MAX_FETCH_ENTRIES)
    leaves: list[bytes] = []
    while start + len(leaves) < end:
        first = start + len(leaves)
        want = min(MAX_ENTRIES_PER_CALL, end - first)
        answer = stub.GetEntries(
            escrow_pb2.GetEntriesRequest(start=first, count=want), timeout=_remaining(deadline)
        )
        got = [bytes(entry) for entry in answer.entries]
        if not got or len(got) > want:
            raise VerificationError(
                f"the arbiter answered {len(got)} entries from {first} where 1 to {want} were due"
            )
        if any(len(entry) > MAX_LEAF_BYTES for entry in got):
            raise LimitExceededError("log entry size", max(map(len, got)), MAX_LEAF_BYTES)
        if sum(map(len, got)) > MAX_ENTRIES_BYTES:
            raise LimitExceededError("GetEntries answer", sum(map(len, got)), MAX_ENTRIES_BYTES)
        if answer.log_size < first + len(got):
            raise VerificationError("the arbiter sent entries beyond the log size it states")
        leaves.extend(got)
    return leaves


@dataclass(frozen=True, slots=True)
class FollowedLog:
    """The log followed from a saved checkpoint to the latest: the new head and entries.

    ``entries`` are the leaf data of entries ``old_size .. head.checkpoint.size - 1``,
    each proven by ``frontier`` (the new head's, after them) hashing to the new root.
    """

    old_size: int
    head: SignedHead
    entries: list[bytes]
    frontier: Frontier


def frontier_of(stub: Any, checkpoint: Checkpoint, deadline: float) -> Frontier:
    """Return the frontier of a checkpoint's tree, from its entries (a first run: O(n)).

    The entries must hash to the checkpoint's root (:class:`VerificationError`).
    """
    frontier = Frontier()
    for leaf in fetch_entries(stub, 0, checkpoint.size, deadline):
        frontier.append(leaf_hash(leaf))
    if frontier.root() != checkpoint.root:
        raise VerificationError(
            f"the arbiter's first {checkpoint.size} entries do not hash to the saved"
            " checkpoint's root: the log it serves is not the one it signed"
        )
    return frontier


def follow_log(
    channel: Any,
    arbiter_public_key: Ed25519PublicKey,
    saved: Checkpoint,
    saved_frontier: Frontier | None = None,
    *,
    timeout_s: float = DEFAULT_DEADLINE_S,
) -> FollowedLog:
    """Follow the log from ``saved`` to the arbiter's latest checkpoint (§9.4, §9.6.4).

    Steps, each one's failure a :class:`VerificationError` (a rolled-back or forked
    log, or entries other than the signed ones):

    1. the latest checkpoint verifies under the arbiter's key (its note too);
    2. it is no smaller than ``saved``, and a consistency proof connects the two;
    3. the entries after ``saved``, appended to its frontier (fetched and checked from
       the entries when ``saved_frontier`` is None), hash to the latest root.
    """
    deadline = time.monotonic() + timeout_s
    stub = _stub(channel)
    head = latest_checkpoint(stub, arbiter_public_key, deadline)
    new = head.checkpoint
    if new.size < saved.size:
        raise VerificationError(
            f"the arbiter's log shrank from {saved.size} to {new.size} entries since the saved"
            " checkpoint: a rolled-back or forked log"
        )
    verify_log_extension(saved, new, consistency_proof(stub, saved.size, new.size, deadline))
    frontier = (saved_frontier or frontier_of(stub, saved, deadline)).copy()
    if frontier.size != saved.size or frontier.root() != saved.root:
        raise InputError("the saved frontier is not the saved checkpoint's tree")
    entries = fetch_entries(stub, saved.size, new.size, deadline)
    for leaf in entries:
        frontier.append(leaf_hash(leaf))
    if frontier.root() != new.root:
        raise VerificationError(
            f"the entries {saved.size}..{new.size - 1} the arbiter served do not hash to its"
            " latest checkpoint's root: it serves another log than it signed"
        )
    return FollowedLog(saved.size, head, entries, frontier)


@dataclass(frozen=True, slots=True)
class Recount:
    """A verdict's ``earlier_claims`` recounted from the log, and the checkpoint it holds in."""

    count: LogCount
    head: SignedHead


def recount_from_log(
    channel: Any,
    verdict: Verdict,
    arbiter_public_key: Ed25519PublicKey,
    *,
    timeout_s: float = DEFAULT_DEADLINE_S,
) -> Recount:
    """Recount a checked verdict's ``earlier_claims`` from the arbiter's log (§9.6.3).

    Fetches the entries up to the claim's claim-start entry, recounts
    (:func:`~twinaudit.protocol.claim.log_count.recount_earlier_claims`), and proves
    that log a prefix of the arbiter's latest checkpoint with a consistency proof.
    """
    position = verdict.claim_entry
    if position is None:
        raise VerificationError(
            "the verdict binds no log position: its earlier_claims cannot be recounted"
        )
    deadline = time.monotonic() + timeout_s
    stub = _stub(channel)
    head = latest_checkpoint(stub, arbiter_public_key, deadline)
    latest = head.checkpoint
    if latest.size < position.log_size:
        raise VerificationError(
            f"the arbiter's log has {latest.size} entries, fewer than the {position.log_size}"
            " the verdict was counted in: a rolled-back or forked log"
        )
    count = recount_earlier_claims(verdict, fetch_entries(stub, 0, position.log_size, deadline))
    verify_consistency(
        old_size=position.log_size,
        new_size=latest.size,
        old_root=position.log_root,
        new_root=latest.root,
        proof=consistency_proof(stub, position.log_size, latest.size, deadline),
    )
    return Recount(count, head)
