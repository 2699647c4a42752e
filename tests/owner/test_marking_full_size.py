"""Carrying a photo's mark back to full size, band by band (``owner.marking.full_size``).

The bands are torch's bilinear upsampling (``align_corners=False``), rounded half to
even, computed a band of rows at a time: they must tile the image, agree with the whole
tensor upsampled at once (to a level, where a sum ordered otherwise falls on the other
side of a half), and both versions must be the photo plus and minus them, clamped.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch.nn import functional

from twinaudit.owner.marking.full_size import (
    BAND_ROWS,
    _band_pieces,
    _source_index,
    apply_upsampled,
    rounded_bands,
)

#: (height, width, working height, working width, channels): bands that end inside a
#: run of rows mixing the same two source rows, a last band shorter than the others,
#: one band, grey, and a working copy one row high.
SHAPES = [
    (3 * BAND_ROWS + 17, 301, 48, 64, 3),
    (2 * BAND_ROWS, 150, 37, 50, 3),
    (BAND_ROWS - 5, 90, 20, 30, 1),
    (5 * BAND_ROWS + 1, 70, 1, 64, 3),
]


def _delta(channels: int, height: int, width: int, seed: int) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return (torch.rand(channels, height, width, generator=generator) * 2 - 1) * 10


@pytest.mark.parametrize(("height", "width", "h", "w", "channels"), SHAPES)
def test_the_bands_tile_the_image_and_are_the_whole_upsampling_rounded(
    height, width, h, w, channels
):
    delta = _delta(channels, h, w, seed=height)
    whole = functional.interpolate(
        delta[None], size=(height, width), mode="bilinear", align_corners=False
    )[0]
    expected = whole.round().to(torch.int16).permute(1, 2, 0)
    bands = [(rows, band.clone()) for rows, band in rounded_bands(delta, height, width)]
    assert [rows.start for rows, _ in bands] == list(range(0, height, BAND_ROWS))
    assert bands[-1][0].stop == height
    got = torch.cat([band for _, band in bands])
    assert got.shape == expected.shape and got.dtype == torch.int16
    differ = (got != expected).float().mean().item()
    assert (got - expected).abs().max() <= 1
    assert differ <= 1e-3, differ  # a value within rounding of a half, now and then


def test_a_band_piece_mixes_one_pair_of_source_rows_and_stays_in_its_band():
    height = 4 * BAND_ROWS + 9
    first, second, _ = _source_index(height, 7)
    rows_seen = []
    for band, pieces in _band_pieces(first.numpy(), second.numpy()):
        assert band.start % BAND_ROWS == 0 and band.stop - band.start <= BAND_ROWS
        assert pieces[0][0].start == band.start and pieces[-1][0].stop == band.stop
        for piece, a, b in pieces:
            assert band.start <= piece.start < piece.stop <= band.stop
            assert set(first[piece].tolist()) == {a} and set(second[piece].tolist()) == {b}
            rows_seen.extend(range(piece.start, piece.stop))
    assert rows_seen == list(range(height))


def test_both_versions_are_the_photo_plus_and_minus_the_bands_clamped():
    height, width, channels = 2 * BAND_ROWS + 3, 97, 3
    rng = np.random.default_rng(0)
    photo = rng.integers(0, 256, size=(height, width, channels), dtype=np.uint8)
    photo[:5] = 0  # clamped below in one version, above in none
    photo[-5:] = 255
    delta = _delta(channels, 12, 24, seed=1)
    plus, minus = np.empty_like(photo), np.empty_like(photo)
    apply_upsampled(photo, delta, plus, minus)
    mark = np.concatenate([b.numpy().copy() for _, b in rounded_bands(delta, height, width)])
    wide = photo.astype(np.int16)
    assert np.array_equal(plus, np.clip(wide + mark, 0, 255))
    assert np.array_equal(minus, np.clip(wide - mark, 0, 255))
    assert np.abs(mark).max() <= 10
