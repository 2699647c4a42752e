"""Tests of owner.images.writers (round trips, atomicity, misuse) and owner.images.sheet."""

from __future__ import annotations

import gzip
import struct
from collections.abc import Callable
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest
from PIL import Image

from twinaudit.owner.images import (
    ImageBatch,
    ImageSource,
    amplified_difference,
    open_source,
    open_writer,
    published_name,
    write_contact_sheet,
    write_fitted_contact_sheet,
)
from twinaudit.owner.images.sheet import GAP, TITLE_HEIGHT
from twinaudit.protocol.encoding import Value
from twinaudit.protocol.errors import InputError, NotFoundError, ParameterError, StateError

Pixels = npt.NDArray[np.uint8]


def _images(n: int, h: int, w: int, c: int | None = None, seed: int = 0) -> Pixels:
    shape = (n, h, w) if c is None else (n, h, w, c)
    return np.random.default_rng(seed).integers(0, 256, size=shape, dtype=np.uint8)


def _entry(description: dict[str, Value], key: str) -> dict[str, Value]:
    value = description[key]
    assert isinstance(value, dict)
    return value


def _save_png(path: Path, pixels: Pixels) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(pixels[:, :, 0] if pixels.shape[2] == 1 else pixels).save(path)


def _write_idx(path: Path, images: Pixels, labels: list[int] | None = None) -> Path:
    def encode(magic: int, array: Pixels) -> bytes:
        return struct.pack(f">I{array.ndim}I", magic, *array.shape) + array.tobytes()

    compress = gzip.compress if path.suffix == ".gz" else bytes
    path.write_bytes(compress(encode(0x803, images)))
    if labels is not None:
        sibling = path.parent / path.name.replace("images-idx3", "labels-idx1")
        sibling.write_bytes(compress(encode(0x801, np.asarray(labels, dtype=np.uint8))))
    return path


def _everything(source: ImageSource) -> tuple[list[Pixels], list[str], list[int | None]]:
    batches = list(source.batches(2))
    pixels = [image for batch in batches for image in batch.pixels]
    names = [name for batch in batches for name in batch.names]
    labels = [label for batch in batches for label in batch.labels]
    return pixels, names, labels


def _publish(
    source: ImageSource, out_dir: Path, *, labels: bool, batch_size: int = 2
) -> list[Path]:
    with open_writer(source.describe(), out_dir, count=len(source), labels=labels) as writer:
        for batch in source.batches(batch_size):
            writer.add(batch)
        return writer.close()


def _folder(root: Path) -> Path:
    """Five PNGs of three shapes, one in a sub-folder."""
    images = [*_images(2, 4, 5, 3, seed=1), _images(1, 4, 5, 1, seed=2)[0], *_images(2, 3, 3, 1)]
    names = ["a.png", "b.png", "c.png", "d/e.png", "d/f.png"]
    for name, image in zip(names, images, strict=True):
        _save_png(root / name, image)
    return root


def _labels_csv(path: Path, labels: list[int]) -> Path:
    path.write_text("".join(f"{label}\n" for label in labels))
    return path


# Each case: build the input in a folder → (input path, open_source options, the input
# to reopen, relative to the publication, and the label file to reopen it with).
RoundTripCase = Callable[[Path], tuple[Path, dict[str, object], str, str | None]]

ROUND_TRIPS: dict[str, RoundTripCase] = {
    "image-dir": lambda d: (_folder(d / "in"), {}, "", None),
    "image-dir-labels": lambda d: (
        _folder(d / "in"),
        {"labels": _labels_csv(d / "l.csv", [1, 2, 3, 4, 5])},
        "",
        "labels.csv",
    ),
    "npy-3d-labels": lambda d: (
        _npy(d / "x.npy", _images(5, 3, 4)),
        {"labels": _labels_csv(d / "l.csv", [5, 4, 3, 2, 1])},
        "x.npy",
        "labels.csv",
    ),
    "npy-4d": lambda d: (_npy(d / "x.npy", _images(5, 3, 4, 1)), {}, "x.npy", None),
    "npy-rgb": lambda d: (_npy(d / "x.npy", _images(5, 3, 4, 3)), {}, "x.npy", None),
    "npz-stored": lambda d: (
        _npz(d / "d.npz", False, x_train=_images(5, 3, 4), y_train=np.arange(5, dtype=np.uint8)),
        {},
        "d.npz",
        None,
    ),
    "npz-deflated-key": lambda d: (
        _npz(d / "d.npz", True, a=_images(5, 3, 4, 3), b=_images(1, 2, 2)),
        {"npz_key": "a", "labels": _labels_csv(d / "l.csv", [7, 7, 300, 7, 7])},
        "d.npz",
        None,
    ),
    "idx": lambda d: (
        _write_idx(d / "t-images-idx3-ubyte", _images(5, 3, 4)),
        {},
        "t-images-idx3-ubyte",
        None,
    ),
    "idx-gz-labels": lambda d: (
        _write_idx(d / "t-images-idx3-ubyte.gz", _images(5, 3, 4), [3, 1, 4, 1, 5]),
        {},
        "t-images-idx3-ubyte.gz",
        None,
    ),
}


def _npy(path: Path, array: Pixels) -> Path:
    np.save(path, array)
    return path


def _npz(path: Path, compressed: bool, **arrays: npt.NDArray[np.generic]) -> Path:
    save = np.savez_compressed if compressed else np.savez
    save(path, **arrays)  # type: ignore[arg-type]
    return path


LABELLED = {"image-dir-labels", "npy-3d-labels", "npz-stored", "npz-deflated-key", "idx-gz-labels"}


@pytest.mark.parametrize(
    ("case", "with_labels"),
    [(case, False) for case in ROUND_TRIPS] + [(case, True) for case in sorted(LABELLED)],
)
def test_publication_round_trips_pixels_names_and_labels(
    tmp_path: Path, case: str, with_labels: bool
) -> None:
    path, options, published, label_file = ROUND_TRIPS[case](tmp_path)
    source = open_source(path, **options)  # type: ignore[arg-type]
    assert source.has_labels == (case in LABELLED)
    out_dir = tmp_path / "published"

    files = _publish(source, out_dir, labels=with_labels)

    assert sorted(files) == sorted(p for p in out_dir.rglob("*") if p.is_file())
    labels = out_dir / label_file if with_labels and label_file else None
    if labels is not None and labels.suffix == ".csv":  # the labels files' one convention
        assert labels.read_text().splitlines()[0] == "filename,label"
    again = open_source(out_dir / published, labels=labels, npz_key=options.get("npz_key"))  # type: ignore[arg-type]
    pixels, names, got_labels = _everything(again)
    expected_pixels, expected_names, expected_labels = _everything(source)
    assert names == expected_names
    assert got_labels == (expected_labels if with_labels else [None] * len(source))
    for got, expected in zip(pixels, expected_pixels, strict=True):
        np.testing.assert_array_equal(got, expected)
    assert again.describe()["shapes"] == source.describe()["shapes"]
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".published")]


def test_published_array_keeps_shape_key_and_compression(tmp_path: Path) -> None:
    path = _npz(tmp_path / "d.npz", True, x_train=_images(3, 2, 2), y_train=np.arange(3))
    source = open_source(path)

    _publish(source, tmp_path / "out", labels=True)

    with np.load(tmp_path / "out" / "d.npz") as published:
        assert sorted(published.files) == ["x_train", "y_train"]
        assert published["x_train"].shape == (3, 2, 2)
        assert published["y_train"].dtype == np.arange(3).dtype
    description = open_source(tmp_path / "out" / "d.npz").describe()
    assert _entry(description, "images")["compressed"] is True


def test_jpeg_inputs_are_published_as_png_with_the_decoded_pixels(tmp_path: Path) -> None:
    root = tmp_path / "photos"
    (root / "sub").mkdir(parents=True)
    Image.fromarray(_images(1, 8, 8, 3)[0]).save(root / "sub" / "x.JPG")
    Image.fromarray(_images(1, 8, 8, 1)[0, :, :, 0]).save(root / "y.jpeg")
    source = open_source(root)

    files = _publish(source, tmp_path / "out", labels=False)

    assert sorted(p.relative_to(tmp_path / "out").as_posix() for p in files) == [
        "sub/x.png",
        "y.png",
    ]
    again = open_source(tmp_path / "out")
    for got, expected in zip(_everything(again)[0], _everything(source)[0], strict=True):
        np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize(
    ("name", "published"),
    [
        ("a.png", "a.png"),
        ("A.PNG", "A.PNG"),
        ("d/b.jpg", "d/b.png"),
        ("c.JPEG", "c.png"),
        ("e.webp", "e.png"),
        ("f.TIFF", "f.png"),
        ("g.bmp", "g.png"),
        ("IMG_0001.HEIC", "IMG_0001.png"),
    ],
)
def test_published_names(name: str, published: str) -> None:
    assert published_name(name) == published


@pytest.mark.parametrize(
    "name", ["", "/abs.png", "../up.png", "d//e.png", "./a.png", "a.avif", "a.txt"]
)
def test_unsafe_or_non_image_names_are_refused(name: str) -> None:
    with pytest.raises(InputError):
        published_name(name)


# --------------------------------------------------------------------------- atomicity


def _npy_writer_setup(tmp_path: Path) -> tuple[ImageSource, Path]:
    return open_source(_npy(tmp_path / "x.npy", _images(4, 2, 2))), tmp_path / "out"


def _leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.startswith((".out", "out")))


def test_out_dir_must_not_exist_and_its_parent_must(tmp_path: Path) -> None:
    source, out_dir = _npy_writer_setup(tmp_path)
    out_dir.mkdir()

    with pytest.raises(InputError, match="already exists") as raised:
        open_writer(source.describe(), out_dir, count=4, labels=False)
    assert str(out_dir) in str(raised.value)
    with pytest.raises(NotFoundError, match="missing"):
        open_writer(source.describe(), tmp_path / "missing" / "out", count=4, labels=False)


def test_abort_removes_everything(tmp_path: Path) -> None:
    source, out_dir = _npy_writer_setup(tmp_path)
    writer = open_writer(source.describe(), out_dir, count=4, labels=False)
    writer.add(next(source.batches(2)))
    assert _leftovers(tmp_path)  # the staging folder

    writer.abort()
    writer.abort()  # idempotent

    assert _leftovers(tmp_path) == []
    with pytest.raises(StateError):
        writer.add(next(source.batches(2)))


def test_an_exception_inside_the_with_block_leaves_nothing(tmp_path: Path) -> None:
    source, out_dir = _npy_writer_setup(tmp_path)

    with (
        pytest.raises(RuntimeError, match="interrupted"),
        open_writer(source.describe(), out_dir, count=4, labels=False) as writer,
    ):
        writer.add(next(source.batches(2)))
        raise RuntimeError("interrupted")

    assert _leftovers(tmp_path) == []


def test_close_publishes_only_when_complete(tmp_path: Path) -> None:
    source, out_dir = _npy_writer_setup(tmp_path)
    batches = list(source.batches(2))
    writer = open_writer(source.describe(), out_dir, count=4, labels=False)
    writer.add(batches[0])

    with pytest.raises(StateError, match="2 of 4"):
        writer.close()
    assert not out_dir.exists()
    writer.add(batches[1])
    assert writer.close() == [out_dir / "x.npy"]
    writer.abort()  # after close: does nothing
    assert (out_dir / "x.npy").is_file()
    assert _leftovers(tmp_path) == ["out"]


def test_out_of_order_and_excess_batches_are_state_errors(tmp_path: Path) -> None:
    source, out_dir = _npy_writer_setup(tmp_path)
    first, second = source.batches(2)

    with open_writer(source.describe(), out_dir, count=4, labels=False) as writer:
        with pytest.raises(StateError, match="starts at image 2, expected 0"):
            writer.add(second)
        writer.add(first)
        writer.add(second)
        with pytest.raises(StateError, match="exceed"):
            writer.add(ImageBatch(4, _images(1, 2, 2, 1), ["x.npy#4"], [None]))
    assert _leftovers(tmp_path) == []


def _two_names(folder: Path) -> ImageSource:
    _save_png(folder / "in" / "a.png", _images(1, 2, 2, 3)[0])
    _save_png(folder / "in" / "b.png", _images(1, 2, 2, 3)[0])
    return open_source(folder / "in")


def _batch(start: int, pixels: Pixels, names: list[str], labels: list[int | None]) -> ImageBatch:
    return ImageBatch(start, pixels, names, labels)


BAD_BATCHES: dict[str, tuple[Callable[[Path], ImageSource], bool, ImageBatch, str]] = {
    "missing-labels": (
        lambda d: open_source(
            _npy(d / "x.npy", _images(2, 2, 2)), labels=_labels_csv(d / "l", [1, 2])
        ),
        True,
        _batch(0, _images(1, 2, 2, 1), ["x.npy#0"], [None]),
        "without labels",
    ),
    "npy-wrong-shape": (
        lambda d: open_source(_npy(d / "x.npy", _images(2, 2, 2))),
        False,
        _batch(0, _images(1, 3, 2, 1), ["x.npy#0"], [None]),
        "shape",
    ),
    "npy-rgb-into-gray": (
        lambda d: open_source(_npy(d / "x.npy", _images(2, 2, 2))),
        False,
        _batch(0, _images(1, 2, 2, 3), ["x.npy#0"], [None]),
        "shape",
    ),
    "idx-label-above-255": (
        lambda d: open_source(_write_idx(d / "q-images-idx3-ubyte", _images(2, 2, 2), [1, 2])),
        True,
        _batch(0, _images(1, 2, 2, 1), ["#0"], [256]),
        "256",
    ),
    "npz-label-does-not-fit": (
        lambda d: open_source(
            _npz(d / "d.npz", False, x=_images(2, 2, 2), y=np.arange(2, dtype=np.uint8))
        ),
        True,
        _batch(0, _images(2, 2, 2, 1), ["a", "b"], [1, 999]),
        "dtype",
    ),
    "name-collision": (
        _two_names,
        False,
        _batch(0, _images(2, 2, 2, 3), ["a.jpg", "a.png"], [None, None]),
        "'a.png'",
    ),
}


@pytest.mark.parametrize("case", BAD_BATCHES)
def test_batches_that_do_not_fit_are_input_errors(tmp_path: Path, case: str) -> None:
    build, labels, batch, problem = BAD_BATCHES[case]
    source = build(tmp_path)
    out_dir = tmp_path / "out"

    with open_writer(source.describe(), out_dir, count=2, labels=labels) as writer:
        with pytest.raises(InputError, match=problem):
            writer.add(batch)
        with pytest.raises(StateError):
            writer.close()
    assert _leftovers(tmp_path) == []


@pytest.mark.parametrize(
    "description",
    [{}, {"format": "tiff"}, {"format": "npy"}, {"format": "npy", "images": {"file": "../x.npy"}}],
)
def test_bad_descriptions_are_input_errors(tmp_path: Path, description: dict[str, object]) -> None:
    with pytest.raises(InputError):
        open_writer(description, tmp_path / "out", count=1, labels=False)  # type: ignore[arg-type]
    assert _leftovers(tmp_path) == []


# --------------------------------------------------------------------------- contact sheet


def test_contact_sheet_has_the_expected_size(tmp_path: Path) -> None:
    raw = _images(4, 8, 6, 3)
    published = _images(4, 8, 6, 3, seed=1)
    gray = _images(4, 5, 6, 1)
    path = tmp_path / "sheet.png"

    write_contact_sheet(
        path,
        [
            ("raw", raw),
            ("published", published),
            ("gray", gray),
            ("difference x8", amplified_difference(raw, published)),
        ],
        scale=3,
    )

    with Image.open(path) as sheet:
        assert sheet.mode == "RGB"
        assert sheet.size == (
            GAP + 4 * (6 * 3 + GAP),
            GAP + 3 * (TITLE_HEIGHT + 8 * 3 + GAP) + (TITLE_HEIGHT + 5 * 3 + GAP),
        )
        first_cell = np.asarray(sheet)[GAP + TITLE_HEIGHT :][: 8 * 3, GAP : GAP + 6 * 3]
    np.testing.assert_array_equal(first_cell[::3, ::3], raw[0])
    assert [p.name for p in tmp_path.iterdir()] == ["sheet.png"]


def test_a_fitted_sheet_of_one_size_is_the_plain_sheet(tmp_path: Path) -> None:
    raw, gray = _images(3, 8, 6, 3), _images(3, 8, 6, 1, seed=1)
    write_contact_sheet(tmp_path / "plain.png", [("raw", raw), ("gray", gray)])
    cell = write_fitted_contact_sheet(tmp_path / "fitted.png", [("raw", [*raw]), ("gray", [*gray])])
    assert cell == (8, 6)
    with Image.open(tmp_path / "plain.png") as plain, Image.open(tmp_path / "fitted.png") as fitted:
        np.testing.assert_array_equal(np.asarray(plain), np.asarray(fitted))


def test_a_fitted_sheet_puts_every_size_in_one_cell(tmp_path: Path) -> None:
    wide = _images(1, 2, 4, 3)[0]
    tall = _images(1, 8, 2, 1, seed=1)[0]
    path = tmp_path / "sheet.png"
    # The cell is 8x4 (the tallest, the widest); both fit it as they are, centred; the
    # row mixes grey and colour, so it is shown in colour; enlarged 3 times.
    assert write_fitted_contact_sheet(path, [("mixed", [wide, tall])]) == (8, 4)
    with Image.open(path) as sheet:
        pixels = np.asarray(sheet)
    top = GAP + TITLE_HEIGHT
    first = pixels[top::3, GAP::3][:8, :4]
    np.testing.assert_array_equal(first[3:5], wide)
    assert (first[:3] == 255).all() and (first[5:] == 255).all()
    second = pixels[top::3, GAP + 4 * 3 + GAP :: 3][:8, :4]
    np.testing.assert_array_equal(second[:, 1:3], np.repeat(tall, 3, axis=2))
    assert (second[:, 0] == 255).all() and (second[:, 3] == 255).all()
    # A cell larger than cell_side is shrunk by nearest neighbour, aspect kept.
    big = _images(1, 40, 20, 3, seed=2)[0]
    assert write_fitted_contact_sheet(path, [("big", [big])], cell_side=10) == (10, 5)
    with Image.open(path) as sheet:
        assert sheet.size[1] == GAP + TITLE_HEIGHT + 10 + GAP  # scale 1
        shown = np.asarray(sheet)[GAP + TITLE_HEIGHT :][:10, GAP : GAP + 5]
    np.testing.assert_array_equal(shown, big[2::4, 2::4])


@pytest.mark.parametrize(
    ("rows", "cell_side", "error"),
    [
        ([], 256, InputError),
        ([("a", [])], 256, InputError),
        ([("a", [_images(1, 4, 4, 3)])], 256, InputError),  # (1, H, W, C): not one image
        ([("a", [_images(1, 4, 4, 3)[0]]), ("b", [])], 256, InputError),
        ([("a", [_images(1, 4, 4, 3)[0]])], 0, ParameterError),
    ],
)
def test_a_fitted_sheet_refuses_bad_rows(
    tmp_path: Path, rows: list[tuple[str, list[Pixels]]], cell_side: int, error: type[Exception]
) -> None:
    with pytest.raises(error):
        write_fitted_contact_sheet(tmp_path / "sheet.png", rows, cell_side=cell_side)
    assert list(tmp_path.iterdir()) == []


def test_amplified_difference_is_mid_grey_where_equal() -> None:
    first = np.array([[[100]], [[100]]], dtype=np.uint8)
    second = np.array([[[100]], [[90]]], dtype=np.uint8)

    np.testing.assert_array_equal(amplified_difference(first, second, gain=8).ravel(), [128, 208])


@pytest.mark.parametrize(
    ("rows", "scale", "error"),
    [
        ([], 3, InputError),
        ([("a", _images(2, 4, 4, 3)), ("b", _images(3, 4, 4, 3))], 3, InputError),
        ([("a", _images(2, 4, 4, 4))], 3, InputError),
        ([("a", _images(2, 4, 4, 3).astype(np.float32))], 3, InputError),
        ([("a", _images(2, 4, 4, 3))], 0, ParameterError),
        ([("a", _images(2, 4, 4, 3))], 17, ParameterError),
    ],
)
def test_contact_sheet_refuses_bad_rows(
    tmp_path: Path, rows: list[tuple[str, Pixels]], scale: int, error: type[Exception]
) -> None:
    with pytest.raises(error):
        write_contact_sheet(tmp_path / "sheet.png", rows, scale=scale)
    assert list(tmp_path.iterdir()) == []
