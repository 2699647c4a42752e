"""The owner's side of escrow (spec draft §9): send the root, verify the receipt fully.

:func:`escrow_root` first checks that the arbiter signs with the key the owner trusts,
then commits, and returns a receipt only after every check of §9.3 has passed, so the
``rho`` it carries may be used to decide the publication bits (§5.5). Every call to
the arbiter runs under one overall deadline.

Failures come in two families: a gRPC failure (unreachable arbiter, deadline, a status
the arbiter returned) is raised as :class:`grpc.RpcError`; a bad answer is raised as a
:class:`~twinaudit.protocol.errors.TwinauditError` (``InputError`` for malformed data, the
``VerificationError`` family for a receipt that does not check out).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from twinaudit.protocol import SPEC_VERSION
from twinaudit.protocol.checkpoint_note import WitnessPolicy
from twinaudit.protocol.errors import VerificationError
from twinaudit.protocol.escrow_messages import (
    Checkpoint,
    EscrowRequest,
    Receipt,
    open_receipt,
    verify_log_extension,
    verify_receipt,
)
from twinaudit.protocol.log_evidence import LogEvidence
from twinaudit.wire.escrow.log_client import consistency_proof, latest_checkpoint
from twinaudit.wire.escrow.v1 import escrow_pb2, escrow_pb2_grpc
from twinaudit.wire.transport import DEFAULT_DEADLINE_S

from .witnessed import epoch_seconds, fetch_log_evidence


@dataclass(frozen=True)
class Escrowed:
    """A verified escrow receipt, its signed envelope, and its log inclusion proof."""

    receipt: Receipt
    envelope: bytes
    inclusion_proof: list[bytes]
    #: The record in a log the owner's witnesses cosigned (with a witness policy).
    log_evidence: LogEvidence | None = None
    #: The names of the witnesses whose cosignatures counted toward the policy.
    witnessed_by: tuple[str, ...] = ()


def _remaining(deadline: float) -> float:
    """Seconds left before ``deadline`` (a ``time.monotonic`` value), never negative."""
    return max(0.0, deadline - time.monotonic())


def escrow_root(
    channel: Any,
    *,
    root: bytes,
    n_pairs: int,
    item_kind: str,
    owner: str,
    claim_key: bytes,
    arbiter_public_key: Ed25519PublicKey,
    timeout_s: float = DEFAULT_DEADLINE_S,
    witness_policy: WitnessPolicy | None = None,
) -> Escrowed:
    """Escrow ``root`` with the arbiter on ``channel``; return the verified receipt.

    ``claim_key`` is the raw public half of the owner's claim key (the vault's,
    :meth:`~twinaudit.owner.vault.Vault.claim_public_key`): the record binds it, and only
    requests it signs can file claims on the record (spec §9.1, §10.7).

    Returns the parsed :class:`~twinaudit.protocol.escrow_messages.Receipt`, the signed envelope
    bytes as received (keep those: they are what a claim cites) and the log inclusion
    proof they were verified with. ``timeout_s`` bounds the whole exchange.

    Before anything is committed, the arbiter's signed log checkpoint must verify
    under ``arbiter_public_key``: with the wrong key (or the wrong arbiter) the call
    fails and the arbiter's public log holds nothing of this root. A root the log
    already holds is refused by the arbiter (``FAILED_PRECONDITION``, spec §9.1).

    With ``witness_policy``, the checkpoint note seen before the commit must meet it,
    and after the receipt the record must be in a checkpoint note its witnesses
    cosigned at or after the entry's time (:mod:`twinaudit.owner.witnessed`, §9.7.3);
    the evidence is returned as ``log_evidence``.

    Raises:
        InputError: the request is invalid (checked before anything is sent), or the
            answer is malformed.
        SignatureError: the arbiter does not sign with ``arbiter_public_key``
            (nothing was committed).
        VerificationError: the receipt fails a check of §9.3 (its subclasses say which).
        grpc.RpcError: a call failed or ran past the deadline.

    """
    # 0. Validate the request locally: nothing malformed goes on the wire.
    request = EscrowRequest(
        spec=SPEC_VERSION,
        root=root,
        n_pairs=n_pairs,
        item_kind=item_kind,
        owner=owner,
        claim_key=claim_key,
    )
    deadline = time.monotonic() + timeout_s
    # 1. The arbiter signs with the key the owner trusts: its checkpoint verifies under
    #    it. Checked before the commit, so a wrong key leaves no record in the log.
    seen, _ = fetch_checkpoint(
        channel,
        arbiter_public_key=arbiter_public_key,
        timeout_s=_remaining(deadline),
        witness_policy=witness_policy,
    )
    stub = escrow_pb2_grpc.EscrowStub(channel)  # type: ignore[no-untyped-call]
    answer = stub.Commit(
        escrow_pb2.CommitRequest(
            spec_version=request.spec,
            root=request.root,
            n_pairs=request.n_pairs,
            item_kind=request.item_kind,
            owner=request.owner,
            claim_key=claim_key,
        ),
        timeout=_remaining(deadline),
    )
    receipt_bytes = bytes(answer.receipt)
    # 2. Check the signature first, to learn (from signed data only) which proof to ask for.
    position = open_receipt(receipt_bytes, arbiter_public_key)
    if position.log_size <= seen.size:
        raise VerificationError(
            f"the receipt's log has {position.log_size} entries, not more than the "
            f"{seen.size} of the checkpoint seen before the commit: a rolled-back log"
        )
    proof = stub.GetInclusionProof(
        escrow_pb2.GetInclusionProofRequest(index=position.entry.index, size=position.log_size),
        timeout=_remaining(deadline),
    ).proof
    # 3. Every check of §9.3: signature, fields, rho_digest, inclusion under log_root.
    inclusion_proof = [bytes(element) for element in proof]
    receipt = verify_receipt(
        receipt_bytes,
        arbiter_public_key,
        expected_root=request.root,
        expected_n_pairs=request.n_pairs,
        expected_item_kind=request.item_kind,
        inclusion_proof=inclusion_proof,
        expected_owner=request.owner,
        expected_claim_key=claim_key,
    )
    if witness_policy is None:
        return Escrowed(receipt, receipt_bytes, inclusion_proof)
    # 4. The record is in a log the owner's witnesses cosigned since it was made.
    evidence, checked = fetch_log_evidence(
        channel,
        arbiter_public_key=arbiter_public_key,
        entry=receipt.entry,
        policy=witness_policy,
        not_before=epoch_seconds(receipt.entry.time),
        timeout_s=_remaining(deadline),
    )
    counted = tuple(c.name for c in checked.checkpoint.counted)
    return Escrowed(receipt, receipt_bytes, inclusion_proof, evidence, counted)


def fetch_checkpoint(
    channel: Any,
    *,
    arbiter_public_key: Ed25519PublicKey,
    previous: Checkpoint | None = None,
    timeout_s: float = DEFAULT_DEADLINE_S,
    witness_policy: WitnessPolicy | None = None,
) -> tuple[Checkpoint, bytes]:
    """Fetch the arbiter's latest signed checkpoint; check it extends ``previous`` (§9.4).

    Where the answer also carries the checkpoint as a signed note (§9.5.4), the note must
    verify under the same key and name the same size and root; with ``witness_policy``
    it must carry one and meet the policy at the time of the call (§9.5.4).

    ``previous`` is the last checkpoint the caller accepted (None the first time); the
    new one must extend it, proven by a consistency proof fetched here. Returns the
    verified checkpoint and its envelope bytes, to keep as the next ``previous``.

    Raises:
        InputError: the answer is malformed.
        VerificationError: the checkpoint or its note does not verify, they name two
            trees, or the log does not extend ``previous`` (shrunk, forked, or another
            arbiter).
        grpc.RpcError: a call failed or ran past the deadline.

    """
    deadline = time.monotonic() + timeout_s
    stub = escrow_pb2_grpc.EscrowStub(channel)  # type: ignore[no-untyped-call]
    # 1. The checkpoint is signed by the arbiter and well formed, and its signed note
    #    (§9.5.4), where the arbiter sends one, states the same tree under the same key
    #    and meets the owner's witness policy (k = 0 without).
    head = latest_checkpoint(stub, arbiter_public_key, deadline, witness_policy=witness_policy)
    checkpoint = head.checkpoint
    if previous is not None:
        # 2. The log grew append-only from the last checkpoint seen (§6.2.3); a smaller
        #    log is refused before asking for a proof that cannot exist.
        if checkpoint.size < previous.size:
            raise VerificationError(
                f"the arbiter's log shrank from {previous.size} to {checkpoint.size} entries"
            )
        proof = consistency_proof(stub, previous.size, checkpoint.size, deadline)
        verify_log_extension(previous, checkpoint, proof)
    return checkpoint, head.envelope
