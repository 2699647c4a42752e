"""PGD at a working resolution (``MarkingConfig.work_scale``, issue #24 item 3).

A photo larger than ``work_scale`` × the extractor's side has its mark found on a
smaller copy and carried back: every pixel stays within ε, the twins stay as far apart
in the extractor's features as full-resolution PGD puts them, smaller images are marked
bit for bit as before, and vault records made before the field still read.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from twinaudit.owner.marking import MarkingConfig, feature_distances, make_marker
from twinaudit.owner.marking.config import LEGACY_WORK_SCALE, MAX_WORK_SCALE
from twinaudit.owner.marking.extractors import Extractor
from twinaudit.owner.marking.markers import PgdMarker
from twinaudit.protocol.encoding import decode, encode
from twinaudit.protocol.errors import InputError, ParameterError

SEED = bytes(range(32))
SIDE = 16


def _extractor() -> Extractor:
    torch.manual_seed(0)
    net = nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(4), nn.Flatten()
    )
    return Extractor(net, input_size=SIDE)


def _marker(work_scale: int) -> PgdMarker:
    # The free mark: the working resolution alone is compared with full size here (the
    # neutral mark's cost is measured in test_marking_neutral.py and bench perceptual).
    config = MarkingConfig(
        input_size=SIDE, work_scale=work_scale, steps=3, step_size=4.0, neutral_mark=False
    )
    marker = make_marker(config, SEED, device="cpu", extractor=_extractor())
    assert isinstance(marker, PgdMarker)
    return marker


def _photo(height: int, width: int) -> np.ndarray:
    rng = np.random.default_rng(height * 7 + width)
    ys, xs = np.mgrid[0:height, 0:width]
    base = 128 + 60 * np.sin(xs / 9.0)[..., None] * np.cos(ys / 13.0)[..., None]
    noise = rng.normal(0, 5, size=(height, width, 3))
    return np.clip(base + noise, 0, 255).astype(np.uint8)[None]


def test_the_working_shape_keeps_the_aspect_and_leaves_small_images_alone():
    marker = _marker(2)
    assert marker.work_shape(32, 32) == (32, 32)  # not above 2 × 16
    assert marker.work_shape(20, 30) == (20, 30)
    assert marker.work_shape(120, 160) == (24, 32)
    assert marker.work_shape(1000, 10) == (32, 1)
    assert _marker(0).work_shape(120, 160) == (120, 160)


def test_a_large_photo_is_marked_within_epsilon_and_as_far_apart():
    photo = _photo(120, 160)
    eps = MarkingConfig().epsilon
    working, full = _marker(2), _marker(0)
    v0, v1 = working.mark(photo, 0)
    for version in (v0, v1):
        assert np.abs(version.astype(int) - photo).max() <= eps
    assert (v0 != v1).mean() > 0.5  # a mark everywhere, not on a few pixels
    near = feature_distances(working.extractor, v0, v1).mean()
    far = feature_distances(full.extractor, *full.mark(photo, 0)).mean()
    assert near >= 0.8 * far, (near, far)
    again = working.mark(photo, 0)
    assert all(np.array_equal(a, b) for a, b in zip((v0, v1), again, strict=True))


def test_small_images_are_marked_bit_for_bit_as_at_full_resolution():
    photo = _photo(24, 32)
    assert all(
        np.array_equal(a, b)
        for a, b in zip(_marker(2).mark(photo, 5), _marker(0).mark(photo, 5), strict=True)
    )


def test_records_without_the_field_read_as_full_resolution():
    legacy = MarkingConfig(work_scale=LEGACY_WORK_SCALE)
    record = legacy.to_value()
    assert "work_scale" not in record  # what vaults recorded before the field
    assert MarkingConfig.from_value(decode(encode(record))) == legacy
    current = MarkingConfig()
    assert current.work_scale == 2 and current.to_value()["work_scale"] == 2
    assert MarkingConfig.from_value(decode(encode(current.to_value()))) == current
    with pytest.raises(ParameterError):
        MarkingConfig(work_scale=-1)


@pytest.mark.parametrize(
    ("work_scale", "error"),
    [
        (0, InputError),  # 0 is recorded by leaving the field out: one record per config
        (-1, ParameterError),
        (MAX_WORK_SCALE + 1, ParameterError),
        ("2", InputError),
        (2.0, InputError),
        (None, InputError),
    ],
)
def test_a_bad_recorded_work_scale_is_a_typed_error(work_scale, error):
    record = MarkingConfig().to_value()
    record["work_scale"] = work_scale
    with pytest.raises(error):
        MarkingConfig.from_value(record)
