"""The owner's proxy practitioner: training, its file, the proxy-cnn extractor, the CLI."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from tests.support.threads import one_thread  # noqa: F401 - the fixture
from twinaudit.cli.main import main as cli_main
from twinaudit.owner.marking import MarkingConfig
from twinaudit.owner.marking.extractors import load_extractor
from twinaudit.owner.marking.markers import make_marker
from twinaudit.owner.marking.proxy import (
    SmallCNN,
    load_proxy_state,
    save_proxy,
    square_images,
    train_proxy,
    write_proxy,
)
from twinaudit.protocol.errors import InputError, ParameterError


def _data(n=48, side=16, channels=1, seed=0):
    rng = np.random.default_rng(seed)
    return (
        rng.integers(0, 256, (n, side, side, channels), dtype=np.uint8),
        np.arange(n) % 3,
    )


pytestmark = pytest.mark.usefixtures("one_thread")


def test_training_is_seeded_and_sizes_follow_the_data():
    images, labels = _data(channels=3)
    first = train_proxy(images, labels, epochs=1, seed=4)
    again = train_proxy(images, labels, epochs=1, seed=4)
    for a, b in zip(first.state_dict().values(), again.state_dict().values(), strict=True):
        assert torch.equal(a, b)
    assert first(torch.zeros(2, 3, 16, 16)).shape == (2, 3)  # three classes seen
    assert first.hidden_layer()(torch.zeros(1, 3, 16, 16)).shape == (1, 1024)


def test_the_demo_network_is_the_proxy_at_the_demos_sizes():
    from demo.models import make_net

    net = make_net()
    assert isinstance(net, SmallCNN)
    assert sum(p.numel() for p in net.parameters()) == 1_621_706


def test_a_proxy_file_round_trips_and_marks(tmp_path):
    images, labels = _data()
    model = train_proxy(images, labels, epochs=1, seed=0)
    path = tmp_path / "proxy.pt"
    write_proxy(model, path)
    loaded, side = load_proxy_state(str(path))
    assert side == 16
    x = torch.rand(2, 1, 16, 16)
    assert torch.equal(loaded(x), model(x))
    extractor = load_extractor("proxy-cnn", weights=str(path))
    assert extractor.input_size == 16
    assert extractor.features(torch.rand(3, 1, 40, 40)).shape == (3, 1024)  # resized
    config = MarkingConfig(extractor="proxy-cnn", extractor_weights=str(path), steps=2)
    marker = make_marker(config, bytes(32))
    deltas = marker.deltas(_data(4, 16)[0], 0)
    assert deltas.shape == (4, 16, 16, 1) and int(np.abs(deltas).max()) <= config.epsilon


def test_bad_proxy_files_are_typed_errors(tmp_path):
    with pytest.raises(ParameterError, match="weights file"):
        load_extractor("proxy-cnn")
    plain = tmp_path / "plain.pt"
    torch.save(SmallCNN(side=16).state_dict(), plain)
    with pytest.raises(InputError, match="not a proxy"):
        load_proxy_state(str(plain))
    junk = tmp_path / "junk.pt"
    junk.write_bytes(b"not a torch file")
    with pytest.raises(InputError, match="cannot read"):
        load_proxy_state(str(junk))
    broken = tmp_path / "broken.pt"
    save_proxy(SmallCNN(side=16), broken)
    state = torch.load(broken, weights_only=True)
    state["proxy.side"] = torch.tensor(20)
    torch.save(state, broken)
    with pytest.raises(InputError, match="does not fit"):
        load_proxy_state(str(broken))


def test_square_images_resizes_only_when_needed():
    images, _ = _data(2, 16)
    assert square_images(images, 16) is images
    assert square_images(images, 8).shape == (2, 8, 8, 1)
    assert square_images(images, 8).dtype == np.uint8


def test_the_cli_trains_a_proxy_and_refuses_what_it_cannot_use(tmp_path, capsys):
    images, labels = _data(40, 16)
    np.savez(tmp_path / "public.npz", images=images, labels=labels)
    out = tmp_path / "proxy.pt"
    args = ["owner", "proxy", str(tmp_path / "public.npz"), "--npz-key", "images"]
    labels_file = tmp_path / "labels.json"
    labels_file.write_text("[" + ", ".join(str(int(y)) for y in labels) + "]")
    assert cli_main([*args, "--labels", str(labels_file), "--out", str(out), "--epochs", "1"]) == 0
    printed = capsys.readouterr().out
    assert "next: mark in its features (twinaudit owner mark" in printed
    assert "docs/examples/stand_in_model.py" in printed
    assert load_proxy_state(str(out))[1] == 16
    # A second run would overwrite it: refused, the file kept.
    before = out.read_bytes()
    assert cli_main([*args, "--labels", str(labels_file), "--out", str(out)]) != 0
    assert "exists" in capsys.readouterr().err and out.read_bytes() == before
    # No labels: refused before any training.
    np.save(tmp_path / "bare.npy", images)
    assert (
        cli_main(
            ["owner", "proxy", str(tmp_path / "bare.npy"), "--out", str(tmp_path / "other.pt")]
        )
        != 0
    )
    assert "no labels" in capsys.readouterr().err
    assert not (tmp_path / "other.pt").exists()
    bad_side = [*args, "--labels", str(labels_file), "--out", str(tmp_path / "s.pt")]
    assert cli_main([*bad_side, "--side", "30"]) != 0
    assert "multiple of 4" in capsys.readouterr().err


def test_a_folder_of_grey_and_colour_images_trains_a_colour_proxy(tmp_path, capsys):
    """Mixed photos (some grey): the grey ones are seen as colour, as marking sees them."""
    from PIL import Image

    images, labels = _data(12, 16, channels=3)
    folder = tmp_path / "photos"
    folder.mkdir()
    rows = ["filename,label"]
    for i, (image, label) in enumerate(zip(images, labels, strict=True)):
        name = f"p{i:02d}.png"
        picture = Image.fromarray(image[..., 0]) if i % 2 else Image.fromarray(image)
        picture.save(folder / name)
        rows.append(f"{name},{label}")
    (tmp_path / "labels.csv").write_text("\n".join(rows) + "\n")
    out = tmp_path / "proxy.pt"
    args = ["owner", "proxy", str(folder), "--labels", str(tmp_path / "labels.csv")]
    assert cli_main([*args, "--out", str(out), "--epochs", "1"]) == 0
    assert "the proxy sees the grey ones as colour" in capsys.readouterr().out
    model, side = load_proxy_state(str(out))
    assert side == 16 and model.features[0].in_channels == 3


def test_a_folder_of_large_photos_is_read_in_batches_the_memory_setting_bounds(
    tmp_path, monkeypatch
):
    """Issue #39: `owner proxy` held every photo at full size; now a batch at a time."""
    from tests.support.photos import write_photos
    from twinaudit.owner.marking import proxy as proxy_module

    folder = tmp_path / "photos"
    paths = write_photos(folder, 5, 2000, 2000)
    rows = ["filename,label", *(f"{path.name},{k % 2}" for k, path in enumerate(paths))]
    (tmp_path / "labels.csv").write_text("\n".join(rows) + "\n")
    seen = []
    real = proxy_module.square_images

    def recording(pixels, side):
        seen.append(pixels.shape[0])
        return real(pixels, side)

    monkeypatch.setattr(proxy_module, "square_images", recording)
    args = ["owner", "proxy", str(folder), "--labels", str(tmp_path / "labels.csv"), "-q"]
    args += ["--side", "16", "--epochs", "1"]
    # 768M leaves 86 MB for a batch once the process (640M) and one image's decoding
    # (4 x 12 MB) are set aside: one 12 MB photo at a time, at 4 bytes a byte.
    assert cli_main([*args, "--out", str(tmp_path / "small.pt"), "--memory", "768M"]) == 0
    assert seen == [1] * 5
    seen.clear()
    assert cli_main([*args, "--out", str(tmp_path / "proxy.pt")]) == 0  # 2G: all at once
    assert seen == [5]
    assert load_proxy_state(str(tmp_path / "proxy.pt"))[1] == 16


def test_a_training_set_past_the_memory_setting_is_refused():
    from twinaudit.owner.marking.memory import MIN_MEMORY, proxy_read_batches

    with pytest.raises(ParameterError, match="give --memory"):
        proxy_read_batches(MIN_MEMORY, [(16, 16, 3)], 10**6, 64)
    fits = proxy_read_batches(MIN_MEMORY, [(16, 16, 3)], 100, 16)
    assert fits((16, 16, 3)) == 1024
