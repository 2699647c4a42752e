"""``--log HOST:PORT`` of ``verify`` and ``verifier check``: recount ``earlier_claims`` (§9.6.3).

With ``--log`` the command asks the arbiter's escrow service for the log's entries up to
the verdict's claim, recounts the claims filed on the record before it, checks that the
verdict's claim is the entry it names, and proves that log a prefix of the arbiter's
latest checkpoint (:func:`twinaudit.wire.escrow.log_client.recount_from_log`). A count
that differs is a failed check. A verdict that binds no log position (signed before
claims were log entries) is not refused: the output says that its ``earlier_claims``
is the arbiter's statement, not recounted.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any, Final

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from twinaudit.protocol.claim.verdict import Verdict
from twinaudit.wire.escrow.log_client import recount_from_log
from twinaudit.wire.transport import TlsFiles, make_channel, parse_address

#: How long the recount may take, every call together.
RECOUNT_TIMEOUT_S: Final = 120.0

NOT_BOUND: Final = (
    "earlier_claims not recounted: the verdict binds no log position (signed before "
    "claims were log entries, or its claim was filed before), so its count is the "
    "arbiter's statement (spec 9.6.3)"
)


def add_log_args(parser: argparse.ArgumentParser) -> None:
    """Add ``--log`` and ``--log-ca``."""
    parser.add_argument(
        "--log",
        metavar="HOST:PORT",
        help="the arbiter's address: recount earlier_claims from its log's entries, and "
        "prove that log a prefix of its latest checkpoint (a count that differs fails the "
        "check)",
    )
    parser.add_argument(
        "--log-ca", type=Path, metavar="CA", help="with --log: the arbiter's CA certificate (TLS)"
    )


def recount(args: argparse.Namespace, verdict: Verdict, key: Ed25519PublicKey) -> dict[str, Any]:
    """Recount a checked verdict's ``earlier_claims`` from ``--log`` (nothing without it).

    Returns the JSON fields to report; raises the recount's
    :class:`~twinaudit.protocol.errors.VerificationError` when the log says otherwise.
    """
    if args.log is None:
        return {}
    parse_address(args.log, what="--log")
    if verdict.claim_entry is None:
        return {"log": {"recounted": False, "note": NOT_BOUND}}
    tls = TlsFiles(None, None, args.log_ca) if args.log_ca is not None else None
    channel = make_channel(args.log, tls=tls)
    try:
        found = recount_from_log(channel, verdict, key, timeout_s=RECOUNT_TIMEOUT_S)
    finally:
        channel.close()
    return {
        "log": {
            "recounted": True,
            "earlier_claims": found.count.earlier_claims,
            "claim_entry": found.count.position.index,
            "checkpoint_size": found.head.checkpoint.size,
        }
    }


def recount_line(fields: dict[str, Any], verdict: Verdict) -> str | None:
    """Return the output line of a recount's fields (None without ``--log``)."""
    log = fields.get("log")
    if log is None:
        return None
    if not log["recounted"]:
        return str(log["note"])
    return (
        f"earlier_claims recounted from the arbiter's log: {log['earlier_claims']} claim(s) on "
        f"record {verdict.claim.record_index} before its claim's entry {log['claim_entry']}, "
        f"in a log consistent with the arbiter's checkpoint of {log['checkpoint_size']} entries"
    )
