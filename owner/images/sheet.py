"""Contact sheets: rows of images drawn into one PNG, for a human to look at.

Each row is a title and n images (the same n for every row), for example the raw
images, the published versions, the hidden versions and an amplified difference
(:func:`amplified_difference`). Images are enlarged by nearest-neighbour ``scale``;
grayscale images are shown as RGB. Layout, in pixels: a margin of :data:`GAP`
around the grid and between cells; above each row a title band of
:data:`TITLE_HEIGHT`; every cell is as wide as the widest image; the sheet is at
least as wide as the longest title.

:func:`write_fitted_contact_sheet` takes rows of images of any sizes (a folder of
photos): for display only, each image is resized by nearest neighbour to fit one
common cell, its aspect ratio kept, and centred on the background.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Final

import numpy as np
import numpy.typing as npt
from PIL import Image, ImageDraw, ImageFont

from twinaudit.protocol.atomic_file import write_atomically
from twinaudit.protocol.errors import InputError, LimitExceededError, NotFoundError, ParameterError

#: Height of the title band above each row.
TITLE_HEIGHT: Final = 14
#: Margin around the grid and space between cells and rows.
GAP: Final = 4
#: Largest upscaling factor.
MAX_SCALE: Final = 16
#: Largest sheet side, in pixels.
MAX_SHEET_SIDE: Final = 16384
#: Largest cell side of :func:`write_fitted_contact_sheet`, in sheet pixels.
CELL_SIDE: Final = 256
#: Largest enlargement of :func:`write_fitted_contact_sheet` (the default ``scale``).
FITTED_SCALE: Final = 3

_BACKGROUND: Final = (255, 255, 255)
_INK: Final = (0, 0, 0)

Row = tuple[str, npt.NDArray[np.uint8]]
#: A title and images of any sizes, one (H, W, C) array each.
ImagesRow = tuple[str, Sequence[npt.NDArray[np.uint8]]]


def write_contact_sheet(path: Path, rows: Sequence[Row], *, scale: int = 3) -> None:
    """Write a PNG grid with one titled row per ``(title, images)``; replace ``path`` atomically.

    Args:
        path: The PNG to write; its folder must exist.
        rows: Titles and uint8 image arrays (n, H, W, C), C in {1, 3}, the same n for all.
        scale: Nearest-neighbour enlargement factor, 1..16.

    Raises:
        ParameterError: ``scale`` is out of range.
        InputError: No rows, an array of the wrong type or shape, or unequal n.
        LimitExceededError: The sheet would be larger than ``MAX_SHEET_SIDE``.
        NotFoundError: The folder of ``path`` does not exist.

    """
    if isinstance(scale, bool) or not isinstance(scale, int) or not 1 <= scale <= MAX_SCALE:
        raise ParameterError(f"scale must be an integer in [1, {MAX_SCALE}], got {scale!r}")
    _check_rows(rows)
    path = Path(path)
    if not path.parent.is_dir():
        raise NotFoundError(f"{path.parent}: no such folder for the contact sheet {path.name}")
    sheet = _draw_sheet(rows, scale)
    write_atomically(path, lambda stream: sheet.save(stream, format="PNG"))


def write_fitted_contact_sheet(
    path: Path, rows: Sequence[ImagesRow], *, cell_side: int = CELL_SIDE
) -> tuple[int, int]:
    """Write a contact sheet of images of any sizes, each fitted to one common cell.

    For display only (the images themselves are not changed): the cell is as tall as
    the tallest image and as wide as the widest, shrunk (aspect kept) until its longer
    side is at most ``cell_side``. Each image is resized by nearest neighbour (no pixel
    values blended, so a mark's pattern shows as it is) to the largest size that fits
    the cell with its aspect ratio kept, and centred on the white background; a row
    that mixes grey and colour is shown in colour. The cells are then enlarged by the
    largest integer factor up to :data:`FITTED_SCALE` that keeps them within
    ``cell_side``. Images that all share one shape, sides up to ``cell_side //
    FITTED_SCALE``, give exactly ``write_contact_sheet(path, rows)``.

    Args:
        path: The PNG to write; its folder must exist.
        rows: Titles and lists of uint8 images (H, W, C), C in {1, 3}, the same number
            in every row; column j of every row shares one cell.
        cell_side: Largest cell side on the sheet, in pixels (at least 1).

    Returns:
        The cell's (height, width) in image pixels, before the enlargement.

    Raises:
        ParameterError: ``cell_side`` is not a positive integer.
        InputError: No rows, an empty row, an image of the wrong type or shape, or
            unequal numbers of images.
        LimitExceededError: The sheet would be larger than ``MAX_SHEET_SIDE``.
        NotFoundError: The folder of ``path`` does not exist.

    """
    if isinstance(cell_side, bool) or not isinstance(cell_side, int) or cell_side < 1:
        raise ParameterError(f"cell_side must be a positive integer, got {cell_side!r}")
    if not rows:
        raise InputError("a contact sheet needs at least one row")
    for title, images in rows:
        if len(images) < 1:
            raise InputError(f"row {title!r}: no images")
        for image in images:
            if (
                not isinstance(image, np.ndarray)
                or image.dtype != np.uint8
                or image.ndim != 3
                or min(image.shape[:2]) < 1
                or image.shape[2] not in (1, 3)
            ):
                raise InputError(f"row {title!r}: each image must be uint8 (H, W, C), C in 1, 3")
    height = max(image.shape[0] for _, images in rows for image in images)
    width = max(image.shape[1] for _, images in rows for image in images)
    longest = max(height, width)
    if longest > cell_side:
        height = max(1, round(height * cell_side / longest))
        width = max(1, round(width * cell_side / longest))
    scale = max(1, min(FITTED_SCALE, cell_side // max(height, width)))
    fitted = [(title, _fitted_row(images, height, width)) for title, images in rows]
    write_contact_sheet(path, fitted, scale=scale)
    return height, width


def _fitted_row(
    images: Sequence[npt.NDArray[np.uint8]], height: int, width: int
) -> npt.NDArray[np.uint8]:
    channels = 3 if any(image.shape[2] == 3 for image in images) else 1
    cells = np.full((len(images), height, width, channels), _BACKGROUND[0], dtype=np.uint8)
    for cell, image in zip(cells, images, strict=True):
        rows, cols = image.shape[:2]
        factor = min(height / rows, width / cols)
        new_rows = min(height, max(1, round(rows * factor)))
        new_cols = min(width, max(1, round(cols * factor)))
        pick_rows = np.minimum((np.arange(new_rows) + 0.5) * rows / new_rows, rows - 1)
        pick_cols = np.minimum((np.arange(new_cols) + 0.5) * cols / new_cols, cols - 1)
        resized = image[pick_rows.astype(np.intp)][:, pick_cols.astype(np.intp)]
        top, left = (height - new_rows) // 2, (width - new_cols) // 2
        cell[top : top + new_rows, left : left + new_cols] = resized  # grey broadcasts to RGB
    return cells


def amplified_difference(
    first: npt.NDArray[np.uint8], second: npt.NDArray[np.uint8], *, gain: int = 8
) -> npt.NDArray[np.uint8]:
    """Return ``128 + gain · (first − second)``, clipped to 0..255 (mid-grey = no difference)."""
    if first.shape != second.shape:
        raise InputError(f"cannot subtract images of shapes {first.shape} and {second.shape}")
    difference = first.astype(np.int32) - second.astype(np.int32)
    return np.clip(128 + gain * difference, 0, 255).astype(np.uint8)


def _check_rows(rows: Sequence[Row]) -> None:
    if not rows:
        raise InputError("a contact sheet needs at least one row")
    counts = set()
    for title, images in rows:
        if (
            not isinstance(images, np.ndarray)
            or images.dtype != np.uint8
            or images.ndim != 4
            or images.shape[0] < 1
            or images.shape[3] not in (1, 3)
        ):
            raise InputError(f"row {title!r}: images must be a uint8 array (n, H, W, C), C in 1, 3")
        counts.add(images.shape[0])
    if len(counts) != 1:
        raise InputError(f"all rows of a contact sheet need the same number of images: {counts}")


def _draw_sheet(rows: Sequence[Row], scale: int) -> Image.Image:
    font = ImageFont.load_default()
    count = rows[0][1].shape[0]
    cell_width = max(images.shape[2] for _, images in rows) * scale
    title_width = max(int(font.getlength(title)) for title, _ in rows) + 2 * GAP
    width = max(GAP + count * (cell_width + GAP), title_width)
    height = GAP + sum(TITLE_HEIGHT + images.shape[1] * scale + GAP for _, images in rows)
    if max(width, height) > MAX_SHEET_SIDE:
        raise LimitExceededError("contact sheet side", max(width, height), MAX_SHEET_SIDE)
    sheet = Image.new("RGB", (width, height), _BACKGROUND)
    draw = ImageDraw.Draw(sheet)
    top = GAP
    for title, images in rows:
        draw.text((GAP, top), title, fill=_INK, font=font)
        top += TITLE_HEIGHT
        for index, image in enumerate(images):
            tile = Image.fromarray(_enlarged_rgb(image, scale))
            sheet.paste(tile, (GAP + index * (cell_width + GAP), top))
        top += images.shape[1] * scale + GAP
    return sheet


def _enlarged_rgb(image: npt.NDArray[np.uint8], scale: int) -> npt.NDArray[np.uint8]:
    rgb = np.repeat(image, 3, axis=2) if image.shape[2] == 1 else image
    return np.ascontiguousarray(np.repeat(np.repeat(rgb, scale, axis=0), scale, axis=1))
