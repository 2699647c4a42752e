"""Serve oracles (or raw servicers) on 127.0.0.1 for a test and connect gRPC clients to them."""

from __future__ import annotations

from typing import Any

from twinaudit.practitioner.grpc_server import serve_oracle
from twinaudit.protocol.oracles.base import Oracle
from twinaudit.wire import transport
from twinaudit.wire.oracle.v1 import oracle_pb2_grpc


class OracleServers:
    """Servers and channels started for one test; :meth:`close` stops them all.

    :meth:`start` serves an :class:`Oracle` through :func:`serve_oracle`, or any
    other object as a raw ``Oracle`` servicer (to play a misbehaving server), and
    returns a ``client_type`` client on a new channel with that channel.
    """

    def __init__(self, client_type: type) -> None:
        """Connect clients of ``client_type`` (``GrpcOracle`` or a subclass)."""
        self.client_type = client_type
        self.servers: list[Any] = []
        self.channels: list[Any] = []

    def start(self, target: object, timeout_s: float = 10.0, **client: Any) -> tuple[Any, Any]:
        """Serve ``target`` on a free port; return a client and its channel."""
        if isinstance(target, Oracle):
            server, port = serve_oracle(target, "127.0.0.1:0")
        else:
            server, port = transport.make_server(
                "127.0.0.1:0", lambda s: oracle_pb2_grpc.add_OracleServicer_to_server(target, s)
            )
        channel = transport.make_channel(f"127.0.0.1:{port}")
        self.servers.append(server)
        self.channels.append(channel)
        return self.client_type(channel, timeout_s, **client), channel

    def close(self) -> None:
        """Close every channel, then stop every server."""
        for channel in self.channels:
            channel.close()
        for server in self.servers:
            server.stop(None)
