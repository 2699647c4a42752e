"""A phone's HEIC photos: read upright with their colour profile, marked, published as PNG.

The two files in ``tests/support/heif`` were written with pillow-heif 1.8.1 (libheif
1.23.6, x265), which this project does not install (it reads HEIF with the decode-only
pi-heif), from the 24 × 40 picture :func:`stored` draws: ``plain.heic`` as it is, and
``turned.heic`` with EXIF orientation 6 (which pillow-heif writes as the file's own
rotation, as phones do) and an sRGB ICC profile, both at quality 95.
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
from tests.owner.test_vault_receipt import escrowed
from twinaudit.owner.images.sources import FolderSource, open_source
from twinaudit.owner.mark import mark
from twinaudit.owner.marking import MarkingConfig
from twinaudit.owner.publish import publish
from twinaudit.protocol.errors import InputError

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
