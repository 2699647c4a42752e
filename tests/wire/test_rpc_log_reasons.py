"""A call the client's side ended is logged with what the server knows of why (issue #44).

Not only ``code=CANCELLED``: a passed deadline is ``DEADLINE_EXCEEDED`` with the
deadline the client set and the time the call took (also for a unary call whose handler
finished after the client had gone, which was logged ``OK``), and a call the client
ended earlier is ``CANCELLED`` with its duration and the two causes the server cannot
tell apart: the client cancelled, or it sent a message over the server's cap. One
server on 127.0.0.1; every call takes well under a second.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Iterator
from typing import Any

import grpc
import pytest

from twinaudit.wire import observe
from twinaudit.wire.observe import RPC_LOGGER
from twinaudit.wire.transport import make_channel, make_server

#: The server's cap on a message it receives, in bytes.
CAP = 1000
#: How long the slow handler works, in seconds (past the client's deadline).
SLOW_S = 0.6


def _slow(request: bytes, _: grpc.ServicerContext) -> bytes:
    time.sleep(SLOW_S)
    return request


def _echo_stream(requests: Iterator[bytes], _: grpc.ServicerContext) -> Iterator[bytes]:
    yield from requests


@pytest.fixture(scope="module")
def port() -> Iterator[int]:
    methods = {
        "Slow": grpc.unary_unary_rpc_method_handler(_slow),
        "Stream": grpc.stream_stream_rpc_method_handler(_echo_stream),
    }

    def register(server: grpc.Server) -> None:
        server.add_generic_rpc_handlers([grpc.method_handlers_generic_handler("t.S", methods)])

    server, bound = make_server("127.0.0.1:0", register, max_receive_bytes=CAP)
    yield bound
    server.stop(0)


def _event(caplog: pytest.LogCaptureFixture, method: str) -> dict[str, Any]:
    """Wait for the one event of ``method`` and return its fields."""
    deadline = time.monotonic() + 5
    while True:
        found = [
            dict(record.fields)  # type: ignore[attr-defined]
            for record in caplog.records
            if record.name == RPC_LOGGER and record.fields["method"] == method  # type: ignore[attr-defined]
        ]
        if found:
            (event,) = found
            return event
        assert time.monotonic() < deadline, f"no event for {method}"
        time.sleep(0.05)


def test_a_unary_call_past_the_clients_deadline(port, caplog):
    caplog.set_level(logging.INFO, logger=RPC_LOGGER)
    with make_channel(f"127.0.0.1:{port}") as channel, pytest.raises(grpc.RpcError) as failed:
        channel.unary_unary("/t.S/Slow")(b"x", timeout=0.2)
    assert failed.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    event = _event(caplog, "/t.S/Slow")
    assert event["code"] == "DEADLINE_EXCEEDED"  # not OK: no reply reached the client
    # The deadline as the server saw it (0.2 s less the trip), the time the call took.
    said = re.fullmatch(
        r"the client's deadline of ([0-9.e-]+) s passed after ([0-9.e-]+) s; no reply reached it",
        event["reason"],
    )
    assert said is not None, event["reason"]
    # At most 0.2 s plus the rounding of the log's three digits and of gRPC's timeout
    # header, which rounds the remaining time up to its unit (it read 0.201 once).
    assert 0 <= float(said.group(1)) <= 0.21 and float(said.group(2)) >= SLOW_S * 0.9


def _stream(port: int, then: bytes | None, **channel: Any) -> grpc.RpcError | None:
    """Send ``x`` on a stream, wait for its echo, then send ``then`` or (None) cancel.

    Returns the error the call ended with after ``then`` (None once cancelled).
    """
    go = threading.Event()

    def requests() -> Iterator[bytes]:
        yield b"x"
        go.wait(5)
        if then is not None:
            yield then

    with make_channel(f"127.0.0.1:{port}", **channel) as opened:
        call = opened.stream_stream("/t.S/Stream")(requests(), timeout=10)
        assert next(call) == b"x"
        if then is None:
            call.cancel()
        go.set()
        try:
            list(call)
        except grpc.RpcError as exc:
            return exc if then is not None else None
    return None


def test_a_stream_the_client_cancels(port, caplog):
    caplog.set_level(logging.INFO, logger=RPC_LOGGER)
    assert _stream(port, None) is None
    event = _event(caplog, "/t.S/Stream")
    assert event["code"] == "CANCELLED"
    assert event["reason"].startswith("the client ended the call after ")
    assert event["reason"].endswith(
        f": it cancelled, or sent a message over this server's limit of {CAP} bytes"
    )


def test_a_stream_whose_client_refuses_to_send_a_message_over_its_own_cap(port, caplog):
    """The issue's case: ``CLIENT: Sent message larger than max`` cancels the call."""
    caplog.set_level(logging.INFO, logger=RPC_LOGGER)
    failed = _stream(port, b"y" * 5000, max_send_bytes=100)
    assert failed is not None and failed.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert "Sent message larger than max (5000 vs. 100)" in (failed.details() or "")
    event = _event(caplog, "/t.S/Stream")
    assert event["code"] == "CANCELLED" and "over this server's limit" in event["reason"]


class _OpenContext:
    """A servicer context whose call is still open when the handler returns.

    ``cancel_after``: seconds after which the call ends (the client's cancel, reported
    after the end of its requests); None: it stays open until the server answers.
    """

    def __init__(self, cancel_after: float | None) -> None:
        self._cancel_after = cancel_after

    def time_remaining(self) -> float:
        return 9.0

    def peer(self) -> str:
        return "ipv4:127.0.0.1:1"

    def code(self) -> None:
        return None

    def is_active(self) -> bool:
        return True

    def details(self) -> str:
        return ""

    def add_callback(self, callback: Any) -> bool:
        if self._cancel_after is not None:
            threading.Timer(self._cancel_after, callback).start()
        return True


@pytest.mark.parametrize(("cancel_after", "code"), [(0.05, "CANCELLED"), (None, "OK")])
def test_an_end_of_requests_then_a_cancel_is_told_from_a_half_close(
    cancel_after, code, caplog, monkeypatch
):
    """gRPC may end a cancelled call's requests before it marks the call ended: the
    stream then waits a moment for the call's end before it logs OK."""
    monkeypatch.setattr(observe, "CANCEL_SETTLE_S", 0.3)
    caplog.set_level(logging.INFO, logger=RPC_LOGGER)

    def echo(requests: Iterator[bytes], _: Any) -> Iterator[bytes]:
        yield from requests

    served = observe.ObserveRpcs()._stream(
        "/t.S/Open", echo, iter([b"a", b"b"]), _OpenContext(cancel_after)
    )
    assert list(served) == [b"a", b"b"]
    event = _event(caplog, "/t.S/Open")
    assert event["code"] == code and ("reason" in event) == (code == "CANCELLED")
