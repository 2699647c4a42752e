"""Canonical item encodings (spec §6.3)."""

import numpy as np
import pytest

from protocol.encoding import decode, encode
from protocol.errors import EncodingError, InputError
from protocol.items import (
    CaptionedImageItem,
    ImageItem,
    TextItem,
    decode_item,
    decode_pair,
    encode_item,
)


def _img(seed=0, shape=(4, 5, 3), label=2):
    rng = np.random.default_rng(seed)
    return ImageItem(rng.integers(0, 256, size=shape, dtype=np.uint8), label)


@pytest.mark.parametrize(
    "item",
    [
        _img(),
        _img(shape=(28, 28, 1), label=None),
        TextItem("a review ✓"),
        CaptionedImageItem(_img(), "a red shirt"),
    ],
)
def test_round_trip(item):
    data = encode_item(item)
    back = decode_item(data)
    assert encode_item(back) == data
    assert decode(data)["kind"] == item.to_value()["kind"]


def test_image_bytes_are_row_major_channel_last():
    px = np.arange(2 * 3 * 3, dtype=np.uint8).reshape(2, 3, 3)
    value = decode(encode_item(ImageItem(px)))
    assert value["pixels"] == bytes(range(18)) and (
        value["height"],
        value["width"],
        value["channels"],
    ) == (2, 3, 3)


@pytest.mark.parametrize(
    "value",
    [
        {"kind": "image", "height": 2, "width": 2, "channels": 1, "pixels": b"\x00" * 3},
        {"kind": "image", "height": 2, "width": 2, "channels": 2, "pixels": b"\x00" * 8},
        {"kind": "image", "height": 0, "width": 2, "channels": 1, "pixels": b""},
        {"kind": "image", "height": 1, "width": 1, "channels": 1, "pixels": b"\x00", "extra": 1},
        {"kind": "text", "text": ""},
        {"kind": "text", "text": "x", "label": 3},
        {"kind": "video"},
        {"text": "no kind"},
    ],
)
def test_malformed_items_rejected(value):
    with pytest.raises(InputError):
        decode_item(encode(value))


def test_non_canonical_item_bytes_rejected():
    with pytest.raises(EncodingError):
        decode_item(bytes.fromhex("81a46b696e64a474657874") + b"\x00")


def test_pairs_must_share_everything_but_the_mark():
    a = _img(0)
    b = ImageItem(np.clip(a.pixels.astype(int) + 3, 0, 255).astype(np.uint8), a.label)
    decode_pair(encode_item(a), encode_item(b), "image")
    for other in [ImageItem(b.pixels, 7), _img(1, shape=(5, 4, 3)), TextItem("x")]:
        with pytest.raises(InputError):
            decode_pair(encode_item(a), encode_item(other), "image")
    c1, c2 = CaptionedImageItem(a, "cap"), CaptionedImageItem(b, "other cap")
    with pytest.raises(InputError):
        decode_pair(encode_item(c1), encode_item(c2), "captioned-image")
