"""``proxy-own``: PGD in the features of a proxy trained on the images being marked."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from tests.support.extractors import proxy_config
from tests.support.proxy import short_own_proxy
from tests.support.threads import one_thread  # noqa: F401 - the fixture
from twinaudit.cli.main import main as cli_main
from twinaudit.owner.images.sources import open_source
from twinaudit.owner.mark import mark
from twinaudit.owner.marking import MarkingConfig
from twinaudit.owner.marking.config import (
    OWN_OTHER_SIDE,
    OWN_PROXY,
    TRAINED_WHILE_MARKING,
    own_proxy_side,
    pgd_defaults,
)
from twinaudit.owner.marking.extractors import load_extractor
from twinaudit.owner.marking.proxy import (
    SmallCNN,
    train_own_proxy,
    weights_digest,
)
from twinaudit.owner.vault import Vault
from twinaudit.protocol.errors import InputError, ParameterError

pytestmark = pytest.mark.usefixtures("one_thread")

SECRET = bytes(range(32))


@pytest.fixture(autouse=True)
def few_steps(monkeypatch):
    """Train the proxy 24 steps instead of thousands: the rules, not the proxy, are tested."""
    short_own_proxy(monkeypatch, 24)


def _photos(tmp_path, n=24, side=8, channels=1, labels=True):
    rng = np.random.default_rng(3)
    images = rng.integers(0, 256, (n, side, side, channels), dtype=np.uint8)
    np.save(tmp_path / "photos.npy", images)
    if labels:
        (tmp_path / "labels.json").write_text(json.dumps([int(i % 3) * 7 for i in range(n)]))
    return open_source(tmp_path / "photos.npy", labels=tmp_path / "labels.json" if labels else None)


def _config(side=8, extractor=OWN_PROXY, **changes):
    return proxy_config(extractor, side, **changes)


def _folder(tmp_path, seed, files):
    """Write a folder of labelled photos: ``files`` maps each name to (mode, shape, label).

    Returns the folder's source; each photo's pixels are random from ``seed``.
    """
    from PIL import Image

    folder = tmp_path / "photos"
    folder.mkdir()
    rng = np.random.default_rng(seed)
    rows = ["filename,label"]
    for name, (mode, shape, label) in files.items():
        Image.fromarray(rng.integers(0, 256, shape, dtype=np.uint8), mode).save(folder / name)
        rows.append(f"{name},{label}")
    (tmp_path / "labels.csv").write_text("\n".join(rows) + "\n")
    return folder


def test_the_side_is_the_images_own_when_small_and_square():
    assert own_proxy_side([(28, 28)]) == 28
    assert own_proxy_side([(32, 32), (32, 32)]) == 32
    for shapes in ([(30, 30)], [(28, 32)], [(28, 28), (32, 32)], [(512, 512)], [(4, 4)]):
        assert own_proxy_side(shapes) == OWN_OTHER_SIDE


def test_the_digest_sees_every_weight():
    torch.manual_seed(0)
    model = SmallCNN(side=8, hidden=16)
    digest = weights_digest(model)
    assert digest.startswith("sha256:") and len(digest) == 7 + 64
    assert weights_digest(model) == digest
    with torch.no_grad():
        model.classifier[3].bias[0] += 1e-7
    assert weights_digest(model) != digest


def test_training_ignores_the_callers_threads_and_restores_them():
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, (12, 8, 8, 1), dtype=np.uint8)
    labels = np.arange(12) % 2
    torch.set_num_threads(2)
    first = train_own_proxy(images, labels)
    assert torch.get_num_threads() == 2
    torch.set_num_threads(1)
    assert weights_digest(train_own_proxy(images, labels)) == weights_digest(first)


@pytest.mark.parametrize("extractor", TRAINED_WHILE_MARKING)
def test_marking_records_the_proxy_and_reproduces_the_vault(tmp_path, extractor):
    source = _photos(tmp_path)
    config = _config(extractor=extractor)
    vault = mark(source, tmp_path / "a", config, secret=SECRET, show_progress=False).vault
    recorded = MarkingConfig.from_value(vault.config)
    assert recorded.extractor == extractor
    assert recorded.extractor_weights is not None
    assert recorded.extractor_weights.startswith("sha256:")
    again = mark(source, tmp_path / "b", config, secret=SECRET, show_progress=False).vault
    assert again.root == vault.root
    # A finished vault opens again with the user's config, without its digest.
    same = mark(source, tmp_path / "a", config, secret=SECRET, show_progress=False)
    assert same.marked_now == 0 and same.vault.root == vault.root
    for index in range(vault.n_pairs):
        first, second = vault.pair(index)
        assert not np.array_equal(first.pixels, second.pixels)


def test_grey_and_colour_photos_train_one_colour_proxy(tmp_path):
    grey, colour = ("L", (12, 12)), ("RGB", (12, 12, 3))
    files = {f"p{i:02d}.png": (*(grey if i % 2 else colour), i % 3) for i in range(12)}
    folder = _folder(tmp_path, 5, files)
    source = open_source(folder, labels=tmp_path / "labels.csv")
    config = _config(side=own_proxy_side([(12, 12)]))
    assert config.input_size == 12
    vault = mark(source, tmp_path / "v", config, secret=SECRET, show_progress=False).vault
    assert vault.n_pairs == 12
    for index in (0, 1):
        first, second = vault.pair(index)
        assert first.pixels.shape == second.pixels.shape  # each keeps its own channels


def test_the_proxy_takes_its_images_from_the_check_and_trains_the_same(tmp_path, monkeypatch):
    """A folder's images are decoded twice (check, marking), not three times, same vault."""
    import twinaudit.owner.images.sources as sources_module

    grey, colour = ("L", (40, 52)), ("RGB", (36, 44, 3))  # above the proxy's side
    files = {
        f"p{i:02d}.{'jpg' if i % 3 == 0 else 'png'}": (*(grey if i >= 6 else colour), i % 3)
        for i in range(10)
    }
    folder = _folder(tmp_path, 6, files)
    config = _config(side=16)
    decoded = []
    original = sources_module._decode_upright

    def counting(path, shape, data=None, *, upright=True):
        decoded.append(path.name)
        return original(path, shape, data, upright=upright)

    monkeypatch.setattr(sources_module, "_decode_upright", counting)
    source = open_source(folder, labels=tmp_path / "labels.csv")
    shared = mark(source, tmp_path / "shared", config, secret=SECRET, show_progress=False).vault
    assert len(decoded) == 2 * 10  # the check (which squares each for the proxy), marking
    decoded.clear()
    monkeypatch.setattr(sources_module.FolderSource, "check_pixels", lambda self, visit=None: False)
    source = open_source(folder, labels=tmp_path / "labels.csv")
    apart = mark(source, tmp_path / "apart", config, secret=SECRET, show_progress=False).vault
    assert len(decoded) == 2 * 10  # the check skipped here: the proxy's own read, marking
    assert apart.config["extractor_weights"] == shared.config["extractor_weights"]
    assert apart.root == shared.root


def test_a_bad_photo_among_others_is_named_with_them_when_a_proxy_is_trained(tmp_path):
    """The check's pass goes on past a file that does not decode, the proxy's copies too."""
    folder = _folder(tmp_path, 7, {f"p{i}.jpg": ("RGB", (64, 64, 3), i % 2) for i in range(6)})
    for bad in ("p1.jpg", "p4.jpg"):
        data = (folder / bad).read_bytes()
        (folder / bad).write_bytes(data[: len(data) * 3 // 4])  # its header whole
    source = open_source(folder, labels=tmp_path / "labels.csv")  # headers only: it opens
    with pytest.raises(InputError, match="2 of 6 images cannot be marked") as refused:
        mark(source, tmp_path / "v", _config(side=16), secret=SECRET, show_progress=False)
    assert "p1.jpg" in str(refused.value) and "p4.jpg" in str(refused.value)
    assert not (tmp_path / "v").exists()


def test_no_labels_is_refused_before_anything_is_written(tmp_path):
    source = _photos(tmp_path, labels=False)
    with pytest.raises(InputError, match="--labels"):
        mark(source, tmp_path / "v", _config(), secret=SECRET, show_progress=False)
    assert not (tmp_path / "v").exists()


@pytest.mark.parametrize("extractor", TRAINED_WHILE_MARKING)
def test_a_file_is_not_a_proxys_trained_while_marking(extractor):
    with pytest.raises(ParameterError, match=extractor):
        _config(extractor=extractor, extractor_weights="proxy.pt")
    _config(extractor=extractor, extractor_weights="sha256:" + "ab" * 32)
    with pytest.raises(ParameterError, match="trained while marking"):
        load_extractor(extractor)


@pytest.mark.parametrize("extractor", TRAINED_WHILE_MARKING)
def test_a_recorded_digest_that_does_not_retrain_is_refused(tmp_path, extractor):
    source = _photos(tmp_path)  # the clusters proxy does not read the labels
    other = _config(extractor=extractor, extractor_weights="sha256:" + "00" * 32)
    with pytest.raises(ParameterError, match="bit for bit"):
        mark(source, tmp_path / "v", other, secret=SECRET, show_progress=False)
    assert not (tmp_path / "v").exists()


def test_the_cli_marks_with_its_own_proxy_when_given_labels(tmp_path, capsys):
    _photos(tmp_path)
    base = ["owner", "mark", str(tmp_path / "photos.npy"), "--seed", "t", "--quiet"]
    labelled = [*base, "--labels", str(tmp_path / "labels.json"), "--out", str(tmp_path / "l")]
    assert cli_main([*labelled, "--steps", "1"]) == 0
    config = MarkingConfig.from_value(Vault.open(tmp_path / "l").config)
    assert (config.extractor, config.input_size, config.steps) == (OWN_PROXY, 8, 1)
    assert config.step_size == pgd_defaults(OWN_PROXY, 10)["step_size"]
    assert cli_main([*base, "--marker", "bernoulli", "--out", str(tmp_path / "n")]) == 0
    config = MarkingConfig.from_value(Vault.open(tmp_path / "n").config)
    assert config.extractor == "efficientnet-lite0"
    capsys.readouterr()


def test_without_labels_the_default_is_the_clusters_proxy_from_twenty_images(tmp_path):
    from twinaudit.owner.kinds import ImageOptions, MarkOptions, marking_config

    source = _photos(tmp_path, labels=False)
    options = MarkOptions(input=tmp_path, out=tmp_path / "v", image=ImageOptions(epsilon=10))
    config = marking_config(options, source)
    assert (config.extractor, config.input_size) == ("proxy-clusters", 8)
    assert config.steps == pgd_defaults("proxy-clusters", 10)["steps"]
    few = _photos(tmp_path, n=19, labels=False)
    config = marking_config(options, few)
    assert (config.extractor, config.input_size) == ("efficientnet-lite0", 96)
    labelled = _photos(tmp_path)
    assert marking_config(options, labelled).extractor == OWN_PROXY
    chosen = MarkOptions(
        input=tmp_path, out=tmp_path / "v", image=ImageOptions(epsilon=10, extractor="resnet18")
    )
    assert marking_config(chosen, labelled).extractor == "resnet18"


def test_inspect_measures_an_own_proxy_vault_in_the_default_extractor(tmp_path):
    from twinaudit.owner.inspect import inspect_vault

    source = _photos(tmp_path)
    vault = mark(source, tmp_path / "v", _config(), secret=SECRET, show_progress=False).vault
    report = inspect_vault(vault, source=source, distance_pairs=4)
    assert report.feature_distance is not None
    assert report.feature_distance.extractor == "efficientnet-lite0"
    assert report.feature_distance.mean > 0
    # ... and says so, in the text and in the JSON, with the reason.
    reason = "the marking proxy is not kept in the vault"
    fallback = report.to_value()["feature_distance"]["fallback"]
    assert isinstance(fallback, str) and reason in fallback
    assert "measured in efficientnet-lite0, not in proxy-own" in fallback
    assert reason in report.to_text()
    chosen = inspect_vault(
        vault, distance_pairs=4, extractor="tests.support.extractors:tiny_extractor"
    )
    assert chosen.feature_distance is not None and chosen.feature_distance.fallback is None
    assert reason not in chosen.to_text()
