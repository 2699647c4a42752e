"""Chunk files: both versions of a batch of consecutive items.

Read back, a chunk is a uint8 array of shape ``(2, B, H, W, C)``: index 0 on the first
axis is version 0 of each item, index 1 version 1. Format 3 (``.pairs``, magic
``TWPAIRS3``) keeps a photo read from a JPEG as that JPEG plus a correction where that is
smaller (:mod:`twinaudit.owner.vault.jpeg_pairs`); format 2 (``.pairs``, ``TWPAIRS2``)
stores it compactly (:mod:`twinaudit.owner.vault.pair_codec`); format 1 (``.npy``) stored
the array raw, read with ``allow_pickle=False`` only. Neither holds a timestamp, so the same pixels
always give the same bytes. Labels and names live in the chunk's journal record.
"""

from __future__ import annotations

import hashlib
import io
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt

from twinaudit.protocol.commitment import pair_commitment as commitment_of_digests
from twinaudit.protocol.commitment import version_digest_of_pieces
from twinaudit.protocol.errors import InputError, ParameterError, VaultIntegrityError
from twinaudit.protocol.items import (
    MAX_IMAGE_SIDE,
    MAX_LABEL,
    CaptionedImageItem,
    ImageItem,
    Item,
    encode_item_pieces,
)

from . import files, jpeg_pairs
from .journal import ChunkRecord
from .jpeg_pairs import JpegPairsFile
from .layout import (
    COMPACT_CHUNK_SUFFIX,
    FIELDS_FROM_FORMAT,
    HEIF_FROM_FORMAT,
    MAX_CHUNK_BYTES,
    MAX_NAME_BYTES,
    RAW_CHUNK_SUFFIX,
)
from .mark_fields import Field
from .pair_codec import ChunkFormatError, PairsFile, encode_pairs, max_chunk_bytes
from .secret import pair_salt

#: Room for the ``.npy`` header on top of the pixels.
_HEADER_ALLOWANCE = 4096

Pixels = npt.NDArray[np.uint8]


def check_batch(
    versions0: object, versions1: object, labels: object, names: object
) -> tuple[tuple[int, int, int], list[int | None], list[str]]:
    """Check one batch; return its item shape ``(H, W, C)``, its labels and its names.

    Raises InputError (or ParameterError for counts) naming what is wrong.
    """
    for what, array in (("versions0", versions0), ("versions1", versions1)):
        if not isinstance(array, np.ndarray) or array.dtype != np.uint8:
            raise InputError(f"{what} must be a uint8 numpy array")
        if array.ndim != 4:
            raise InputError(f"{what} must have shape (B, H, W, C), has {array.shape}")
    assert isinstance(versions0, np.ndarray)
    assert isinstance(versions1, np.ndarray)
    if versions0.shape != versions1.shape:
        raise InputError(f"versions differ in shape: {versions0.shape} and {versions1.shape}")
    count, height, width, channels = versions0.shape
    if count < 1:
        raise ParameterError("a batch must hold at least one item")
    if not (1 <= height <= MAX_IMAGE_SIDE and 1 <= width <= MAX_IMAGE_SIDE and channels in (1, 3)):
        raise InputError(f"item shape {versions0.shape[1:]} outside 1..{MAX_IMAGE_SIDE}, C in 1|3")
    if 2 * versions0.size > MAX_CHUNK_BYTES:
        raise ParameterError(f"a batch holds at most {MAX_CHUNK_BYTES} bytes of both versions")
    label_list = _labels(labels, count)
    name_list = check_names(names, count)
    return (int(height), int(width), int(channels)), label_list, name_list


def _labels(labels: object, count: int) -> list[int | None]:
    if isinstance(labels, str | bytes) or not isinstance(labels, Sequence | np.ndarray):
        raise InputError("labels must be a sequence of integers or None")
    if len(labels) != count:
        raise ParameterError(f"{len(labels)} labels for a batch of {count} items")
    checked: list[int | None] = []
    for label in labels:
        if label is None:
            checked.append(None)
            continue
        if isinstance(label, bool) or not isinstance(label, int | np.integer):
            raise InputError(f"label {label!r} is not an integer or None")
        if not 0 <= int(label) < MAX_LABEL:
            raise InputError(f"label {label} is outside [0, {MAX_LABEL})")
        checked.append(int(label))
    return checked


def check_names(names: object, count: int) -> list[str]:
    """Return ``names`` as a list if it holds ``count`` valid item names; else raise."""
    if isinstance(names, str | bytes) or not isinstance(names, Sequence):
        raise InputError("names must be a sequence of strings")
    if len(names) != count:
        raise ParameterError(f"{len(names)} names for a batch of {count} items")
    for name in names:
        if not isinstance(name, str):
            raise InputError(f"name {name!r} is not a string")
        try:
            size = len(name.encode("utf-8"))
        except UnicodeEncodeError:
            raise InputError(f"name {name!r} is not valid Unicode") from None
        if not 1 <= size <= MAX_NAME_BYTES:
            raise InputError(f"an item name must have 1..{MAX_NAME_BYTES} UTF-8 bytes")
    return list(names)


def encode_chunk(
    versions0: Pixels,
    versions1: Pixels,
    format_version: int,
    originals: Sequence[bytes | None] | None = None,
    photos: Pixels | None = None,
    *,
    fields: Sequence[Field | None] | None = None,
) -> list[bytes]:
    """Return the chunk file of a batch's two versions in ``format_version``, in pieces.

    The file is the concatenation of the pieces (they are written and hashed in turn,
    so a batch of photos is held once more, not twice). Format 3 keeps an item whose
    source was a JPEG (``originals``: per item, the source file's bytes or None) as that
    JPEG where it is smaller, format 4 a JPEG or a HEIF
    (:func:`~twinaudit.owner.vault.jpeg_pairs.encode_pairs`, which takes ``photos``, the
    items as decoded from those bytes, instead of decoding); format 2 is compact
    (:func:`~twinaudit.owner.vault.pair_codec.encode_pairs`); format 1 is the ``.npy``
    bytes ``np.save`` writes for the stacked ``(2, B, H, W, C)`` array. Format 5 is
    format 4 whose items may carry their mark field (``fields``: per item, a checked
    field or None), stored as what the field's prediction misses; earlier formats
    ignore ``fields``.
    """
    if format_version >= 3:
        given = [None] * len(versions0) if originals is None else originals
        heif = format_version >= HEIF_FROM_FORMAT
        if format_version >= FIELDS_FROM_FORMAT:
            fields = [None] * len(versions0) if fields is None else fields
        else:
            fields = None
        return jpeg_pairs.encode_pairs(
            versions0, versions1, given, photos, heif=heif, fields=fields
        )
    if format_version == 2:
        return encode_pairs(versions0, versions1)
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(
        header, {"descr": "|u1", "fortran_order": False, "shape": (2, *versions0.shape)}
    )
    parts = (np.ascontiguousarray(versions0), np.ascontiguousarray(versions1))
    return [header.getvalue(), *(part.data.cast("B").tobytes() for part in parts)]


class StoredChunk:
    """A pixel chunk read from its file and checked: both versions of its items, on demand.

    A format-1 chunk is held as its array; a format-2 or format-3 chunk as its
    compressed bytes, each item decoded when asked for (a claim's opening decodes one
    item, not the chunk).
    """

    def __init__(
        self,
        vault: Path,
        relative: str,
        content: Pixels | PairsFile | JpegPairsFile,
        count: int,
        start: int = 0,
    ) -> None:
        """Hold the checked ``content`` of the chunk file ``relative`` of ``vault``.

        ``start`` is the pair index of the chunk's first item (errors name the pair).
        """
        self._vault = vault
        self._relative = relative
        self._content = content
        self.count = count
        self.start = start

    def item(self, offset: int) -> Pixels:
        """Return both versions of the chunk's item ``offset``, as a ``(2, H, W, C)`` array."""
        if isinstance(self._content, np.ndarray):
            return np.array(self._content[:, offset])
        try:
            return self._content.item(offset)
        except ChunkFormatError as exc:
            problem = str(exc)
            if isinstance(self._content, JpegPairsFile):  # its checks are per item
                problem = f"pair {self.start + offset} (item {offset} of the chunk) {problem}"
            raise VaultIntegrityError(self._vault, self._relative, problem) from None

    def codings(self) -> list[int]:
        """Return each item's coding in a format-3 chunk (all midpoint-coded otherwise)."""
        if isinstance(self._content, JpegPairsFile):
            return self._content.codings()
        return [jpeg_pairs.MIDPOINT_CODING] * self.count

    def pixels(self) -> Pixels:
        """Return the whole chunk as a ``(2, B, H, W, C)`` array."""
        if isinstance(self._content, np.ndarray):
            return self._content
        pixels = np.empty((2, self.count, *self._content.shape), dtype=np.uint8)
        for offset in range(self.count):
            pixels[:, offset] = self.item(offset)
        return pixels


def read_stored_chunk(
    vault: Path,
    relative: str,
    sha256: bytes,
    count: int,
    shape: tuple[int, int, int],
    *,
    format_version: int,
    start: int = 0,
) -> StoredChunk:
    """Read a chunk file, check its SHA-256 and layout; return it, its items read on demand.

    The file's suffix tells a raw chunk (``.npy``: format 1) from a compact one
    (``.pairs``), and a compact chunk's first bytes tell format 2 from format 3 (the
    journal names every chunk after its vault's format, and records its SHA-256). The
    chunk must be one its vault's ``format_version`` writes: a format-2 vault, which
    promises to need no image decoder, never yields a format-3 chunk. No read goes past
    what the recorded shape allows, and a compact item never inflates past it.
    ``start`` is the pair index of the chunk's first item.
    """
    compact = relative.endswith(f".{COMPACT_CHUNK_SUFFIX}")
    if not compact and not relative.endswith(f".{RAW_CHUNK_SUFFIX}"):
        raise VaultIntegrityError(vault, relative, "is not named as a pixel chunk")
    if compact != (format_version >= 2):
        kind = "compact" if compact else "raw"
        raise VaultIntegrityError(
            vault, relative, f"is a {kind} chunk in a vault of format {format_version}"
        )
    raw = 2 * count * shape[0] * shape[1] * shape[2]
    limit = raw + _HEADER_ALLOWANCE
    if compact:
        limit = max(max_chunk_bytes(count, shape), jpeg_pairs.max_chunk_bytes(count, shape))
    try:
        data = files.read_bounded(vault / relative, limit)
    except OSError as exc:
        raise VaultIntegrityError(vault, relative, f"cannot be read: {exc.strerror}") from None
    if len(data) > limit:
        raise VaultIntegrityError(vault, relative, "is larger than its recorded shape allows")
    if hashlib.sha256(data).digest() != sha256:
        raise VaultIntegrityError(vault, relative, "was modified (SHA-256 differs)")
    if compact:
        if format_version == 2 and data.startswith(jpeg_pairs.MAGIC):
            raise VaultIntegrityError(
                vault, relative, "is a format-3 chunk (JPEG-coded) in a vault of format 2"
            )
        fields = data.startswith(jpeg_pairs.FIELD_MAGIC)
        if fields != (format_version >= FIELDS_FROM_FORMAT):
            kind = "a format-5 chunk" if fields else "not a format-5 chunk"
            raise VaultIntegrityError(
                vault, relative, f"is {kind} in a vault of format {format_version}"
            )
        try:
            content: PairsFile | JpegPairsFile = (
                JpegPairsFile(
                    data,
                    count,
                    shape,
                    heif=format_version >= HEIF_FROM_FORMAT,
                    fields=fields,
                )
                if fields or data.startswith(jpeg_pairs.MAGIC)
                else PairsFile(data, count, shape)
            )
            return StoredChunk(vault, relative, content, count, start)
        except ChunkFormatError as exc:
            raise VaultIntegrityError(vault, relative, str(exc)) from None
    try:
        array = np.load(io.BytesIO(data), allow_pickle=False)
    except (ValueError, OSError, EOFError) as exc:
        raise VaultIntegrityError(vault, relative, f"is not a .npy array: {exc}") from None
    expected = (2, count, *shape)
    if not isinstance(array, np.ndarray) or array.dtype != np.uint8 or array.shape != expected:
        raise VaultIntegrityError(vault, relative, f"does not hold a uint8 array of {expected}")
    return StoredChunk(vault, relative, array, count)


def check_captions(captions: object, count: int) -> list[str]:
    """Return ``captions`` as a list if it holds ``count`` valid captions; else raise."""
    if isinstance(captions, str | bytes) or not isinstance(captions, Sequence):
        raise InputError("captions must be a sequence of strings")
    if len(captions) != count:
        raise ParameterError(f"{len(captions)} captions for a batch of {count} items")
    return [CaptionedImageItem(ImageItem(_ONE_PIXEL), caption).caption for caption in captions]


_ONE_PIXEL = np.zeros((1, 1, 1), dtype=np.uint8)


def pixel_item(pixels: Pixels, label: int | None, caption: str | None) -> Item:
    """Return the item of one version: an image, or a captioned image when ``caption`` is set."""
    image = ImageItem(pixels, label)
    return image if caption is None else CaptionedImageItem(image, caption)


def pair_commitment(
    secret: bytes, index: int, pair: Pixels, label: int | None, caption: str | None
) -> bytes:
    """Return the commitment of pair ``index`` from its ``(2, H, W, C)`` pixels.

    With ``caption``, each version is the captioned image (its version's pixels and the
    item's caption); otherwise the image. Each version's canonical bytes are hashed in
    pieces, the pixels where they lie (a 12 MP pair's commitment in a fifth of the time
    that encoding each version into one byte string took).
    """
    digests = [
        version_digest_of_pieces(encode_item_pieces(pixel_item(pair[k], label, caption)))
        for k in (0, 1)
    ]
    return commitment_of_digests(pair_salt(secret, index), *digests)


def read_record(vault: Path, record: ChunkRecord, format_version: int) -> StoredChunk:
    """Read an image or captioned-image chunk record's chunk (checked; its vault's format given)."""
    if record.shape is None:
        raise VaultIntegrityError(vault, record.file, "is a text chunk, not pixels")
    return read_stored_chunk(
        vault,
        record.file,
        record.sha256,
        record.count,
        record.shape,
        format_version=format_version,
        start=record.start,
    )


def commit_chunks(
    vault: Path, secret: bytes, records: Sequence[ChunkRecord], format_version: int
) -> bytearray:
    """Read every pixel chunk (checking its SHA-256) and return all pair commitments, packed.

    One chunk file is in memory at a time (a format-2 chunk's items are decoded one by
    one); the result holds 32 bytes per pair.
    """
    packed = bytearray()
    for record in records:
        chunk = read_record(vault, record, format_version)
        for offset, label in enumerate(record.labels):
            caption = None if record.captions is None else record.captions[offset]
            index = record.start + offset
            packed += pair_commitment(secret, index, chunk.item(offset), label, caption)
    return packed
