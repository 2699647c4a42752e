"""Vault format 2: compact chunks, the same commitments as format 1, and the migration."""

from __future__ import annotations

import os
import shutil
import struct
import zlib
from pathlib import Path

import numpy as np
import pytest

import twinaudit.owner.vault.files as vault_files
import twinaudit.owner.vault.migration as migration_module
from tests.owner.test_vault_receipt import Arbiter
from tests.support.keys import KEY
from twinaudit.owner.vault import (
    Vault,
    VaultWriter,
    write_vault,
)
from twinaudit.owner.vault.layout import FORMAT_VERSION
from twinaudit.owner.vault.migration import migrate_vault
from twinaudit.owner.vault.pair_codec import (
    BAND_ROWS,
    MAGIC,
    ChunkFormatError,
    decode_pairs,
    encode_pairs,
    max_chunk_bytes,
    plane_sizes,
)
from twinaudit.protocol.errors import (
    ParameterError,
    StateError,
    VaultIntegrityError,
    VaultStorageError,
)

SECRET = bytes(range(32))
SOURCE = {"dataset": "synthetic"}
CONFIG = {"marker": "pgd", "epsilon": 10}


@pytest.fixture(autouse=True)
def _no_fsync(monkeypatch):
    """Skip the disk flushes (most of the run time); the resume tests check where they go."""
    monkeypatch.setattr(os, "fsync", lambda fd: None)


def marked(n=6, shape=(40, 30, 3), seed=0):
    """Photo-like images and their two versions: ± a smooth mark of up to 10, clipped."""
    rng = np.random.default_rng(seed)
    height, width, _ = shape
    ys, xs = np.mgrid[0:height, 0:width]
    photos = np.empty((n, *shape), dtype=np.uint8)
    for k in range(n):
        field = 128 + 140 * np.sin(ys / (5 + k) + xs / 7)[..., None]  # clipped at both ends
        photos[k] = np.clip(field + rng.normal(0, 4, shape), 0, 255)
    mark = np.rint(10 * np.sin(ys / 6)[..., None] * np.cos(xs / 9)[..., None])
    mark = np.broadcast_to(mark, shape).astype(np.int16)
    v0 = np.clip(photos.astype(np.int16) + mark, 0, 255).astype(np.uint8)
    v1 = np.clip(photos.astype(np.int16) - mark, 0, 255).astype(np.uint8)
    labels = [k % 3 for k in range(n)]
    names = [f"p/{k}.jpg" for k in range(n)]
    return v0, v1, labels, names


def vault_in(path: Path, format_version: int, batch_items: int = 4) -> Vault:
    return write_vault(
        path,
        "image",
        *marked(),
        source=SOURCE,
        config=CONFIG,
        secret=SECRET,
        batch_items=batch_items,
        format_version=format_version,
    )


def files_of(path: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(path)): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()
    }


# --- The codec -------------------------------------------------------------------------------

_RNG = np.random.default_rng(7)
ROUND_TRIPS = {
    "one value": (np.zeros((1, 1, 1, 1), np.uint8), np.full((1, 1, 1, 1), 255, np.uint8)),
    "every value, any difference": (
        _RNG.integers(0, 256, (3, 9, 11, 3), dtype=np.uint8),
        _RNG.integers(0, 256, (3, 9, 11, 3), dtype=np.uint8),
    ),
    "identical versions": (
        np.full((2, 4, 4, 1), 17, np.uint8),
        np.full((2, 4, 4, 1), 17, np.uint8),
    ),
    "several bands, grey": (
        _RNG.integers(0, 256, (1, 2 * BAND_ROWS + 3, 5, 1), dtype=np.uint8),
        _RNG.integers(0, 256, (1, 2 * BAND_ROWS + 3, 5, 1), dtype=np.uint8),
    ),
    "a marked photo": marked(2, (BAND_ROWS + 20, 33, 3))[:2],
    # A last band of one row: its parity plane, packed channel-first, came out laid out
    # channel fastest, and every photo 257, 513, ... 1281 rows high failed to be written.
    "a last band of one row, colour": marked(1, (2 * BAND_ROWS + 1, 20, 3))[:2],
    "a last band of one row, grey": marked(1, (BAND_ROWS + 1, 20, 1))[:2],
}


@pytest.mark.parametrize("case", ROUND_TRIPS, ids=list(ROUND_TRIPS))
def test_the_codec_gives_back_both_versions_exactly(case):
    v0, v1 = ROUND_TRIPS[case]
    data = b"".join(encode_pairs(v0, v1))
    assert data == b"".join(encode_pairs(v0.copy(), v1.copy()))  # the same pixels, the same bytes
    assert len(data) <= max_chunk_bytes(len(v0), v0.shape[1:])
    pixels = decode_pairs(data, len(v0), v0.shape[1:])
    assert pixels.dtype == np.uint8 and pixels.shape == (2, *v0.shape)
    assert np.array_equal(pixels[0], v0) and np.array_equal(pixels[1], v1)


def test_a_marked_photo_takes_far_less_than_its_raw_pixels():
    v0, v1, _, _ = marked(4, (120, 160, 3))
    data = b"".join(encode_pairs(v0, v1))
    assert len(data) < 0.5 * (v0.nbytes + v1.nbytes), len(data) / (v0.nbytes + v1.nbytes)


SHAPE = (6, 5, 3)
GOOD_V0, GOOD_V1 = marked(2, SHAPE)[:2]
GOOD = b"".join(encode_pairs(GOOD_V0, GOOD_V1))
HEADER = len(MAGIC) + 16 + 8 * 6


def _with_stream(data: bytes, index: int, stream: bytes) -> bytes:
    """``data`` with stream ``index`` replaced by ``stream`` (lengths rewritten to match)."""
    lengths = [struct.unpack_from(">Q", data, len(MAGIC) + 16 + 8 * k)[0] for k in range(6)]
    streams, position = [], HEADER
    for length in lengths:
        streams.append(data[position : position + length])
        position += length
    streams[index] = stream
    table = b"".join(struct.pack(">Q", len(s)) for s in streams)
    return data[: len(MAGIC) + 16] + table + b"".join(streams)


_BOMB = zlib.compress(bytes(50_000_000), 9)  # 50 MB of zeros in about 50 KB
HOSTILE = {
    "empty": (b"", "not a format-2 chunk"),
    "other magic": (b"X" + GOOD[1:], "not a format-2 chunk"),
    "other shape": (GOOD[:8] + struct.pack(">4I", 2, 6, 5, 1) + GOOD[24:], "holds items of"),
    "other count": (GOOD[:8] + struct.pack(">4I", 3, 6, 5, 3) + GOOD[24:], "holds items of"),
    "truncated": (GOOD[:-1], "not as long as its streams"),
    "trailing byte": (GOOD + b"\0", "not as long as its streams"),
    "a stream not zlib": (_with_stream(GOOD, 1, b"\xff" * 20), "not zlib"),
    "a stream short": (
        _with_stream(GOOD, 0, zlib.compress(bytes(plane_sizes(SHAPE)[0] - 1))),
        "shorter than its plane",
    ),
    "a stream long": (
        _with_stream(GOOD, 3, zlib.compress(bytes(plane_sizes(SHAPE)[0] + 1))),
        "longer than its plane",
    ),
    "garbage after a stream": (
        _with_stream(GOOD, 2, zlib.compress(bytes(plane_sizes(SHAPE)[2])) + b"x"),
        "longer than its plane",
    ),
    "a bomb": (_with_stream(GOOD, 4, _BOMB), "longer than its plane can compress to"),
    "a bomb within the bound": (
        _with_stream(GOOD, 0, zlib.compress(bytes(10_000_000), 9)[:60]),
        "longer than its plane",
    ),
}


@pytest.mark.parametrize("case", HOSTILE, ids=list(HOSTILE))
def test_the_codec_refuses_what_is_not_a_chunk_of_the_record(case):
    data, match = HOSTILE[case]
    with pytest.raises(ChunkFormatError, match=match):
        decode_pairs(data, 2, SHAPE)


def test_inflation_never_goes_past_the_plane(monkeypatch):
    """Every inflation is asked for at most what the plane still needs."""
    asked = []
    real = zlib.decompressobj

    class Spy:
        def __init__(self):
            self._inner = real()

        def decompress(self, data, max_length=0):
            asked.append(max_length)
            return self._inner.decompress(data, max_length)

        def __getattr__(self, name):
            return getattr(self._inner, name)

    monkeypatch.setattr(zlib, "decompressobj", Spy)
    with pytest.raises(ChunkFormatError, match="longer than its plane"):
        decode_pairs(HOSTILE["a bomb within the bound"][0], 2, SHAPE)
    assert asked and 0 < max(asked) <= plane_sizes(SHAPE)[0]


# --- Format 2 against format 1 -------------------------------------------------------------


def test_both_formats_commit_to_the_same_pairs(tmp_path):
    old = vault_in(tmp_path / "v1", 1)
    new = vault_in(tmp_path / "v2", 2)
    assert (old.format_version, new.format_version, FORMAT_VERSION) == (1, 2, 5)
    for version, suffix in ((1, "npy"), (2, "pairs")):
        chunks = [name for name in files_of(tmp_path / f"v{version}") if "/" in name]
        assert chunks == [f"chunks/00000{k}.{suffix}" for k in range(2)]
    old, new = Vault.open(tmp_path / "v1"), Vault.open(tmp_path / "v2")
    assert new.root == old.root
    assert new.packed_commitments() == old.packed_commitments()
    for index in range(old.n_pairs):
        assert new.pair_opening(index) == old.pair_opening(index)
        assert new.opening(index) == old.opening(index)
    for (s0, a0, a1, *_), (s1, b0, b1, *_) in zip(old.chunks(), new.chunks(), strict=True):
        assert s0 == s1 and np.array_equal(a0, b0) and np.array_equal(a1, b1)
    chunk_bytes = {
        version: sum(len(d) for n, d in files_of(tmp_path / f"v{version}").items() if "/" in n)
        for version in (1, 2)
    }
    assert chunk_bytes[2] < 0.6 * chunk_bytes[1], chunk_bytes


def test_the_same_inputs_give_the_same_format_2_files(tmp_path):
    vault_in(tmp_path / "a", 2)
    vault_in(tmp_path / "b", 2)
    assert files_of(tmp_path / "a") == files_of(tmp_path / "b")


def test_a_format_1_run_resumes_in_format_1(tmp_path):
    v0, v1, labels, names = marked()
    arguments = {"item_kind": "image", "source": SOURCE, "config": CONFIG, "n_items": 6}
    with VaultWriter.create_or_resume(
        tmp_path / "v", secret=SECRET, format_version=1, **arguments
    ) as writer:
        writer.append(v0[:4], v1[:4], labels[:4], names[:4])
    # Resumed by this code without saying which format: the run's own.
    with VaultWriter.create_or_resume(tmp_path / "v", **arguments) as writer:
        assert writer.completed == 4
        writer.append(v0[4:], v1[4:], labels[4:], names[4:])
        resumed = writer.finish()
    assert resumed.format_version == 1
    assert sorted(n for n in files_of(tmp_path / "v") if "/" in n) == [
        "chunks/000000.npy",
        "chunks/000001.npy",
    ]
    assert Vault.open(tmp_path / "v").root == vault_in(tmp_path / "whole", 2).root


@pytest.mark.parametrize("version", [0, 6, True, "2"])
def test_create_refuses_an_unknown_format(tmp_path, version):
    with pytest.raises(ParameterError, match="format_version"):
        VaultWriter.create_or_resume(
            tmp_path / "v",
            item_kind="image",
            source={},
            config={},
            n_items=1,
            format_version=version,
        )
    assert not (tmp_path / "v").exists()


def test_a_manifest_of_another_format_than_the_journal_is_refused(tmp_path):
    from tests.owner.test_vault import _edit_manifest

    vault_in(tmp_path / "v", 2)
    _edit_manifest(tmp_path / "v", format_version=1)
    with pytest.raises(VaultIntegrityError, match="disagrees with the journal"):
        Vault.open(tmp_path / "v")


# --- Migration -------------------------------------------------------------------------------


@pytest.fixture
def arbiter(tmp_path):
    (tmp_path / "arbiter").mkdir()
    arbiter = Arbiter(tmp_path / "arbiter" / "escrow.db", KEY)
    yield arbiter
    arbiter.store.close()


def escrowed_format_1(path: Path, arbiter: Arbiter) -> Vault:
    vault = vault_in(path, 1)
    envelope, proof = arbiter.escrow(vault.root, n_pairs=vault.n_pairs)
    vault.store_receipt(envelope, KEY.public_key(), proof)
    return vault


def test_migration_keeps_the_root_every_opening_and_the_receipt(tmp_path, arbiter):
    old = escrowed_format_1(tmp_path / "v", arbiter)
    openings = [old.opening(index) for index in range(old.n_pairs)]
    receipt, bits = old.receipt_bytes, old.publication_bits()
    before = files_of(tmp_path / "v")
    migration = migrate_vault(tmp_path / "v")
    assert (migration.from_version, migration.to_version) == (1, 2)
    assert migration.bytes_after < migration.bytes_before
    assert "format 1 -> 2" in migration.describe()
    new = Vault.open(tmp_path / "v")  # every check, the receipt re-verified
    assert new.format_version == 2 and new.root == old.root
    assert new.receipt_bytes == receipt and new.publication_bits() == bits
    assert [new.opening(index) for index in range(new.n_pairs)] == openings
    after = files_of(tmp_path / "v")
    for name in ("secret.key", "receipt.json", "arbiter.pub"):
        assert after[name] == before[name]
    assert sorted(n for n in after if "/" in n) == [f"chunks/00000{k}.pairs" for k in range(2)]
    assert sorted(os.listdir(tmp_path)) == ["arbiter", "v"]  # nothing left beside it
    # The migrated vault is the vault format 2 would have written, the receipt stored.
    vault_in(tmp_path / "direct", 2)
    direct = files_of(tmp_path / "direct")
    assert {n: after[n] for n in direct if n != "manifest.msgpack"} == {
        n: d for n, d in direct.items() if n != "manifest.msgpack"
    }
    shutil.rmtree(tmp_path / "direct")
    again = migrate_vault(tmp_path / "v")
    assert again.from_version == again.to_version == 2 and "nothing to do" in again.describe()
    assert files_of(tmp_path / "v") == after


def test_a_migration_that_fails_while_writing_leaves_the_old_vault(tmp_path, arbiter, monkeypatch):
    escrowed_format_1(tmp_path / "v", arbiter)
    before = files_of(tmp_path / "v")
    real = vault_files.write_new_file
    written = []

    def fail_on_the_second_chunk(path, data):
        written.append(path.name)
        if len(written) == 2:
            raise OSError(28, "No space left on device")
        real(path, data)

    monkeypatch.setattr(vault_files, "write_new_file", fail_on_the_second_chunk)
    with pytest.raises(VaultStorageError, match="the disk is full"):
        migrate_vault(tmp_path / "v")
    monkeypatch.undo()
    assert files_of(tmp_path / "v") == before
    assert Vault.open(tmp_path / "v").format_version == 1
    assert sorted(os.listdir(tmp_path)) == ["arbiter", "v"]


def test_a_file_system_that_cannot_swap_leaves_the_old_vault(tmp_path, arbiter, monkeypatch):
    escrowed_format_1(tmp_path / "v", arbiter)
    before = files_of(tmp_path / "v")

    def cannot(first, second):
        raise StateError("cannot swap two directories atomically")

    monkeypatch.setattr(migration_module, "_exchange", cannot)
    with pytest.raises(StateError, match="atomically"):
        migrate_vault(tmp_path / "v")
    assert files_of(tmp_path / "v") == before
    assert sorted(os.listdir(tmp_path)) == ["arbiter", "v"]


def test_an_interrupted_migration_leaves_a_vault_that_opens(tmp_path, arbiter, monkeypatch):
    """Killed before the swap, the old vault opens; killed after it, the new one does."""
    old = escrowed_format_1(tmp_path / "v", arbiter)

    class Killed(BaseException):
        pass

    real_exchange = migration_module._exchange

    def killed_before(first, second):
        raise Killed

    monkeypatch.setattr(migration_module, "_exchange", killed_before)
    monkeypatch.setattr(shutil, "rmtree", lambda path, ignore_errors=False: None)  # a kill
    with pytest.raises(Killed):
        migrate_vault(tmp_path / "v")
    leftover = [name for name in os.listdir(tmp_path) if name.startswith(".v.migrating-")]
    assert len(leftover) == 1  # the half of the work a killed run leaves beside the vault
    assert Vault.open(tmp_path / "v").format_version == 1

    def killed_after(first, second):
        real_exchange(first, second)
        raise Killed

    monkeypatch.setattr(migration_module, "_exchange", killed_after)
    with pytest.raises(Killed):
        migrate_vault(tmp_path / "v")
    monkeypatch.undo()
    reopened = Vault.open(tmp_path / "v")
    assert reopened.format_version == 2 and reopened.root == old.root
    assert reopened.receipt_bytes == old.receipt_bytes
    # The next run clears what the killed ones left beside the vault (old and new copies).
    assert "nothing to do" in migrate_vault(tmp_path / "v").describe()
    assert sorted(os.listdir(tmp_path)) == ["arbiter", "v"]


def test_migrating_a_damaged_vault_changes_nothing(tmp_path, arbiter):
    escrowed_format_1(tmp_path / "v", arbiter)
    chunk = tmp_path / "v" / "chunks" / "000001.npy"
    data = bytearray(chunk.read_bytes())
    data[-1] ^= 1
    chunk.write_bytes(bytes(data))
    before = files_of(tmp_path / "v")
    with pytest.raises(VaultIntegrityError, match=r"chunks/000001\.npy"):
        migrate_vault(tmp_path / "v")
    assert files_of(tmp_path / "v") == before
    assert sorted(os.listdir(tmp_path)) == ["arbiter", "v"]


def test_a_text_vault_migrates_with_its_chunks_as_they_were(tmp_path):
    texts = [f"text number {k}" for k in range(5)]
    with VaultWriter.create_or_resume(
        tmp_path / "v",
        item_kind="text",
        source={},
        config={},
        n_items=5,
        secret=SECRET,
        format_version=1,
    ) as writer:
        writer.append_texts(texts, [t + " a" for t in texts], [t + " b" for t in texts], texts)
        old = writer.finish()
    before = files_of(tmp_path / "v")
    assert migrate_vault(tmp_path / "v").to_version == 2
    new = Vault.open(tmp_path / "v")
    assert new.format_version == 2 and new.root == old.root
    assert [new.pair_opening(k) for k in range(5)] == [old.pair_opening(k) for k in range(5)]
    assert files_of(tmp_path / "v")["chunks/000000.msgpack"] == before["chunks/000000.msgpack"]


def test_a_link_to_the_vault_migrates_the_vault_it_names(tmp_path):
    vault_in(tmp_path / "real", 1)
    (tmp_path / "link").symlink_to(tmp_path / "real")
    migrate_vault(tmp_path / "link")
    assert (tmp_path / "link").is_symlink()
    assert Vault.open(tmp_path / "real").format_version == 2
    assert sorted(os.listdir(tmp_path)) == ["link", "real"]
