"""Captioned images: sources, vault round trip and integrity, CLI mark, escrow, publish."""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest
from PIL import Image

from tests.support.arbiter import sqlite_arbiter
from tests.support.interrupt import stop_at_append
from twinaudit.cli.main import main
from twinaudit.owner.captioned.sources import open_captioned_source
from twinaudit.owner.mark import mark, secret_from_seed
from twinaudit.owner.marking import MarkingConfig
from twinaudit.owner.vault import (
    Vault,
    VaultWriter,
)
from twinaudit.protocol.encoding import decode, encode
from twinaudit.protocol.errors import InputError, NotFoundError, ParameterError, VaultIntegrityError
from twinaudit.protocol.items import CaptionedImageItem, decode_pair

SECRET = secret_from_seed("captioned tests")
CONFIG = MarkingConfig(marker="bernoulli", epsilon=8, batch_size=4)
N = 10


@pytest.fixture
def photos(tmp_path):
    rng = np.random.default_rng(5)
    pixels = rng.integers(0, 256, size=(N, 12, 12, 3), dtype=np.uint8)
    np.save(tmp_path / "photos.npy", pixels)
    captions = [f"a photo of thing number {k}, in colour" for k in range(N)]
    (tmp_path / "captions.json").write_text(json.dumps(captions), encoding="utf-8")
    return tmp_path / "photos.npy", tmp_path / "captions.json", pixels, captions


@pytest.fixture
def folder(tmp_path):
    root = tmp_path / "pictures"
    root.mkdir()
    rng = np.random.default_rng(6)
    names = ["b.png", "a.jpg", "c.png"]
    for name in names:
        Image.fromarray(rng.integers(0, 256, size=(9, 7, 3), dtype=np.uint8)).save(root / name)
    table = tmp_path / "captions.csv"
    with table.open("w", newline="", encoding="utf-8") as stream:
        rows = csv.writer(stream)
        rows.writerow(["filename", "caption"])
        for name in names:
            rows.writerow([name, f"caption of {name}, with a comma"])
    return root, table


# --- Sources -----------------------------------------------------------------------------


def test_captions_by_order_and_by_name(photos, folder, tmp_path):
    images, captions_json, _, captions = photos
    source = open_captioned_source(images, captions_json)
    assert source.captions == captions and len(source) == N
    assert source.describe()["captions"]["file"] == "captions.json"  # type: ignore[index]

    root, table = folder
    source = open_captioned_source(root, table)
    assert source.images.names() == ["a.jpg", "b.png", "c.png"]
    assert source.captions == [f"caption of {n}, with a comma" for n in ("a.jpg", "b.png", "c.png")]

    only = tmp_path / "ordered.csv"
    only.write_text("caption\n" + "".join(f"c{k}\n" for k in range(N)), encoding="utf-8")
    assert open_captioned_source(images, only).captions == [f"c{k}" for k in range(N)]
    by_name = tmp_path / "by-name.json"
    by_name.write_text(json.dumps({f"photos.npy#{k}": f"n{k}" for k in range(N)}))
    assert open_captioned_source(images, by_name).captions == [f"n{k}" for k in range(N)]


@pytest.mark.parametrize(
    ("name", "content", "match"),
    [
        ("c.json", json.dumps(["one"] * (N - 1)), f"{N - 1} captions for {N} images"),
        ("c.json", json.dumps(["one"] * (N + 1)), f"{N + 1} captions for {N} images"),
        ("c.csv", "caption\none\n", f"1 captions for {N} images"),
        ("c.json", json.dumps({"photos.npy#0": "x", "other.png": "y"}), "have no caption"),
        (
            "c.json",
            json.dumps({**{f"photos.npy#{k}": "x" for k in range(N)}, "z": "y"}),
            "name no image",
        ),
        ("c.json", json.dumps(["", *["ok"] * (N - 1)]), r"photos\.npy#0 \(empty\)"),
        ("c.json", json.dumps([1] * N), "only strings"),
        ("c.json", "{not json", "not JSON"),
        ("c.csv", "name,text\nphotos.npy#0,x\n", "'caption' column"),
        ("c.csv", "name,caption\nphotos.npy#0,x\nphotos.npy#0,y\n", "captioned twice"),
        ("c.csv", "name,caption\nphotos.npy#0,x,extra\n", "row 2 has 3 fields"),
    ],
)
def test_bad_captions_are_typed_errors(photos, tmp_path, name, content, match):
    images = photos[0]
    path = tmp_path / name
    path.write_text(content, encoding="utf-8")
    with pytest.raises(InputError, match=match):
        open_captioned_source(images, path)


def test_missing_captions_file(photos, tmp_path):
    with pytest.raises(NotFoundError, match="no such captions file"):
        open_captioned_source(photos[0], tmp_path / "absent.csv")


# --- Vault -------------------------------------------------------------------------------


def test_captioned_vault_round_trip_and_integrity(photos, tmp_path):
    images, captions_json, pixels, captions = photos
    source = open_captioned_source(images, captions_json)
    result = mark(source, tmp_path / "v", CONFIG, secret=SECRET, show_progress=False)
    vault = Vault.open(tmp_path / "v")
    assert vault.item_kind == "captioned-image" and vault.root == result.vault.root
    assert vault.captions() == captions
    for index in range(N):
        first, second = vault.pair(index)
        assert isinstance(first, CaptionedImageItem) and isinstance(second, CaptionedImageItem)
        assert first.caption == second.caption == captions[index]
        assert not np.array_equal(first.image.pixels, second.image.pixels)
        deviation = np.abs(first.image.pixels.astype(int) - pixels[index].astype(int)).max()
        assert deviation <= CONFIG.epsilon
        opening = vault.pair_opening(index)
        decode_pair(opening.version0, opening.version1, "captioned-image")
    # the same images with another caption commit to another root
    changed = tmp_path / "changed.json"
    changed.write_text(json.dumps([*captions[:-1], "another caption"]), encoding="utf-8")
    other = mark(
        open_captioned_source(images, changed),
        tmp_path / "w",
        CONFIG,
        secret=SECRET,
        show_progress=False,
    ).vault
    assert other.root != vault.root
    # a caption edited in the journal is caught
    journal = tmp_path / "v" / "journal"
    data = journal.read_bytes()
    journal.write_bytes(data.replace(b"thing number 3", b"thing number 4"))
    with pytest.raises(VaultIntegrityError, match="journal"):
        Vault.open(tmp_path / "v")


def test_captioned_writer_requires_captions(tmp_path):
    pixels = np.zeros((2, 4, 4, 1), dtype=np.uint8)
    with VaultWriter.create_or_resume(
        tmp_path / "v", item_kind="captioned-image", source={}, config={}, n_items=2
    ) as writer:
        with pytest.raises(ParameterError, match="caption per item"):
            writer.append(pixels, pixels + 1, [None, None], ["a", "b"])
        with pytest.raises(ParameterError, match="1 captions for a batch of 2"):
            writer.append(pixels, pixels + 1, [None, None], ["a", "b"], ["only one"])
        with pytest.raises(InputError, match="text must have 1"):
            writer.append(pixels, pixels + 1, [None, None], ["a", "b"], ["ok", ""])
        assert writer.completed == 0
    with (
        VaultWriter.create_or_resume(
            tmp_path / "i", item_kind="image", source={}, config={}, n_items=2
        ) as writer,
        pytest.raises(ParameterError, match="takes no captions"),
    ):
        writer.append(pixels, pixels + 1, [None, None], ["a", "b"], ["x", "y"])


def test_old_image_journals_are_unchanged(photos, tmp_path):
    # An image vault's chunk records keep exactly their keys (no captions, a shape).
    from twinaudit.owner.mark import mark_path

    mark_path(photos[0], tmp_path / "v", CONFIG, secret=SECRET, show_progress=False)
    data = (tmp_path / "v" / "journal").read_bytes()
    length = int.from_bytes(data[:4], "big")
    second = data[4 + length + 32 :]
    record = decode(second[4 : 4 + int.from_bytes(second[:4], "big")])
    assert isinstance(record, dict) and "captions" not in record and "shape" in record
    assert encode(record)  # canonical


# --- CLI ---------------------------------------------------------------------------------


@pytest.fixture
def arbiter(tmp_path, arbiter_key):
    with sqlite_arbiter(tmp_path, arbiter_key) as address:
        yield address


def test_cli_captioned_folder_mark_escrow_publish_inspect(folder, tmp_path, arbiter, capsys):
    root, table = folder
    vault_path = tmp_path / "vault"
    base = ["owner", "mark", str(root), "--kind", "captioned-image", "--out", str(vault_path)]
    options = ["--marker", "gaussian", "--seed", "captioned cli", "--quiet"]
    assert main([*base, *options]) == 2
    assert "needs --captions" in capsys.readouterr().err
    assert main([*base, *options, "--captions", str(table)]) == 0
    assert "3 captioned-image pairs" in capsys.readouterr().out
    key = str(tmp_path / "arbiter.key.pub")
    assert (
        main(["owner", "escrow", str(vault_path), "--arbiter", arbiter, "--arbiter-key", key]) == 0
    )
    vault = Vault.open(vault_path)
    assert vault.receipt is not None and vault.receipt.entry.item_kind == "captioned-image"
    out = tmp_path / "published"
    assert main(["owner", "publish", str(vault_path), "--out", str(out), "--quiet"]) == 0
    assert sorted(p.name for p in out.iterdir()) == ["a.png", "b.png", "c.png", "captions.csv"]
    with (out / "captions.csv").open(newline="", encoding="utf-8") as stream:
        rows = list(csv.reader(stream))
    assert rows[0] == ["name", "caption"]
    assert rows[1:] == [
        [n, f"caption of {s}, with a comma"]
        for n, s in (("a.png", "a.jpg"), ("b.png", "b.png"), ("c.png", "c.png"))
    ]
    bits = vault.publication_bits()
    for index, name in enumerate(["a.png", "b.png", "c.png"]):
        published = np.asarray(Image.open(out / name))
        expected = vault.pair(index)[int(bits[index])]
        assert isinstance(expected, CaptionedImageItem)
        assert np.array_equal(published, expected.image.pixels)
    capsys.readouterr()
    code = main(
        [
            "owner",
            "inspect",
            str(vault_path),
            "--input",
            str(root),
            "--captions",
            str(table),
            "--distance-pairs",
            "0",
        ]
    )
    assert code == 0
    assert "3 captioned-image pairs" in capsys.readouterr().out


def test_cli_captioned_npy_publication_and_count_mismatch(photos, tmp_path, arbiter, capsys):
    images, captions_json, _, captions = photos
    short = tmp_path / "short.json"
    short.write_text(json.dumps(captions[:-2]), encoding="utf-8")
    base = ["owner", "mark", str(images), "--kind", "captioned-image", "--marker", "bernoulli"]
    code = main([*base, "--out", str(tmp_path / "bad"), "--captions", str(short), "--quiet"])
    assert code == 2 and f"8 captions for {N} images" in capsys.readouterr().err
    assert not (tmp_path / "bad").exists()
    vault_path = tmp_path / "vault"
    assert main([*base, "--out", str(vault_path), "--captions", str(captions_json), "--quiet"]) == 0
    key = str(tmp_path / "arbiter.key.pub")
    assert (
        main(["owner", "escrow", str(vault_path), "--arbiter", arbiter, "--arbiter-key", key]) == 0
    )
    out = tmp_path / "published"
    assert main(["owner", "publish", str(vault_path), "--out", str(out), "--quiet"]) == 0
    assert sorted(p.name for p in out.iterdir()) == ["captions.csv", "photos.npy"]
    rows = list(csv.reader((out / "captions.csv").open(newline="", encoding="utf-8")))
    assert rows[1:] == [[f"photos.npy#{k}", captions[k]] for k in range(N)]


def test_interrupted_captioned_run_resumes_to_the_same_vault(photos, tmp_path, monkeypatch):
    images, captions_json, _, _ = photos
    source = open_captioned_source(images, captions_json)
    mark(source, tmp_path / "whole", CONFIG, secret=SECRET, show_progress=False)
    real = stop_at_append(monkeypatch, 2)
    with pytest.raises(KeyboardInterrupt):
        mark(source, tmp_path / "cut", CONFIG, secret=SECRET, show_progress=False)
    monkeypatch.setattr(VaultWriter, "append", real)
    result = mark(source, tmp_path / "cut", CONFIG, secret=SECRET, show_progress=False)
    assert result.resumed_from == CONFIG.batch_size

    def files(path):
        return {str(p.relative_to(path)): p.read_bytes() for p in path.rglob("*") if p.is_file()}

    assert files(tmp_path / "cut") == files(tmp_path / "whole")
