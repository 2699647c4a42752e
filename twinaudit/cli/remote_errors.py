"""Every gRPC status a command's remote call can end with, as a twinaudit failure.

One table, :data:`STATUS_TABLE`, gives each status code other than OK the error code
the command line reports (spec §2.2, §2.2.1), what happened in words, and the next
step. A status whose call carries the server's typed error (a ``google.rpc.ErrorInfo``
of domain ``twinaudit``, spec §2.2) is reported with that error's code, its message
and its rule: the server said what was wrong, and the table's code is only what the
status alone would mean. Two statuses are read further, from gRPC's own words:

- ``RESOURCE_EXHAUSTED`` from a message over gRPC's cap (``Sent``/``Received message
  larger than max (SIZE vs. LIMIT)``) names the size, the limit and which side
  refused (:func:`_message_size`);
- ``UNAVAILABLE`` from a TLS handshake that failed is ``unauthenticated``, a TLS
  problem, not a server that is down.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

import grpc

from twinaudit.protocol.errors import (
    CancelledError,
    ClaimBusyError,
    InputError,
    LimitExceededError,
    NotFoundError,
    PermissionDeniedError,
    RemoteCallError,
    RemoteDeadlineError,
    StateError,
    TwinauditError,
    UnauthenticatedError,
    UnavailableError,
    UnimplementedError,
)
from twinaudit.wire.transport import MAX_MESSAGE_BYTES, ErrorDetails

from .error_shape import Failure, hint_for, own_hint

#: Exit status of a failed remote call, whatever its status (docs/cli.md).
EXIT_REMOTE: Final = 1


@dataclass(frozen=True)
class StatusRow:
    """How one gRPC status is reported: its error class, what happened, whose code wins."""

    #: The twinaudit error the status means when the call carries no typed error.
    error: type[TwinauditError]
    #: What happened, in words; ``{server}`` is the server named (its address, if known).
    what: str
    #: Whether the server's typed error (ErrorInfo), when present, decides the code.
    typed: bool


#: Every status code but OK (tests/cli/test_error_shape.py checks that none is missing).
STATUS_TABLE: Final[dict[grpc.StatusCode, StatusRow]] = {
    grpc.StatusCode.CANCELLED: StatusRow(
        CancelledError, "the call to {server} was cancelled before it ended", typed=False
    ),
    grpc.StatusCode.UNKNOWN: StatusRow(
        RemoteCallError, "{server} failed the call without a reason", typed=True
    ),
    grpc.StatusCode.INVALID_ARGUMENT: StatusRow(
        InputError, "{server} refused the request as invalid", typed=True
    ),
    grpc.StatusCode.DEADLINE_EXCEEDED: StatusRow(
        RemoteDeadlineError, "{server} did not answer before the call's deadline", typed=True
    ),
    grpc.StatusCode.NOT_FOUND: StatusRow(
        NotFoundError, "{server} does not have what the request names", typed=True
    ),
    grpc.StatusCode.ALREADY_EXISTS: StatusRow(
        StateError, "{server} already has what the request would create", typed=True
    ),
    grpc.StatusCode.PERMISSION_DENIED: StatusRow(
        PermissionDeniedError, "{server} refused this client the call", typed=True
    ),
    grpc.StatusCode.RESOURCE_EXHAUSTED: StatusRow(
        LimitExceededError, "the call to {server} ran over a limit", typed=True
    ),
    grpc.StatusCode.FAILED_PRECONDITION: StatusRow(
        StateError, "{server} refused the request in its current state", typed=True
    ),
    grpc.StatusCode.ABORTED: StatusRow(
        ClaimBusyError, "{server} aborted the call (the same request may succeed later)", typed=True
    ),
    grpc.StatusCode.OUT_OF_RANGE: StatusRow(
        InputError, "{server} refused a value out of range", typed=True
    ),
    grpc.StatusCode.UNIMPLEMENTED: StatusRow(
        UnimplementedError,
        "{server} does not have the method called: another service, or another twinaudit version",
        typed=False,
    ),
    grpc.StatusCode.INTERNAL: StatusRow(
        RemoteCallError, "{server} failed with an internal error", typed=True
    ),
    grpc.StatusCode.UNAVAILABLE: StatusRow(
        UnavailableError, "{server} could not be reached", typed=True
    ),
    grpc.StatusCode.DATA_LOSS: StatusRow(
        RemoteCallError, "{server} lost data answering the call", typed=True
    ),
    grpc.StatusCode.UNAUTHENTICATED: StatusRow(
        UnauthenticatedError, "{server} did not accept this client's credentials", typed=False
    ),
}

#: gRPC's words for a message over its cap: ``(SIZE vs. LIMIT)`` in bytes.
_TOO_LARGE: Final = re.compile(r"(Sent|Received) message larger than max \((\d+) vs\. (\d+)\)")
#: gRPC's words, in an UNAVAILABLE status, for a TLS handshake that failed.
_TLS_WORDS: Final = re.compile(r"ssl|tls|handshake|certificate", re.IGNORECASE)
#: Most characters of a server's status message a failure repeats (the rest is cut).
MAX_REMOTE_DETAILS: Final = 1000
#: The ``[code] `` a twinaudit server puts before its error message (abort_with_error).
_CODE_PREFIX: Final = re.compile(r"\A\[[a-z0-9-]+\] ")


def remote_failure(
    status: grpc.StatusCode | None,
    details: str,
    info: ErrorDetails | None,
    *,
    server: str | None = None,
    prog: str = "twinaudit",
) -> Failure:
    """Return the failure a command reports for a call that ended with ``status``.

    ``details`` is the status message, ``info`` the server's typed error (None where the
    call carries none), ``server`` the address called (for the words; None: "the
    server"), ``prog`` the command (its help page in a hint).
    """
    if len(details) > MAX_REMOTE_DETAILS:  # a server's words, shown to a person: capped
        details = details[:MAX_REMOTE_DETAILS] + "…"
    where = f"the server at {server}" if server else "the server"
    row = STATUS_TABLE.get(status) if status is not None else None
    if row is None:  # OK or no status at all: gRPC failed the call itself
        row = STATUS_TABLE[grpc.StatusCode.UNKNOWN]
    if info is not None and row.typed:
        message, hint = own_hint(_CODE_PREFIX.sub("", details.strip()))
        if info.rule:
            message += f" (rule {info.rule})"
        hint = hint or hint_for(info.code, prog, remote=True)
        return Failure(info.code, message, hint, EXIT_REMOTE)
    what = row.what.format(server=where)
    if status == grpc.StatusCode.RESOURCE_EXHAUSTED:
        sized = _message_size(details, where)
        if sized is not None:
            return Failure(LimitExceededError.code, sized[0], sized[1], EXIT_REMOTE)
    code = row.error.code
    if status == grpc.StatusCode.UNAVAILABLE and _TLS_WORDS.search(details):
        code, what = UnauthenticatedError.code, f"the TLS handshake with {where} failed"
    hint = hint_for(code, prog)
    if code == UnavailableError.code and server:
        hint = hint.replace("the address given", server)
    said = " ".join(details.split())
    return Failure(code, f"{what} ({said})" if said else what, hint, EXIT_REMOTE)


def _message_size(details: str, where: str) -> tuple[str, str] | None:
    """Return what happened and what to do for a message over gRPC's cap, or None."""
    found = _TOO_LARGE.search(details)
    if found is None:
        return None
    side, size, limit = found.group(1), int(found.group(2)), int(found.group(3))
    fixed = (
        "twinaudit fixes this limit (MAX_MESSAGE_BYTES in twinaudit.wire.transport, "
        f"{MAX_MESSAGE_BYTES // 2**20} MiB between an owner and an arbiter) and no option "
        "raises it"
    )
    if side == "Sent":
        return (
            f"a message this command sent to {where} is {size} bytes, over the limit of "
            f"{limit} bytes",
            f"{fixed}: send fewer or smaller items",
        )
    return (
        f"a message of {size} bytes went over the limit of {limit} bytes between this "
        f"command and {where}",
        f"{fixed}: send fewer or smaller items, and if {where} runs another twinaudit, "
        "run the same version on both sides ('twinaudit --version')",
    )
