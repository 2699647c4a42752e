"""Built-in extractors: the torchvision shim, ResNet18 and EfficientNet-Lite0."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
import torch

from twinaudit.owner.marking import MarkingConfig, feature_distances, load_extractor, make_marker
from twinaudit.owner.marking.markers import PgdMarker
from twinaudit.owner.marking.torchvision_shim import import_torchvision

SEED = bytes(range(32))


def test_shim_imports_torchvision_resnet18_and_is_idempotent():
    first = import_torchvision()
    assert import_torchvision() is first
    net = first.models.resnet18(weights=None)
    assert isinstance(net, torch.nn.Module)
    assert hasattr(torch.ops.torchvision, "nms")


@pytest.mark.slow
def test_shim_in_a_fresh_process():
    """Twice in one process, then a plain import: no error, no duplicate definitions."""
    code = (
        "from twinaudit.owner.marking.torchvision_shim import import_torchvision, shim_active\n"
        "a = import_torchvision(); b = import_torchvision(); assert a is b\n"
        "import torchvision.models as m; m.resnet18(weights=None)\n"
        "print(shim_active())\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], check=True, capture_output=True, text=True, timeout=120
    )
    assert out.stdout.strip() in {"True", "False"}


def test_untrained_resnet18_is_seeded_and_gives_penultimate_features():
    a = load_extractor("resnet18", input_size=32)
    b = load_extractor("resnet18", input_size=32)
    c = load_extractor("resnet18", seed=1, input_size=32)
    x = torch.rand(2, 1, 20, 20)
    with torch.no_grad():
        fa, fb, fc = a.features(x), b.features(x), c.features(x)
    assert fa.shape == (2, 512)
    assert torch.equal(fa, fb)
    assert not torch.equal(fa, fc)
    assert all(not p.requires_grad for p in a.module.parameters())
    assert not a.module.training


def test_resnet18_loads_a_weights_file(tmp_path):
    source = load_extractor("resnet18", seed=5, input_size=32)
    path = tmp_path / "resnet18.pth"
    torch.save(source.module.state_dict(), path)  # saved without the classifier
    loaded = load_extractor("resnet18", weights=str(path), input_size=32)
    x = torch.rand(2, 3, 32, 32)
    with torch.no_grad():
        assert torch.equal(source.features(x), loaded.features(x))


def test_efficientnet_lite0_marks_two_images():
    """The shipped ImageNet weights load offline; PGD on them beats a Bernoulli mark."""
    pixels = np.random.default_rng(3).integers(0, 256, size=(2, 28, 28, 1), dtype=np.uint8)
    cfg = MarkingConfig(steps=2, step_size=5.0, batch_size=2, input_size=64)
    marker = make_marker(cfg, SEED, device="cpu")
    assert isinstance(marker, PgdMarker)
    v0, v1 = marker.mark(pixels, 0)
    assert np.abs(v0.astype(np.int16) - pixels).max() <= cfg.epsilon
    assert np.abs(v1.astype(np.int16) - pixels).max() <= cfg.epsilon
    noise = make_marker(MarkingConfig(marker="bernoulli"), SEED).mark(pixels, 0)
    extractor = marker.extractor
    with torch.no_grad():
        assert extractor.features(torch.rand(2, 3, 40, 40)).shape == (2, 1280)
    pgd_distance = feature_distances(extractor, v0, v1)
    assert np.all(pgd_distance > feature_distances(extractor, *noise))


@pytest.mark.parametrize("name", ["efficientnet-lite0", "resnet18"])
def test_builtin_extractors_accept_rgb_and_odd_sizes(name):
    extractor = load_extractor(name, input_size=64)
    with torch.no_grad():
        feats = extractor.features(torch.rand(1, 3, 37, 91))
    assert feats.ndim == 2 and torch.isfinite(feats).all()
