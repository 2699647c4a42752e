"""Issue #24: ``owner mark`` reads and checks every input before the first marking step."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from tests.support.cli_processes import cli
from twinaudit.owner.images.sources import open_source
from twinaudit.owner.mark import mark
from twinaudit.owner.marking import MarkingConfig
from twinaudit.protocol.errors import InputError


def _folder(tmp_path: Path) -> Path:
    """Fifty photos of mixed sizes, one with transparent pixels and one that is not an image."""
    root = tmp_path / "photos"
    root.mkdir()
    rng = np.random.default_rng(0)
    for i in range(48):
        side = 24 if i % 2 else 32
        pixels = rng.integers(0, 256, (side, side, 3), dtype=np.uint8)
        Image.fromarray(pixels).save(root / f"photo{i:02d}.png")
    see_through = Image.new("RGBA", (32, 32), (10, 20, 30, 255))
    see_through.putpixel((3, 3), (10, 20, 30, 0))
    see_through.save(root / "photo30-logo.png")
    (root / "photo45-broken.png").write_bytes(b"\x89PNG not really")
    return root


def test_every_bad_image_is_named_before_any_marking(tmp_path):
    root = _folder(tmp_path)
    began = time.monotonic()
    with pytest.raises(InputError) as raised:
        source = open_source(root)  # one report: the broken file and the transparent one
    assert "2 of 50" in str(raised.value)
    assert "photo45-broken.png" in str(raised.value) and "photo30-logo.png" in str(raised.value)
    (root / "photo45-broken.png").unlink()
    source = open_source(root)
    vault = tmp_path / "vault"
    with pytest.raises(InputError) as raised:  # pixels: the transparent one, before the marker
        mark(source, vault, MarkingConfig(marker="bernoulli", epsilon=8), show_progress=False)
    assert time.monotonic() - began < 5.0
    assert "photo30-logo.png" in str(raised.value) and "transparent" in str(raised.value)
    assert not vault.exists()


def test_the_command_names_all_the_bad_files_at_once_and_writes_nothing(tmp_path):
    root = _folder(tmp_path)
    (root / "photo30-logo.png").rename(root / "photo30-logo-copy.png")
    broken = Image.new("LA", (8, 8), (0, 0))  # a second transparent image
    broken.save(root / "photo31-ghost.png")
    result = cli("owner", "mark", str(root), "--out", str(tmp_path / "vault"), check=False)
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    assert "3 of 51 images cannot be marked" in result.stderr
    assert "photo45-broken.png" in result.stderr
    assert "photo30-logo-copy.png" in result.stderr and "photo31-ghost.png" in result.stderr
    assert not (tmp_path / "vault").exists()
