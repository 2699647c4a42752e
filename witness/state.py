"""A witness's state in SQLite: per log origin, the last checkpoint it cosigned.

One row per origin: the tree size (as decimal text: a size may reach 2^64 - 1, above
SQLite's integers), its root and the cosigned note (the log's signature
and the witness's cosignature), which the monitoring endpoint serves. A row only ever
moves forward, by :meth:`WitnessState.advance`, a compare-and-swap: the update names
the size and root the caller checked its proof against, and takes effect only if they
are still the stored ones, inside one ``BEGIN IMMEDIATE`` transaction. Two requests that
race (the C2SP text's rollback example) cannot both advance the row: the loser is told
the size that won, and its cosignature is never returned.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from twinaudit.protocol.errors import StateError
from twinaudit.protocol.merkle import EMPTY_ROOT

_SCHEMA: Final = (
    "CREATE TABLE IF NOT EXISTS witness_log ("
    " origin TEXT PRIMARY KEY, size TEXT NOT NULL, root BLOB NOT NULL, note BLOB NOT NULL)"
)
#: Seconds a writer waits for another's transaction before giving up.
BUSY_TIMEOUT_S: Final = 10.0


@dataclass(frozen=True)
class LogState:
    """What a witness holds for one origin: size and root (0 and ``H()`` before any)."""

    size: int
    root: bytes
    note: bytes | None = None


#: The state of an origin the witness never cosigned.
NEVER_COSIGNED: Final = LogState(0, EMPTY_ROOT)


class WitnessState:
    """The SQLite file of one witness (safe to share between threads and processes)."""

    def __init__(self, path: Path) -> None:
        """Open (or create) the database at ``path``."""
        self._path = path
        with self._connect() as conn:
            conn.execute(_SCHEMA)

    def _connect(self) -> sqlite3.Connection:
        try:
            conn = sqlite3.connect(self._path, timeout=BUSY_TIMEOUT_S, isolation_level=None)
        except sqlite3.Error as exc:
            raise StateError(f"cannot open the witness database {self._path}: {exc}") from None
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=FULL")
        return conn

    def get(self, origin: str) -> LogState:
        """Return the state of ``origin`` (:data:`NEVER_COSIGNED` if it has none)."""
        conn = self._connect()
        try:
            row = conn.execute(
                "SELECT size, root, note FROM witness_log WHERE origin = ?", (origin,)
            ).fetchone()
        finally:
            conn.close()
        if row is None:
            return NEVER_COSIGNED
        return LogState(int(row[0]), bytes(row[1]), bytes(row[2]))

    def advance(self, origin: str, expected: LogState, new: LogState) -> LogState | None:
        """Store ``new`` for ``origin`` if its state is still ``expected``; else return it.

        Returns None when ``new`` was stored (durably, before returning), and otherwise
        the state another request stored meanwhile, unchanged.
        """
        if new.note is None or new.size < expected.size:
            raise StateError("a witness's state only moves forward, with its note")
        conn = self._connect()
        try:
            conn.execute("BEGIN IMMEDIATE")
            row = conn.execute(
                "SELECT size, root, note FROM witness_log WHERE origin = ?", (origin,)
            ).fetchone()
            current = NEVER_COSIGNED if row is None else LogState(int(row[0]), bytes(row[1]))
            if (current.size, current.root) != (expected.size, expected.root):
                conn.execute("ROLLBACK")
                return current
            conn.execute(
                "INSERT INTO witness_log (origin, size, root, note) VALUES (?, ?, ?, ?)"
                " ON CONFLICT (origin) DO UPDATE SET size = excluded.size,"
                " root = excluded.root, note = excluded.note",
                (origin, str(new.size), new.root, new.note),
            )
            conn.execute("COMMIT")
            return None
        except sqlite3.Error as exc:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise StateError(f"the witness database {self._path} failed: {exc}") from None
        finally:
            conn.close()
