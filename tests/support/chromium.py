"""Headless Chromium for tests: render a page, return its screenshot (Debian ``chromium``)."""

from __future__ import annotations

import shutil
import struct
import subprocess
from pathlib import Path

import pytest

CHROMIUM = next(
    (p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome")) if p), None
)
needs_chromium = pytest.mark.skipif(
    CHROMIUM is None, reason="headless Chromium is not installed (Debian package chromium)"
)


def png_size(data: bytes) -> tuple[int, int]:
    """Return the (width, height) of the PNG ``data`` (its IHDR chunk)."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR"
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def screenshot(page: Path, png: Path, window: tuple[int, int]) -> bytes:
    """Render ``page`` in headless Chromium and return the PNG screenshot's bytes."""
    assert CHROMIUM is not None
    result = subprocess.run(
        [
            CHROMIUM,
            "--headless",
            "--disable-gpu",
            "--no-sandbox",
            "--hide-scrollbars",
            "--no-first-run",
            "--disable-extensions",
            "--disable-dev-shm-usage",
            f"--user-data-dir={png.parent / 'chromium-profile'}",
            f"--screenshot={png}",
            f"--window-size={window[0]},{window[1]}",
            page.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert result.returncode == 0 and png.is_file(), result.stderr[-2000:]
    return png.read_bytes()
