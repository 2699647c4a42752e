"""``owner inspect`` on a vault of images of mixed sizes: the distance and the sheet."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest
from PIL import Image

from tests.support.interrupt import stop_at_append
from tests.support.threads import one_thread  # noqa: F401 - the fixture
from twinaudit.cli.main import main
from twinaudit.owner.images.sheet import GAP, TITLE_HEIGHT
from twinaudit.owner.images.sources import open_source
from twinaudit.owner.inspect import inspect_vault
from twinaudit.owner.mark import mark
from twinaudit.owner.marking import MarkingConfig, feature_distances, load_extractor
from twinaudit.owner.vault import Vault
from twinaudit.protocol.errors import ParameterError

pytestmark = pytest.mark.usefixtures("one_thread")

Pixels = npt.NDArray[np.uint8]
TINY = "tests.support.extractors:tiny_extractor"
SECRET = bytes(range(32))
#: (count, height, width, channels) of the runs of the folder, in name order.
RUNS = [(3, 12, 12, 3), (2, 16, 10, 1), (3, 9, 14, 3), (2, 12, 12, 3)]


@pytest.fixture
def photos(tmp_path: Path) -> Path:
    """Ten photos in four runs of three sizes (one grey): the vault's chunks change shape."""
    root = tmp_path / "photos"
    root.mkdir()
    rng = np.random.default_rng(5)
    index = 0
    for count, height, width, channels in RUNS:
        for _ in range(count):
            pixels = rng.integers(0, 256, (height, width, channels), dtype=np.uint8)
            image = Image.fromarray(pixels[:, :, 0] if channels == 1 else pixels)
            image.save(root / f"photo{index:02d}.png")
            index += 1
    return root


@pytest.fixture
def vault(photos: Path, tmp_path: Path) -> Vault:
    config = MarkingConfig(marker="gaussian", epsilon=10, batch_size=4)
    return mark(
        open_source(photos), tmp_path / "v", config, secret=SECRET, show_progress=False
    ).vault


def test_the_vaults_chunks_mix_sizes(vault):
    assert vault.n_pairs == 10
    shapes = [version0.shape[1:] for _, version0, _, _, _ in vault.chunks()]
    assert shapes == [(12, 12, 3), (16, 10, 1), (9, 14, 3), (12, 12, 3)]


def test_the_distance_covers_the_asked_pairs_whatever_their_sizes(vault, photos):
    report = inspect_vault(vault, source=open_source(photos), distance_pairs=7, extractor=TINY)
    distance = report.feature_distance
    assert distance is not None and distance.pairs == 7
    assert (distance.sizes, distance.fallback) == (3, None)
    extractor = load_extractor(TINY)
    expected = []
    for index in range(7):  # pair by pair: the mean is over exactly the first seven
        first, second = vault.pair(index)
        expected.append(feature_distances(extractor, first.pixels[None], second.pixels[None])[0])
    assert distance.mean == pytest.approx(float(np.mean(expected)), rel=1e-5)
    assert distance.median == pytest.approx(float(np.median(expected)), rel=1e-5)
    assert "over 7 pairs of 3 sizes" in report.to_text()
    every = inspect_vault(vault, distance_pairs=512, extractor=TINY).feature_distance
    assert every is not None and (every.pairs, every.sizes) == (10, 3)


def test_the_sheet_shows_the_asked_pairs_whatever_their_sizes(vault, photos, tmp_path):
    sheet = tmp_path / "sheet.png"
    report = inspect_vault(
        vault, source=open_source(photos), distance_pairs=0, sheet=sheet, sheet_pairs=6
    )
    # Rows raw, version 0, version 1, difference; every cell 16x14 (the tallest, the
    # widest), enlarged 3 times.
    with Image.open(sheet) as image:
        assert image.size == (
            GAP + 6 * (14 * 3 + GAP),
            GAP + 4 * (TITLE_HEIGHT + 16 * 3 + GAP),
        )
        pixels = np.asarray(image)
    assert report.sheet == sheet and report.sheet_pairs == 6
    assert report.to_value()["contact_sheet_pairs"] == 6
    assert "contact sheet of 6 pairs" in report.to_text()
    assert os.stat(sheet).st_mode & 0o077 == 0
    top = GAP + TITLE_HEIGHT
    for column in range(6):  # each raw cell holds its image, not the background
        left = GAP + column * (14 * 3 + GAP)
        cell = pixels[top : top + 16 * 3, left : left + 14 * 3]
        assert (cell != 255).any(axis=2).mean() > 0.5
    # The grey 16x10 photo (the fourth) fills its cell's height, centred: shown as is.
    with Image.open(photos / "photo03.png") as photo:
        raw = np.asarray(photo)
    left = GAP + 3 * (14 * 3 + GAP) + 2 * 3
    shown = pixels[top : top + 16 * 3 : 3, left : left + 10 * 3 : 3]
    np.testing.assert_array_equal(shown[:, :, 0], raw)
    np.testing.assert_array_equal(shown[:, :, 2], raw)


def test_more_sheet_pairs_than_the_vault_holds_shows_them_all(vault, tmp_path):
    report = inspect_vault(vault, distance_pairs=0, sheet=tmp_path / "s.png", sheet_pairs=50)
    assert report.sheet_pairs == 10
    with pytest.raises(ParameterError):
        inspect_vault(vault, distance_pairs=0, sheet=tmp_path / "t.png", sheet_pairs=0)
    assert not (tmp_path / "t.png").exists()


def test_an_own_proxy_extractor_is_refused_for_marks_not_made_with_it(vault):
    with pytest.raises(ParameterError, match="proxy-own"):
        inspect_vault(vault, distance_pairs=2, extractor="proxy-own")


def test_the_command_reports_every_pair_and_the_sheet(vault, photos, tmp_path, capsys):
    sheet = tmp_path / "sheet.png"
    arguments = ["owner", "inspect", str(vault.path), "--input", str(photos)]
    arguments += ["--extractor", TINY, "--distance-pairs", "9", "--sheet", str(sheet)]
    assert main(arguments) == 0
    out = capsys.readouterr().out
    assert "over 9 pairs of 3 sizes" in out
    assert "contact sheet of 8 pairs" in out  # the default
    assert main([*arguments, "--json"]) == 0
    value = json.loads(capsys.readouterr().out)
    assert value["feature_distance"]["pairs"] == 9
    assert value["feature_distance"]["fallback"] is None
    assert value["contact_sheet_pairs"] == 8


def test_the_report_says_what_the_vault_takes_against_the_input_files(vault, photos, capsys):
    """Issue #39: an owner checks the vault's size on her own photos (target 3x)."""
    alone = inspect_vault(vault, distance_pairs=0).storage
    assert alone is not None and alone.input_bytes is None
    on_disk = sum(path.stat().st_size for path in vault.path.rglob("*") if path.is_file())
    assert (alone.format_version, alone.vault_bytes) == (5, on_disk)
    assert "x the" not in alone.text() and "storage: vault format 5" in alone.text()
    files = sum(path.stat().st_size for path in photos.glob("*.png"))
    arguments = ["owner", "inspect", str(vault.path), "--input", str(photos)]
    assert main([*arguments, "--distance-pairs", "0", "--json"]) == 0
    storage = json.loads(capsys.readouterr().out)["storage"]
    assert storage == {"format_version": 5, "vault_bytes": on_disk, "input_bytes": files}
    assert main([*arguments, "--distance-pairs", "0"]) == 0
    assert f"{on_disk / files:.2f}x the" in capsys.readouterr().out


def test_the_extractor_help_says_what_the_default_really_is(capsys):
    with pytest.raises(SystemExit):
        main(["owner", "inspect", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert (
        "proxy-own or proxy-clusters, which the vault does not keep, efficientnet-lite0 at 96 px"
        in help_text
    )


@pytest.mark.parametrize("made_before", [False, True])
def test_a_folder_is_compared_as_its_vault_read_it_turned_or_as_stored(
    tmp_path, capsys, made_before
):
    """A vault made before EXIF orientation was applied is inspected against its folder
    read as stored, one made since against it turned: the ε check holds either way."""
    root = tmp_path / "phone"
    root.mkdir()
    rng = np.random.default_rng(3)
    exif = Image.Exif()
    exif[0x0112] = 6  # a portrait photo stored lying down
    Image.fromarray(rng.integers(0, 256, (10, 16, 3), dtype=np.uint8)).save(
        root / "portrait.png", exif=exif.tobytes()
    )
    Image.fromarray(rng.integers(0, 256, (12, 12, 3), dtype=np.uint8)).save(root / "square.png")
    config = MarkingConfig(marker="gaussian", epsilon=10, batch_size=4)
    source = open_source(root, upright=not made_before)
    vault = mark(source, tmp_path / "v", config, secret=SECRET, show_progress=False).vault
    shapes = {vault.pair(i)[0].pixels.shape for i in range(vault.n_pairs)}
    assert shapes == {(10, 16, 3) if made_before else (16, 10, 3), (12, 12, 3)}
    assert main(["owner", "inspect", str(vault.path), "--input", str(root), "--json"]) == 0
    value = json.loads(capsys.readouterr().out)
    assert value["epsilon_check"]["holds"] is True


def test_a_vault_begun_before_resumes_and_finishes_reading_its_folder_as_stored(
    tmp_path, monkeypatch, capsys
):
    """``owner mark`` resumes a vault begun before EXIF orientation was applied as it was
    begun (its folder read as stored), to the vault an uninterrupted run made then."""
    import twinaudit.owner.kinds as kinds

    root = tmp_path / "phone"
    root.mkdir()
    rng = np.random.default_rng(4)
    exif = Image.Exif()
    exif[0x0112] = 6
    Image.fromarray(rng.integers(0, 256, (10, 16, 3), dtype=np.uint8)).save(
        root / "a_portrait.png", exif=exif.tobytes()
    )
    Image.fromarray(rng.integers(0, 256, (12, 12, 3), dtype=np.uint8)).save(root / "b.png")

    def run(out: Path) -> int:
        return main(["owner", "mark", str(root), "--out", str(out), "--marker", "gaussian",
                     "--seed", "old", "-q"])  # fmt: skip

    with monkeypatch.context() as old_code:  # what owner mark did before b9bcb82
        old_code.setattr(kinds, "_upright_at", lambda out: False)
        assert run(tmp_path / "whole") == 0
        stop_at_append(old_code, 2)
        assert run(tmp_path / "begun") != 0  # stopped after its first batch
    assert (tmp_path / "begun" / "journal").is_file()
    assert not (tmp_path / "begun" / "manifest.msgpack").exists()
    assert run(tmp_path / "begun") == 0  # resumed by today's code
    whole, begun = Vault.open(tmp_path / "whole"), Vault.open(tmp_path / "begun")
    assert begun.root == whole.root
    assert begun.pair(0)[0].pixels.shape == (10, 16, 3)  # as stored, as it was begun
    assert run(tmp_path / "whole") == 0  # finished: nothing to do, no "another source"
    capsys.readouterr()
