"""Perturbation families (spec draft §10.3): PRG draws, ranges, fallback, exact pixel maths."""

import math

import numpy as np
import pytest

from twinaudit.protocol.errors import InputError, ParameterError
from twinaudit.protocol.prg import Prg
from twinaudit.verifier.scoring.augment import (
    CROP_ATTEMPTS,
    FAMILIES,
    LOG_RATIO,
    apply,
    crop_size,
    draw_params,
    perturb,
    resize_bilinear,
    stream_label,
    to_unit,
)

SEED = bytes(range(32))


def _image(h=6, w=5, c=3, seed=0):
    return np.random.default_rng(seed).random((h, w, c))


@pytest.mark.parametrize("family", FAMILIES)
def test_draws_are_a_function_of_the_stream(family):
    a = draw_params(family, Prg(SEED, "augment/3/1"), 28, 28, 16)
    b = draw_params(family, Prg(SEED, "augment/3/1"), 28, 28, 16)
    assert a == b
    assert len(a) == 16
    if family != "none":
        assert a != draw_params(family, Prg(SEED, "augment/3/0"), 28, 28, 16)


def test_none_draws_nothing():
    prg = Prg(SEED, "x")
    assert draw_params("none", prg, 4, 4, 3) == [{"family": "none"}] * 3
    assert prg.consumed == 0


def test_stream_label():
    assert stream_label(0, 1) == "augment/0/1"
    assert stream_label(1234, 0) == "augment/1234/0"
    for bad in [(-1, 0), (1, 2), (True, 0), (1, True), (1.0, 0)]:
        with pytest.raises(ParameterError):
            stream_label(*bad)


def test_crop_draw_order_matches_the_documented_procedure():
    # Re-derive copy by copy from a second stream: s, r per attempt, then top, left.
    height, width = 20, 30
    params = draw_params("random-resized-crop", Prg(SEED, "crop"), height, width, 32)
    ref = Prg(SEED, "crop")
    for p in params:
        for _ in range(CROP_ATTEMPTS):
            s = ref.uniform_range(0.8, 1.0)
            r = ref.uniform_range(math.log(0.75), math.log(4 / 3))
            w = round(math.sqrt(height * width * s * math.exp(r)))
            h = round(math.sqrt(height * width * s / math.exp(r)))
            if 1 <= w <= width and 1 <= h <= height:
                expected = {
                    "top": ref.randint(0, height - h),
                    "left": ref.randint(0, width - w),
                    "height": h,
                    "width": w,
                }
                break
        else:  # 30 / 20 > 4/3: full height, width rint(20 · 4/3) = 27, centred
            expected = {"top": 0, "left": 1, "height": 20, "width": 27}
        assert p == {"family": "random-resized-crop", **expected}
    assert any(p["width"] != 27 for p in params)
    assert any(p["width"] == 27 for p in params)


def test_pad_shift_flip_draw_order():
    params = draw_params("pad-shift-flip", Prg(SEED, "psf"), 28, 28, 50)
    ref = Prg(SEED, "psf")
    for p in params:
        assert p == {
            "family": "pad-shift-flip",
            "top": ref.randint(0, 8),
            "left": ref.randint(0, 8),
            "flip": ref.coin(),
        }
    assert {p["flip"] for p in params} == {True, False}
    assert {p["top"] for p in params} <= set(range(9))


@pytest.mark.parametrize(
    ("height", "width", "fallback"),
    [(224, 224, (224, 224)), (200, 300, (200, 267)), (300, 200, (267, 200)), (28, 28, (28, 28))],
)
def test_crop_parameters_in_range(height, width, fallback):
    params = draw_params("random-resized-crop", Prg(SEED, f"{height}x{width}"), height, width, 256)
    drawn = 0
    for p in params:
        h, w = p["height"], p["width"]
        assert 1 <= h <= height
        assert 1 <= w <= width
        assert 0 <= p["top"] <= height - h
        assert 0 <= p["left"] <= width - w
        if (h, w) != fallback:  # an accepted attempt: area and aspect were drawn in range
            drawn += 1
            assert 0.8 - 0.02 <= h * w / (height * width) <= 1.0 + 0.02
            assert 0.75 - 0.05 <= w / h <= 4 / 3 + 0.05
    assert drawn > 0
    if height == width:  # on squares the draws spread over the whole range
        areas = [p["height"] * p["width"] / (height * width) for p in params]
        assert min(areas) < 0.83
        assert max(areas) > 0.95


def test_log_ratio_constants_are_the_documented_binary64_values():
    assert LOG_RATIO[0].hex() == "-0x1.269621134db92p-2"
    assert LOG_RATIO[1].hex() == "0x1.269621134db91p-2"


@pytest.mark.parametrize(
    ("height", "width", "box"),
    [
        (4, 100, {"top": 0, "left": 47, "height": 4, "width": 5}),  # wide: w = rint(4·4/3)
        (100, 4, {"top": 47, "left": 0, "height": 5, "width": 4}),  # tall: h = rint(4/0.75)
        (3, 60, {"top": 0, "left": 28, "height": 3, "width": 4}),
    ],
)
def test_crop_fallback_is_the_centre_crop(height, width, box):
    prg = Prg(SEED, "fallback")
    (params,) = draw_params("random-resized-crop", prg, height, width, 1)
    assert params == {"family": "random-resized-crop", **box}
    assert prg.consumed == CROP_ATTEMPTS * 2 * 8  # ten attempts of two uniforms, no randint


class _AlwaysTooBig(Prg):
    """A stream whose every uniform is just below 1: area 1.0, aspect 4/3 (rejected on squares)."""

    def uniform(self):
        self.u64()
        return 1.0 - 2.0**-53


def test_crop_fallback_inside_the_ratio_range_is_the_whole_image():
    params = draw_params("random-resized-crop", _AlwaysTooBig(SEED, "big"), 10, 10, 2)
    assert (
        params
        == [{"family": "random-resized-crop", "top": 0, "left": 0, "height": 10, "width": 10}] * 2
    )
    image = _image(10, 10, 1)
    assert np.array_equal(apply(image, params[0]), image.astype(np.float32))


@pytest.mark.parametrize("channels", [1, 3])
def test_full_image_crop_is_the_identity(channels):
    image = _image(7, 9, channels)
    params = {"family": "random-resized-crop", "top": 0, "left": 0, "height": 7, "width": 9}
    out = apply(image, params)
    assert out.dtype == np.float32
    assert out.shape == (7, 9, channels)
    assert np.array_equal(out, image.astype(np.float32))
    assert np.array_equal(apply(image, {"family": "none"}), image.astype(np.float32))


def test_pad_shift_flip_by_hand():
    image = np.array([[0.1, 0.2], [0.3, 0.4], [0.5, 0.6]])[..., None]  # 3 x 2 x 1
    # Padded 11 x 10; the window at (top 4, left 5) covers padded rows 4..6, cols 5..6:
    # image rows 0..2, image col 1 then the zero column; flipped left-right.
    out = apply(image, {"family": "pad-shift-flip", "top": 4, "left": 5, "flip": True})
    expected = np.array([[0.0, 0.2], [0.0, 0.4], [0.0, 0.6]], dtype=np.float32)[..., None]
    assert np.array_equal(out, expected)
    # (top 3, left 4): padded rows 3..5 = a zero row and image rows 0..1; cols = image cols.
    out = apply(image, {"family": "pad-shift-flip", "top": 3, "left": 4, "flip": False})
    expected = np.array([[0.0, 0.0], [0.1, 0.2], [0.3, 0.4]], dtype=np.float32)[..., None]
    assert np.array_equal(out, expected)
    centred = apply(image, {"family": "pad-shift-flip", "top": 4, "left": 4, "flip": False})
    assert np.array_equal(centred, image.astype(np.float32))
    assert np.array_equal(
        apply(image, {"family": "pad-shift-flip", "top": 8, "left": 8, "flip": False}),
        np.zeros((3, 2, 1), np.float32),
    )


def _direct_bilinear(image, out_h, out_w):
    in_h, in_w = image.shape[:2]
    out = np.zeros((out_h, out_w, image.shape[2]))
    for y in range(out_h):
        sy = max((y + 0.5) * (in_h / out_h) - 0.5, 0.0)
        y0 = min(math.floor(sy), in_h - 1)
        y1, ly = min(y0 + 1, in_h - 1), sy - y0
        for x in range(out_w):
            sx = max((x + 0.5) * (in_w / out_w) - 0.5, 0.0)
            x0 = min(math.floor(sx), in_w - 1)
            x1, lx = min(x0 + 1, in_w - 1), sx - x0
            top = image[y0, x0] * (1 - lx) + image[y0, x1] * lx
            bottom = image[y1, x0] * (1 - lx) + image[y1, x1] * lx
            out[y, x] = top * (1 - ly) + bottom * ly
    return out


def test_bilinear_known_values():
    image = np.array([[0.0, 1.0], [2.0, 3.0]])[..., None]
    expected = np.array(
        [[0, 0.25, 0.75, 1], [0.5, 0.75, 1.25, 1.5], [1.5, 1.75, 2.25, 2.5], [2, 2.25, 2.75, 3]]
    )[..., None]
    assert np.array_equal(resize_bilinear(image, 4, 4), expected)


@pytest.mark.parametrize(
    ("shape", "out"),
    [
        ((3, 4, 1), (5, 7)),
        ((5, 5, 3), (8, 6)),
        ((7, 3, 2), (3, 9)),
        ((1, 1, 1), (3, 2)),
        ((6, 6, 1), (6, 6)),
    ],
)
def test_bilinear_equals_the_direct_formula(shape, out):
    image = np.random.default_rng(sum(shape)).random(shape)
    assert np.array_equal(resize_bilinear(image, *out), _direct_bilinear(image, *out))


def test_bilinear_agrees_with_torch():
    torch = pytest.importorskip("torch")
    image = np.random.default_rng(5).random((9, 11, 3))
    for out in [(28, 28), (9, 11), (5, 20)]:
        ours = resize_bilinear(image, *out)
        theirs = (
            torch.nn.functional.interpolate(
                torch.from_numpy(image).permute(2, 0, 1)[None],
                size=out,
                mode="bilinear",
                align_corners=False,
                antialias=False,
            )[0]
            .permute(1, 2, 0)
            .numpy()
        )
        np.testing.assert_allclose(ours, theirs, rtol=0, atol=1e-12)


def test_crop_then_resize():
    image = _image(8, 8, 3, seed=3)
    params = {"family": "random-resized-crop", "top": 1, "left": 2, "height": 6, "width": 5}
    out = apply(image, params)
    expected = _direct_bilinear(image[1:7, 2:7], 8, 8).astype(np.float32)
    assert np.array_equal(out, expected)


def test_perturb_stacks_copies_and_stays_in_unit_range():
    pixels = np.random.default_rng(1).integers(0, 256, (28, 28, 1), dtype=np.uint8)
    image = to_unit(pixels)
    assert image.dtype == np.float64
    assert image.max() <= 1.0
    assert np.array_equal(image, pixels / 255.0)
    for family in FAMILIES:
        params = draw_params(family, Prg(SEED, family), 28, 28, 8)
        copies = perturb(image, params)
        assert copies.shape == (8, 28, 28, 1)
        assert copies.dtype == np.float32
        assert copies.min() >= 0.0
        assert copies.max() <= 1.0
        assert np.array_equal(copies[3], apply(image, params[3]))


@pytest.mark.parametrize(
    ("args", "error"),
    [
        (("blur", 28, 28, 1), ParameterError),
        (("none", 28, 28, 0), ParameterError),
        (("none", 28, 28, 257), ParameterError),
        (("none", 28, 28, True), ParameterError),
        (("none", 0, 28, 1), ParameterError),
        (("none", 28, 4097, 1), ParameterError),
        (("none", 28.0, 28, 1), ParameterError),
    ],
)
def test_draw_params_rejects(args, error):
    family, h, w, k = args
    with pytest.raises(error):
        draw_params(family, Prg(SEED, "x"), h, w, k)


@pytest.mark.parametrize(
    "params",
    [
        {"family": "blur"},
        {},
        {"family": "none", "extra": 1},
        {"family": "random-resized-crop", "top": 0, "left": 0, "height": 7},
        {"family": "random-resized-crop", "top": 0, "left": 0, "height": 8, "width": 5},
        {"family": "random-resized-crop", "top": 1, "left": 0, "height": 7, "width": 5},
        {"family": "random-resized-crop", "top": 0, "left": 0, "height": 0, "width": 5},
        {"family": "random-resized-crop", "top": 0, "left": 0, "height": 7.0, "width": 5},
        {"family": "random-resized-crop", "top": False, "left": 0, "height": 7, "width": 5},
        {"family": "pad-shift-flip", "top": 9, "left": 0, "flip": False},
        {"family": "pad-shift-flip", "top": -1, "left": 0, "flip": False},
        {"family": "pad-shift-flip", "top": 0, "left": 0, "flip": 1},
        {"family": "pad-shift-flip", "top": 0, "left": 0},
    ],
)
def test_apply_rejects_malformed_parameters(params):
    with pytest.raises(ParameterError):
        apply(_image(7, 5, 3), params)


@pytest.mark.parametrize(
    "image",
    [
        np.full((4, 4, 1), np.nan),
        np.full((4, 4, 1), 1.5),
        np.full((4, 4, 1), -0.1),
        np.zeros((4, 4, 1), dtype=np.float32),
        np.zeros((4, 4, 2)),
        np.zeros((4, 4)),
    ],
)
def test_apply_rejects_malformed_images(image):
    with pytest.raises(InputError):
        apply(image, {"family": "none"})


def test_to_unit_rejects_non_uint8():
    with pytest.raises(InputError):
        to_unit(np.zeros((2, 2, 1), dtype=np.float64))


# --- The -v2 crops: the same draws without libm (spec §10.3, issue #20) ---------------------

V2 = ("random-resized-crop-v2", "random-resized-crop-flip-v2", "simclr-crop-flip-v2")


@pytest.mark.parametrize("family", V2)
def test_v2_crop_draw_order_matches_the_documented_procedure(family):
    """Per attempt s, then t; w and h by + − × ÷ sqrt only; then top, left, flip."""
    height, width = 20, 30
    params = draw_params(family, Prg(SEED, "crop-v2"), height, width, 32)
    low = 0.08 if family.startswith("simclr") else 0.8
    ref = Prg(SEED, "crop-v2")
    for p in params:
        for _ in range(CROP_ATTEMPTS):
            s = ref.uniform_range(low, 1.0)
            t = ref.uniform_range(-1.0, 1.0)
            area = float(height * width) * s
            w = round(math.sqrt((area * (7.0 + t)) / (7.0 - t)))
            h = round(math.sqrt((area * (7.0 - t)) / (7.0 + t)))
            if 0 < w <= width and 0 < h <= height:
                expected = {"family": family, "top": ref.randint(0, height - h)}
                expected |= {"left": ref.randint(0, width - w), "height": h, "width": w}
                break
        else:  # the centred crop: W/H = 1.5 > 4/3, so h = H and w = rint(H·4/3) = 27
            expected = {"family": family, "top": 0, "left": 1, "height": 20, "width": 27}
        if family != "random-resized-crop-v2":
            expected["flip"] = ref.coin()
        assert p == expected


@pytest.mark.parametrize("family", V2)
def test_v2_crops_call_no_libm_function(family, monkeypatch):
    import twinaudit.verifier.scoring.augment as module

    def refuse(*_):
        raise AssertionError("libm")

    for name in ("exp", "log", "pow", "log1p", "expm1"):
        monkeypatch.setattr(module.math, name, refuse)
    draw_params(family, Prg(SEED, "libm"), 28, 28, 64)
    draw_params(family, Prg(SEED, "libm"), 2, 7, 16)  # the centred crop too
    with pytest.raises(AssertionError, match="libm"):
        draw_params(family.removesuffix("-v2"), Prg(SEED, "libm"), 28, 28, 1)


def test_crop_size_by_hand():
    # t = 0: a = b = 7, a square of side rint(sqrt(A·s)).
    assert crop_size("random-resized-crop-v2", 28 * 28, 1.0 - 2.0**-53, 0.5) == (28, 28)
    assert crop_size("simclr-crop-flip-v2", 100, 0.0, 0.5) == (3, 3)  # sqrt(8) = 2.83
    # t = -1: aspect 6/8 exactly; A·s = 1200·0.8 = 960: w = rint(sqrt(720)) = 27 (26.83),
    # h = rint(sqrt(1280)) = 36 (35.78).
    assert crop_size("random-resized-crop-flip-v2", 1200, 0.0, 0.0) == (27, 36)
    for bad in (
        ("random-resized-crop", 100, 0.5, 0.5),  # libm's family
        ("random-resized-crop-v2", 0, 0.5, 0.5),
        ("random-resized-crop-v2", 100, 1.0, 0.5),
        ("random-resized-crop-v2", 100, 0.5, -0.1),
    ):
        with pytest.raises(ParameterError):
            crop_size(*bad)


def test_v2_aspect_ratios_cover_the_paper_range_nearly_log_uniformly():
    """a/b = (7 + t)/(7 − t) spans [3/4, 4/3); ln(a/b) = 2·artanh(t/7) within 2.1 % of uniform."""
    prg = Prg(SEED, "aspect")
    logs = []
    for _ in range(20_000):
        t = prg.uniform_range(-1.0, 1.0)
        logs.append(math.log((7.0 + t) / (7.0 - t)))
    assert min(logs) >= LOG_RATIO[0] - 1e-12 and max(logs) <= LOG_RATIO[1] + 1e-12
    counts, _ = np.histogram(logs, bins=8, range=LOG_RATIO)
    assert counts.min() > 0.95 * counts.mean() and counts.max() < 1.05 * counts.mean()
