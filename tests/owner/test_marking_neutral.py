"""Issue #39 part 2: the mark of a large photo casts no colour, and inspect says how it looks.

On an image marked at a working resolution, PGD keeps δ grey and of mean zero
(``MarkingConfig.neutral_mark``); images marked at their own size are untouched; a
record without the field reads as the free mark it was made with; the perceptual
measures (CIEDE2000, SSIM, colour cast) measure what they say.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

from tests.support.photos import photo, write_photos
from twinaudit.owner.images.perceptual import MAX_MEASURED_PIXELS, PerceptualCheck
from twinaudit.owner.images.sources import open_source
from twinaudit.owner.inspect import inspect_vault
from twinaudit.owner.mark import mark
from twinaudit.owner.marking import MarkingConfig, make_marker
from twinaudit.owner.marking.extractors import Extractor
from twinaudit.owner.marking.markers import neutral_projection
from twinaudit.protocol.errors import InputError

SEED = bytes(range(32))
SIDE = 16


def _marker(neutral: bool, work_scale: int = 2):
    torch.manual_seed(0)
    net = nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(4), nn.Flatten()
    )
    config = MarkingConfig(
        input_size=SIDE, work_scale=work_scale, steps=3, step_size=4.0, neutral_mark=neutral
    )
    return make_marker(config, SEED, device="cpu", extractor=Extractor(net, input_size=SIDE))


def test_a_large_photo_gets_a_grey_mark_of_mean_zero_and_a_free_one_does_not():
    image = np.clip(photo(120, 160, 3).astype(int) // 2 + 64, 0, 255).astype(np.uint8)[None]
    version0, version1 = _marker(neutral=True).mark(image, 0)
    change = version0.astype(int) - image
    assert np.abs(change).max() <= 10 and (version0 != version1).mean() > 0.5
    assert np.array_equal(change[..., 0], change[..., 1])  # no pixel is clipped here
    assert np.array_equal(change[..., 0], change[..., 2])
    assert np.abs(change.reshape(-1, 3).mean(axis=0)).max() < 0.5
    free = _marker(neutral=False).mark(image, 0)[0].astype(int) - image
    assert not np.array_equal(free[..., 0], free[..., 1])


def test_small_images_are_marked_as_before_whatever_the_setting():
    image = photo(24, 32, 5)[None]
    for a, b in zip(_marker(True).mark(image, 2), _marker(False).mark(image, 2), strict=True):
        assert np.array_equal(a, b)


def test_the_projection_is_grey_zero_mean_and_in_the_box():
    delta = torch.rand(2, 3, 12, 9) * 30 - 10
    projected = neutral_projection(delta, 10.0)
    assert projected.abs().max() <= 10.0
    assert torch.equal(projected[:, 0], projected[:, 2])
    assert projected.mean(dim=(2, 3)).abs().max() < 0.5


@pytest.mark.parametrize("recorded", [False, 1, "yes", None])
def test_a_bad_recorded_neutral_mark_is_a_typed_error(recorded):
    record = MarkingConfig().to_value()
    record["neutral_mark"] = recorded
    with pytest.raises(InputError):
        MarkingConfig.from_value(record)


def test_the_perceptual_measures_measure_what_they_say():
    image = photo(48, 64, 1)
    same = PerceptualCheck()
    same.add(image, image)
    unchanged = same.result()
    assert unchanged is not None
    assert unchanged.delta_e_mean == 0 and unchanged.cast == 0 and unchanged.ssim_min == 1.0
    redder = image.copy()
    redder[..., 0] = np.clip(image[..., 0].astype(int) + 6, 0, 255)
    cast = PerceptualCheck()
    cast.add(image, redder)
    shifted = cast.result()
    assert shifted is not None and 5.0 < shifted.cast <= 6.0
    assert shifted.delta_e_mean > 1.0 and shifted.within_default is False
    assert "ABOVE the default mark's bounds" in shifted.text()
    small = PerceptualCheck()
    small.add(image, redder, photo=False)  # not marked at a working resolution
    measured = small.result()
    assert measured is not None and measured.within_default is None
    assert "are for photos marked at a working resolution" in measured.text()
    assert PerceptualCheck().result() is None


def test_a_measure_above_the_bounds_names_the_worst_images():
    image = photo(48, 64, 1)
    redder = image.copy()
    redder[..., 0] = np.clip(image[..., 0].astype(int) + 6, 0, 255)
    rng = np.random.default_rng(1)
    noisy = np.clip(image.astype(int) + rng.integers(-40, 41, image.shape), 0, 255)
    check = PerceptualCheck()
    check.add(image, image, name="calm.jpg")
    check.add(image, redder, name="pink.jpg")
    check.add(image, noisy.astype(np.uint8), name="grainy.jpg")
    measured = check.result()
    assert measured is not None and measured.within_default is False
    assert (measured.cast_image, measured.worst_delta_e_image) == ("pink.jpg", "grainy.jpg")
    text = measured.text()
    assert "the largest cast is pink.jpg's" in text and "the largest mean dE grainy.jpg's" in text
    assert measured.to_value()["colour_cast_image"] == "pink.jpg"
    within = PerceptualCheck()
    within.add(image, image, name="calm.jpg")
    assert "calm.jpg" not in within.result().text()  # named only when above the bounds


def test_a_large_photo_is_measured_on_bands_and_a_grey_image_as_grey():
    height = MAX_MEASURED_PIXELS // 512 + 200
    image = photo(height, 512, 2)
    noisy = np.clip(
        image.astype(int) + np.random.default_rng(0).integers(-2, 3, image.shape), 0, 255
    )
    check = PerceptualCheck()
    check.add(image, noisy.astype(np.uint8))
    grey = image[..., :1]
    check.add(grey, grey)
    measured = check.result()
    assert measured is not None and measured.images == 2
    assert 0 < measured.delta_e_mean < 3 and measured.ssim_min < 1.0


def test_inspect_reports_the_perceptual_measures_next_to_the_epsilon_check(tmp_path):
    folder = tmp_path / "photos"
    write_photos(folder, 3, 40, 56)
    config = MarkingConfig(marker="bernoulli", batch_size=2)  # two chunks to line up
    result = mark(open_source(folder), tmp_path / "vault", config, secret=SEED)
    report = inspect_vault(result.vault, source=open_source(folder), distance_pairs=0)
    assert report.epsilon is not None and report.epsilon.holds
    measured = report.perceptual
    assert measured is not None and measured.images == 6
    assert measured.delta_e_mean > 3  # ±10 noise in every pixel shows
    assert measured.within_default is None  # noise marks: the bounds are PGD's on photos
    text = report.to_text()
    assert "epsilon check" in text and "perceptual: CIEDE2000" in text
    assert report.to_value()["perceptual"]["images"] == 6


def test_a_photo_with_a_colour_profile_is_measured_in_the_colours_it_shows():
    skimage = pytest.importorskip("skimage")
    from PIL import Image, ImageCms

    with Image.open(Path(skimage.__file__).parent / "data" / "rocket.jpg") as rocket:
        adobe = rocket.info["icc_profile"]  # Adobe RGB (1998)
    image = photo(48, 64, 3)
    greener = image.copy()
    greener[..., 1] = np.clip(image[..., 1].astype(int) + 6, 0, 255)

    def measured(original, version, profile):
        check = PerceptualCheck()
        check.add(original, version, profile=profile)
        result = check.result()
        assert result is not None
        return result

    assert measured(image, image, adobe).delta_e_mean == 0
    as_srgb = measured(image, greener, None)
    as_adobe = measured(image, greener, adobe)
    # The same six levels of green are a larger step in Adobe RGB's wider gamut.
    assert as_adobe.delta_e_mean > as_srgb.delta_e_mean * 1.05
    assert as_adobe.cast == as_srgb.cast  # the cast stays in the file's levels
    # A profile LittleCMS cannot use for RGB (here CIELAB's), and a grey image: as sRGB.
    lab = ImageCms.ImageCmsProfile(ImageCms.createProfile("LAB")).tobytes()
    assert measured(image, greener, lab).delta_e_mean == as_srgb.delta_e_mean
    grey = image[..., :1]
    lighter = np.clip(grey.astype(int) + 6, 0, 255).astype(np.uint8)
    assert measured(grey, lighter, adobe).delta_e_mean == measured(grey, lighter, None).delta_e_mean
