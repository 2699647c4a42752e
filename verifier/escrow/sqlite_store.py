"""The escrow store on SQLite: one file, WAL journal, ``synchronous=FULL``.

In WAL mode with ``synchronous=FULL`` SQLite flushes the write-ahead log to disk at
every commit, so a commit that returned survives a crash or power loss; a transaction
that did not commit is discarded when the database is next opened. ``BEGIN IMMEDIATE``
takes the database's write lock before the head row is read, so appends from several
threads or processes are serialised. The file is created with mode 0600: it holds
every record's secret ``rho``.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import ClassVar, Final

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from twinaudit.protocol.atomic_file import write_atomically
from twinaudit.protocol.errors import InputError, StateError
from twinaudit.protocol.signer import Signer

from .cursor import Cursor
from .sql import SqlDatabase
from .sql_store import SqlEscrowStore

#: How long a writer waits for another process's write lock, in seconds.
DEFAULT_BUSY_TIMEOUT_S: Final = 30.0
_SYNCHRONOUS_FULL: Final = 2  # PRAGMA synchronous reports FULL as 2


class SqliteDatabase(SqlDatabase):
    """The SQLite dialect and connection of a :class:`SqliteEscrowStore`."""

    BEGIN_READ: ClassVar[str] = "BEGIN DEFERRED"
    BEGIN_WRITE: ClassVar[str] = "BEGIN IMMEDIATE"
    # julianday() counts days from noon, 24 November 4714 BC; the epoch is day 2440587.5.
    NOW_QUERY: ClassVar[str] = "SELECT (julianday('now') - 2440587.5) * 86400.0"
    TYPES: ClassVar[dict[str, str]] = {
        "int": "INTEGER",
        "real": "REAL",
        "blob": "BLOB",
        "serial": "INTEGER PRIMARY KEY AUTOINCREMENT",
        "keyed": " WITHOUT ROWID",
    }

    def __init__(self, path: str | os.PathLike[str], busy_timeout_s: float) -> None:
        """Name the database file (a plain path; it is created with mode 0600)."""
        super().__init__()
        if str(path) == ":memory:" or str(path).startswith("file:"):
            raise InputError("an escrow store needs a plain database file path")
        self._path = Path(path)
        self._busy_timeout_s = busy_timeout_s
        self._conn: sqlite3.Connection | None = None

    def _connect(self) -> Cursor:
        _create_private_file(self._path)
        conn = sqlite3.connect(
            self._path,
            timeout=self._busy_timeout_s,
            isolation_level=None,  # transactions are explicit (BEGIN ... COMMIT)
            check_same_thread=False,  # the database's lock serialises all use
        )
        try:
            mode = conn.execute("PRAGMA journal_mode=WAL").fetchone()[0]
            if str(mode).lower() != "wal":
                raise StateError(f"{self._path}: cannot use the WAL journal (got {mode!r})")
            conn.execute("PRAGMA synchronous=FULL")
            if conn.execute("PRAGMA synchronous").fetchone()[0] != _SYNCHRONOUS_FULL:
                raise StateError(f"{self._path}: cannot set synchronous=FULL")
        except BaseException:
            conn.close()
            raise
        self._conn = conn
        return conn.cursor()

    def _disconnect(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None


class SqliteEscrowStore(SqlEscrowStore):
    """An :class:`~twinaudit.verifier.escrow.store.EscrowStore` in one SQLite database file."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        signing_key: Signer | Ed25519PrivateKey,
        *,
        clock: Callable[[], datetime] | None = None,
        entropy: Callable[[int], bytes] | None = None,
        busy_timeout_s: float = DEFAULT_BUSY_TIMEOUT_S,
    ) -> None:
        """Open (creating if needed) the store in the database file ``path``."""
        super().__init__(
            SqliteDatabase(path, busy_timeout_s), signing_key, clock=clock, entropy=entropy
        )


def _create_private_file(path: Path) -> None:
    """Create ``path`` empty with mode 0600 if it does not exist, durably (dir fsync)."""
    if path.exists():
        return
    with contextlib.suppress(FileExistsError):  # another process created it meanwhile
        write_atomically(path, b"", mode=0o600, exclusive=True)
