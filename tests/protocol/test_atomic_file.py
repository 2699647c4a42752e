"""The one atomic writer (twinaudit.protocol.atomic_file): all or nothing, and durable."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import BinaryIO

import pytest

from twinaudit.protocol import atomic_file
from twinaudit.protocol.atomic_file import fsync_directory, write_atomically


def _names(folder: Path) -> list[str]:
    return sorted(entry.name for entry in folder.iterdir())


def test_writes_the_bytes_with_the_mode_whatever_the_umask(tmp_path):
    target = tmp_path / "f.bin"
    previous = os.umask(0o077)
    try:
        write_atomically(target, b"one")
    finally:
        os.umask(previous)
    assert target.read_bytes() == b"one"
    assert stat.S_IMODE(target.stat().st_mode) == 0o644
    write_atomically(target, b"two", mode=0o600)
    assert target.read_bytes() == b"two"
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    assert _names(tmp_path) == ["f.bin"]


def test_a_content_function_writes_to_the_stream(tmp_path):
    def write(stream: BinaryIO) -> None:
        stream.write(b"ab")
        stream.write(b"cd")

    write_atomically(tmp_path / "f", write)
    assert (tmp_path / "f").read_bytes() == b"abcd"


@pytest.mark.parametrize("where", ["content", "fsync", "replace"])
def test_a_failure_mid_write_leaves_the_old_file_and_no_temporary_file(
    tmp_path, monkeypatch, where
):
    target = tmp_path / "f.bin"
    target.write_bytes(b"old")

    def full(*_: object) -> None:
        raise OSError(28, "No space left on device")

    def half_then_full(stream: BinaryIO) -> None:
        stream.write(b"new, half")
        stream.flush()
        full()

    if where == "fsync":
        monkeypatch.setattr(os, "fsync", full)
    if where == "replace":
        monkeypatch.setattr(os, "replace", full)
    content = half_then_full if where == "content" else b"new"
    with pytest.raises(OSError, match="No space"):
        write_atomically(target, content)
    assert target.read_bytes() == b"old"
    assert _names(tmp_path) == ["f.bin"]


def test_an_exception_of_the_content_function_propagates_and_cleans_up(tmp_path):
    def broken(stream: BinaryIO) -> None:
        stream.write(b"x")
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        write_atomically(tmp_path / "f", broken)
    assert _names(tmp_path) == []


def test_the_file_then_the_directory_are_fsynced_after_the_rename(tmp_path, monkeypatch):
    events: list[tuple[str, str]] = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd: int) -> None:
        events.append(("fsync", os.readlink(f"/proc/self/fd/{fd}")))
        real_fsync(fd)

    def replace(source: str | os.PathLike[str], target: str | os.PathLike[str]) -> None:
        events.append(("rename", str(target)))
        real_replace(source, target)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    target = tmp_path / "f.bin"
    write_atomically(target, b"data", temp_prefix=".tmp-f.bin.")
    assert len(events) == 3
    assert events[0][0] == "fsync"
    assert Path(events[0][1]).parent == tmp_path
    assert Path(events[0][1]).name.startswith(".tmp-f.bin.")
    assert Path(events[0][1]).name.endswith(".tmp")
    assert events[1:] == [("rename", str(target)), ("fsync", str(tmp_path))]


def test_exclusive_refuses_an_existing_file_and_leaves_it(tmp_path, monkeypatch):
    target = tmp_path / "key"
    target.write_bytes(b"earlier")
    with pytest.raises(FileExistsError) as raised:
        write_atomically(target, b"new", exclusive=True)
    assert raised.value.filename == str(target)  # the target, never the temporary file
    assert target.read_bytes() == b"earlier"
    assert _names(tmp_path) == ["key"]
    synced: list[int] = []
    monkeypatch.setattr(os, "fsync", synced.append)
    write_atomically(tmp_path / "other", b"new", mode=0o600, exclusive=True)
    assert (tmp_path / "other").read_bytes() == b"new"
    assert _names(tmp_path) == ["key", "other"]
    assert len(synced) == 2  # the file, then the directory


def test_exclusive_refuses_a_file_that_appears_during_the_write(tmp_path):
    target = tmp_path / "f"

    def racing(stream: BinaryIO) -> None:
        target.write_bytes(b"the other writer's")
        stream.write(b"mine")

    with pytest.raises(FileExistsError):
        write_atomically(target, racing, exclusive=True)
    assert target.read_bytes() == b"the other writer's"
    assert _names(tmp_path) == ["f"]


def test_a_missing_folder_is_reported_by_the_target_name(tmp_path):
    target = tmp_path / "missing" / "f"
    with pytest.raises(FileNotFoundError) as raised:
        write_atomically(target, b"x")
    assert raised.value.filename == str(target)
    assert not (tmp_path / "missing").exists()


def test_fsync_directory_syncs_the_folder_itself(tmp_path, monkeypatch):
    synced: list[str] = []
    monkeypatch.setattr(
        atomic_file.os, "fsync", lambda fd: synced.append(os.readlink(f"/proc/self/fd/{fd}"))
    )
    fsync_directory(tmp_path)
    assert synced == [str(tmp_path)]
