"""One shape for every command-line failure (issue #44 item 2, docs/cli.md, spec §2.2.1).

Each row of :data:`ROWS` is an error class: argparse's usage error, each code of the
taxonomy raised inside a command, each gRPC status a remote call ends with (real
failed calls to one server on 127.0.0.1, and to a closed port), a message over gRPC's
cap on either side, a missing extra, a refused file operation and an exception nobody
expected. Every row runs in text and with ``--json``, and must print exactly one
``twinaudit: error: [code] what happened; what to do`` line on stderr (after argparse's
usage line, for a usage error), no traceback, the exit status the docs state, nothing
on stdout in text, and one JSON object whose ``error`` holds the same code, message and
hint with ``--json``.
"""

from __future__ import annotations

import errno
import json
import re
import socket
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from twinaudit.cli import cmd_plan
from twinaudit.cli.error_shape import HINTS, LOCAL_CODES
from twinaudit.cli.main import main
from twinaudit.cli.remote_errors import MAX_REMOTE_DETAILS, STATUS_TABLE, remote_failure
from twinaudit.protocol import errors as taxonomy
from twinaudit.protocol.errors import (
    ClaimBusyError,
    CommitmentError,
    EncodingError,
    InputError,
    LimitExceededError,
    ModelMismatchError,
    NotFoundError,
    OracleError,
    ParameterError,
    ParaphraserError,
    ProofError,
    RateLimitedError,
    RootMismatchError,
    SignatureError,
    StateError,
    TwinauditError,
    VaultIntegrityError,
    VaultStorageError,
    VerificationError,
    VersionError,
)
from twinaudit.wire.transport import abort_with_error, make_channel, make_server

#: The one line: code, what happened, what to do (none of them empty).
LINE = re.compile(r"\Atwinaudit: error: \[([a-z0-9-]+)\] (\S.*?); (\S.*)\Z")
#: A call's deadline here: every call below fails at once or on a refused connection.
TIMEOUT_S = 10.0
#: The test server's cap on the messages it receives.
SERVER_CAP = 1000

# --- one real server on 127.0.0.1 ------------------------------------------------------------


def _abort_with(status: grpc.StatusCode) -> Callable[[bytes, grpc.ServicerContext], bytes]:
    def handler(_: bytes, context: grpc.ServicerContext) -> bytes:
        context.abort(status, f"the server says {status.name.lower()}")
        raise AssertionError("unreachable")

    return handler


def _hostile(_: bytes, context: grpc.ServicerContext) -> bytes:
    context.abort(grpc.StatusCode.INTERNAL, "\x1b[2J\x1b[31mrun rm -rf /\nnow\r" + "x" * 5000)
    raise AssertionError("unreachable")


def _typed(_: bytes, context: grpc.ServicerContext) -> bytes:
    abort_with_error(context, NotFoundError("record 7 is not in the log (its size is 3)"))


@pytest.fixture(scope="module")
def server() -> Iterator[int]:
    """Serve ``/t.S/<STATUS>`` (aborts with it), ``/t.S/Typed`` and ``/t.S/Echo``."""
    methods = {
        code.name: grpc.unary_unary_rpc_method_handler(_abort_with(code)) for code in STATUS_TABLE
    }
    methods["Typed"] = grpc.unary_unary_rpc_method_handler(_typed)
    methods["Hostile"] = grpc.unary_unary_rpc_method_handler(_hostile)
    methods["Echo"] = grpc.unary_unary_rpc_method_handler(lambda request, _: request)

    def register(grpc_server: grpc.Server) -> None:
        grpc_server.add_generic_rpc_handlers([grpc.method_handlers_generic_handler("t.S", methods)])

    running, port = make_server("127.0.0.1:0", register, max_receive_bytes=SERVER_CAP)
    yield port
    running.stop(0)


def _failed_call(port: int, method: str, message: bytes = b"x", **channel: Any) -> grpc.RpcError:
    with make_channel(f"127.0.0.1:{port}", **channel) as opened:
        try:
            opened.unary_unary(f"/t.S/{method}")(message, timeout=TIMEOUT_S)
        except grpc.RpcError as exc:
            return exc
    raise AssertionError(f"{method} did not fail")


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


# --- the rows ---------------------------------------------------------------------------------

#: One error raised inside a command for every class of the taxonomy: (error, code, status).
RAISED: list[tuple[BaseException, str, int]] = [
    (InputError("the images mix grey and colour"), "invalid-input", 2),
    (InputError("a.png has transparent pixels; flatten it first"), "invalid-input", 2),
    (EncodingError("a map's keys are not in order"), "non-canonical-encoding", 2),
    (LimitExceededError("payload size", 70, 64), "limit-exceeded", 2),
    (RateLimitedError("owner-1", 5, 0.5, 12.0), "limit-exceeded", 2),
    (ParameterError("--pairs must be at least 1"), "invalid-parameter", 2),
    (NotFoundError("claim c-1 is not in the store"), "not-found", 2),
    (ModelMismatchError("class-count", "the model returns 10 classes"), "model-mismatch", 2),
    (VersionError("spec 0.9 is not spoken here"), "unsupported-version", 2),
    (VerificationError("the receipt does not match the root"), "verification-failed", 1),
    (ProofError("the proof is 3 hashes long, not 4"), "invalid-proof", 1),
    (RootMismatchError(b"\x01", b"\x02"), "root-mismatch", 1),
    (CommitmentError("the salt does not open the commitment"), "commitment-mismatch", 1),
    (SignatureError("the verdict was signed by another key"), "invalid-signature", 1),
    (VaultIntegrityError(Path("vault"), "pairs.bin", "modified"), "vault-integrity", 1),
    (StateError("the detector has already decided"), "invalid-state", 1),
    (ClaimBusyError("claim c-1 is held", retry_after_s=30.0), "claim-busy", 1),
    (
        VaultStorageError(Path("vault"), "write pairs", OSError(errno.ENOSPC, "full")),
        "vault-storage",
        1,
    ),
    (OracleError("unreachable", "no answer at 10.0.0.9:7500"), "oracle-failed", 1),
    (ParaphraserError("unreachable", "no answer"), "paraphraser-failed", 1),
    (ModuleNotFoundError("No module named 'torch'", name="torch"), "missing-extra", 2),
    (PermissionError(errno.EACCES, "Permission denied", "out/verdict.json"), "io-error", 1),
    (RuntimeError("an invariant broke"), "internal-error", 1),
    (KeyError("pairs"), "internal-error", 1),
    (KeyboardInterrupt(), "cancelled", 130),  # Ctrl-C: one line, the status a shell reports
]

#: Each gRPC status a call ends with, from the test server, and the code reported.
BY_STATUS: dict[grpc.StatusCode, str] = {
    grpc.StatusCode.CANCELLED: "cancelled",
    grpc.StatusCode.UNKNOWN: "remote-failed",
    grpc.StatusCode.INVALID_ARGUMENT: "invalid-input",
    grpc.StatusCode.DEADLINE_EXCEEDED: "deadline-exceeded",
    grpc.StatusCode.NOT_FOUND: "not-found",
    grpc.StatusCode.ALREADY_EXISTS: "invalid-state",
    grpc.StatusCode.PERMISSION_DENIED: "permission-denied",
    grpc.StatusCode.RESOURCE_EXHAUSTED: "limit-exceeded",
    grpc.StatusCode.FAILED_PRECONDITION: "invalid-state",
    grpc.StatusCode.ABORTED: "claim-busy",
    grpc.StatusCode.OUT_OF_RANGE: "invalid-input",
    grpc.StatusCode.UNIMPLEMENTED: "unimplemented",
    grpc.StatusCode.INTERNAL: "remote-failed",
    grpc.StatusCode.UNAVAILABLE: "unavailable",
    grpc.StatusCode.DATA_LOSS: "remote-failed",
    grpc.StatusCode.UNAUTHENTICATED: "unauthenticated",
}


def _run(monkeypatch: pytest.MonkeyPatch, error: BaseException, json_flag: bool) -> int:
    """Run ``twinaudit plan`` (it takes --json) with its work replaced by raising ``error``."""

    def fails(_: Any) -> int:
        raise error

    monkeypatch.setattr(cmd_plan, "_plan", fails)
    return main(["plan", "--pairs", "100", *(["--json"] if json_flag else [])])


def _check_shape(out: str, err: str, json_flag: bool, code: str) -> tuple[str, str]:
    """Check stdout and stderr hold the one shape; return the line's message and hint.

    A message or a hint may hold ``; `` itself, so the line is split where the JSON
    object says (with ``--json``), else at its first ``; ``.
    """
    assert "Traceback" not in err, err
    lines = err.splitlines()
    assert len(lines) == 1, err
    found = LINE.match(lines[0])
    assert found is not None, lines[0]
    assert found.group(1) == code, lines[0]
    if not json_flag:
        assert out == ""
        return found.group(2), found.group(3)
    (document,) = [json.loads(line) for line in out.splitlines()]
    error = document["error"]
    assert set(error) == {"code", "message", "hint"} and error["code"] == code
    assert error["message"] and error["hint"]
    assert lines[0] == f"twinaudit: error: [{code}] {error['message']}; {error['hint']}"
    return error["message"], error["hint"]


@pytest.mark.parametrize("json_flag", [False, True], ids=["text", "json"])
@pytest.mark.parametrize(
    ("error", "code", "status"),
    [pytest.param(*row, id=f"{type(row[0]).__name__}-{row[1]}") for row in RAISED],
)
def test_an_error_raised_inside_a_command(error, code, status, json_flag, monkeypatch, capsys):
    assert _run(monkeypatch, error, json_flag) == status
    captured = capsys.readouterr()
    message, hint = _check_shape(captured.out, captured.err, json_flag, code)
    if isinstance(error, TwinauditError):
        said = " ".join(str(error).split()).rstrip(".;")
        assert message == said or said.startswith(f"{message}; ")
    if code == "missing-extra":
        assert "pip install 'twinaudit[ml]' -c constraints.txt" in hint
    if code == "internal-error":
        assert "report it" in hint and type(error).__name__ in message
    if isinstance(error, RateLimitedError):
        assert hint == "retry in 12.0 s"  # the error's own next step, after its "; "
    if isinstance(error, ClaimBusyError):
        assert hint == "wait 30 s, then run the same command again"  # when, from the error
    if code == "not-found":  # raised here: a path or an id, not the arbiter's (below)
        assert "--arbiter" not in hint and "'twinaudit plan --help'" in hint
    if isinstance(error, InputError) and "; " in str(error):
        assert (message, hint) == tuple(str(error).split("; ", 1))


@pytest.mark.parametrize("json_flag", [False, True], ids=["text", "json"])
@pytest.mark.parametrize("status", list(BY_STATUS), ids=lambda s: s.name)
def test_each_grpc_status(status, json_flag, server, monkeypatch, capsys):
    error = _failed_call(server, status.name)
    assert error.code() == status
    assert _run(monkeypatch, error, json_flag) == 1
    captured = capsys.readouterr()
    message, _ = _check_shape(captured.out, captured.err, json_flag, BY_STATUS[status])
    assert f"the server says {status.name.lower()}" in message  # the server's words kept


@pytest.mark.parametrize("json_flag", [False, True], ids=["text", "json"])
def test_the_servers_typed_error_decides_the_code(json_flag, server, monkeypatch, capsys):
    error = _failed_call(server, "Typed")
    assert error.code() == grpc.StatusCode.NOT_FOUND
    assert _run(monkeypatch, error, json_flag) == 1
    captured = capsys.readouterr()
    message, hint = _check_shape(captured.out, captured.err, json_flag, "not-found")
    assert message == "record 7 is not in the log (its size is 3)"  # no second [not-found]
    assert "--arbiter" in hint


@pytest.mark.parametrize("json_flag", [False, True], ids=["text", "json"])
@pytest.mark.parametrize("side", ["sent", "received"])
def test_a_message_over_the_cap_names_its_size(side, json_flag, server, monkeypatch, capsys):
    channel = {"max_send_bytes": 100} if side == "sent" else {}
    error = _failed_call(server, "Echo", b"x" * 5000, **channel)
    assert error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert _run(monkeypatch, error, json_flag) == 1
    captured = capsys.readouterr()
    message, hint = _check_shape(captured.out, captured.err, json_flag, "limit-exceeded")
    limit = 100 if side == "sent" else SERVER_CAP
    assert f"is 5000 bytes, over the limit of {limit} bytes" in message or (
        f"of 5000 bytes went over the limit of {limit} bytes" in message
    )
    assert "MAX_MESSAGE_BYTES" in hint and "no option raises it" in hint
    assert "send fewer or smaller items" in hint


@pytest.mark.parametrize("json_flag", [False, True], ids=["text", "json"])
def test_no_server_at_the_address(json_flag, monkeypatch, capsys):
    closed = f"127.0.0.1:{_closed_port()}"
    with make_channel(closed) as opened, pytest.raises(grpc.RpcError) as failed:
        opened.unary_unary("/t.S/Echo")(b"x", timeout=TIMEOUT_S)
    assert failed.value.code() == grpc.StatusCode.UNAVAILABLE
    assert _run(monkeypatch, failed.value, json_flag) == 1
    captured = capsys.readouterr()
    message, hint = _check_shape(captured.out, captured.err, json_flag, "unavailable")
    assert message.startswith("the server could not be reached (")
    assert "running" in hint and "--arbiter" in hint and "--ca" in hint


def test_a_tls_handshake_that_fails_is_unauthenticated(server, monkeypatch, capsys):
    creds = grpc.ssl_channel_credentials()
    address = f"127.0.0.1:{server}"
    with grpc.secure_channel(address, creds) as opened, pytest.raises(grpc.RpcError) as failed:
        opened.unary_unary("/t.S/Echo")(b"x", timeout=TIMEOUT_S)
    assert failed.value.code() == grpc.StatusCode.UNAVAILABLE
    assert _run(monkeypatch, failed.value, False) == 1
    message, hint = _check_shape("", capsys.readouterr().err, False, "unauthenticated")
    assert message.startswith("the TLS handshake with the server failed") and "--ca" in hint


def _usage_failure(argv, json_flag, capsys):
    """Run ``argv``; return the usage line's text and the failure's message and hint."""
    with pytest.raises(SystemExit) as stopped:
        main(argv)
    assert stopped.value.code == 2
    captured = capsys.readouterr()
    usage, line = captured.err.split("\ntwinaudit: error: ")
    message, hint = _check_shape(
        captured.out, "twinaudit: error: " + line.rstrip("\n"), json_flag, "invalid-input"
    )
    return usage, message, hint


@pytest.mark.parametrize("json_flag", [False, True], ids=["text", "json"])
def test_a_usage_error_keeps_argparses_usage_line_then_the_shape(json_flag, capsys):
    argv = ["plan", *(["--js"] if json_flag else []), "--pairs"]  # --js: argparse's prefix
    usage, message, hint = _usage_failure(argv, json_flag, capsys)
    assert usage.startswith("usage: twinaudit plan ")
    assert message == "argument --pairs: expected one argument"
    assert "'twinaudit plan --help'" in hint


def test_the_status_table_has_every_status_but_ok_and_a_hint_for_every_code():
    assert set(STATUS_TABLE) == set(grpc.StatusCode) - {grpc.StatusCode.OK} == set(BY_STATUS)
    codes = {
        cls.code
        for cls in vars(taxonomy).values()
        if isinstance(cls, type) and issubclass(cls, TwinauditError) and cls is not TwinauditError
    }
    assert codes | set(LOCAL_CODES) == set(HINTS)


def test_the_hint_for_no_server_names_the_address_given():
    failure = remote_failure(grpc.StatusCode.UNAVAILABLE, "", None, server="arbiter.example:7443")
    assert failure.code == "unavailable"
    assert failure.message == "the server at arbiter.example:7443 could not be reached"
    assert "listening at arbiter.example:7443 (--arbiter HOST:PORT)" in failure.hint


@pytest.mark.parametrize("json_flag", [False, True], ids=["text", "json"])
def test_a_hostile_servers_words_stay_one_printable_capped_line(
    json_flag, server, monkeypatch, capsys
):
    error = _failed_call(server, "Hostile")
    assert _run(monkeypatch, error, json_flag) == 1
    captured = capsys.readouterr()
    message, _ = _check_shape(captured.out, captured.err, json_flag, "remote-failed")
    assert "\x1b" not in captured.err and "\\x1b[2J\\x1b[31mrun rm -rf / now" in message
    assert len(message) < MAX_REMOTE_DETAILS + 200 and message.endswith("x…)")


def test_with_v_the_traceback_comes_above_the_one_line(monkeypatch, capsys):
    def fails(_: Any) -> int:
        raise RuntimeError("an invariant broke")

    monkeypatch.setattr(cmd_plan, "_plan", fails)
    assert main(["plan", "--pairs", "100", "-v"]) == 1
    err = capsys.readouterr().err.splitlines()
    assert err[0] == "Traceback (most recent call last):" and "RuntimeError" in err[-2]
    assert err[-1].startswith("twinaudit: error: [internal-error] unexpected RuntimeError: ")


@pytest.mark.parametrize("json_flag", [False, True], ids=["text", "json"])
def test_an_unknown_argument_is_named_with_its_commands_usage_and_help(json_flag, capsys):
    argv = ["owner", "inspect", "vault", "--nope", "x", *(["--json"] if json_flag else [])]
    usage, message, hint = _usage_failure(argv, json_flag, capsys)
    assert usage.startswith("usage: twinaudit owner inspect ")
    assert message == "unrecognized arguments: --nope x"
    assert "'twinaudit owner inspect --help'" in hint
