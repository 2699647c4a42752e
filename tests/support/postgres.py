"""The PostgreSQL server of the tests: found through ``TWINAUDIT_TEST_PG_DSN``, else skipped.

CI starts a throw-away server with ``scripts/ci-postgres.sh`` and exports the variable;
without it (or without psycopg, or with the server unreachable) a test that needs it is
skipped with the reason. Each test gets a fresh schema, dropped afterwards.
"""

from __future__ import annotations

import functools
import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from urllib.parse import quote

import pytest

#: The environment variable that names the test server's DSN.
PG_DSN_VAR = "TWINAUDIT_TEST_PG_DSN"


@functools.cache
def _probe() -> tuple[str | None, str]:
    dsn = os.environ.get(PG_DSN_VAR)
    if not dsn:
        return None, f"PostgreSQL tests need {PG_DSN_VAR} (see scripts/ci-postgres.sh)"
    try:
        import psycopg
    except ImportError:
        return None, "PostgreSQL tests need psycopg (pip install -e '.[postgres]')"
    try:
        psycopg.connect(dsn, connect_timeout=3).close()
    except psycopg.Error as exc:
        return None, f"PostgreSQL at {PG_DSN_VAR} is unreachable: {exc}"
    return dsn, ""


def postgres_dsn() -> str:
    """Return the test server's DSN, or skip (with the reason) when there is none."""
    dsn, why = _probe()
    if dsn is None:
        pytest.skip(why)
    return dsn


def with_search_path(dsn: str, schema: str) -> str:
    """Return ``dsn`` with its tables in ``schema`` (as ``verifier serve --db`` takes it)."""
    separator = "&" if "?" in dsn else "?"
    return f"{dsn}{separator}options={quote(f'-csearch_path={schema}')}"


@contextmanager
def fresh_schema(prefix: str) -> Iterator[tuple[str, str]]:
    """Create an empty schema; yield the DSN and its name; drop it afterwards (or skip)."""
    import psycopg

    dsn = postgres_dsn()
    schema = f"{prefix}_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    try:
        yield dsn, schema
    finally:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
