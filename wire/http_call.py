"""HTTP calls to a model server, each with one deadline for the whole call and a byte cap.

The arbiter's REST client of the Open Inference Protocol
(:mod:`twinaudit.verifier.oracles.oip_transport`) and the practitioner's relay to an
OpenAI-compatible endpoint (:mod:`twinaudit.practitioner.openai_lm`) send every
request through :func:`http_call` (issue #40 N2, N3, N8):

- **One deadline for the whole call** (:class:`Deadline`, on the monotonic clock): the
  connection (to each address of the host in turn; the name lookup is bounded by the
  system resolver's own timeouts), the TLS handshake, sending the request, the status
  line, the headers and the body. Before every write and every read the socket's timeout
  is set to the time left, so a server that drips one byte at a time gains nothing: the
  call ends when its deadline does, however the server paces its bytes.
- **A byte cap on the reply**, applied while it streams, before anything parses it: a
  body that declares more (``Content-Length``) is refused before it is read, and one
  that sends more is refused as soon as it passes the cap. An error reply's body is
  read only up to :data:`ERROR_BODY_BYTES`, for its message.
- **No redirects.** A ``3xx`` answer is refused, naming the status; its ``Location`` is
  never contacted.

Failures are :class:`~twinaudit.protocol.errors.OracleError`: ``deadline`` when the deadline
passes; ``unreachable`` when no answer could be had (no such host, a refused or reset
connection, a TLS failure, a connection closed before the status line);
``invalid-answer`` for a redirect, a reply above its cap, or bytes that are not HTTP.
Uses :mod:`http.client` (one connection per call, ``Connection: close``).
"""

from __future__ import annotations

import http.client
import io
import socket
import ssl
import time
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from twinaudit.protocol.errors import OracleError

#: Most bytes of an error reply's body read (for the server's message).
ERROR_BODY_BYTES: Final = 4096
#: Bytes asked of the socket per read of a body.
_CHUNK_BYTES: Final = 256 * 1024


class Deadline:
    """A point on the monotonic clock, ``seconds`` after it was made."""

    def __init__(self, seconds: float) -> None:
        """Start the clock: the deadline is ``seconds`` from now."""
        self.seconds = float(seconds)
        self._end = time.monotonic() + self.seconds

    def left(self) -> float:
        """Return the seconds left (zero or less once the deadline has passed)."""
        return self._end - time.monotonic()

    def check(self) -> float:
        """Return the seconds left; raise :class:`TimeoutError` if none are."""
        left = self.left()
        if left <= 0:
            raise TimeoutError("the deadline has passed")
        return left


@dataclass(frozen=True)
class HttpReply:
    """An HTTP answer other than a redirect: its status and body (capped)."""

    status: int
    body: bytes


class _TimedReader(io.RawIOBase):
    """Reads a socket, each read allowed only the deadline's time left."""

    def __init__(self, sock: socket.socket, deadline: Deadline) -> None:
        self._sock = sock
        self._deadline = deadline

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        self._sock.settimeout(self._deadline.check())
        return self._sock.recv_into(buffer)


class _TimedSocket:
    """What :mod:`http.client` uses of a socket, each write and read held to the deadline."""

    def __init__(self, sock: socket.socket, deadline: Deadline) -> None:
        self._sock = sock
        self._deadline = deadline

    def sendall(self, data: bytes) -> None:
        # sendall's timeout bounds the whole send (Python ≥ 3.5), not each piece.
        self._sock.settimeout(self._deadline.check())
        self._sock.sendall(data)

    def makefile(self, mode: str) -> io.BufferedReader:
        return io.BufferedReader(_TimedReader(self._sock, self._deadline))

    def close(self) -> None:
        """Leave the socket open (:func:`http_call` closes it).

        http.client closes a ``Connection: close`` connection before its body is read.
        """


def _connect(host: str, port: int, deadline: Deadline) -> socket.socket:
    """Connect to the first address of ``host`` that answers, all of them within the deadline.

    The name lookup itself is the system resolver's, bounded by its own configuration.
    """
    failure: OSError = OSError(f"{host} has no address")
    for family, kind, proto, _, address in socket.getaddrinfo(host, port, 0, socket.SOCK_STREAM):
        sock = socket.socket(family, kind, proto)
        try:
            sock.settimeout(deadline.check())
            sock.connect(address)
        except TimeoutError:
            sock.close()
            raise
        except OSError as exc:
            sock.close()
            failure = exc
            continue
        return sock
    raise failure


class _Connection(http.client.HTTPConnection):
    """One HTTP(S) connection whose every step is held to a deadline."""

    def __init__(
        self, host: str, port: int, deadline: Deadline, context: ssl.SSLContext | None
    ) -> None:
        super().__init__(host, port, timeout=max(deadline.left(), 0.001))
        self._deadline = deadline
        self._context = context
        self.socket: socket.socket | None = None

    def connect(self) -> None:
        sock = _connect(self.host, self.port, self._deadline)
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if self._context is not None:
                # The handshake as a whole is held to the socket's timeout (Python ≥ 3.5).
                sock.settimeout(self._deadline.check())
                sock = self._context.wrap_socket(sock, server_hostname=self.host)
        except BaseException:
            sock.close()
            raise
        self.socket = sock
        self.sock = _TimedSocket(sock, self._deadline)


def _read_body(reply: http.client.HTTPResponse, cap: int, what: str, strict: bool) -> bytes:
    """Read the body, at most ``cap`` bytes: refused above it when ``strict``, else cut."""
    if strict and reply.length is not None and reply.length > cap:
        raise OracleError(
            "invalid-answer",
            f"{what}: the reply declares {reply.length} bytes, above the cap of {cap} bytes",
        )
    chunks: list[bytes] = []
    size = 0
    while size <= cap:
        chunk = reply.read(min(_CHUNK_BYTES, cap + 1 - size))
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    if size > cap:
        if strict:
            raise OracleError(
                "invalid-answer", f"{what}: the reply is above the cap of {cap} bytes"
            )
        return b"".join(chunks)[:cap]
    return b"".join(chunks)


def http_call(
    url: str,
    *,
    deadline: Deadline,
    max_bytes: int,
    what: str,
    body: bytes | None = None,
    headers: Mapping[str, str] | None = None,
    context: ssl.SSLContext | None = None,
) -> HttpReply:
    """Send ``GET url`` (``POST`` with ``body``) and return the answer (see the module).

    ``max_bytes`` caps a successful reply's body; ``what`` names the call in messages;
    ``context`` verifies an ``https`` server (the system's CAs when None).
    """
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise OracleError("unreachable", f"{what}: {url!r} is not an http(s) URL")
    https = parts.scheme == "https"
    if https and context is None:
        context = ssl.create_default_context()
    port = parts.port or (443 if https else 80)
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    connection = _Connection(parts.hostname, port, deadline, context if https else None)
    sent = {"Connection": "close", "Accept": "application/json", **(headers or {})}
    try:
        connection.connect()
        connection.request("POST" if body is not None else "GET", path, body=body, headers=sent)
        reply = connection.getresponse()
        if 300 <= reply.status < 400:
            raise OracleError(
                "invalid-answer",
                f"{what} answered HTTP {reply.status}, a redirect: the verifier follows none",
            )
        ok = 200 <= reply.status < 300
        data = _read_body(reply, max_bytes if ok else ERROR_BODY_BYTES, what, strict=ok)
        return HttpReply(reply.status, data)
    except TimeoutError:
        raise OracleError(
            "deadline", f"{what}: no whole answer within the {deadline.seconds:g} s deadline"
        ) from None
    except (http.client.RemoteDisconnected, http.client.IncompleteRead) as exc:
        raise OracleError("unreachable", f"{what}: the connection closed early ({exc})") from None
    except http.client.HTTPException as exc:
        line = str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
        raise OracleError("invalid-answer", f"{what}: the reply is not HTTP ({line})") from None
    except OSError as exc:  # refused, reset, no such host, TLS failure
        reason = exc.strerror or str(exc) or type(exc).__name__
        raise OracleError("unreachable", f"{what}: {reason}") from None
    finally:
        connection.close()
        if connection.socket is not None:
            connection.socket.close()
