"""The full-resolution work of marking, one image at a time, in bands of rows.

PGD finds a photo's mark δ at a working resolution (:attr:`MarkingConfig.work_scale`).
Carrying it back is the only work whose cost grows with the photo: δ is upsampled
bilinearly to full size (a convex combination, so |δ| ≤ ε still), rounded half to even,
and the two versions ``clamp(x + δ)`` and ``clamp(x − δ)`` are written as uint8. Done
on whole float tensors this costs many times the image in fresh memory (the issue #39
measurement: 8.6 GB for one batch of 4 MP photos, most of the time in the kernel
zeroing pages). Here it runs on :data:`BAND_ROWS` rows at a time, in int16, straight
into the caller's output arrays, so it adds a few megabytes whatever the photo's size.

The upsampling is torch's ``interpolate(mode="bilinear", align_corners=False)``
written as two separable passes (columns on the small δ, then rows band by band), the
same source coordinates and weights; the float sums are ordered differently, so a value
within rounding of a half may round the other way (measured: 1 pixel in 90,000 differs
by one level from the whole-tensor path). The rows of a band that mix the same two
source rows are computed at once from those two rows, broadcast rather than gathered
into copies: the same products bit for bit, a third less time than gathering.

The working-resolution copy is made by torch's antialiased bilinear resize on the uint8
image (its fast path), rounded to whole levels like any image.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Final

import numpy as np
import numpy.typing as npt
import torch
from torch.nn import functional

Pixels = npt.NDArray[np.uint8]

#: Rows of a full-resolution image processed at once (measured fastest on this CPU among
#: 16 to 1,024 rows at 12 MP: small bands stay in cache).
BAND_ROWS: Final = 64


def working_copy(image: Pixels, shape: tuple[int, int]) -> torch.Tensor:
    """Return one uint8 image (H, W, C) resized to ``shape`` as float (C, h, w), antialiased."""
    pixels = np.require(image, requirements=["C", "W"])
    channels_last = torch.from_numpy(pixels).permute(2, 0, 1)[None]
    small = functional.interpolate(
        channels_last, size=shape, mode="bilinear", align_corners=False, antialias=True
    )
    return small[0].float()


def _source_index(size_out: int, size_in: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Return, per output index, the two input indices and the weight of the second."""
    position = (torch.arange(size_out, dtype=torch.float64) + 0.5) * (size_in / size_out) - 0.5
    position = position.clamp(min=0.0)
    first = position.floor().long().clamp(max=size_in - 1)
    second = (first + 1).clamp(max=size_in - 1)
    return first, second, (position - first).float()


def rounded_bands(
    delta: torch.Tensor, height: int, width: int
) -> Iterator[tuple[slice, torch.Tensor]]:
    """Yield ``(rows, band)``: δ (C, h, w) upsampled to ``height`` × ``width``, rounded.

    Each band is int16 (rows, width, C), channels last like the images, and is
    overwritten by the next: use it before asking for another.
    """
    delta = delta.detach().float().cpu()
    channels = delta.shape[0]
    col_first, col_second, col_weight = _source_index(width, delta.shape[2])
    columns = torch.lerp(delta[:, :, col_first], delta[:, :, col_second], col_weight)
    columns = columns.permute(1, 2, 0).contiguous()  # (h, width, C)
    row_first, row_second, row_weight = _source_index(height, delta.shape[1])
    rows = min(BAND_ROWS, height)
    upsampled = torch.empty(rows, width, channels)
    rounded = torch.empty(rows, width, channels, dtype=torch.int16)
    for band, pieces in _band_pieces(row_first.numpy(), row_second.numpy()):
        for piece, first, second in pieces:
            count = piece.stop - piece.start
            # Expanded rows, not gathered copies: the same products, one pass fewer.
            torch.lerp(
                columns[first].expand(count, width, channels),
                columns[second].expand(count, width, channels),
                row_weight[piece, None, None],
                out=upsampled[piece.start - band.start : piece.stop - band.start],
            )
        size = band.stop - band.start
        rounded[:size].copy_(upsampled[:size].round_())
        yield band, rounded[:size]


def _band_pieces(
    first: npt.NDArray[np.int64], second: npt.NDArray[np.int64]
) -> Iterator[tuple[slice, list[tuple[slice, int, int]]]]:
    """Yield each band of rows with its pieces: rows that mix the same two source rows.

    ``first`` and ``second`` are, per output row, the source rows it interpolates.
    """
    height = len(first)
    changes = np.flatnonzero((np.diff(first) != 0) | (np.diff(second) != 0)) + 1
    edges = sorted({0, height, *range(BAND_ROWS, height, BAND_ROWS), *changes.tolist()})
    pieces: list[tuple[slice, int, int]] = []
    for start, stop in itertools.pairwise(edges):
        pieces.append((slice(start, stop), int(first[start]), int(second[start])))
        if stop % BAND_ROWS == 0 or stop == height:
            yield slice(pieces[0][0].start, stop), pieces
            pieces = []


def apply_band(image: Pixels, band: torch.Tensor, rows: slice, plus: Pixels, minus: Pixels) -> None:
    """Write ``clamp(x + δ)`` and ``clamp(x − δ)`` of ``rows`` into ``plus`` and ``minus``."""
    x = torch.from_numpy(image[rows]).to(torch.int16)
    torch.from_numpy(plus[rows]).copy_((x + band).clamp_(0, 255))
    torch.from_numpy(minus[rows]).copy_(x.sub_(band).clamp_(0, 255))


def apply_upsampled(image: Pixels, delta: torch.Tensor, plus: Pixels, minus: Pixels) -> None:
    """Carry δ (C, h, w) back to ``image``'s size and write both versions, band by band."""
    height, width = image.shape[:2]
    for rows, band in rounded_bands(delta, height, width):
        apply_band(image, band, rows, plus, minus)


def apply_rounded(image: Pixels, delta: npt.NDArray[np.int16], plus: Pixels, minus: Pixels) -> None:
    """Write ``clamp(x ± δ)`` of one image for an integer δ of its own size, band by band."""
    for top in range(0, image.shape[0], BAND_ROWS):
        rows = slice(top, top + BAND_ROWS)
        apply_band(image, torch.from_numpy(delta[rows]), rows, plus, minus)
