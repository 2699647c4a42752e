"""The operator's options of ``verifier serve`` and ``oracle serve``.

Logs, metrics and reflection (:func:`add_operations_args`), and what the listen address
may be without TLS (:func:`add_plaintext_arg`, :func:`check_listen`).
"""

from __future__ import annotations

import argparse
import errno
import importlib
import ipaddress
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from twinaudit.protocol.errors import InputError
from twinaudit.protocol.keys import require_owner_only
from twinaudit.wire.observe import (
    LOG_FORMATS,
    LOG_LEVELS,
    NO_METRICS,
    Metrics,
    PrometheusMetrics,
    configure_logging,
)
from twinaudit.wire.transport import parse_address

if TYPE_CHECKING:
    from wsgiref.simple_server import WSGIServer


def add_operations_args(parser: argparse.ArgumentParser) -> None:
    """Add ``--log-level``, ``--log-format``, ``--metrics-listen`` and ``--reflection``."""
    parser.add_argument(
        "--log-level",
        choices=LOG_LEVELS,
        default="info",
        help="least severe log events written to stderr (default info: one line per RPC; "
        "debug adds the health checks)",
    )
    parser.add_argument(
        "--log-format",
        choices=LOG_FORMATS,
        default="text",
        help="log events as text lines (default) or one JSON object per line",
    )
    parser.add_argument(
        "--metrics-listen",
        metavar="HOST:PORT",
        help="serve Prometheus metrics at http://HOST:PORT/metrics (port 0 picks a free one; "
        "needs the ops extra)",
    )
    parser.add_argument(
        "--reflection",
        action="store_true",
        help="serve gRPC reflection for grpcurl and similar tools (needs the ops extra)",
    )


def add_plaintext_arg(parser: argparse.ArgumentParser) -> None:
    """Add ``--insecure-plaintext``, the one way to serve plaintext beyond loopback."""
    parser.add_argument(
        "--insecure-plaintext",
        action="store_true",
        help="serve plaintext gRPC beyond loopback, which anyone on the path reads and "
        "alters (otherwise such an address needs TLS)",
    )


def is_loopback(host: str) -> bool:
    """Return whether ``host`` (from :func:`~twinaudit.wire.transport.parse_address`) is loopback.

    ``localhost``, 127.0.0.0/8 and ``[::1]`` are; any other name or address is not,
    ``0.0.0.0`` and ``[::]`` (every interface) included.
    """
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_listen(args: argparse.Namespace, host: str) -> None:
    """Refuse a plaintext listen beyond loopback, and a TLS key others can read.

    ``args`` holds ``tls_cert``, ``tls_key`` and ``insecure_plaintext``; ``host`` is the
    ``--listen`` host. Without TLS, a host other than loopback (:func:`is_loopback`) is
    refused unless ``--insecure-plaintext`` is given. The TLS key is checked as the
    signing key is (:func:`~twinaudit.protocol.keys.require_owner_only`). Each refusal is an
    :class:`~twinaudit.protocol.errors.InputError` of one line, before anything is loaded.
    """
    if (args.tls_cert is None) != (args.tls_key is None):
        raise InputError("--tls-cert and --tls-key go together")
    if args.tls_key is not None:
        require_owner_only(args.tls_key, "TLS key")
    elif not is_loopback(host) and not args.insecure_plaintext:
        raise InputError(
            f"--listen {host} is not a loopback address: serve it with --tls-cert and "
            "--tls-key, or pass --insecure-plaintext to serve plaintext gRPC there"
        )


@dataclass
class Operations:
    """The logging, metrics endpoint and reflection a server was started with."""

    metrics: Metrics = NO_METRICS
    metrics_address: str | None = None
    _http: Any = None
    _restore_logging: Callable[[], None] | None = None

    def close(self) -> None:
        """Stop the metrics endpoint, if one is served, and undo the logging set-up."""
        if self._http is not None:
            self._http.shutdown()
            self._http.server_close()
            self._http = None
        if self._restore_logging is not None:
            self._restore_logging()
            self._restore_logging = None


def start_operations(args: argparse.Namespace) -> Operations:
    """Configure the logs and serve the metrics endpoint that ``args`` ask for.

    A malformed ``--metrics-listen`` or one whose port is in use is an
    :class:`~twinaudit.protocol.errors.InputError`; a missing ``ops`` extra is a
    ``ModuleNotFoundError`` naming its module (the CLI names the install).
    """
    if args.metrics_listen is not None:
        host, _ = parse_address(args.metrics_listen, what="--metrics-listen", port_zero=True)
    if args.reflection:
        importlib.import_module("grpc_reflection.v1alpha.reflection")
    if args.metrics_listen is None:
        return Operations(_restore_logging=configure_logging(args.log_level, args.log_format))
    metrics = PrometheusMetrics()
    http, port = serve_metrics(args.metrics_listen, metrics)
    restore = configure_logging(args.log_level, args.log_format)
    return Operations(metrics, f"{host}:{port}", http, restore)


def serve_metrics(listen: str, metrics: PrometheusMetrics) -> tuple[WSGIServer, int]:
    """Serve ``metrics`` for Prometheus at ``http://HOST:PORT/metrics``; return it and its port.

    ``listen`` is ``HOST:PORT`` (port 0 picks a free one). A port in use, or an
    address not on this host, is an :class:`~twinaudit.protocol.errors.InputError` of one line.
    Stop it with ``server.shutdown()`` then ``server.server_close()``.
    """
    from prometheus_client import start_http_server  # noqa: PLC0415 - the optional ops extra

    host, port = parse_address(listen, what="--metrics-listen", port_zero=True)
    try:
        server, _ = start_http_server(port, addr=host.strip("[]"), registry=metrics.registry)
    except OSError as exc:
        in_use = exc.errno == errno.EADDRINUSE
        reason = "the port is already in use" if in_use else (exc.strerror or str(exc))
        raise InputError(f"cannot serve metrics on {listen}: {reason}") from None
    return server, int(server.server_port)
