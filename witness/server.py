"""The witness's HTTP service (C2SP ``tlog-witness``, spec §9.7.1), on the standard library.

Two paths, under a prefix (``/`` by default):

- ``POST <prefix>add-checkpoint``: the body, at most
  :data:`~twinaudit.protocol.tlog_witness.MAX_REQUEST_BYTES`, is read only after its
  ``Content-Length`` says it fits (411 without one, 413 above the cap), and answered by
  :class:`~.cosigner.Cosigner`;
- ``GET <prefix><hex SHA-256 of the origin>/checkpoint``: the last note cosigned for
  that log (the C2SP monitoring path), 404 if none.

Anything else is 404 (an unknown path) or 405 (another method on a known path). Every
connection has a socket timeout of :data:`SOCKET_TIMEOUT_S` (a client that drips its
bytes is cut off), at most :data:`MAX_CONNECTIONS` connections are open at once (others
are closed unread) and :data:`MAX_CONCURRENT` requests handled at once (others are
answered 503 at once), and a failure inside a handler is logged and answered 500
without details. The server speaks plain HTTP: put TLS in front of it where it leaves
the host.
"""

from __future__ import annotations

import hashlib
import http.server
import logging
import threading
from typing import Any, Final

from twinaudit.protocol.tlog_witness import MAX_REQUEST_BYTES

from .cosigner import TEXT, Answer, Cosigner

#: Seconds a connection may stay idle while the server reads from it.
SOCKET_TIMEOUT_S: Final = 10.0
#: Requests handled at the same time; more are answered 503.
MAX_CONCURRENT: Final = 32
#: Connections open at the same time (each holds a thread); more are closed unread.
MAX_CONNECTIONS: Final = 128

_log = logging.getLogger(__name__)


class WitnessServer(http.server.ThreadingHTTPServer):
    """A threading HTTP server for one :class:`Cosigner`."""

    daemon_threads = True

    def __init__(self, address: tuple[str, int], cosigner: Cosigner, prefix: str = "/") -> None:
        """Listen on ``address`` (port 0 picks one) and serve ``cosigner`` under ``prefix``."""
        if not prefix.startswith("/") or not prefix.endswith("/"):
            raise ValueError("a witness's URL prefix starts and ends with '/'")
        self.cosigner = cosigner
        self.prefix = prefix
        self.slots = threading.BoundedSemaphore(MAX_CONCURRENT)
        self.connections = threading.BoundedSemaphore(MAX_CONNECTIONS)
        super().__init__(address, _Handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        """Serve a connection on a thread of its own, unless too many are open already."""
        if not self.connections.acquire(blocking=False):
            self.shutdown_request(request)  # closed unread: no thread for it
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self.connections.release()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        """Serve one connection, then free its place."""
        try:
            super().process_request_thread(request, client_address)
        finally:
            self.connections.release()

    @property
    def port(self) -> int:
        """The port the server listens on."""
        return int(self.server_address[1])


class _Handler(http.server.BaseHTTPRequestHandler):
    server: WitnessServer
    timeout = SOCKET_TIMEOUT_S
    protocol_version = "HTTP/1.1"
    server_version = "twinaudit-witness"
    sys_version = ""

    def log_message(self, format: str, *args: Any) -> None:
        _log.info("%s %s", self.address_string(), format % args)

    def _send(self, answer: Answer) -> None:
        self.send_response(answer.status)
        self.send_header("Content-Type", answer.content_type)
        self.send_header("Content-Length", str(len(answer.body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(answer.body)

    def _plain(self, status: int, message: str) -> None:
        self.close_connection = True
        self._send(Answer(status, TEXT, (message + "\n").encode("utf-8")))

    def _guarded(self, run: Any) -> None:
        if not self.server.slots.acquire(blocking=False):
            self._plain(503, "the witness is busy; try again")
            return
        try:
            run()
        except Exception:
            _log.exception("witness request failed")
            self._plain(500, "internal error in the witness")
        finally:
            self.server.slots.release()

    def do_POST(self) -> None:
        if self.path != self.server.prefix + "add-checkpoint":
            self._plain(404, "no such endpoint")
            return
        self._guarded(self._add_checkpoint)

    def _add_checkpoint(self) -> None:
        length = self.headers.get("Content-Length")
        if length is None or not length.isascii() or not length.isdigit():
            self._plain(411, "an add-checkpoint request states its Content-Length")
            return
        if int(length) > MAX_REQUEST_BYTES:
            self._plain(413, f"an add-checkpoint body is at most {MAX_REQUEST_BYTES} bytes")
            return
        try:
            body = self.rfile.read(int(length))
        except OSError:  # the socket timed out or broke: no answer, the connection closes
            self.close_connection = True
            return
        if len(body) != int(length):
            self._plain(400, "the body ended before its Content-Length")
            return
        self._send(self.server.cosigner.add_checkpoint(body))

    def do_GET(self) -> None:
        if self.path == self.server.prefix + "add-checkpoint":
            self._plain(405, "add-checkpoint is a POST")
            return
        self._guarded(self._checkpoint)

    def _checkpoint(self) -> None:
        rest = self.path[len(self.server.prefix) :] if self._known_path() else ""
        origin_hash, _, tail = rest.partition("/")
        for origin in self.server.cosigner.origins():
            if tail == "checkpoint" and hashlib.sha256(origin.encode()).hexdigest() == origin_hash:
                note = self.server.cosigner.latest(origin)
                if note is not None:
                    self._send(Answer(200, TEXT, note))
                    return
        self._plain(404, "no checkpoint cosigned for that log")

    def _known_path(self) -> bool:
        return self.path.startswith(self.server.prefix)


def start_witness(
    cosigner: Cosigner, host: str, port: int, prefix: str = "/"
) -> tuple[WitnessServer, threading.Thread]:
    """Start serving ``cosigner`` on ``host:port`` in a thread; return the server and it."""
    server = WitnessServer((host, port), cosigner, prefix)
    thread = threading.Thread(target=server.serve_forever, name="witness-http", daemon=True)
    thread.start()
    return server, thread


__all__ = [
    "MAX_CONCURRENT",
    "MAX_CONNECTIONS",
    "SOCKET_TIMEOUT_S",
    "WitnessServer",
    "start_witness",
]
