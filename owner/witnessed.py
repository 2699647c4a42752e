"""The owner's witness policy check (spec §9.7.3): her record in a cosigned log.

:func:`fetch_log_evidence` asks the arbiter for its checkpoint note (``GetCheckpoint``,
which carries the cosignatures the arbiter collected) and for the inclusion proof of
her record in that note's tree (``GetInclusionProof``), and checks both under her
witness policy (:func:`~twinaudit.protocol.log_evidence.check_log_evidence`). The size
of the proof it asks for comes from the note, which is checked first; nothing the
arbiter sends is trusted before it is verified. ``owner escrow`` calls it after the
receipt (``not_before``: the entry's time), ``owner claim`` after the verdict
(``not_before``: the verdict's time), and saves the evidence beside the verdict.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from twinaudit.protocol.checkpoint_note import WitnessPolicy, verify_checkpoint_note
from twinaudit.protocol.errors import SignatureError
from twinaudit.protocol.escrow_messages import LogEntry, parse_time
from twinaudit.protocol.log_evidence import CheckedLogEvidence, LogEvidence, check_log_evidence
from twinaudit.wire.escrow.v1 import escrow_pb2, escrow_pb2_grpc
from twinaudit.wire.transport import DEFAULT_DEADLINE_S


def epoch_seconds(protocol_time: str) -> int:
    """Return a protocol time (``YYYY-MM-DDThh:mm:ssZ``) as seconds since the epoch."""
    return int(parse_time(protocol_time).timestamp())


def fetch_log_evidence(
    channel: Any,
    *,
    arbiter_public_key: Ed25519PublicKey,
    entry: LogEntry,
    policy: WitnessPolicy,
    not_before: int,
    timeout_s: float = DEFAULT_DEADLINE_S,
    clock: Callable[[], float] = time.time,
) -> tuple[LogEvidence, CheckedLogEvidence]:
    """Fetch and check the evidence that ``entry`` is in a log ``policy``'s witnesses saw.

    Raises:
        SignatureError: the arbiter sent no checkpoint note, or not one of its key.
        VerificationError: the policy is not met (the message names the witnesses
            missing or stale), or the proof does not put ``entry`` in the note's tree.
        grpc.RpcError: a call failed or ran past the deadline.

    """
    deadline = time.monotonic() + timeout_s
    stub = escrow_pb2_grpc.EscrowStub(channel)  # type: ignore[no-untyped-call]
    answer = stub.GetCheckpoint(
        escrow_pb2.GetCheckpointRequest(), timeout=max(0.0, deadline - time.monotonic())
    )
    note = bytes(answer.checkpoint_note)
    if not note:
        raise SignatureError("the arbiter serves no checkpoint note: a witness policy needs one")
    now = int(clock())
    # The note first, so that the proof's size is one the arbiter signed.
    checkpoint = verify_checkpoint_note(
        note, arbiter_public_key, policy, now=now, not_before=not_before
    )
    proof: list[bytes] = []
    if checkpoint.size > entry.index:
        reply = stub.GetInclusionProof(
            escrow_pb2.GetInclusionProofRequest(index=entry.index, size=checkpoint.size),
            timeout=max(0.0, deadline - time.monotonic()),
        )
        proof = [bytes(h) for h in reply.proof]
    evidence = LogEvidence(note, entry.encode(), tuple(proof))
    checked = check_log_evidence(
        evidence,
        arbiter_public_key,
        policy,
        record_index=entry.index,
        record_root=entry.root,
        not_before=not_before,
        now=now,
    )
    return evidence, checked


__all__ = ["epoch_seconds", "fetch_log_evidence"]
