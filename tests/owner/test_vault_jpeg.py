"""Vault format 3: photos read from JPEGs kept as their JPEG plus a correction plane."""

from __future__ import annotations

import hashlib
import io
import os
import struct
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

import twinaudit.owner.vault.jpeg_pairs as jpeg_pairs
from tests.owner.test_vault_receipt import escrowed
from twinaudit.owner.images.sources import FolderSource, open_source
from twinaudit.owner.mark import mark
from twinaudit.owner.marking import MarkingConfig
from twinaudit.owner.vault import Vault, VaultWriter
from twinaudit.owner.vault.chunks import read_stored_chunk
from twinaudit.owner.vault.jpeg_pairs import (
    JPEG_CODING,
    MIDPOINT_CODING,
    JpegPairsFile,
    decode_jpeg,
    guess_midpoint,
)
from twinaudit.owner.vault.migration import migrate_vault, originals_in
from twinaudit.owner.vault.pair_codec import ChunkFormatError, encode_planes
from twinaudit.protocol.errors import ParameterError, VaultIntegrityError

SECRET = bytes(range(32))
CONFIG = {"marker": "pgd", "epsilon": 10}
EPSILON = 8


@pytest.fixture(autouse=True)
def _no_fsync(monkeypatch):
    monkeypatch.setattr(os, "fsync", lambda fd: None)


def photo(height, width, channels, seed, *, clipped=False):
    """A smooth photo-like image with noise; ``clipped``: large areas at 0 and 255."""
    rng = np.random.default_rng(seed)
    ys, xs = np.mgrid[0:height, 0:width]
    amplitude = 200 if clipped else 90
    field = 128 + amplitude * np.sin(ys / (9 + seed) + xs / 13)
    colours = np.stack([field, field[::-1], 255 - field], axis=-1)[..., :channels]
    return np.clip(colours + rng.normal(0, 6, colours.shape), 0, 255).astype(np.uint8)


def jpeg_of(pixels, *, orientation=None, quality=90):
    image = Image.fromarray(pixels[..., 0] if pixels.shape[2] == 1 else pixels)
    buffer = io.BytesIO()
    options = {"quality": quality}
    if orientation is not None:
        exif = Image.Exif()
        exif[0x0112] = orientation
        options["exif"] = exif.tobytes()
    image.save(buffer, "JPEG", **options)
    return buffer.getvalue()


def png_of(pixels):
    buffer = io.BytesIO()
    Image.fromarray(pixels[..., 0] if pixels.shape[2] == 1 else pixels).save(buffer, "PNG")
    return buffer.getvalue()


def versions(pixels, seed):
    """The two versions of a photo: ± a smooth mark of up to EPSILON, clipped to 0..255."""
    height, width, _ = pixels.shape
    ys, xs = np.mgrid[0:height, 0:width]
    mark = np.rint(EPSILON * np.sin(ys / (4 + seed)) * np.cos(xs / 7))[..., None]
    mark = np.broadcast_to(mark, pixels.shape).astype(np.int16)
    version0 = np.clip(pixels.astype(np.int16) + mark, 0, 255).astype(np.uint8)
    version1 = np.clip(pixels.astype(np.int16) - mark, 0, 255).astype(np.uint8)
    return version0, version1


# One folder: colour, colour with clipped levels, with an EXIF rotation, and a PNG (each
# shape apart, so a batch never mixes them); then two grey photos of one shape.
FILES = {
    "a_colour.jpg": ((96, 80, 3), {}),
    "b_clipped.jpg": ((64, 72, 3), {"clipped": True}),
    "c_rotated.jpg": ((48, 88, 3), {"orientation": 6}),
    "d_lossless.png": ((40, 40, 3), {}),
    "e_grey.jpg": ((70, 50, 1), {}),
    "f_grey.jpg": ((70, 50, 1), {"clipped": True}),
}


@pytest.fixture
def folder(tmp_path) -> Path:
    root = tmp_path / "photos"
    root.mkdir()
    for seed, (name, (shape, options)) in enumerate(FILES.items()):
        pixels = photo(*shape, seed, clipped=options.get("clipped", False))
        data = (
            png_of(pixels)
            if name.endswith(".png")
            else jpeg_of(pixels, orientation=options.get("orientation"))
        )
        (root / name).write_bytes(data)
    return root


def mark_folder(
    folder: Path, path: Path, format_version: int = 3, *, stop: int | None = None, photos_of=None
):
    """Mark every photo of ``folder`` into a vault as ``owner mark`` does (items ± a mark).

    Returns the finished vault (or None when stopped after ``stop`` batches) and the
    versions written, in order. ``photos_of(batch)``, when given, is what the writer is
    handed as the batch's decoded photos.
    """
    source = FolderSource(folder)
    written = []
    with VaultWriter.create_or_resume(
        path,
        item_kind="image",
        source=source.describe(),
        config=CONFIG,
        n_items=len(source),
        secret=SECRET,
        format_version=format_version,
    ) as writer:
        for ordinal, batch in enumerate(source.batches(4, start=writer.completed)):
            if stop is not None and ordinal == stop:
                return None, written
            pairs = [versions(pixels, batch.start + k) for k, pixels in enumerate(batch.pixels)]
            version0 = np.stack([pair[0] for pair in pairs])
            version1 = np.stack([pair[1] for pair in pairs])
            written.extend(pairs)
            writer.append(
                version0,
                version1,
                batch.labels,
                batch.names,
                originals=batch.originals,
                photos=None if photos_of is None else photos_of(batch),
            )
        return writer.finish(), written


def codings(vault: Vault) -> dict[str, int]:
    found = {}
    for record in vault._records:
        chunk = read_stored_chunk(
            vault.path,
            record.file,
            record.sha256,
            record.count,
            record.shape,
            format_version=vault.format_version,
        )
        found.update(zip(record.names, chunk.codings(), strict=True))
    return found


def test_jpeg_sources_round_trip_bit_exact_with_the_commitments_of_format_2(folder, tmp_path):
    new, written = mark_folder(folder, tmp_path / "v3")
    old, _ = mark_folder(folder, tmp_path / "v2", format_version=2)
    assert (new.format_version, old.format_version) == (3, 2)
    assert new.root == old.root
    assert new.packed_commitments() == old.packed_commitments()
    reopened = Vault.open(tmp_path / "v3")  # every commitment recomputed from the JPEGs
    for index in range(reopened.n_pairs):
        first, second = reopened.pair(index)
        assert np.array_equal(first.pixels, written[index][0])
        assert np.array_equal(second.pixels, written[index][1])
        assert reopened.opening(index) == old.opening(index)
    assert codings(reopened) == {
        "a_colour.jpg": JPEG_CODING,
        "b_clipped.jpg": JPEG_CODING,
        "c_rotated.jpg": MIDPOINT_CODING,  # turned upright: not its file's pixels
        "d_lossless.png": MIDPOINT_CODING,  # a PNG source falls back
        "e_grey.jpg": JPEG_CODING,
        "f_grey.jpg": JPEG_CODING,
    }
    sizes = {
        version: sum(path.stat().st_size for path in (tmp_path / version / "chunks").iterdir())
        for version in ("v2", "v3")
    }
    assert sizes["v3"] < 0.8 * sizes["v2"], sizes
    # Published files alike.
    assert [chunk[0] for chunk in reopened.chunks()] == [chunk[0] for chunk in old.chunks()]


def test_the_same_inputs_give_the_same_format_3_files(folder, tmp_path):
    mark_folder(folder, tmp_path / "a")
    mark_folder(folder, tmp_path / "b")
    for name in ("journal", "manifest.msgpack", "chunks/000000.pairs", "chunks/000003.pairs"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()


def test_a_resumed_format_3_run_continues_in_format_3(folder, tmp_path):
    _, _ = mark_folder(folder, tmp_path / "v", stop=2)
    # Resumed without saying which format: the run's own.
    source = FolderSource(folder)
    with VaultWriter.create_or_resume(
        tmp_path / "v",
        item_kind="image",
        source=source.describe(),
        config=CONFIG,
        n_items=len(source),
    ) as writer:
        assert writer.completed == 2
    resumed, _ = mark_folder(folder, tmp_path / "v")
    whole, _ = mark_folder(folder, tmp_path / "whole")
    assert resumed.format_version == 3 and resumed.root == whole.root
    for name in sorted(os.listdir(tmp_path / "whole" / "chunks")):
        data = (tmp_path / "v" / "chunks" / name).read_bytes()
        assert data == (tmp_path / "whole" / "chunks" / name).read_bytes()
        assert data.startswith(jpeg_pairs.MAGIC)


# --- A decoder that gives other pixels, damaged and hostile chunks -----------------------------


def other_decoder(real):
    """A JPEG decoder that differs from this one in one value of each image."""

    def decode(data, shape, *coding):
        pixels = real(data, shape, *coding)
        pixels[0, 0, 0] ^= 1
        return pixels

    return decode


def test_a_decoder_that_gives_other_pixels_is_named_at_the_item(folder, tmp_path, monkeypatch):
    monkeypatch.setattr(
        jpeg_pairs, "decoder_name", lambda heif=False: "Pillow 9.9.9, libjpeg-turbo 1.0"
    )
    mark_folder(folder, tmp_path / "v")
    monkeypatch.undo()
    monkeypatch.setattr(os, "fsync", lambda fd: None)
    monkeypatch.setattr(jpeg_pairs, "decode_jpeg", other_decoder(decode_jpeg))
    with pytest.raises(VaultIntegrityError) as caught:
        Vault.open(tmp_path / "v")
    problem = caught.value.problem
    assert caught.value.file == "chunks/000000.pairs"
    assert "pair 0 (item 0 of the chunk) was stored as its JPEG" in problem
    assert "written with Pillow 9.9.9, libjpeg-turbo 1.0" in problem
    assert f"this is {jpeg_pairs.decoder_name()}" in problem
    assert "pip install pillow==9.9.9" in problem and "--to 2" in problem


def stream_spans(data: bytes) -> list[list[tuple[int, int]]]:
    """Return, per item of a format-3 file, the (start, stop) of its four streams."""
    count = struct.unpack_from(">I", data, 8)[0]
    (decoder,) = struct.unpack_from(">H", data, 24)
    entries = 26 + decoder
    position = entries + 65 * count
    spans = []
    for item in range(count):
        lengths = struct.unpack_from(">4Q", data, entries + 65 * item + 33)
        item_spans = []
        for length in lengths:
            item_spans.append((position, position + length))
            position += length
        spans.append(item_spans)
    return spans


def damaged_read(vault_path: Path, name: str, damage) -> None:
    """Damage a chunk, then read its every item under its new SHA-256 (a consistent edit)."""
    vault = Vault.open(vault_path)
    record = next(record for record in vault._records if record.file == name)
    path = vault_path / name
    data = bytearray(path.read_bytes())
    damage(data, stream_spans(bytes(data)))
    path.write_bytes(bytes(data))
    chunk = read_stored_chunk(
        vault_path,
        name,
        hashlib.sha256(data).digest(),
        record.count,
        record.shape,
        format_version=3,
        start=record.start,
    )
    for offset in range(record.count):
        chunk.item(offset)


@pytest.mark.parametrize(
    ("what", "stream", "byte"),
    [("correction", 0, -3), ("JPEG entropy data", 3, -40), ("mark", 1, -3)],
)
def test_a_damaged_stream_of_a_jpeg_item_is_refused_naming_it(folder, tmp_path, what, stream, byte):
    mark_folder(folder, tmp_path / "v")

    def damage(data, spans):
        _, stop = spans[0][stream]
        data[stop + byte] ^= 0x10

    with pytest.raises(VaultIntegrityError, match=r"pair 0 \(item 0 of the chunk\)"):
        damaged_read(tmp_path / "v", "chunks/000000.pairs", damage)


def test_a_damaged_midpoint_is_caught_by_its_recorded_hash(folder, tmp_path):
    """A PNG item keeps its midpoint: a change that still inflates is caught by the hash."""
    mark_folder(folder, tmp_path / "v")
    vault = Vault.open(tmp_path / "v")
    png = next(record for record in vault._records if "d_lossless.png" in record.names)

    def damage(data, spans):
        digest_at = 26 + struct.unpack_from(">H", data, 24)[0] + 1
        data[digest_at] ^= 1  # the recorded SHA-256 of the midpoint

    with pytest.raises(VaultIntegrityError, match="does not give the midpoint recorded"):
        damaged_read(tmp_path / "v", png.file, damage)


def test_a_chunk_is_read_only_in_the_format_its_vault_names(folder, tmp_path):
    """A format-3 chunk is refused in a format-2 vault (which promises no decoder), a
    compact chunk in a format-1 vault and a raw one in a later format."""
    vault, _ = mark_folder(folder, tmp_path / "v")
    record = next(r for r in vault._records if "a_colour.jpg" in r.names)
    assert (tmp_path / "v" / record.file).read_bytes().startswith(jpeg_pairs.MAGIC)

    def read(name, format_version):
        return read_stored_chunk(
            tmp_path / "v",
            name,
            record.sha256,
            record.count,
            record.shape,
            format_version=format_version,
        )

    assert read(record.file, 3).count == record.count
    with pytest.raises(VaultIntegrityError, match=r"format-3 chunk .* vault of format 2"):
        read(record.file, 2)
    with pytest.raises(VaultIntegrityError, match="compact chunk in a vault of format 1"):
        read(record.file, 1)
    raw = record.file.replace(".pairs", ".npy")
    with pytest.raises(VaultIntegrityError, match="raw chunk in a vault of format 2"):
        read(raw, 2)


def test_a_jpeg_is_checked_against_the_item_shape_before_it_is_decoded():
    pixels = photo(96, 80, 3, 0)
    data = jpeg_of(pixels)
    assert np.array_equal(decode_jpeg(data, (96, 80, 3)), np.asarray(Image.open(io.BytesIO(data))))
    with pytest.raises(ChunkFormatError, match="not of its item's shape"):
        decode_jpeg(data, (80, 96, 3))
    with pytest.raises(ChunkFormatError, match="not of its item's shape"):
        decode_jpeg(data, (96, 80, 1))
    # A header that declares 60000 x 60000 (a decompression bomb) is refused unread.
    sof = data.index(b"\xff\xc0")
    bomb = bytearray(data)
    bomb[sof + 5 : sof + 9] = struct.pack(">HH", 60000, 60000)
    with pytest.raises(ChunkFormatError):
        decode_jpeg(bytes(bomb), (96, 80, 3))
    with pytest.raises(ChunkFormatError, match="longer than its item's raw pixels"):
        decode_jpeg(data + bytes(96 * 80 * 3), (96, 80, 3))
    with pytest.raises(ChunkFormatError, match="does not decode"):
        decode_jpeg(data[:200], (96, 80, 3))


def test_hostile_declared_lengths_and_codings_are_refused():
    original = jpeg_of(photo(96, 80, 3, 0))
    version0, version1 = versions(decode_jpeg(original, (96, 80, 3)), 0)
    data = b"".join(jpeg_pairs.encode_pairs(version0[None], version1[None], [original]))
    assert JpegPairsFile(data, 1, (96, 80, 3)).codings() == [JPEG_CODING]
    # Marked from other pixels than the JPEG's, the correction is the JPEG's whole error,
    # and the midpoint is smaller.
    version0, version1 = versions(photo(96, 80, 3, 0), 0)
    other = b"".join(jpeg_pairs.encode_pairs(version0[None], version1[None], [original]))
    assert JpegPairsFile(other, 1, (96, 80, 3)).codings() == [MIDPOINT_CODING]
    entry = 26 + struct.unpack_from(">H", data, 24)[0]
    huge = bytearray(data)
    struct.pack_into(">Q", huge, entry + 33 + 24, 2**62)  # the JPEG's declared length
    with pytest.raises(ChunkFormatError, match="longer than its plane allows"):
        JpegPairsFile(bytes(huge), 1, (96, 80, 3))
    unknown = bytearray(data)
    unknown[entry] = 7
    with pytest.raises(ChunkFormatError, match="unknown coding 7"):
        JpegPairsFile(bytes(unknown), 1, (96, 80, 3))
    mixed = bytearray(data)
    mixed[entry] = MIDPOINT_CODING  # midpoint-coded, yet with a JPEG stream
    with pytest.raises(ChunkFormatError, match="JPEG stream unlike its coding"):
        JpegPairsFile(bytes(mixed), 1, (96, 80, 3))
    with pytest.raises(ChunkFormatError, match="holds items of"):
        JpegPairsFile(data, 1, (80, 96, 3))
    with pytest.raises(ChunkFormatError, match="not as long as its streams"):
        JpegPairsFile(data + b"\0", 1, (96, 80, 3))


def test_the_correction_of_clipped_levels_is_guessed_from_the_mark_and_parity():
    """Where levels clip the midpoint leaves the photo; the guess follows it there."""
    original = jpeg_of(photo(96, 80, 3, 0, clipped=True))
    decoded = decode_jpeg(original, (96, 80, 3))
    version0, version1 = versions(decoded, 0)
    assert np.mean((version0 == 255) | (version1 == 0) | (version0 == 0)) > 0.2
    guessed = encode_planes(
        version0, version1, lambda rows, mark, parity: guess_midpoint(decoded[rows], mark, parity)
    )
    plain = encode_planes(version0, version1, lambda rows, mark, parity: decoded[rows])
    assert guessed.correction is not None and plain.correction is not None
    assert len(guessed.correction) < 0.4 * len(plain.correction)
    assert len(guessed.correction) < len(guessed.parity)
    midpoint = ((version0.astype(np.int16) + version1) >> 1).astype(np.uint8)
    parity = ((version0.astype(np.int16) + version1) & 1).astype(np.uint8)
    exact = guess_midpoint(decoded, version0 - midpoint, parity) == midpoint
    assert exact.mean() > 0.95


def _guess_everywhere(decoded, mark, parity):
    """The guess's rule evaluated at every value (what vaults written before used)."""
    photo = decoded.astype(np.int16)
    half = mark.view(np.int8).astype(np.int16)
    up, down = photo + half, photo - half
    guess = photo
    guess = np.where(up > 255, 255 - half, guess)
    guess = np.where(up < 0, -half, guess)
    guess = np.where(down < 0, half - parity, guess)
    guess = np.where(down > 255, 255 + half - parity, guess)
    return (guess & 0xFF).astype(np.uint8)


def test_the_guess_is_the_rule_at_every_level_mark_and_parity():
    """Evaluated only near 0 and 255, the guess equals the rule everywhere, so the
    correction planes of vaults written before read the same."""
    photo, mark, parity = np.meshgrid(
        np.arange(256, dtype=np.uint8),
        np.arange(256, dtype=np.uint8),
        np.arange(2, dtype=np.uint8),
        indexing="ij",
    )
    assert np.array_equal(
        guess_midpoint(photo, mark, parity), _guess_everywhere(photo, mark, parity)
    )
    rng = np.random.default_rng(7)
    for reach in (0, 1, 3, 10, 127, 128):
        decoded = rng.choice(
            np.array([0, 1, 2, 5, 9, 10, 11, 128, 244, 245, 246, 250, 254, 255], np.uint8),
            (2, 64, 3),
        )
        decoded[0] = rng.integers(0, 256, (64, 3), dtype=np.uint8)
        shift = rng.integers(-reach, reach + 1, decoded.shape).astype(np.int8).view(np.uint8)
        bits = rng.integers(0, 2, decoded.shape, dtype=np.uint8)
        for layout in (lambda a: a, lambda a: a.transpose(2, 0, 1)):  # as written, as read
            got = guess_midpoint(layout(decoded), layout(shift), layout(bits))
            assert got.flags.c_contiguous
            assert np.array_equal(
                got, _guess_everywhere(layout(decoded), layout(shift), layout(bits))
            )


@pytest.mark.parametrize("quality", [60, 100])
def test_a_small_jpeg_is_kept_without_compressing_the_midpoint(quality, monkeypatch):
    """A JPEG and correction within a quarter of the raw bytes is kept as it is; a larger
    one only where it is smaller than the midpoint compressed losslessly."""
    pixels = decode_jpeg(jpeg_of(photo(96, 80, 3, 2), quality=quality), (96, 80, 3))
    original = jpeg_of(pixels, quality=quality)
    version0, version1 = versions(decode_jpeg(original, (96, 80, 3)), 0)
    made = []

    def spy(*args, **kwargs):
        planes = encode_planes(*args, **kwargs)
        made.append((kwargs, planes))
        return planes

    monkeypatch.setattr(jpeg_pairs, "encode_planes", spy)
    data = b"".join(jpeg_pairs.encode_pairs(version0[None], version1[None], [original]))
    stored = JpegPairsFile(data, 1, (96, 80, 3))
    as_jpeg = len(original) + len(made[0][1].correction)
    raw = 96 * 80 * 3
    if quality == 60:
        assert as_jpeg * jpeg_pairs.JPEG_WITHOUT_COMPARING <= raw
        assert [kwargs for kwargs, _ in made] == [{"midpoint": False}]
        assert stored.codings() == [JPEG_CODING]
    else:
        assert as_jpeg * jpeg_pairs.JPEG_WITHOUT_COMPARING > raw
        assert [kwargs for kwargs, _ in made] == [{"midpoint": False}, {"mark_and_parity": False}]
        midpoint = encode_planes(version0, version1, None).midpoint
        assert made[1][1].midpoint == midpoint
        smaller = JPEG_CODING if as_jpeg < len(midpoint) else MIDPOINT_CODING
        assert stored.codings() == [smaller]
    pair = stored.item(0)
    assert np.array_equal(pair[0], version0) and np.array_equal(pair[1], version1)


def test_a_jpeg_of_another_shape_or_no_jpeg_keeps_the_midpoint():
    pixels = photo(96, 80, 3, 0)
    version0, version1 = versions(pixels, 0)
    others = [jpeg_of(photo(80, 96, 3, 0)), png_of(pixels), b"\xff\xd8\xff garbage", None]
    for original in others:
        data = b"".join(jpeg_pairs.encode_pairs(version0[None], version1[None], [original]))
        stored = JpegPairsFile(data, 1, (96, 80, 3))
        assert stored.codings() == [MIDPOINT_CODING]
        pair = stored.item(0)
        assert np.array_equal(pair[0], version0) and np.array_equal(pair[1], version1)


# --- Migration ---------------------------------------------------------------------------------


def test_migration_2_to_4_and_back_keeps_the_root_openings_and_receipt(folder, tmp_path):
    old, _ = mark_folder(folder, tmp_path / "v", format_version=2)
    escrowed(old, tmp_path / "escrow.db")
    openings = [old.opening(index) for index in range(old.n_pairs)]
    format_2 = {
        name: (tmp_path / "v" / "chunks" / name).read_bytes()
        for name in os.listdir(tmp_path / "v" / "chunks")
    }
    with pytest.raises(ParameterError, match="--sources"):
        migrate_vault(tmp_path / "v", to_version=3)
    up = migrate_vault(tmp_path / "v", originals=originals_in(folder))
    assert (up.from_version, up.to_version) == (2, 5) and up.bytes_after < up.bytes_before
    new = Vault.open(tmp_path / "v")
    assert new.format_version == 5 and new.root == old.root
    assert new.receipt_bytes == old.receipt_bytes
    assert [new.opening(index) for index in range(new.n_pairs)] == openings
    assert list(codings(new).values()).count(JPEG_CODING) == 4  # not the one turned upright
    # Written directly in format 5, the chunks are the same.
    mark_folder(folder, tmp_path / "direct", format_version=5)
    for name in format_2:
        direct = (tmp_path / "direct" / "chunks" / name).read_bytes()
        assert (tmp_path / "v" / "chunks" / name).read_bytes() == direct
    down = migrate_vault(tmp_path / "v")  # to format 2: self-contained
    assert (down.from_version, down.to_version) == (5, 2)
    back = Vault.open(tmp_path / "v")
    assert back.format_version == 2 and back.root == old.root
    assert [back.opening(index) for index in range(back.n_pairs)] == openings
    for name, data in format_2.items():
        assert (tmp_path / "v" / "chunks" / name).read_bytes() == data


def test_migration_to_4_from_another_folder_stays_exact(folder, tmp_path):
    """The photos given need not be the vault's: a correction or the midpoint makes it exact."""
    old, _ = mark_folder(folder, tmp_path / "v", format_version=2)
    other = tmp_path / "other"
    other.mkdir()
    for seed, name in enumerate(FILES):
        (other / name).write_bytes(jpeg_of(photo(*FILES[name][0], seed + 50)))
    (other / "e_grey.jpg").unlink()
    migrate_vault(tmp_path / "v", originals=originals_in(other))
    new = Vault.open(tmp_path / "v")
    assert new.format_version == 5 and new.packed_commitments() == old.packed_commitments()
    assert set(codings(new).values()) == {MIDPOINT_CODING}
    read = originals_in(other)
    assert read("../photos/a_colour.jpg") is None  # names never leave the folder
    assert read("absent.jpg") is None


def write_with_photos(folder: Path, path: Path, photos_of):
    """Write ``folder`` as :func:`mark_folder` does, handing the writer ``photos_of(batch)``."""
    return mark_folder(folder, path, photos_of=photos_of)[0]


def test_the_photos_marked_spare_decoding_each_jpeg_again(folder, tmp_path, monkeypatch):
    """Handed the decoded photos, the writer decodes no JPEG and writes the same bytes."""
    vault, _ = mark_folder(folder, tmp_path / "decoding")
    decodes = []
    original = jpeg_pairs.decode_jpeg

    def counting(data, shape):
        decodes.append(shape)
        return original(data, shape)

    monkeypatch.setattr(jpeg_pairs, "decode_jpeg", counting)
    monkeypatch.setattr(VaultWriter, "finish", lambda self: None)  # no read-back here
    write_with_photos(folder, tmp_path / "given", lambda batch: batch.pixels)
    assert decodes == []
    monkeypatch.undo()
    monkeypatch.setattr(os, "fsync", lambda fd: None)
    given = write_with_photos(folder, tmp_path / "given2", lambda batch: batch.pixels)
    assert given.root == vault.root
    for record in vault._records:
        path = record.file
        assert (tmp_path / "given2" / path).read_bytes() == (vault.path / path).read_bytes()


def test_photos_that_are_not_the_jpegs_decoding_are_caught_when_read_back(folder, tmp_path):
    def brighter(batch):
        return np.clip(batch.pixels.astype(np.int16) + 3, 0, 255).astype(np.uint8)

    with pytest.raises(VaultIntegrityError, match="midpoint"):
        write_with_photos(folder, tmp_path / "v", brighter)
    assert not (tmp_path / "v" / "manifest.msgpack").exists()  # never presented as finished


def test_photos_of_another_shape_are_refused(folder, tmp_path):
    with pytest.raises(ParameterError, match="photos must be uint8 of the versions' shape"):
        write_with_photos(folder, tmp_path / "v", lambda batch: batch.pixels[:, :-1])


def test_owner_mark_keeps_the_jpeg_sources_of_a_folder(folder, tmp_path):
    """``mark`` carries each JPEG file's bytes from the folder to the vault's chunks."""
    config = MarkingConfig(marker="bernoulli", batch_size=2)
    result = mark(open_source(folder), tmp_path / "v", config, secret=SECRET, show_progress=False)
    vault = Vault.open(result.vault.path)
    assert vault.format_version == 5
    found = codings(vault)
    assert found.pop("d_lossless.png") == MIDPOINT_CODING
    assert found.pop("c_rotated.jpg") == MIDPOINT_CODING  # turned upright by its EXIF
    assert set(found.values()) == {JPEG_CODING}
    upright = [vault.pair(i)[0].pixels.shape for i in range(vault.n_pairs)]
    assert (88, 48, 3) in upright and (48, 88, 3) not in upright  # stored 48 × 88
    migrate_vault(vault.path, to_version=2)
    assert Vault.open(vault.path).packed_commitments() == vault.packed_commitments()
