"""A record's place in a witnessed log: the evidence a client checks a policy on (§9.7.3).

A verdict (and an escrow receipt) names its record by index and root; its signature
is the arbiter's alone. To hold the arbiter to one view of its log, a client checks
*log evidence*: a checkpoint note cosigned by the witnesses of its policy, the record's
log entry (its leaf data, §9.2) and the entry's inclusion proof in the note's tree.
``owner claim --witness-policy`` fetches it from the arbiter right after the verdict,
checks it and saves it beside the verdict (``log-evidence.json``); ``verifier check``
and ``twinaudit verify`` check it again, offline.

:func:`check_log_evidence` refuses, each with a typed error: a note that is not the
arbiter's or lacks ``k`` counted cosignatures (the message names the witnesses missing
and stale; a cosignature is stale when it states a time more than the policy's skew
before ``not_before``, the time the record or the verdict was signed); an entry that is
not the record named; and an inclusion proof that does not reach the note's root, which
covers a note whose tree does not hold the record.
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass
from typing import Final

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from .checkpoint_note import VerifiedCheckpoint, WitnessPolicy, verify_checkpoint_note
from .claim.verdict import Verdict
from .errors import InputError, LimitExceededError, ProofError, VerificationError
from .escrow_messages import LogEntry, decode_entry, parse_time
from .limits import MAX_PROOF_HASHES
from .merkle import verify_inclusion
from .note import MAX_NOTE_BYTES

#: The ``format`` of a log evidence file.
FORMAT: Final = "twinaudit-log-evidence/1"
#: Largest log evidence file read: a note, an entry and a proof, base64 and JSON.
MAX_EVIDENCE_BYTES: Final = 2 * MAX_NOTE_BYTES + 64 * 1024


@dataclass(frozen=True)
class LogEvidence:
    """A cosigned checkpoint note, a log entry, and the entry's inclusion proof in it."""

    checkpoint_note: bytes
    entry: bytes
    inclusion_proof: tuple[bytes, ...]

    def encode(self) -> bytes:
        """Return the evidence as a JSON file's bytes (sorted keys, one line)."""
        value = {
            "format": FORMAT,
            "checkpoint_note": self.checkpoint_note.decode("utf-8"),
            "entry": base64.b64encode(self.entry).decode("ascii"),
            "inclusion_proof": [base64.b64encode(h).decode("ascii") for h in self.inclusion_proof],
        }
        return (json.dumps(value, sort_keys=True, ensure_ascii=False) + "\n").encode("utf-8")


def parse_log_evidence(data: bytes) -> LogEvidence:
    """Read a log evidence file strictly (its form; :func:`check_log_evidence` checks it).

    Raises:
        LimitExceededError: above :data:`MAX_EVIDENCE_BYTES` or the proof's largest length.
        InputError: not the JSON object of :meth:`LogEvidence.encode`.

    """
    if len(data) > MAX_EVIDENCE_BYTES:
        raise LimitExceededError("log evidence in bytes", len(data), MAX_EVIDENCE_BYTES)
    try:
        value = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise InputError("log evidence is a UTF-8 JSON object") from None
    keys = {"format", "checkpoint_note", "entry", "inclusion_proof"}
    if not isinstance(value, dict) or set(value) != keys or value["format"] != FORMAT:
        raise InputError(f"log evidence is a {FORMAT} object with exactly {sorted(keys)}")
    note, entry, proof = value["checkpoint_note"], value["entry"], value["inclusion_proof"]
    if not isinstance(note, str) or not isinstance(entry, str) or not isinstance(proof, list):
        raise InputError("log evidence holds a note (text), an entry and a proof (base64)")
    if len(proof) > MAX_PROOF_HASHES:
        raise LimitExceededError("inclusion proof hashes", len(proof), MAX_PROOF_HASHES)
    return LogEvidence(
        note.encode("utf-8"), _b64(entry, "entry"), tuple(_b64(h, "proof hash") for h in proof)
    )


def _b64(text: object, what: str) -> bytes:
    if not isinstance(text, str):
        raise InputError(f"the log evidence's {what} is base64 text")
    try:
        return base64.b64decode(text.encode("ascii"), validate=True)
    except (UnicodeEncodeError, binascii.Error):
        raise InputError(f"the log evidence's {what} is not base64") from None


@dataclass(frozen=True)
class CheckedLogEvidence:
    """Evidence that checked: the cosigned checkpoint and the record's entry in it."""

    checkpoint: VerifiedCheckpoint
    entry: LogEntry


def check_log_evidence(
    evidence: LogEvidence,
    arbiter_public_key: Ed25519PublicKey,
    policy: WitnessPolicy,
    *,
    record_index: int,
    record_root: bytes,
    not_before: int,
    now: int,
) -> CheckedLogEvidence:
    """Check that record ``record_index`` is in a log the policy's witnesses cosigned.

    ``not_before`` is the earliest time (seconds) a counted cosignature may state, less
    the policy's skew: the verdict's (or the receipt's) time. ``now`` is the client's
    clock, for cosignatures from the future.

    Raises:
        SignatureError: the note is not the arbiter's, or a known key's line fails.
        VerificationError: fewer than ``k`` witnesses counted (the message names the
            missing and stale ones), the origin is not the arbiter's, or the entry is
            not the record named.
        ProofError: the inclusion proof does not reach the note's root (a note whose
            tree does not hold the record included).
        InputError: the note or the entry is malformed.

    """
    checkpoint = verify_checkpoint_note(
        evidence.checkpoint_note, arbiter_public_key, policy, now=now, not_before=not_before
    )
    entry = decode_entry(evidence.entry)
    if entry.index != record_index or entry.root != record_root:
        raise VerificationError(
            f"the log evidence's entry is record {entry.index}, not the record "
            f"{record_index} named (or its root differs)"
        )
    if checkpoint.size <= record_index:
        raise ProofError(
            f"the cosigned checkpoint has {checkpoint.size} entries: it does not hold "
            f"record {record_index} (a stale checkpoint)"
        )
    verify_inclusion(
        leaf_data=evidence.entry,
        index=record_index,
        size=checkpoint.size,
        proof=evidence.inclusion_proof,
        root=checkpoint.root,
    )
    return CheckedLogEvidence(checkpoint, entry)


def check_verdict_evidence(
    evidence: LogEvidence,
    verdict: Verdict,
    arbiter_public_key: Ed25519PublicKey,
    policy: WitnessPolicy,
    *,
    now: int,
) -> CheckedLogEvidence:
    """Check a verdict's log evidence (§9.7.3): its record, cosigned since the verdict.

    The verdict must have been checked (its signature) first. Its record (the claim
    map's ``record``) must be in the cosigned note's tree, with the entry's time its
    ``receipt_time``, and the cosignatures counted must state times no earlier than the
    verdict's ``time`` less the policy's skew.

    Raises:
        VerificationError: the errors of :func:`check_log_evidence`, or the entry's
            time is not the verdict's ``receipt_time``.

    """
    checked = check_log_evidence(
        evidence,
        arbiter_public_key,
        policy,
        record_index=verdict.claim.record_index,
        record_root=verdict.claim.record_root,
        not_before=int(parse_time(verdict.time, "verdict time").timestamp()),
        now=now,
    )
    if checked.entry.time != verdict.receipt_time:
        raise VerificationError(
            f"the log entry's time {checked.entry.time} is not the verdict's receipt_time "
            f"{verdict.receipt_time}"
        )
    return checked


__all__ = [
    "FORMAT",
    "MAX_EVIDENCE_BYTES",
    "CheckedLogEvidence",
    "LogEvidence",
    "check_log_evidence",
    "check_verdict_evidence",
    "parse_log_evidence",
]
