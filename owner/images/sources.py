"""Streaming readers for the owner's image collections.

:func:`open_source` opens one of four input formats and returns an
:class:`ImageSource`, which yields the images in source order as
:class:`ImageBatch` objects. Memory stays bounded by one batch (plus one name,
one shape and one label per image), however many images there are.

Formats
-------
``image-dir``
    A folder of PNG, JPEG, WebP, TIFF, BMP, GIF and HEIF files (suffix ``.png``,
    ``.jpg``, ``.jpeg``, ``.jfif``, ``.webp``, ``.tif``, ``.tiff``, ``.bmp``, ``.gif``,
    ``.heic``, ``.heif`` or ``.hif``, any case), searched recursively. Hidden files and
    folders (name starting with a dot) are skipped; a file with the suffix of an image
    format not read (AVIF, JPEG XL, raw camera files: :data:`UNREAD_IMAGE_SUFFIXES`; HEIF
    where pi-heif cannot be imported) is refused by name, never left out
    unseen; other files (a ``labels.csv``, a README) are ignored and counted in
    :meth:`ImageSource.describe`. An image of several frames (an animation, a
    multi-page TIFF) is refused, and so are two images that would be published
    under one name (``a.jpg`` and ``a.png``: every format but PNG is published as
    PNG, :func:`published_image_name`), or under names that differ only in case.
    Symbolic links to folders are not followed. Images are ordered by the code-point
    order of their relative POSIX path (``img10.png`` before ``img2.png``) and named by
    that path.
    :func:`open_source` reads the header of every file (cheap: no pixel data) to
    learn its shape and to fail early on unreadable files and refused modes, naming
    every such file in one error; :meth:`ImageSource.check_pixels` decodes every
    image once (transparency, truncation), which ``owner mark`` does before its first
    marking step; otherwise pixels are decoded only when a batch needs them. An
    image is read as a viewer shows it: its EXIF orientation (JPEG, WebP, TIFF, and
    a PNG whose ``eXIf`` chunk comes before its pixels) turns or flips the pixels
    upright, so that a phone's portrait photo is marked, and published, standing (a
    HEIF photo is turned by its own transformations as it is decoded). Its ICC colour
    profile, if any, is read with it (:attr:`ImageBatch.profiles`). A JPEG or HEIF file
    (by its first bytes) no longer than its raw pixels is read once, its bytes kept
    with the batch (:attr:`ImageBatch.originals`) and decoded from them, so that a vault
    can keep the file in place of the pixels; a JPEG turned upright by its EXIF
    orientation is not its file's pixels, so its pixels are kept instead (a HEIF photo
    is turned by its decoder, so its decoding is its pixels).

    Pixel modes: 8-bit grayscale (``L``) stays one channel, ``RGB`` three.
    Bilevel (``1``) becomes ``L`` (0 and 255), palette (``P``) becomes ``RGB``.
    An alpha channel (``LA``, ``RGBA``, ``PA``, palette transparency) is accepted
    only when every pixel is fully opaque, and is then dropped; a transparent pixel
    is refused, because no background to flatten onto is neutral. 16-bit and
    32-bit images, CMYK and every other mode are refused: convert them to 8 bits
    yourself, knowing what the conversion does to the mark.
``npy``
    A uint8 array of shape (N, H, W), (N, H, W, 1) or (N, H, W, 3), memory-mapped.
``npz``
    The array named by ``npz_key``; otherwise the only array, or the only one with
    a conventional name (``images``, ``x``, ``X``, ``x_train``, ``X_train``,
    ``train_images``, ``imgs``). Labels come from the matching array (``x_train``
    → ``y_train``, ``images`` → ``labels``), else from ``labels`` or ``y``. Arrays
    are streamed from the archive member, so they must be in C order.
``idx``
    The MNIST format (magic 0x00000803), plain or gzip-compressed. Labels come from
    the sibling ``…-labels-idx1-ubyte[.gz]`` file (magic 0x00000801) when the
    path is named ``…-images-idx3-ubyte[.gz]`` and the sibling exists. A gzip
    stream is not seekable: ``batches(start=k)`` decompresses and discards the
    first k images, and a compressed file whose size disagrees with its header is
    reported when the stream reaches the difference.

The format is recognised by content (magic bytes), not by file name.

Labels
------
An explicit ``labels`` file replaces labels found in the input. It is an idx
labels file; a JSON file (suffix ``.json``: a list in source order, or an object
mapping image names to labels); or a CSV file (a ``filename,label`` header, as
captions files have, or the older ``name,label``, and one row per image; or one
label per line in source order, optionally under a ``label`` header). Labels are
integers in [0, 65536).

Batching rule
-------------
A batch holds the images from its start up to ``min(start + batch_size, next
shape change)``: it never mixes shapes and may be shorter than ``batch_size``.
Starting at any batch boundary therefore yields exactly the batches that an
uninterrupted run yields from there.

Errors
------
Every failure is a typed error from :mod:`twinaudit.protocol.errors` whose message names the
file: :class:`~twinaudit.protocol.errors.NotFoundError` for a missing path, label file or
npz key; :class:`~twinaudit.protocol.errors.LimitExceededError` for an image side above
:data:`~twinaudit.protocol.items.MAX_IMAGE_SIDE`, more than
:data:`~twinaudit.protocol.limits.MAX_PAIRS` images or an oversized label file;
:class:`~twinaudit.protocol.errors.ParameterError` for bad call arguments;
:class:`~twinaudit.protocol.errors.InputError` for everything else (corrupt or truncated
files, wrong dtype, shape or magic, label problems).
"""

from __future__ import annotations

import bisect
import copy
import csv
import gzip
import hashlib
import io
import json
import math
import os
import re
import struct
import unicodedata
import zipfile
import zlib
from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, ClassVar, Final, Protocol

import numpy as np
import numpy.typing as npt
from PIL import Image, UnidentifiedImageError

from twinaudit.owner.heif_reader import HEIF_READ, is_heif
from twinaudit.owner.vault.layout import MAX_PROFILE_BYTES
from twinaudit.protocol.encoding import Value
from twinaudit.protocol.errors import (
    InputError,
    LimitExceededError,
    NotFoundError,
    ParameterError,
)
from twinaudit.protocol.items import MAX_IMAGE_SIDE, MAX_LABEL
from twinaudit.protocol.limits import MAX_BIN_BYTES, MAX_PAIRS

#: Suffixes (lower case) of HEIF files: a phone's HEIC photos, read through pi-heif's
#: Pillow plugin (libheif and libde265), which shows them as a viewer does (turned by the
#: file's own transformations). Where pi-heif cannot be imported, they are refused by name.
HEIF_SUFFIXES: Final = frozenset({".heic", ".heif", ".hif"})
#: File suffixes (lower case) read from an image folder.
IMAGE_SUFFIXES: Final = frozenset(
    {".png", ".jpg", ".jpeg", ".jfif", ".webp", ".tif", ".tiff", ".bmp", ".gif", *HEIF_SUFFIXES}
)
#: Suffixes of image formats ``owner mark`` does not read: a folder file with one is
#: refused by name (it would otherwise be left out of the vault unseen), not ignored.
UNREAD_IMAGE_SUFFIXES: Final = frozenset(
    {
        ".avif", ".jxl", ".jp2", ".j2k", ".psd", ".svg",
        ".dng", ".cr2", ".cr3", ".nef", ".arw", ".orf", ".rw2", ".raf", ".srw", ".pef",
    }
)  # fmt: skip
#: Largest label file (CSV, JSON or idx) accepted, in bytes.
MAX_LABEL_FILE_BYTES: Final = 64 * 1024 * 1024
#: Magic numbers of idx files: unsigned bytes, 3 dimensions (images) or 1 (labels).
IDX_IMAGES_MAGIC: Final = 0x00000803
IDX_LABELS_MAGIC: Final = 0x00000801
#: Conventional names of the image array in an npz archive.
NPZ_IMAGE_KEYS: Final = ("images", "x", "X", "x_train", "X_train", "train_images", "imgs")


_PIL_FORMATS: Final = (
    "PNG",
    "JPEG",
    "WEBP",
    "TIFF",
    "BMP",
    "GIF",
    *(("HEIF",) if HEIF_READ else ()),
)
#: The formats read, for messages.
_READ_FORMATS: Final = "PNG, JPEG, WebP, TIFF, BMP, GIF or HEIC"
#: EXIF orientation (tag 274) → the transposition that shows the image as a viewer does.
_UPRIGHT: Final = {
    2: Image.Transpose.FLIP_LEFT_RIGHT,
    3: Image.Transpose.ROTATE_180,
    4: Image.Transpose.FLIP_TOP_BOTTOM,
    5: Image.Transpose.TRANSPOSE,
    6: Image.Transpose.ROTATE_270,
    7: Image.Transpose.TRANSVERSE,
    8: Image.Transpose.ROTATE_90,
}
#: Orientations that swap an image's height and width.
_SWAPPED: Final = frozenset({5, 6, 7, 8})
_ORIENTATION_TAG: Final = 0x0112
#: The first bytes of every JPEG file: such a file's bytes go to the vault with its pixels.
_JPEG_SIGNATURE: Final = b"\xff\xd8\xff"
_GZIP_MAGIC: Final = b"\x1f\x8b"
_NPY_MAGIC: Final = b"\x93NUMPY"
_ZIP_MAGICS: Final = (b"PK\x03\x04", b"PK\x05\x06")
_HASH_CHUNK: Final = 1 << 20
_SKIP_CHUNK: Final = 1 << 16
#: Channels of each accepted PIL mode after conversion (alpha dropped when opaque).
_MODE_CHANNELS: Final = {"1": 1, "L": 1, "LA": 1, "P": 3, "PA": 3, "RGB": 3, "RGBA": 3}
#: What decoders (PIL, gzip, zipfile, numpy headers) raise on bad files.
_DECODER_ERRORS: Final = (
    OSError,
    EOFError,
    SyntaxError,
    ValueError,
    RuntimeError,
    struct.error,
    zlib.error,
    zipfile.BadZipFile,
    Image.DecompressionBombError,
)
_IDX_IMAGES_NAME = re.compile(r"^(?P<stem>.*)images(?P<sep>[-.])idx3-ubyte(?P<gz>\.gz)?$")

Shape = tuple[int, int, int]
#: What a source's reader yields per span: lo, hi, pixels, the JPEG or HEIF bytes kept (or
#: None) and the colour profiles read (or None).
_Span = tuple[int, int, npt.NDArray[np.uint8], list[bytes | None] | None, list[bytes | None] | None]
#: What :meth:`ImageSource.check_pixels` calls with each image it decoded: (index, pixels).
ImageVisitor = Callable[[int, npt.NDArray[np.uint8]], None]


class _Readable(Protocol):
    """A readable, seekable byte stream (file, gzip stream or zip member)."""

    def read(self, size: int = -1, /) -> bytes: ...
    def seek(self, offset: int, whence: int = 0, /) -> int: ...
    def tell(self) -> int: ...


@dataclass(frozen=True)
class ImageBatch:
    """Consecutive images of one shape, in source order.

    Attributes:
        start: Source index of the first image.
        pixels: uint8 array (B, H, W, C), C in {1, 3}.
        names: Per image, the relative file name (folders) or ``"<file>#<i>"`` (arrays).
        labels: Per image, its label or None.
        originals: Per image, the bytes of the JPEG or HEIF file it was decoded from,
            or None (another format, a file longer than its raw pixels, a JPEG turned
            upright, or an array source); None for the whole batch where no image has
            one. A format-3 vault keeps a JPEG, and a format-4 vault a JPEG or a HEIF,
            in place of the pixels where that is smaller.
        profiles: Per image, the ICC colour profile its file carries, or None; None for
            the whole batch where no image has one. The vault keeps them and
            publication writes each image with its own, so that it shows in the
            colours it was read in.

    """

    start: int
    pixels: npt.NDArray[np.uint8]
    names: list[str]
    labels: list[int | None]
    originals: list[bytes | None] | None = None
    profiles: list[bytes | None] | None = None

    def __post_init__(self) -> None:
        """Check that pixels, names and labels describe the same images."""
        pixels = self.pixels
        if (
            not isinstance(pixels, np.ndarray)
            or pixels.dtype != np.uint8
            or pixels.ndim != 4
            or pixels.shape[0] < 1
            or pixels.shape[3] not in (1, 3)
        ):
            raise InputError("batch pixels must be a uint8 array (B, H, W, C), B >= 1, C in {1, 3}")
        if self.originals is not None and len(self.originals) != pixels.shape[0]:
            raise InputError(f"batch has {pixels.shape[0]} images, {len(self.originals)} originals")
        if self.profiles is not None and len(self.profiles) != pixels.shape[0]:
            raise InputError(f"batch has {pixels.shape[0]} images, {len(self.profiles)} profiles")
        if not len(self.names) == len(self.labels) == pixels.shape[0]:
            raise InputError(
                f"batch has {pixels.shape[0]} images, {len(self.names)} names "
                f"and {len(self.labels)} labels"
            )
        if self.start < 0:
            raise InputError(f"batch start {self.start} is negative")

    def __len__(self) -> int:
        """Return the number of images in the batch."""
        return len(self.names)

    @property
    def stop(self) -> int:
        """Return the source index just after the last image."""
        return self.start + len(self.names)


class ImageSource(ABC):
    """A sequence of images read in batches; see the module docstring for the rules."""

    #: One of ``"image-dir"``, ``"npy"``, ``"npz"``, ``"idx"``.
    format: ClassVar[str]

    def __init__(self, path: Path, count: int) -> None:
        """Record the input path and image count (checked against the count limit)."""
        if count > MAX_PAIRS:
            raise LimitExceededError(f"number of images in {path}", count, MAX_PAIRS)
        self.path = path
        self._count = count
        self._labels: list[int] | None = None
        self._label_info: dict[str, Value] | None = None
        self._label_path: Path | None = None
        self._description: dict[str, Value] | None = None

    def __len__(self) -> int:
        """Return the number of images."""
        return self._count

    def names(self) -> list[str]:
        """Return the name of every image, in source order (no pixels are read)."""
        return self._names(0, self._count)

    def file_bytes(self) -> int:
        """Return the bytes of the input's files: the file given (a folder: its images)."""
        return self.path.stat().st_size

    @property
    def has_labels(self) -> bool:
        """Return whether every image has a label."""
        return self._labels is not None

    def labels(self) -> list[int | None]:
        """Return every image's label in source order (None for each when there are none)."""
        return [None] * self._count if self._labels is None else [*self._labels]

    def describe(self) -> dict[str, Value]:
        """Return a manifest entry for the input (hashes every input file once).

        Keys: ``format``; ``count``; ``shapes`` (a list of ``{"shape": [H, W, C],
        "count": n}`` sorted by shape); ``images`` (``file``: the input's base name,
        ``sha256``: hex digest of the file, or for a folder of the ``sha256sum``-style
        listing (one line ``<hex>  <relative name>`` per image, in order), plus
        format-specific fields); ``labels`` (None, or ``origin`` — ``csv``, ``json``,
        ``idx`` or ``npz`` —, ``file``, ``sha256`` and for npz ``key`` and ``dtype``).
        """
        if self._description is None:
            labels: dict[str, Value] | None = None
            if self._label_info is not None and self._label_path is not None:
                labels = {**self._label_info, "sha256": _sha256_file(self._label_path)}
            self._description = {
                "format": self.format,
                "count": self._count,
                "shapes": self._shape_counts(),
                "images": self._describe_images(),
                "labels": labels,
            }
        return copy.deepcopy(self._description)

    def check_pixels(self, visit: ImageVisitor | None = None) -> bool:
        """Decode every image once and refuse them all at once if any cannot be marked.

        Arrays (npy, npz, idx) hold uint8 pixels of one shape and need no pass; a folder
        overrides this. ``visit(index, pixels)``, when given, is called with each image
        decoded, in source order, so that a caller needing every image once (the proxy's
        training set) need not decode them again. Returns whether the pass ran (and so
        visited every image); arrays return False. Raises InputError listing every
        problem found.
        """
        return False

    def batches(
        self, batch_size: int, start: int = 0, *, fits: Callable[[Shape], int] | None = None
    ) -> Iterator[ImageBatch]:
        """Yield the images from ``start`` on, in batches that never mix shapes.

        A batch holds at most ``batch_size`` images and, when ``fits`` is given, at most
        ``fits(shape)`` images of that (H, W, C) shape (one at least): batches of photos
        are cut by their size (:mod:`twinaudit.owner.marking.memory`), not only by their count.

        Raises:
            ParameterError: ``batch_size`` < 1 or ``start`` outside [0, len(self)].

        """
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ParameterError(f"batch_size must be a positive integer, got {batch_size!r}")
        if isinstance(start, bool) or not isinstance(start, int) or not 0 <= start <= self._count:
            raise ParameterError(f"start must be in [0, {self._count}], got {start!r}")
        return self._generate(self._spans(batch_size, start, fits))

    def batches_at(self, spans: Sequence[tuple[int, int]]) -> Iterator[ImageBatch]:
        """Yield the batches of images ``lo .. hi − 1`` for each ``(lo, hi)`` of ``spans``.

        The spans must follow one another from any start, each non-empty and of one shape
        (as a vault's chunks are), so that the images are read in one pass.

        Raises:
            ParameterError: a span is empty, out of order, past the end, or mixes shapes.

        """
        previous = 0
        for lo, hi in spans:
            if not previous <= lo < hi <= self._count or hi > self._run_end(lo):
                raise ParameterError(
                    f"images {lo}..{hi - 1} are not a batch of one shape after image "
                    f"{previous - 1} of {self.path}"
                )
            previous = hi
        return self._generate(iter(spans))

    def shape_at(self, index: int) -> Shape:
        """Return the (height, width, channels) of image ``index`` (no pixels are read)."""
        if not 0 <= index < self._count:
            raise ParameterError(f"image {index} is outside 0..{self._count - 1}")
        return self._shape_of(index)

    def _generate(self, spans: Iterator[tuple[int, int]]) -> Iterator[ImageBatch]:
        for lo, hi, pixels, originals, profiles in self._read_spans(spans):
            labels: list[int | None] = (
                [None] * (hi - lo) if self._labels is None else [*self._labels[lo:hi]]
            )
            yield ImageBatch(lo, pixels, self._names(lo, hi), labels, originals, profiles)

    def _spans(
        self, batch_size: int, start: int, fits: Callable[[Shape], int] | None
    ) -> Iterator[tuple[int, int]]:
        lo = start
        while lo < self._count:
            count = batch_size
            if fits is not None:
                count = max(1, min(batch_size, fits(self._shape_of(lo))))
            hi = min(lo + count, self._run_end(lo))
            yield lo, hi
            lo = hi

    def _attach_label_file(self, label_path: Path) -> None:
        labels, origin = _load_label_file(label_path, self._names(0, self._count))
        self._attach_labels(labels, {"origin": origin, "file": label_path.name}, label_path)

    def _attach_labels(self, labels: list[int], info: dict[str, Value], label_path: Path) -> None:
        if len(labels) != self._count:
            raise InputError(
                f"{label_path}: {len(labels)} labels for {self._count} images in {self.path}"
            )
        self._labels = labels
        self._label_info = info
        self._label_path = label_path

    @abstractmethod
    def _run_end(self, index: int) -> int:
        """Return the index just after the run of equal shapes holding ``index``."""

    @abstractmethod
    def _shape_of(self, index: int) -> Shape:
        """Return the (H, W, C) of image ``index``, a valid index."""

    @abstractmethod
    def _names(self, lo: int, hi: int) -> list[str]:
        """Return the names of images lo..hi-1."""

    @abstractmethod
    def _read_spans(self, spans: Iterable[tuple[int, int]]) -> Iterator[_Span]:
        """Yield (lo, hi, pixels, originals, profiles) per span, in order (:class:`ImageBatch`)."""

    @abstractmethod
    def _shape_counts(self) -> list[Value]:
        """Return the per-shape image counts for :meth:`describe`."""

    @abstractmethod
    def _describe_images(self) -> dict[str, Value]:
        """Return the ``images`` entry of :meth:`describe`."""


# --------------------------------------------------------------------------- folders


class FolderSource(ImageSource):
    """Image files in a folder tree (format ``image-dir``): PNG, JPEG, WebP, TIFF, BMP, GIF."""

    format = "image-dir"

    def __init__(self, root: Path, label_path: Path | None = None, *, upright: bool = True) -> None:
        """List the images, read every header, and attach the labels if given.

        ``upright=False`` reads every image as stored, its EXIF orientation not applied:
        how vaults made before that rule read their folders (:func:`reads_upright`).
        """
        self._upright = upright
        names, ignored, unread = _list_image_files(root)
        problems = [
            InputError(f"{root / name}: {_why_unread(name)}, or move it out of the folder")
            for name in unread
        ]
        problems += _publication_clashes(root, names)
        if not names:
            _refuse(root, problems, len(unread))
            raise InputError(f"{root}: the folder holds no {_READ_FORMATS} images")
        super().__init__(root, len(names))
        self._image_names = names
        self._ignored = ignored
        probed: list[tuple[str, Shape]] = []
        for name in names:
            try:
                probed.append((name, _probe_image(root / name, upright=upright)))
            except InputError as error:
                problems.append(error)
        if problems:  # name the files whose pixels fail too, so that one report has them all
            more = _pixel_problems(root, probed, upright=upright)
            _refuse(root, [*problems, *more], len(names) + len(unread))
        self._shapes = [shape for _, shape in probed]
        self._run_ends = _run_ends(self._shapes)
        if label_path is not None:
            self._attach_label_file(label_path)

    def file_bytes(self) -> int:
        """Return the bytes of the folder's image files (those read; others are not counted)."""
        return sum((self.path / name).stat().st_size for name in self._image_names)

    def check_pixels(self, visit: ImageVisitor | None = None) -> bool:
        """Decode every image (transparency, truncation) and refuse all the failures at once.

        ``visit`` sees each image that decodes, in order (see :meth:`ImageSource.check_pixels`).
        """
        named = zip(self._image_names, self._shapes, strict=True)
        problems = _pixel_problems(self.path, named, visit, upright=self._upright)
        _refuse(self.path, problems, len(self._image_names))
        return True

    def _run_end(self, index: int) -> int:
        return self._run_ends[bisect.bisect_right(self._run_ends, index)]

    def _shape_of(self, index: int) -> Shape:
        return self._shapes[index]

    def _names(self, lo: int, hi: int) -> list[str]:
        return self._image_names[lo:hi]

    def _read_spans(self, spans: Iterable[tuple[int, int]]) -> Iterator[_Span]:
        for lo, hi in spans:
            pixels = np.empty((hi - lo, *self._shapes[lo]), dtype=np.uint8)
            originals: list[bytes | None] = []
            profiles: list[bytes | None] = []
            for offset, index in enumerate(range(lo, hi)):
                path = self.path / self._image_names[index]
                original = _jpeg_bytes(path, self._shapes[index])
                decoded = _decode_upright(
                    path, self._shapes[index], original, upright=self._upright
                )
                pixels[offset] = decoded.pixels
                # A JPEG shown turned is not its file's pixels: the vault keeps the pixels.
                originals.append(None if decoded.turned else original)
                profiles.append(decoded.profile)
            yield lo, hi, pixels, _unless_none(originals), _unless_none(profiles)

    def _shape_counts(self) -> list[Value]:
        counts = Counter(self._shapes)
        return [{"shape": list(shape), "count": counts[shape]} for shape in sorted(counts)]

    def _describe_images(self) -> dict[str, Value]:
        listing = hashlib.sha256()
        for name in self._image_names:
            listing.update(f"{_sha256_file(self.path / name)}  {name}\n".encode())
        described: dict[str, Value] = {
            "file": self.path.name,
            "sha256": listing.hexdigest(),
            "ignored_files": self._ignored,
        }
        if self._upright:  # since images are turned; a vault begun before has none
            described["exif_orientation"] = "applied"
        return described


#: Problems an input report names one by one before summing up the rest.
MAX_PROBLEMS_SHOWN: Final = 20


def _pixel_problems(
    root: Path,
    images: Iterable[tuple[str, Shape]],
    visit: ImageVisitor | None = None,
    *,
    upright: bool = True,
) -> list[InputError]:
    """Decode each named image of the announced shape; return the errors, none raised.

    ``visit(index, pixels)`` is called with each image that decodes (``index`` its place
    in ``images``).
    """
    problems: list[InputError] = []
    for index, (name, shape) in enumerate(images):
        try:
            pixels = _decode_image(root / name, shape, upright=upright)
        except InputError as error:
            problems.append(error)
            continue
        if visit is not None:
            visit(index, pixels)
    return problems


def _refuse(root: Path, problems: Sequence[InputError], count: int) -> None:
    """Raise the one problem as it is, or one InputError naming them all (20, then a count)."""
    if not problems:
        return
    if len(problems) == 1:
        raise problems[0]
    shown = "\n  ".join(sorted(str(problem) for problem in problems)[:MAX_PROBLEMS_SHOWN])
    more = len(problems) - MAX_PROBLEMS_SHOWN
    tail = f"\n  … and {more} more" if more > 0 else ""
    raise InputError(
        f"{root}: {len(problems)} of {count} images cannot be marked; nothing was marked "
        f"(fix or remove them, then run again):\n  {shown}{tail}"
    )


def _list_image_files(root: Path) -> tuple[list[str], int, list[str]]:
    """Return the images under ``root``, the ignored count, and the images not read.

    Both lists are sorted relative names; the second holds files with a suffix of
    :data:`UNREAD_IMAGE_SUFFIXES`.
    """

    def fail(error: OSError) -> None:
        raise InputError(f"{root}: cannot list {error.filename}: {error.strerror}") from error

    names: list[str] = []
    unread: list[str] = []
    ignored = 0
    for folder, subfolders, files in os.walk(root, onerror=fail):
        subfolders[:] = [sub for sub in subfolders if not sub.startswith(".")]
        for file_name in files:
            if file_name.startswith("."):
                continue
            path = Path(folder, file_name)
            suffix = path.suffix.lower()
            if suffix in HEIF_SUFFIXES and not HEIF_READ:
                unread.append(path.relative_to(root).as_posix())
            elif suffix in IMAGE_SUFFIXES and path.is_file():
                names.append(path.relative_to(root).as_posix())
                if len(names) > MAX_PAIRS:
                    raise LimitExceededError(f"number of images in {root}", len(names), MAX_PAIRS)
            elif suffix in UNREAD_IMAGE_SUFFIXES:
                unread.append(path.relative_to(root).as_posix())
            else:
                ignored += 1
    names.sort()
    return names, ignored, sorted(unread)


def _why_unread(name: str) -> str:
    """Return why a folder file with an image suffix is not read, and what to do."""
    if PurePosixPath(name).suffix.lower() in HEIF_SUFFIXES:
        return (
            "a HEIF photo, and pi-heif (the HEIF reader twinaudit depends on) cannot be "
            "imported here: install it (pip install -c constraints.txt pi-heif) or convert it"
        )
    return f"not a format owner mark reads ({_READ_FORMATS}): convert it"


def published_image_name(name: str) -> str:
    """Return the relative name under which an image of a folder input is published.

    PNG names are kept; every other format's suffix becomes ``.png``: the published
    version is written losslessly, as a lossy format would destroy the mark.

    Raises:
        InputError: ``name`` is not a relative path to an image of a format read.

    """
    path = PurePosixPath(name)
    if (
        not name
        or path.is_absolute()
        or any(part in ("", ".", "..") for part in name.split("/"))
        or path.suffix.lower() not in IMAGE_SUFFIXES
    ):
        raise InputError(f"{name!r} is not a relative path to a {_READ_FORMATS} image")
    if path.suffix.lower() != ".png":
        return path.with_suffix(".png").as_posix()
    return name


def _publication_clashes(root: Path, names: Sequence[str]) -> list[InputError]:
    """Return an error per image whose published name an earlier image has already.

    Names that differ only in case (or in Unicode normalisation) clash too: a publication
    copied to macOS or Windows, whose file systems take them for one name, would lose
    one of the images.
    """
    first: dict[str, tuple[str, str]] = {}  # folded published name -> (name, published)
    clashes: list[InputError] = []
    for name in names:
        target = published_image_name(name)
        key = unicodedata.normalize("NFC", target).lower()
        if key not in first:
            first[key] = (name, target)
            continue
        earlier, earlier_target = first[key]
        if earlier_target == target:
            why = f"as {earlier!r} is"
        else:
            why = (
                f"which macOS and Windows take for {earlier_target!r}, {earlier!r}'s published name"
            )
        clashes.append(
            InputError(f"{root / name}: would be published as {target!r}, {why}: rename one")
        )
    return clashes


def _run_ends(shapes: Sequence[Shape]) -> list[int]:
    """Return, ascending, the indices just after each run of equal shapes."""
    ends = [index for index in range(1, len(shapes)) if shapes[index] != shapes[index - 1]]
    return [*ends, len(shapes)]


def _probe_image(path: Path, *, upright: bool = True) -> Shape:
    """Read an image header: return its (H, W, C) after mode conversion and orientation."""
    where = str(path)
    with _reading(where):
        try:
            image = Image.open(path, formats=_PIL_FORMATS)
        except UnidentifiedImageError as error:
            raise InputError(f"{where}: not a {_READ_FORMATS} image, or a corrupt one") from error
        with image:
            _check_one_frame(image, where)
            width, height = image.size
            if upright and _orientation(image) in _SWAPPED:
                width, height = height, width
            channels = _channels_of_mode(image.mode, where)
            _profile(image, where)
    _check_side(height, "height", where)
    _check_side(width, "width", where)
    _check_pixel_bytes((height, width, channels), where)
    return height, width, channels


def _channels_of_mode(mode: str, where: str) -> int:
    if mode not in _MODE_CHANNELS:
        raise InputError(
            f"{where}: pixel mode {mode!r} is not supported; accepted are 8-bit grayscale, "
            "RGB, palette and bilevel images (alpha only when fully opaque): "
            "convert it to 8-bit RGB or grayscale first"
        )
    return _MODE_CHANNELS[mode]


def _jpeg_bytes(path: Path, shape: Shape) -> bytes | None:
    """Return the bytes of ``path`` if it is a JPEG or HEIF file no longer than its pixels."""
    where = str(path)
    with _reading(where), path.open("rb") as stream:
        head = stream.read(12)
        if not head.startswith(_JPEG_SIGNATURE) and not (HEIF_READ and is_heif(head)):
            return None
        limit = shape[0] * shape[1] * shape[2]
        stream.seek(0)
        data = stream.read(limit + 1)
    return data if len(data) <= limit else None


def _decode_image(
    path: Path, shape: Shape, data: bytes | None = None, *, upright: bool = True
) -> npt.NDArray[np.uint8]:
    """Decode one image (from ``data``, its file's bytes, when given) into (H, W, C).

    The array must have the shape the header announced; with ``upright``, the pixels
    are turned by the image's EXIF orientation.
    """
    return _decode_upright(path, shape, data, upright=upright).pixels


@dataclass(frozen=True)
class _Decoded:
    """One decoded image: its pixels, whether its EXIF orientation moved them, its profile."""

    pixels: npt.NDArray[np.uint8]
    turned: bool
    profile: bytes | None


def _decode_upright(
    path: Path, shape: Shape, data: bytes | None = None, *, upright: bool = True
) -> _Decoded:
    """Return :func:`_decode_image`'s pixels, whether they were turned, and the ICC profile."""
    where = str(path)
    opened = path if data is None else io.BytesIO(data)
    with _reading(where), Image.open(opened, formats=_PIL_FORMATS) as image:
        _check_one_frame(image, where)
        # Read before the pixels, as the probe did.
        turn = _UPRIGHT.get(_orientation(image)) if upright else None
        profile = _profile(image, where)
        image.load()
        pixels = _pixels_of(image if turn is None else image.transpose(turn), where)
    if pixels.shape != shape:
        raise InputError(f"{where}: decoded shape {pixels.shape}, header said {shape}")
    return _Decoded(pixels, turn is not None, profile)


def _profile(image: Image.Image, where: str) -> bytes | None:
    """Return the ICC colour profile an opened image carries, None without one.

    Kept as the file has it, so that the published image shows in the same colours; a
    profile too large to keep is refused (converting the photo to sRGB removes it).
    """
    profile = image.info.get("icc_profile")
    if not isinstance(profile, bytes) or not profile:
        return None
    if len(profile) > MAX_PROFILE_BYTES:
        raise InputError(
            f"{where}: its colour profile is {len(profile):,} bytes, above the "
            f"{MAX_PROFILE_BYTES:,} kept: convert the photo to sRGB first"
        )
    return profile


def _unless_none(values: list[bytes | None]) -> list[bytes | None] | None:
    """Return ``values``, or None where every one is None."""
    return None if all(value is None for value in values) else values


def _orientation(image: Image.Image) -> int:
    """Return the EXIF orientation of an opened image, 1 (as stored) without a valid one.

    Read from what opening the file read: a PNG's ``eXIf`` chunk after its pixels is
    not (finding it would decode the image), so such a PNG is taken as stored. An EXIF
    block that does not parse is taken as no orientation, as viewers take it.
    """
    if image.format == "PNG" and "exif" not in image.info:
        return 1
    if image.format == "HEIF":  # turned by its own transformations as it is decoded
        return 1
    try:
        value = image.getexif().get(_ORIENTATION_TAG, 1)
    except _DECODER_ERRORS:
        return 1
    return value if isinstance(value, int) and value in _UPRIGHT else 1


def _check_one_frame(image: Image.Image, where: str) -> None:
    """Refuse an image of several frames (an animation, a multi-page TIFF).

    A JPEG with more pictures after its own (MPO: a phone's depth map or a camera's
    preview) is its first picture, the one every viewer shows, and is not refused.
    """
    frames = getattr(image, "n_frames", 1)
    if frames != 1 and image.format != "MPO":
        raise InputError(
            f"{where}: holds {frames} frames (an animation or several pages); save the "
            "frame to mark as an image of its own"
        )


def _pixels_of(image: Image.Image, where: str) -> npt.NDArray[np.uint8]:
    """Return the pixels as uint8 (H, W, C) after the documented mode conversions."""
    _channels_of_mode(image.mode, where)
    if image.mode == "1":
        image = image.convert("L")
    elif image.mode in ("P", "PA"):
        transparent = image.mode == "PA" or "transparency" in image.info
        image = image.convert("RGBA" if transparent else "RGB")
    array: npt.NDArray[np.uint8] = np.asarray(image, dtype=np.uint8)
    if image.mode in ("LA", "RGBA"):
        if not bool(np.all(array[..., -1] == 255)):
            raise InputError(
                f"{where}: the image has transparent pixels; flatten it onto a background "
                "of your choice first (no background is neutral)"
            )
        array = array[..., :-1]
    if array.ndim == 2:
        array = array[:, :, np.newaxis]
    return np.ascontiguousarray(array)


# --------------------------------------------------------------------------- arrays


class _ArraySource(ImageSource):
    """Images of one shape stored in one array (npy, npz or idx)."""

    def __init__(self, path: Path, array_shape: tuple[int, ...]) -> None:
        where = str(path)
        count, self._image_shape = _image_geometry(array_shape, where)
        super().__init__(path, count)
        self._array_shape = array_shape

    def _run_end(self, index: int) -> int:
        return self._count

    def _shape_of(self, index: int) -> Shape:
        return self._image_shape

    def _names(self, lo: int, hi: int) -> list[str]:
        return [f"{self.path.name}#{index}" for index in range(lo, hi)]

    def _shape_counts(self) -> list[Value]:
        return [{"shape": list(self._image_shape), "count": self._count}]

    def _describe_images(self) -> dict[str, Value]:
        return {
            "file": self.path.name,
            "sha256": _sha256_file(self.path),
            "array_shape": list(self._array_shape),
            **self._format_details(),
        }

    def _format_details(self) -> dict[str, Value]:
        return {}


def _image_geometry(array_shape: tuple[int, ...], where: str) -> tuple[int, Shape]:
    """Return (N, (H, W, C)) for an image array shape, or raise a typed error."""
    if len(array_shape) == 3:
        count, height, width = array_shape
        channels = 1
    elif len(array_shape) == 4 and array_shape[3] in (1, 3):
        count, height, width, channels = array_shape
    else:
        raise InputError(
            f"{where}: array of shape {array_shape}; expected (N, H, W), (N, H, W, 1) "
            "or (N, H, W, 3)"
        )
    if count == 0:
        raise InputError(f"{where}: the array holds no images (zero length)")
    _check_side(height, "height", where)
    _check_side(width, "width", where)
    _check_pixel_bytes((height, width, channels), where)
    return count, (height, width, channels)


class NpySource(_ArraySource):
    """A ``.npy`` uint8 image array, memory-mapped (format ``npy``)."""

    format = "npy"

    def __init__(self, path: Path, label_path: Path | None = None) -> None:
        """Check the header and the file size, and attach the labels if given."""
        where = str(path)
        with _reading(where), path.open("rb") as stream:
            array_shape = _read_npy_header(stream, where)
            data_offset = stream.tell()
        super().__init__(path, array_shape)
        _check_stream_size(path.stat().st_size, data_offset + math.prod(array_shape), where)
        if label_path is not None:
            self._attach_label_file(label_path)

    def _read_spans(self, spans: Iterable[tuple[int, int]]) -> Iterator[_Span]:
        where = str(self.path)
        with _reading(where):
            array = np.load(self.path, mmap_mode="r", allow_pickle=False)
        for lo, hi in spans:
            with _reading(where):
                chunk = np.array(array[lo:hi], dtype=np.uint8, order="C")
            yield lo, hi, chunk.reshape(hi - lo, *self._image_shape), None, None


def _read_npy_header(stream: _Readable, where: str, *, fortran_ok: bool = True) -> tuple[int, ...]:
    """Read an npy header; return the shape of a uint8 array (C order unless ``fortran_ok``)."""
    version = np.lib.format.read_magic(stream)
    if version == (1, 0):
        shape, fortran_order, dtype = np.lib.format.read_array_header_1_0(stream)
    elif version == (2, 0):
        shape, fortran_order, dtype = np.lib.format.read_array_header_2_0(stream)
    else:
        raise InputError(f"{where}: npy format version {version} is not supported")
    if fortran_order and not fortran_ok:
        raise InputError(f"{where}: the array is in Fortran order; save it in C order")
    if dtype != np.dtype(np.uint8):
        raise InputError(
            f"{where}: array dtype is {dtype}, not uint8; convert the pixels to uint8 "
            "0..255 yourself (no scaling rule is neutral)"
        )
    return tuple(int(side) for side in shape)


class _StreamedSource(_ArraySource):
    """An array read sequentially from a byte stream (zip member or idx file)."""

    _data_offset: int

    @abstractmethod
    def _open_stream(self) -> AbstractContextManager[_Readable]:
        """Return a context manager yielding a readable, seekable stream of the array."""

    def _read_spans(self, spans: Iterable[tuple[int, int]]) -> Iterator[_Span]:
        where = str(self.path)
        image_bytes = math.prod(self._image_shape)
        with _reading(where), self._open_stream() as stream:
            for lo, hi in spans:
                _advance(stream, self._data_offset + lo * image_bytes)
                data = _read_exact(stream, (hi - lo) * image_bytes, where, self._truncated())
                if hi == self._count and stream.read(1):
                    raise InputError(f"{where}: data continues after the {self._count} images")
                pixels = np.frombuffer(data, dtype=np.uint8).reshape(hi - lo, *self._image_shape)
                yield lo, hi, pixels.copy(), None, None

    def _truncated(self) -> str:
        return f"ends before the {self._count} images its header announces"


class NpzSource(_StreamedSource):
    """One uint8 image array in an ``.npz`` archive, streamed (format ``npz``)."""

    format = "npz"

    def __init__(
        self, path: Path, label_path: Path | None = None, npz_key: str | None = None
    ) -> None:
        """Choose the image array, check its header, and find or attach labels."""
        where = str(path)
        with _reading(where), zipfile.ZipFile(path) as archive:
            members = _npy_members(archive)
            self._key = _choose_image_key(list(members), npz_key, where)
            self._member = members[self._key]
            self._compressed = self._member.compress_type != zipfile.ZIP_STORED
            with archive.open(self._member) as stream:
                array_shape = _read_npy_header(stream, f"{where} [{self._key}]", fortran_ok=False)
                self._data_offset = stream.tell()
            super().__init__(path, array_shape)
            expected = self._data_offset + math.prod(array_shape)
            _check_stream_size(self._member.file_size, expected, f"{where} [{self._key}]")
            label_key = None if label_path else _matching_label_key(list(members), self._key)
            if label_key is not None:
                with archive.open(members[label_key]) as stream:
                    labels, dtype = _read_npy_labels(stream, f"{where} [{label_key}]")
                info: dict[str, Value] = {
                    "origin": "npz",
                    "file": path.name,
                    "key": label_key,
                    "dtype": dtype,
                }
                self._attach_labels(labels, info, path)
        if label_path is not None:
            self._attach_label_file(label_path)

    @contextmanager
    def _open_stream(self) -> Iterator[_Readable]:
        with zipfile.ZipFile(self.path) as archive, archive.open(self._member) as stream:
            yield stream

    def _format_details(self) -> dict[str, Value]:
        return {"key": self._key, "compressed": self._compressed}


def _npy_members(archive: zipfile.ZipFile) -> dict[str, zipfile.ZipInfo]:
    return {
        info.filename.removesuffix(".npy"): info
        for info in archive.infolist()
        if info.filename.endswith(".npy")
    }


def _choose_image_key(keys: list[str], npz_key: str | None, where: str) -> str:
    if npz_key is not None:
        if npz_key not in keys:
            raise NotFoundError(f"{where}: no array {npz_key!r}; arrays: {sorted(keys)}")
        return npz_key
    if len(keys) == 1:
        return keys[0]
    conventional = [key for key in NPZ_IMAGE_KEYS if key in keys]
    if len(conventional) == 1:
        return conventional[0]
    if not keys:
        raise InputError(f"{where}: the archive holds no arrays")
    raise InputError(f"{where}: which array holds the images? Arrays: {sorted(keys)}; pass npz_key")


def _matching_label_key(keys: list[str], image_key: str) -> str | None:
    """Return the labels array that goes with ``image_key``, if the archive has one."""
    candidates = [image_key.replace("images", "labels").replace("imgs", "labels")]
    if image_key[:1] in ("x", "X"):
        candidates.insert(0, "y" + image_key[1:])
    candidates += ["labels", "y"]
    for key in candidates:
        if key != image_key and key in keys:
            return key
    return None


def _read_npy_labels(stream: _Readable, where: str) -> tuple[list[int], str]:
    """Read a 1-D integer labels array; return the labels and the dtype string."""
    version = np.lib.format.read_magic(stream)
    if version not in ((1, 0), (2, 0)):
        raise InputError(f"{where}: npy format version {version} is not supported")
    reader = (
        np.lib.format.read_array_header_1_0
        if version == (1, 0)
        else np.lib.format.read_array_header_2_0
    )
    shape, _, dtype = reader(stream)
    if len(shape) != 1 or dtype.kind not in "iu":
        raise InputError(f"{where}: labels must be a 1-D integer array, got {dtype} {shape}")
    if shape[0] > MAX_PAIRS:
        raise LimitExceededError(f"number of labels in {where}", shape[0], MAX_PAIRS)
    data = _read_exact(stream, shape[0] * dtype.itemsize, where, "ends inside the labels")
    values = np.frombuffer(data, dtype=dtype)
    if values.size and (int(values.min()) < 0 or int(values.max()) >= MAX_LABEL):
        raise InputError(f"{where}: labels must be in [0, {MAX_LABEL})")
    return [int(value) for value in values.tolist()], str(dtype.str)


class IdxSource(_StreamedSource):
    """An idx image file (MNIST format), plain or gzip-compressed (format ``idx``)."""

    format = "idx"

    def __init__(self, path: Path, label_path: Path | None = None) -> None:
        """Check the header (and the size when uncompressed), then find or attach labels."""
        where = str(path)
        with _reading(where), _open_binary(path) as stream:
            array_shape = _read_idx_header(stream, IDX_IMAGES_MAGIC, where)
            self._data_offset = stream.tell()
        super().__init__(path, array_shape)
        self._compressed = _starts_with(path, _GZIP_MAGIC)
        if not self._compressed:
            expected = self._data_offset + math.prod(array_shape)
            _check_stream_size(path.stat().st_size, expected, where)
        if label_path is None:
            label_path = find_idx_labels(path)
        if label_path is not None:
            self._attach_label_file(label_path)

    @contextmanager
    def _open_stream(self) -> Iterator[_Readable]:
        with _open_binary(self.path) as stream:
            yield stream

    def _format_details(self) -> dict[str, Value]:
        return {"compressed": self._compressed}


def idx_labels_name(images_name: str) -> str | None:
    """Return the labels file name paired with an idx images file name, if it has one.

    ``train-images-idx3-ubyte.gz`` → ``train-labels-idx1-ubyte.gz``; the separator
    before ``idx3`` may be ``-`` or ``.``.
    """
    match = _IDX_IMAGES_NAME.match(images_name)
    if match is None:
        return None
    return f"{match['stem']}labels{match['sep']}idx1-ubyte{match['gz'] or ''}"


def find_idx_labels(images_path: Path) -> Path | None:
    """Return the existing sibling labels file of an idx images file (same compression first)."""
    name = idx_labels_name(images_path.name)
    if name is None:
        return None
    other = name.removesuffix(".gz") if name.endswith(".gz") else f"{name}.gz"
    for candidate in (name, other):
        if (images_path.parent / candidate).is_file():
            return images_path.parent / candidate
    return None


def _read_idx_header(stream: _Readable, magic: int, where: str) -> tuple[int, ...]:
    found = int.from_bytes(_read_exact(stream, 4, where, "ends inside the idx header"), "big")
    if found != magic:
        kind = "images" if magic == IDX_IMAGES_MAGIC else "labels"
        raise InputError(f"{where}: idx magic 0x{found:08x}, expected 0x{magic:08x} ({kind})")
    ndim = magic & 0xFF
    header = _read_exact(stream, 4 * ndim, where, "ends inside the idx header")
    return struct.unpack(f">{ndim}I", header)


def _read_idx_labels(path: Path) -> list[int]:
    where = str(path)
    with _reading(where), _open_binary(path) as stream:
        (count,) = _read_idx_header(stream, IDX_LABELS_MAGIC, where)
        if count > MAX_PAIRS:
            raise LimitExceededError(f"number of labels in {where}", count, MAX_PAIRS)
        data = _read_exact(stream, count, where, f"ends before the {count} labels it announces")
        if stream.read(1):
            raise InputError(f"{where}: data continues after the {count} labels")
    return list(data)


# --------------------------------------------------------------------------- label files


class _JsonObject(list[tuple[str, Any]]):
    """The (key, value) pairs of a JSON object, in file order (duplicates kept)."""


def _load_label_file(path: Path, names: Sequence[str]) -> tuple[list[int], str]:
    """Read an idx, JSON or CSV label file; return the labels in source order and the origin."""
    where = str(path)
    if not path.is_file():
        raise NotFoundError(f"{where}: no such label file")
    size = path.stat().st_size
    if size > MAX_LABEL_FILE_BYTES:
        raise LimitExceededError(f"size of label file {where}", size, MAX_LABEL_FILE_BYTES)
    if _starts_with(path, _GZIP_MAGIC) or _starts_with(path, IDX_LABELS_MAGIC.to_bytes(4, "big")):
        return _read_idx_labels(path), "idx"
    try:
        text = path.read_bytes().decode("utf-8-sig")
    except (OSError, UnicodeDecodeError) as error:
        raise InputError(f"{where}: cannot read the label file: {error}") from error
    if path.suffix.lower() == ".json":
        return _labels_from_json(text, names, where), "json"
    return _labels_from_csv(text, names, where), "csv"


def _labels_from_json(text: str, names: Sequence[str], where: str) -> list[int]:
    try:
        document = json.loads(text, object_pairs_hook=_JsonObject)
    except ValueError as error:
        raise InputError(f"{where}: not valid JSON: {error}") from error
    if isinstance(document, _JsonObject):
        pairs = [(name, value, f"{where}: name {name!r}") for name, value in document]
        return _labels_by_name(pairs, names, where)
    if isinstance(document, list):
        return [_parse_label(value, f"{where}: entry {i}") for i, value in enumerate(document)]
    raise InputError(f"{where}: expected a JSON list of labels or an object name → label")


def _labels_from_csv(text: str, names: Sequence[str], where: str) -> list[int]:
    reader = csv.reader(io.StringIO(text))
    rows: list[tuple[str, list[str]]] = []
    try:
        for row in reader:
            if any(cell.strip() for cell in row):
                rows.append((f"{where}: line {reader.line_num}", row))
    except csv.Error as error:
        raise InputError(f"{where}: not valid CSV: {error}") from error
    if not rows:
        raise InputError(f"{where}: the label file is empty")
    header = [cell.strip().lower() for cell in rows[0][1]]
    if header in (["name", "label"], ["filename", "label"]):
        pairs: list[tuple[str, object, str]] = []
        for line, row in rows[1:]:
            if len(row) != 2:
                raise InputError(f"{line}: expected two fields {','.join(header)}, got {len(row)}")
            pairs.append((row[0], row[1], line))
        return _labels_by_name(pairs, names, where)
    if header == ["label"]:
        rows = rows[1:]
    if not all(len(row) == 1 for _, row in rows):
        raise InputError(
            f"{where}: expected a 'filename,label' (or 'name,label') header or one label per "
            "line in source order"
        )
    return [_parse_label(row[0], line) for line, row in rows]


def _labels_by_name(
    pairs: Sequence[tuple[str, object, str]], names: Sequence[str], where: str
) -> list[int]:
    """Order name → label pairs by source order; every name exactly once."""
    index_of = {name: index for index, name in enumerate(names)}
    labels: list[int | None] = [None] * len(names)
    unknown: list[str] = []
    for name, value, location in pairs:
        index = index_of.get(name)
        if index is None:
            unknown.append(name)
        elif labels[index] is not None:
            raise InputError(f"{location}: name {name!r} is given twice")
        else:
            labels[index] = _parse_label(value, location)
    if unknown:
        raise InputError(f"{where}: {len(unknown)} name(s) not in the source: {_sample(unknown)}")
    missing = [names[index] for index, label in enumerate(labels) if label is None]
    if missing:
        raise InputError(f"{where}: no label for {len(missing)} image(s): {_sample(missing)}")
    return [label for label in labels if label is not None]


def _parse_label(value: object, where: str) -> int:
    number: int | None = None
    if isinstance(value, str) and value.strip().isascii() and value.strip().isdigit():
        number = int(value.strip())
    elif isinstance(value, int) and not isinstance(value, bool):
        number = value
    if number is None or not 0 <= number < MAX_LABEL:
        raise InputError(f"{where}: label {value!r} is not an integer in [0, {MAX_LABEL})")
    return number


def _sample(names: Sequence[str], shown: int = 3) -> str:
    text = ", ".join(repr(name) for name in names[:shown])
    return text + (", …" if len(names) > shown else "")


# --------------------------------------------------------------------------- helpers


@contextmanager
def _reading(where: str) -> Iterator[None]:
    """Turn decoder and file-system exceptions into an InputError naming ``where``."""
    try:
        yield
    except _DECODER_ERRORS as error:
        raise InputError(f"{where}: cannot read: {error}") from error


@contextmanager
def _open_binary(path: Path) -> Iterator[_Readable]:
    """Open a file for reading, decompressing it on the fly when it is gzip."""
    with path.open("rb") as raw:
        if raw.read(2) == _GZIP_MAGIC:
            raw.seek(0)
            with gzip.GzipFile(fileobj=raw, mode="rb") as unzipped:
                yield unzipped
        else:
            raw.seek(0)
            yield raw


def _advance(stream: _Readable, target: int) -> None:
    """Move a stream forward to ``target``, holding at most one chunk of skipped data.

    Plain files seek; gzip streams and zip members (whose own ``seek`` may read up to
    16 MiB at once) read and discard. A stream that ends early stops short, and the
    next read reports the truncation.
    """
    position = stream.tell()
    if isinstance(stream, io.BufferedReader) or position >= target:
        if position != target:
            stream.seek(target)
        return
    while position < target:
        chunk = stream.read(min(_SKIP_CHUNK, target - position))
        if not chunk:
            return
        position += len(chunk)


def _starts_with(path: Path, magic: bytes) -> bool:
    with _reading(str(path)), path.open("rb") as stream:
        return stream.read(len(magic)) == magic


def _read_exact(stream: _Readable, size: int, where: str, problem: str) -> bytes:
    chunks: list[bytes] = []
    remaining = size
    while remaining:
        chunk = stream.read(remaining)
        if not chunk:
            raise InputError(f"{where}: truncated: the file {problem}")
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)


def _check_stream_size(actual: int, expected: int, where: str) -> None:
    if actual != expected:
        raise InputError(
            f"{where}: size {actual} bytes does not match the {expected} bytes its header announces"
        )


def _check_side(side: int, what: str, where: str) -> None:
    if side < 1:
        raise InputError(f"{where}: image {what} is {side}")
    if side > MAX_IMAGE_SIDE:
        raise LimitExceededError(f"image {what} in {where}", side, MAX_IMAGE_SIDE)


def _check_pixel_bytes(shape: Shape, where: str) -> None:
    """Refuse an image whose pixels no item may hold (spec §2.3: a byte string's cap).

    An image item's pixels are one byte string of at most ``MAX_BIN_BYTES`` (48 MiB):
    a colour photo of 4096×4096 at most; a 12 MP phone photo (4000×3000) fits.
    """
    size = math.prod(shape)
    if size > MAX_BIN_BYTES:
        height, width, channels = shape
        colour = "colour" if channels == 3 else "grey"
        raise LimitExceededError(
            f"pixel bytes of {where} ({width}x{height} {colour}: an image item's pixels are"
            " one byte string, spec section 2.3; resize it to at most"
            f" {MAX_BIN_BYTES // channels / 1e6:.1f} megapixels)",
            size,
            MAX_BIN_BYTES,
        )


def _sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with _reading(str(path)), path.open("rb") as stream:
        while chunk := stream.read(_HASH_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def _sniff_format(path: Path) -> str:
    """Return ``"npy"``, ``"npz"`` or ``"idx"`` from the first bytes of a file."""
    with _reading(str(path)), path.open("rb") as stream:
        head = stream.read(8)
    if not head:
        raise InputError(f"{path}: the file is empty")
    if head.startswith(_NPY_MAGIC):
        return "npy"
    if head.startswith(_ZIP_MAGICS):
        return "npz"
    if head.startswith(_GZIP_MAGIC) or head.startswith(b"\x00\x00\x08"):
        return "idx"
    hint = (
        "; to read image files, open the folder that holds them"
        if path.suffix.lower() in IMAGE_SUFFIXES
        else ""
    )
    raise InputError(f"{path}: not a folder of images, .npy, .npz or idx file{hint}")


def reads_upright(description: Mapping[str, Value]) -> bool:
    """Return whether a source recorded as ``description`` read its images turned upright.

    A folder recorded before images were turned by their EXIF orientation has no
    ``exif_orientation`` in its ``images`` entry; opening it again to compare with its
    vault (``owner inspect --input``) must read it the same way.
    """
    images = description.get("images")
    if description.get("format") != "image-dir" or not isinstance(images, dict):
        return True
    return "exif_orientation" in images


def open_source(
    path: Path,
    *,
    labels: Path | None = None,
    npz_key: str | None = None,
    upright: bool = True,
) -> ImageSource:
    """Open a folder of images, an ``.npy``, an ``.npz`` or an idx(.gz) file.

    Args:
        path: The folder or file; its format is recognised by content.
        labels: An optional label file (CSV, JSON or idx) replacing labels found in
            the input.
        npz_key: The image array of an ``.npz`` archive (only valid for npz).
        upright: Turn a folder's images by their EXIF orientation (the rule since
            issue #39); False reads them as stored, as a vault made before did
            (:func:`reads_upright` of its recorded source).

    Raises:
        NotFoundError: ``path``, ``labels`` or ``npz_key`` does not exist.
        InputError: The input is malformed; see the module docstring.

    """
    path = Path(path)
    label_path = None if labels is None else Path(labels)
    if not path.exists():
        raise NotFoundError(f"{path}: no such file or folder")
    if label_path is not None and not label_path.is_file():
        raise NotFoundError(f"{label_path}: no such label file")
    if path.is_dir():
        _refuse_npz_key(npz_key, path, "image-dir")
        return FolderSource(path, label_path, upright=upright)
    if not path.is_file():
        raise InputError(f"{path}: not a regular file or folder")
    kind = _sniff_format(path)
    if kind == "npz":
        return NpzSource(path, label_path, npz_key)
    _refuse_npz_key(npz_key, path, kind)
    if kind == "npy":
        return NpySource(path, label_path)
    return IdxSource(path, label_path)


def _refuse_npz_key(npz_key: str | None, path: Path, kind: str) -> None:
    if npz_key is not None:
        raise ParameterError(f"{path}: npz_key applies to .npz archives, this input is {kind}")
