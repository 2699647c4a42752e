"""Photos' ICC colour profiles: read with each photo, kept in the vault, published with it.

A phone's photo in Display P3 or a camera's in Adobe RGB shows its pixel values through
its profile; published without it, the same values show in sRGB, less saturated. The
profile never enters a commitment: the pixels are what is marked and committed.
"""

from __future__ import annotations

import io
import os
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from PIL import Image, ImageCms

import twinaudit.owner.images.sources as sources_module
from tests.owner.test_vault_jpeg import jpeg_of, photo
from tests.owner.test_vault_receipt import escrowed
from tests.support.interrupt import stop_at_append
from twinaudit.owner.images.sources import FolderSource, open_source, published_image_name
from twinaudit.owner.inspect import inspect_vault
from twinaudit.owner.mark import mark
from twinaudit.owner.marking import MarkingConfig
from twinaudit.owner.publish import publish
from twinaudit.owner.vault import Vault, VaultWriter
from twinaudit.owner.vault.journal import ChunkRecord, _MalformedError, read_journal
from twinaudit.owner.vault.migration import migrate_vault, originals_in
from twinaudit.protocol.encoding import encode
from twinaudit.protocol.errors import InputError, ParameterError

SECRET = bytes(range(32))
CONFIG = MarkingConfig(marker="bernoulli", batch_size=8)
#: A real profile (sRGB, built by littleCMS) and a second one told apart by its bytes.
SRGB = ImageCms.ImageCmsProfile(ImageCms.createProfile("sRGB")).tobytes()
WIDE = ImageCms.ImageCmsProfile(ImageCms.createProfile("LAB")).tobytes()


@pytest.fixture(autouse=True)
def _no_fsync(monkeypatch):
    monkeypatch.setattr(os, "fsync", lambda fd: None)


def _save(path: Path, pixels, fmt: str, profile: bytes | None, **options) -> None:
    buffer = io.BytesIO()
    extra = {} if profile is None else {"icc_profile": profile}
    Image.fromarray(pixels).save(buffer, fmt, **extra, **options)
    path.write_bytes(buffer.getvalue())


#: name -> (profile, format); all 40 × 48 so that one batch holds them all.
FOLDER = {
    "a.jpg": (WIDE, "JPEG"),
    "b.png": (SRGB, "PNG"),
    "c.png": (None, "PNG"),
    "d.webp": (WIDE, "WEBP"),
    "e.tif": (SRGB, "TIFF"),
}


@pytest.fixture
def folder(tmp_path) -> Path:
    root = tmp_path / "photos"
    root.mkdir()
    for seed, (name, (profile, fmt)) in enumerate(FOLDER.items()):
        options = {"lossless": True} if fmt == "WEBP" else {}
        _save(root / name, photo(40, 48, 3, seed), fmt, profile, **options)
    return root


def _mark(folder: Path, path: Path, config: MarkingConfig = CONFIG):
    """Mark ``folder`` into ``path`` with the fixed secret; return :func:`mark`'s result."""
    return mark(open_source(folder), path, config, secret=SECRET, show_progress=False)


def _published(vault: Vault, out: Path, tmp_path: Path) -> list[Path]:
    escrowed(vault, tmp_path / "escrow.db")
    return publish(vault, out, show_progress=False)


def _profile_of(path: Path) -> bytes | None:
    with Image.open(path) as image:
        return image.info.get("icc_profile")


def test_each_photo_is_published_with_the_profile_it_was_read_with(folder, tmp_path):
    result = _mark(folder, tmp_path / "v")
    vault = Vault.open(result.vault.path)
    assert vault.format_version == 5
    assert vault.colour_profiles() == [profile for profile, _ in FOLDER.values()]
    # One chunk: each distinct profile is stored once.
    (record,) = read_journal(vault.path).chunks
    assert record.to_value()["icc_profiles"] == [WIDE, SRGB]
    assert record.to_value()["icc"] == [0, 1, None, 0, 1]
    notes = inspect_vault(vault, distance_pairs=0).notes
    assert "4 of 5 images carry an ICC colour profile (2 distinct)" in notes[0]
    _published(vault, tmp_path / "out", tmp_path)
    for name, (profile, _) in FOLDER.items():
        assert _profile_of(tmp_path / "out" / published_image_name(name)) == profile, name


def test_profiles_change_nothing_that_is_committed(folder, tmp_path):
    with_profiles = _mark(folder, tmp_path / "v1").vault
    bare = tmp_path / "bare"
    bare.mkdir()
    for name in FOLDER:
        with Image.open(folder / name) as image:
            image.load()
            pixels = np.asarray(image)
        options = {"lossless": True} if name.endswith(".webp") else {}
        if name.endswith(".jpg"):  # the same pixels: copy the JPEG without its profile
            (bare / name).write_bytes(jpeg_of(pixels))
            continue
        _save(bare / name, pixels, FOLDER[name][1], None, **options)
    without = _mark(bare, tmp_path / "v2")
    assert without.vault.colour_profiles() == [None] * len(FOLDER)
    # The JPEG re-saved decodes to other pixels; every other item commits alike.
    same = [
        with_profiles.commitment(index) == without.vault.commitment(index)
        for index in range(len(FOLDER))
    ]
    assert same == [False, True, True, True, True]


def test_a_profile_above_the_cap_is_refused_before_anything_is_written(
    folder, tmp_path, monkeypatch
):
    assert len(WIDE) < len(SRGB)
    monkeypatch.setattr(sources_module, "MAX_PROFILE_BYTES", len(SRGB) - 1)
    with pytest.raises(InputError) as caught:
        FolderSource(folder)
    message = str(caught.value)
    assert "b.png" in message and "e.tif" in message and "convert the photo to sRGB" in message
    assert "a.jpg" not in message  # its profile is within the cap


def test_a_run_begun_before_format_4_resumes_without_profiles(folder, tmp_path, monkeypatch):
    """A format-3 vault records no profiles: resumed today, it is finished as begun."""
    real_create = VaultWriter.create_or_resume.__func__

    def in_format_3(cls, path, **kwargs):
        return real_create(cls, path, **{**kwargs, "format_version": 3})

    config = MarkingConfig(marker="bernoulli", batch_size=2)
    monkeypatch.setattr(VaultWriter, "create_or_resume", classmethod(in_format_3))
    whole = _mark(folder, tmp_path / "whole", config)
    real_append = stop_at_append(monkeypatch, 2)
    with pytest.raises(KeyboardInterrupt):
        _mark(folder, tmp_path / "v", config)
    monkeypatch.setattr(VaultWriter, "append", real_append)
    monkeypatch.setattr(VaultWriter, "create_or_resume", classmethod(real_create))
    resumed = _mark(folder, tmp_path / "v", config)
    assert resumed.resumed_from == 2
    assert resumed.vault.format_version == whole.vault.format_version == 3
    assert resumed.vault.root == whole.vault.root
    assert resumed.vault.colour_profiles() == [None] * len(FOLDER)


def test_a_vault_with_profiles_is_not_migrated_to_a_format_without_them(folder, tmp_path):
    vault = _mark(folder, tmp_path / "v").vault
    for target in (2, 3):
        with pytest.raises(ParameterError, match="colour profiles of 4 photos"):
            migrate_vault(vault.path, to_version=target, originals=originals_in(folder))
    assert Vault.open(vault.path).colour_profiles() == vault.colour_profiles()


def test_the_writer_refuses_profiles_a_format_cannot_record(folder, tmp_path):
    source = FolderSource(folder)
    (batch,) = source.batches(8)
    with VaultWriter.create_or_resume(
        tmp_path / "v",
        item_kind="image",
        source=source.describe(),
        config=CONFIG.to_value(),
        n_items=len(source),
        secret=SECRET,
        format_version=3,
    ) as writer:
        with pytest.raises(ParameterError, match="format-3 vault cannot record colour"):
            writer.append(
                batch.pixels, batch.pixels ^ 1, batch.labels, batch.names, profiles=batch.profiles
            )
        # No profile at all is no profile recorded, in any format.
        writer.append(
            batch.pixels, batch.pixels ^ 1, batch.labels, batch.names, profiles=[None] * len(batch)
        )
        assert writer.completed == len(batch)


def _record(**changes):
    value = ChunkRecord(
        ordinal=0,
        file="chunks/000000.pairs",
        start=0,
        count=3,
        shape=(4, 4, 3),
        sha256=bytes(32),
        labels=[None] * 3,
        names=["a", "b", "c"],
        profiles=[WIDE, None, WIDE],
    ).to_value()
    value.update(changes)
    return {key: item for key, item in value.items() if item is not ...}


def test_chunk_records_read_their_profiles_strictly():
    assert ChunkRecord.from_value(_record()).profiles == [WIDE, None, WIDE]
    assert _record()["icc_profiles"] == [WIDE] and _record()["icc"] == [0, None, 0]
    for broken, reason in [
        ({"icc": [0, None, 1]}, "not one of"),
        ({"icc_profiles": [WIDE, WIDE], "icc": [0, None, 1]}, "twice"),
        ({"icc_profiles": [WIDE, SRGB]}, "no item uses"),
        ({"icc_profiles": [SRGB, WIDE], "icc": [1, None, 0]}, "first use"),
        ({"icc_profiles": [], "icc": [None] * 3}, "non-empty"),
        ({"icc_profiles": [b""]}, "1.."),
        ({"icc_profiles": ["text"]}, "1.."),
        ({"icc": [True, None, 0]}, "not one of"),
        ({"icc_profiles": ...}, "missing"),
    ]:
        with pytest.raises(_MalformedError, match=reason):
            ChunkRecord.from_value(_record(**broken))
    # A format-3 record has no profile keys: an older vault never held them.
    with pytest.raises(_MalformedError, match="unexpected"):
        ChunkRecord.from_value(_record(), "image", 3)


PROFILE_BLOBS = st.sampled_from([SRGB, WIDE, b"p", b"q" * 40])


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(st.none(), PROFILE_BLOBS), min_size=1, max_size=12))
def test_a_chunk_s_profiles_round_trip_in_one_encoding(profiles):
    if all(profile is None for profile in profiles):  # such a chunk records no profiles
        profiles = [SRGB, *profiles[1:]]
    count = len(profiles)
    record = ChunkRecord(
        ordinal=0,
        file="chunks/000000.pairs",
        start=0,
        count=count,
        shape=(4, 4, 3),
        sha256=bytes(32),
        labels=[None] * count,
        names=[f"n{k}" for k in range(count)],
        profiles=profiles,
    )
    assert ChunkRecord.from_value(record.to_value()) == record


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.one_of(st.none(), st.integers(0, 2)), min_size=1, max_size=6)
    | st.lists(st.one_of(st.none(), st.integers(-2, 4), st.booleans(), st.text(max_size=2))),
    st.lists(PROFILE_BLOBS, max_size=3)
    | st.lists(st.one_of(PROFILE_BLOBS, st.binary(max_size=3), st.integers(), st.none())),
)
def test_any_icc_values_parse_to_one_encoding_or_are_refused(indices, table):
    value = _record(icc=indices, icc_profiles=table, count=len(indices))
    value.update(labels=[None] * len(indices), names=[f"n{k}" for k in range(len(indices))])
    try:
        parsed = ChunkRecord.from_value(value)
    except _MalformedError:
        return
    assert encode(parsed.to_value()) == encode(value)  # accepted only in its one encoding
