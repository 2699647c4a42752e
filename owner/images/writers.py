"""Publication writers: one version of each image, written in the input's format.

:func:`open_writer` takes the :meth:`~twinaudit.owner.images.sources.ImageSource.describe`
entry of the input and returns a :class:`PublicationWriter` for the same format:

- ``image-dir`` → one PNG per image under the same relative name. Inputs of other
  formats (JPEG, WebP, TIFF, BMP, GIF) are written as ``.png`` (see
  :func:`published_name`): a lossy format would destroy a ±10 mark. An image read
  with an ICC colour profile is written with it. Labels, when published, go to
  ``labels.csv`` (a ``filename,label`` header, the labels files' convention).
- ``npy`` → one ``.npy`` of the input's name and array shape (3-D or 4-D), written
  through a memory map. Labels, when published, go to ``labels.csv``.
- ``npz`` → one ``.npz`` of the input's name holding the image array under the same
  key (stored or deflated like the input) and, when published, the labels under
  the input's labels key and dtype (``labels``, int64, when the input's labels
  came from elsewhere). The input's other arrays are not copied.
- ``idx`` → the images file under the input's name and compression and, when
  published, the labels file: the input's labels file name when the labels came
  from idx, else the sibling name (``…-labels-idx1-ubyte[.gz]``). idx labels are
  single bytes, so labels above 255 are refused.

Everything is written into a hidden staging folder beside ``out_dir`` (``.<name>.*.partial``)
and renamed to ``out_dir`` only by :meth:`PublicationWriter.close`, after every file
has been flushed to disk: a folder named ``out_dir`` is always complete. ``out_dir``
must not exist. On any failure the caller calls :meth:`PublicationWriter.abort` (a
``with`` block does it), which removes the staging folder. Misuse (a batch out of
order, too many images, closing early) is a :class:`~twinaudit.protocol.errors.StateError`;
bad data an :class:`~twinaudit.protocol.errors.InputError`. Errors of the file system itself
(disk full, no permission while writing) propagate as :class:`OSError`.
"""

from __future__ import annotations

import csv
import gzip
import os
import shutil
import struct
import tempfile
import zipfile
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import suppress
from pathlib import Path
from types import TracebackType
from typing import IO, Any, Final

import numpy as np
import numpy.typing as npt
from PIL import Image

from twinaudit.protocol.atomic_file import fsync_directory
from twinaudit.protocol.encoding import Value
from twinaudit.protocol.errors import InputError, NotFoundError, ParameterError, StateError

from .sources import (
    IDX_IMAGES_MAGIC,
    IDX_LABELS_MAGIC,
    ImageBatch,
    idx_labels_name,
    published_image_name,
)

#: Name of the label file written next to published folders and npy arrays.
LABELS_CSV: Final = "labels.csv"
#: Key of the labels array in a published npz whose input labels came from elsewhere.
DEFAULT_NPZ_LABELS_KEY: Final = "labels"

_GZIP_LEVEL: Final = 6
_SYNC_THREADS: Final = 16
#: zlib level of published PNGs. A marked photo carries ±ε noise in every pixel, which no
#: level compresses far: on a marked 4 MP photo (``python -m bench photos``, 2 busy cores)
#: level 1 wrote 65% of the raw bytes in 0.7 s, level 6 57% in 1.1 s, level 9 the same
#: 57% in 1.2 s. Level 6 is the smallest file without level 9's extra time.
PNG_COMPRESS_LEVEL: Final = 6
_STATE_TEXT: Final = {
    "closed": "closed",
    "aborted": "aborted",
    "failed": "unusable after a failed add(); call abort()",
}


def published_name(name: str) -> str:
    """Return the relative name under which an image of a folder input is published.

    PNG names are kept; every other format's suffix becomes ``.png``
    (:func:`~twinaudit.owner.images.sources.published_image_name`).

    Raises:
        InputError: ``name`` is not a relative path to an image of a format read.

    """
    return published_image_name(name)


class PublicationWriter(ABC):
    """Writes the published images of one input into a new folder, atomically.

    Call :meth:`add` with the batches in source order, then :meth:`close`; on any
    failure call :meth:`abort`. Used as a context manager, the writer is aborted on
    leaving the block unless it was closed.
    """

    def __init__(self, out_dir: Path, *, count: int, labels: bool) -> None:
        """Create the staging folder and open the output files."""
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            raise ParameterError(f"count must be a positive integer, got {count!r}")
        self.out_dir = Path(out_dir)
        self.count = count
        self.labels = labels
        self._written = 0
        self._state = "open"
        self._extra: list[str] = []
        self._staging = _create_staging(self.out_dir)
        try:
            self._start()
        except BaseException:
            self.abort()
            raise

    def __enter__(self) -> PublicationWriter:
        """Return the writer."""
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        """Abort unless :meth:`close` succeeded."""
        self.abort()

    @property
    def written(self) -> int:
        """Return the number of images added so far."""
        return self._written

    def add(self, batch: ImageBatch) -> None:
        """Write a batch; ``batch.start`` must equal the number of images written so far.

        Raises:
            StateError: The writer is closed, the batch is out of order or too many
                images were added.
            InputError: The batch does not fit the publication (shape, missing labels).

        """
        self._require_open()
        if batch.start != self._written:
            raise StateError(f"batch starts at image {batch.start}, expected {self._written}")
        if self._written + len(batch) > self.count:
            raise StateError(f"batch would exceed the {self.count} images of the publication")
        if self.labels and any(label is None for label in batch.labels):
            raise InputError(
                f"batch at image {batch.start} has images without labels, "
                "but the publication includes labels"
            )
        try:
            self._write(batch)
        except BaseException:
            self._state = "failed"  # part of the batch may be written: only abort() remains
            raise
        self._written += len(batch)

    def add_file(self, name: str, data: bytes) -> None:
        """Add a small file of the publication's own (``captions.csv``) beside the images.

        Raises:
            InputError: ``name`` is not a plain file name, or is already taken.
            StateError: the writer is not open.

        """
        self._require_open()
        _plain_file_name(name)
        target = self._staging / name
        if name in self._extra or target.exists():
            raise InputError(f"{name!r} is already part of the publication")
        target.write_bytes(data)
        self._extra.append(name)

    def close(self) -> list[Path]:
        """Finish the files, move them to ``out_dir`` and return their paths.

        Raises:
            StateError: Fewer images than ``count`` were added (the writer stays open).
            InputError: ``out_dir`` appeared meanwhile (the writer is aborted).

        """
        self._require_open()
        if self._written != self.count:
            raise StateError(f"{self._written} of {self.count} images written; add the rest")
        try:
            names = self._finish() + self._extra
            _fsync_files([self._staging / name for name in self._extra])
            _fsync_folders(self._staging)
            self._staging.chmod(0o755)
            if self.out_dir.exists() or self.out_dir.is_symlink():
                raise InputError(f"{self.out_dir} appeared while the publication was written")
            self._staging.rename(self.out_dir)
        except BaseException:
            self.abort()
            raise
        self._state = "closed"
        fsync_directory(self.out_dir.parent)
        return [self.out_dir / name for name in names]

    def abort(self) -> None:
        """Remove everything written; does nothing after a successful :meth:`close`."""
        if self._state in ("closed", "aborted"):
            return
        self._state = "aborted"
        with suppress(Exception):
            self._release()
        shutil.rmtree(self._staging, ignore_errors=True)

    def _require_open(self) -> None:
        if self._state != "open":
            raise StateError(f"the writer for {self.out_dir} is {_STATE_TEXT[self._state]}")

    @abstractmethod
    def _start(self) -> None:
        """Open the output files in the staging folder."""

    @abstractmethod
    def _write(self, batch: ImageBatch) -> None:
        """Write the images (and labels, if published) of a checked batch."""

    @abstractmethod
    def _finish(self) -> list[str]:
        """Complete, flush and close the files; return their names relative to the folder."""

    @abstractmethod
    def _release(self) -> None:
        """Close whatever is still open, without completing it."""


class ImageDirWriter(PublicationWriter):
    """Writes one PNG per image under its relative name (format ``image-dir``).

    Inputs of other formats are written as PNG with the suffix changed to ``.png``:
    JPEG (and lossy WebP) would destroy a ±10-pixel mark. Two inputs that map to the
    same published name (``a.jpg`` and ``a.png``) are refused here, and by the source
    before anything is marked. Labels go to ``labels.csv``.
    """

    def _start(self) -> None:
        self._sources_of: dict[str, str] = {}
        self._label_csv = _LabelCsv(self._staging / LABELS_CSV) if self.labels else None

    def _write(self, batch: ImageBatch) -> None:
        for index, name in enumerate(batch.names):
            target = published_name(name)
            if target in self._sources_of:
                raise InputError(
                    f"{name!r} and {self._sources_of[target]!r} would both be published "
                    f"as {target!r}"
                )
            self._sources_of[target] = name
            profile = None if batch.profiles is None else batch.profiles[index]
            _write_png(self._staging / target, batch.pixels[index], profile)
            if self._label_csv is not None:
                self._label_csv.write(target, batch.labels[index])

    def _finish(self) -> list[str]:
        names = sorted(self._sources_of)
        _fsync_files([self._staging / name for name in names])
        if self._label_csv is not None:
            self._label_csv.close()
            names.append(LABELS_CSV)
        return names

    def _release(self) -> None:
        if self._label_csv is not None:
            self._label_csv.discard()


class NpyWriter(PublicationWriter):
    """Writes one ``.npy`` of the input's name and array shape through a memory map."""

    def __init__(
        self, description: Mapping[str, Value], out_dir: Path, *, count: int, labels: bool
    ) -> None:
        """Read the file name and array shape from the input's description."""
        images = _mapping(description, "images")
        self._file_name = _plain_file_name(_text(images, "file"))
        self._array_shape = (count, *_array_shape(images)[1:])
        super().__init__(out_dir, count=count, labels=labels)

    def _start(self) -> None:
        self._array: np.memmap[Any, np.dtype[np.uint8]] | None = np.lib.format.open_memmap(
            self._staging / self._file_name, mode="w+", dtype=np.uint8, shape=self._array_shape
        )
        self._label_csv = _LabelCsv(self._staging / LABELS_CSV) if self.labels else None

    def _write(self, batch: ImageBatch) -> None:
        assert self._array is not None
        self._array[batch.start : batch.stop] = _fit(batch, self._array_shape[1:])
        if self._label_csv is not None:
            for name, label in zip(batch.names, batch.labels, strict=True):
                self._label_csv.write(name, label)

    def _finish(self) -> list[str]:
        assert self._array is not None
        self._array.flush()
        self._array = None
        _fsync_file(self._staging / self._file_name)
        names = [self._file_name]
        if self._label_csv is not None:
            self._label_csv.close()
            names.append(LABELS_CSV)
        return names

    def _release(self) -> None:
        self._array = None
        if self._label_csv is not None:
            self._label_csv.discard()


class NpzWriter(PublicationWriter):
    """Writes one ``.npz`` with the image array under the input's key, streamed."""

    def __init__(
        self, description: Mapping[str, Value], out_dir: Path, *, count: int, labels: bool
    ) -> None:
        """Read the file name, key, array shape and labels layout from the description."""
        images = _mapping(description, "images")
        self._file_name = _plain_file_name(_text(images, "file"))
        self._key = _text(images, "key")
        self._compressed = _flag(images, "compressed")
        self._array_shape = (count, *_array_shape(images)[1:])
        source_labels = description.get("labels")
        self._labels_key = DEFAULT_NPZ_LABELS_KEY
        self._labels_dtype = np.dtype(np.int64)
        if isinstance(source_labels, dict) and source_labels.get("origin") == "npz":
            self._labels_key = _text(source_labels, "key")
            self._labels_dtype = _integer_dtype(_text(source_labels, "dtype"))
        if labels and self._labels_key == self._key:
            raise InputError(f"the labels key {self._key!r} is also the image key")
        super().__init__(out_dir, count=count, labels=labels)

    def _start(self) -> None:
        compression = zipfile.ZIP_DEFLATED if self._compressed else zipfile.ZIP_STORED
        self._raw = (self._staging / self._file_name).open("xb")
        self._archive = zipfile.ZipFile(self._raw, "w", compression=compression, allowZip64=True)
        self._member: IO[bytes] | None = self._archive.open(
            f"{self._key}.npy", "w", force_zip64=True
        )
        header = {"descr": "|u1", "fortran_order": False, "shape": self._array_shape}
        np.lib.format.write_array_header_1_0(self._member, header)
        self._label_values: list[int] = []

    def _write(self, batch: ImageBatch) -> None:
        assert self._member is not None
        self._member.write(_fit(batch, self._array_shape[1:]).tobytes())
        if self.labels:
            values = [label for label in batch.labels if label is not None]
            _check_labels_fit(values, self._labels_dtype, batch.start)
            self._label_values += values

    def _finish(self) -> list[str]:
        assert self._member is not None
        self._member.close()
        self._member = None
        if self.labels:
            values = np.asarray(self._label_values, dtype=self._labels_dtype)
            with self._archive.open(f"{self._labels_key}.npy", "w", force_zip64=True) as member:
                np.lib.format.write_array(member, values, allow_pickle=False)
        self._archive.close()
        _close_synced(self._raw)
        return [self._file_name]

    def _release(self) -> None:
        with suppress(Exception):
            if self._member is not None:
                self._member.close()
        with suppress(Exception):
            self._archive.close()
        self._raw.close()


class IdxWriter(PublicationWriter):
    """Writes the idx images file (and labels file) under the input's names."""

    def __init__(
        self, description: Mapping[str, Value], out_dir: Path, *, count: int, labels: bool
    ) -> None:
        """Read the file names, compression and image size from the description."""
        images = _mapping(description, "images")
        self._images_name = _plain_file_name(_text(images, "file"))
        self._compressed = _flag(images, "compressed")
        array_shape = _array_shape(images)
        if len(array_shape) != 3:
            raise InputError(f"an idx publication needs a 3-D array shape, got {array_shape}")
        self._image_shape = (array_shape[1], array_shape[2], 1)
        self._labels_name = _plain_file_name(_idx_labels_file(description, self._images_name))
        super().__init__(out_dir, count=count, labels=labels)

    def _start(self) -> None:
        height, width, _ = self._image_shape
        self._images = _OutputFile(self._staging / self._images_name, gz=self._compressed)
        self._images.write(struct.pack(">IIII", IDX_IMAGES_MAGIC, self.count, height, width))
        self._label_file: _OutputFile | None = None
        if self.labels:
            gz = self._labels_name.endswith(".gz")
            self._label_file = _OutputFile(self._staging / self._labels_name, gz=gz)
            self._label_file.write(struct.pack(">II", IDX_LABELS_MAGIC, self.count))

    def _write(self, batch: ImageBatch) -> None:
        self._images.write(_fit(batch, self._image_shape).tobytes())
        if self._label_file is not None:
            values = [label for label in batch.labels if label is not None]
            if max(values) > 255:
                raise InputError(
                    f"batch at image {batch.start}: idx labels are bytes, got label {max(values)}"
                )
            self._label_file.write(bytes(values))

    def _finish(self) -> list[str]:
        self._images.close()
        names = [self._images_name]
        if self._label_file is not None:
            self._label_file.close()
            names.append(self._labels_name)
        return names

    def _release(self) -> None:
        self._images.discard()
        if self._label_file is not None:
            self._label_file.discard()


def open_writer(
    source_description: Mapping[str, Value], out_dir: Path, *, count: int, labels: bool
) -> PublicationWriter:
    """Return a writer publishing ``count`` images in the format of the described input.

    Args:
        source_description: The input's
            :meth:`~twinaudit.owner.images.sources.ImageSource.describe`.
        out_dir: The publication folder; it must not exist, its parent must.
        count: How many images will be added.
        labels: Whether to publish the labels (every image must then have one).

    Raises:
        InputError: ``out_dir`` exists, or the description is not one of a known format.
        NotFoundError: The parent of ``out_dir`` does not exist.

    """
    kind = _text(source_description, "format")
    out_dir = Path(out_dir)
    if kind == "image-dir":
        return ImageDirWriter(out_dir, count=count, labels=labels)
    if kind == "npy":
        return NpyWriter(source_description, out_dir, count=count, labels=labels)
    if kind == "npz":
        return NpzWriter(source_description, out_dir, count=count, labels=labels)
    if kind == "idx":
        return IdxWriter(source_description, out_dir, count=count, labels=labels)
    raise InputError(f"no publication writer for input format {kind!r}")


# --------------------------------------------------------------------------- helpers


class _LabelCsv:
    """A labels CSV file (``filename,label`` header) written row by row."""

    def __init__(self, path: Path) -> None:
        self._stream = path.open("x", newline="", encoding="utf-8")
        self._rows = csv.writer(self._stream, lineterminator="\n")
        self._rows.writerow(["filename", "label"])

    def write(self, name: str, label: int | None) -> None:
        self._rows.writerow([name, label])

    def close(self) -> None:
        _close_synced(self._stream)

    def discard(self) -> None:
        self._stream.close()


class _OutputFile:
    """A file written sequentially, gzip-compressed (reproducibly: mtime 0) or not."""

    def __init__(self, path: Path, *, gz: bool) -> None:
        self._raw = path.open("xb")
        self._gzip = (
            gzip.GzipFile(
                filename=path.name.removesuffix(".gz"),
                mode="wb",
                fileobj=self._raw,
                compresslevel=_GZIP_LEVEL,
                mtime=0,
            )
            if gz
            else None
        )

    def write(self, data: bytes) -> None:
        (self._raw if self._gzip is None else self._gzip).write(data)

    def close(self) -> None:
        if self._gzip is not None:
            self._gzip.close()
        _close_synced(self._raw)

    def discard(self) -> None:
        with suppress(Exception):
            if self._gzip is not None:
                self._gzip.close()
        self._raw.close()


def _create_staging(out_dir: Path) -> Path:
    if out_dir.exists() or out_dir.is_symlink():
        raise InputError(f"{out_dir} already exists; a publication goes into a new folder")
    parent = out_dir.parent
    if not parent.is_dir():
        raise NotFoundError(f"{parent}: no such folder (the parent of {out_dir})")
    try:
        staging = tempfile.mkdtemp(prefix=f".{out_dir.name}.", suffix=".partial", dir=parent)
    except OSError as error:
        raise InputError(f"{parent}: cannot create a staging folder: {error}") from error
    return Path(staging)


def _write_png(path: Path, pixels: npt.NDArray[np.uint8], profile: bytes | None = None) -> None:
    """Write one (H, W, C) image as an 8-bit grayscale or RGB PNG (not yet synced).

    ``profile``, the ICC colour profile the image was read with, goes into the PNG's
    ``iCCP`` chunk, so that the image shows in the colours it was read in.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    plane = pixels[:, :, 0] if pixels.shape[2] == 1 else pixels
    image = Image.fromarray(np.ascontiguousarray(plane))
    extra = {} if profile is None else {"icc_profile": profile}
    with path.open("xb") as stream:
        image.save(stream, format="PNG", compress_level=PNG_COMPRESS_LEVEL, **extra)


def _fit(batch: ImageBatch, image_shape: Sequence[int]) -> npt.NDArray[np.uint8]:
    """Return the batch pixels reshaped to the publication's per-image array shape."""
    pixels = batch.pixels
    if len(image_shape) == 2 and pixels.shape[3] == 1:
        pixels = pixels[:, :, :, 0]
    if pixels.shape[1:] != tuple(image_shape):
        raise InputError(
            f"batch at image {batch.start} has images of shape {batch.pixels.shape[1:]}, "
            f"the publication's images are {tuple(image_shape)}"
        )
    return np.ascontiguousarray(pixels)


def _check_labels_fit(values: list[int], dtype: np.dtype[Any], start: int) -> None:
    limits = np.iinfo(dtype)
    if values and (min(values) < limits.min or max(values) > limits.max):
        raise InputError(f"batch at image {start}: labels do not fit the labels dtype {dtype}")


def _idx_labels_file(description: Mapping[str, Value], images_name: str) -> str:
    source_labels = description.get("labels")
    if isinstance(source_labels, dict) and source_labels.get("origin") == "idx":
        return _text(source_labels, "file")
    sibling = idx_labels_name(images_name)
    if sibling is not None:
        return sibling
    return "labels-idx1-ubyte.gz" if images_name.endswith(".gz") else "labels-idx1-ubyte"


def _close_synced(stream: IO[Any]) -> None:
    stream.flush()
    os.fsync(stream.fileno())
    stream.close()


def _fsync_file(path: Path) -> None:
    with path.open("rb") as stream:
        os.fsync(stream.fileno())


def _fsync_files(paths: Sequence[Path]) -> None:
    """Flush many files to disk; in parallel, because each fsync waits for a journal commit."""
    with ThreadPoolExecutor(max_workers=_SYNC_THREADS) as pool:
        for _ in pool.map(_fsync_file, paths):
            pass


def _fsync_folders(root: Path) -> None:
    for folder, _, _ in os.walk(root):
        fsync_directory(Path(folder))


# --------------------------------------------------------------------------- description


def _mapping(description: Mapping[str, Value], key: str) -> Mapping[str, Value]:
    value = description.get(key)
    if not isinstance(value, dict):
        raise InputError(f"the input description has no {key!r} map")
    return value


def _text(description: Mapping[str, Value], key: str) -> str:
    value = description.get(key)
    if not isinstance(value, str) or not value:
        raise InputError(f"the input description has no text field {key!r}")
    return value


def _flag(description: Mapping[str, Value], key: str) -> bool:
    value = description.get(key)
    if not isinstance(value, bool):
        raise InputError(f"the input description has no boolean field {key!r}")
    return value


def _array_shape(images: Mapping[str, Value]) -> tuple[int, ...]:
    value = images.get("array_shape")
    if (
        not isinstance(value, list)
        or len(value) not in (3, 4)
        or not all(isinstance(side, int) and not isinstance(side, bool) for side in value)
    ):
        raise InputError("the input description has no valid 'array_shape'")
    return tuple(int(side) for side in value if isinstance(side, int))


def _plain_file_name(name: str) -> str:
    if "/" in name or "\\" in name or name in (".", ".."):
        raise InputError(f"{name!r} is not a plain file name")
    return name


def _integer_dtype(text: str) -> np.dtype[Any]:
    try:
        dtype = np.dtype(text)
    except TypeError as error:
        raise InputError(f"labels dtype {text!r} is not a numpy dtype") from error
    if dtype.kind not in "iu":
        raise InputError(f"labels dtype {text!r} is not an integer dtype")
    return dtype
