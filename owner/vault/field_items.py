"""Format 5's items that carry a mark field: their planes, written and read band by band.

An item with a field ``F`` (:mod:`twinaudit.owner.vault.mark_fields`, whose ``P`` is
the field's rounded full-size mark) is stored as three predicted planes, like format
4's, each the difference from a guess made from ``P``:

- the first plane: under midpoint coding the midpoint ``m`` itself; under a source
  coding (the item kept as its JPEG or HEIF file, decoded to ``x``) the correction
  ``m − m̂`` (modulo 256), ``m̂`` the midpoint of ``clamp(x ± P)``;
- the parity: under midpoint coding ``p`` itself; under a source coding ``p ⊕ p̂``,
  ``p̂`` the parity of ``clamp(x ± P)``;
- the mark: ``h − ĥ`` (modulo 256), ``h = v⁰ − m`` the half-difference and ``ĥ`` the
  one ``P`` gives with that midpoint and parity
  (:func:`~twinaudit.owner.vault.mark_fields.clipped_marks`).

Reading a band therefore makes ``m`` and ``p`` first, then ``h``, then both versions
``v⁰ = m + h`` and ``v¹ = 2m + p − v⁰`` (modulo 256). The planes are predicted and
compressed as format 2's are (:func:`~twinaudit.owner.vault.pair_codec.predict`, the
same bands), so for the marker's own field all three are runs of zeros. Each guess is
``x``, ``0`` or ``P`` but where a level may clip, which alone is computed
(:func:`~twinaudit.owner.vault.mark_fields.clipped_midpoints`,
:func:`~twinaudit.owner.vault.mark_fields.clipped_marks`). A plane that is zero
throughout is stored as an empty stream: zlib would still take about a thousandth of its
raw size, which beside a HEIC photo's file is some 5 %.
"""

from __future__ import annotations

import hashlib
import zlib
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from .mark_fields import Field, FieldPrediction, clipped_marks, clipped_midpoints
from .pair_codec import (
    Inflater,
    PlaneReader,
    bands,
    packed_parity,
    packed_row,
    plane_compressor,
    predict,
    unpacked_parity,
    write_versions,
)

Pixels = npt.NDArray[np.uint8]


@dataclass(frozen=True)
class FieldPlanes:
    """One field-carrying item's streams and the SHA-256 of its midpoint."""

    #: The midpoint (midpoint coding) or the correction (a source coding).
    first: bytes
    mark: bytes
    parity: bytes
    #: SHA-256 of the item's midpoint and half-difference: band by band, the midpoint's
    #: bytes then the half-difference's, each in ``(rows, W, C)`` order.
    sha256: bytes


def encode_field_item(
    version0: Pixels, version1: Pixels, field: Field, photo: Pixels | None
) -> FieldPlanes:
    """Return the planes of one item ``(H, W, C)`` with its checked ``field``.

    ``photo`` is the item's source file decoded (a source coding), or None (midpoint
    coding).
    """
    height, width = version0.shape[:2]
    prediction = FieldPrediction(field, height, width)
    compressors = [plane_compressor() for _ in range(3)]
    pieces: list[list[bytes]] = [[], [], []]
    above: list[Pixels | None] = [None, None]
    nonzero = [False, False, False]
    zeros = [0, 0, 0]
    digest = hashlib.sha256()
    for rows in bands(height):
        # In planes (C, rows, W), where the field's marks broadcast over the channels.
        band0 = np.ascontiguousarray(version0[rows].transpose(2, 0, 1))
        total = band0.astype(np.int16) + version1[rows].transpose(2, 0, 1)
        middle = (total >> 1).astype(np.uint8)
        digest.update(np.ascontiguousarray(middle.transpose(1, 2, 0)).data)
        parity = (total & 1).astype(np.uint8)
        planes = prediction.planes(rows)
        # The mark less its guess: P, but where a level may have been clipped.
        mark = band0 - middle
        digest.update(np.ascontiguousarray(mark.transpose(1, 2, 0)).data)
        mark -= planes.astype(np.uint8)  # modulo 256
        near, guess = clipped_marks(middle, parity, planes)
        if near is not None:
            mark.reshape(-1)[near] = band0.reshape(-1)[near] - middle.reshape(-1)[near] - guess
        if photo is None:
            first, stored_parity = middle, parity
        else:  # the midpoint less its guess: x, but where a level may clip
            x = np.ascontiguousarray(photo[rows].transpose(2, 0, 1))
            first = middle - x
            near, guess, guessed_parity = clipped_midpoints(x, planes)
            if near is not None:
                first.reshape(-1)[near] = middle.reshape(-1)[near] - guess
                parity.reshape(-1)[near] ^= guessed_parity
            stored_parity = parity
        # predict takes (rows, W, C) bands and works on (and may change) their planes.
        first_plane, above[0] = predict(first.transpose(1, 2, 0), above[0])
        mark_plane, above[1] = predict(mark.transpose(1, 2, 0), above[1])
        packed = packed_parity(stored_parity.transpose(1, 2, 0))
        for k, plane in enumerate((first_plane, mark_plane, packed)):
            if not nonzero[k] and not plane.any():
                zeros[k] += plane.nbytes  # compressed only if a later band is not zero
                continue
            if not nonzero[k]:
                nonzero[k] = True
                pieces[k].extend(_compressed_zeros(compressors[k], zeros[k]))
            pieces[k].append(compressors[k].compress(plane.data))
    first_stream, mark_stream, parity_stream = (
        b"".join([*piece, compressor.flush()]) if made else b""
        for piece, compressor, made in zip(pieces, compressors, nonzero, strict=True)
    )
    return FieldPlanes(first_stream, mark_stream, parity_stream, digest.digest())


def decode_field_item(
    streams: tuple[memoryview, memoryview, memoryview],
    field: Field,
    photo: Pixels | None,
    version0: Pixels,
    version1: Pixels,
) -> bytes:
    """Write both versions of one item into the ``(H, W, C)`` arrays; return its SHA-256.

    The SHA-256 is :attr:`FieldPlanes.sha256`'s, of the midpoint and half-difference
    decoded: the mark is computed from the field, so a reader whose arithmetic gave
    other values than the writer's is caught by it, as one whose JPEG decoder did.

    ``streams`` are the item's first, mark and parity streams; ``photo`` its source
    file decoded, or None under midpoint coding.

    Raises:
        ChunkFormatError: a stream is not zlib or does not inflate to its plane's size.

    """
    height, width, channels = version0.shape
    prediction = FieldPrediction(field, height, width)
    firsts = _planes(streams[0], version0.shape)
    marks = _planes(streams[1], version0.shape)
    parities = Inflater(streams[2]) if len(streams[2]) else _Zeros()
    digest = hashlib.sha256()
    for rows in bands(height):
        band = rows.stop - rows.start
        planes = prediction.planes(rows)
        packed = parities.take(channels * band * packed_row(width))
        parity = unpacked_parity(packed, channels, band, width)
        midpoint = firsts.band(rows)
        if photo is not None:  # the correction plus its guess: x, but where a level may clip
            x = np.ascontiguousarray(photo[rows].transpose(2, 0, 1))
            near, guess, guessed_parity = clipped_midpoints(x, planes)
            if near is not None:
                correction = midpoint.reshape(-1)[near]
                midpoint += x
                midpoint.reshape(-1)[near] = correction + guess
                parity.reshape(-1)[near] ^= guessed_parity
            else:
                midpoint += x
        digest.update(np.ascontiguousarray(midpoint.transpose(1, 2, 0)).data)
        # The stored mark plus its guess: P, but where a level may have been clipped.
        residual = marks.band(rows)
        mark = residual + planes.astype(np.uint8)  # modulo 256, broadcast
        near, guess = clipped_marks(midpoint, parity, planes)
        if near is not None:
            mark.reshape(-1)[near] = residual.reshape(-1)[near] + guess
        digest.update(np.ascontiguousarray(mark.transpose(1, 2, 0)).data)
        write_versions(midpoint, mark, parity, (version0, version1), rows)
    firsts.finish()
    marks.finish()
    parities.finish()
    return digest.digest()


def _compressed_zeros(compressor: zlib._Compress, count: int) -> list[bytes]:
    """Feed ``count`` zero bytes to ``compressor`` a mebibyte at a time; return its output."""
    block = memoryview(bytes(min(count, 1 << 20)))
    out = []
    while count > 0:
        size = min(count, len(block))
        out.append(compressor.compress(block[:size]))
        count -= size
    return out


class _Zeros:
    """Reads a plane stored as an empty stream: zeros throughout."""

    def __init__(self, shape: tuple[int, ...] = (0, 0, 0)) -> None:
        """Give planes of an item of ``shape`` ``(H, W, C)``."""
        self._width, self._channels = shape[1], shape[2]

    def band(self, rows: slice) -> Pixels:
        """Return the next band's planes ``(C, rows, W)``, zeros."""
        return np.zeros((self._channels, rows.stop - rows.start, self._width), dtype=np.uint8)

    def take(self, size: int) -> Pixels:
        """Return ``size`` zero bytes (packed parity bits)."""
        return np.zeros(size, dtype=np.uint8)

    def finish(self) -> None:
        """Nothing to check: the stream is empty."""


def _planes(stream: memoryview, shape: tuple[int, ...]) -> PlaneReader | _Zeros:
    """Return the reader of a predicted plane's stream, or zeros for an empty one."""
    return PlaneReader(stream, shape) if len(stream) else _Zeros(shape)
