"""Crash durability of the escrow store: SIGKILL a committing process at random moments.

A child process commits from several threads and prints each receipt the moment
``commit`` returns it. The parent kills the child with SIGKILL at a random moment,
reopens the store (which rebuilds the log and checks it against the stored head and
checkpoints), and checks that every receipt that was printed is in the log and
verifies, that no partial entry exists, and that the log extends every checkpoint
taken after earlier rounds. SQLite always; PostgreSQL when ``TWINAUDIT_TEST_PG_DSN``
names a reachable server.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.keys import KEY
from twinaudit.protocol.escrow_messages import (
    Checkpoint,
    open_receipt,
    verify_log_extension,
    verify_receipt,
)
from twinaudit.verifier.escrow.sql_store import SqlEscrowStore
from twinaudit.verifier.escrow.store import StoredEntry

REPO = Path(__file__).resolve().parents[2]
PG_DSN_VAR = "TWINAUDIT_TEST_PG_DSN"
SEED = 20261121
CHILD_THREADS = 4
#: How long the first commit may take: imports and opening the store, on a loaded
#: 2-core machine (the whole suite beside other work) more than 30 s.
STARTUP_TIMEOUT_S = 120.0

CHILD = r"""
import sys, threading
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from twinaudit.protocol.escrow_messages import EscrowRequest

key = Ed25519PrivateKey.from_private_bytes(bytes(range(32)))
kind, where, extra, round_ = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
if kind == "sqlite":
    from twinaudit.verifier.escrow.sqlite_store import SqliteEscrowStore
    store = SqliteEscrowStore(where, key)
else:
    from twinaudit.verifier.escrow.postgres_store import PostgresEscrowStore
    store = PostgresEscrowStore(where, key, schema=extra)
out = threading.Lock()

def work(worker):
    n = 0
    while True:
        n += 1
        root = (round_ * 1_000_000 + worker * 100_000 + n).to_bytes(32, "big")
        request = EscrowRequest(root=root, n_pairs=n, item_kind="text", owner=f"w{worker}")
        receipt = store.commit(request)
        with out:
            sys.stdout.buffer.write(receipt + b"\n")
            sys.stdout.buffer.flush()

for worker in range(int(sys.argv[5])):
    threading.Thread(target=work, args=(worker,), daemon=True).start()
threading.Event().wait()
"""


class _Reader(threading.Thread):
    """Collects the complete lines a child prints; a line cut by the kill is dropped."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        super().__init__(daemon=True)
        self.proc = proc
        self.lines: list[bytes] = []
        self.first = threading.Event()

    def run(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.endswith(b"\n"):
                self.lines.append(line[:-1])
                self.first.set()


def _run_and_kill(argv: list[str], rng: random.Random, wait_first: bool) -> list[bytes]:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    with tempfile.TemporaryFile() as child_stderr:  # its traceback, should it fail
        proc = subprocess.Popen(
            [sys.executable, "-c", CHILD, *argv, str(CHILD_THREADS)],
            cwd=REPO,
            env=env,
            stdout=subprocess.PIPE,
            stderr=child_stderr,
        )
        reader = _Reader(proc)
        reader.start()
        try:
            if wait_first and not reader.first.wait(STARTUP_TIMEOUT_S):
                child_stderr.seek(0)
                told = child_stderr.read().decode(errors="replace")[-2000:]
                state = "running" if proc.poll() is None else f"exited {proc.returncode}"
                raise AssertionError(f"the child never committed ({state}): {told}")
            if wait_first:
                time.sleep(rng.uniform(0.0, 0.3))
            else:  # anywhere, including while the store is being opened
                time.sleep(rng.uniform(0.0, 0.6))
        finally:
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            reader.join(10)
    return reader.lines


def _check_reopened(
    store: SqlEscrowStore, printed: list[bytes], checkpoints: list[Checkpoint]
) -> Checkpoint:
    size = store.size()
    # Every printed receipt is in the reopened log, with the same entry and rho.
    for signed in printed:
        position = open_receipt(signed, KEY.public_key())
        index = position.entry.index
        assert index < size, f"receipt for entry {index} printed, log has {size}"
        receipt = verify_receipt(
            signed,
            KEY.public_key(),
            expected_root=position.entry.root,
            expected_n_pairs=position.entry.n_pairs,
            expected_item_kind="text",
            inclusion_proof=store.inclusion_proof(index, position.log_size),
        )
        assert store.entry(index) == StoredEntry(receipt.entry, receipt.rho)
    # No partial entry: every stored entry decodes, with its own index and rho.
    for index in range(size):
        assert store.entry(index).entry.index == index
    # The log extends every checkpoint taken after earlier rounds.
    latest = store.latest_checkpoint().checkpoint
    for old in checkpoints:
        verify_log_extension(old, latest, store.consistency_proof(old.size, latest.size))
    return latest


def _crash_rounds(open_store, argv, rounds: int) -> None:
    rng = random.Random(SEED)
    printed_total: list[bytes] = []
    checkpoints: list[Checkpoint] = []
    for round_ in range(rounds):
        printed_total += _run_and_kill([*argv, str(round_)], rng, wait_first=round_ % 3 != 2)
        with open_store() as store:
            checkpoints.append(_check_reopened(store, printed_total, checkpoints))
    assert len(printed_total) >= rounds, "the children printed almost nothing"
    indices = [open_receipt(r, KEY.public_key()).entry.index for r in printed_total]
    assert len(set(indices)) == len(indices)


@pytest.mark.slow
def test_sigkill_during_sqlite_commits_loses_no_receipt(tmp_path):
    from twinaudit.verifier.escrow.sqlite_store import SqliteEscrowStore

    path = tmp_path / "escrow.db"
    _crash_rounds(lambda: SqliteEscrowStore(path, KEY), ["sqlite", str(path), "-"], rounds=6)


@pytest.fixture
def pg_schema() -> Iterator[tuple[str, str]]:
    dsn = os.environ.get(PG_DSN_VAR)
    if not dsn:
        pytest.skip(f"PostgreSQL tests need {PG_DSN_VAR} (see scripts/ci-postgres.sh)")
    try:
        import psycopg
    except ImportError:
        pytest.skip("PostgreSQL tests need psycopg (pip install -e '.[postgres]')")
    try:
        psycopg.connect(dsn, connect_timeout=3).close()
    except psycopg.Error as exc:
        pytest.skip(f"PostgreSQL at {PG_DSN_VAR} is unreachable: {exc}")
    schema = f"escrow_crash_{uuid.uuid4().hex[:12]}"
    try:
        yield dsn, schema
    finally:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")


def test_sigkill_during_postgres_commits_loses_no_receipt(pg_schema):
    from twinaudit.verifier.escrow.postgres_store import PostgresEscrowStore

    dsn, schema = pg_schema
    _crash_rounds(
        lambda: PostgresEscrowStore(dsn, KEY, schema=schema),
        ["postgres", dsn, schema],
        rounds=4,
    )
