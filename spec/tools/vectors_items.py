"""The ``item-pair`` cases of hashing.json: a pair's versions decoded as items (spec §6.3).

Each case gives the record's item kind and both versions' bytes; an implementation
decodes each version as an item of that kind and checks that the two differ in
nothing but their marked content. A valid case expects the caption's length in UTF-8
bytes; an invalid one the error code. They pin the bounds of a caption (gap 6 of
issue #42): 1 to 65,536 UTF-8 bytes, counted in bytes, not characters; a caption
that is not UTF-8 breaks §3's text rule (``non-canonical-encoding``); two versions
with different captions are not a pair (``invalid-input``).
"""

from __future__ import annotations

from typing import Any

from twinaudit.protocol.encoding import Value, encode
from twinaudit.protocol.items import MAX_TEXT_BYTES

#: A stand-in caption of as many bytes as the raw caption it is swapped for.
_FILLER = 0x7E  # "~", in no other part of the encoded map


def captioned_version(caption: bytes, pixels: bytes) -> bytes:
    """Return the canonical bytes of a 2×2 grey captioned image whose caption is ``caption``.

    ``caption`` is raw: the bytes of the encoded text are these, whether or not they
    are UTF-8 (a filler of the same length is encoded, then swapped for them).
    """
    image: dict[str, Value] = {
        "kind": "image",
        "height": 2,
        "width": 2,
        "channels": 1,
        "pixels": pixels,
    }
    filler = bytes([_FILLER]) * len(caption)
    item: dict[str, Value] = {"kind": "captioned-image", "image": image, "caption": filler.decode()}
    data = encode(item)
    start = data.rindex(filler) if caption else len(data)
    return data[:start] + caption + data[start + len(caption) :]


def _case(name: str, caption0: bytes, caption1: bytes, error: str | None) -> dict[str, Any]:
    versions = {
        "version0": captioned_version(caption0, bytes([10, 20, 30, 40])).hex(),
        "version1": captioned_version(caption1, bytes([11, 19, 31, 39])).hex(),
    }
    case: dict[str, Any] = {
        "name": f"item pair: captioned image, {name}",
        "kind": "item-pair",
        "valid": error is None,
        "input": {"item_kind": "captioned-image", **versions},
    }
    if error is None:
        case["expected"] = {"caption_bytes": len(caption0)}
    else:
        case["error"] = error
    return case


def item_pair_cases() -> list[dict[str, Any]]:
    """Return the caption-bound cases, valid and invalid."""
    widest = "é".encode() * (MAX_TEXT_BYTES // 2)  # 65,536 bytes, 32,768 characters
    return [
        _case("a caption of 0 bytes", b"", b"", "invalid-input"),
        _case("a caption of 1 byte", b"a", b"a", None),
        _case(
            f"a caption of {MAX_TEXT_BYTES:,} bytes (32,768 characters of 2 bytes)",
            widest,
            widest,
            None,
        ),
        _case(
            f"a caption of {MAX_TEXT_BYTES + 1:,} bytes (32,769 characters)",
            widest + b"a",
            widest + b"a",
            "invalid-input",
        ),
        _case("a caption that is not UTF-8 (0xff)", b"\xff", b"\xff", "non-canonical-encoding"),
        _case("versions with different captions", b"a cat", b"a dog", "invalid-input"),
    ]
