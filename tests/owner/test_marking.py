"""Marking: the ε bound, determinism, PGD's gain, input checks, config records."""

from __future__ import annotations

import math
import subprocess
import sys

import numpy as np
import pytest
import torch
from torch import nn

from twinaudit.owner.marking import MarkingConfig, feature_distances, load_extractor, make_marker
from twinaudit.owner.marking.extractors import Extractor
from twinaudit.owner.marking.markers import PgdMarker
from twinaudit.protocol.encoding import decode, encode
from twinaudit.protocol.errors import InputError, NotFoundError, ParameterError

SEED = bytes(range(32))
OTHER_SEED = bytes(range(1, 33))
EPS = 10


def tiny_extractor() -> nn.Module:
    """A fixed two-layer conv net (weights from a local generator, not the global RNG)."""
    generator = torch.Generator().manual_seed(7)
    net = nn.Sequential(
        nn.Conv2d(3, 8, 3, stride=2, padding=1),
        nn.ReLU(),
        nn.Conv2d(8, 8, 3, stride=2, padding=1),
        nn.AdaptiveAvgPool2d(2),
    )
    with torch.no_grad():
        for parameter in net.parameters():
            parameter.copy_(torch.randn(parameter.shape, generator=generator) * 0.5)
    return net


def tiny_as_extractor() -> Extractor:
    return Extractor(tiny_extractor(), input_size=None, rgb=True)


def returns_int() -> int:
    return 3


def raises() -> nn.Module:
    raise RuntimeError("no model today")


TINY = f"{__name__}:tiny_extractor"


def config(marker: str = "pgd", **overrides: object) -> MarkingConfig:
    base: dict[str, object] = {
        "marker": marker,
        "epsilon": EPS,
        "extractor": TINY,
        "steps": 3,
        "step_size": 4.0,
        "batch_size": 4,
        "input_size": 16,
    }
    base.update(overrides)
    return MarkingConfig(**base)


def images(n: int = 6, side: int = 8, channels: int = 1, seed: int = 0) -> np.ndarray:
    """Images mixing extremes (0, 1, 254, 255 — where clamping bites) with mid-range noise."""
    rng = np.random.default_rng(seed)
    px = rng.integers(0, 256, size=(n, side, side, channels), dtype=np.uint8)
    extremes = np.zeros((3, side, side, channels), dtype=np.uint8)
    extremes[1] = 255
    extremes[2, ::2] = 1
    extremes[2, 1::2] = 254
    px[: min(n, 3)] = extremes[: min(n, 3)]
    return px


MARKERS = ["pgd", "gaussian", "bernoulli"]


@pytest.fixture(scope="module")
def markers() -> dict[str, object]:
    return {name: make_marker(config(name), SEED, device="cpu") for name in MARKERS}


def within(version: np.ndarray, pixels: np.ndarray, eps: int) -> bool:
    return bool(np.abs(version.astype(np.int16) - pixels.astype(np.int16)).max() <= eps)


# --- the ε bound -----------------------------------------------------------------


@pytest.mark.parametrize("name", MARKERS)
@pytest.mark.parametrize("channels", [1, 3])
def test_versions_stay_within_epsilon_everywhere(markers, name, channels):
    px = images(channels=channels)
    v0, v1 = markers[name].mark(px, 0)
    assert v0.dtype == v1.dtype == np.uint8
    assert v0.shape == v1.shape == px.shape
    assert within(v0, px, EPS) and within(v1, px, EPS)
    assert not np.array_equal(v0, v1)
    # The twins are x ± the same rounded δ, clamped: where neither side clamps, they
    # are symmetric about x.
    free = (px >= EPS) & (px <= 255 - EPS)
    mid = v0.astype(np.int16) + v1.astype(np.int16) - 2 * px.astype(np.int16)
    assert np.all(mid[free] == 0)


@pytest.mark.parametrize("name", MARKERS)
@pytest.mark.parametrize("eps", [1, 3, 255])
def test_bound_holds_for_small_and_largest_epsilon(name, eps):
    marker = make_marker(config(name, epsilon=eps, step_size=float(eps)), SEED, device="cpu")
    px = images(n=3)
    v0, v1 = marker.mark(px, 5)
    assert within(v0, px, eps) and within(v1, px, eps)


def test_bernoulli_is_plus_minus_epsilon_and_fair(markers):
    px = np.full((4, 16, 16, 3), 128, dtype=np.uint8)
    v0, _ = markers["bernoulli"].mark(px, 0)
    delta = v0.astype(np.int16) - 128
    assert set(np.unique(delta)) == {-EPS, EPS}
    assert 0.45 < float(np.mean(delta > 0)) < 0.55


def test_gaussian_is_clipped_normal_with_sigma_epsilon(markers):
    px = np.full((8, 32, 32, 3), 128, dtype=np.uint8)
    v0, _ = markers["gaussian"].mark(px, 0)
    delta = v0.astype(np.int16) - 128
    # P(|N(0, ε²)| ≥ ε) ≈ 0.317; rounding puts values ≥ ε − ½ at the bound too.
    at_bound = float(np.mean(np.abs(delta) == EPS))
    assert 0.30 < at_bound < 0.37
    assert abs(float(delta.mean())) < 0.2


# --- determinism -------------------------------------------------------------------


@pytest.mark.parametrize("name", MARKERS)
def test_same_seed_same_bytes_other_seed_other_bytes(name):
    px = images()
    first = make_marker(config(name), SEED, device="cpu").mark(px, 3)
    again = make_marker(config(name), SEED, device="cpu").mark(px, 3)
    other = make_marker(config(name), OTHER_SEED, device="cpu").mark(px, 3)
    assert all(np.array_equal(a, b) for a, b in zip(first, again, strict=True))
    assert not np.array_equal(first[0], other[0])


@pytest.mark.parametrize("name", ["gaussian", "bernoulli"])
def test_noise_marks_do_not_depend_on_batch_mates(markers, name):
    px = images(n=5)
    whole = markers[name].mark(px, 10)
    alone = markers[name].mark(px[2:3], 12)
    assert np.array_equal(whole[0][2:3], alone[0])
    assert np.array_equal(whole[1][2:3], alone[1])
    shifted = markers[name].mark(px[2:3], 13)  # same pixels, another index
    assert not np.array_equal(shifted[0], alone[0])


def test_pgd_random_start_is_per_image():
    marker = make_marker(config(), SEED, device="cpu")
    assert isinstance(marker, PgdMarker)
    px = images(n=5)
    start = marker.random_start(px, 10)
    assert np.array_equal(start[2:3], marker.random_start(px[2:3], 12))
    assert np.abs(start).max() <= EPS


def test_pgd_splits_into_configured_batches():
    """A call with more images than batch_size marks them in batch_size chunks."""
    marker = make_marker(config(batch_size=2), SEED, device="cpu")
    px = images(n=5)
    whole = marker.mark(px, 0)
    parts = [marker.mark(px[i : i + 2], i) for i in range(0, 5, 2)]
    assert np.array_equal(whole[0], np.concatenate([p[0] for p in parts]))
    assert np.array_equal(whole[1], np.concatenate([p[1] for p in parts]))


def test_marking_leaves_global_rngs_alone():
    torch_state = torch.random.get_rng_state()
    np_state = np.random.get_state()[1].copy()
    for name in MARKERS:
        make_marker(config(name), SEED, device="cpu").mark(images(), 0)
    load_extractor("resnet18", input_size=32)
    assert torch.equal(torch.random.get_rng_state(), torch_state)
    assert np.array_equal(np.random.get_state()[1], np_state)


# --- PGD does its job ------------------------------------------------------------


def test_pgd_increases_feature_distance_over_its_random_start():
    px = images(n=8, side=12, channels=3, seed=4)
    start_only = make_marker(config(steps=0), SEED, device="cpu")
    searched = make_marker(config(steps=8, step_size=2.0), SEED, device="cpu")
    assert isinstance(searched, PgdMarker)
    before = feature_distances(searched.extractor, *start_only.mark(px, 0))
    after = feature_distances(searched.extractor, *searched.mark(px, 0))
    assert after.mean() > 1.5 * before.mean()
    assert np.all(after > before)


def test_user_callable_may_return_an_extractor():
    extractor = load_extractor(f"{__name__}:tiny_as_extractor")
    assert extractor.input_size is None
    feats = extractor.features(torch.rand(2, 1, 8, 8))
    assert feats.shape == (2, 32)


def test_feature_distances_of_identical_images_are_zero():
    extractor = load_extractor(TINY, input_size=16)
    px = images(n=3)
    assert np.all(feature_distances(extractor, px, px, batch_size=2) == 0.0)


# --- configuration records ---------------------------------------------------------


def test_config_round_trips_through_the_canonical_encoding():
    cfg = config(extractor_weights="/some/file.pth", step_size=4)
    assert cfg.step_size == 4.0 and isinstance(cfg.step_size, float)
    value = decode(encode(cfg.to_value()))
    assert MarkingConfig.from_value(value) == cfg
    assert MarkingConfig.from_value(MarkingConfig().to_value()) == MarkingConfig()


def _record(**changes: object) -> dict[str, object]:
    record: dict[str, object] = dict(MarkingConfig().to_value())
    record.update(changes)
    return record


@pytest.mark.parametrize(
    ("value", "error"),
    [
        ([], InputError),
        ({k: v for k, v in MarkingConfig().to_value().items() if k != "steps"}, InputError),
        (_record(extra=1), InputError),
        (_record(step_size=4), InputError),  # canonical records keep the float type
        (_record(epsilon=True), InputError),
        (_record(epsilon=10.0), InputError),
        (_record(steps="5"), InputError),
        (_record(extractor_weights=b"path"), InputError),
        (_record(epsilon=0), ParameterError),
        (_record(marker="radioactive"), ParameterError),
    ],
)
def test_from_value_is_strict(value, error):
    with pytest.raises(error):
        MarkingConfig.from_value(value)


# --- bad input, table-driven -------------------------------------------------------


@pytest.mark.parametrize(
    "changes",
    [
        {"epsilon": 0},
        {"epsilon": -3},
        {"epsilon": 256},
        {"epsilon": True},
        {"epsilon": 10.0},
        {"marker": "poisson"},
        {"extractor": "vgg16"},
        {"extractor": "not a module:x"},
        {"extractor": ""},
        {"extractor_weights": ""},
        {"steps": -1},
        {"steps": 10_001},
        {"steps": 2.5},
        {"step_size": 0.0},
        {"step_size": -1.0},
        {"step_size": math.nan},
        {"step_size": math.inf},
        {"step_size": "4"},
        {"batch_size": 0},
        {"input_size": 4},
        {"input_size": 4096},
    ],
)
def test_bad_config_raises_parameter_error(changes):
    with pytest.raises(ParameterError):
        config(**changes)


@pytest.mark.parametrize(
    ("pixels", "first_index"),
    [
        (np.zeros((2, 8, 8, 1), dtype=np.float32), 0),
        (np.zeros((2, 8, 8, 1), dtype=np.int16), 0),
        (np.zeros((8, 8, 1), dtype=np.uint8), 0),
        (np.zeros((2, 8, 8), dtype=np.uint8), 0),
        (np.zeros((2, 8, 8, 2), dtype=np.uint8), 0),
        (np.zeros((2, 8, 8, 4), dtype=np.uint8), 0),
        (np.zeros((0, 8, 8, 1), dtype=np.uint8), 0),
        (np.zeros((1, 0, 8, 1), dtype=np.uint8), 0),
        ([[[[0]]]], 0),
        (np.zeros((2, 8, 8, 1), dtype=np.uint8), -1),
        (np.zeros((2, 8, 8, 1), dtype=np.uint8), 1.0),
        (np.zeros((2, 8, 8, 1), dtype=np.uint8), True),
        (np.zeros((2, 8, 8, 1), dtype=np.uint8), 1 << 24),
    ],
)
@pytest.mark.parametrize("name", MARKERS)
def test_bad_images_raise_input_error(markers, name, pixels, first_index):
    with pytest.raises(InputError):
        markers[name].mark(pixels, first_index)


@pytest.mark.parametrize(
    ("call", "error"),
    [
        (lambda: make_marker(config(), SEED[:31]), InputError),
        (lambda: make_marker(config("bernoulli"), "x" * 32), InputError),
        (lambda: make_marker({"marker": "pgd"}, SEED), InputError),
        (lambda: make_marker(config(), SEED, device="quantum"), ParameterError),
        (lambda: load_extractor("vgg16"), ParameterError),
        (lambda: load_extractor(TINY, input_size=2), ParameterError),
        (lambda: load_extractor("resnet18", weights="/no/such/weights.pth"), NotFoundError),
        (lambda: load_extractor("efficientnet-lite0", weights="/no/such.pth"), NotFoundError),
        (lambda: load_extractor("no_such_module_xyz:factory"), InputError),
        (lambda: load_extractor(f"{__name__}:no_such_factory"), InputError),
        (lambda: load_extractor(f"{__name__}:returns_int"), InputError),
        (lambda: load_extractor(f"{__name__}:raises"), InputError),
        (lambda: load_extractor(f"{__name__}:EPS"), InputError),
        (
            lambda: make_marker(config(extractor=f"{__name__}:returns_int"), SEED),
            InputError,
        ),
    ],
)
def test_bad_arguments_raise_typed_errors(call, error):
    with pytest.raises(error):
        call()


@pytest.mark.skipif(torch.cuda.is_available(), reason="CUDA is available here")
def test_cuda_requested_without_cuda_is_a_parameter_error():
    with pytest.raises(ParameterError):
        make_marker(config(), SEED, device="cuda")


def test_weights_file_that_is_not_a_state_dict(tmp_path):
    garbage = tmp_path / "garbage.pth"
    garbage.write_bytes(b"not a torch file")
    with pytest.raises(InputError):
        load_extractor("resnet18", weights=str(garbage))
    wrong = tmp_path / "wrong.pth"
    torch.save({"conv1.weight": torch.zeros(1)}, wrong)
    with pytest.raises(InputError):
        load_extractor("resnet18", weights=str(wrong))


def test_feature_distances_checks_its_arrays():
    extractor = load_extractor(TINY, input_size=16)
    px = images(n=2)
    with pytest.raises(InputError):
        feature_distances(extractor, px, px[:1])
    with pytest.raises(InputError):
        feature_distances(extractor, px, px.astype(np.int16))
    with pytest.raises(ParameterError):
        feature_distances(extractor, px, px, batch_size=0)


def test_config_import_does_not_import_torch():
    code = (
        "import sys, twinaudit.owner.marking; twinaudit.owner.marking.MarkingConfig()\n"
        "assert 'torch' not in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
