"""The part of a DB-API cursor the escrow store's SQL core uses (:mod:`.sql`)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Protocol


class Cursor(Protocol):
    """The part of a DB-API cursor the core uses; SQL text uses ``?`` placeholders."""

    def execute(self, sql: str, params: Sequence[Any] = ..., /) -> object:
        """Run one statement."""

    def executemany(self, sql: str, params: Iterable[Sequence[Any]], /) -> object:
        """Run one statement once per parameter row."""

    def fetchone(self) -> Any:
        """Return the next row of the last query, or None."""

    def fetchall(self) -> list[Any]:
        """Return the remaining rows of the last query."""
