# PYTHON_ARGCOMPLETE_OK  (argcomplete's marker: this script answers completion requests)
"""The ``twinaudit`` console script: one entry point, one sub-command per task.

Exit codes: 0 success, 1 a check failed (invalid verdict, failed verification),
2 usage or input error. Every failure is one line on stderr, ``twinaudit: error: [code]
what happened; what to do``, and with ``--json`` one object on stdout too
(:mod:`twinaudit.cli.failures`).
"""

from __future__ import annotations

import argparse
import sys
import traceback
from collections.abc import Callable, Sequence
from importlib import metadata

from twinaudit.protocol import SPEC_VERSION

from . import (
    cmd_completion,
    cmd_monitor,
    cmd_oracle,
    cmd_owner,
    cmd_plan,
    cmd_verifier,
    cmd_verify,
    cmd_witness,
    conventions,
)
from .failures import (
    EXIT_FAILED,
    EXIT_USAGE,
    EXTRAS,
    Parser,
    expect_json,
    missing_extra,
    report_error,
)
from .threads import passive_wait

__all__ = ["EXIT_FAILED", "EXIT_USAGE", "EXTRAS", "build_parser", "main", "missing_extra"]


def package_version() -> str:
    """Return the installed package's version (``unknown`` when run from an uninstalled tree)."""
    try:
        return metadata.version("twinaudit")
    except metadata.PackageNotFoundError:
        return "unknown"


def build_parser() -> argparse.ArgumentParser:
    """Return the argument parser with every sub-command registered."""
    parser = Parser(
        prog="twinaudit",
        description="Verifiable third-party data-use audits of ML models.",
        epilog="Exit status, every command: 0 success; 1 a check that ran and failed (an "
        "invalid verdict, a failed replay or verification, a refused remote call, a disk "
        "error); 2 bad usage or unusable input. Errors are one line on stderr: 'twinaudit: "
        "error: [code] what happened; what to do' (with --json, also one object on stdout "
        "whose error holds code, message and hint).",
    )
    parser.add_argument(
        "-V",
        "--version",
        action="version",
        version=f"twinaudit {package_version()} (spec {SPEC_VERSION})",
        help="print the package and protocol-spec versions and exit",
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for module in (
        cmd_verify,
        cmd_plan,
        cmd_owner,
        cmd_verifier,
        cmd_oracle,
        cmd_monitor,
        cmd_witness,
        cmd_completion,
    ):
        module.register(commands)
    conventions.apply(parser)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI and return its exit status."""
    passive_wait()  # before any command imports torch (OpenMP reads it once)
    expect_json(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    cmd_completion.autocomplete(parser)
    args, unknown = parser.parse_known_args(argv)
    if unknown:  # named by the command they were given to, with its usage line and help
        by_prog = {command.prog: command for _, command in conventions.commands(parser)}
        given_to = by_prog.get(getattr(args, "command_prog", ""), parser)
        given_to.error(f"unrecognized arguments: {' '.join(unknown)}")
    handler: Callable[[argparse.Namespace], int] = args.handler
    conventions.verbosity(args)
    # -v shows a failure's traceback even beside -q: an internal error's message says to
    # run the command again with -v, and a user who ran it quiet just adds -v.
    traceback_wanted = int(getattr(args, "verbose", 0) or 0) > 0
    try:
        return handler(args)
    except (Exception, KeyboardInterrupt) as exc:  # every failure: one line, no traceback
        if traceback_wanted:
            traceback.print_exc()
        return report_error(exc, args)


if __name__ == "__main__":
    sys.exit(main())
