"""Canonical item encodings: the bytes of one version of a pair (spec §6.3).

A version is committed as the canonical encoding of an item map. Images carry their
uint8 pixels (row-major, channel-last) and optionally the ground-truth label, which
is committed so that nobody can choose it after seeing the model; texts carry their
UTF-8 text; captioned images carry an image and its caption.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from .encoding import Value, decode, encode
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
        h, w, c = self.pixels.shape
        value: dict[str, Value] = {
            "kind": "image",
            "height": int(h),
            "width": int(w),
            "channels": int(c),
            "pixels": np.ascontiguousarray(self.pixels).tobytes(),
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
        return {"kind": "captioned-image", "image": self.image.to_value(), "caption": self.caption}

    def shape_key(self) -> tuple[object, ...]:
        """Return what both versions of a pair must share (image shape, label, caption)."""
        return ("captioned-image", self.image.shape_key(), self.caption)


Item = ImageItem | TextItem | CaptionedImageItem


def encode_item(item: Item) -> bytes:
    """Return the canonical bytes of an item (the input of ``version_digest``)."""
    return encode(item.to_value())


def _field(value: dict[str, Value], name: str, kind: type) -> object:
    if name not in value or not isinstance(value[name], kind) or isinstance(value[name], bool):
        raise InputError(f"item field {name!r} missing or not {kind.__name__}")
    return value[name]


def _image_from_value(value: Value) -> ImageItem:
    if not isinstance(value, dict) or value.get("kind") != "image":
        raise InputError("not an image item")
    allowed = {"kind", "height", "width", "channels", "pixels", "label"}
    if set(value) - allowed:
        raise InputError(f"unknown image item fields {sorted(set(value) - allowed)}")
    h, w, c = (_field(value, k, int) for k in ("height", "width", "channels"))
    pixels = _field(value, "pixels", bytes)
    assert isinstance(h, int)
    assert isinstance(w, int)
    assert isinstance(c, int)
    assert isinstance(pixels, bytes)
    if not (1 <= h <= MAX_IMAGE_SIDE and 1 <= w <= MAX_IMAGE_SIDE and c in (1, 3)):
        raise InputError(f"image shape ({h}, {w}, {c}) out of range")
    if len(pixels) != h * w * c:
        raise InputError(f"image has {len(pixels)} pixel bytes, expected {h * w * c}")
    label = value.get("label")
    if label is not None and not isinstance(label, int):
        raise InputError("image label must be an integer")
    array = np.frombuffer(pixels, dtype=np.uint8).reshape(h, w, c)
    return ImageItem(array, label)


def decode_item(data: bytes, expected_kind: str | None = None) -> Item:
    """Decode canonical item bytes strictly; optionally require a kind."""
    value = decode(data)
    if not isinstance(value, dict) or not isinstance(value.get("kind"), str):
        raise InputError("an item must be a map with a text 'kind'")
    kind = value["kind"]
    if expected_kind is not None and kind != expected_kind:
        raise InputError(f"item kind {kind!r}, expected {expected_kind!r}")
    item: Item
    if kind == "image":
        item = _image_from_value(value)
    elif kind == "text":
        if set(value) != {"kind", "text"}:
            raise InputError("a text item has exactly the fields kind and text")
        text = _field(value, "text", str)
        assert isinstance(text, str)
        item = TextItem(text)
    elif kind == "captioned-image":
        if set(value) != {"kind", "image", "caption"}:
            raise InputError("a captioned-image item has exactly kind, image, caption")
        caption = _field(value, "caption", str)
        assert isinstance(caption, str)
        item = CaptionedImageItem(_image_from_value(value["image"]), caption)
    else:
        raise InputError(f"unknown item kind {kind!r}")
    return item


def decode_pair(version0: bytes, version1: bytes, expected_kind: str) -> tuple[Item, Item]:
    """Decode both versions of a pair and check they differ only in marked content."""
    first, second = decode_item(version0, expected_kind), decode_item(version1, expected_kind)
    if first.shape_key() != second.shape_key():
        raise InputError("the two versions differ in more than their marked content")
    return first, second
