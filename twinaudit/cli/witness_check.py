"""The witness policy options of ``verifier check`` and ``twinaudit verify`` (spec §9.7.3).

``--witness-policy FILE`` names the witnesses the reader trusts and how many must have
cosigned; the verdict's log evidence (``--log-evidence``, by default the
``log-evidence.json`` that ``owner claim --witness-policy`` saved beside the verdict)
must then put the verdict's record in a checkpoint they cosigned at or after the
verdict's time. Without ``--witness-policy`` nothing here runs.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from twinaudit.protocol.checkpoint_note import WitnessPolicy
from twinaudit.protocol.claim.verdict import Verdict
from twinaudit.protocol.errors import InputError
from twinaudit.protocol.log_evidence import (
    MAX_EVIDENCE_BYTES,
    CheckedLogEvidence,
    LogEvidence,
    check_verdict_evidence,
    parse_log_evidence,
)
from twinaudit.protocol.witness_policy import read_policy

#: The log evidence file ``owner claim --witness-policy`` writes beside the verdict.
EVIDENCE_FILE = "log-evidence.json"


def add_witness_args(parser: argparse.ArgumentParser) -> None:
    """Add ``--witness-policy`` and ``--log-evidence`` to ``parser``."""
    parser.add_argument(
        "--witness-policy",
        type=Path,
        metavar="FILE",
        help="also require the verdict's record to be in a checkpoint of the arbiter's log "
        "that these witnesses cosigned at or after the verdict (C2SP tlog-policy lines: "
        "witness NAME VKEY, group NAME K MEMBERS..., quorum NAME); a note without the "
        "quorum is refused, naming the witnesses missing or stale",
    )
    parser.add_argument(
        "--log-evidence",
        type=Path,
        metavar="FILE",
        help=f"with --witness-policy: the verdict's log evidence (default: {EVIDENCE_FILE} "
        "beside the verdict, as owner claim --witness-policy saves it)",
    )


@dataclass(frozen=True)
class WitnessInputs:
    """A reader's policy and the verdict's log evidence, read before any check."""

    policy: WitnessPolicy
    evidence: LogEvidence


def read_witness_inputs(args: argparse.Namespace, pubkey: Ed25519PublicKey) -> WitnessInputs | None:
    """Read the policy and the evidence (None without ``--witness-policy``).

    Raises:
        InputError: an unreadable or malformed policy or evidence file, a policy whose
            log lines do not name the arbiter, or ``--log-evidence`` without a policy.

    """
    if args.witness_policy is None:
        if args.log_evidence is not None:
            raise InputError("--log-evidence is checked under a --witness-policy: give one")
        return None
    policy_file = read_policy(args.witness_policy)
    policy_file.require_log(pubkey)
    path = args.log_evidence or args.verdict.parent / EVIDENCE_FILE
    try:
        with path.open("rb") as handle:
            data = handle.read(MAX_EVIDENCE_BYTES + 1)
    except OSError as exc:
        raise InputError(f"cannot read the log evidence {path}: {exc.strerror}") from None
    return WitnessInputs(policy_file.policy, parse_log_evidence(data))


def check_witnessed(
    inputs: WitnessInputs, verdict: Verdict, pubkey: Ed25519PublicKey
) -> CheckedLogEvidence:
    """Check the verdict's log evidence under the policy, at the current time."""
    return check_verdict_evidence(
        inputs.evidence, verdict, pubkey, inputs.policy, now=int(time.time())
    )


def witnessed_line(checked: CheckedLogEvidence) -> str:
    """Say which witnesses cosigned the checkpoint that holds the record."""
    names = ", ".join(c.name for c in checked.checkpoint.counted) or "none (quorum none)"
    return (
        f"record {checked.entry.index} is in the arbiter's log of {checked.checkpoint.size} "
        f"entries as cosigned by {names}"
    )
