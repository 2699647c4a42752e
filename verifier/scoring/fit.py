"""Fitting an image to the model's declared input (spec §10.2 step 5, rule ``area``).

A claim whose map carries ``"input_fit": "area"`` sends every image query at the
Describe map's ``input_shape`` ``(H, W, C)``: each version's image is first converted
to that shape, exactly, in integers, and its copies are then drawn from the converted
image as from any image of that shape (§10.3, §10.4, §10.6).

The rule is area averaging with one rounding. Along an axis of ``n`` input and ``m``
output pixels, output ``d`` covers ``[d·n/m, (d+1)·n/m)`` of the input, so input pixel
``i`` has the integer weight ``a(d, i) = max(0, min((i+1)·m, (d+1)·n) − max(i·m, d·n))``
(its overlap, in units of ``1/m``), and the weights of an output add up to ``n``. A
colour image becomes grey by the weights ``(19595, 38470, 7471)`` over 65536 (ITU-R
BT.601 luma, as common image libraries compute it), a grey image becomes colour by
repeating its channel. With ``N`` the exact integer sum over the input pixels and
channels of ``a_y · a_x · g · P`` and ``D = h·w·G`` (``G`` 65536 from colour to grey,
1 otherwise), the output intensity is ``⌊(2N + D) / (2D)⌋``: the exact weighted mean,
rounded to nearest with halves up. An image already of the input shape is unchanged.
"""

from __future__ import annotations

from typing import Final

import numpy as np
import numpy.typing as npt

from twinaudit.protocol.errors import InputError
from twinaudit.protocol.items import MAX_IMAGE_SIDE

#: The one fitting rule (the value of the claim map's ``input_fit``).
AREA: Final = "area"
#: Colour to grey: the weights of R, G and B, over :data:`GREY_SCALE`.
GREY_WEIGHTS: Final = (19595, 38470, 7471)
GREY_SCALE: Final = 65536

U8Image = npt.NDArray[np.uint8]
I64Array = npt.NDArray[np.int64]


def _area_sums(values: npt.NDArray[np.generic], axis: int, m: int) -> I64Array:
    """Return ``Σ_i a(d, i)·values_i`` along ``axis`` for ``d`` in ``0..m−1`` (exact, int64)."""
    n = values.shape[axis]
    moved = np.moveaxis(values, axis, 0)
    out = np.empty((m, *moved.shape[1:]), dtype=np.int64)
    for d in range(m):
        lo, hi = d * n, (d + 1) * n
        first, last = lo // m, (hi - 1) // m
        total = m * moved[first : last + 1].sum(axis=0, dtype=np.int64)
        total -= (lo - first * m) * moved[first].astype(np.int64)
        total -= ((last + 1) * m - hi) * moved[last].astype(np.int64)
        out[d] = total
    return np.moveaxis(out, 0, axis)


def fit_image(pixels: U8Image, shape: tuple[int, int, int]) -> U8Image:
    """Return ``pixels`` (uint8, (h, w, c)) converted to ``shape`` (H, W, C) by rule ``area``."""
    if not isinstance(pixels, np.ndarray) or pixels.dtype != np.uint8 or pixels.ndim != 3:
        raise InputError("pixels must be a uint8 array of shape (H, W, C)")
    height, width, channels = shape
    if not (1 <= height <= MAX_IMAGE_SIDE and 1 <= width <= MAX_IMAGE_SIDE and channels in (1, 3)):
        raise InputError(f"input shape {shape} outside 1..{MAX_IMAGE_SIDE} x C in {{1, 3}}")
    h, w, c = pixels.shape
    if c not in (1, 3):
        raise InputError(f"an image has 1 or 3 channels, not {c}")
    if (h, w, c) == (height, width, channels):
        return pixels
    sums = _area_sums(_area_sums(pixels, 0, height), 1, width)
    denominator = h * w
    if c == 3 and channels == 1:
        red, green, blue = GREY_WEIGHTS
        sums = red * sums[..., 0:1] + green * sums[..., 1:2] + blue * sums[..., 2:3]
        denominator *= GREY_SCALE
    elif c == 1 and channels == 3:
        sums = np.repeat(sums, 3, axis=2)
    fitted = (2 * sums + denominator) // (2 * denominator)
    return np.ascontiguousarray(fitted.astype(np.uint8))
