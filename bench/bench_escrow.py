"""Escrow benchmark: durable commits per second, through the store API and through gRPC.

Run with ``python -m bench.bench_escrow`` (or ``python -m bench escrow``). Every figure
is 2,000 escrow commits into a fresh SQLite store (WAL, ``synchronous=FULL``: each
committed transaction is flushed to disk before its receipt is signed), each commit
returning a signed receipt:

1. through ``EscrowStore.commit`` from one thread: one disk flush per receipt, so this
   measures the disk's flush latency;
2. through ``EscrowStore.commit`` from CLIENTS threads: concurrent commits share a
   transaction (group commit), one flush serving many receipts;
3. through the gRPC service on 127.0.0.1 (plaintext), ``Commit`` calls from CLIENTS
   client threads in this process (the clients share the server's interpreter);
4. through the arbiter's own server (``serve_arbiter``, as ``verifier serve`` runs it:
   the logging and metrics interceptors on, every RPC logged as a text line, the
   escrow rate limiter on with a limit that never binds, so its cost is counted),
   ``Commit`` calls from CLIENTS threads spread over CLIENT_PROCESSES client processes,
   as owners are; the target is TARGET_PER_S;
5. the owner's full ``escrow_root`` over gRPC (Commit, GetInclusionProof, every check
   of §9.3 on the client) from CLIENTS client threads.

The machine's load average is printed before and after: other jobs share its cores.

With ``TWINAUDIT_TEST_PG_DSN`` set, figure 2 is repeated on PostgreSQL. A sample of the
receipts is verified after timing (outside the timed region).
"""

from __future__ import annotations

import io
import multiprocessing
import os
import resource
import tempfile
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from multiprocessing.synchronize import Event
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from twinaudit.owner.escrow_client import escrow_root
from twinaudit.protocol.escrow_messages import EscrowRequest, open_receipt, verify_receipt
from twinaudit.protocol.keys import raw_public_key
from twinaudit.verifier.escrow.rate_limit import RateLimit
from twinaudit.verifier.escrow.service import serve_escrow
from twinaudit.verifier.escrow.sql_store import SqlEscrowStore
from twinaudit.verifier.escrow.sqlite_store import SqliteEscrowStore
from twinaudit.verifier.server import serve_arbiter
from twinaudit.wire.escrow.v1 import escrow_pb2, escrow_pb2_grpc
from twinaudit.wire.observe import PrometheusMetrics, configure_logging
from twinaudit.wire.transport import make_channel

N_COMMITS = 2_000
CLIENTS = 16
CLIENT_PROCESSES = 2
#: A rate limit that never binds in the benchmark (its bookkeeping still runs).
UNBOUND_RATE = RateLimit(per_second=1e9, burst=1_000_000_000)
TARGET_PER_S = 500
KEY = Ed25519PrivateKey.from_private_bytes(bytes(range(32)))
#: The owners' claim key the records bind (spec §9.1).
CLAIM_KEY = raw_public_key(Ed25519PrivateKey.from_private_bytes(bytes(range(64, 96))).public_key())


def _request(i: int) -> EscrowRequest:
    return EscrowRequest(
        root=i.to_bytes(32, "big"),
        n_pairs=1000,
        item_kind="image",
        owner=f"bench-{i % 97}",
        claim_key=CLAIM_KEY,
    )


def _timed(threads: int, work: Callable[[int], object]) -> tuple[float, list[object]]:
    """Run ``work(i)`` for i < N_COMMITS on ``threads`` threads; return seconds and results."""
    start = time.perf_counter()
    if threads == 1:
        results = [work(i) for i in range(N_COMMITS)]
    else:
        with ThreadPoolExecutor(threads) as pool:
            results = list(pool.map(work, range(N_COMMITS)))
    return time.perf_counter() - start, results


def _check(store: SqlEscrowStore, receipts: list[object]) -> None:
    """Verify every 50th receipt fully against the store (untimed)."""
    for signed in receipts[::50]:
        assert isinstance(signed, bytes)
        position = open_receipt(signed, KEY.public_key())
        entry = position.entry
        verify_receipt(
            signed,
            KEY.public_key(),
            expected_root=entry.root,
            expected_n_pairs=entry.n_pairs,
            expected_item_kind=entry.item_kind,
            inclusion_proof=store.inclusion_proof(entry.index, position.log_size),
        )
    assert store.size() == N_COMMITS


def _check_grpc(store: SqlEscrowStore, receipts: list[object]) -> None:
    """Verify every 50th receipt that came over gRPC against the store (untimed)."""
    for signed in receipts[::50]:
        assert isinstance(signed, bytes)
        entry = open_receipt(signed, KEY.public_key()).entry
        assert store.entry(entry.index).entry == entry


def _report(label: str, seconds: float) -> float:
    rate = N_COMMITS / seconds
    print(f"{label}: {N_COMMITS:,} commits in {seconds:.2f} s = {rate:,.0f} commits/s")
    return rate


def _store_figure(store: SqlEscrowStore, threads: int, label: str) -> float:
    seconds, receipts = _timed(threads, lambda i: store.commit(_request(i)))
    _check(store, receipts)
    return _report(label, seconds)


def _commit_call(stub: escrow_pb2_grpc.EscrowStub, i: int) -> bytes:
    request = _request(i)
    answer = stub.Commit(
        escrow_pb2.CommitRequest(
            spec_version=request.spec,
            root=request.root,
            n_pairs=request.n_pairs,
            item_kind=request.item_kind,
            owner=request.owner,
            claim_key=CLAIM_KEY,
        ),
        timeout=30,
    )
    return bytes(answer.receipt)


def _client_process(port: int, first: int, count: int, go: Event, done: object) -> None:
    """Commit roots ``first .. first+count-1`` from CLIENTS / CLIENT_PROCESSES threads."""
    with make_channel(f"127.0.0.1:{port}") as channel:
        stub = escrow_pb2_grpc.EscrowStub(channel)
        _commit_call(stub, first + count)  # connect before timing (a root of its own)
        done.put(None)  # type: ignore[attr-defined]
        go.wait()
        cpu = _cpu_s()
        with ThreadPoolExecutor(CLIENTS // CLIENT_PROCESSES) as pool:
            receipts = list(pool.map(lambda i: _commit_call(stub, i), range(first, first + count)))
        done.put((len(receipts), _cpu_s() - cpu))  # type: ignore[attr-defined]


def _cpu_s() -> float:
    """CPU seconds this process has used, user and system."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _arbiter_figure(directory: Path) -> float:
    """Figure 4: Commit through ``serve_arbiter`` from CLIENT_PROCESSES client processes."""
    restore = configure_logging("info", "text", io.StringIO())  # every RPC logged, kept here
    context = multiprocessing.get_context("spawn")
    go, done = context.Event(), context.Queue()
    share = N_COMMITS // CLIENT_PROCESSES
    with SqliteEscrowStore(directory / "arbiter.db", KEY) as store:
        server, port = serve_arbiter(
            store, KEY, "127.0.0.1:0", escrow_rate_limit=UNBOUND_RATE, metrics=PrometheusMetrics()
        )
        try:
            clients = [  # process k commits roots k·(share+1) ... and one to connect
                context.Process(
                    target=_client_process, args=(port, k * (share + 1), share, go, done)
                )
                for k in range(CLIENT_PROCESSES)
            ]
            for client in clients:
                client.start()
            for _ in clients:
                done.get(timeout=120)  # connected
            start, server_cpu = time.perf_counter(), _cpu_s()
            go.set()
            results = [done.get(timeout=600) for _ in clients]
            seconds, server_cpu = time.perf_counter() - start, _cpu_s() - server_cpu
            committed = sum(count for count, _ in results)
            client_cpu = sum(cpu for _, cpu in results)
            for client in clients:
                client.join(30)
        finally:
            server.stop(None)
            restore()
        assert committed == share * CLIENT_PROCESSES
        assert store.size() == committed + CLIENT_PROCESSES
    rate = committed / seconds
    label = (
        f"gRPC Commit via serve_arbiter (logs, metrics, rate limiter), {CLIENTS} clients"
        f" in {CLIENT_PROCESSES} processes"
    )
    print(f"{label}: {committed:,} commits in {seconds:.2f} s = {rate:,.0f} commits/s")
    server_us, client_us = server_cpu / committed * 1e6, client_cpu / committed * 1e6
    print(
        f"  CPU per commit: server {server_us:,.0f} us, clients {client_us:,.0f} us; two idle"
        f" cores hold {2e6 / (server_us + client_us):,.0f} commits/s with these clients,"
        f" {2e6 / server_us:,.0f} with the server alone on them"
    )
    return rate


def _grpc_figures(directory: Path) -> None:
    with SqliteEscrowStore(directory / "grpc.db", KEY) as store:
        server, port = serve_escrow(store, "127.0.0.1:0", max_workers=CLIENTS, rate_limit=None)
        try:
            with make_channel(f"127.0.0.1:{port}") as channel:
                stub = escrow_pb2_grpc.EscrowStub(channel)

                def commit(i: int) -> bytes:
                    return _commit_call(stub, i)

                commit(0)  # connect before timing
                seconds, receipts = _timed(CLIENTS, lambda i: commit(i + 1))
                _report(f"gRPC Commit, {CLIENTS} client threads in this process", seconds)

                def owner(i: int) -> bytes:
                    request = _request(N_COMMITS + 1 + i)  # new roots: one record per root
                    signed = escrow_root(
                        channel,
                        root=request.root,
                        n_pairs=request.n_pairs,
                        item_kind=request.item_kind,
                        owner=request.owner,
                        claim_key=CLAIM_KEY,
                        arbiter_public_key=KEY.public_key(),
                        timeout_s=30,
                    )
                    return signed.envelope

                seconds, _ = _timed(CLIENTS, owner)
                label = f"gRPC escrow_root (commit + proof + full check), {CLIENTS} clients"
                _report(label, seconds)
        finally:
            server.stop(None)
        assert store.size() == 2 * N_COMMITS + 1
        _check_grpc(store, receipts)


def main() -> None:
    """Print commits per second for each figure."""
    print(f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at start")
    with tempfile.TemporaryDirectory(prefix="bench-escrow-") as tmp:
        directory = Path(tmp)
        print(f"SQLite, WAL, synchronous=FULL, in {directory}")
        with SqliteEscrowStore(directory / "serial.db", KEY) as store:
            _store_figure(store, 1, "store API, 1 thread (one flush per commit)")
        with SqliteEscrowStore(directory / "group.db", KEY) as store:
            rate = _store_figure(store, CLIENTS, f"store API, {CLIENTS} threads (group commit)")
        verdict = "meets" if rate >= TARGET_PER_S else "MISSES"
        print(f"  -> {verdict} the target of {TARGET_PER_S} commits/s")
        _grpc_figures(directory)
        rate = _arbiter_figure(directory)
        verdict = "meets" if rate >= TARGET_PER_S else "MISSES"
        print(f"  -> {verdict} the target of {TARGET_PER_S} commits/s")
    print(f"load average {os.getloadavg()[0]:.1f} at the end")
    dsn = os.environ.get("TWINAUDIT_TEST_PG_DSN")
    if dsn:
        _postgres_figure(dsn)


def _postgres_figure(dsn: str) -> None:
    """Figure 2 on PostgreSQL, in a throwaway schema (psycopg is an optional extra)."""
    import psycopg  # noqa: PLC0415

    from twinaudit.verifier.escrow.postgres_store import PostgresEscrowStore  # noqa: PLC0415

    schema = f"bench_{uuid.uuid4().hex[:12]}"
    try:
        with PostgresEscrowStore(dsn, KEY, schema=schema) as store:
            _store_figure(store, CLIENTS, f"PostgreSQL store API, {CLIENTS} threads")
    finally:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")


if __name__ == "__main__":
    main()
