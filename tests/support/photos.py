"""Photo-like JPEGs generated on the fly for marking-at-scale tests (nothing committed).

A smooth colour field (a coarse random grid upsampled bicubically), a darker lower
half like ground under a sky, and sensor-like noise, saved as JPEG at quality 92:
what a camera gives, at any size, from a seed.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import numpy.typing as npt
from PIL import Image


def photo(height: int, width: int, seed: int) -> npt.NDArray[np.uint8]:
    """Return one photo-like RGB image (height, width, 3), uint8."""
    rng = np.random.default_rng(seed)
    coarse = rng.integers(40, 220, size=(6, 8, 3), dtype=np.uint8)
    field = np.asarray(
        Image.fromarray(coarse).resize((width, height), Image.Resampling.BICUBIC), dtype=np.int16
    )
    field[height // 2 :] -= 30  # ground darker than the sky
    noise = rng.integers(-5, 6, size=field.shape, dtype=np.int16)
    return np.clip(field + noise, 0, 255).astype(np.uint8)


def write_photos(folder: Path, count: int, height: int, width: int, seed: int = 0) -> list[Path]:
    """Write ``count`` photo-like JPEGs of ``width`` × ``height`` into ``folder``; return them."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for index in range(count):
        path = folder / f"photo-{index:04d}.jpg"
        Image.fromarray(photo(height, width, seed + index)).save(path, quality=92)
        paths.append(path)
    return paths
