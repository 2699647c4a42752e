"""``twinaudit monitor``: follow the arbiter's log and report what concerns your records.

It follows the log from a saved checkpoint (:mod:`twinaudit.wire.escrow.monitor`):
the log must extend it (a consistency proof) and the new entries must hash to the
latest signed root; then it reports the claims, verdicts and escrows among them that
concern the records and claim keys named, and saves the new checkpoint in the same
file. A log that does not extend the saved checkpoint is reported, and the saved file
is left as it was: it is the evidence.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any, Final

from twinaudit.protocol.atomic_file import write_atomically
from twinaudit.protocol.errors import InputError, VerificationError
from twinaudit.protocol.keys import load_public_key
from twinaudit.wire.escrow.monitor import (
    MAX_STATE_BYTES,
    Finding,
    MonitorRun,
    Watch,
    empty_state,
    load_state,
    watch_log,
)
from twinaudit.wire.transport import TlsFiles, make_channel, parse_address

from .error_shape import Failure
from .failures import failure_for, report
from .results import print_json

EXIT_OK, EXIT_INCONSISTENT, EXIT_REPORTED = 0, 1, 3

DESCRIPTION = (
    "Follow the arbiter's log from a saved checkpoint (spec section 9.6.5): verify that "
    "the latest checkpoint extends it (a consistency proof), fetch the new entries and "
    "verify them against the latest signed root, and report those that concern the "
    "records (--record) and claim keys (--key) named: a claim filed on a record or under "
    "a key, a verdict on a record, and an escrow of another record under a key or the "
    "owner label of a named record (a refused escrow, such as a second escrow of one "
    "root, leaves nothing in the log and cannot be reported). On success the latest "
    "checkpoint and its frontier are saved in the --from file, for the next run. "
    "Run it on a schedule; a log that does not extend the saved checkpoint is a forked "
    "or rolled-back log, and the saved file is kept as the evidence."
)
MONITOR_EXIT: Final = (
    f"exit status: {EXIT_OK} the log extends the saved checkpoint, whether or not "
    f"something was reported (the new checkpoint is saved); with --exit-code, "
    f"{EXIT_REPORTED} when something was reported; {EXIT_INCONSISTENT} the log does not "
    "extend the saved checkpoint (a fork or a rollback; nothing is saved) or a remote "
    "call failed; 2 bad usage or input (an unreadable or foreign checkpoint file, a key "
    "that is not 64 hex digits, a record the log does not hold)"
)

#: How long one run may take, all calls together, unless --timeout says otherwise.
DEFAULT_TIMEOUT_S: Final = 120.0


def register(commands: Any) -> None:
    """Add the top-level ``monitor`` command."""
    monitor = commands.add_parser(
        "monitor",
        help="follow the arbiter's log; report claims, verdicts and escrows on your records",
        description=DESCRIPTION,
        epilog=MONITOR_EXIT,
    )
    monitor.add_argument("--arbiter", required=True, metavar="HOST:PORT", help="the arbiter")
    monitor.add_argument(
        "--arbiter-key", type=Path, required=True, metavar="KEY", help="its public key (PEM)"
    )
    monitor.add_argument(
        "--from",
        dest="state",
        type=Path,
        required=True,
        metavar="CHECKPOINT_FILE",
        help="the saved checkpoint: this command's state file, or a checkpoint envelope "
        "(the first run then reads the log up to it); replaced on success",
    )
    monitor.add_argument(
        "--init",
        action="store_true",
        help="start from the empty log when CHECKPOINT_FILE does not exist yet (reads "
        "every entry once, and reports what concerns you in all of them)",
    )
    monitor.add_argument(
        "--record",
        type=int,
        action="append",
        default=[],
        metavar="R",
        help="a record (log index) to watch; repeatable",
    )
    monitor.add_argument(
        "--key",
        action="append",
        default=[],
        metavar="K",
        help="a claim key to watch, as 64 hex digits (the raw Ed25519 public key); repeatable",
    )
    monitor.add_argument("--json", action="store_true", help="print one JSON object")
    monitor.add_argument(
        "--exit-code", action="store_true", help=f"exit {EXIT_REPORTED} when something was reported"
    )
    monitor.add_argument(
        "--timeout",
        type=float,
        default=DEFAULT_TIMEOUT_S,
        metavar="S",
        help=f"seconds for the whole run, every call together (default {DEFAULT_TIMEOUT_S:g})",
    )
    monitor.add_argument("--ca", type=Path, help="CA certificate of the arbiter (enables TLS)")
    monitor.add_argument("--cert", type=Path, help="client certificate for mTLS")
    monitor.add_argument("--cert-key", type=Path, help="client private key for mTLS")
    monitor.set_defaults(handler=_monitor)


def _keys(texts: list[str]) -> frozenset[bytes]:
    keys = set()
    for text in texts:
        try:
            key = bytes.fromhex(text)
        except ValueError:
            key = b""
        if len(key) != 32:
            raise InputError(
                f"--key {text[:80]!r} is not a raw Ed25519 public key in 64 hex digits"
            )
        keys.add(key)
    return frozenset(keys)


def _watch(args: argparse.Namespace) -> Watch:
    if not args.record and not args.key:
        raise InputError("name at least one --record or --key to watch")
    if any(record < 0 for record in args.record):
        raise InputError("a --record is a log index, 0 or more")
    if not 0 < args.timeout <= 3600:
        raise InputError("--timeout is more than 0 and at most 3600 seconds")
    return Watch(frozenset(args.record), _keys(args.key))


def _read_state(path: Path) -> bytes | None:
    try:
        with path.open("rb") as stream:
            data = stream.read(MAX_STATE_BYTES + 1)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc.strerror}") from None
    return data


def _monitor(args: argparse.Namespace) -> int:
    watch = _watch(args)
    parse_address(args.arbiter, what="--arbiter")
    key = load_public_key(args.arbiter_key)
    data = _read_state(args.state)
    if data is None and not args.init:
        raise InputError(
            f"{args.state} does not exist: give a saved checkpoint, or --init to start from "
            "the empty log"
        )
    state = empty_state(key) if data is None else load_state(data, key)
    tls = TlsFiles(args.cert, args.cert_key, args.ca) if args.ca else None
    channel = make_channel(args.arbiter, tls=tls)
    try:
        run = watch_log(channel, key, state, watch, timeout_s=args.timeout)
    except VerificationError as exc:
        _inconsistent(args, state.size, exc)
        return EXIT_INCONSISTENT
    finally:
        channel.close()
    write_atomically(args.state, run.state.to_json())
    _print(args, run)
    return EXIT_REPORTED if args.exit_code and run.findings else EXIT_OK


def _inconsistent(args: argparse.Namespace, saved_size: int, exc: VerificationError) -> None:
    """Report a log that does not extend the saved checkpoint, in the one error shape."""
    failure = failure_for(exc, args)
    message = (
        f"INCONSISTENT: the arbiter's log does not extend the checkpoint saved in {args.state}"
        f" ({saved_size} entries): {failure.message}"
    )
    hint = (
        f"{args.state} is kept as it was: with the arbiter's answers it is evidence of a "
        "forked or rolled-back log"
    )
    failed = Failure(failure.code, message, hint, EXIT_INCONSISTENT)
    report(failed, json=bool(args.json), fields={"consistent": False, "saved_size": saved_size})


def _print(args: argparse.Namespace, run: MonitorRun) -> None:
    if args.json:
        print_json(
            {
                "consistent": True,
                "old_size": run.old_size,
                "new_size": run.new_size,
                "reported": len(run.findings),
                "findings": [finding.to_value() for finding in run.findings],
            }
        )
        return
    new = run.new_size - run.old_size
    print(
        f"CONSISTENT: the log grew from {run.old_size} to {run.new_size} entries ({new} new, "
        f"all verified); {len(run.findings)} reported; checkpoint saved in {args.state}"
    )
    for finding in run.findings:
        print(f"  {_line(finding)}")


def _line(finding: Finding) -> str:
    detail = finding.detail
    if finding.kind == "claim":
        key = detail["claim_key"] or "none (a keyless record)"
        return (
            f"claim filed on record {finding.record} at entry {finding.index}"
            f" ({finding.why}), {detail['time']}, filing key {key}"
        )
    if finding.kind == "verdict":
        return (
            f"verdict {detail['decision'].upper()} on record {finding.record} at entry"
            f" {finding.index}, for the claim at entry {detail['claim_entry']}, {detail['time']}"
        )
    return (
        f"escrow of record {finding.index} ({finding.why}): owner {detail['owner']!r},"
        f" {detail['n_pairs']} pairs, root {detail['root']}, {detail['time']}"
    )
