"""Canonical item encodings (spec §6.3)."""

import time
import tracemalloc

import numpy as np
import pytest

from twinaudit.protocol.commitment import version_digest, version_digest_of_pieces
from twinaudit.protocol.encoding import decode, encode
from twinaudit.protocol.errors import EncodingError, InputError, LimitExceededError, TwinauditError
from twinaudit.protocol.items import (
    CaptionedImageItem,
    ImageItem,
    TextItem,
    decode_item,
    decode_pair,
    encode_item,
    encode_item_pieces,
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


# --- Bounded work per byte received (issue #22 D2) -----------------------------------------


def _peak(fn, data):
    tracemalloc.start()
    try:
        with pytest.raises(TwinauditError) as refused:
            fn(data)
        return tracemalloc.get_traced_memory()[1], refused.value
    finally:
        tracemalloc.stop()


def test_d2_openings_that_are_not_items_cost_nothing_to_refuse():
    """The issue's openings: 3.8 MiB that decode to millions of objects. Now refused by
    checks on the bytes (canonical form, caps, then the item's fields) before anything
    large is built."""
    count = 4_000_000
    empty_maps = b"\xdd" + count.to_bytes(4, "big") + b"\x80" * count
    fields = b"\xa8channels\x01\xa6height\x01\xa4kind\xa5image\xa6pixels"
    nil_pixels = b"\x85" + fields + b"\xdd" + count.to_bytes(4, "big") + b"\xc0" * count
    nil_pixels += b"\xa5width\x01"
    for data, error in ((empty_maps, LimitExceededError), (nil_pixels, InputError)):
        start = time.process_time()  # the work done: a loaded machine stretches wall time
        with pytest.raises(error):
            decode_item(data)
        assert time.process_time() - start < 1.0
        peak, refused = _peak(decode_item, data)
        assert type(refused) is error and peak < 64 * 1024
    short = encode(
        {"kind": "image", "height": 4096, "width": 4096, "channels": 3, "pixels": bytes(2**20)}
    )
    # The first 16-bit integer a process decodes (4096 here) builds the shared table of
    # them, 3.7 MiB once per process (spec §3.3); whether an earlier test built it depended
    # on the order, so it is built first and the peak is the refusal's alone.
    with pytest.raises(InputError):
        decode_item(short)
    peak, refused = _peak(decode_item, short)
    assert "pixel bytes" in str(refused) and peak < 64 * 1024


def test_pixels_are_a_view_of_the_input():
    data = encode_item(_img(shape=(64, 64, 3)))
    tracemalloc.start()
    item = decode_item(data)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 16 * 1024  # 12 KiB of pixels: not copied
    assert isinstance(item, ImageItem) and not item.pixels.flags.writeable
    assert encode_item(item) == data


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ({"kind": "image", "height": 1, "width": 1, "channels": 1, "pixels": [0]}, "pixels"),
        ({"kind": "image", "height": 1.0, "width": 1, "channels": 1, "pixels": b"\x00"}, "height"),
        ({"kind": "image", "height": 1, "width": 1, "channels": 1, "pixels": "x"}, "pixels"),
        ({"kind": "text", "text": b"bytes"}, "text"),
        ({"kind": "captioned-image", "image": [], "caption": "c"}, "image"),
        (
            {"kind": "captioned-image", "image": {"kind": "text", "text": "t"}, "caption": "c"},
            "image",
        ),
        ([{"kind": "text", "text": "a"}], "map"),
        ({"kind": 1}, "kind"),
        # Spec §6.3: the label is an integer or left out, never nil (it once decoded as
        # no label, so two encodings gave one item).
        (
            {
                "kind": "image",
                "height": 1,
                "width": 1,
                "channels": 1,
                "pixels": b"\x00",
                "label": None,
            },
            "label",
        ),
    ],
)
def test_fields_of_the_wrong_type_are_invalid_input(value, expected):
    with pytest.raises(InputError, match=expected) as refused:
        decode_item(encode(value))
    assert type(refused.value) is InputError


@pytest.mark.parametrize(
    ("shape", "label", "caption"),
    [
        ((4, 5, 3), 2, None),  # small: no view
        ((200, 300, 3), None, None),  # large colour, no label
        ((256, 256, 1), 7, None),  # large grey
        ((160, 150, 3), 1, "a red coat"),  # captioned
    ],
)
def test_item_pieces_join_to_the_item_and_view_large_pixels(shape, label, caption):
    pixels = np.random.default_rng(sum(shape)).integers(0, 256, size=shape, dtype=np.uint8)
    image = ImageItem(pixels, label)
    item = image if caption is None else CaptionedImageItem(image, caption)
    pieces = encode_item_pieces(item)
    assert b"".join(pieces) == encode_item(item)
    assert version_digest_of_pieces(pieces) == version_digest(encode_item(item))
    viewed = [p for p in pieces if isinstance(p, memoryview)]
    assert len(viewed) == (1 if pixels.nbytes >= 1 << 16 else 0)
    if viewed:  # the pixels where they lie, not a copy
        assert np.shares_memory(np.frombuffer(viewed[0], dtype=np.uint8), pixels)
    # a non-contiguous array (a crop) is made contiguous first, its bytes the same
    crop = ImageItem(np.ascontiguousarray(np.zeros((300, 300, 3), np.uint8))[10:290, 5:295])
    assert b"".join(encode_item_pieces(crop)) == encode_item(crop)
