"""Hostile HTTP servers on 127.0.0.1 for the oracles' outbound limits (issue #40).

Used by tests/verifier/test_outbound_limits.py and ``python -m bench outbound``.

:func:`hostile_server` serves every request (any path, GET or POST) with one behaviour,
on threads of its own, until the ``with`` block ends:

- :func:`drip` sends its answer one byte per ``interval_s`` (the status line first, so
  that no part of the answer comes whole), for at most ``total_s`` seconds;
- :func:`flood` answers ``200`` with the bytes a generator yields, as fast as the
  client reads them, with or without a ``Content-Length`` (which may lie);
- :func:`redirect` answers ``302`` towards another URL.

The server counts the requests it got (``requests``) and, on leaving the block, sets
``stop`` (a drip or a flood then ends at once) and closes every connection, so that no
client thread of the test is left waiting.
"""

from __future__ import annotations

import contextlib
import http.server
import ssl
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

Behaviour = Callable[["_Handler"], None]


@dataclass
class HostileServer:
    """A running hostile server: its base URL, the requests it got, and its stop flag."""

    url: str
    requests: list[str] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)

    def wait_for(self, count: int, timeout_s: float) -> bool:
        """Wait until ``count`` requests came in (False if they did not in ``timeout_s``)."""
        end = time.monotonic() + timeout_s
        while len(self.requests) < count:
            if time.monotonic() > end:
                return False
            time.sleep(0.02)
        return True


class _Handler(http.server.BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        self._serve()

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self._serve()

    def _serve(self) -> None:
        with self.server.lock:
            self.server.state.requests.append(self.path)
        # An OSError: the client gave up (its deadline or its cap), which is the point.
        with contextlib.suppress(OSError):
            self.server.behaviour(self)
        self.close_connection = True

    def log_message(self, *args: object) -> None:
        pass


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, behaviour: Behaviour, state: HostileServer) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.behaviour = behaviour
        self.state = state
        self.lock = threading.Lock()

    def handle_error(self, request: object, client_address: object) -> None:
        pass


@contextmanager
def hostile_server(
    behaviour: Behaviour, tls: ssl.SSLContext | None = None
) -> Iterator[HostileServer]:
    """Serve ``behaviour`` on 127.0.0.1 (over TLS with ``tls``); yield the server's state."""
    state = HostileServer("")
    server = _Server(behaviour, state)
    if tls is not None:
        server.socket = tls.wrap_socket(server.socket, server_side=True)
    scheme = "https" if tls is not None else "http"
    state.url = f"{scheme}://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield state
    finally:
        state.stop.set()
        server.shutdown()
        server.server_close()


def drip(interval_s: float, total_s: float, *, head_whole: bool = False) -> Behaviour:
    """Answer one byte per ``interval_s`` for at most ``total_s`` s.

    With ``head_whole`` the status line and headers come at once and only the body drips.
    """
    head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n"

    def behave(handler: _Handler) -> None:
        stop = handler.server.state.stop
        end = time.monotonic() + total_s
        rest = b'{"name": "m", "versions": [' + b" " * 100000
        if head_whole:
            handler.wfile.write(head)
        else:
            rest = head + rest
        for byte in rest:
            if stop.is_set() or time.monotonic() > end:
                return
            handler.wfile.write(bytes([byte]))
            stop.wait(interval_s)

    return behave


def flood(chunks: Callable[[], Iterable[bytes]], *, length: int | None = None) -> Behaviour:
    """Answer ``200`` with the bytes ``chunks()`` yields; ``Content-Length: length`` if given."""

    def behave(handler: _Handler) -> None:
        handler.send_response(200)
        handler.send_header("Content-Type", "application/json")
        if length is not None:
            handler.send_header("Content-Length", str(length))
        handler.send_header("Connection", "close")
        handler.end_headers()
        for chunk in chunks():
            if handler.server.state.stop.is_set():
                return
            handler.wfile.write(chunk)

    return behave


def redirect(location: str, status: int = 302) -> Behaviour:
    """Answer ``status`` (a redirect) towards ``location``."""

    def behave(handler: _Handler) -> None:
        handler.send_response(status)
        handler.send_header("Location", location)
        handler.send_header("Content-Length", "0")
        handler.end_headers()

    return behave
