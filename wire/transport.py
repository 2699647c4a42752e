"""gRPC plumbing shared by every twinaudit service and client.

One place for the message-size limits, default deadlines, TLS/mTLS credentials,
health service, and the mapping from the protocol's error taxonomy to gRPC status
codes, so servers and clients cannot drift apart.

Every server made here answers ``INVALID_ARGUMENT`` for a request it cannot parse
(bad UTF-8 in a string field, truncated or garbled bytes) instead of gRPC's
``INTERNAL``, listens on exactly the ``HOST:PORT`` it is given (never sharing a port
through ``SO_REUSEPORT``), and refuses a port in use with one line. It logs one event
per RPC and counts RPCs in its metrics (:mod:`twinaudit.wire.observe`); its health service
can follow a probe (the arbiter's: its store answers a query), and it serves gRPC
reflection when asked.
"""

from __future__ import annotations

import errno
import ipaddress
import logging
import re
import socket
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from concurrent import futures
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, NoReturn, TypeVar

import grpc
from google.protobuf import any_pb2
from google.rpc import error_details_pb2, status_pb2
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_status import rpc_status

from twinaudit.protocol.errors import (
    ClaimBusyError,
    InputError,
    LimitExceededError,
    NotFoundError,
    OracleError,
    StateError,
    TwinauditError,
    VerificationError,
    VersionError,
)
from twinaudit.protocol.keys import require_owner_only

from .observe import NO_METRICS, Metrics, ObserveRpcs

#: Largest message either side sends or accepts (a window of image pairs fits easily).
MAX_MESSAGE_BYTES: Final = 64 * 1024 * 1024
#: Largest request an arbiter sends to an oracle, and an oracle accepts: one float32 query
#: of the largest image an item holds (4096 x 4096 x 3 values, 192 MiB), with room. Only
#: a request of one such query exceeds MAX_MESSAGE_BYTES (spec §10.2 step 5); replies
#: stay within MAX_MESSAGE_BYTES.
MAX_QUERY_MESSAGE_BYTES: Final = 256 * 1024 * 1024
#: Default deadline of a unary call, in seconds.
DEFAULT_DEADLINE_S: Final = 30.0
#: Default deadline of a whole claim stream, in seconds.
CLAIM_DEADLINE_S: Final = 3600.0

#: A server also refuses a port another socket listens on: gRPC's default,
#: SO_REUSEPORT, would let a second server share it and split the clients.
_NO_REUSEPORT: Final = ("grpc.so_reuseport", 0)


def _limits(send: int, receive: int) -> list[tuple[str, int]]:
    """Return the channel options of the message limits (bytes sent, bytes received)."""
    return [
        ("grpc.max_send_message_length", send),
        ("grpc.max_receive_message_length", receive),
    ]


#: Longest host name in an address (RFC 1035).
MAX_HOST_BYTES: Final = 253
#: Longest ``HOST:PORT`` address: the longest host name, a colon and five digits.
MAX_ADDRESS_BYTES: Final = MAX_HOST_BYTES + 6
_HOST_NAME: Final = re.compile(r"\A[A-Za-z0-9_](?:[A-Za-z0-9_.-]*[A-Za-z0-9_])?\Z")
#: Shortest time between two runs of a server's health probe, in seconds.
HEALTH_PROBE_INTERVAL_S: Final = 1.0

#: The health events' logger keeps the name it had in the CLI package, so operators'
#: log filters and the log lines themselves are unchanged.
_log = logging.getLogger("twinaudit.transport")

T = TypeVar("T")


@dataclass(frozen=True)
class TlsFiles:
    """PEM files for TLS. A server with ``client_ca`` requires client certificates (mTLS)."""

    cert: Path | None = None
    key: Path | None = None
    ca: Path | None = None


def _read(path: Path | None) -> bytes | None:
    return None if path is None else path.read_bytes()


def parse_address(
    address: str, *, what: str = "address", port_zero: bool = False
) -> tuple[str, int]:
    """Return ``(host, port)`` of a ``HOST:PORT`` address, or raise :class:`InputError`.

    ``HOST`` is a host name, an IPv4 address or a bracketed IPv6 address
    (``[::1]:7443``); ``PORT`` is decimal, 1..65535, or 0 when ``port_zero`` (a server
    then picks a free port). The message names ``what`` and fits on one line.
    """
    example = f"{what} must be HOST:PORT, e.g. 127.0.0.1:7443 or [::1]:7443"
    if len(address.encode("utf-8", "replace")) > MAX_ADDRESS_BYTES:
        raise InputError(f"{example} of at most {MAX_ADDRESS_BYTES} bytes")
    host, colon, port_text = address.rpartition(":")
    if not colon or not host:
        raise InputError(f"{example}; got {address!r}")
    if host.startswith("["):
        if not host.endswith("]"):
            raise InputError(f"{example}; got {address!r}")
        try:
            ipaddress.IPv6Address(host[1:-1])
        except ValueError:
            raise InputError(f"{what} {address!r} has no valid IPv6 address in brackets") from None
    elif len(host) > MAX_HOST_BYTES or not _HOST_NAME.match(host):
        raise InputError(f"{what} {address!r} has no valid host name or IPv4 address")
    if not port_text.isascii() or not port_text.isdigit() or len(port_text) > 5:
        raise InputError(f"{example}; {port_text!r} is not a port number")
    port = int(port_text)
    if not (0 if port_zero else 1) <= port <= 65535:
        raise InputError(f"{what} {address!r}: port {port} is outside 1..65535")
    return host, port


#: How a Unix-domain socket address starts (gRPC's ``unix:/ABSOLUTE/PATH``).
UNIX_PREFIX: Final = "unix:"
#: Longest socket path (``sun_path`` holds 108 bytes with its terminating NUL).
MAX_UNIX_PATH_BYTES: Final = 107


def is_unix_address(address: str) -> bool:
    """Tell whether ``address`` names a Unix-domain socket (``unix:/PATH``)."""
    return address.startswith(UNIX_PREFIX)


def check_unix_address(address: str, *, what: str = "address") -> str:
    """Return the socket path of a ``unix:/ABSOLUTE/PATH`` address (else :class:`InputError`)."""
    path = address[len(UNIX_PREFIX) :]
    if not path.startswith("/") or len(path.encode("utf-8", "replace")) > MAX_UNIX_PATH_BYTES:
        raise InputError(
            f"{what} unix:PATH needs an absolute path of at most {MAX_UNIX_PATH_BYTES} bytes"
        )
    return path


def _refuse_port_in_use(host: str, port: int, listen: str) -> None:
    """Raise :class:`InputError` if some socket already listens on ``host:port``.

    gRPC reports a failed bind only as a bare RuntimeError after logging it, so the
    common case, a port in use, is found here first; gRPC's own error remains the
    fallback for a race with another process.
    """
    if port == 0:
        return
    try:
        addresses = socket.getaddrinfo(
            host.strip("[]"), port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )
    except OSError as exc:
        raise InputError(f"cannot listen on {listen}: {exc.strerror or exc}") from None
    for family, kind, proto, _, sockaddr in addresses:
        try:
            with socket.socket(family, kind, proto) as probe:
                probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as gRPC does
                probe.bind(sockaddr)
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                raise InputError(f"cannot listen on {listen}: the port is already in use") from None
            # Anything else (no IPv6 here, an address not on this host): gRPC's bind decides.


class _Undecodable:
    """Stands for a request message that did not parse; its handler is never run."""

    __slots__ = ("reason",)

    def __init__(self, reason: str) -> None:
        self.reason = reason


def _refuse_undecodable(context: grpc.ServicerContext, request: _Undecodable) -> None:
    abort_with_error(
        context,
        InputError(f"the request is not a valid message: {request.reason}"),
        grpc.StatusCode.INVALID_ARGUMENT,
    )


def _checked_stream(context: grpc.ServicerContext, requests: Iterator[Any]) -> Iterator[Any]:
    for request in requests:
        if isinstance(request, _Undecodable):
            _refuse_undecodable(context, request)
        yield request


class RefuseUndecodable(grpc.ServerInterceptor):  # type: ignore[misc]
    """Answer ``INVALID_ARGUMENT`` for a request that does not parse.

    gRPC answers ``INTERNAL`` ("Exception deserializing request!") when a request's
    bytes do not parse, e.g. a string field with invalid UTF-8. This interceptor
    parses each request itself, keeps the parser's reason, and aborts the call with
    ``INVALID_ARGUMENT`` before (or, in a request stream, when) the handler would
    see the message.
    """

    def intercept_service(self, continuation: Callable[[Any], Any], details: Any) -> Any:
        """Return the method's handler with a parser that never fails the call itself."""
        handler = continuation(details)
        if handler is None or handler.request_deserializer is None:
            return handler
        parse = handler.request_deserializer

        def tolerant(data: bytes) -> Any:
            try:
                return parse(data)
            except Exception as exc:  # protobuf's DecodeError, or whatever a parser raises
                return _Undecodable(str(exc))

        options = {
            "request_deserializer": tolerant,
            "response_serializer": handler.response_serializer,
        }
        if handler.request_streaming:
            streaming = handler.stream_stream or handler.stream_unary

            def many(requests: Iterator[Any], context: grpc.ServicerContext) -> Any:
                return streaming(_checked_stream(context, requests), context)

            if handler.response_streaming:
                return grpc.stream_stream_rpc_method_handler(many, **options)
            return grpc.stream_unary_rpc_method_handler(many, **options)
        single = handler.unary_stream or handler.unary_unary

        def one(request: Any, context: grpc.ServicerContext) -> Any:
            if isinstance(request, _Undecodable):
                _refuse_undecodable(context, request)
            return single(request, context)

        if handler.response_streaming:
            return grpc.unary_stream_rpc_method_handler(one, **options)
        return grpc.unary_unary_rpc_method_handler(one, **options)


def status_for(error: TwinauditError) -> grpc.StatusCode:
    """Return the gRPC status code for a protocol error (spec §2.2).

    By family, as :mod:`twinaudit.protocol.errors` lists them; a caller may pass another
    status to :func:`abort_with_error` where its service says so (an oracle whose model
    answered malformed data is ``INTERNAL`` to its caller).
    """
    if isinstance(error, OracleError):
        return {
            "unreachable": grpc.StatusCode.UNAVAILABLE,
            "deadline": grpc.StatusCode.DEADLINE_EXCEEDED,
        }.get(error.reason, grpc.StatusCode.FAILED_PRECONDITION)
    if isinstance(error, NotFoundError):
        return grpc.StatusCode.NOT_FOUND
    if isinstance(error, LimitExceededError):
        return grpc.StatusCode.RESOURCE_EXHAUSTED
    if isinstance(error, ClaimBusyError):
        return grpc.StatusCode.ABORTED  # the same request may succeed later (spec §10.2 step 8)
    if isinstance(error, VersionError | StateError):
        return grpc.StatusCode.FAILED_PRECONDITION
    if isinstance(error, InputError | VerificationError):
        return grpc.StatusCode.INVALID_ARGUMENT
    return grpc.StatusCode.INTERNAL


#: The ``domain`` of the ``google.rpc.ErrorInfo`` detail of a failed call (spec §2.2).
ERROR_DOMAIN: Final = "twinaudit"


def error_reason(code: str) -> str:
    """Return the ErrorInfo ``reason`` of a spec error code (``INVALID_PARAMETER``, say)."""
    return code.upper().replace("-", "_")


def abort_with_error(
    context: grpc.ServicerContext,
    error: TwinauditError,
    status: grpc.StatusCode | None = None,
    *,
    metadata: Mapping[str, str] | None = None,
    note: str = "",
) -> NoReturn:
    """Abort the call with ``error``, as spec §2.2 says a failure travels over gRPC.

    The status is ``status``, or :func:`status_for` the error's family; the message is
    the error's :meth:`~twinaudit.protocol.errors.TwinauditError.diagnostics` (then ``note``, for
    people); the details (the ``grpc-status-details-bin`` trailer) hold one
    ``google.rpc.ErrorInfo`` whose ``reason`` is the error's code (:func:`error_reason`),
    whose ``domain`` is :data:`ERROR_DOMAIN`, and whose ``metadata`` has the refusal
    ``rule`` if it names one, and the entries of ``metadata`` (a failed claim's
    ``counted``, ``claim`` and ``restart``, spec §10.7).
    """
    code = status if status is not None else status_for(error)
    entries = dict(metadata or {})
    if error.rule:
        entries["rule"] = error.rule
    info = error_details_pb2.ErrorInfo(
        reason=error_reason(error.code), domain=ERROR_DOMAIN, metadata=entries
    )
    detail = any_pb2.Any()
    detail.Pack(info)
    message = error.diagnostics() + (f"; {note}" if note else "")
    answer = status_pb2.Status(code=code.value[0], message=message, details=[detail])
    context.abort_with_status(rpc_status.to_status(answer))
    raise AssertionError("unreachable: abort_with_status raises")


@dataclass(frozen=True)
class ErrorDetails:
    """What a failed call's ErrorInfo says: the spec's error code and refusal rule."""

    #: The error code of spec §2.2, such as ``invalid-parameter``.
    code: str
    #: The refusal rule (:data:`twinaudit.protocol.errors.RULES`), or None.
    rule: str | None
    #: For a failed claim (spec §10.7): whether the arbiter filed it, so that it counts
    #: on the record (``counted``), and its id; None where the failure does not say.
    counted: bool | None = None
    claim_id: str = ""
    #: For a filed claim that failed: whether it failed before any pair's outcome and may
    #: run again as the same claim, by a resume of its id (``restart``, spec §10.7).
    restart: bool | None = None


def error_details(error: grpc.RpcError) -> ErrorDetails | None:
    """Return the twinaudit ErrorInfo of a failed call, or None where it carries none.

    None too where the details trailer contradicts the call's status or message (a
    relay that rewrote one but not the other): a client then acts on the status alone.
    """
    if not isinstance(error, grpc.Call):
        return None
    try:
        status = rpc_status.from_call(error)
    except ValueError:
        return None
    for detail in status.details if status is not None else ():
        info = error_details_pb2.ErrorInfo()
        if detail.Unpack(info) and info.domain == ERROR_DOMAIN:
            rule = info.metadata.get("rule")
            counted, restart = info.metadata.get("counted"), info.metadata.get("restart")
            return ErrorDetails(
                code=info.reason.lower().replace("_", "-"),
                rule=rule or None,
                counted=None if counted is None else counted == "true",
                claim_id=info.metadata.get("claim", ""),
                restart=None if restart is None else restart == "true",
            )
    return None


def abort_on_error(context: grpc.ServicerContext, fn: Callable[[], T]) -> T:
    """Run ``fn``; turn a protocol error into an aborted call (:func:`abort_with_error`)."""
    try:
        return fn()
    except TwinauditError as exc:
        abort_with_error(context, exc)


class Health(health.HealthServicer):  # type: ignore[misc]
    """The standard health service, with its ``List`` method.

    grpcio-health-checking 1.85 implements ``Check`` and ``Watch`` but leaves ``List``
    to the generated base class, which raises NotImplementedError: gRPC answers that
    UNKNOWN ("Exception calling application"). Here ``List`` answers every service's
    status, read under the servicer's own lock (its ``_server_status``; the package is
    pinned with grpcio).
    """

    def List(self, request: Any, context: Any) -> Any:  # noqa: N802 - gRPC method name
        """Answer the status of every service this server reports."""
        with self._lock:
            statuses = dict(self._server_status)
        return health_pb2.HealthListResponse(
            statuses={
                name: health_pb2.HealthCheckResponse(status=status)
                for name, status in statuses.items()
            }
        )


class ProbedHealth(Health):
    """The standard health service, answering what a probe of the server's backend finds.

    Before a ``Check`` (or a new ``Watch``) it runs ``probe`` — at most once per
    ``interval_s``, the last answer standing in between — and sets ``""`` and every
    name of ``service_names`` to ``SERVING`` if the probe returned, ``NOT_SERVING``
    if it raised. Each change is logged once.
    """

    def __init__(
        self,
        probe: Callable[[], object],
        service_names: tuple[str, ...],
        interval_s: float = HEALTH_PROBE_INTERVAL_S,
    ) -> None:
        """Follow ``probe`` for ``""`` and ``service_names``."""
        super().__init__()
        self._probe = probe
        self._names = ("", *service_names)
        self._interval_s = interval_s
        self._probe_lock = threading.Lock()
        self._last_probe: float | None = None
        self._serving: bool | None = None

    def refresh(self) -> bool:
        """Run the probe unless it ran within ``interval_s``; return whether it is serving.

        A check that comes while a probe runs (a database that hangs) does not wait for
        it: it answers the last status, so health checks never pile up on the workers.
        """
        if not self._probe_lock.acquire(blocking=self._serving is None):
            return bool(self._serving)
        try:
            now = time.monotonic()
            if self._last_probe is not None and now - self._last_probe < self._interval_s:
                return bool(self._serving)
            self._last_probe = now
            try:
                self._probe()
            except Exception as exc:
                serving, reason = False, f"{type(exc).__name__}: {exc}"
            else:
                serving, reason = True, ""
            if serving != self._serving:
                if serving:
                    _log.info("health: SERVING (the backend answers)")
                else:
                    _log.warning("health: NOT_SERVING (the backend does not answer: %s)", reason)
                status = (
                    health_pb2.HealthCheckResponse.SERVING
                    if serving
                    else health_pb2.HealthCheckResponse.NOT_SERVING
                )
                for name in self._names:
                    self.set(name, status)
                self._serving = serving
            return serving
        finally:
            self._probe_lock.release()

    def Check(self, request: Any, context: Any) -> Any:  # noqa: N802 - gRPC method name
        """Probe (if due), then answer the status of the requested service."""
        self.refresh()
        return super().Check(request, context)

    def Watch(self, request: Any, context: Any, send_response_callback: Any = None) -> Any:  # noqa: N802
        """Probe (if due), then stream the status of the requested service."""
        self.refresh()
        return super().Watch(request, context, send_response_callback)

    def List(self, request: Any, context: Any) -> Any:  # noqa: N802 - gRPC method name
        """Probe (if due), then answer the status of every service."""
        self.refresh()
        return super().List(request, context)


def _enable_reflection(server: grpc.Server, service_names: tuple[str, ...]) -> None:
    """Serve gRPC reflection (``grpcio-reflection``, the ``ops`` extra) for these services."""
    from grpc_reflection.v1alpha import reflection  # noqa: PLC0415 - the optional ops extra

    health_name = health_pb2.DESCRIPTOR.services_by_name["Health"].full_name
    names = (*service_names, health_name, reflection.SERVICE_NAME)
    reflection.enable_server_reflection(names, server)


def make_server(
    listen: str,
    register: Callable[[grpc.Server], None],
    *,
    tls: TlsFiles | None = None,
    max_workers: int = 8,
    service_names: tuple[str, ...] = (),
    metrics: Metrics = NO_METRICS,
    health_probe: Callable[[], object] | None = None,
    reflection: bool = False,
    max_receive_bytes: int = MAX_MESSAGE_BYTES,
) -> tuple[grpc.Server, int]:
    """Build and start a server with limits, a health service and optional (m)TLS.

    Returns the server and the port it bound (useful with ``host:0``). ``listen`` must
    be ``HOST:PORT`` (:func:`parse_address`), or ``unix:/PATH`` (a Unix-domain socket,
    :func:`check_unix_address`; the "port" returned is then 1); a port another socket
    listens on is refused. Both failures are an :class:`InputError` with a one-line message.

    Every RPC is logged and counted in ``metrics`` (:class:`~twinaudit.wire.observe.ObserveRpcs`).
    With ``health_probe`` the health service answers ``NOT_SERVING`` while the probe
    raises (:class:`ProbedHealth`); without, ``SERVING`` once started. ``reflection``
    serves gRPC reflection for ``service_names`` (``grpcio-reflection``). Messages it
    receives are capped at ``max_receive_bytes`` (an oracle's: MAX_QUERY_MESSAGE_BYTES),
    those it sends at MAX_MESSAGE_BYTES.
    """
    if is_unix_address(listen):  # a held model's child, in its sandbox
        check_unix_address(listen, what="the listen address")
    else:
        host, port = parse_address(listen, what="the listen address", port_zero=True)
        _refuse_port_in_use(host, port, listen)
    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=max_workers),
        options=[*_limits(MAX_MESSAGE_BYTES, max_receive_bytes), _NO_REUSEPORT],
        interceptors=[ObserveRpcs(metrics, max_receive_bytes), RefuseUndecodable()],
    )
    register(server)
    health_servicer = (
        Health() if health_probe is None else ProbedHealth(health_probe, service_names)
    )
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    if reflection:
        _enable_reflection(server, service_names)
    creds = None
    if tls is not None and tls.cert is not None:
        if tls.key is None:
            raise InputError("a TLS certificate needs its private key")
        require_owner_only(tls.key, "TLS key")
        creds = grpc.ssl_server_credentials(
            [(tls.key.read_bytes(), tls.cert.read_bytes())],
            root_certificates=_read(tls.ca),
            require_client_auth=tls.ca is not None,
        )
    try:
        if creds is None:
            bound = server.add_insecure_port(listen)
        else:
            bound = server.add_secure_port(listen, creds)
    except RuntimeError:  # grpc's report of a failed bind (in use, or no such address)
        bound = 0
    if bound == 0:
        raise InputError(f"cannot listen on {listen}: the address is in use or not local")
    server.start()
    if isinstance(health_servicer, ProbedHealth):
        health_servicer.refresh()
    else:
        for name in ("", *service_names):
            health_servicer.set(name, health_pb2.HealthCheckResponse.SERVING)
    return server, bound


def make_channel(
    target: str, *, tls: TlsFiles | None = None, max_send_bytes: int = MAX_MESSAGE_BYTES
) -> grpc.Channel:
    """Open a client channel with the same message limits; TLS when ``tls`` is given.

    It sends messages of at most ``max_send_bytes`` (an arbiter's oracle channel:
    MAX_QUERY_MESSAGE_BYTES) and receives at most MAX_MESSAGE_BYTES.
    """
    options = _limits(max_send_bytes, MAX_MESSAGE_BYTES)
    if tls is None:
        return grpc.insecure_channel(target, options=options)
    creds = grpc.ssl_channel_credentials(
        root_certificates=_read(tls.ca),
        private_key=_read(tls.key),
        certificate_chain=_read(tls.cert),
    )
    return grpc.secure_channel(target, creds, options=options)


def wait_healthy(channel: grpc.Channel, service: str = "", timeout_s: float = 10.0) -> None:
    """Block until the server's health service says SERVING, or raise grpc.RpcError."""
    stub = health_pb2_grpc.HealthStub(channel)
    answer = stub.Check(
        health_pb2.HealthCheckRequest(service=service), timeout=timeout_s, wait_for_ready=True
    )
    if answer.status != health_pb2.HealthCheckResponse.SERVING:
        raise InputError(f"service {service!r} is not serving")


def iterate_with_errors(context: grpc.ServicerContext, items: Iterator[Any]) -> Iterator[Any]:
    """Yield from ``items``, aborting the stream with the mapped status on a protocol error."""
    try:
        yield from items
    except TwinauditError as exc:
        abort_with_error(context, exc)
