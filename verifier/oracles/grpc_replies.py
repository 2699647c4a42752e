"""gRPC replies held to a byte cap from their request, checked before they are parsed.

The channel's message cap (:data:`wire.transport.MAX_MESSAGE_BYTES`, 64 MiB) bounds
what gRPC receives, but protobuf's parser can then spend far more than a reply's size:
a packed field of one-byte varints takes 8 bytes a value in memory, and more while it
grows, and a repeated message of two bytes a whole message (``python -m bench
decoders``). A client knows how many values it asked for, so it asks each call through
a :class:`CappedMethod`: the reply arrives as bytes, is refused if it is longer than
:func:`reply_cap` of those values (``OracleError("invalid-answer")``), and only then
parsed. The deadline of the call is gRPC's own, for the whole call (issue #40 N2, N3).
"""

from __future__ import annotations

from typing import Any, Final

import grpc
from google.protobuf.message import DecodeError

from protocol.errors import OracleError
from wire.transport import MAX_MESSAGE_BYTES

#: The room a reply has beyond its values (names, shapes, descriptions), in bytes.
REPLY_OVERHEAD_BYTES: Final = 64 * 1024
#: The most bytes one value takes on the wire: a varint of a negative 64-bit integer.
VALUE_BYTES: Final = 10


def reply_cap(values: int, limit: int = MAX_MESSAGE_BYTES) -> int:
    """Return the byte cap of a reply expected to hold ``values`` values (at most ``limit``)."""
    return min(limit, REPLY_OVERHEAD_BYTES + VALUE_BYTES * values)


def _serialize(message: Any) -> bytes:
    data: bytes = message.SerializeToString()
    return data


class CappedMethod:
    """One unary method whose reply is measured before it is parsed (see the module)."""

    def __init__(self, channel: grpc.Channel, service: str, name: str, reply_type: Any) -> None:
        """Call ``/service/name`` on ``channel``; its replies are ``reply_type`` messages."""
        self._call = channel.unary_unary(
            f"/{service}/{name}", request_serializer=_serialize, response_deserializer=None
        )
        self._name = name
        self._reply_type = reply_type

    def __call__(self, request: Any, *, timeout: float, max_bytes: int) -> Any:
        """Send ``request``; return the reply if it is at most ``max_bytes`` long.

        A failed call raises :class:`grpc.RpcError`, as a stub's method does.
        """
        data = self._call(request, timeout=timeout)
        if len(data) > max_bytes:
            raise OracleError(
                "invalid-answer",
                f"{self._name} answered {len(data)} bytes, above the cap of {max_bytes} "
                "for what was asked",
            )
        try:
            return self._reply_type.FromString(data)
        except DecodeError:
            raise OracleError(
                "invalid-answer", f"{self._name} answered bytes that are not its reply"
            ) from None
