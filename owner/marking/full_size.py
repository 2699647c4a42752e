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
by one level from the whole-tensor path).

The working-resolution copy is made by torch's antialiased bilinear resize on the uint8
image (its fast path), rounded to whole levels like any image.
"""

from __future__ import annotations

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

    Each band is int16 (rows, width, C), channels last like the images.
    """
    delta = delta.detach().float().cpu()
    col_first, col_second, col_weight = _source_index(width, delta.shape[2])
    columns = torch.lerp(delta[:, :, col_first], delta[:, :, col_second], col_weight)
    columns = columns.permute(1, 2, 0).contiguous()  # (h, width, C)
    row_first, row_second, row_weight = _source_index(height, delta.shape[1])
    for top in range(0, height, BAND_ROWS):
        rows = slice(top, min(top + BAND_ROWS, height))
        band = torch.lerp(
            columns[row_first[rows]], columns[row_second[rows]], row_weight[rows, None, None]
        )
        yield rows, band.round_().to(torch.int16)


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
