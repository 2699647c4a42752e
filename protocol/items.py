"""Canonical item encodings: the bytes of one version of a pair (spec §6.3).

A version is committed as the canonical encoding of an item map. Images carry their
uint8 pixels (row-major, channel-last) and optionally the ground-truth label, which
is committed so that nobody can choose it after seeing the model; texts carry their
UTF-8 text; captioned images carry an image and its caption.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from .encoding import Piece, Value, check, encode, encode_pieces
from .errors import InputError

#: Largest image side accepted, in pixels.
MAX_IMAGE_SIDE = 4096
#: Largest text or caption accepted, in UTF-8 bytes.
MAX_TEXT_BYTES = 65536
#: Labels are class indices below this bound.
MAX_LABEL = 1 << 16
#: The item kinds of spec §6.3.
ITEM_KINDS = frozenset({"image", "text", "captioned-image"})


@dataclass(frozen=True)
class ImageItem:
    """An image version: uint8 pixels of shape (H, W, C), C in {1, 3}, optional label."""

    pixels: npt.NDArray[np.uint8]
    label: int | None = None

    def __post_init__(self) -> None:
        """Validate shape, dtype and label."""
        px = self.pixels
        if not isinstance(px, np.ndarray) or px.dtype != np.uint8 or px.ndim != 3:
            raise InputError("image pixels must be a uint8 array of shape (H, W, C)")
        h, w, c = px.shape
        if not (1 <= h <= MAX_IMAGE_SIDE and 1 <= w <= MAX_IMAGE_SIDE and c in (1, 3)):
            raise InputError(f"image shape {px.shape} outside 1..{MAX_IMAGE_SIDE} x C in {{1, 3}}")
        if self.label is not None and not (
            isinstance(self.label, int)
            and not isinstance(self.label, bool)
            and 0 <= self.label < MAX_LABEL
        ):
            raise InputError(f"label must be an integer in [0, {MAX_LABEL}), got {self.label!r}")

    def to_value(self) -> dict[str, Value]:
        """Return the item map of spec §6.3."""
        value = self.value_without_pixels()
        value["pixels"] = np.ascontiguousarray(self.pixels).tobytes()
        return value

    def value_without_pixels(self) -> dict[str, Value]:
        """Return the item map of spec §6.3 less its ``pixels`` field."""
        h, w, c = self.pixels.shape
        value: dict[str, Value] = {
            "kind": "image",
            "height": int(h),
            "width": int(w),
            "channels": int(c),
        }
        if self.label is not None:
            value["label"] = self.label
        return value

    def shape_key(self) -> tuple[object, ...]:
        """Return what both versions of a pair must share (shape and label)."""
        return ("image", self.pixels.shape, self.label)


@dataclass(frozen=True)
class TextItem:
    """A text version."""

    text: str

    def __post_init__(self) -> None:
        """Validate the length."""
        if not isinstance(self.text, str):
            raise InputError("text must be a string")
        size = len(self.text.encode("utf-8"))
        if not 1 <= size <= MAX_TEXT_BYTES:
            raise InputError(f"text must have 1..{MAX_TEXT_BYTES} UTF-8 bytes, has {size}")

    def to_value(self) -> dict[str, Value]:
        """Return the item map of spec §6.3."""
        return {"kind": "text", "text": self.text}

    def shape_key(self) -> tuple[object, ...]:
        """Return what both versions of a pair must share."""
        return ("text",)


@dataclass(frozen=True)
class CaptionedImageItem:
    """A captioned-image version: a marked image and its (unmarked) caption."""

    image: ImageItem
    caption: str

    def __post_init__(self) -> None:
        """Validate the caption."""
        TextItem(self.caption)

    def to_value(self) -> dict[str, Value]:
        """Return the item map of spec §6.3."""
        return self.value_with_image(self.image.to_value())

    def value_with_image(self, image: Value) -> dict[str, Value]:
        """Return the item map of spec §6.3 with ``image`` as its image's map."""
        return {"kind": "captioned-image", "image": image, "caption": self.caption}

    def shape_key(self) -> tuple[object, ...]:
        """Return what both versions of a pair must share (image shape, label, caption)."""
        return ("captioned-image", self.image.shape_key(), self.caption)


Item = ImageItem | TextItem | CaptionedImageItem


def encode_item(item: Item) -> bytes:
    """Return the canonical bytes of an item (the input of ``version_digest``)."""
    return encode(item.to_value())


def encode_item_pieces(item: Item) -> list[Piece]:
    """Return :func:`encode_item`'s bytes in pieces, an image's pixels a view of its array.

    Joined, the pieces are ``encode_item(item)``; the pixels are not copied (a C-contiguous
    array is viewed where it lies), so the item can be hashed piece by piece
    (:func:`~twinaudit.protocol.commitment.version_digest_of_pieces`). The item's array
    must not change while the pieces are used.
    """
    return encode_pieces(_viewed_value(item))


def _viewed_value(item: Item) -> dict[str, Any]:
    """Return ``item.to_value()`` with any pixels a view of the item's array, not bytes."""
    if isinstance(item, ImageItem):
        value: dict[str, Any] = dict(item.value_without_pixels())
        value["pixels"] = np.ascontiguousarray(item.pixels).data
        return value
    if isinstance(item, CaptionedImageItem):
        return item.value_with_image(_viewed_value(item.image))
    return dict(item.to_value())


# --- Decoding (spec §6.3) ----------------------------------------------------------------
#
# An item is decoded in two steps, and neither builds a large object before the sizes
# agree: check() walks the bytes once and refuses anything non-canonical or over a cap
# (spec §3.3), building nothing; then the item's map is read field by field from the
# checked bytes, every field's type and every size compared with the schema, and only
# then are the pixels wrapped (a view of the input, not a copy) and the text decoded.

_IMAGE_FIELDS = frozenset({"kind", "height", "width", "channels", "pixels", "label"})
_FIELDS = {
    "image": _IMAGE_FIELDS,
    "text": frozenset({"kind", "text"}),
    "captioned-image": frozenset({"kind", "image", "caption"}),
}
#: What each field's value must be: a text string, a byte string, an integer or a map.
#: (An optional field is left out, never nil: spec §6.3.)
_TYPES = {"kind": "str", "text": "str", "caption": "str", "pixels": "bin", "image": "map"}
_TYPES.update({"height": "int", "width": "int", "channels": "int", "label": "int"})
_INT_SIZES = {0xCC: 1, 0xCD: 2, 0xCE: 4, 0xCF: 8, 0xD0: 1, 0xD1: 2, 0xD2: 4, 0xD3: 8}
_LENGTH_SIZES = {0xD9: 1, 0xDA: 2, 0xDB: 4, 0xC4: 1, 0xC5: 2, 0xC6: 4}


def _read_map(data: bytes, pos: int, what: str) -> tuple[dict[str, tuple[str, int, int]], int]:
    """Read the item map at ``pos`` of checked canonical bytes; return its fields and end.

    Every key must be a field of some item kind and every value of its field's type;
    anything else is :class:`InputError` before any value is built. A field is
    ``(type, a, b)``: ``("int", value, 0)``, ``("str"|"bin", start, length)`` or
    ``("map", position, end)``.
    """
    byte = data[pos]
    if not 0x80 <= byte <= 0x8F:  # a canonical map of at most 15 entries: every item map
        raise InputError(f"{what} must be a map of at most {len(_IMAGE_FIELDS)} fields")
    pos += 1
    fields: dict[str, tuple[str, int, int]] = {}
    for _ in range(byte & 0x0F):
        start, length = _string(data, pos)
        if start < 0:  # pragma: no cover - check() admits only text keys
            raise InputError(f"{what} has a key that is not text")
        name = data[start : start + length].decode("utf-8")
        if name not in _TYPES:
            raise InputError(f"unknown item field {name[:64]!r} in {what}")
        pos = start + length
        expected = _TYPES[name]
        byte = data[pos]
        if expected == "map" and 0x80 <= byte <= 0x8F:
            _, end = _read_map(data, pos, f"the {name!r} of {what}")
            fields[name] = ("map", pos, end)
            pos = end
            continue
        if expected == "int" and (byte <= 0x7F or byte >= 0xE0 or byte in _INT_SIZES):
            value, pos = _int(data, pos)
            fields[name] = ("int", value, 0)
            continue
        if expected in ("str", "bin"):
            start, length = _string(data, pos) if expected == "str" else _bytes(data, pos)
            if start >= 0:
                fields[name] = (expected, start, length)
                pos = start + length
                continue
        raise InputError(f"item field {name!r} of {what} is not {_expected(expected)}")
    return fields, pos


def _expected(kind: str) -> str:
    """Say what a field of type ``kind`` holds, for error messages."""
    return {"str": "text", "bin": "a byte string", "int": "an integer", "map": "a map"}[kind]


def _string(data: bytes, pos: int) -> tuple[int, int]:
    """Return (start, length) of the canonical text string at ``pos``, or (-1, 0)."""
    byte = data[pos]
    if 0xA0 <= byte <= 0xBF:
        return pos + 1, byte & 0x1F
    if byte in (0xD9, 0xDA, 0xDB):
        return _sized(data, pos, byte)
    return -1, 0


def _bytes(data: bytes, pos: int) -> tuple[int, int]:
    """Return (start, length) of the canonical byte string at ``pos``, or (-1, 0)."""
    byte = data[pos]
    return _sized(data, pos, byte) if byte in (0xC4, 0xC5, 0xC6) else (-1, 0)


def _sized(data: bytes, pos: int, byte: int) -> tuple[int, int]:
    size = _LENGTH_SIZES[byte]
    return pos + 1 + size, int.from_bytes(data[pos + 1 : pos + 1 + size], "big")


def _int(data: bytes, pos: int) -> tuple[int, int]:
    """Return the canonical integer at ``pos`` and the position after it."""
    byte = data[pos]
    if byte <= 0x7F:
        return byte, pos + 1
    if byte >= 0xE0:
        return byte - 0x100, pos + 1
    size = _INT_SIZES[byte]
    raw = data[pos + 1 : pos + 1 + size]
    return int.from_bytes(raw, "big", signed=byte >= 0xD0), pos + 1 + size


def _require(fields: dict[str, tuple[str, int, int]], name: str, kind: str) -> tuple[int, int]:
    if name not in fields or fields[name][0] != kind:
        raise InputError(f"item field {name!r} missing or not {_expected(kind)}")
    _, first, second = fields[name]
    return first, second


def _image(data: bytes, fields: dict[str, tuple[str, int, int]]) -> ImageItem:
    """Build the image whose checked fields these are, sizes compared first."""
    if set(fields) - _IMAGE_FIELDS:
        raise InputError(f"unknown image item fields {sorted(set(fields) - _IMAGE_FIELDS)}")
    h, w, c = (_require(fields, name, "int")[0] for name in ("height", "width", "channels"))
    start, length = _require(fields, "pixels", "bin")
    if not (1 <= h <= MAX_IMAGE_SIDE and 1 <= w <= MAX_IMAGE_SIDE and c in (1, 3)):
        raise InputError(f"image shape ({h}, {w}, {c}) out of range")
    if length != h * w * c:
        raise InputError(f"image has {length} pixel bytes, expected {h * w * c}")
    label = _require(fields, "label", "int")[0] if "label" in fields else None
    pixels = np.frombuffer(data, dtype=np.uint8, count=length, offset=start)
    return ImageItem(pixels.reshape(h, w, c), label)


def _text(data: bytes, fields: dict[str, tuple[str, int, int]], name: str) -> str:
    start, length = _require(fields, name, "str")
    if not 1 <= length <= MAX_TEXT_BYTES:
        raise InputError(f"text must have 1..{MAX_TEXT_BYTES} UTF-8 bytes, has {length}")
    return data[start : start + length].decode("utf-8")


def decode_item(data: bytes, expected_kind: str | None = None) -> Item:
    """Decode canonical item bytes strictly; optionally require a kind.

    Raises :class:`EncodingError` or :class:`LimitExceededError` for bytes that are not
    a canonical encoding (spec §3.3), and :class:`InputError` for a canonical value that
    is not an item of §6.3 (or not of ``expected_kind``). The work is linear in
    ``data`` and the memory a constant beyond it: the pixels are a read-only view of
    ``data``.
    """
    check(data)
    data = bytes(data)
    fields, _ = _read_map(data, 0, "an item")
    if "kind" not in fields or fields["kind"][0] != "str":
        raise InputError("an item must be a map with a text 'kind'")
    start, length = fields["kind"][1:]
    kind = data[start : start + length].decode("utf-8")
    if expected_kind is not None and kind != expected_kind:
        raise InputError(f"item kind {kind[:64]!r}, expected {expected_kind!r}")
    if kind not in _FIELDS:
        raise InputError(f"unknown item kind {kind[:64]!r}")
    if kind == "image":
        return _image(data, fields)
    if set(fields) != _FIELDS[kind]:
        names = ", ".join(sorted(_FIELDS[kind]))
        raise InputError(f"a {kind} item has exactly the fields {names}")
    if kind == "text":
        return TextItem(_text(data, fields, "text"))
    position, _ = _require(fields, "image", "map")
    image_fields, _ = _read_map(data, position, "the image of a captioned image")
    image_kind = image_fields.get("kind")
    if image_kind is None or image_kind[0] != "str":
        raise InputError("not an image item")
    if data[image_kind[1] : image_kind[1] + image_kind[2]] != b"image":
        raise InputError("not an image item")
    return CaptionedImageItem(_image(data, image_fields), _text(data, fields, "caption"))


def decode_pair(version0: bytes, version1: bytes, expected_kind: str) -> tuple[Item, Item]:
    """Decode both versions of a pair and check they differ only in marked content."""
    first, second = decode_item(version0, expected_kind), decode_item(version1, expected_kind)
    if first.shape_key() != second.shape_key():
        raise InputError("the two versions differ in more than their marked content")
    return first, second
