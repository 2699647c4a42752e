"""Atomic, durable file writes: the one writer every role uses for a file it must not tear.

:func:`write_atomically` puts the content in a temporary file of the target's own
directory (so the rename cannot cross file systems), flushes and fsyncs it, gives it
its final mode whatever the umask, moves it into place (``os.replace``, or ``os.link``
when the target must not exist yet) and fsyncs the directory, so that the new entry
survives a crash too. A crash at any point leaves either the old file (or none) or
the complete new one, never a partial one; a failure at any point removes the
temporary file and leaves the target as it was.

:func:`fsync_directory` is the last step on its own, for writers that publish a
whole staging folder by renaming it.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

#: What :func:`write_atomically` writes: the bytes, or a function that writes them to
#: the open temporary file (a PNG encoder, ``torch.save``, a writer that fails on
#: purpose in a test).
Content = bytes | Callable[[BinaryIO], None]


def fsync_directory(directory: Path) -> None:
    """Make the entries of ``directory`` (creations, renames, removals) durable."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomically(
    path: Path,
    content: Content,
    *,
    mode: int = 0o644,
    exclusive: bool = False,
    temp_prefix: str | None = None,
) -> None:
    """Write ``path`` atomically and durably, with permission bits ``mode``.

    ``exclusive`` refuses to replace an existing file: the complete file is linked
    into place, which raises :class:`FileExistsError` if ``path`` exists, even one
    that appeared during the write. The temporary file is named ``temp_prefix``
    (default ``.<name>.``) followed by random characters and ``.tmp``, so a reader of
    the directory can recognise one a crash left. Errors of ``content`` propagate
    unchanged, and so do those of the file system (:class:`OSError`), except that one
    naming the temporary file names ``path`` instead (a user never hears of the
    temporary file).
    """
    prefix = temp_prefix if temp_prefix is not None else f".{path.name}."
    try:
        fd, name = tempfile.mkstemp(dir=path.parent, prefix=prefix, suffix=".tmp")
    except OSError as exc:
        raise OSError(exc.errno, exc.strerror, str(path)) from None
    temporary = Path(name)
    try:
        with os.fdopen(fd, "wb") as stream:
            os.fchmod(stream.fileno(), mode)
            if isinstance(content, bytes):
                stream.write(content)
            else:
                content(stream)
            stream.flush()
            os.fsync(stream.fileno())
        if exclusive:
            os.link(temporary, path)
            temporary.unlink()
        else:
            os.replace(temporary, path)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            temporary.unlink()
        if isinstance(exc, OSError) and exc.filename == name:
            raise OSError(exc.errno, exc.strerror, str(path)) from None
        raise
    fsync_directory(path.parent)
