"""Interrupted marking runs: every interruption resumes to the byte-identical vault."""

from __future__ import annotations

import errno
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import twinaudit.owner.vault.files as vault_files
from twinaudit.owner.vault import (
    Vault,
    VaultWriter,
    write_vault,
)
from twinaudit.owner.vault.journal import JournalAppender
from twinaudit.protocol.errors import VaultIntegrityError, VaultStorageError

ROOT = Path(__file__).resolve().parents[2]
SECRET = bytes(range(32))
ARGUMENTS = {
    "item_kind": "image",
    "source": {"dataset": "synthetic"},
    "config": {"marker": "gaussian", "sigma": 2.5},
    "n_items": 10,
    "secret": SECRET,
}
BATCH = 4


@pytest.fixture(autouse=True)
def _no_fsync(monkeypatch):
    """Skip the disk flushes (97% of the run time); test_fsync_order checks where they go."""
    monkeypatch.setattr(os, "fsync", lambda fd: None)


def items():
    rng = np.random.default_rng(7)
    v0 = rng.integers(0, 256, (10, 4, 3, 3), dtype=np.uint8)
    v1 = 255 - v0
    return v0, v1, [i % 3 for i in range(10)], [f"item-{i}" for i in range(10)]


def batch(start):
    return [part[start : start + BATCH] for part in items()]


def open_writer(path):
    return VaultWriter.create_or_resume(path, **ARGUMENTS)


def run_to_end(writer):
    """Append every batch from where the writer stands, then finish."""
    while writer.completed < 10:
        writer.append(*batch(writer.completed))
    return writer.finish()


def snapshot(path: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(path)): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()
    }


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """The files of an uninterrupted run."""
    path = tmp_path_factory.mktemp("reference") / "v"
    run_to_end(open_writer(path))
    return snapshot(path)


def test_killed_between_chunks_resumes_identically(tmp_path, reference):
    writer = open_writer(tmp_path / "v")
    writer.append(*batch(0))
    writer.append(*batch(4))
    writer.close()  # the run stops here; nothing else is written
    resumed = open_writer(tmp_path / "v")
    assert resumed.completed == 8
    run_to_end(resumed)
    assert snapshot(tmp_path / "v") == reference


def test_exception_after_chunk_before_journal_leaves_no_trace(tmp_path, monkeypatch, reference):
    writer = open_writer(tmp_path / "v")
    writer.append(*batch(0))
    before = snapshot(tmp_path / "v")
    written = []

    def crash(self, value):
        written.append(sorted(p.name for p in (tmp_path / "v" / "chunks").iterdir()))
        raise RuntimeError("interrupted")

    monkeypatch.setattr(JournalAppender, "append", crash)
    with pytest.raises(RuntimeError, match="interrupted"):
        writer.append(*batch(4))
    assert written == [["000000.pairs", "000001.pairs"]]  # the chunk file was in place
    assert snapshot(tmp_path / "v") == before and writer.completed == 4
    monkeypatch.undo()
    writer.close()
    run_to_end(open_writer(tmp_path / "v"))
    assert snapshot(tmp_path / "v") == reference


CRASH = """
import os, sys
from pathlib import Path
import numpy as np
sys.path.insert(0, {root!r})
from twinaudit.owner.vault.journal import JournalAppender, frame
from tests.owner.test_vault_resume import open_writer, batch

path = Path({path!r})
writer = open_writer(path)
writer.append(*batch(0))

def die(self, value):
    if {torn}:
        with open(path / "journal", "ab") as handle:
            handle.write(frame(value)[:-7])
    os._exit(3)

JournalAppender.append = die
writer.append(*batch(4))
"""


@pytest.mark.parametrize("torn", [False, True], ids=["before-journal", "torn-journal"])
def test_hard_crash_mid_batch_resumes_identically(tmp_path, reference, torn):
    path = tmp_path / "v"
    script = CRASH.format(root=str(ROOT), path=str(path), torn=torn)
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, check=False
    )
    assert done.returncode == 3, done.stderr.decode()
    assert (path / "chunks" / "000001.pairs").exists()  # the unjournaled chunk file remains
    journal_size = (path / "journal").stat().st_size
    writer = open_writer(path)
    assert writer.completed == 4
    assert (path / "journal").stat().st_size <= journal_size  # a torn tail is cut off
    assert not (path / "chunks" / "000001.pairs").exists()
    run_to_end(writer)
    assert snapshot(path) == reference


def test_torn_journal_tail_is_ignored(tmp_path, reference):
    writer = open_writer(tmp_path / "v")
    writer.append(*batch(0))
    writer.close()
    with (tmp_path / "v" / "journal").open("ab") as handle:
        handle.write(b"\x00\x00\x01")  # half a length prefix
    run_to_end(open_writer(tmp_path / "v"))
    assert snapshot(tmp_path / "v") == reference


def test_a_damaged_record_before_the_last_is_not_a_torn_tail(tmp_path):
    writer = open_writer(tmp_path / "v")
    writer.append(*batch(0))
    writer.append(*batch(4))
    writer.close()
    journal = tmp_path / "v" / "journal"
    data = bytearray(journal.read_bytes())
    header_length = int.from_bytes(data[:4], "big") + 36
    data[header_length + 10] ^= 1  # inside the first chunk record
    journal.write_bytes(bytes(data))
    with pytest.raises(VaultIntegrityError, match="journal: the record at byte"):
        open_writer(tmp_path / "v")


def _disk_full_after(limit):
    """A write_all that stores ``limit`` bytes of the next write, then fails as a full disk."""
    original = vault_files.write_all

    def write_all(fd, data):
        original(fd, bytes(data)[:limit])
        raise OSError(errno.ENOSPC, "No space left on device")

    return write_all


@pytest.mark.parametrize("failing_write", ["chunk", "journal"])
def test_disk_full_during_append(tmp_path, monkeypatch, reference, failing_write):
    writer = open_writer(tmp_path / "v")
    writer.append(*batch(0))
    before = snapshot(tmp_path / "v")
    original = vault_files.write_all
    calls = []

    def write_all(fd, data):
        calls.append(len(data))
        if len(calls) == (1 if failing_write == "chunk" else 2):
            return _disk_full_after(5)(fd, data)
        return original(fd, data)

    monkeypatch.setattr(vault_files, "write_all", write_all)
    with pytest.raises(VaultStorageError, match=r"disk is full.*can be resumed") as caught:
        writer.append(*batch(4))
    assert caught.value.errno == errno.ENOSPC
    assert snapshot(tmp_path / "v") == before and writer.completed == 4
    monkeypatch.undo()
    writer.append(*batch(4))  # the same writer goes on once there is room
    writer.close()
    run_to_end(open_writer(tmp_path / "v"))
    assert snapshot(tmp_path / "v") == reference


def test_disk_full_while_finishing(tmp_path, monkeypatch, reference):
    writer = open_writer(tmp_path / "v")
    for start in (0, 4, 8):
        writer.append(*batch(start))
    monkeypatch.setattr(vault_files, "write_all", _disk_full_after(10))
    with pytest.raises(VaultStorageError, match=r"manifest.*disk is full"):
        writer.finish()
    monkeypatch.undo()
    assert not (tmp_path / "v" / "manifest.msgpack").exists()
    assert not list((tmp_path / "v").glob(".tmp-*"))
    writer.finish()
    assert snapshot(tmp_path / "v") == reference
    Vault.open(tmp_path / "v")


def test_disk_full_while_creating_leaves_nothing(tmp_path, monkeypatch):
    monkeypatch.setattr(vault_files, "write_all", _disk_full_after(0))
    with pytest.raises(VaultStorageError, match="create the vault: the disk is full"):
        open_writer(tmp_path / "v")
    assert list(tmp_path.iterdir()) == []


RESUME_DAMAGE = [
    ("modified chunk", lambda v: (v / "chunks/000000.pairs").write_bytes(b"x"), "000000.pairs"),
    ("missing chunk", lambda v: (v / "chunks/000000.pairs").unlink(), "000000.pairs"),
    ("modified secret", lambda v: (v / "secret.key").write_bytes(bytes(32)), "secret.key"),
    ("short secret", lambda v: (v / "secret.key").write_bytes(bytes(3)), "secret.key"),
    ("extra file", lambda v: (v / "notes.txt").write_text("x"), "notes.txt"),
    ("no chunks directory", lambda v: __import__("shutil").rmtree(v / "chunks"), "chunks"),
    (
        "garbage journal",
        lambda v: (v / "journal").write_bytes(b"\0\0\0\1\xc0" + bytes(32)),
        "journal",
    ),
]


@pytest.mark.parametrize(
    ("case", "damage", "named"), RESUME_DAMAGE, ids=[c[0] for c in RESUME_DAMAGE]
)
def test_resume_checks_what_was_written(tmp_path, case, damage, named):
    writer = open_writer(tmp_path / "v")
    writer.append(*batch(0))
    writer.close()
    damage(tmp_path / "v")
    with pytest.raises(VaultIntegrityError, match=named):
        open_writer(tmp_path / "v")


def test_resume_without_a_secret_uses_the_stored_one(tmp_path, reference):
    writer = open_writer(tmp_path / "v")
    writer.append(*batch(0))
    writer.close()
    arguments = {key: value for key, value in ARGUMENTS.items() if key != "secret"}
    resumed = VaultWriter.create_or_resume(tmp_path / "v", **arguments)
    assert resumed.secret == SECRET
    run_to_end(resumed)
    assert snapshot(tmp_path / "v") == reference


def test_fsync_order(tmp_path, monkeypatch):
    """A chunk is durable (file, rename, directory) before its journal record is written."""
    writer = open_writer(tmp_path / "v")
    events = []
    real_replace = os.replace

    def fsync(fd):
        name = os.readlink(f"/proc/self/fd/{fd}").removeprefix(str(tmp_path))
        events.append(("fsync", re.sub(r"\.[^./]+\.tmp$", ".*.tmp", name)))  # random part

    def replace(source, target):
        events.append(("rename", str(target).removeprefix(str(tmp_path))))
        real_replace(source, target)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    writer.append(*batch(0))
    assert events == [
        ("fsync", "/v/chunks/.tmp-000000.pairs.*.tmp"),
        ("rename", "/v/chunks/000000.pairs"),
        ("fsync", "/v/chunks"),
        ("fsync", "/v/journal"),
    ]
    events.clear()
    writer.append(*batch(4))
    writer.append(*batch(8))
    events.clear()
    writer.finish()
    assert events == [
        ("fsync", "/v/.tmp-manifest.msgpack.*.tmp"),
        ("rename", "/v/manifest.msgpack"),
        ("fsync", "/v"),
    ]


def test_write_vault_resumes_after_an_interruption(tmp_path, monkeypatch, reference):
    real_append = JournalAppender.append
    calls = []

    def append_twice(self, value):
        calls.append(1)
        if len(calls) == 3:
            raise KeyboardInterrupt
        real_append(self, value)

    arguments = {key: ARGUMENTS[key] for key in ("source", "config", "secret")}
    monkeypatch.setattr(JournalAppender, "append", append_twice)
    with pytest.raises(KeyboardInterrupt):
        write_vault(tmp_path / "v", "image", *items(), batch_items=BATCH, **arguments)
    monkeypatch.undo()
    assert sorted(p.name for p in (tmp_path / "v" / "chunks").iterdir()) == [
        "000000.pairs",
        "000001.pairs",
    ]
    write_vault(tmp_path / "v", "image", *items(), batch_items=BATCH, **arguments)
    assert snapshot(tmp_path / "v") == reference
