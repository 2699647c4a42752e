"""gRPC replies held to a byte cap from their request, checked before they are parsed.

The channel's message cap (:data:`twinaudit.wire.transport.MAX_MESSAGE_BYTES`, 64 MiB) bounds
what gRPC receives, but protobuf's parser can then spend far more than a reply's size:
a packed field of one-byte varints takes 8 bytes a value in memory, and more while it
grows, and a repeated message of two bytes a whole message (``python -m bench
decoders``). A client knows how many values it asked for, so it asks each call through
a :class:`CappedMethod`: the reply arrives as bytes, is refused if it is longer than
:func:`reply_cap` of those values (``OracleError("invalid-answer")``), and only then
read, by :func:`~twinaudit.verifier.oracles.proto_reader.read_reply` rather than protobuf's
parser: numbers go straight into numpy arrays (at most 8 bytes a wire byte), and a reply
holding more messages or strings than the call allows is refused before they are built.
The deadline of the call is gRPC's own, for the whole call (issue #40 N2, N3).
"""

from __future__ import annotations

from typing import Any, Final

import grpc

from twinaudit.protocol.errors import OracleError
from twinaudit.wire.transport import MAX_MESSAGE_BYTES

from .proto_reader import Reply, read_reply

#: The room a reply has beyond its values (names, shapes, descriptions), in bytes.
REPLY_OVERHEAD_BYTES: Final = 64 * 1024
#: The most bytes one value takes on the wire: a varint of a negative 64-bit integer.
VALUE_BYTES: Final = 10
#: The most messages, strings and byte strings a reply may hold unless its call says
#: otherwise (tensors, their names and shapes' messages, capabilities, versions).
MAX_REPLY_OBJECTS: Final = 1024


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
        self._descriptor = reply_type.DESCRIPTOR

    def __call__(
        self,
        request: Any,
        *,
        timeout: float,
        max_bytes: int,
        max_objects: int = MAX_REPLY_OBJECTS,
    ) -> Reply:
        """Send ``request``; return the reply if it is at most ``max_bytes`` long.

        The reply is refused too if it holds more than ``max_objects`` messages, strings
        and byte strings (:func:`~twinaudit.verifier.oracles.proto_reader.read_reply`). A failed
        call raises :class:`grpc.RpcError`, as a stub's method does.
        """
        data = self._call(request, timeout=timeout)
        return read_capped(
            self._descriptor, data, what=self._name, max_bytes=max_bytes, max_objects=max_objects
        )


def read_capped(
    descriptor: Any, data: bytes, *, what: str, max_bytes: int, max_objects: int
) -> Reply:
    """Return ``data`` read as a ``descriptor`` reply of ``what``, within both caps.

    Longer than ``max_bytes``, or holding over ``max_objects`` messages and strings,
    it is refused (``OracleError("invalid-answer")``) before anything is built.
    """
    if len(data) > max_bytes:
        raise OracleError(
            "invalid-answer",
            f"{what} answered {len(data)} bytes, above the cap of {max_bytes} for what was asked",
        )
    return read_reply(descriptor, data, max_objects=max_objects, what=what)
