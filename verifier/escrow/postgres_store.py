"""The escrow store on PostgreSQL (psycopg 3), for arbiters that share one database.

Appends are serialised by the row lock on the log's head row: every write
transaction starts with ``SELECT ... FROM escrow_head ... FOR UPDATE``, so two arbiter
processes can never assign the same log index; the second waits, then catches up with
the entries the first appended before it appends its own. Read transactions run at
``REPEATABLE READ``, so each sees one snapshot. The session sets
``synchronous_commit = on``, so a commit returns only once its WAL record is flushed
(whatever the server's default), which is what lets a receipt be signed after it; a
server running with ``fsync = off`` is refused.
Concurrent first-time schema creation is serialised by a transaction-level advisory
lock.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from typing import Any, ClassVar, Final, LiteralString

import psycopg
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from psycopg import sql

from twinaudit.protocol.errors import InputError, StateError
from twinaudit.protocol.signer import Signer

from .cursor import Cursor
from .sql import SqlDatabase
from .sql_store import SqlEscrowStore

#: Seconds to wait for the server when connecting.
DEFAULT_CONNECT_TIMEOUT_S: Final = 10
#: Key of the advisory lock that serialises schema creation ("twinaudit" in ASCII, folded).
SCHEMA_LOCK_KEY: Final = 0x7477696E61756474
_SCHEMA_NAME_MAX: Final = 63  # PostgreSQL's identifier limit (NAMEDATALEN - 1)


@functools.cache
def _query(text: str) -> LiteralString:
    """Translate the core's ``?`` placeholders to psycopg's ``%s``.

    The core's statements are string constants of this package (never user input), so
    treating them as literal strings is sound.
    """
    return text.replace("?", "%s")  # type: ignore[return-value,unused-ignore]


class _PgCursor:
    """A psycopg cursor speaking the core's :class:`~.sql.Cursor` protocol."""

    def __init__(self, cursor: psycopg.Cursor[Any]) -> None:
        self._cursor = cursor

    def execute(self, text: str, params: Sequence[Any] = (), /) -> object:
        return self._cursor.execute(_query(text), params)

    def executemany(self, text: str, params: Iterable[Sequence[Any]], /) -> object:
        self._cursor.executemany(_query(text), params)
        return None

    def fetchone(self) -> Any:
        return self._cursor.fetchone()

    def fetchall(self) -> list[Any]:
        return self._cursor.fetchall()


class PostgresDatabase(SqlDatabase):
    """The PostgreSQL dialect and connection of a :class:`PostgresEscrowStore`."""

    BEGIN_READ: ClassVar[str] = "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"
    BEGIN_WRITE: ClassVar[str] = "BEGIN ISOLATION LEVEL READ COMMITTED"
    LOCK_HEAD_SUFFIX: ClassVar[str] = " FOR UPDATE"
    SCHEMA_LOCK: ClassVar[str | None] = f"SELECT pg_advisory_xact_lock({SCHEMA_LOCK_KEY})"
    NOW_QUERY: ClassVar[str] = "SELECT EXTRACT(EPOCH FROM clock_timestamp())::float8"
    TYPES: ClassVar[dict[str, str]] = {
        "int": "BIGINT",
        "real": "DOUBLE PRECISION",
        "blob": "BYTEA",
        "serial": "BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY",
        "keyed": "",
    }

    def __init__(self, dsn: str, schema: str | None, connect_timeout_s: int) -> None:
        """Name the database (``dsn``) and the PostgreSQL schema to keep the tables in."""
        super().__init__()
        if schema is not None and (
            not schema.isascii()
            or not schema.replace("_", "a").isalnum()
            or not 1 <= len(schema) <= _SCHEMA_NAME_MAX
            or schema[0].isdigit()
        ):
            raise InputError(f"schema name {schema!r} must be an ASCII identifier")
        self._dsn = dsn
        self._schema = schema
        self._connect_timeout_s = connect_timeout_s
        self._conn: psycopg.Connection[Any] | None = None

    def _connect(self) -> Cursor:
        conn = psycopg.connect(self._dsn, autocommit=True, connect_timeout=self._connect_timeout_s)
        try:
            conn.execute("SET synchronous_commit TO on")
            for setting in ("fsync", "synchronous_commit"):
                row = conn.execute(sql.SQL("SHOW {}").format(sql.Identifier(setting))).fetchone()
                if row is None or row[0] != "on":
                    raise StateError(
                        f"the PostgreSQL server runs with {setting} off: escrow receipts"
                        " would not be durable"
                    )
            if self._schema is not None:
                name = sql.Identifier(self._schema)
                with conn.transaction():
                    lock = sql.SQL("SELECT pg_advisory_xact_lock({})").format(SCHEMA_LOCK_KEY)
                    conn.execute(lock)
                    conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(name))
                conn.execute(sql.SQL("SET search_path TO {}").format(name))
        except BaseException:
            conn.close()
            raise
        self._conn = conn
        return _PgCursor(conn.cursor())

    def _connection_lost(self, error: BaseException | None) -> bool:
        """Return whether the server connection is closed or broken (dropped, restarted)."""
        if error is not None and not isinstance(error, psycopg.OperationalError):
            return False
        conn = self._conn
        return conn is None or conn.closed or conn.broken

    def _disconnect(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None


class PostgresEscrowStore(SqlEscrowStore):
    """An :class:`~twinaudit.verifier.escrow.store.EscrowStore` in a PostgreSQL database."""

    def __init__(
        self,
        dsn: str,
        signing_key: Signer | Ed25519PrivateKey,
        *,
        schema: str | None = None,
        clock: Callable[[], datetime] | None = None,
        entropy: Callable[[int], bytes] | None = None,
        connect_timeout_s: int = DEFAULT_CONNECT_TIMEOUT_S,
    ) -> None:
        """Open (creating tables if needed) the store in database ``dsn``.

        ``schema`` names a PostgreSQL schema to keep the tables in (created if
        missing); by default they go where the connection's ``search_path`` says.
        """
        super().__init__(
            PostgresDatabase(dsn, schema, connect_timeout_s),
            signing_key,
            clock=clock,
            entropy=entropy,
        )
