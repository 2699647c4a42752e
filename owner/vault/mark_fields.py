"""Format 5's mark fields: a photo's mark predicted from the small field it was carried from.

The default marker finds a photo's mark δ at a working resolution and carries it back
to full size: bilinear upsampling, then rounding. The two versions are then
``clamp(x + δ)`` and ``clamp(x − δ)``. A format-4 chunk stores the full-size mark as a
plane, which costs most of what the vault adds to a photo's own file (about 0.7× a
JPEG's bytes, 1.5× a HEIC's). A format-5 item may carry that small field instead: a
float32 array ``F`` of shape ``(c, h, w)``, ``c`` one (the same mark in every channel)
or the item's channels, ``h`` and ``w`` at most the item's. The chunk then stores only
what the field's prediction misses, which for the marker's own field is nothing but
the rare value a float sum rounds the other way. Any field, even a wrong one, gives
the exact pixels: the prediction is a guess, and the stored residual makes it exact.

The prediction ``P`` is defined here exactly, in IEEE 754 double precision, each step
one correctly rounded operation, so that every reader computes the same integers on any
machine. For an output length ``n`` from an input length ``k`` (columns: ``W`` from
``w``; rows: ``H`` from ``h``), output index ``i`` reads

    ``s = k / n``, ``t = max((i + 0.5)·s − 0.5, 0)``, ``a = min(⌊t⌋, k − 1)``,
    ``b = min(a + 1, k − 1)``, ``u = t − a``,

and the value at ``i`` is ``F[a] + u·(F[b] − F[a])``: first along each row of ``F``
(columns), then along the columns of that result (rows). ``P`` is that rounded half to
even, an integer in −255..255 (a field's values are bounded by :data:`FIELD_BOUND`).
This is bilinear upsampling with half-pixel centres (PyTorch's ``align_corners=False``)
as the marker does it in single precision.

From ``P`` two guesses are made, both exact where the field is the marker's:

- from the photo ``x`` a format-4 item keeps as its source file: the versions
  ``clamp(x ± P)``, so their midpoint and its parity, which are ``x`` and 0 but where a
  level may clip (:func:`clipped_midpoints` gives those);
- from the midpoint ``m`` and parity ``p`` of the versions: the half-difference
  ``v⁰ − m`` they have when ``v⁰ = clamp(x + P)`` and ``v¹ = clamp(x − P)`` for the
  photo ``x`` that gives that midpoint and parity, which is ``P`` but where a level may
  have been clipped (:func:`clipped_marks`).

numpy only; the chunk layout is :mod:`twinaudit.owner.vault.jpeg_pairs`'.
"""

from __future__ import annotations

import math
import zlib
from typing import Final

import numpy as np
import numpy.typing as npt

Pixels = npt.NDArray[np.uint8]
Field = npt.NDArray[np.float32]
Marks = npt.NDArray[np.int16]
Indices = npt.NDArray[np.intp]

#: Largest magnitude of a field's values (a mark never moves a level further).
FIELD_BOUND: Final = 255.0
_NONE: Final = np.zeros(0, dtype=np.uint8)
#: zlib's level for a field's stream (a field is small: a 64-px side is 16 KiB raw).
_FIELD_LEVEL: Final = 9


def field_problem(field: object, shape: tuple[int, int, int]) -> str | None:
    """Return why ``field`` cannot be the mark field of an item of ``shape``, or None.

    A field is a float32 array ``(c, h, w)`` of a shape :func:`field_shape_problem`
    accepts, its values finite and within ±:data:`FIELD_BOUND`.
    """
    if not isinstance(field, np.ndarray) or field.dtype != np.float32 or field.ndim != 3:
        return "a mark field must be a float32 array (channels, height, width)"
    problem = field_shape_problem((field.shape[0], field.shape[1], field.shape[2]), shape)
    if problem is not None:
        return problem
    if not bool(np.all(np.isfinite(field))) or float(np.max(np.abs(field))) > FIELD_BOUND:
        return f"a mark field's values must be finite and within ±{FIELD_BOUND:g}"
    return None


def field_shape_problem(
    field_shape: tuple[int, int, int], shape: tuple[int, int, int]
) -> str | None:
    """Return why a field of ``field_shape`` cannot mark an item of ``shape``, or None.

    ``c`` must be 1 or the item's channels, ``h`` and ``w`` from 1 to the item's height
    and width.
    """
    height, width, channels = shape
    if field_shape[0] not in {1, channels}:
        return f"a mark field has {field_shape[0]} channels, its item {channels}"
    if not (1 <= field_shape[1] <= height and 1 <= field_shape[2] <= width):
        return (
            f"a mark field of {field_shape[1]}x{field_shape[2]} does not fit its item's "
            f"{height}x{width}"
        )
    return None


def narrowed(field: Field) -> Field:
    """Return ``field`` with one channel when all its channels are equal (a neutral mark)."""
    if field.shape[0] > 1 and bool(np.all(field == field[:1])):
        return np.ascontiguousarray(field[:1])
    return np.ascontiguousarray(field)


def encode_field(field: Field) -> bytes:
    """Return the stream of a checked field: its values as little-endian float32, zlib."""
    return zlib.compress(np.ascontiguousarray(field, dtype="<f4").tobytes(), _FIELD_LEVEL)


def decode_field(stream: bytes | memoryview, field_shape: tuple[int, int, int]) -> Field:
    """Return the field of ``field_shape`` a stream holds, never inflating past its size.

    Raises:
        ValueError: the stream is not zlib, inflates to another size, or holds values
            that are not finite or exceed ±:data:`FIELD_BOUND`.

    """
    size = 4 * math.prod(field_shape)
    inflater = zlib.decompressobj()
    try:
        data = inflater.decompress(stream, size)
        extra = inflater.decompress(inflater.unconsumed_tail, 1)
    except zlib.error as exc:
        raise ValueError(f"a mark field's stream is not zlib: {exc}") from None
    if len(data) != size or extra or not inflater.eof or inflater.unused_data:
        raise ValueError("a mark field's stream does not inflate to its field's size")
    field = np.frombuffer(data, dtype="<f4").astype(np.float32).reshape(field_shape)
    if not bool(np.all(np.isfinite(field))) or float(np.max(np.abs(field))) > FIELD_BOUND:
        raise ValueError(f"a mark field's values are not finite or exceed ±{FIELD_BOUND:g}")
    return field


def max_field_stream_bytes(shape: tuple[int, int, int]) -> int:
    """Return the longest field stream an item of ``shape`` may hold (zlib's worst case)."""
    raw = 4 * shape[0] * shape[1] * shape[2]
    return raw + (raw >> 8) + 64


def _source_index(
    out: int, size: int
) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.intp], npt.NDArray[np.float64]]:
    """Return, per output index, the two input indices and the second's weight (see above)."""
    position = (np.arange(out, dtype=np.float64) + 0.5) * (size / out) - 0.5
    np.maximum(position, 0.0, out=position)
    first = np.minimum(np.floor(position).astype(np.intp), size - 1)
    second = np.minimum(first + 1, size - 1)
    return first, second, position - first


class FieldPrediction:
    """The rounded full-size mark ``P`` of one item's field, band of rows by band."""

    def __init__(self, field: Field, height: int, width: int) -> None:
        """Interpolate the field's columns to ``width`` once; rows are done per band."""
        values = field.astype(np.float64)
        first, second, weight = _source_index(width, field.shape[2])
        low = values[:, :, first]
        self._columns = low + weight * (values[:, :, second] - low)  # (c, h, W)
        self._rows = _source_index(height, field.shape[1])

    def planes(self, rows: slice) -> Marks:
        """Return ``P`` for ``rows`` as int16 ``(c, rows, W)``."""
        first, second, weight = (part[rows] for part in self._rows)
        low = self._columns[:, first]
        band = low + weight[:, None] * (self._columns[:, second] - low)
        return np.rint(band).astype(np.int16)

    def band(self, rows: slice) -> Marks:
        """Return ``P`` for ``rows`` laid out as the images are, int16 ``(rows, W, c)``."""
        return np.ascontiguousarray(self.planes(rows).transpose(1, 2, 0))


def clipped_midpoints(photo: Pixels, marks: Marks) -> tuple[Indices | None, Pixels, Pixels]:
    """Return where ``clamp(x ± P)`` may clip, and its midpoint and parity there.

    The places are flat indices of ``photo`` (None where no level can clip). ``photo`` is
    C-ordered; ``marks`` broadcasts to its shape. Elsewhere the midpoint is
    ``x`` and the parity 0. The levels looked at are those within reach of 0 and 255
    (:func:`_near_ends`).
    """
    near, shift = _near_ends(photo, marks)
    if near is None:
        return None, _NONE, _NONE
    x = photo.reshape(-1)[near].astype(np.int16)
    total = np.clip(x + shift, 0, 255) + np.clip(x - shift, 0, 255)
    return near, (total >> 1).astype(np.uint8), (total & 1).astype(np.uint8)


def clipped_marks(midpoint: Pixels, parity: Pixels, marks: Marks) -> tuple[Indices | None, Pixels]:
    """Return where a level may have been clipped, and the half-difference ``v⁰ − m`` there.

    The places are flat indices of ``midpoint`` (None where none can have been), the
    half-differences modulo 256. Where no level was clipped the half-difference is
    ``P``. With ``P ≥ 0``: where ``m + P > 255``, ``v⁰`` was clipped at 255 and it is
    ``255 − m``; where ``m < P``, ``v¹`` was clipped at 0 and it is ``m + p``. With
    ``P < 0`` (``Q = −P``): where ``m < Q``, ``v⁰`` was clipped at 0 and it is ``−m``;
    where ``m + Q + p > 255``, ``v¹`` was clipped at 255 and it is ``m + p − 255``.
    ``midpoint`` is C-ordered, ``parity`` laid out as it is, ``marks`` broadcasts to
    their shape; the rule is evaluated only within reach of 0 and 255
    (:func:`_near_ends`: a midpoint farther than that is no clipped level's).
    """
    near, mark = _near_ends(midpoint, marks)
    if near is None:
        return None, _NONE
    m = midpoint.reshape(-1)[near].astype(np.int16)
    p = np.ascontiguousarray(parity).reshape(-1)[near].astype(np.int16)
    reach = np.abs(mark)
    up = mark >= 0
    bottom_down = ~up & (m < reach)
    value = mark.copy()
    value = np.where(up & (m + mark > 255), 255 - m, value)
    value = np.where(up & (m < mark), m + p, value)
    value = np.where(bottom_down, -m, value)
    value = np.where(~up & ~bottom_down & (m + reach + p > 255), m + p - 255, value)
    return near, (value & 0xFF).astype(np.uint8)


def _near_ends(levels: Pixels, marks: Marks) -> tuple[Indices | None, Marks]:
    """Return the flat indices of ``levels`` within ``|P|``'s reach of 0 or 255, and ``P`` there.

    Within reach: below the largest ``|P|``, or above 254 less it (a midpoint whose
    parity is one reaches 255 from one level lower). None (and no marks) when no level
    is. ``levels`` is C-ordered; ``marks`` broadcasts to its shape.
    """
    reach = max(int(marks.max(initial=0)), -int(marks.min(initial=0)))
    if reach == 0:
        return None, np.zeros(0, dtype=np.int16)
    flat = levels.reshape(-1)
    if reach > 127:
        near = np.arange(flat.size)
    else:  # v < reach or v > 254 − reach: (v − reach) modulo 256 ≥ 255 − 2·reach, one pass
        shifted = flat - np.uint8(reach)
        near = np.flatnonzero(shifted >= 255 - 2 * reach)
    if near.size == 0:
        return None, np.zeros(0, dtype=np.int16)
    if marks.shape == levels.shape:
        shift = marks.reshape(-1)[near]
    elif marks.shape == (1, *levels.shape[1:]):  # one plane for every channel
        shift = marks.reshape(-1)[near % marks.size]
    elif marks.shape == (*levels.shape[:-1], 1):  # one value for every channel
        shift = marks.reshape(-1)[near // levels.shape[-1]]
    else:
        shift = np.broadcast_to(marks, levels.shape)[np.unravel_index(near, levels.shape)]
    return near, shift.astype(np.int16)
