"""``twinaudit verify``: the one command anyone holding a verdict runs (spec §11, §12).

It checks the arbiter's signature and the verdict, replays the claim's transcript when
one is given (and compares the openings of its pairs when those are given too), writes
the HTML report when asked, and prints one result line. ``verifier check`` and
``verifier replay`` are its older halves, kept as they were; all three share
:mod:`twinaudit.cli.verdict_files`.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from twinaudit.protocol.errors import InputError, TwinauditError
from twinaudit.protocol.keys import load_public_key

from .failures import report_check
from .log_recount import add_log_args, recount, recount_line
from .results import print_json, verdict_figures, verdict_reading, verdict_summary
from .witness_check import add_witness_args, check_witnessed, read_witness_inputs, witnessed_line

EXIT_OK, EXIT_FAILED = 0, 1

DESCRIPTION = (
    "Check a verdict offline: the arbiter's signature, the verdict's form and spec "
    "version, and what it says (spec section 11). With --transcript, also replay the "
    "claim from its transcript and confirm it arrives at the same decision and figures "
    "bit for bit (section 12); with --openings too, confirm that the transcript's items "
    "are the owner's openings. The first line of the output is the result: VERIFIED "
    "(checked and replayed) or VALID (checked, not replayed), then the decision. "
    "Nothing here needs the network, the model or the arbiter."
)
VERIFY_EXIT = (
    "exit status: 0 the verdict is valid and, with --transcript, its replay is identical "
    "(whatever its decision: read it in the output, or in the JSON's decision and "
    "detected); 1 it is not (signature, schema or spec version, a witness policy not met, "
    "or a replay that differs or an invalid transcript; with --log, an earlier_claims the "
    "arbiter's log does not recount), and no --html report is written; 2 bad usage, an "
    "unreadable file or key, or a report that cannot be written"
)


def register(commands: Any) -> None:
    """Add the top-level ``verify`` command."""
    verify = commands.add_parser(
        "verify",
        help="check a verdict and, given its transcript, replay it (anyone can)",
        description=DESCRIPTION,
        epilog=VERIFY_EXIT,
    )
    verify.add_argument("verdict", type=Path, help="the verdict file (verdict.json)")
    verify.add_argument(
        "--pubkey",
        "--arbiter-key",
        dest="pubkey",
        type=Path,
        metavar="KEY",
        required=True,
        help="the arbiter's public key (PEM) the verdict must be signed with",
    )
    verify.add_argument(
        "--transcript",
        type=Path,
        metavar="FILE",
        help="the claim's transcript (transcript.bin): also replay the verdict from it",
    )
    verify.add_argument(
        "--openings",
        type=Path,
        metavar="FILE",
        help="with --transcript: also check what the transcript records of the items "
        "against the openings of its pairs (owner openings writes them from the vault)",
    )
    verify.add_argument(
        "--json",
        action="store_true",
        help="print one JSON object on stdout, success or failure (verified, the "
        "decision and figures, or the error) instead of the text",
    )
    verify.add_argument(
        "--html",
        type=Path,
        metavar="FILE",
        help="also write a self-contained HTML report of the verdict for people (the "
        "decision in words, what it does and does not establish, plots, the opened pairs) "
        "to FILE, only once the verdict has checked (and replayed)",
    )
    add_log_args(verify)
    add_witness_args(verify)
    verify.set_defaults(handler=_verify)


def _failed(args: argparse.Namespace, stage: str, exc: TwinauditError) -> int:
    """Report a verdict that did not check, meet the witness policy, or replay.

    ``stage`` is ``check``, ``witnesses`` or ``replay``.
    """
    label = {"check": "INVALID", "witnesses": "NOT WITNESSED"}.get(stage, "REPLAY FAILED")
    fields = {"verified": False, "valid": stage != "check", "replayed": False, "stage": stage}
    return report_check(label, exc, args, fields)


def _verify(args: argparse.Namespace) -> int:
    from twinaudit.cli import verdict_files as files

    if args.openings is not None and args.transcript is None:
        raise InputError("--openings needs --transcript: the openings are checked on a replay")
    files.check_report_target(args.html, args.verdict, args.transcript, args.openings, args.pubkey)
    pubkey = load_public_key(args.pubkey)
    data = files.read_input(args.verdict, "verdict")
    transcript = (
        files.read_input(args.transcript, "transcript") if args.transcript is not None else None
    )
    openings = files.read_input(args.openings, "openings") if args.openings is not None else None
    witness_inputs = read_witness_inputs(args, pubkey)
    try:
        verdict = files.checked_verdict(data, pubkey)
        logged = recount(args, verdict, pubkey)
    except TwinauditError as exc:
        return _failed(args, "check", exc)
    witnessed = None
    if witness_inputs is not None:
        try:
            witnessed = check_witnessed(witness_inputs, verdict, pubkey)
        except TwinauditError as exc:
            return _failed(args, "witnesses", exc)
    done = None
    if transcript is not None:
        try:
            done = files.replayed(verdict, transcript, openings)
        except TwinauditError as exc:
            return _failed(args, "replay", exc)
    if args.html is not None:
        files.write_verdict_report(args.html, args.verdict, verdict, data, transcript, done=done)
    figures: dict[str, Any] = {}
    if done is not None and transcript is not None:
        figures = files.replay_figures(verdict, transcript, done)
    if args.json:
        report = {"html": str(args.html)} if args.html is not None else {}
        print_json(
            {
                "verified": True,
                "valid": True,
                "replayed": done is not None,
                **({"identical": True} if done is not None else {}),
                **verdict_figures(verdict),
                **figures,
                "signature_checked": True,
                **logged,
                **report,
                **(
                    {"witnessed_by": [c.name for c in witnessed.checkpoint.counted]}
                    if witnessed is not None
                    else {}
                ),
            }
        )
        return EXIT_OK
    if done is None:
        print(
            f"VALID verdict {verdict.claim_id}: {verdict_summary(verdict)}; "
            "signature checked, not replayed (no --transcript)"
        )
    else:
        print(
            f"VERIFIED verdict {verdict.claim_id}: {verdict_summary(verdict)}; "
            f"signature checked, {files.replay_status(done)}"
        )
    for line in verdict_reading(verdict):
        print(f"  {line}")
    if (recounted := recount_line(logged, verdict)) is not None:
        print(f"  {recounted}")
    if witnessed is not None:
        print(f"  {witnessed_line(witnessed)}")
    if done is not None:
        for line in files.replay_lines(done):
            print(f"  {line}")
        if figures.get("scored_alike_note") is not None:
            print(f"  note: {figures['scored_alike_note']}")
    if args.html is not None:
        print(f"wrote the HTML report {args.html}")
    return EXIT_OK
