"""Format-3 chunk files: format 2's planes, or a photo kept as its own JPEG plus a correction.

Most of a format-2 chunk is the midpoint ``m = ⌊(v⁰ + v¹) / 2⌋``, which for a marked
photo is the photo itself, stored losslessly: about three times the JPEG it was decoded
from. A format-3 chunk codes each item in one of two ways and records which: as its
JPEG when the JPEG and its correction take at most a quarter of the item's raw bytes
(:data:`JPEG_WITHOUT_COMPARING`), and otherwise the smaller of the two:

- :data:`MIDPOINT_CODING`: the midpoint, mark and parity planes of format 2
  (:mod:`twinaudit.owner.vault.pair_codec`);
- :data:`JPEG_CODING`: the source file's JPEG bytes, exactly as read, and the
  correction ``c = (m − g) mod 256``, predicted and compressed as the other planes are,
  then the mark and parity planes of format 2. ``g`` (:func:`guess_midpoint`) is the
  decoded photo ``x = decode(jpeg)`` where no level was clipped, and where one was, the
  midpoint that the clipped version, the mark and the parity give; so ``c`` is zero
  except where the marking changed the decoded pixels otherwise (or a clipped level's
  rounding missed), and costs next to nothing then. Reading decodes the mark and parity
  of a band first, then its midpoint ``g + c``.

Format 4 adds :data:`HEIF_CODING`, the same for a photo read from a HEIF file (a
phone's HEIC): its bytes as read, decoded with pi-heif (libheif, libde265), which turns
the photo by the file's own rotation as ``owner mark`` read it; a format-3 chunk never
holds one. A chunk with a HEIF-coded item names the HEIF decoder after the JPEG one.

Format 5 (:data:`FIELD_MAGIC`) lets an item carry its mark field
(:mod:`twinaudit.owner.vault.mark_fields`): its three planes then hold what the field's
prediction misses (:mod:`twinaudit.owner.vault.field_items`), under either coding, and
a fifth stream holds the field. An item without a field is stored as in format 4.

Each item also records the SHA-256 of its midpoint (its bytes in ``(H, W, C)`` order;
for a format-5 item with a field, band by band of its midpoint and its mark, which is
computed), checked every time the item is decoded: a JPEG decoder that gives other pixels than the
one that wrote the vault (another libjpeg-turbo, another Pillow) is caught at the item
and named, never read as wrong pixels. The chunk records the decoder that wrote it
(:func:`decoder_name`). Decoding is Pillow's, from the bytes, with no EXIF orientation,
colour conversion or drafting: the pixels ``owner mark`` reads from a JPEG file.

File layout, integers big-endian::

    MAGIC (8 bytes) ‖ count, height, width, channels (4 × uint32)
    ‖ the decoder's length (uint16) ‖ the decoder (ASCII)
    ‖ per item: coding (uint8) ‖ midpoint SHA-256 (32 bytes)
                ‖ the length of its four streams (4 × uint64)
    ‖ the streams, item by item: first plane, mark, parity, JPEG

The first plane is the midpoint (midpoint coding) or the correction (JPEG coding); the
JPEG stream is empty under midpoint coding. A format-5 file's item entry holds, after
the SHA-256, its field's shape (channels, height, width: 3 × uint16, zeros for none) and
the lengths of five streams, the fifth the field's (empty for none). Every stream's
length is bounded by its plane's (a JPEG by the item's raw size), so a hostile file
cannot make a reader allocate past the item's shape; a JPEG's header is checked against
the item's shape before it is decoded.
"""

from __future__ import annotations

import hashlib
import io
import struct
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Final

import numpy as np
import numpy.typing as npt
import PIL
from PIL import Image, features

from ..heif_reader import HEIF_READ, heif_decoder_name, is_heif
from .field_items import decode_field_item, encode_field_item
from .mark_fields import (
    Field,
    decode_field,
    encode_field,
    field_shape_problem,
    max_field_stream_bytes,
    narrowed,
)
from .pair_codec import (
    ChunkFormatError,
    PlaneReader,
    Reference,
    encode_planes,
    max_stream_bytes,
    plane_sizes,
    rebuild_versions,
    split_streams,
)

Pixels = npt.NDArray[np.uint8]

#: First bytes of a format-3 (and format-4) chunk file.
MAGIC: Final = b"TWPAIRS3"
#: First bytes of a format-5 chunk file, whose items may carry a mark field.
FIELD_MAGIC: Final = b"TWPAIRS5"
#: An item stored as format 2's midpoint, mark and parity planes.
MIDPOINT_CODING: Final = 0
#: An item stored as its source JPEG, a correction, and the mark and parity planes.
JPEG_CODING: Final = 1
#: An item stored as its source HEIF file, a correction, and the mark and parity planes
#: (format 4 on: a format-3 file never holds one).
HEIF_CODING: Final = 2
#: The codings kept as a source file, with the Pillow format that decodes each.
_SOURCE_FORMATS: Final = {JPEG_CODING: "JPEG", HEIF_CODING: "HEIF"}
#: The first bytes of every JPEG file (start of image, then a marker).
JPEG_SIGNATURE: Final = b"\xff\xd8\xff"
#: Longest decoder description a chunk may hold.
MAX_DECODER_BYTES: Final = 256
#: An item kept as its JPEG and correction in at most 1/4 of its raw bytes is kept so
#: without compressing its midpoint to compare: a photo's midpoint plane, compressed
#: losslessly, is rarely smaller (25% of the raw bytes for the benchmark's smooth
#: synthetic 12 MP photos, whose JPEG at quality 92 is 6%), and compressing it was about
#: half of the cost of writing a 12 MP item.
JPEG_WITHOUT_COMPARING: Final = 4
_STREAMS: Final = 4
_SHAPE = struct.Struct(">4I")
_DECODER_LENGTH = struct.Struct(">H")
_ITEM = struct.Struct(">B32s4Q")
#: A format-5 item: coding, midpoint SHA-256, its field's shape (channels, height, width;
#: zeros for none), and the lengths of its five streams (the fifth is the field).
_FIELD_ITEM = struct.Struct(">B32s3H5Q")
_MODES: Final = {"L": 1, "RGB": 3}


class DecoderMismatchError(ChunkFormatError):
    """An item stored as its JPEG does not decode to its recorded midpoint."""


def decoder_name(*, heif: bool = False) -> str:
    """Return the decoder this process uses: Pillow's and libjpeg-turbo's versions.

    ``heif``: and the HEIF decoder's (pi-heif, libheif), which a chunk that holds a
    HEIF-coded item names too.
    """
    jpeg = f"Pillow {PIL.__version__}, libjpeg-turbo {features.version('libjpeg_turbo')}"
    return f"{jpeg}, {heif_decoder_name()}" if heif else jpeg


def max_jpeg_bytes(shape: tuple[int, int, int]) -> int:
    """Return the longest JPEG kept for an item of ``shape`` (its raw pixel bytes)."""
    return shape[0] * shape[1] * shape[2]


def max_chunk_bytes(count: int, shape: tuple[int, int, int]) -> int:
    """Return the largest format-3 file a chunk of ``count`` items of ``shape`` can be."""
    first, mark, parity = (max_stream_bytes(size) for size in plane_sizes(shape))
    field = max_field_stream_bytes(shape)  # a format-5 item's field (at most the item's size)
    streams = first + mark + parity + max_jpeg_bytes(shape) + field
    return _header_bytes(count, MAX_DECODER_BYTES, _FIELD_ITEM) + count * streams


def is_jpeg(data: bytes) -> bool:
    """Tell whether ``data`` starts as a JPEG file does."""
    return data[: len(JPEG_SIGNATURE)] == JPEG_SIGNATURE


@contextmanager
def _opened_jpeg(
    data: bytes | memoryview, shape: tuple[int, int, int], coding: int = JPEG_CODING
) -> Iterator[Image.Image]:
    """Open a JPEG (or HEIF) whose header announces exactly ``shape``, nothing decoded.

    ``coding`` says which (:data:`JPEG_CODING`, :data:`HEIF_CODING`). What the caller
    does with the image inside the block fails as the opening does.

    Raises:
        ChunkFormatError: the bytes are longer than an item of ``shape`` allows, are not
            such a file, announce another size or channel count, or do not decode.

    """
    kind = _SOURCE_FORMATS[coding]
    if len(data) > max_jpeg_bytes(shape):
        raise ChunkFormatError(f"holds a {kind} longer than its item's raw pixels")
    if coding == HEIF_CODING and not HEIF_READ:
        raise ChunkFormatError(f"holds a HEIF file, and this is {heif_decoder_name()}")
    height, width, channels = shape
    try:
        # Opening reads the header only (Pillow refuses a declared size far past its
        # limit itself); the size is checked against the item's before any decoding.
        with Image.open(io.BytesIO(data), formats=[kind]) as image:
            if image.size != (width, height) or _MODES.get(image.mode) != channels:
                raise ChunkFormatError(
                    f"holds a {kind} of {image.size[1]}x{image.size[0]} {image.mode}, "
                    f"not of its item's shape {shape}"
                )
            yield image
    except ChunkFormatError:
        raise
    except (OSError, ValueError, SyntaxError, RuntimeError, Image.DecompressionBombError) as exc:
        raise ChunkFormatError(f"holds a {kind} that does not decode: {exc}") from None


def decode_jpeg(
    data: bytes | memoryview, shape: tuple[int, int, int], coding: int = JPEG_CODING
) -> Pixels:
    """Decode a JPEG (or HEIF, by ``coding``) of exactly ``shape`` ``(H, W, C)``, header first.

    Raises:
        ChunkFormatError: as :func:`_opened_jpeg` says.

    """
    with _opened_jpeg(data, shape, coding) as image:
        image.load()
        pixels = np.asarray(image, dtype=np.uint8)
    return np.array(pixels.reshape(shape), dtype=np.uint8)


def jpeg_fits(data: bytes, shape: tuple[int, int, int], coding: int = JPEG_CODING) -> bool:
    """Tell whether ``data`` is a JPEG (or HEIF) whose header announces ``shape``."""
    try:
        with _opened_jpeg(data, shape, coding):
            return True
    except ChunkFormatError:
        return False


def source_coding(data: bytes | None, *, heif: bool) -> int | None:
    """Return the coding that keeps ``data`` (a JPEG, or with ``heif`` a HEIF), or None."""
    if data is None:
        return None
    if is_jpeg(data):
        return JPEG_CODING
    if heif and HEIF_READ and is_heif(data):
        return HEIF_CODING
    return None


def encode_pairs(
    versions0: Pixels,
    versions1: Pixels,
    originals: Sequence[bytes | None],
    photos: Pixels | None = None,
    *,
    heif: bool = False,
    fields: Sequence[Field | None] | None = None,
) -> list[bytes]:
    """Return the pieces of the format-3 file of a batch; their concatenation is the file.

    ``originals`` holds, per item, the bytes of the file it was read from, or None. An
    item is kept as its JPEG (with ``heif``, format 4's, as its HEIF file too) when that
    file decodes to its shape here and the file with its correction is smaller than its
    midpoint plane; otherwise as format 2 codes it. ``photos``, when given, holds the
    items as the caller decoded them from those bytes with this decoder (the marking's
    read): a file whose header fits is then not decoded again. Pixels that are not its
    exact decoding give a correction that misses, and the item's recorded midpoint
    SHA-256 refuses it when the chunk is read back.

    ``fields``, when given, makes a format-5 file (:data:`FIELD_MAGIC`): per item, its
    checked mark field (:mod:`twinaudit.owner.vault.mark_fields`; one channel is kept of
    a field whose channels are equal) or None; an item with
    a field stores what the field's prediction misses
    (:mod:`twinaudit.owner.vault.field_items`), one without is stored as in format 4.
    """
    count, height, width, channels = versions0.shape
    shape = (height, width, channels)
    entries: list[bytes] = []
    streams: list[bytes] = []
    any_heif = False
    for item in range(count):
        source = _source_of(originals[item], None if photos is None else photos[item], shape, heif)
        given = None if fields is None else fields[item]
        field = None if given is None else narrowed(given)
        if field is None:
            coding, digest, item_streams = _encode_item(versions0[item], versions1[item], source)
        else:
            coding, digest, item_streams = _encode_field_item(
                versions0[item], versions1[item], source, field
            )
        any_heif = any_heif or coding == HEIF_CODING
        if fields is None:
            entries.append(_ITEM.pack(coding, digest, *(len(stream) for stream in item_streams)))
        else:
            item_streams.append(b"" if field is None else encode_field(field))
            stored = (0, 0, 0) if field is None else field.shape
            lengths = (len(stream) for stream in item_streams)
            entries.append(_FIELD_ITEM.pack(coding, digest, *stored, *lengths))
        streams.extend(item_streams)
    described = decoder_name(heif=any_heif)
    if fields is not None and any(field is not None for field in fields):
        described += f", numpy {np.__version__}"  # which computed the marks from their fields
    decoder = described.encode("ascii")[:MAX_DECODER_BYTES]
    magic = MAGIC if fields is None else FIELD_MAGIC
    header = magic + _SHAPE.pack(count, *shape) + _DECODER_LENGTH.pack(len(decoder)) + decoder
    return [header + b"".join(entries), *streams]


def _source_of(
    original: bytes | None, photo: Pixels | None, shape: tuple[int, int, int], heif: bool
) -> tuple[int, bytes, Pixels] | None:
    """Return an item's source file as ``(coding, bytes, decoded)`` if it can be kept so."""
    coding = source_coding(original, heif=heif)
    if original is None or coding is None:
        return None
    if photo is not None and jpeg_fits(original, shape, coding):
        return coding, original, photo
    decoded = _decoded_or_none(original, shape, coding)
    return None if decoded is None else (coding, original, decoded)


def _encode_item(
    version0: Pixels, version1: Pixels, source: tuple[int, bytes, Pixels] | None
) -> tuple[int, bytes, list[bytes]]:
    """Return an item's coding, midpoint SHA-256 and streams (first, mark, parity, source)."""
    if source is None:
        planes = encode_planes(version0, version1, None)
        streams = [planes.midpoint, planes.mark, planes.parity, b""]
        return MIDPOINT_CODING, planes.midpoint_sha256, streams
    kept_as, original, decoded = source
    planes = encode_planes(version0, version1, _guess_from(decoded, planar=False), midpoint=False)
    assert planes.correction is not None  # a reference was given
    coding, first, kept = kept_as, planes.correction, original
    as_source = len(original) + len(planes.correction)
    if as_source * JPEG_WITHOUT_COMPARING > version0.size:
        midpoint = encode_planes(version0, version1, None, mark_and_parity=False).midpoint
        if len(midpoint) <= as_source:
            coding, first, kept = MIDPOINT_CODING, midpoint, b""
    return coding, planes.midpoint_sha256, [first, planes.mark, planes.parity, kept]


def _encode_field_item(
    version0: Pixels, version1: Pixels, source: tuple[int, bytes, Pixels] | None, field: Field
) -> tuple[int, bytes, list[bytes]]:
    """Return a field-carrying item's coding, midpoint SHA-256 and streams (as above).

    Kept as its source file on format 3's rule: when that file and its planes take at
    most a quarter of the raw bytes (:data:`JPEG_WITHOUT_COMPARING`), or no more than the
    midpoint's planes.
    """
    if source is not None:
        kept_as, original, decoded = source
        kept = encode_field_item(version0, version1, field, decoded)
        as_source = len(original) + len(kept.first) + len(kept.parity)
        streams = [kept.first, kept.mark, kept.parity, original]
        if as_source * JPEG_WITHOUT_COMPARING <= version0.size:
            return kept_as, kept.sha256, streams
    alone = encode_field_item(version0, version1, field, None)
    if source is not None and as_source <= len(alone.first) + len(alone.parity):
        return kept_as, kept.sha256, streams
    return MIDPOINT_CODING, alone.sha256, [alone.first, alone.mark, alone.parity, b""]


def guess_midpoint(decoded: Pixels, mark: Pixels, parity: Pixels) -> Pixels:
    """Return the midpoint that the decoded photo, the mark and the parity suggest.

    The versions are ``v⁰ = m + h`` and ``v¹ = m − h + p`` (``h`` the mark, ``p`` the
    parity). Where no level was clipped the midpoint is the photo ``x``; where ``x + h``
    leaves 0..255, ``v⁰`` was clipped to 0 or 255 and ``m`` is that less ``h``; where
    ``x − h`` does, ``v¹`` was, and ``m`` is that plus ``h − p``. A guess only: the
    correction plane holds what it misses, so it is exact whatever the inputs. All
    arrays alike in shape; the result is modulo 256 (C order).

    The rule is evaluated only where a level can leave 0..255: within ``r`` of either
    end, ``r`` the band's largest ``|h|``; every other value is the photo's. The four
    cases exclude each other (an int8 ``h`` cannot push one level past both ends).
    """
    half = np.ascontiguousarray(mark).view(np.int8).reshape(-1)
    reach = max(int(half.max(initial=0)), -int(half.min(initial=0)))
    guess = np.array(decoded, dtype=np.uint8, order="C")
    if reach == 0:
        return guess
    flat = guess.reshape(-1)  # a view: the values are written through it
    near = np.flatnonzero((flat > 255 - reach) | (flat < reach))
    photo = flat[near].astype(np.int16)
    shift = half[near].astype(np.int16)
    flipped = np.ascontiguousarray(parity).reshape(-1)[near].astype(np.int16)
    up, down = photo + shift, photo - shift
    value = photo
    value = np.where(up > 255, 255 - shift, value)
    value = np.where(up < 0, -shift, value)
    value = np.where(down < 0, shift - flipped, value)
    value = np.where(down > 255, 255 + shift - flipped, value)
    flat[near] = (value & 0xFF).astype(np.uint8)
    return guess


def _guess_from(decoded: Pixels, *, planar: bool) -> Reference:
    """Return the guess of each band's midpoint from ``decoded`` ``(H, W, C)``."""

    def guess(rows: slice, mark: Pixels, parity: Pixels) -> Pixels:
        photo = decoded[rows].transpose(2, 0, 1) if planar else decoded[rows]
        return guess_midpoint(photo, mark, parity)

    return guess


def _decoded_or_none(original: bytes, shape: tuple[int, int, int], coding: int) -> Pixels | None:
    try:
        return decode_jpeg(original, shape, coding)
    except ChunkFormatError:
        return None  # a file of another shape or mode: the midpoint is stored instead


class JpegPairsFile:
    """A format-3 chunk file whose layout is checked; its items are decoded one at a time."""

    def __init__(
        self,
        data: bytes,
        count: int,
        shape: tuple[int, int, int],
        *,
        heif: bool = False,
        fields: bool = False,
    ) -> None:
        """Check the layout of ``data`` against ``count`` items of ``shape``.

        ``heif``: the vault's format (4 on) may hold HEIF-coded items; ``fields``: the
        file is a format-5 one (:data:`FIELD_MAGIC`), whose items may carry a mark
        field. Raises ChunkFormatError when the header, the decoder, a coding, a field's
        shape, the stream lengths or the file's length do not match (the streams
        themselves are checked as they are decoded).
        """
        codings = (MIDPOINT_CODING, JPEG_CODING, *((HEIF_CODING,) if heif else ()))
        magic, entry = (FIELD_MAGIC, _FIELD_ITEM) if fields else (MAGIC, _ITEM)
        kind = "format-5" if fields else "format-3"
        view = memoryview(data)
        if len(view) < len(magic) + _SHAPE.size + _DECODER_LENGTH.size:
            raise ChunkFormatError(f"is not a {kind} chunk file")
        if bytes(view[: len(magic)]) != magic:
            raise ChunkFormatError(f"is not a {kind} chunk file")
        stated = _SHAPE.unpack_from(view, len(magic))
        if stated != (count, *shape):
            raise ChunkFormatError(f"holds items of {stated}, not {(count, *shape)}")
        (decoder_bytes,) = _DECODER_LENGTH.unpack_from(view, len(magic) + _SHAPE.size)
        header = _header_bytes(count, decoder_bytes, entry)
        if decoder_bytes > MAX_DECODER_BYTES or len(view) < header:
            raise ChunkFormatError(f"is not a {kind} chunk file")
        start = header - count * entry.size - decoder_bytes
        try:
            self.decoder = bytes(view[start : start + decoder_bytes]).decode("ascii")
        except UnicodeDecodeError:
            raise ChunkFormatError("names its JPEG decoder in other than ASCII") from None
        first, mark, parity = (max_stream_bytes(size) for size in plane_sizes(shape))
        bounds = (first, mark, parity, max_jpeg_bytes(shape))
        self._codings: list[int] = []
        self._digests: list[bytes] = []
        self._field_shapes: list[tuple[int, int, int] | None] = []
        lengths: list[int] = []
        for item in range(count):
            values = entry.unpack_from(view, start + decoder_bytes + item * entry.size)
            coding, digest = values[0], values[1]
            if fields:
                item_lengths = list(values[5:10])
                field_shape = _field_shape(item, values[2:5], shape, item_lengths[4])
            else:
                item_lengths, field_shape = list(values[2:6]), None
            if coding not in codings:
                raise ChunkFormatError(f"item {item} has an unknown coding {coding}")
            if any(length > bound for length, bound in zip(item_lengths, bounds, strict=False)):
                raise ChunkFormatError(f"item {item} has a stream longer than its plane allows")
            if (coding == MIDPOINT_CODING) != (item_lengths[3] == 0):
                raise ChunkFormatError(f"item {item} has a JPEG stream unlike its coding")
            self._codings.append(coding)
            self._digests.append(digest)
            self._field_shapes.append(field_shape)
            lengths.extend(item_lengths)
        self.count = count
        self.shape = shape
        self._stride = _STREAMS + 1 if fields else _STREAMS
        self._streams = split_streams(view, header, lengths)

    def codings(self) -> list[int]:
        """Return each item's coding: midpoint, JPEG or HEIF (:data:`HEIF_CODING`)."""
        return list(self._codings)

    def item(self, index: int) -> Pixels:
        """Return both versions of item ``index`` as a ``(2, H, W, C)`` array."""
        pixels = np.empty((2, *self.shape), dtype=np.uint8)
        self.decode_into(index, pixels[0], pixels[1])
        return pixels

    def decode_into(self, index: int, version0: Pixels, version1: Pixels) -> None:
        """Decode item ``index`` into the two ``(H, W, C)`` arrays given.

        Raises:
            DecoderMismatchError: the item is stored as its JPEG, and the JPEG decoded
                here with the correction does not give the recorded midpoint.
            ChunkFormatError: a stream is damaged, or a midpoint-coded item does not
                give its recorded midpoint.

        """
        streams = self._streams[self._stride * index : self._stride * (index + 1)]
        first, mark, parity, jpeg = streams[:_STREAMS]
        coding = self._codings[index]
        field_shape = self._field_shapes[index]
        if field_shape is not None:
            try:
                field = decode_field(streams[_STREAMS], field_shape)
            except ValueError as exc:
                raise ChunkFormatError(str(exc)) from None
            photo = None if coding == MIDPOINT_CODING else decode_jpeg(jpeg, self.shape, coding)
            found = decode_field_item((first, mark, parity), field, photo, version0, version1)
        else:
            found = self._decode_planes(index, version0, version1)
        if found != self._digests[index] and field_shape is not None:
            raise ChunkFormatError(
                "does not give the midpoint and mark recorded for it (its mark is computed "
                f"from its field; written with {self.decoder}, read here with "
                f"{decoder_name(heif=coding == HEIF_CODING)}, numpy {np.__version__}): read "
                "it where it was written, or rewrite it there in format 2 (twinaudit owner "
                "vault-migrate VAULT --to 2; not a vault that keeps colour profiles)"
            )
        if found != self._digests[index]:
            if coding == JPEG_CODING:
                raise DecoderMismatchError(
                    "was stored as its JPEG, and its JPEG decoded here with its correction "
                    "does not give the midpoint recorded for it: the vault was written with "
                    f"{self.decoder}, this is {decoder_name()}; read it with that Pillow "
                    f"(pip install pillow=={_pillow_of(self.decoder)}), or rewrite it in "
                    "format 2 where it was written (twinaudit owner vault-migrate VAULT --to 2)"
                )
            if coding == HEIF_CODING:
                raise DecoderMismatchError(
                    "was stored as its HEIF file, and that file decoded here with its "
                    "correction does not give the midpoint recorded for it: the vault was "
                    f"written with {self.decoder}, this is {decoder_name(heif=True)}; read it "
                    f"with that pi-heif (pip install pi-heif=={_pi_heif_of(self.decoder)}), or "
                    "rewrite it in format 2 where it was written (twinaudit owner "
                    "vault-migrate VAULT --to 2; not a vault that keeps colour profiles)"
                )
            raise ChunkFormatError("does not give the midpoint recorded for it")

    def _decode_planes(self, index: int, version0: Pixels, version1: Pixels) -> bytes:
        """Decode an item without a field (format 3's); return its midpoint's SHA-256."""
        first, mark, parity, jpeg = self._streams[
            self._stride * index : self._stride * index + _STREAMS
        ]
        digest = hashlib.sha256()
        if self._codings[index] != MIDPOINT_CODING:
            decoded = decode_jpeg(jpeg, self.shape, self._codings[index])
            corrections = PlaneReader(first, self.shape)
            guess = _guess_from(decoded, planar=True)

            def midpoint_band(rows: slice, mark: Pixels, parity: Pixels) -> Pixels:
                midpoint = guess(rows, mark, parity)
                midpoint += corrections.band(rows)
                digest.update(np.ascontiguousarray(midpoint.transpose(1, 2, 0)).data)
                return midpoint

        else:
            corrections = PlaneReader(first, self.shape)

            def midpoint_band(rows: slice, mark: Pixels, parity: Pixels) -> Pixels:
                del mark, parity  # stored whole
                midpoint = corrections.band(rows)
                digest.update(np.ascontiguousarray(midpoint.transpose(1, 2, 0)).data)
                return midpoint

        rebuild_versions(midpoint_band, mark, parity, version0, version1)
        corrections.finish()
        return digest.digest()


def _pi_heif_of(decoder: str) -> str:
    """Return the pi-heif version named in a decoder description, or the description."""
    for part in decoder.split(", "):
        if part.startswith("pi-heif "):
            return part.removeprefix("pi-heif ")
    return decoder


def _pillow_of(decoder: str) -> str:
    """Return the Pillow version named in a decoder description, or the description."""
    head = decoder.split(",", 1)[0]
    return head.removeprefix("Pillow ") if head.startswith("Pillow ") else decoder


def _header_bytes(count: int, decoder_bytes: int, entry: struct.Struct = _ITEM) -> int:
    return len(MAGIC) + _SHAPE.size + _DECODER_LENGTH.size + decoder_bytes + count * entry.size


def _field_shape(
    item: int, stated: tuple[int, ...], shape: tuple[int, int, int], length: int
) -> tuple[int, int, int] | None:
    """Return a format-5 item's field shape (None for no field), checked against its item's.

    Raises ChunkFormatError when the shape is not a field's of the item, or the field's
    stream is empty for a field, present for none, or longer than the field allows.
    """
    if stated == (0, 0, 0):
        if length:
            raise ChunkFormatError(f"item {item} has a field stream and no field")
        return None
    field_shape = (int(stated[0]), int(stated[1]), int(stated[2]))
    problem = field_shape_problem(field_shape, shape)
    if problem is not None:
        raise ChunkFormatError(f"item {item}: {problem}")
    if not 0 < length <= max_field_stream_bytes(field_shape):
        raise ChunkFormatError(f"item {item} has a field stream its field's size does not allow")
    return field_shape
