"""Tests of owner.images.sources: formats, batching rule, labels, streaming, bad inputs."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import struct
import tracemalloc
from collections.abc import Callable
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest
from PIL import Image, ImageOps

from twinaudit.owner.images import ImageBatch, ImageSource, open_source, published_name
from twinaudit.owner.images.sources import reads_upright
from twinaudit.protocol.encoding import Value, encode
from twinaudit.protocol.errors import (
    InputError,
    LimitExceededError,
    NotFoundError,
    ParameterError,
    TwinauditError,
)
from twinaudit.protocol.items import MAX_IMAGE_SIDE

FASHION = Path("/usr/share/datasets/fashion-mnist")

Pixels = npt.NDArray[np.uint8]


def _images(n: int, h: int, w: int, c: int | None = None, seed: int = 0) -> Pixels:
    shape = (n, h, w) if c is None else (n, h, w, c)
    return np.random.default_rng(seed).integers(0, 256, size=shape, dtype=np.uint8)


def _save_png(path: Path, pixels: Pixels) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(pixels[:, :, 0] if pixels.shape[2] == 1 else pixels).save(path)
    return path


def _idx_bytes(magic: int, array: npt.NDArray[np.uint8]) -> bytes:
    header = struct.pack(f">I{array.ndim}I", magic, *array.shape)
    return header + array.tobytes()


def _write_idx(path: Path, images: Pixels, labels: list[int] | None = None) -> Path:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "wb") as stream:
        stream.write(_idx_bytes(0x803, images))
    if labels is not None:
        name = path.name.replace("images-idx3", "labels-idx1")
        with opener(path.parent / name, "wb") as stream:
            stream.write(_idx_bytes(0x801, np.asarray(labels, dtype=np.uint8)))
    return path


def _entry(description: dict[str, Value], key: str) -> dict[str, Value]:
    value = description[key]
    assert isinstance(value, dict)
    return value


def _read_all(source: ImageSource, batch_size: int = 3, start: int = 0) -> list[ImageBatch]:
    return list(source.batches(batch_size, start))


def _flatten(batches: list[ImageBatch]) -> tuple[list[Pixels], list[str], list[int | None]]:
    pixels = [image for batch in batches for image in batch.pixels]
    names = [name for batch in batches for name in batch.names]
    labels = [label for batch in batches for label in batch.labels]
    return pixels, names, labels


def _mixed_folder(tmp_path: Path) -> tuple[Path, list[Pixels]]:
    """Six images: three 4x5 RGB, one 4x5 gray, two 6x3 RGB; names sort in this order."""
    root = tmp_path / "images"
    images = [
        *_images(3, 4, 5, 3, seed=1),
        _images(1, 4, 5, 1, seed=2)[0],
        *_images(2, 6, 3, 3, seed=3),
    ]
    for index, image in enumerate(images):
        _save_png(root / f"img{index:02d}.png", image)
    return root, images


# --------------------------------------------------------------------------- folders


def test_folder_lists_images_sorted_keeps_channels_and_ignores_other_files(tmp_path: Path) -> None:
    root = tmp_path / "photos"
    gray, rgb, nested = _images(1, 4, 5, 1)[0], _images(1, 4, 5, 3)[0], _images(1, 2, 2, 3)[0]
    _save_png(root / "b.PNG", rgb)
    _save_png(root / "a.png", gray)
    _save_png(root / "sub" / "c.png", nested)
    _save_png(root / ".hidden" / "d.png", nested)
    _save_png(root / ".e.png", nested)
    (root / "notes.txt").write_text("not an image")

    source = open_source(root)
    pixels, names, labels = _flatten(_read_all(source))

    assert source.format == "image-dir"
    assert len(source) == 3
    assert names == ["a.png", "b.PNG", "sub/c.png"]
    assert [image.shape for image in pixels] == [(4, 5, 1), (4, 5, 3), (2, 2, 3)]
    np.testing.assert_array_equal(pixels[0], gray)
    np.testing.assert_array_equal(pixels[1], rgb)
    assert labels == [None, None, None]
    images = _entry(source.describe(), "images")
    assert (images["file"], images["ignored_files"]) == ("photos", 1)


def test_folder_reads_jpeg_as_pil_decodes_it(tmp_path: Path) -> None:
    path = tmp_path / "jpegs" / "photo.jpg"
    path.parent.mkdir()
    Image.fromarray(_images(1, 16, 16, 3)[0]).save(path, quality=90)
    expected = np.asarray(Image.open(path))

    (batch,) = _read_all(open_source(path.parent))

    np.testing.assert_array_equal(batch.pixels[0], expected)


@pytest.mark.parametrize(
    ("mode", "channels"),
    [("1", 1), ("L", 1), ("LA", 1), ("P", 3), ("RGB", 3), ("RGBA", 3)],
)
def test_pixel_modes_convert_by_the_documented_rule(
    tmp_path: Path, mode: str, channels: int
) -> None:
    rgb = Image.fromarray(_images(1, 6, 7, 3)[0])
    image = rgb.convert(mode)
    path = tmp_path / "modes" / "image.png"
    path.parent.mkdir()
    image.save(path)
    visible = "L" if channels == 1 else "RGB"
    expected = np.asarray(image.convert(visible)).reshape(6, 7, channels)

    (batch,) = _read_all(open_source(path.parent))

    np.testing.assert_array_equal(batch.pixels[0], expected)


@pytest.mark.parametrize(
    ("fmt", "suffix", "options"),
    [
        ("WEBP", ".webp", {"lossless": True}),
        ("TIFF", ".tif", {}),
        ("BMP", ".bmp", {}),
        ("GIF", ".gif", {}),
        ("WEBP", ".WebP", {"quality": 80}),
    ],
)
def test_other_formats_read_as_pil_decodes_them_and_publish_as_png(
    tmp_path: Path, fmt: str, suffix: str, options: dict[str, object]
) -> None:
    image = Image.fromarray(_images(1, 9, 11, 3)[0])
    if fmt == "GIF":
        image = image.convert("P")
    path = tmp_path / "formats" / f"photo{suffix}"
    path.parent.mkdir()
    image.save(path, format=fmt, **options)
    expected = np.asarray(Image.open(path).convert("RGB"))

    source = open_source(path.parent)
    (batch,) = _read_all(source)

    np.testing.assert_array_equal(batch.pixels[0], expected)
    assert batch.originals is None  # only a JPEG's bytes go to the vault
    assert published_name(batch.names[0]) == "photo.png"


# EXIF orientation → how the stored pixels (H, W, C) are shown: numpy on the stored array.
UPRIGHT = {
    1: lambda a: a,
    2: lambda a: a[:, ::-1],
    3: lambda a: a[::-1, ::-1],
    4: lambda a: a[::-1],
    5: lambda a: a.transpose(1, 0, 2),
    6: lambda a: np.rot90(a, -1),
    7: lambda a: np.rot90(a, 2).transpose(1, 0, 2),
    8: lambda a: np.rot90(a, 1),
}


def _with_orientation(path: Path, pixels: Pixels, orientation: int, fmt: str) -> None:
    exif = Image.Exif()
    exif[0x0112] = orientation
    options: dict[str, object] = {"lossless": True} if fmt == "WEBP" else {}
    Image.fromarray(pixels).save(path, format=fmt, exif=exif.tobytes(), **options)


@pytest.mark.parametrize("orientation", range(1, 9))
def test_an_exif_orientation_turns_the_pixels_as_a_viewer_shows_them(
    tmp_path: Path, orientation: int
) -> None:
    root = tmp_path / "phone"
    root.mkdir()
    stored = _images(1, 6, 10, 3, seed=orientation)[0]  # a landscape sensor image
    _with_orientation(root / "b.png", stored, orientation, "PNG")  # eXIf before the pixels
    _with_orientation(root / "c.webp", stored, orientation, "WEBP")
    jpeg = root / "a.jpg"
    _with_orientation(jpeg, stored, orientation, "JPEG")
    decoded_jpeg = np.asarray(Image.open(jpeg))  # as stored; JPEG is lossy

    source = open_source(root)
    pixels, names, _ = _flatten(_read_all(source, batch_size=1))

    shown = UPRIGHT[orientation]
    assert names == ["a.jpg", "b.png", "c.webp"]
    np.testing.assert_array_equal(pixels[0], shown(decoded_jpeg))
    np.testing.assert_array_equal(pixels[1], shown(stored))
    np.testing.assert_array_equal(pixels[2], shown(stored))
    with Image.open(root / "b.png") as viewer:  # Pillow's own reading of the tag agrees
        np.testing.assert_array_equal(pixels[1], np.asarray(ImageOps.exif_transpose(viewer)))
    expected_shape = (10, 6, 3) if orientation >= 5 else (6, 10, 3)
    assert source.shape_at(0) == source.shape_at(1) == expected_shape


@pytest.mark.parametrize("orientation", [1, 3, 6])
def test_a_jpeg_turned_upright_does_not_hand_its_bytes_to_the_vault(
    tmp_path: Path, orientation: int
) -> None:
    root = tmp_path / "smooth"
    root.mkdir()
    ys, xs = np.mgrid[0:64, 0:96]
    smooth = np.stack([xs * 2, ys * 3, xs + ys], axis=-1).astype(np.uint8)  # compresses well
    _with_orientation(root / "a.jpg", smooth, orientation, "JPEG")
    (batch,) = _read_all(open_source(root))
    # Its file's pixels are what a vault keeps the bytes of; upright ones are others.
    if orientation == 1:
        assert batch.originals == [(root / "a.jpg").read_bytes()]
    else:
        assert batch.originals is None


def test_a_jpeg_with_more_pictures_is_its_first_as_viewers_show_it(tmp_path: Path) -> None:
    root = tmp_path / "camera"
    root.mkdir()
    ys, xs = np.mgrid[0:48, 0:64]
    first = np.stack([xs * 3, ys * 4, xs + ys], axis=-1).astype(np.uint8)
    depth = Image.fromarray(_images(1, 24, 32, 3)[0])  # a phone's depth map, say
    Image.fromarray(first).save(
        root / "portrait.jpg", format="MPO", save_all=True, append_images=[depth]
    )
    with Image.open(root / "portrait.jpg") as viewer:
        assert viewer.format == "MPO" and viewer.n_frames == 2
        shown = np.asarray(viewer)

    (batch,) = _read_all(open_source(root))

    np.testing.assert_array_equal(batch.pixels[0], shown)
    assert batch.originals == [(root / "portrait.jpg").read_bytes()]


def test_a_folder_read_as_stored_is_described_so_and_not_turned(tmp_path: Path) -> None:
    root = tmp_path / "phone"
    root.mkdir()
    stored = _images(1, 6, 10, 3)[0]
    _with_orientation(root / "a.png", stored, 6, "PNG")
    turned, as_stored = open_source(root), open_source(root, upright=False)
    np.testing.assert_array_equal(_read_all(as_stored)[0].pixels[0], stored)
    assert _read_all(turned)[0].pixels[0].shape == (10, 6, 3)
    assert reads_upright(turned.describe()) and not reads_upright(as_stored.describe())
    assert reads_upright({"format": "npy", "images": {"file": "x.npy"}})  # no rule to apply


def test_an_exif_block_that_does_not_parse_leaves_the_pixels_as_stored(tmp_path: Path) -> None:
    root = tmp_path / "odd"
    root.mkdir()
    stored = _images(1, 5, 7, 3)[0]
    Image.fromarray(stored).save(root / "a.webp", lossless=True, exif=b"Exif\x00\x00garbage")
    (batch,) = _read_all(open_source(root))
    np.testing.assert_array_equal(batch.pixels[0], stored)


def test_unread_formats_animations_and_clashing_names_are_refused_by_name(tmp_path: Path) -> None:
    root = tmp_path / "mixed"
    _save_png(root / "a.png", _images(1, 4, 4, 3)[0])
    Image.fromarray(_images(1, 4, 4, 3)[0]).save(root / "a.jpg")  # published as a.png too
    (root / "phone.AVIF").write_bytes(b"\x00\x00\x00\x18ftypavif")
    (root / "notes.txt").write_text("ignored, as before")
    frames = [Image.fromarray(_images(1, 4, 4, 3, seed=k)[0]).convert("P") for k in range(3)]
    frames[0].save(root / "moving.gif", save_all=True, append_images=frames[1:])
    pages = [Image.fromarray(_images(1, 4, 4, 3, seed=k)[0]) for k in range(2)]
    pages[0].save(root / "scan.tiff", save_all=True, append_images=pages[1:])

    with pytest.raises(InputError) as raised:
        open_source(root)

    message = str(raised.value)
    assert "4 of 5 images cannot be marked" in message
    assert "phone.AVIF: not a format owner mark reads" in message
    assert "moving.gif: holds 3 frames" in message and "scan.tiff: holds 2 frames" in message
    assert "a.png: would be published as 'a.png', as 'a.jpg' is" in message
    assert "notes.txt" not in message
    only_raw = tmp_path / "camera"
    only_raw.mkdir()
    (only_raw / "IMG_0001.CR3").write_bytes(b"\x00")
    with pytest.raises(InputError, match=r"IMG_0001\.CR3: not a format owner mark reads"):
        open_source(only_raw)


def test_names_published_alike_but_for_case_are_refused(tmp_path: Path) -> None:
    # Apart on this file system; one file on macOS's and Windows' (and "Café" written
    # in composed and decomposed Unicode on macOS's).
    root = tmp_path / "cased"
    names = ["IMG_1.png", "img_1.png", "Trip/b.jpg", "trip/B.png", "Café.png", "Cafe\u0301.png"]
    for name in names:
        _save_png(root / name, _images(1, 4, 4, 3)[0])  # Pillow writes a .jpg as JPEG
    with pytest.raises(InputError) as raised:
        open_source(root)
    message = str(raised.value)
    assert "3 of 6 images cannot be marked" in message
    assert (
        "img_1.png: would be published as 'img_1.png', which macOS and Windows take for" in message
    )
    assert "trip/B.png" in message and "Cafe\u0301.png" in message


@pytest.mark.parametrize("mode", ["RGBA", "LA"])
def test_transparent_pixels_are_refused_naming_the_file(tmp_path: Path, mode: str) -> None:
    image = Image.new(mode, (3, 3))
    path = tmp_path / "alpha" / "see-through.png"
    path.parent.mkdir()
    image.save(path)
    source = open_source(path.parent)

    with pytest.raises(InputError, match="transparent") as raised:
        _read_all(source)
    assert "see-through.png" in str(raised.value)


def test_batches_break_at_shape_changes(tmp_path: Path) -> None:
    root, images = _mixed_folder(tmp_path)
    source = open_source(root)

    spans = [(batch.start, len(batch)) for batch in source.batches(2)]

    assert spans == [(0, 2), (2, 1), (3, 1), (4, 2)]
    pixels, _, _ = _flatten(_read_all(source, 2))
    for got, expected in zip(pixels, images, strict=True):
        np.testing.assert_array_equal(got, expected)


# --------------------------------------------------------------------------- arrays

ARRAY_CASES: dict[str, Callable[[Path], tuple[Path, Pixels, list[int] | None]]] = {
    "npy-3d": lambda d: (_npy(d / "x.npy", _images(5, 3, 4)), _images(5, 3, 4, 1), None),
    "npy-4d-gray": lambda d: (_npy(d / "x.npy", _images(5, 3, 4, 1)), _images(5, 3, 4, 1), None),
    "npy-rgb": lambda d: (_npy(d / "x.npy", _images(5, 3, 4, 3)), _images(5, 3, 4, 3), None),
    "npy-fortran": lambda d: (
        _npy(d / "x.npy", np.asfortranarray(_images(5, 3, 4, 3))),
        _images(5, 3, 4, 3),
        None,
    ),
    "npz-keras": lambda d: (
        _npz(d / "d.npz", x_train=_images(5, 3, 4), y_train=np.arange(5), x_test=_images(1, 3, 4)),
        _images(5, 3, 4, 1),
        [0, 1, 2, 3, 4],
    ),
    "npz-single": lambda d: (
        _npz(d / "d.npz", pixels=_images(5, 3, 4, 3)),
        _images(5, 3, 4, 3),
        None,
    ),
    "npz-compressed-labels": lambda d: (
        _npz(d / "d.npz", True, images=_images(5, 3, 4), labels=np.arange(5, dtype=np.uint16)),
        _images(5, 3, 4, 1),
        [0, 1, 2, 3, 4],
    ),
    "idx": lambda d: (
        _write_idx(d / "t-images-idx3-ubyte", _images(5, 3, 4), [9, 8, 7, 6, 5]),
        _images(5, 3, 4, 1),
        [9, 8, 7, 6, 5],
    ),
    "idx-gz": lambda d: (
        _write_idx(d / "t-images-idx3-ubyte.gz", _images(5, 3, 4), [9, 8, 7, 6, 5]),
        _images(5, 3, 4, 1),
        [9, 8, 7, 6, 5],
    ),
    "idx-gz-no-labels": lambda d: (
        _write_idx(d / "images.idx3.gz", _images(5, 3, 4)),
        _images(5, 3, 4, 1),
        None,
    ),
}


def _npy(path: Path, array: npt.NDArray[np.generic]) -> Path:
    np.save(path, array)
    return path


def _npz(path: Path, compressed: bool = False, **arrays: npt.NDArray[np.generic]) -> Path:
    save = np.savez_compressed if compressed else np.savez
    save(path, **arrays)  # type: ignore[arg-type]
    return path


@pytest.mark.parametrize("case", ARRAY_CASES)
def test_array_formats_read_pixels_names_and_labels(tmp_path: Path, case: str) -> None:
    path, expected, expected_labels = ARRAY_CASES[case](tmp_path)

    source = open_source(path)
    pixels, names, labels = _flatten(_read_all(source, 2))

    assert len(source) == len(expected)
    np.testing.assert_array_equal(np.stack(pixels), expected)
    assert names == [f"{path.name}#{index}" for index in range(len(expected))]
    assert labels == (expected_labels if expected_labels else [None] * len(expected))
    assert source.has_labels == (expected_labels is not None)


def test_npz_key_selects_the_array(tmp_path: Path) -> None:
    path = _npz(tmp_path / "d.npz", a=_images(2, 3, 3), b=_images(4, 3, 3, 3))

    source = open_source(path, npz_key="b")

    assert len(source) == 4
    assert _entry(source.describe(), "images")["key"] == "b"


# --------------------------------------------------------------------------- batching rule

RESUME_SOURCES: dict[str, Callable[[Path], Path]] = {
    "image-dir": lambda d: _mixed_folder(d)[0],
    "npy": lambda d: _npy(d / "x.npy", _images(11, 3, 4, 3)),
    "npz": lambda d: _npz(d / "d.npz", True, x=_images(11, 3, 4)),
    "idx-gz": lambda d: _write_idx(d / "a-images-idx3-ubyte.gz", _images(11, 3, 4), [1] * 11),
}


@pytest.mark.parametrize("batch_size", [1, 2, 3, 7])
@pytest.mark.parametrize("kind", RESUME_SOURCES)
def test_resuming_at_any_batch_boundary_yields_the_same_batches(
    tmp_path: Path, kind: str, batch_size: int
) -> None:
    source = open_source(RESUME_SOURCES[kind](tmp_path))
    full = _read_all(source, batch_size)
    assert sum(len(batch) for batch in full) == len(source)

    for position, batch in enumerate(full):
        resumed = _read_all(source, batch_size, start=batch.start)
        assert [(b.start, b.names, b.labels) for b in resumed] == [
            (b.start, b.names, b.labels) for b in full[position:]
        ]
        for got, expected in zip(resumed, full[position:], strict=True):
            np.testing.assert_array_equal(got.pixels, expected.pixels)
    assert _read_all(source, batch_size, start=len(source)) == []


@pytest.mark.parametrize(("batch_size", "start"), [(0, 0), (-1, 0), (2, -1), (2, 12), (True, 0)])
def test_bad_batch_arguments_are_parameter_errors(
    tmp_path: Path, batch_size: int, start: int
) -> None:
    source = open_source(_npy(tmp_path / "x.npy", _images(11, 2, 2)))

    with pytest.raises(ParameterError):
        source.batches(batch_size, start)


STREAMED_SOURCES: dict[str, Callable[[Path], Path]] = {
    "idx-gz": lambda d: _write_idx(d / "big-images-idx3-ubyte.gz", _images(4000, 28, 28)),
    "npz-deflated": lambda d: _npz(d / "big.npz", True, x=_images(4000, 28, 28)),
    "npz-stored": lambda d: _npz(d / "big.npz", x=_images(4000, 28, 28)),
    "npy": lambda d: _npy(d / "big.npy", _images(4000, 28, 28)),
}


@pytest.mark.parametrize("kind", STREAMED_SOURCES)
def test_streaming_memory_stays_bounded(tmp_path: Path, kind: str) -> None:
    source = open_source(STREAMED_SOURCES[kind](tmp_path))

    tracemalloc.start()
    try:
        seen = sum(len(batch) for batch in source.batches(16, start=1000))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()

    assert seen == 3000
    assert peak < 400_000  # the data is 3.1 MB; a batch is 12.5 kB


# --------------------------------------------------------------------------- labels

NAMES = ["a.png", "b.png", "sub/c.png"]

GOOD_LABEL_FILES = {
    "csv-name-label": ("labels.csv", "name,label\nsub/c.png,7\na.png,5\nb.png, 6\n"),
    "csv-filename-label": ("labels.csv", "filename,label\nsub/c.png,7\na.png,5\nb.png,6\n"),
    "csv-one-per-line": ("labels.csv", "5\n6\n\n7\n"),
    "csv-label-header": ("labels.txt", "label\n5\n6\n7\n"),
    "json-list": ("labels.json", "[5, 6, 7]"),
    "json-map": ("labels.json", '{"b.png": 6, "a.png": 5, "sub/c.png": 7}'),
}


def _three_image_folder(tmp_path: Path) -> Path:
    root = tmp_path / "three"
    for name in NAMES:
        _save_png(root / name, _images(1, 2, 2, 3)[0])
    return root


@pytest.mark.parametrize("case", GOOD_LABEL_FILES)
def test_label_files_are_read_in_source_order(tmp_path: Path, case: str) -> None:
    name, text = GOOD_LABEL_FILES[case]
    label_path = tmp_path / name
    label_path.write_text(text)

    source = open_source(_three_image_folder(tmp_path), labels=label_path)

    assert _flatten(_read_all(source))[2] == [5, 6, 7]
    info = source.describe()["labels"]
    assert isinstance(info, dict)
    assert info["file"] == name
    assert info["origin"] == ("json" if name.endswith(".json") else "csv")


def test_array_names_key_label_maps(tmp_path: Path) -> None:
    path = _npy(tmp_path / "x.npy", _images(2, 2, 2))
    label_path = tmp_path / "labels.json"
    label_path.write_text(json.dumps({"x.npy#1": 3, "x.npy#0": 4}))

    assert _flatten(_read_all(open_source(path, labels=label_path)))[2] == [4, 3]


def test_explicit_idx_label_file_replaces_the_sibling(tmp_path: Path) -> None:
    path = _write_idx(tmp_path / "t-images-idx3-ubyte", _images(3, 2, 2), [1, 1, 1])
    other = tmp_path / "other.gz"
    other.write_bytes(gzip.compress(_idx_bytes(0x801, np.array([4, 5, 6], dtype=np.uint8))))

    assert _flatten(_read_all(open_source(path, labels=other)))[2] == [4, 5, 6]


BAD_LABEL_FILES: dict[str, tuple[str, str | bytes, str]] = {
    "too-few": ("labels.csv", "5\n6\n", "2 labels for 3 images"),
    "too-many-json": ("labels.json", "[1, 2, 3, 4]", "4 labels for 3 images"),
    "unknown-name": ("labels.csv", "name,label\na.png,1\nb.png,2\nsub/c.png,3\nz.png,4\n", "z.png"),
    "missing-name": ("labels.csv", "name,label\na.png,1\nb.png,2\n", "sub/c.png"),
    "duplicate-name": ("labels.json", '{"a.png": 1, "a.png": 2, "b.png": 3}', "twice"),
    "not-integer": ("labels.csv", "5\nsix\n7\n", "'six'"),
    "float-json": ("labels.json", "[5, 6.0, 7]", "6.0"),
    "bool-json": ("labels.json", "[5, true, 7]", "True"),
    "negative": ("labels.csv", "5\n-6\n7\n", "'-6'"),
    "too-large": ("labels.csv", "5\n65536\n7\n", "65536"),
    "three-columns": ("labels.csv", "a,b,c\n1,2,3\n", "header"),
    "bad-json": ("labels.json", "[5, 6", "not valid JSON"),
    "json-scalar": ("labels.json", "5", "JSON list"),
    "empty": ("labels.csv", "\n\n", "empty"),
    "not-utf8": ("labels.csv", b"\xff\xfe\x00", "cannot read"),
}


@pytest.mark.parametrize("case", BAD_LABEL_FILES)
def test_bad_label_files_raise_input_errors_naming_the_file(tmp_path: Path, case: str) -> None:
    name, content, problem = BAD_LABEL_FILES[case]
    label_path = tmp_path / name
    if isinstance(content, bytes):
        label_path.write_bytes(content)
    else:
        label_path.write_text(content)

    with pytest.raises(InputError) as raised:
        open_source(_three_image_folder(tmp_path), labels=label_path)
    assert name in str(raised.value)
    assert problem in str(raised.value)


# --------------------------------------------------------------------------- bad inputs


def _png_bytes(pixels: Pixels) -> bytes:
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, format="PNG")
    return buffer.getvalue()


def _empty_folder(folder: Path) -> Path:
    (folder / "void").mkdir()
    return folder / "void"


def _file(name: str, content: bytes) -> Callable[[Path], Path]:
    def build(folder: Path) -> Path:
        (folder / name).write_bytes(content)
        return folder / name

    return build


def _in_folder(name: str, content: bytes) -> Callable[[Path], Path]:
    def build(folder: Path) -> Path:
        (folder / "pics").mkdir()
        (folder / "pics" / name).write_bytes(content)
        return folder / "pics"

    return build


def _saved(name: str, array: npt.NDArray[np.generic]) -> Callable[[Path], Path]:
    return lambda folder: _npy(folder / name, array)


def _idx_file(name: str, magic: int, array: Pixels, extra: bytes = b"") -> Callable[[Path], Path]:
    data = _idx_bytes(magic, array) + extra
    return _file(name, gzip.compress(data) if name.endswith(".gz") else data)


PNG = _png_bytes(_images(1, 8, 8, 3)[0])
NPY_MAGIC = np.lib.format.magic(1, 0)

BAD_INPUTS: dict[str, tuple[Callable[[Path], Path], type[TwinauditError], str]] = {
    "missing-path": (lambda d: d / "nowhere.npy", NotFoundError, "nowhere.npy"),
    "empty-folder": (_empty_folder, InputError, "void"),
    "only-text-files": (_in_folder("readme.txt", b"hi"), InputError, "pics"),
    "garbage-png": (_in_folder("broken.png", b"not a png at all"), InputError, "broken.png"),
    "gif-named-png": (
        _in_folder("gif.png", b"GIF89a\x01\x00\x01\x00\x00\x00\x00;"),
        InputError,
        "gif.png",
    ),
    "truncated-png": (_in_folder("cut.png", PNG[: len(PNG) // 2]), InputError, "cut.png"),
    "sixteen-bit-png": (
        lambda d: _save_16bit(d / "deep" / "deep.png"),
        InputError,
        "deep.png",
    ),
    "png-too-wide": (
        lambda d: (
            _save_png(
                d / "wide" / "wide.png", np.zeros((1, MAX_IMAGE_SIDE + 1, 1), np.uint8)
            ).parent
        ),
        LimitExceededError,
        "wide.png",
    ),
    "empty-file": (_file("nothing.npy", b""), InputError, "nothing.npy"),
    "unknown-content": (_file("mystery.bin", b"hello world"), InputError, "mystery.bin"),
    "single-png-file": (_file("lonely.png", PNG), InputError, "lonely.png"),
    "zero-length-npy": (_saved("zero.npy", np.zeros((0, 4, 4), np.uint8)), InputError, "zero.npy"),
    "float-npy": (_saved("floats.npy", np.zeros((2, 4, 4), np.float32)), InputError, "floats.npy"),
    "int16-npy": (_saved("wide.npy", np.zeros((2, 4, 4), np.int16)), InputError, "wide.npy"),
    "2d-npy": (_saved("flat.npy", np.zeros((4, 4), np.uint8)), InputError, "flat.npy"),
    "4-channel-npy": (_saved("rgba.npy", np.zeros((2, 4, 4, 4), np.uint8)), InputError, "rgba.npy"),
    "5d-npy": (_saved("deep.npy", np.zeros((1, 2, 2, 2, 1), np.uint8)), InputError, "deep.npy"),
    "npy-too-tall": (
        _saved("tall.npy", np.zeros((1, MAX_IMAGE_SIDE + 1, 1), np.uint8)),
        LimitExceededError,
        "tall.npy",
    ),
    "truncated-npy": (
        lambda d: _truncate(_npy(d / "cut.npy", _images(4, 4, 4)), 10),
        InputError,
        "cut.npy",
    ),
    "bad-npy-header": (
        _file("header.npy", NPY_MAGIC + b"\x10\x00{garbage}       "),
        InputError,
        "header.npy",
    ),
    "npz-corrupt": (_file("broken.npz", b"PK\x03\x04 this is no zip"), InputError, "broken.npz"),
    "npz-empty": (lambda d: _npz(d / "none.npz"), InputError, "none.npz"),
    "npz-ambiguous": (
        lambda d: _npz(d / "two.npz", a=_images(1, 2, 2), b=_images(1, 2, 2)),
        InputError,
        "two.npz",
    ),
    "npz-float": (lambda d: _npz(d / "f.npz", x=np.zeros((2, 2, 2))), InputError, "f.npz"),
    "npz-label-count": (
        lambda d: _npz(d / "lc.npz", x=_images(3, 2, 2), y=np.arange(2)),
        InputError,
        "lc.npz",
    ),
    "npz-float-labels": (
        lambda d: _npz(d / "fl.npz", x=_images(2, 2, 2), y=np.zeros(2)),
        InputError,
        "fl.npz",
    ),
    "npz-fortran": (
        lambda d: _npz(d / "fo.npz", x=np.asfortranarray(_images(2, 3, 4, 3))),
        InputError,
        "fo.npz",
    ),
    "idx-bad-magic": (
        _idx_file("m-images-idx3-ubyte", 0x802, _images(2, 2, 2)),
        InputError,
        "m-images",
    ),
    "idx-labels-as-images": (
        _idx_file("l-images-idx3-ubyte", 0x801, np.arange(3, dtype=np.uint8)),
        InputError,
        "l-images",
    ),
    "idx-short": (
        lambda d: _truncate(_write_idx(d / "s-images-idx3-ubyte", _images(3, 2, 2)), 1),
        InputError,
        "s-images",
    ),
    "idx-long": (
        _idx_file("g-images-idx3-ubyte", 0x803, _images(3, 2, 2), b"\0"),
        InputError,
        "g-images",
    ),
    "idx-gz-short": (
        lambda d: _gz_truncated(d / "z-images-idx3-ubyte.gz", _images(3, 2, 2)),
        InputError,
        "z-images",
    ),
    "idx-gz-long": (
        _idx_file("y-images-idx3-ubyte.gz", 0x803, _images(3, 2, 2), b"\0"),
        InputError,
        "y-images",
    ),
    "idx-gz-corrupt": (
        _file("c-images-idx3-ubyte.gz", b"\x1f\x8b\x08\x00garbage"),
        InputError,
        "c-images",
    ),
    "idx-zero-images": (
        _idx_file("n-images-idx3-ubyte", 0x803, _images(0, 2, 2)),
        InputError,
        "n-images",
    ),
    "idx-label-count": (
        lambda d: _write_idx(d / "k-images-idx3-ubyte", _images(3, 2, 2), [1, 2]),
        InputError,
        "k-labels-idx1-ubyte",
    ),
}


def _save_16bit(path: Path) -> Path:
    path.parent.mkdir()
    Image.fromarray(np.full((3, 3), 1000, dtype=np.uint16)).save(path)
    return path.parent


def _truncate(path: Path, drop: int) -> Path:
    data = path.read_bytes()
    path.write_bytes(data[:-drop])
    return path


def _gz_truncated(path: Path, images: Pixels) -> Path:
    path.write_bytes(gzip.compress(_idx_bytes(0x803, images)[:-1]))
    return path


@pytest.mark.parametrize("case", BAD_INPUTS)
def test_bad_inputs_raise_typed_errors_naming_the_file(tmp_path: Path, case: str) -> None:
    build, error, file_name = BAD_INPUTS[case]
    path = build(tmp_path)

    with pytest.raises(error) as raised:
        _read_all(open_source(path))
    assert file_name in str(raised.value)


def test_a_missing_label_file_or_npz_key_is_not_found(tmp_path: Path) -> None:
    npy = _npy(tmp_path / "x.npy", _images(2, 2, 2))
    npz = _npz(tmp_path / "keys.npz", x=_images(2, 2, 2))

    with pytest.raises(NotFoundError, match=r"gone\.csv"):
        open_source(npy, labels=tmp_path / "gone.csv")
    with pytest.raises(NotFoundError, match=r"keys\.npz.*'nope'"):
        open_source(npz, npz_key="nope")


def test_a_truncated_image_is_reported_when_it_is_read(tmp_path: Path) -> None:
    root = tmp_path / "pics"
    _save_png(root / "a.png", _images(1, 8, 8, 3)[0])
    (root / "b.png").write_bytes(PNG[: len(PNG) // 2])

    source = open_source(root)  # headers are intact
    batches = source.batches(1)
    assert next(batches).names == ["a.png"]
    with pytest.raises(InputError, match=r"b\.png"):
        next(batches)


def test_npz_key_is_refused_for_other_formats(tmp_path: Path) -> None:
    path = _npy(tmp_path / "x.npy", _images(2, 2, 2))

    with pytest.raises(ParameterError, match=r"x\.npy"):
        open_source(path, npz_key="x")


# --------------------------------------------------------------------------- describe


def test_describe_is_a_canonical_manifest_entry(tmp_path: Path) -> None:
    root, _ = _mixed_folder(tmp_path)
    label_path = tmp_path / "labels.csv"
    label_path.write_text("\n".join(str(index) for index in range(6)))

    description = open_source(root, labels=label_path).describe()

    encode(description)  # has a canonical encoding
    assert description["format"] == "image-dir"
    assert description["count"] == 6
    assert description["shapes"] == [
        {"shape": [4, 5, 1], "count": 1},
        {"shape": [4, 5, 3], "count": 3},
        {"shape": [6, 3, 3], "count": 2},
    ]
    labels = description["labels"]
    assert isinstance(labels, dict)
    assert labels["origin"] == "csv"
    assert len(str(labels["sha256"])) == 64
    renamed = tmp_path / "renamed"
    root.rename(renamed)
    renamed_description = open_source(renamed, labels=label_path).describe()
    assert (
        _entry(renamed_description, "images")["sha256"] == _entry(description, "images")["sha256"]
    )


def test_describe_hashes_array_files(tmp_path: Path) -> None:
    path = _write_idx(tmp_path / "q-images-idx3-ubyte.gz", _images(3, 2, 2), [1, 2, 3])

    description = open_source(path).describe()

    images = description["images"]
    labels = description["labels"]
    assert isinstance(images, dict)
    assert isinstance(labels, dict)
    assert images["sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()
    assert images["compressed"] is True
    assert images["array_shape"] == [3, 2, 2]
    assert labels == {
        "origin": "idx",
        "file": "q-labels-idx1-ubyte.gz",
        "sha256": hashlib.sha256((tmp_path / "q-labels-idx1-ubyte.gz").read_bytes()).hexdigest(),
    }


# --------------------------------------------------------------------------- real data


@pytest.mark.parametrize(
    ("split", "count", "first_labels"),
    [
        ("train", 60000, [9, 0, 0, 3, 0, 2, 7, 2, 5, 5]),
        ("t10k", 10000, [9, 2, 1, 1, 6, 1, 4, 6, 5, 7]),
    ],
)
def test_fashion_mnist_idx_gz(split: str, count: int, first_labels: list[int]) -> None:
    path = FASHION / f"{split}-images-idx3-ubyte.gz"
    if not path.is_file():
        pytest.skip(f"Fashion-MNIST not installed at {FASHION} (Debian dataset-fashion-mnist)")

    source = open_source(path)
    first = next(source.batches(10))

    assert len(source) == count
    assert first.labels == first_labels
    assert first.pixels.shape == (10, 28, 28, 1)
    assert first.names[0] == f"{split}-images-idx3-ubyte.gz#0"
    if split == "t10k":
        (last,) = source.batches(10, start=count - 10)
        assert last.start == count - 10
        assert len(last) == 10
