"""Vault format 5 (issue #39 item 4): a photo's mark stored as the field it was carried from.

The guesses are exact for marks applied as the marker applies them; the prediction is
the marker's own upsampling to within a float sum's rounding; a chunk with fields reads
back exactly whatever the field (a wrong one costs bytes, never pixels) and is a
fraction of the size without; a hostile file or field is refused by name; and ``owner
mark`` writes format 5 with a field per photo marked at a working resolution, to the
same root and openings as format 4 in fewer bytes.
"""

from __future__ import annotations

import io
import struct
import zlib
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from PIL import Image

from tests.support.photos import photo
from twinaudit.owner.images.sources import open_source
from twinaudit.owner.mark import mark
from twinaudit.owner.marking import MarkingConfig
from twinaudit.owner.marking.full_size import rounded_bands
from twinaudit.owner.vault import Vault, VaultWriter
from twinaudit.owner.vault.chunks import read_stored_chunk
from twinaudit.owner.vault.field_items import decode_field_item, encode_field_item
from twinaudit.owner.vault.journal import read_journal
from twinaudit.owner.vault.jpeg_pairs import (
    FIELD_MAGIC,
    JPEG_CODING,
    MIDPOINT_CODING,
    JpegPairsFile,
    encode_pairs,
)
from twinaudit.owner.vault.mark_fields import FieldPrediction, clipped_marks, clipped_midpoints
from twinaudit.owner.vault.migration import migrate_vault, originals_in
from twinaudit.owner.vault.pair_codec import ChunkFormatError
from twinaudit.protocol.errors import ParameterError, VaultIntegrityError

SECRET = bytes(range(32))
EPSILON = 10
TINY = "tests.support.extractors:tiny_extractor"


def _clip_versions(photo_pixels: np.ndarray, marks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    x = photo_pixels.astype(np.int16)
    return (
        np.clip(x + marks, 0, 255).astype(np.uint8),
        np.clip(x - marks, 0, 255).astype(np.uint8),
    )


def _torch_marks(field: np.ndarray, height: int, width: int) -> np.ndarray:
    """The marker's own carrying back of ``field``: int16 (H, W, c)."""
    out = np.empty((height, width, field.shape[0]), dtype=np.int16)
    for rows, band in rounded_bands(torch.from_numpy(field), height, width):
        out[rows] = band.numpy()
    return out


def _field(shape: tuple[int, int, int], seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return rng.uniform(-EPSILON, EPSILON, size=shape).astype(np.float32)


def predicted_midpoint(photo: np.ndarray, marks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The midpoint and parity of clamp(x ± P) everywhere: x and 0, but where clipped."""
    midpoint = np.array(photo, dtype=np.uint8, order="C")
    parity = np.zeros(midpoint.shape, dtype=np.uint8)
    near, values, parities = clipped_midpoints(midpoint, marks)
    if near is not None:
        midpoint.reshape(-1)[near] = values
        parity.reshape(-1)[near] = parities
    return midpoint, parity


def guessed_mark(midpoint: np.ndarray, parity: np.ndarray, marks: np.ndarray) -> np.ndarray:
    """The half-difference P gives everywhere: P modulo 256, but where clipped."""
    midpoint = np.ascontiguousarray(midpoint)
    guess = np.empty(midpoint.shape, dtype=np.uint8)
    np.copyto(guess, np.broadcast_to(marks, midpoint.shape), casting="unsafe")
    near, values = clipped_marks(midpoint, parity, marks)
    if near is not None:
        guess.reshape(-1)[near] = values
    return guess


def _jpeg(pixels: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    Image.fromarray(pixels[..., 0] if pixels.shape[2] == 1 else pixels).save(
        buffer, "JPEG", quality=90
    )
    return buffer.getvalue()


def _decoded(data: bytes, channels: int) -> np.ndarray:
    with Image.open(io.BytesIO(data)) as image:
        pixels = np.asarray(image, dtype=np.uint8)
    return pixels.reshape(*pixels.shape[:2], channels)


# --- The guesses and the prediction ----------------------------------------------------------


@pytest.mark.parametrize(("channels", "mark_channels"), [(1, 1), (3, 1), (3, 3)])
def test_the_guesses_are_exact_for_marks_applied_as_the_marker_applies_them(
    channels, mark_channels
):
    rng = np.random.default_rng(channels + mark_channels)
    x = rng.integers(0, 256, size=(64, 80, channels), dtype=np.uint8)
    x[:8] = 255  # clipped at both ends, where the guesses are not the mark itself
    x[8:16] = 0
    x[16:24] = rng.integers(250, 256, size=x[16:24].shape, dtype=np.uint8)
    marks = rng.integers(-127, 128, size=(64, 80, mark_channels)).astype(np.int16)
    version0, version1 = _clip_versions(x, marks)
    total = version0.astype(np.int16) + version1
    midpoint, parity = (total >> 1).astype(np.uint8), (total & 1).astype(np.uint8)
    assert np.array_equal(guessed_mark(midpoint, parity, marks), version0 - midpoint)
    guess, guessed_parity = predicted_midpoint(x, marks)
    assert np.array_equal(guess, midpoint) and np.array_equal(guessed_parity, parity)


@pytest.mark.parametrize(
    ("field_shape", "size"),
    [((3, 43, 64), (427, 640)), ((1, 17, 5), (300, 451)), ((3, 7, 9), (7, 9))],
)
def test_the_prediction_is_the_markers_upsampling(field_shape, size):
    """Equal but where the marker's single-precision sum lands within rounding of a half."""
    field = _field(field_shape, 3)
    ours = FieldPrediction(field, *size).band(slice(0, size[0]))
    theirs = _torch_marks(field, *size)
    differ = ours != theirs
    assert differ.mean() < 1e-4
    if differ.any():  # only a value a float's rounding away from a half rounds otherwise
        assert np.abs(ours.astype(int) - theirs)[differ].max() == 1


# --- Chunk files with fields -----------------------------------------------------------------


def _batch(count: int, shape: tuple[int, int, int], neutral: bool):
    """Photos (as their JPEGs decode), their fields and versions; one photo clips."""
    height, width, channels = shape
    photos, originals, fields, pairs = [], [], [], []
    for k in range(count):
        pixels = photo(height, width, k)[..., :channels]
        if k == 0:
            pixels[: height // 3] = 254  # a blown sky: most of its levels clip
        data = _jpeg(pixels)
        decoded = _decoded(data, channels)
        field = _field((1 if neutral else channels, height // 8, width // 8), k)
        pairs.append(_clip_versions(decoded, _torch_marks(field, height, width)))
        photos.append(decoded)
        originals.append(data)
        fields.append(field)
    versions0 = np.stack([pair[0] for pair in pairs])
    versions1 = np.stack([pair[1] for pair in pairs])
    return versions0, versions1, originals, np.stack(photos), fields


def _read(pieces: list[bytes], count: int, shape: tuple[int, int, int]) -> JpegPairsFile:
    return JpegPairsFile(b"".join(pieces), count, shape, heif=True, fields=True)


@pytest.mark.parametrize(("shape", "neutral"), [((96, 120, 3), True), ((80, 64, 3), False)])
def test_a_chunk_with_fields_reads_back_exactly_in_a_fraction_of_the_bytes(shape, neutral):
    v0, v1, originals, photos, fields = _batch(4, shape, neutral)
    with_fields = encode_pairs(v0, v1, originals, photos, heif=True, fields=fields)
    assert with_fields[0].startswith(FIELD_MAGIC)
    without = encode_pairs(v0, v1, originals, photos, heif=True, fields=[None] * 4)
    assert len(b"".join(with_fields)) < 0.85 * len(b"".join(without))
    head = bytearray(with_fields[0])
    for k in range(4):  # the marker's own field misses nothing: three empty planes
        first, mark_bytes, parity, source, field = struct.unpack_from(
            ">5Q", head, _entry(head, k) + 39
        )
        assert (first, mark_bytes, parity) == (0, 0, 0) and source == len(originals[k]) and field
    for pieces in (with_fields, without):
        chunk = _read(pieces, 4, shape)
        assert chunk.codings() == [JPEG_CODING] * 4
        for k in range(4):
            pixels = chunk.item(k)
            assert np.array_equal(pixels[0], v0[k]) and np.array_equal(pixels[1], v1[k])
    # Without a source file the midpoint is stored, and the field still predicts the mark.
    alone = encode_pairs(v0, v1, [None] * 4, None, heif=True, fields=fields)
    chunk = _read(alone, 4, shape)
    assert chunk.codings() == [MIDPOINT_CODING] * 4
    assert all(np.array_equal(chunk.item(k), np.stack([v0[k], v1[k]])) for k in range(4))


def test_a_wrong_field_costs_bytes_never_pixels():
    shape = (64, 72, 3)
    v0, v1, originals, photos, _ = _batch(3, shape, neutral=True)
    wrong = [_field((1, 8, 9), 99), None, _field((3, 64, 72), 7) * 20]
    pieces = encode_pairs(v0, v1, originals, photos, heif=True, fields=wrong)
    chunk = _read(pieces, 3, shape)
    for k in range(3):
        assert np.array_equal(chunk.item(k), np.stack([v0[k], v1[k]]))


def _entry(data: bytearray, item: int) -> int:
    """Return the offset of item ``item``'s entry in a format-5 chunk file."""
    decoder = struct.unpack_from(">H", data, 24)[0]
    return 26 + decoder + item * struct.calcsize(">B32s3H5Q")


def test_a_hostile_chunk_is_refused_by_name():
    shape = (48, 56, 3)
    v0, v1, originals, photos, fields = _batch(2, shape, neutral=True)
    data = bytearray(b"".join(encode_pairs(v0, v1, originals, photos, heif=True, fields=fields)))
    entry = _entry(data, 1)

    def refused(change, match):
        broken = bytearray(data)
        change(broken)
        with pytest.raises(ChunkFormatError, match=match):
            chunk = JpegPairsFile(bytes(broken), 2, shape, heif=True, fields=True)
            chunk.item(1)

    def field_shape(values):
        return lambda broken: struct.pack_into(">3H", broken, entry + 33, *values)

    refused(field_shape((2, 6, 7)), "2 channels, its item 3")
    refused(field_shape((1, 49, 7)), "does not fit its item's 48x56")
    refused(field_shape((0, 0, 0)), "a field stream and no field")
    refused(field_shape((1, 48, 56)), "not inflate to its field's size")
    with pytest.raises(ChunkFormatError, match="not a format-3 chunk"):
        JpegPairsFile(bytes(data), 2, shape, heif=True, fields=False)  # read as format 4's
    with pytest.raises(ChunkFormatError, match="not a format-5 chunk"):
        JpegPairsFile(bytes(data[:8]).replace(b"5", b"3") + bytes(data[8:]), 2, shape, fields=True)
    # A field stream holding a value that is not finite, then one past the bound.
    for value, match in ((np.nan, "not finite"), (300.0, "exceed")):
        field = np.full((1, 6, 7), value, dtype="<f4")
        stream = zlib.compress(field.tobytes())
        one = encode_pairs(v0[:1], v1[:1], [None], None, heif=True, fields=[fields[0]])
        head = bytearray(one[0])
        struct.pack_into(">Q", head, _entry(head, 0) + 39 + 4 * 8, len(stream))
        with pytest.raises(ChunkFormatError, match=match):
            JpegPairsFile(
                bytes(head) + b"".join(one[1:-1]) + stream, 1, shape, heif=True, fields=True
            ).item(0)


# --- Vaults ----------------------------------------------------------------------------------


def _writer(path: Path, shape: tuple[int, int, int], format_version: int = 5) -> VaultWriter:
    return VaultWriter.create_or_resume(
        path,
        item_kind="image",
        source={"kind": "test"},
        config={"marker": "pgd"},
        n_items=2,
        secret=SECRET,
        format_version=format_version,
    )


@pytest.mark.parametrize(
    ("fields", "match"),
    [
        ([np.zeros((1, 4, 4), dtype=np.float64), None], "float32"),
        ([np.zeros((2, 4, 4), dtype=np.float32), None], "2 channels"),
        ([np.zeros((1, 40, 4), dtype=np.float32), None], "does not fit"),
        ([np.full((1, 4, 4), np.inf, dtype=np.float32), None], "finite"),
        ([None], "1 mark fields for a batch of 2"),
    ],
)
def test_the_writer_refuses_a_bad_field_and_keeps_nothing(tmp_path, fields, match):
    v0, v1, _, _, _ = _batch(2, (32, 40, 3), neutral=True)
    with _writer(tmp_path / "v", (32, 40, 3)) as writer:
        with pytest.raises(ParameterError, match=match):
            writer.append(v0, v1, [None, None], ["a", "b"], fields=fields)
        assert writer.completed == 0
    assert not any((tmp_path / "v" / "chunks").iterdir())


def test_a_format_4_vault_refuses_a_format_5_chunk(tmp_path):
    v0, v1, originals, _photos, fields = _batch(2, (32, 40, 3), neutral=True)
    with _writer(tmp_path / "v", (32, 40, 3)) as writer:
        writer.append(v0, v1, [None, None], ["a", "b"], originals=originals, fields=fields)
        writer.finish()
    (record,) = read_journal(tmp_path / "v").chunks
    read = {"count": 2, "shape": (32, 40, 3), "start": 0}
    chunk = read_stored_chunk(tmp_path / "v", record.file, record.sha256, format_version=5, **read)
    assert np.array_equal(chunk.item(1), np.stack([v0[1], v1[1]]))
    with pytest.raises(VaultIntegrityError, match="format-5 chunk in a vault of format 4"):
        read_stored_chunk(tmp_path / "v", record.file, record.sha256, format_version=4, **read)
    # A format-4 writer ignores the fields: its chunk is format 3's, which a format-5
    # vault, whose writer never makes one, refuses.
    with _writer(tmp_path / "v4", (32, 40, 3), format_version=4) as writer:
        writer.append(v0, v1, [None, None], ["a", "b"], originals=originals, fields=fields)
        writer.finish()
    (record,) = read_journal(tmp_path / "v4").chunks
    assert (tmp_path / "v4" / record.file).read_bytes().startswith(b"TWPAIRS3")
    read_stored_chunk(tmp_path / "v4", record.file, record.sha256, format_version=4, **read)
    with pytest.raises(VaultIntegrityError, match="not a format-5 chunk in a vault of format 5"):
        read_stored_chunk(tmp_path / "v4", record.file, record.sha256, format_version=5, **read)


def _chunk_bytes(path: Path) -> int:
    return sum(chunk.stat().st_size for chunk in (path / "chunks").iterdir())


def test_owner_mark_stores_each_photos_field_to_the_same_root_in_fewer_bytes(tmp_path):
    """Format 5 against format 4 from the same photos and secret: same openings, smaller."""
    folder = tmp_path / "photos"
    folder.mkdir()
    for k, (height, width) in enumerate(((240, 320), (192, 256), (200, 180))):
        (folder / f"p{k}.jpg").write_bytes(_jpeg(photo(height, width, k)))
    (folder / "small.jpg").write_bytes(_jpeg(photo(24, 20, 9)))  # marked at its own size
    config = MarkingConfig(
        extractor=TINY, input_size=16, work_scale=2, steps=2, step_size=4.0, batch_size=2
    )
    result = mark(open_source(folder), tmp_path / "v", config, secret=SECRET, show_progress=False)
    vault = Vault.open(result.vault.path)
    assert vault.format_version == 5
    openings = [vault.opening(index) for index in range(vault.n_pairs)]
    fielded = 0
    for record in read_journal(vault.path).chunks:
        data = (vault.path / record.file).read_bytes()
        fielded += sum(
            struct.unpack_from(">3H", data, _entry(bytearray(data), k) + 33) != (0, 0, 0)
            for k in range(record.count)
        )
    assert fielded == 3  # every photo but the small one, marked at its own size
    chunks = _chunk_bytes(vault.path)
    migrate_vault(vault.path, to_version=4, originals=originals_in(folder))
    assert _chunk_bytes(vault.path) > 1.3 * chunks
    moved = Vault.open(vault.path)
    assert moved.format_version == 4 and moved.root == vault.root
    assert [moved.opening(index) for index in range(moved.n_pairs)] == openings


def test_the_guesses_hold_at_every_level_and_mark():
    """Every photo level under every mark of ±127, one mark at a time: the rule's edges."""
    x = np.arange(256, dtype=np.uint8)[:, None, None]
    for value in range(-127, 128):
        marks = np.full(x.shape, value, dtype=np.int16)
        version0, version1 = _clip_versions(x, marks)
        total = version0.astype(np.int16) + version1
        midpoint, parity = (total >> 1).astype(np.uint8), (total & 1).astype(np.uint8)
        assert np.array_equal(guessed_mark(midpoint, parity, marks), version0 - midpoint), value
        guess, guessed_parity = predicted_midpoint(x, marks)
        assert np.array_equal(guess, midpoint) and np.array_equal(guessed_parity, parity), value


@pytest.mark.parametrize("seed", range(4))
def test_any_versions_photo_and_field_read_back_exactly(seed):
    """Versions that are no mark of anything, a photo and a field of noise: still exact."""
    rng = np.random.default_rng(seed)
    height, width, channels = int(rng.integers(1, 300)), int(rng.integers(1, 40)), (1, 3)[seed % 2]
    shape = (height, width, channels)
    version0 = rng.integers(0, 256, size=shape, dtype=np.uint8)
    version1 = rng.integers(0, 256, size=shape, dtype=np.uint8)
    photo_pixels = rng.integers(0, 256, size=shape, dtype=np.uint8)
    field_shape = (int(rng.choice([1, channels])), int(rng.integers(1, height + 1)), width)
    field = rng.uniform(-255, 255, size=field_shape).astype(np.float32)
    for photo_given in (photo_pixels, None):
        planes = encode_field_item(version0, version1, field, photo_given)
        out0, out1 = np.empty_like(version0), np.empty_like(version1)
        streams = tuple(memoryview(s) for s in (planes.first, planes.mark, planes.parity))
        digest = decode_field_item(streams, field, photo_given, out0, out1)
        assert np.array_equal(out0, version0) and np.array_equal(out1, version1)
        assert digest == planes.sha256


_CHUNK_SHAPE = (40, 48, 3)
_CHUNK = _batch(2, _CHUNK_SHAPE, neutral=True)
_CHUNK_BYTES = b"".join(
    encode_pairs(_CHUNK[0], _CHUNK[1], _CHUNK[2], _CHUNK[3], heif=True, fields=_CHUNK[4])
)


@settings(max_examples=80, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, len(_CHUNK_BYTES) - 1), st.integers(1, 255)),
        min_size=1,
        max_size=4,
    ),
    st.integers(0, len(_CHUNK_BYTES)),
)
def test_a_damaged_chunk_reads_exactly_or_is_refused_never_wrong(flips, keep):
    """Any flipped bytes or cut end: each item reads back exact or raises ChunkFormatError."""
    data = bytearray(_CHUNK_BYTES)
    for position, mask in flips:
        data[position] ^= mask
    del data[keep:]
    try:
        chunk = JpegPairsFile(bytes(data), 2, _CHUNK_SHAPE, heif=True, fields=True)
    except ChunkFormatError:
        return
    for k in range(2):
        try:
            pixels = chunk.item(k)
        except ChunkFormatError:
            continue
        assert np.array_equal(pixels, np.stack([_CHUNK[0][k], _CHUNK[1][k]]))


def test_a_plane_that_misses_only_in_a_later_band_reads_back_exactly():
    """The bands before the first miss are zeros fed to zlib late: the same plane."""
    height, width = 600, 24  # three bands of 256 rows
    field = _field((1, 75, 3), 5)
    x = np.full((height, width, 3), 128, dtype=np.uint8)
    version0, version1 = _clip_versions(x, _torch_marks(field, height, width))
    version0[590, 3, 1] += 1  # a mark one level wider than the field's, in the last band
    version1[590, 3, 1] -= 1
    planes = encode_field_item(version0, version1, field, x)
    assert planes.mark and not planes.first and not planes.parity
    out0, out1 = np.empty_like(version0), np.empty_like(version1)
    streams = (memoryview(planes.first), memoryview(planes.mark), memoryview(planes.parity))
    decode_field_item(streams, field, x, out0, out1)
    assert np.array_equal(out0, version0) and np.array_equal(out1, version1)


def test_a_reader_whose_arithmetic_differs_is_refused_at_the_item(monkeypatch):
    """The item's SHA-256 covers its computed mark: another rounding is named, never read."""
    shape = (40, 48, 3)
    v0, v1, originals, photos, fields = _batch(2, shape, neutral=True)
    pieces = encode_pairs(v0, v1, [None, originals[1]], photos, heif=True, fields=fields)
    assert b"numpy " in pieces[0]  # the chunk names what computed its marks
    real = FieldPrediction.planes

    def rounded_up(self, rows):
        return real(self, rows) + 1  # a platform whose sums landed a level higher

    monkeypatch.setattr(FieldPrediction, "planes", rounded_up)
    chunk = _read(pieces, 2, shape)
    for k in range(2):  # the midpoint-coded item as the one kept as its JPEG
        with pytest.raises(ChunkFormatError, match="midpoint and mark recorded for it"):
            chunk.item(k)
