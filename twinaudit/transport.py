"""gRPC plumbing shared by every twinaudit service and client.

One place for the message-size limits, default deadlines, TLS/mTLS credentials,
health service, and the mapping from the protocol's error taxonomy to gRPC status
codes, so servers and clients cannot drift apart.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from concurrent import futures
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, TypeVar

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from protocol.errors import (
    InputError,
    LimitExceededError,
    NotFoundError,
    OracleError,
    StateError,
    TwinauditError,
    VerificationError,
    VersionError,
)

#: Largest message either side sends or accepts (a window of image pairs fits easily).
MAX_MESSAGE_BYTES: Final = 64 * 1024 * 1024
#: Default deadline of a unary call, in seconds.
DEFAULT_DEADLINE_S: Final = 30.0
#: Default deadline of a whole claim stream, in seconds.
CLAIM_DEADLINE_S: Final = 3600.0

_OPTIONS: Final = [
    ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
    ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
]

T = TypeVar("T")


@dataclass(frozen=True)
class TlsFiles:
    """PEM files for TLS. A server with ``client_ca`` requires client certificates (mTLS)."""

    cert: Path | None = None
    key: Path | None = None
    ca: Path | None = None


def _read(path: Path | None) -> bytes | None:
    return None if path is None else path.read_bytes()


def status_for(error: TwinauditError) -> grpc.StatusCode:
    """Return the gRPC status code for a protocol error (spec §2.2)."""
    if isinstance(error, OracleError):
        return {
            "unreachable": grpc.StatusCode.UNAVAILABLE,
            "deadline": grpc.StatusCode.DEADLINE_EXCEEDED,
        }.get(error.reason, grpc.StatusCode.FAILED_PRECONDITION)
    if isinstance(error, NotFoundError):
        return grpc.StatusCode.NOT_FOUND
    if isinstance(error, LimitExceededError):
        return grpc.StatusCode.RESOURCE_EXHAUSTED
    if isinstance(error, VersionError | StateError):
        return grpc.StatusCode.FAILED_PRECONDITION
    if isinstance(error, InputError | VerificationError):
        return grpc.StatusCode.INVALID_ARGUMENT
    return grpc.StatusCode.INTERNAL


def abort_on_error(context: grpc.ServicerContext, fn: Callable[[], T]) -> T:
    """Run ``fn``; turn a protocol error into an aborted call with the right status."""
    try:
        return fn()
    except TwinauditError as exc:
        context.abort(status_for(exc), exc.diagnostics())
        raise  # unreachable: abort raises


def make_server(
    listen: str,
    register: Callable[[grpc.Server], None],
    *,
    tls: TlsFiles | None = None,
    max_workers: int = 8,
    service_names: tuple[str, ...] = (),
) -> tuple[grpc.Server, int]:
    """Build and start a server with limits, a health service and optional (m)TLS.

    Returns the server and the port it bound (useful with ``host:0``).
    """
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=max_workers), options=_OPTIONS)
    register(server)
    health_servicer = health.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    if tls is not None and tls.cert is not None:
        if tls.key is None:
            raise InputError("a TLS certificate needs its private key")
        creds = grpc.ssl_server_credentials(
            [(tls.key.read_bytes(), tls.cert.read_bytes())],
            root_certificates=_read(tls.ca),
            require_client_auth=tls.ca is not None,
        )
        port = server.add_secure_port(listen, creds)
    else:
        port = server.add_insecure_port(listen)
    if port == 0:
        raise InputError(f"cannot listen on {listen}")
    server.start()
    for name in ("", *service_names):
        health_servicer.set(name, health_pb2.HealthCheckResponse.SERVING)
    return server, port


def make_channel(target: str, *, tls: TlsFiles | None = None) -> grpc.Channel:
    """Open a client channel with the same message limits; TLS when ``tls`` is given."""
    if tls is None:
        return grpc.insecure_channel(target, options=_OPTIONS)
    creds = grpc.ssl_channel_credentials(
        root_certificates=_read(tls.ca),
        private_key=_read(tls.key),
        certificate_chain=_read(tls.cert),
    )
    return grpc.secure_channel(target, creds, options=_OPTIONS)


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
        context.abort(status_for(exc), exc.diagnostics())
