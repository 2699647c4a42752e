"""A phone's HEIC photos: read upright with their colour profile, marked, published as PNG.

The files in ``tests/support/heif`` were written with pillow-heif 1.8.1 (libheif
1.23.6, x265), which this project does not install (it reads HEIF with the decode-only
pi-heif): from the 24 × 40 picture :func:`stored` draws, ``plain.heic`` as it is and
``turned.heic`` with EXIF orientation 6 (which pillow-heif writes as the file's own
rotation, as phones do) and an sRGB ICC profile, both at quality 95; and
``astronaut.heic``, 256 × 192 pixels of scikit-image's ``astronaut.png`` (a NASA photo,
public domain; the crop from (96, 32)) at quality 60 with orientation 8, a photo large
enough that a vault keeps it as its HEIF file. And three 64 × 48 files at quality 90:
``deep10.heic`` with 10 bits a channel (as a phone's HDR photo), ``opaque_alpha.heic``
with an alpha channel that is opaque everywhere, ``transparent.heic`` with a transparent
corner. And two of the 64 × 48 crop of ``astronaut.png`` from (96, 32) at quality 90, as
phones write their files: ``thumbnail.heic`` with a 16-pixel thumbnail
(``save(..., thumbnails=[16])``), ``two_images.heic`` with a second, 32 × 24 top-level
image (``add_from_pillow``).
"""

from __future__ import annotations

import io
import os
import shutil
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

import twinaudit.owner.images.sources as sources_module
import twinaudit.owner.vault.jpeg_pairs as jpeg_pairs
from tests.owner.test_vault_jpeg import codings, mark_folder, other_decoder
from tests.owner.test_vault_receipt import escrowed
from tests.support.cli_processes import (
    arbiter_process,
    check_and_replay,
    claim_args,
    cli,
    escrow_args,
    serve,
    stop,
)
from twinaudit.owner.images.sources import FolderSource, open_source
from twinaudit.owner.mark import mark
from twinaudit.owner.marking import MarkingConfig
from twinaudit.owner.publish import publish
from twinaudit.owner.vault import Vault
from twinaudit.owner.vault.jpeg_pairs import HEIF_CODING, JPEG_CODING, MIDPOINT_CODING
from twinaudit.owner.vault.migration import migrate_vault, originals_in
from twinaudit.protocol.errors import InputError, VaultIntegrityError

FIXTURES = Path(__file__).resolve().parents[1] / "support" / "heif"
SECRET = bytes(range(32))

pytestmark = pytest.mark.skipif(
    not sources_module.HEIF_READ, reason="pi-heif, a dependency, is not installed"
)


@pytest.fixture(autouse=True)
def _no_fsync(monkeypatch):
    monkeypatch.setattr(os, "fsync", lambda fd: None)


def stored() -> np.ndarray:
    """The 24 × 40 picture both HEIC files hold, with a red top-left corner."""
    ys, xs = np.mgrid[0:24, 0:40]
    pixels = np.stack([60 + 4 * xs, 40 + 6 * ys, 200 - 3 * xs], -1).astype(np.uint8)
    pixels[:8, :12] = (230, 30, 30)
    return pixels


def _jpeg_turned(pixels: np.ndarray) -> bytes:
    exif = Image.Exif()
    exif[0x0112] = 6
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, "JPEG", quality=95, exif=exif.tobytes())
    return buffer.getvalue()


@pytest.fixture
def phone(tmp_path) -> Path:
    root = tmp_path / "phone"
    root.mkdir()
    shutil.copy(FIXTURES / "turned.heic", root / "IMG_0001.HEIC")
    shutil.copy(FIXTURES / "plain.heic", root / "IMG_0002.heic")
    (root / "IMG_0003.jpg").write_bytes(_jpeg_turned(stored()))
    return root


def _read(folder: Path) -> dict[str, tuple[np.ndarray, bytes | None]]:
    source = FolderSource(folder)
    read = {}
    for batch in source.batches(8):
        profiles = batch.profiles or [None] * len(batch)
        for name, pixels, profile in zip(batch.names, batch.pixels, profiles, strict=True):
            read[name] = (pixels, profile)
    return read


def _mean_difference(first: np.ndarray, second: np.ndarray) -> float:
    return float(np.abs(first.astype(int) - second.astype(int)).mean())


def test_a_heic_photo_is_read_as_a_viewer_shows_it_with_its_profile(phone):
    read = _read(phone)
    upright = np.asarray(Image.fromarray(stored()).transpose(Image.Transpose.ROTATE_270))
    turned, profile = read["IMG_0001.HEIC"]
    assert turned.shape == (40, 24, 3)  # stored 24 high, turned a quarter to stand
    assert _mean_difference(turned, upright) < 4  # HEIC is lossy: 1.57 measured
    # The same picture with the same orientation in a JPEG is read the same way.
    assert _mean_difference(turned, read["IMG_0003.jpg"][0]) < 4
    turned_the_other_way = np.asarray(
        Image.fromarray(stored()).transpose(Image.Transpose.ROTATE_90)
    )
    assert _mean_difference(turned, turned_the_other_way) > 30
    assert profile is not None and profile[36:40] == b"acsp"  # an ICC profile's signature
    plain, none = read["IMG_0002.heic"]
    assert plain.shape == (24, 40, 3) and none is None
    assert _mean_difference(plain, stored()) < 4


def test_a_heic_photo_is_marked_and_published_as_png_with_its_profile(phone, tmp_path):
    config = MarkingConfig(marker="bernoulli", batch_size=4)
    vault = mark(open_source(phone), tmp_path / "v", config, secret=SECRET, show_progress=False)
    escrowed(vault.vault, tmp_path / "escrow.db")
    publish(vault.vault, tmp_path / "out", show_progress=False)
    read = _read(phone)
    for name, published in [("IMG_0001.HEIC", "IMG_0001.png"), ("IMG_0002.heic", "IMG_0002.png")]:
        with Image.open(tmp_path / "out" / published) as image:
            assert image.format == "PNG"
            assert image.info.get("icc_profile") == read[name][1]
            pixels = np.asarray(image)
        difference = np.abs(pixels.astype(int) - read[name][0].astype(int))
        assert difference.max() <= config.epsilon


def test_deep_and_alpha_heic_photos_are_read_as_other_images_are(tmp_path):
    folder = tmp_path / "deep"
    folder.mkdir()
    for name in ("deep10.heic", "opaque_alpha.heic"):
        shutil.copy(FIXTURES / name, folder / name)
    read = _read(folder)
    for name in ("deep10.heic", "opaque_alpha.heic"):
        pixels, _ = read[name]
        assert pixels.shape == (48, 64, 3) and pixels.dtype == np.uint8  # 8 bits, no alpha
    shutil.copy(FIXTURES / "transparent.heic", folder / "transparent.heic")
    with pytest.raises(InputError, match=r"transparent\.heic: the image has transparent pixels"):
        open_source(folder).check_pixels()


def test_a_heic_photo_with_a_thumbnail_is_its_primary_image_and_two_images_are_refused(
    tmp_path,
):
    folder = tmp_path / "phone"
    folder.mkdir()
    shutil.copy(FIXTURES / "thumbnail.heic", folder / "IMG_0005.HEIC")
    pixels, _ = _read(folder)["IMG_0005.HEIC"]
    assert pixels.shape == (48, 64, 3)  # the photo, not its 16-pixel thumbnail
    expected = np.asarray(Image.open(FIXTURES / "thumbnail.heic").convert("RGB"))
    assert np.array_equal(pixels, expected)
    shutil.copy(FIXTURES / "two_images.heic", folder / "IMG_0006.HEIC")
    with pytest.raises(InputError, match=r"IMG_0006\.HEIC: holds 2 frames"):
        open_source(folder).check_pixels()


def test_without_pi_heif_a_heic_photo_is_refused_by_name(phone, monkeypatch):
    monkeypatch.setattr(sources_module, "HEIF_READ", False)
    with pytest.raises(InputError) as raised:
        open_source(phone)
    message = str(raised.value)
    assert "IMG_0001.HEIC: a HEIF photo, and pi-heif" in message
    assert "IMG_0002.heic" in message and "IMG_0003.jpg" not in message


def test_a_damaged_heic_file_is_named(phone):
    data = (FIXTURES / "turned.heic").read_bytes()
    (phone / "IMG_0004.heic").write_bytes(data[: len(data) // 2])
    (phone / "IMG_0005.heic").write_bytes(b"\x00\x00\x00\x18ftypheic" + bytes(40))
    with pytest.raises(InputError) as raised:
        open_source(phone).check_pixels()
    message = str(raised.value)
    assert "IMG_0004.heic" in message and "IMG_0005.heic" in message
    assert "IMG_0001.HEIC" not in message


# --- Kept in the vault as the HEIF file (format 4) ---------------------------------------------


@pytest.fixture
def album(tmp_path) -> Path:
    root = tmp_path / "album"
    root.mkdir()
    shutil.copy(FIXTURES / "astronaut.heic", root / "a.heic")
    (root / "b.jpg").write_bytes(_jpeg_of_astronaut())
    return root


def _jpeg_of_astronaut() -> bytes:
    with Image.open(FIXTURES / "astronaut.heic") as image:
        buffer = io.BytesIO()
        image.save(buffer, "JPEG", quality=90)
    return buffer.getvalue()


def test_a_heic_photo_is_kept_as_its_file_in_format_4_and_opens_exactly(album, tmp_path):
    new, written = mark_folder(album, tmp_path / "v4", format_version=4)
    old, _ = mark_folder(album, tmp_path / "v2", format_version=2)
    assert codings(new) == {"a.heic": HEIF_CODING, "b.jpg": JPEG_CODING}
    assert new.packed_commitments() == old.packed_commitments()
    for index, (version0, version1) in enumerate(written):
        pair = new.pair(index)
        assert np.array_equal(pair[0].pixels, version0)
        assert np.array_equal(pair[1].pixels, version1)
    chunk = next((tmp_path / "v4" / "chunks").iterdir()).read_bytes()
    assert b"pi-heif" in chunk[:400]  # the chunk names the HEIF decoder
    smaller = sum(f.stat().st_size for f in (tmp_path / "v4" / "chunks").iterdir())
    larger = sum(f.stat().st_size for f in (tmp_path / "v2" / "chunks").iterdir())
    assert smaller < larger / 2


def test_format_3_never_keeps_a_heif_file(album, tmp_path):
    vault, _ = mark_folder(album, tmp_path / "v3", format_version=3)
    assert codings(vault) == {"a.heic": MIDPOINT_CODING, "b.jpg": JPEG_CODING}


def test_a_heif_decoder_that_gives_other_pixels_is_named_at_the_item(album, tmp_path, monkeypatch):
    mark_folder(album, tmp_path / "v", format_version=4)
    monkeypatch.setattr(jpeg_pairs, "decode_jpeg", other_decoder(jpeg_pairs.decode_jpeg))
    with pytest.raises(VaultIntegrityError) as caught:
        Vault.open(tmp_path / "v")
    assert "was stored as its HEIF file" in caught.value.problem
    pi_heif = pytest.importorskip("pi_heif")
    assert f"pip install pi-heif=={pi_heif.__version__}" in caught.value.problem


def test_without_pi_heif_a_heif_coded_vault_is_refused_naming_why(album, tmp_path, monkeypatch):
    mark_folder(album, tmp_path / "v", format_version=4)
    monkeypatch.setattr(jpeg_pairs, "HEIF_READ", False)
    monkeypatch.setattr("twinaudit.owner.heif_reader.HEIF_READ", False)
    with pytest.raises(VaultIntegrityError, match="holds a HEIF file, and this is no HEIF decoder"):
        Vault.open(tmp_path / "v")


def test_migration_keeps_a_heic_photo_as_its_file_only_from_format_4(album, tmp_path):
    vault, _ = mark_folder(album, tmp_path / "v", format_version=2)
    escrowed(vault, tmp_path / "escrow.db")
    openings = [vault.opening(index) for index in range(vault.n_pairs)]
    migrate_vault(vault.path, to_version=3, originals=originals_in(album))
    assert codings(Vault.open(vault.path))["a.heic"] == MIDPOINT_CODING
    migrate_vault(vault.path, to_version=4, originals=originals_in(album))
    moved = Vault.open(vault.path)
    assert moved.format_version == 4 and codings(moved)["a.heic"] == HEIF_CODING
    migrate_vault(vault.path, originals=originals_in(album))  # to 5
    moved = Vault.open(vault.path)
    assert moved.format_version == 5 and codings(moved)["a.heic"] == HEIF_CODING
    assert [moved.opening(index) for index in range(moved.n_pairs)] == openings


@pytest.mark.slow
def test_a_claim_on_a_vault_that_keeps_heic_files_checks_and_replays(album, tmp_path):
    """The whole dispute through the console script, the vault's HEIC kept as its file."""
    shutil.copy(FIXTURES / "turned.heic", album / "c.heic")
    (album / "labels.csv").write_text("filename,label\na.heic,0\nb.jpg,1\nc.heic,0\n")
    vault = tmp_path / "vault"
    with arbiter_process(tmp_path) as (address, pub):
        marked = cli(
            "owner", "mark", str(album), "--labels", str(album / "labels.csv"),
            "--out", str(vault), "--marker", "bernoulli", "--seed", "heic", "-q",
        )  # fmt: skip
        assert "marked 3 pairs" in marked.stdout
        assert codings(Vault.open(vault))["a.heic"] == HEIF_CODING
        cli(*escrow_args(vault, address, pub))
        cli("owner", "publish", str(vault), "--out", str(tmp_path / "pub"), "-q")
        assert sorted(p.name for p in (tmp_path / "pub").iterdir()) == [
            "a.png", "b.png", "c.png", "labels.csv"
        ]  # fmt: skip
        with Image.open(tmp_path / "pub" / "c.png") as published:
            assert published.size == (24, 40) and published.info.get("icc_profile")
        torch = pytest.importorskip("torch")
        from demo.tiny_cnn import tiny_cnn_16

        torch.save(tiny_cnn_16().state_dict(), tmp_path / "model.pt")
        oracle, endpoint = serve(
            "oracle", "serve", "--model", str(tmp_path / "model.pt"),
            "--arch", "tests.support.models:tiny_cnn_16", "--n-classes", "10",
            "--input-shape", "28,28,1", "--threads", "1", "--listen", "127.0.0.1:0",
            ready="listening on",
        )  # fmt: skip
        try:
            out = tmp_path / "claim"
            claimed = cli(*claim_args(vault, address, pub, endpoint), "--out", str(out), "-q")
            decision = claimed.stdout.split()[0]
            assert decision in ("DETECTED", "NOT-DETECTED"), claimed.stdout
            check_and_replay(out, pub, decision)
        finally:
            stop(oracle)
