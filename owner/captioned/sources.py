"""Captioned images (paper §6.3): an image source and one caption per image.

The images come from any input :func:`twinaudit.owner.images.sources.open_source` reads (a
folder of images, ``.npy``, ``.npz``, idx). The captions file is one of:

- CSV with a header. With a ``filename`` (or ``name``) column and a ``caption``
  column, each row captions the image of that name (a folder's relative path, or an
  array image's ``<file>#<i>``); every image needs exactly one row, and a row naming
  no image is an error. With a ``caption`` column only, the rows caption the images
  in source order.
- JSON (suffix ``.json``): a list of captions in source order, or an object mapping
  image names to captions.

The number of captions must equal the number of images; each caption must be a valid
protocol text (1..65,536 UTF-8 bytes, not only white space). Every problem is an
:class:`~twinaudit.protocol.errors.InputError` naming the file and the images or rows concerned.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from twinaudit.protocol.encoding import Value
from twinaudit.protocol.errors import InputError

from ..images.sources import ImageBatch, ImageSource, open_source
from ..text.sources import listed, read_utf8_file, text_problems

#: Largest captions file accepted.
MAX_CAPTIONS_FILE_BYTES: Final = 256 * 1024 * 1024
_NAME_COLUMNS: Final = ("filename", "name")


@dataclass(frozen=True)
class CaptionedSource:
    """Images in source order, each with its caption."""

    images: ImageSource
    captions: list[str]
    captions_path: Path
    captions_sha256: str

    @property
    def path(self) -> Path:
        """The images' path."""
        return self.images.path

    def __len__(self) -> int:
        """Return the number of captioned images."""
        return len(self.images)

    def describe(self) -> dict[str, Value]:
        """Return the images' description with the captions file's name and SHA-256."""
        return {
            **self.images.describe(),
            "captions": {"file": self.captions_path.name, "sha256": self.captions_sha256},
        }

    def batches(
        self,
        batch_size: int,
        start: int = 0,
        *,
        fits: Callable[[tuple[int, int, int]], int] | None = None,
    ) -> Iterator[ImageBatch]:
        """Yield the image batches (the captions of a batch: ``captions[start:stop]``)."""
        return self.images.batches(batch_size, start, fits=fits)


def open_captioned_source(
    images: Path,
    captions: Path,
    *,
    labels: Path | None = None,
    npz_key: str | None = None,
    upright: bool = True,
) -> CaptionedSource:
    """Open the images and read their captions.

    ``upright`` is :func:`~twinaudit.owner.images.sources.open_source`'s.

    Raises:
        NotFoundError: a path does not exist.
        LimitExceededError: the captions file is too large.
        InputError: the images are unreadable, the captions file is malformed, its
            count differs from the images', or captions are missing, unknown or invalid.

    """
    source = open_source(images, labels=labels, npz_key=npz_key, upright=upright)
    captions = Path(captions)
    data, content = read_utf8_file(captions, MAX_CAPTIONS_FILE_BYTES, "captions file")
    names = source.names()
    if captions.suffix.lower() == ".json":
        chosen = _from_json(content, names, captions)
    else:
        chosen = _from_csv(content, names, captions)
    problems = text_problems(chosen, names)
    if problems:
        raise InputError(f"{captions}: {len(problems)} caption(s) are invalid: {listed(problems)}")
    return CaptionedSource(source, chosen, captions, hashlib.sha256(data).hexdigest())


def _from_json(content: str, names: Sequence[str], path: Path) -> list[str]:
    try:
        value = json.loads(content)
    except json.JSONDecodeError as exc:
        raise InputError(f"{path}: not JSON ({exc.msg}, line {exc.lineno})") from None
    if isinstance(value, list):
        if not all(isinstance(caption, str) for caption in value):
            raise InputError(f"{path}: a captions list must hold only strings")
        return _in_order(value, names, path)
    if isinstance(value, dict):
        if not all(isinstance(caption, str) for caption in value.values()):
            raise InputError(f"{path}: every caption must be a string")
        return _by_name(value, names, path)
    raise InputError(f"{path}: JSON captions are a list, or an object by image name")


def _from_csv(content: str, names: Sequence[str], path: Path) -> list[str]:
    reader = csv.reader(io.StringIO(content, newline=""), strict=True)
    try:
        rows = [row for row in reader if row]
    except csv.Error as exc:
        raise InputError(f"{path}:{reader.line_num}: malformed CSV ({exc})") from None
    if not rows or "caption" not in rows[0]:
        raise InputError(f"{path}: the first row must be a header with a 'caption' column")
    header, body = rows[0], rows[1:]
    for number, row in enumerate(body, start=2):
        if len(row) != len(header):
            raise InputError(
                f"{path}: row {number} has {len(row)} fields, the header {len(header)}"
            )
    caption = header.index("caption")
    name_column = next((column for column in _NAME_COLUMNS if column in header), None)
    if name_column is None:
        return _in_order([row[caption] for row in body], names, path)
    key = header.index(name_column)
    mapping: dict[str, str] = {}
    duplicates = []
    for row in body:
        if row[key] in mapping:
            duplicates.append(row[key])
        mapping[row[key]] = row[caption]
    if duplicates:
        raise InputError(f"{path}: images captioned twice: {listed(duplicates)}")
    return _by_name(mapping, names, path)


def _in_order(captions: list[str], names: Sequence[str], path: Path) -> list[str]:
    if len(captions) != len(names):
        raise InputError(f"{path}: {len(captions)} captions for {len(names)} images")
    return captions


def _by_name(mapping: dict[str, str], names: Sequence[str], path: Path) -> list[str]:
    missing = [name for name in names if name not in mapping]
    unknown = sorted(set(mapping) - set(names))
    if missing or unknown:
        parts = []
        if missing:
            parts.append(f"{len(missing)} image(s) have no caption: {listed(missing)}")
        if unknown:
            parts.append(f"{len(unknown)} caption(s) name no image: {listed(unknown)}")
        raise InputError(
            f"{path}: {len(mapping)} captions for {len(names)} images; " + "; ".join(parts)
        )
    return [mapping[name] for name in names]
