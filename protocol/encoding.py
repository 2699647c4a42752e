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
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, TypeAlias

import msgpack

from . import limits
from .errors import EncodingError, LimitExceededError

#: A value that has a canonical encoding.
Value: TypeAlias = bool | int | float | str | bytes | list["Value"] | dict[str, "Value"] | None

_INT_MIN = -(1 << 63)
_INT_MAX = (1 << 64) - 1


def _normalise(obj: Any, depth: int) -> Any:
    """Check ``obj`` against the canonical data model and return it with sorted maps."""
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
            items.append((key.encode("utf-8"), key, _normalise(value, depth + 1)))
        items.sort(key=lambda item: item[0])
        return {key: value for _, key, value in items}
    if isinstance(obj, Sequence):
        if len(obj) > limits.MAX_CONTAINER_ITEMS:
            raise LimitExceededError("array length", len(obj), limits.MAX_CONTAINER_ITEMS)
        return [_normalise(item, depth + 1) for item in obj]
    raise EncodingError(f"type {type(obj).__name__} has no canonical encoding")


def encode(value: Any) -> bytes:
    """Return the canonical encoding of ``value``.

    Tuples encode as arrays and ``bytearray``/``memoryview`` as byte strings; map
    keys are sorted. Raises :class:`EncodingError` for values outside the data model.
    """
    normal = _normalise(value, 0)
    try:
        return bytes(msgpack.packb(normal, use_bin_type=True, use_single_float=False))
    except (OverflowError, ValueError, TypeError) as exc:  # pragma: no cover - guarded above
        raise EncodingError(f"cannot encode: {exc}") from None


def _refuse_ext(code: int, data: bytes) -> Any:
    raise EncodingError(f"extension type {code} is not allowed in canonical encoding")


def decode(data: bytes, *, max_bytes: int = limits.MAX_ENCODED_BYTES) -> Value:
    """Decode a canonical encoding, rejecting anything that is not canonical.

    Raises :class:`LimitExceededError` when ``data`` is longer than ``max_bytes`` or a
    string, array or map inside it exceeds its cap, and :class:`EncodingError` for any
    malformed, trailing, non-shortest, unsorted, duplicated or forbidden content.
    """
    if not isinstance(data, bytes | bytearray | memoryview):
        raise EncodingError(f"expected bytes, got {type(data).__name__}")
    data = bytes(data)
    if len(data) > max_bytes:
        raise LimitExceededError("encoded message size", len(data), max_bytes)
    if not data:
        raise EncodingError("empty input is not an encoding of any value")
    try:
        value = msgpack.unpackb(
            data,
            raw=False,
            use_list=True,
            strict_map_key=False,
            ext_hook=_refuse_ext,
            max_str_len=limits.MAX_STR_BYTES,
            max_bin_len=limits.MAX_BIN_BYTES,
            max_array_len=limits.MAX_CONTAINER_ITEMS,
            max_map_len=limits.MAX_CONTAINER_ITEMS,
            max_ext_len=0,
        )
    except EncodingError:
        raise
    except msgpack.ExtraData:
        raise EncodingError("trailing bytes after the encoded value") from None
    except (ValueError, TypeError, UnicodeDecodeError, msgpack.UnpackException) as exc:
        raise EncodingError(f"malformed MessagePack: {exc}") from None
    except RecursionError:
        raise LimitExceededError(
            "nesting depth", limits.MAX_NESTING_DEPTH + 1, limits.MAX_NESTING_DEPTH
        ) from None
    if encode(value) != data:
        raise EncodingError(
            "input decodes but is not the canonical encoding of its value "
            "(non-shortest header or integer, float32, unsorted or duplicate map keys)"
        )
    return value  # type: ignore[no-any-return]


def encode_hex(value: Any) -> str:
    """Return the canonical encoding of ``value`` as lowercase hex (for vectors and logs)."""
    return encode(value).hex()
