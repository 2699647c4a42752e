"""A bounded reader of protobuf replies: numbers straight into arrays, objects counted.

protobuf's own parser spends far more memory than a reply's length on two shapes of
data (issue #40 N3, ``python -m bench.bench_decoders --replies``): a packed field of
one-byte varints (8 bytes a value once parsed, up to 16 while its array grows, 8 more
when it is copied into numpy: 24x the reply), and a repeated message whose elements are
empty (two bytes on the wire, a whole message object in memory: 16x). A reply is read
here instead, from its message descriptor, in two passes over each message:

1. count: every field's occurrences and, for a packed varint field, its values (the
   bytes below 0x80, counted with numpy); a reply holding more repeated messages,
   strings or byte strings than the caller's ``max_objects`` in all, or more field
   occurrences of any kind (unknown ones, map entries, empty packed fields, a scalar
   sent again) than eight a permitted object and 64 more, is refused here, before
   anything is built;
2. fill: each repeated number field goes into one numpy array of exactly its count
   (varint fields as int64, or uint64 for ``uint64``/``fixed64``; floats as float64 or
   float32), packed varints decoded a block at a time so that the work space does not
   grow with the reply.

So a reply costs at most about 8 bytes per wire byte for its numbers, plus a bounded
number of objects. What protobuf accepts, this accepts, with two exceptions it refuses
as ``invalid-answer``: a known field sent with the wrong wire type, and a singular
message field sent twice (a conforming server never sends either). Groups (wire types
3 and 4) and keys or lengths written in more than 5 bytes (as protobuf refuses them) are
refused too; unknown fields are skipped, as protobuf skips them, and so
are map fields (no caller reads a reply's ``parameters``), which read as empty. Numbers
of a repeated field sent one by one rather than packed (which proto3 serialisers never
do for these messages) count as objects, so that a reply cannot make the reader loop
over a million two-byte fields.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Final

import numpy as np
import numpy.typing as npt
from google.protobuf.descriptor import Descriptor, FieldDescriptor

from twinaudit.protocol.errors import OracleError

_VARINT, _I64, _LEN, _I32 = 0, 1, 2, 5
#: Input bytes of a packed varint field decoded at a time (bounds the work space).
_BLOCK: Final = 1 << 12
_MAX_VARINT_BYTES: Final = 10
_MAX_DEPTH: Final = 16
_MAX_FIELD_NUMBER: Final = 2**29 - 1
#: The longest varint of a key or a length (32 bits), as protobuf reads them.
_MAX_KEY_BYTES: Final = 5
#: Field occurrences a reply may hold per object it may hold, and beyond them: every
#: occurrence costs Python work, so one of two bytes (an empty packed field, an unknown
#: field, a scalar sent again) must be bounded like an object.
_FIELDS_PER_OBJECT: Final = 8
_FIELDS_BEYOND: Final = 64

_T = FieldDescriptor
_VARINT_TYPES: Final = frozenset(
    {
        _T.TYPE_INT64,
        _T.TYPE_UINT64,
        _T.TYPE_INT32,
        _T.TYPE_UINT32,
        _T.TYPE_BOOL,
        _T.TYPE_ENUM,
        _T.TYPE_SINT32,
        _T.TYPE_SINT64,
    }
)
_FIXED: Final = {
    _T.TYPE_DOUBLE: ("<f8", _I64),
    _T.TYPE_FLOAT: ("<f4", _I32),
    _T.TYPE_FIXED64: ("<u8", _I64),
    _T.TYPE_SFIXED64: ("<i8", _I64),
    _T.TYPE_FIXED32: ("<u4", _I32),
    _T.TYPE_SFIXED32: ("<i4", _I32),
}
_OBJECT_TYPES: Final = frozenset({_T.TYPE_MESSAGE, _T.TYPE_STRING, _T.TYPE_BYTES})


class _MalformedError(Exception):
    """Bytes that are not the expected message (turned into an ``OracleError``)."""


def _invalid(message: str) -> _MalformedError:
    return _MalformedError(message)


def _repeated(field: FieldDescriptor) -> bool:
    return bool(field.is_repeated)


def _is_map(field: FieldDescriptor) -> bool:
    message = field.message_type
    return message is not None and bool(message.GetOptions().map_entry)


def _wire_type(field: FieldDescriptor) -> int:
    if field.type in _VARINT_TYPES:
        return _VARINT
    if field.type in _FIXED:
        return _FIXED[field.type][1]
    return _LEN


def _read_varint(
    data: memoryview, pos: int, end: int, longest: int = _MAX_VARINT_BYTES
) -> tuple[int, int]:
    value = shift = 0
    for i in range(pos, min(end, pos + longest)):
        byte = data[i]
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value & 0xFFFFFFFFFFFFFFFF, i + 1
        shift += 7
    raise _invalid("the reply holds a truncated or overlong varint")


def _fields(data: memoryview, start: int, end: int) -> Iterator[tuple[int, int, int, int]]:
    """Yield ``(number, wire type, value or start, end)`` for each field of a message.

    A varint's value is the third item (the fourth is unused); a fixed-size or
    length-delimited field's bytes are ``data[third:fourth]``.
    """
    pos = start
    while pos < end:
        key, pos = _read_varint(data, pos, end, _MAX_KEY_BYTES)
        number, wire = key >> 3, key & 7
        if not 1 <= number <= _MAX_FIELD_NUMBER:
            raise _invalid(f"the reply holds field number {number}")
        if wire == _VARINT:
            value, pos = _read_varint(data, pos, end)
            yield number, wire, value, pos
            continue
        if wire == _I64:
            size = 8
        elif wire == _I32:
            size = 4
        elif wire == _LEN:
            size, pos = _read_varint(data, pos, end, _MAX_KEY_BYTES)
        else:
            raise _invalid(f"the reply holds wire type {wire} (groups are not read)")
        if size > end - pos:
            raise _invalid("the reply ends inside a field")
        yield number, wire, pos, pos + size
        pos += size


def _count_varints(block: npt.NDArray[np.uint8]) -> int:
    if block.size and block[-1] >= 0x80:
        raise _invalid("a packed field ends inside a varint")
    return sum(
        int(np.count_nonzero(block[s : s + _BLOCK] < 0x80)) for s in range(0, block.size, _BLOCK)
    )


def _decode_varints(block: npt.NDArray[np.uint8], out: npt.NDArray[np.uint64]) -> int:
    """Decode the packed varints of ``block`` into ``out``; return how many."""
    pos = done = 0
    while pos < block.size:
        end = min(pos + _BLOCK, block.size)
        part = block[pos:end]
        terminal = part < 0x80
        if terminal.all():  # one-byte varints: the bytes are the values
            out[done : done + part.size] = part
            done += part.size
            pos += part.size
            continue
        ends = np.flatnonzero(terminal)
        if not ends.size:
            raise _invalid("the reply holds an overlong varint")
        part = part[: int(ends[-1]) + 1]
        starts = np.empty_like(ends)
        starts[0] = 0
        starts[1:] = ends[:-1] + 1
        lengths = ends - starts + 1
        if int(lengths.max()) > _MAX_VARINT_BYTES:
            raise _invalid("the reply holds an overlong varint")
        shift = (np.arange(part.size) - np.repeat(starts, lengths)) * 7
        pieces = (part & 0x7F).astype(np.uint64) << shift.astype(np.uint64)
        out[done : done + ends.size] = np.add.reduceat(pieces, starts)
        done += ends.size
        pos += part.size
    return done


def _as_type(values: npt.NDArray[np.uint64], kind: int) -> npt.NDArray[Any]:
    """Give 64-bit varint values their field type (in place where it can)."""
    signed = values.view(np.int64)
    if kind == _T.TYPE_UINT64:
        return values
    if kind == _T.TYPE_BOOL:
        flags: npt.NDArray[np.bool_] = values != 0
        return flags
    if kind in (_T.TYPE_SINT32, _T.TYPE_SINT64):
        half = (values >> np.uint64(1)).view(np.int64)
        signed = np.bitwise_xor(half, -(values & np.uint64(1)).view(np.int64), out=half)
        if kind == _T.TYPE_SINT32:
            kind = _T.TYPE_INT32
        else:
            return signed
    if kind == _T.TYPE_UINT32:
        np.bitwise_and(signed, 0xFFFFFFFF, out=signed)
    elif kind in (_T.TYPE_INT32, _T.TYPE_ENUM):
        np.bitwise_and(signed, 0xFFFFFFFF, out=signed)
        signed[signed >= 2**31] -= 2**32
    return signed


def _scalar(field: FieldDescriptor, value: int) -> int | bool:
    one = np.array([value], dtype=np.uint64)
    typed = _as_type(one, field.type)
    return bool(typed[0]) if field.type == _T.TYPE_BOOL else int(typed[0])


def _default(field: FieldDescriptor) -> Any:
    if _repeated(field):
        if field.type in _OBJECT_TYPES:
            return []
        if field.type in _FIXED:
            return np.zeros(0, dtype=_FIXED[field.type][0]).astype(_native(field))
        return _as_type(np.zeros(0, dtype=np.uint64), field.type)
    if field.type == _T.TYPE_MESSAGE:
        return Reply(field.message_type, {})
    if field.type == _T.TYPE_STRING:
        return ""
    if field.type == _T.TYPE_BYTES:
        return b""
    if field.type == _T.TYPE_BOOL:
        return False
    if field.type in (_T.TYPE_DOUBLE, _T.TYPE_FLOAT):
        return 0.0
    return 0


def _native(field: FieldDescriptor) -> str:
    return "f8" if field.type == _T.TYPE_DOUBLE else _FIXED[field.type][0][1:]


class Reply:
    """A read message: its fields by name, with protobuf's defaults for absent ones.

    Repeated numbers are numpy arrays; repeated messages, strings and byte strings are
    lists; a singular message is a :class:`Reply` (empty when absent).
    """

    __slots__ = ("_descriptor", "_values")

    def __init__(self, descriptor: Descriptor, values: dict[str, Any]) -> None:
        """Hold ``values`` (by field name) of a message of type ``descriptor``."""
        self._descriptor = descriptor
        self._values = values

    def __getattr__(self, name: str) -> Any:
        """Return field ``name``'s value, or its default if the reply left it out."""
        if name.startswith("_"):  # copy and pickle probe before the slots are set
            raise AttributeError(name)
        try:
            return self._values[name]
        except KeyError:
            pass
        field = self._descriptor.fields_by_name.get(name)
        if field is None:
            raise AttributeError(name)
        return _default(field)


def read_reply(descriptor: Descriptor, data: bytes, *, max_objects: int, what: str) -> Reply:
    """Read ``data`` as a ``descriptor`` message, holding at most ``max_objects`` objects.

    Objects are the elements of repeated message, string and byte-string fields and
    every singular message present, at any depth. Raises ``OracleError``
    (``invalid-answer``, its message led by ``what``) on bytes that are not such a
    message, or that hold more.
    """
    view = memoryview(data).cast("B")
    try:
        return _Reader(view, max_objects).read(descriptor, 0, len(view), 0)
    except _MalformedError as exc:
        raise OracleError("invalid-answer", f"{what}: {exc}") from None


class _Reader:
    """One reply's bytes and the objects it may still hold."""

    def __init__(self, data: memoryview, max_objects: int) -> None:
        self.data = data
        self.objects_left = max_objects
        self.fields_left = _FIELDS_PER_OBJECT * max_objects + _FIELDS_BEYOND

    def take(self, what: str) -> None:
        self.objects_left -= 1
        if self.objects_left < 0:
            raise _invalid(f"the reply holds more {what} than were asked for")

    def read(self, descriptor: Descriptor, start: int, end: int, depth: int) -> Reply:
        """Read the message of type ``descriptor`` in ``data[start:end]`` (two passes)."""
        if depth > _MAX_DEPTH:
            raise _invalid("the reply nests messages too deeply")
        counts = self._count(descriptor, start, end)
        values: dict[str, Any] = {}
        filled: dict[int, int] = {}
        for number, count in counts.items():
            field = descriptor.fields_by_number[number]
            if _repeated(field):
                values[field.name] = _empty(field, count)
                filled[number] = 0
        data = self.data
        for number, wire, first, last in _fields(data, start, end):
            field = descriptor.fields_by_number.get(number)
            if field is None or _is_map(field):
                continue
            name = field.name
            if field.type == _T.TYPE_MESSAGE:
                message = self.read(field.message_type, first, last, depth + 1)
                _put(values, field, message)
            elif field.type == _T.TYPE_STRING:
                try:
                    _put(values, field, str(data[first:last], "utf-8"))
                except UnicodeDecodeError:
                    raise _invalid(f"field {name!r} of the reply is not UTF-8") from None
            elif field.type == _T.TYPE_BYTES:
                _put(values, field, bytes(data[first:last]))
            elif _repeated(field):
                out = values[name][filled[number] :]
                filled[number] += _fill(field, wire, data[first:last], out, value=first)
            elif field.type in _FIXED:
                values[name] = np.frombuffer(data[first:last], _FIXED[field.type][0])[0].item()
            else:
                values[name] = _scalar(field, first)
        for number in filled:
            field = descriptor.fields_by_number[number]
            if field.type in _FIXED:
                values[field.name] = values[field.name].astype(_native(field), copy=False)
            elif field.type not in _OBJECT_TYPES:
                values[field.name] = _as_type(values[field.name], field.type)
        return Reply(descriptor, values)

    def _count(self, descriptor: Descriptor, start: int, end: int) -> dict[int, int]:
        """Pass 1: each known field's values, objects taken from the budget."""
        counts: dict[int, int] = {}
        for number, wire, first, last in _fields(self.data, start, end):
            self.fields_left -= 1
            if self.fields_left < 0:
                raise _invalid("the reply holds more fields than were asked for")
            field = descriptor.fields_by_number.get(number)
            if field is None or _is_map(field):
                continue
            expected = _wire_type(field)
            packed = _repeated(field) and wire == _LEN and expected != _LEN
            if wire != expected and not packed:
                raise _invalid(f"field {field.name!r} of the reply has wire type {wire}")
            if packed:
                counts[number] = counts.get(number, 0) + _packed_count(field, self.data[first:last])
                continue
            counts[number] = counts.get(number, 0) + 1
            if field.type not in _OBJECT_TYPES:
                if _repeated(field):
                    self.take("unpacked numbers")
                continue
            if not _repeated(field) and field.type == _T.TYPE_MESSAGE and counts[number] > 1:
                raise _invalid(f"the reply sends message field {field.name!r} twice")
            self.take("messages or strings")
        return counts


def _empty(field: FieldDescriptor, count: int) -> Any:
    if field.type in _OBJECT_TYPES:
        return []
    if field.type in _FIXED:
        return np.empty(count, dtype=_FIXED[field.type][0])
    return np.empty(count, dtype=np.uint64)


def _put(values: dict[str, Any], field: FieldDescriptor, value: Any) -> None:
    if _repeated(field):
        values[field.name].append(value)
    else:
        values[field.name] = value


def _packed_count(field: FieldDescriptor, chunk: memoryview) -> int:
    if field.type in _FIXED:
        size = np.dtype(_FIXED[field.type][0]).itemsize
        if len(chunk) % size:
            raise _invalid(f"packed field {field.name!r} of the reply has a partial value")
        return len(chunk) // size
    return _count_varints(np.frombuffer(chunk, np.uint8))


def _fill(
    field: FieldDescriptor, wire: int, chunk: memoryview, out: npt.NDArray[Any], *, value: int
) -> int:
    """Write one occurrence of a repeated number field into ``out``; return its count.

    ``chunk`` holds its bytes, or ``value`` its value if it is a lone varint.
    """
    if field.type in _FIXED:
        values = np.frombuffer(chunk, _FIXED[field.type][0])
        out[: values.size] = values
        return int(values.size)
    if wire == _VARINT:
        out[0] = value
        return 1
    return _decode_varints(np.frombuffer(chunk, np.uint8), out)
