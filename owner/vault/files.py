"""Durable file operations: atomic writes, directory fsyncs, bounded and streaming reads.

Every write of the vault goes through :func:`write_all`, so that a test can make the
"disk" fail at any point. An atomic write is the project's one atomic writer
(:mod:`twinaudit.protocol.atomic_file`, mode 0600, its temporary file named with
:data:`~.layout.TEMP_PREFIX`): temporary file of the same directory, fsync, rename into
place, fsync of the directory; after a crash the file is either absent or complete.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import stat
from collections.abc import Sequence
from pathlib import Path
from typing import BinaryIO

from twinaudit.protocol.atomic_file import fsync_directory, write_atomically
from twinaudit.protocol.errors import StateError

from .layout import FILE_MODE, READ_BLOCK_BYTES, TEMP_PREFIX


def write_all(fd: int, data: bytes | memoryview) -> None:
    """Write every byte of ``data`` to the file descriptor ``fd``."""
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


#: Make the entries of a directory (creations, renames, removals) durable.
fsync_dir = fsync_directory


def remove_if_present(path: Path) -> None:
    """Remove ``path`` if it exists."""
    with contextlib.suppress(FileNotFoundError):
        path.unlink()


def write_new_file(path: Path, data: bytes | Sequence[bytes]) -> None:
    """Create ``path`` (which must not exist) with ``data``, mode 0600, fsynced.

    ``data`` is the file's bytes, or pieces whose concatenation they are. The directory
    is not fsynced: the caller does it once for several files.
    """
    pieces = [data] if isinstance(data, bytes) else data
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE)
    try:
        os.fchmod(fd, FILE_MODE)  # whatever the umask
        for piece in pieces:
            write_all(fd, piece)
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        remove_if_present(path)
        raise
    os.close(fd)


def write_atomic(path: Path, data: bytes | Sequence[bytes]) -> None:
    """Write ``path`` atomically (mode 0600): temp file, fsync, rename, fsync the directory.

    ``data`` is the file's bytes, or pieces whose concatenation they are. On any failure
    the temporary file is removed and ``path`` is as it was.
    """
    pieces = [data] if isinstance(data, bytes) else data

    def write(stream: BinaryIO) -> None:
        for piece in pieces:
            write_all(stream.fileno(), piece)

    write_atomically(path, write, mode=FILE_MODE, temp_prefix=f"{TEMP_PREFIX}{path.name}.")


def read_bounded(path: Path, limit: int) -> bytes:
    """Return the contents of ``path``, or its first ``limit + 1`` bytes if it is longer.

    The buffer is sized by the file, not by ``limit`` (a read of ``n`` bytes allocates
    ``n`` up front).
    """
    with path.open("rb") as handle:
        size = os.fstat(handle.fileno()).st_size
        return handle.read(min(size, limit) + 1)


def sha256_file(path: Path) -> bytes:
    """Return the SHA-256 of the file ``path``, read in bounded pieces."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while block := handle.read(READ_BLOCK_BYTES):
            digest.update(block)
    return digest.digest()


def list_tree(root: Path) -> tuple[set[str], set[str], list[str]]:
    """List ``root`` recursively.

    Returns ``(files, directories, others)``: relative POSIX paths of the regular files,
    of the directories, and of anything else (symbolic links, sockets, ...).
    """
    files: set[str] = set()
    directories: set[str] = set()
    others: list[str] = []
    pending = [(root, "")]
    while pending:
        directory, prefix = pending.pop()
        with os.scandir(directory) as entries:
            for entry in entries:
                relative = prefix + entry.name
                mode = entry.stat(follow_symlinks=False).st_mode
                if stat.S_ISREG(mode):
                    files.add(relative)
                elif stat.S_ISDIR(mode):
                    directories.add(relative)
                    pending.append((Path(entry.path), relative + "/"))
                else:
                    others.append(relative)
    return files, directories, sorted(others)


def remove_quietly(path: Path) -> None:
    """Remove ``path`` if it exists, ignoring errors (cleanup after a failure)."""
    with contextlib.suppress(OSError):
        remove_if_present(path)


class DirectoryLock:
    """An exclusive, non-blocking ``flock`` on a directory: one writer of a vault at a time."""

    def __init__(self, path: Path) -> None:
        """Prepare to lock the directory ``path``."""
        self._path = path
        self._fd: int | None = None

    def acquire(self) -> None:
        """Take the lock, or raise StateError if another process (or writer) holds it."""
        fd = os.open(self._path, os.O_RDONLY | os.O_DIRECTORY)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise StateError(f"vault {self._path} is being written by another writer") from None
        self._fd = fd

    def release(self) -> None:
        """Release the lock (closing the descriptor releases it)."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> DirectoryLock:
        """Take the lock."""
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        """Release the lock."""
        self.release()


def tree_bytes(root: Path) -> int:
    """Return the bytes of the regular files under ``root`` (links are not followed)."""
    present, _, _ = list_tree(root)
    return sum((root / name).stat().st_size for name in present)
