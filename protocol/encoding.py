"""Canonical MessagePack: the one encoding of everything twinaudit hashes or signs (spec §3).

The canonical subset of MessagePack admits these types only:

- nil, true, false;
- integers in [-2**63, 2**64 - 1], always in their shortest form;
- float64 (never float32), finite values only;
- text strings (valid UTF-8) and byte strings, which are distinct types;
- arrays; maps whose keys are text strings, unique, sorted by their UTF-8 bytes.

Every length header takes its shortest form and extension types are forbidden.
:func:`decode` is strict: it rejects any byte string that is not exactly
``encode(decode(data))``, so each value has one encoding and each encoding one value.

Decoding is one pass over the bytes, without recursion, and checks every header
before it builds anything (spec §3.3): a length is compared with the bytes left
before a string is copied or a container made, and the sized values (arrays, maps,
text and byte strings) are counted against :func:`twinaudit.protocol.limits.max_sized_values`,
so that neither the time nor the memory of a decode exceeds a small multiple of
its input. :func:`check` runs the same pass and builds nothing.
"""

from __future__ import annotations

import functools
import math
import re
import struct
from collections.abc import Mapping, Sequence
from typing import Any, Final, TypeAlias

import msgpack
import numpy as np

from . import limits
from .errors import EncodingError, LimitExceededError

#: A value that has a canonical encoding.
Value: TypeAlias = bool | int | float | str | bytes | list["Value"] | dict[str, "Value"] | None

_INT_MIN = -(1 << 63)
_INT_MAX = (1 << 64) - 1


def _normalise(obj: Any, depth: int, views: bool = False) -> Any:
    """Check ``obj`` against the canonical data model and return it with sorted maps.

    With ``views``, a byte string of at least :data:`VIEW_BYTES` bytes comes back as a
    read-only view of the caller's buffer, not a copy (:func:`encode_pieces`).
    """
    if depth > limits.MAX_NESTING_DEPTH:
        raise LimitExceededError("nesting depth", depth, limits.MAX_NESTING_DEPTH)
    if obj is None or isinstance(obj, bool):
        return obj
    if isinstance(obj, int):
        if not _INT_MIN <= obj <= _INT_MAX:
            raise EncodingError(f"integer {obj} is outside [-2**63, 2**64-1]")
        return int(obj)
    if isinstance(obj, float):
        if not math.isfinite(obj):
            raise EncodingError(f"float {obj!r} is not finite")
        return float(obj)
    if isinstance(obj, str):
        try:
            raw = obj.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise EncodingError(f"text string is not valid Unicode: {exc}") from None
        if len(raw) > limits.MAX_STR_BYTES:
            raise LimitExceededError("text string length", len(raw), limits.MAX_STR_BYTES)
        return obj
    if isinstance(obj, bytes | bytearray | memoryview):
        if views and memoryview(obj).nbytes >= VIEW_BYTES:
            return _view(obj)
        data = bytes(obj)
        if len(data) > limits.MAX_BIN_BYTES:
            raise LimitExceededError("byte string length", len(data), limits.MAX_BIN_BYTES)
        return data
    if isinstance(obj, Mapping):
        if len(obj) > limits.MAX_CONTAINER_ITEMS:
            raise LimitExceededError("map size", len(obj), limits.MAX_CONTAINER_ITEMS)
        items: list[tuple[bytes, str, Any]] = []
        for key, value in obj.items():
            if not isinstance(key, str):
                raise EncodingError(f"map key {key!r} is not a text string")
            try:
                raw = key.encode("utf-8")
            except UnicodeEncodeError as exc:
                raise EncodingError(f"map key is not valid Unicode: {exc}") from None
            items.append((raw, key, _normalise(value, depth + 1, views)))
        items.sort(key=lambda item: item[0])
        return {key: value for _, key, value in items}
    if isinstance(obj, Sequence):
        if len(obj) > limits.MAX_CONTAINER_ITEMS:
            raise LimitExceededError("array length", len(obj), limits.MAX_CONTAINER_ITEMS)
        return [_normalise(item, depth + 1, views) for item in obj]
    raise EncodingError(f"type {type(obj).__name__} has no canonical encoding")


def canonical(value: Any) -> Value:
    """Return ``value`` as its canonical encoding decodes: maps' keys sorted, tuples as arrays.

    What :func:`decode` gives back for ``encode(value)``, without encoding it: the form
    in which a signed payload holds it (§3.2), e.g. to print a map a payload carries
    with its keys in the payload's order. Raises :class:`EncodingError` like :func:`encode`.
    """
    normal: Value = _normalise(value, 0)
    return normal


def encode(value: Any) -> bytes:
    """Return the canonical encoding of ``value``.

    Tuples encode as arrays and ``bytearray``/``memoryview`` as byte strings; map
    keys are sorted. Raises :class:`EncodingError` for values outside the data model.
    """
    return _pack(_normalise(value, 0))


def _pack(normal: Any) -> bytes:
    """Return the encoding of a value :func:`_normalise` has checked and sorted."""
    # A packer of its own with a small first buffer: packb's 256 KiB buffer would be
    # allocated (and mapped) for every hash of a few dozen bytes.
    packer = msgpack.Packer(use_bin_type=True, use_single_float=False, buf_size=1024)
    try:
        return bytes(packer.pack(normal))
    except (OverflowError, ValueError, TypeError) as exc:  # pragma: no cover - guarded above
        raise EncodingError(f"cannot encode: {exc}") from None


#: A piece of an encoding (:func:`encode_pieces`): bytes, or a view of a caller's buffer.
Piece: TypeAlias = bytes | memoryview

#: Byte strings at least this long are given by :func:`encode_pieces` as views, not copies.
VIEW_BYTES: Final = 1 << 16


def _sized_header(n: int, fixed: int | None, op16: int, op32: int) -> bytes:
    if fixed is not None and n < 16:
        return bytes([fixed | n])
    if n <= 0xFFFF:
        return bytes([op16]) + n.to_bytes(2, "big")
    return bytes([op32]) + n.to_bytes(4, "big")


def bin_header(n: int) -> bytes:
    """Return the canonical header of a byte string of ``n`` bytes (bin8, bin16 or bin32)."""
    if n < 0 or n > limits.MAX_BIN_BYTES:
        raise LimitExceededError("byte string length", n, limits.MAX_BIN_BYTES)
    return bytes([0xC4, n]) if n <= 0xFF else _sized_header(n, None, 0xC5, 0xC6)


def array_header(n: int) -> bytes:
    """Return the canonical header of an array of ``n`` values (fixarray, array16 or array32)."""
    if n < 0 or n > limits.MAX_CONTAINER_ITEMS:
        raise LimitExceededError("array length", n, limits.MAX_CONTAINER_ITEMS)
    return _sized_header(n, 0x90, 0xDC, 0xDD)


def _map_header(n: int) -> bytes:
    if n > limits.MAX_CONTAINER_ITEMS:
        raise LimitExceededError("map size", n, limits.MAX_CONTAINER_ITEMS)
    return _sized_header(n, 0x80, 0xDE, 0xDF)


def encode_pieces(value: Any) -> list[Piece]:
    """Return the canonical encoding of ``value`` in pieces: joined, they are ``encode(value)``.

    A byte string of at least :data:`VIEW_BYTES` bytes comes as a read-only view of the
    caller's buffer (which must be C-contiguous), not a copy, so that a large item can
    be hashed piece by piece without its bytes being copied; the caller must not change
    that buffer while it uses the pieces. Raises what :func:`encode` raises.
    """
    pieces: list[Piece] = []
    _add_pieces(_normalise(value, 0, views=True), pieces)
    return pieces


def _view(obj: bytes | bytearray | memoryview) -> memoryview:
    """Return a read-only byte view of ``obj`` (C-contiguous, within the byte-string cap)."""
    view = memoryview(obj)
    if not view.c_contiguous:
        raise EncodingError("a byte string given as a view must be C-contiguous")
    if view.nbytes > limits.MAX_BIN_BYTES:
        raise LimitExceededError("byte string length", view.nbytes, limits.MAX_BIN_BYTES)
    return view.cast("B").toreadonly()


def _add_pieces(normal: Any, out: list[Piece]) -> None:
    """Append the encoding of ``normal`` (:func:`_normalise`'s, with views) to ``out``."""
    if isinstance(normal, memoryview):
        out += [bin_header(normal.nbytes), normal]
    elif isinstance(normal, dict):
        out.append(_map_header(len(normal)))
        for key, item in normal.items():
            out.append(_pack(key))
            _add_pieces(item, out)
    elif isinstance(normal, list):
        out.append(array_header(len(normal)))
        for item in normal:
            _add_pieces(item, out)
    else:
        out.append(_pack(normal))  # already checked: not normalised a second time


# --- Decoding -------------------------------------------------------------------------------
#
# The first byte of a value says what it is (spec §3.2). _CLASS maps it to one of these.
_SMALL: Final = 0  # a whole one-byte value: fixint, negative fixint, nil, false, true
_FIXMAP: Final = 1
_FIXARRAY: Final = 2
_FIXSTR: Final = 3
_FORBIDDEN: Final = 4  # 0xc1, extension types, float32
_OTHER: Final = 5  # any other header: integers, float64, str8-32, bin, array16/32, map16/32

_CLASS = bytearray(256)
for _byte in range(256):
    if _byte <= 0x7F or _byte >= 0xE0 or _byte in (0xC0, 0xC2, 0xC3):
        _CLASS[_byte] = _SMALL
    elif _byte <= 0x8F:
        _CLASS[_byte] = _FIXMAP
    elif _byte <= 0x9F:
        _CLASS[_byte] = _FIXARRAY
    elif _byte <= 0xBF:
        _CLASS[_byte] = _FIXSTR
    elif _byte in (0xC1, 0xC7, 0xC8, 0xC9, 0xCA, 0xD4, 0xD5, 0xD6, 0xD7, 0xD8):
        _CLASS[_byte] = _FORBIDDEN
    else:
        _CLASS[_byte] = _OTHER

#: The value of each one-byte encoding (shared objects: a run of them costs one pointer each).
_SMALL_VALUES: Final[tuple[Value, ...]] = tuple(
    b if b <= 0x7F else b - 0x100 if b >= 0xE0 else {0xC0: None, 0xC2: False, 0xC3: True}.get(b)
    for b in range(256)
)
#: int8 values (only -128..-33 are canonical), shared like the one-byte values.
_INT8_VALUES: Final[tuple[int, ...]] = tuple(b - 0x100 if b >= 0x80 else b for b in range(256))


@functools.cache
def _sixteen_bit() -> tuple[int, ...]:
    """Return the shared integers -2**15..2**16-1, a 16-bit value ``v`` at ``v + 2**15``.

    A uint16 ``u`` is at ``u + 2**15``; an int16 whose 16 bits are ``b`` at
    ``b ^ 0x8000``. A uint16 or int16 takes 3 bytes of input, and a new Python ``int``
    for it 28 bytes plus its slot in the list: 12 times the input. Sharing one object
    per value keeps an array of them to the slot (spec §3.3: memory a small multiple of
    the input). The table is built once per process, on the first 16-bit integer
    decoded: about 3.7 MiB, a constant.
    """
    return tuple(range(-(1 << 15), 1 << 16))


#: Runs of array elements that the decoder takes in one step: one-byte values, uint8
#: (128..255), int8 (-128..-33) and finite float64 (the exponent is not all ones).
_SMALL_RUN = re.compile(rb"[\x00-\x7f\xc0\xc2\xc3\xe0-\xff]++")
_UINT8_RUN = re.compile(rb"(?:\xcc[\x80-\xff])++")
_INT8_RUN = re.compile(rb"(?:\xd0[\x80-\xdf])++")
#: ... and runs of canonical uint16 (256..65535) and int16 (-32768..-129).
_UINT16_RUN = re.compile(rb"(?:\xcd[\x01-\xff][\x00-\xff])++")
_INT16_RUN = re.compile(rb"(?:\xd1(?:[\x80-\xfe][\x00-\xff]|\xff[\x00-\x7f]))++")
_SIXTEEN_ITEM = np.dtype([("tag", "u1"), ("value", ">u2")])
#: Elements of a 16-bit run converted at a time (the transient list of new ints).
_RUN_CHUNK: Final = 4096
_FLOAT_RUN = re.compile(rb"(?:\xcb(?![\x7f\xff][\xf0-\xff])[\x00-\xff]{8})++")
_FLOAT_ITEM = np.dtype([("tag", "u1"), ("value", ">f8")])

_F64 = struct.Struct(">d")

#: Shortest-form floors of spec §3.2: a header of this byte needs a length (or an
#: unsigned value) of at least this much, else a shorter form exists.
_FLOOR = {0xD9: 32, 0xDA: 1 << 8, 0xDB: 1 << 16, 0xC5: 1 << 8, 0xC6: 1 << 16}
_FLOOR.update({0xDC: 16, 0xDD: 1 << 16, 0xDE: 16, 0xDF: 1 << 16})
_FLOOR.update({0xCC: 1 << 7, 0xCD: 1 << 8, 0xCE: 1 << 16, 0xCF: 1 << 32})
#: ... and a signed integer of this byte must be below this (and negative).
_CEILING = {0xD0: -32, 0xD1: -(1 << 7), 0xD2: -(1 << 15), 0xD3: -(1 << 31)}
#: How many bytes after the header byte hold a length, a count or an integer.
_LENGTH_BYTES = {0xC4: 1, 0xC5: 2, 0xC6: 4, 0xD9: 1, 0xDA: 2, 0xDB: 4}
_LENGTH_BYTES.update({0xDC: 2, 0xDD: 4, 0xDE: 2, 0xDF: 4})
_INTEGER_BYTES = {0xCC: 1, 0xCD: 2, 0xCE: 4, 0xCF: 8, 0xD0: 1, 0xD1: 2, 0xD2: 4, 0xD3: 8}


def _truncated() -> EncodingError:
    return EncodingError("truncated input: a value runs past the end")


def _non_shortest(byte: int) -> EncodingError:
    return EncodingError(f"header 0x{byte:02x} is not the shortest form of its value")


def _walk(data: bytes, start: int, n: int, build: bool, sized_limit: int) -> tuple[Value, int]:
    """Check that ``data[start:n]`` is one canonical value; return it and its value count.

    The value is returned when ``build`` (else None), and the count is of every value,
    map keys included.

    One pass and an explicit stack: the work is a constant per value plus a copy of
    each string, and a value's header is checked against the bytes left and the caps
    before anything is made of it. Runs of array elements of one fixed-size kind
    (one-byte values, uint8, int8, float64) are taken in one step.
    """
    view = memoryview(data)
    pos = start
    sized = 0
    values = 1
    # The open container: its object (when building), items left (a map's keys and
    # values count one each), whether it is a map, a map's pending key and last key.
    result: list[Value] = []
    container: Any = result
    left = 1
    is_map = False
    key: str | None = None
    previous: bytes | None = None
    stack: list[tuple[Any, int, bool, str | None, bytes | None]] = []
    max_depth = limits.MAX_NESTING_DEPTH
    while True:
        if left == 0:
            if not stack:
                break
            done = container
            container, left, is_map, key, previous = stack.pop()
            if build:
                if is_map:
                    container[key] = done
                else:
                    container.append(done)
            continue
        if pos >= n:
            raise _truncated()
        byte = data[pos]
        kind = _CLASS[byte]
        if is_map and not left & 1:  # a map key: a text string above the previous key
            if kind == _FIXSTR:
                length, body = byte & 0x1F, pos + 1
            elif 0xD9 <= byte <= 0xDB:
                length, body = _length(data, pos, byte, n)
                if length > limits.MAX_STR_BYTES:
                    raise LimitExceededError("text string length", length, limits.MAX_STR_BYTES)
            else:
                raise EncodingError(f"a map key must be a text string, not type 0x{byte:02x}")
            end = body + length
            if end > n:
                raise _truncated()
            raw = data[body:end]
            if previous is not None and raw <= previous:
                raise EncodingError(
                    "map keys must be unique and sorted by their UTF-8 bytes "
                    f"({previous!r} then {raw!r})"
                )
            sized += 1
            if sized > sized_limit:
                raise _too_many(sized, sized_limit, n - start)
            try:
                key = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise EncodingError(f"map key is not valid UTF-8: {exc.reason}") from None
            previous = raw
            left -= 1
            pos = end
            continue
        value: Any
        if kind == _SMALL:
            if left > 1 and not is_map and pos + 1 < n and _CLASS[data[pos + 1]] == _SMALL:
                run = _SMALL_RUN.match(data, pos, min(n, pos + left))
                assert run is not None
                stop = run.end()
                if build:
                    container.extend(map(_SMALL_VALUES.__getitem__, view[pos:stop]))
                left -= stop - pos
                pos = stop
                continue
            value = _SMALL_VALUES[byte]
            pos += 1
        elif kind == _FIXSTR or 0xD9 <= byte <= 0xDB or 0xC4 <= byte <= 0xC6:
            if kind == _FIXSTR:
                length, body = byte & 0x1F, pos + 1
            else:
                length, body = _length(data, pos, byte, n)
            text = kind == _FIXSTR or byte >= 0xD9
            cap = limits.MAX_STR_BYTES if text else limits.MAX_BIN_BYTES
            if length > cap:
                raise LimitExceededError(f"{'text' if text else 'byte'} string length", length, cap)
            end = body + length
            if end > n:
                raise _truncated()
            sized += 1
            if sized > sized_limit:
                raise _too_many(sized, sized_limit, n - start)
            if text:
                try:
                    value = str(view[body:end], "utf-8")
                except UnicodeDecodeError as exc:
                    raise EncodingError(f"text string is not valid UTF-8: {exc.reason}") from None
            else:
                value = data[body:end] if build else None
            pos = end
        elif kind in (_FIXARRAY, _FIXMAP) or 0xDC <= byte <= 0xDF:
            if kind in (_FIXARRAY, _FIXMAP):
                count, body = byte & 0x0F, pos + 1
            else:
                count, body = _length(data, pos, byte, n)
            mapping = kind == _FIXMAP or byte >= 0xDE
            if count > limits.MAX_CONTAINER_ITEMS:
                what = "map size" if mapping else "array length"
                raise LimitExceededError(what, count, limits.MAX_CONTAINER_ITEMS)
            if count and len(stack) >= max_depth:  # its items would be deeper than the cap
                raise LimitExceededError("nesting depth", len(stack) + 1, max_depth)
            items = 2 * count if mapping else count
            values += items
            if items > n - body:  # every item takes a byte at least
                raise _truncated()
            sized += 1
            if sized > sized_limit:
                raise _too_many(sized, sized_limit, n - start)
            pos = body
            value = ({} if mapping else []) if build else None
            if count:
                stack.append((container, left - 1, is_map, key, previous))
                container, left, is_map, key, previous = value, items, mapping, None, None
                continue
        elif kind == _FORBIDDEN:
            if byte == 0xCA:
                raise EncodingError("float32 is not canonical: floats are float64")
            if byte == 0xC1:
                raise EncodingError("the reserved byte 0xc1 never appears")
            raise EncodingError(f"extension type 0x{byte:02x} is not allowed")
        elif byte == 0xCB:
            if left > 1 and not is_map and pos + 9 < n and data[pos + 9] == 0xCB:
                run = _FLOAT_RUN.match(data, pos, min(n, pos + 9 * left))
                if run is not None and run.end() - pos > 9:
                    stop = run.end()
                    count = (stop - pos) // 9
                    if build:
                        floats = np.frombuffer(data, _FLOAT_ITEM, count, pos)["value"]
                        container.extend(floats.tolist())
                    left -= count
                    pos = stop
                    continue
            if pos + 9 > n:
                raise _truncated()
            (value,) = _F64.unpack_from(data, pos + 1)
            if not math.isfinite(value):
                raise EncodingError(f"float {value!r} is not finite")
            pos += 9
        else:  # an integer of 2 to 9 bytes
            run = None
            if byte in (0xCC, 0xD0) and left > 1 and not is_map and pos + 2 < n:
                pattern = _UINT8_RUN if byte == 0xCC else _INT8_RUN
                if data[pos + 2] == byte:  # a run of two at least
                    run = pattern.match(data, pos, min(n, pos + 2 * left))
            elif byte in (0xCD, 0xD1) and left > 1 and not is_map and pos + 3 < n:
                pattern = _UINT16_RUN if byte == 0xCD else _INT16_RUN
                if data[pos + 3] == byte:
                    run = pattern.match(data, pos, min(n, pos + 3 * left))
            width = 2 if byte in (0xCC, 0xD0) else 3
            if run is not None and run.end() - pos > width:
                stop = run.end()
                count = (stop - pos) // width
                if build and width == 3:
                    _extend_sixteen(container, data, pos, count, byte == 0xD1)
                elif build:
                    payload = view[pos + 1 : stop : 2]
                    if byte == 0xCC:
                        container.extend(payload.tolist())
                    else:
                        container.extend(map(_INT8_VALUES.__getitem__, payload))
                left -= count
                pos = stop
                continue
            value, pos = _integer(data, pos, byte, n)
        if build:
            if is_map:
                container[key] = value
            else:
                container.append(value)
        left -= 1
    if pos != n:
        raise EncodingError(f"{n - pos} trailing bytes after the encoded value")
    return (result[0] if build else None), values


def _extend_sixteen(
    container: list[Value], data: bytes, pos: int, count: int, signed: bool
) -> None:
    """Append the ``count`` uint16 (or int16) elements at ``pos`` as shared ints."""
    table = _sixteen_bit().__getitem__
    bits = np.frombuffer(data, _SIXTEEN_ITEM, count, pos)["value"]
    for first in range(0, count, _RUN_CHUNK):
        chunk = bits[first : first + _RUN_CHUNK].astype(np.int32)
        indices = np.bitwise_xor(chunk, 0x8000) if signed else chunk + 0x8000
        container.extend(map(table, indices.tolist()))


def _length(data: bytes, pos: int, byte: int, end: int) -> tuple[int, int]:
    """Return the length or count of a str, bin, array16/32 or map16/32 header, and its body.

    Refuses a header that the input (which ends at ``end``) cannot hold, or that is not
    the shortest form.
    """
    body = pos + 1 + _LENGTH_BYTES[byte]
    if body > end:
        raise _truncated()
    length = int.from_bytes(data[pos + 1 : body], "big")
    if length < _FLOOR.get(byte, 0):
        raise _non_shortest(byte)
    return length, body


def _integer(data: bytes, pos: int, byte: int, limit: int) -> tuple[int, int]:
    """Return the uint8..64 or int8..64 at ``pos`` and the position after it."""
    end = pos + 1 + _INTEGER_BYTES[byte]
    if end > limit:
        raise _truncated()
    if byte == 0xD0:
        value = _INT8_VALUES[data[pos + 1]]
    elif byte == 0xCD:  # shared objects: a new int would cost 12 times the 3 bytes
        value = _sixteen_bit()[((data[pos + 1] << 8) | data[pos + 2]) + 0x8000]
    elif byte == 0xD1:
        value = _sixteen_bit()[((data[pos + 1] << 8) | data[pos + 2]) ^ 0x8000]
    else:
        value = int.from_bytes(data[pos + 1 : end], "big", signed=byte >= 0xD0)
    if byte <= 0xCF:
        if value < _FLOOR[byte]:
            raise _non_shortest(byte)
    elif value >= _CEILING[byte]:
        raise EncodingError(
            f"header 0x{byte:02x} holds {value}: a non-negative integer never takes a signed "
            "form, and a negative one takes the shortest"
        )
    return value, end


def _too_many(count: int, limit: int, size: int) -> LimitExceededError:
    return LimitExceededError(
        f"sized values (arrays, maps, text and byte strings) in {size} bytes", count, limit
    )


def _span(data: object, start: int, end: int | None, max_bytes: int) -> tuple[bytes, int]:
    """Check the input's type and length; return the bytes to read and where they end."""
    if isinstance(data, bytearray | memoryview):
        data = bytes(data)
    if not isinstance(data, bytes):
        raise EncodingError(f"expected bytes, got {type(data).__name__}")
    end = len(data) if end is None else end
    if not 0 <= start <= end <= len(data):
        raise EncodingError(f"no bytes {start}..{end} in {len(data)}")
    if end - start > max_bytes:
        raise LimitExceededError("encoded message size", end - start, max_bytes)
    if end == start:
        raise EncodingError("empty input is not an encoding of any value")
    return data, end


def decode(
    data: bytes,
    *,
    max_bytes: int = limits.MAX_ENCODED_BYTES,
    limit_sized: bool = True,
    start: int = 0,
    end: int | None = None,
) -> Value:
    """Decode a canonical encoding, rejecting anything that is not canonical.

    Raises :class:`LimitExceededError` when ``data`` is longer than ``max_bytes``, a
    string, array or map inside it exceeds its cap, values nest too deeply, or it holds
    more sized values than :func:`twinaudit.protocol.limits.max_sized_values` allows for its
    length; and :class:`EncodingError` for any malformed, truncated, trailing,
    non-shortest, unsorted, duplicated or forbidden content.

    ``start`` and ``end`` decode the encoding at ``data[start:end]`` without copying
    it. ``limit_sized=False`` lifts the sized-value cap, and only it: for the owner's own
    files, which are not protocol messages (spec §3.3 caps what a party receives), such
    as a vault manifest holding a small map per image size.
    """
    data, end = _span(data, start, end, max_bytes)
    limit = limits.max_sized_values(end - start) if limit_sized else end - start
    return _walk(data, start, end, True, limit)[0]


def check(
    data: bytes,
    *,
    max_bytes: int = limits.MAX_ENCODED_BYTES,
    start: int = 0,
    end: int | None = None,
) -> int:
    """Raise as :func:`decode` would for ``data``, building nothing; return its value count.

    The count is of every value, map keys included (an empty map is one value, ``{"a":
    1}`` three). Memory does not grow with the input beyond a transient copy of one text
    string (to check its UTF-8) and a stack as deep as the nesting, so a decoder of a
    message with a fixed schema can compare the count with what the schema holds before
    it builds anything.
    """
    data, end = _span(data, start, end, max_bytes)
    return _walk(data, start, end, False, limits.max_sized_values(end - start))[1]


def encode_hex(value: Any) -> str:
    """Return the canonical encoding of ``value`` as lowercase hex (for vectors and logs)."""
    return encode(value).hex()
