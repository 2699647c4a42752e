"""No work that grows with history (issue #39, part 5): store open, and the claim state.

Run with ``python -m bench history`` (``--open-only``, ``--state-only`` or
``--claims-only`` for one part).

1. **Store open.** SQLite escrow stores (WAL, ``synchronous=FULL``) of 10³, 10⁵ and
   10⁶ records, one per size, each opened and closed OPENS times, the sizes taking
   turns (median); then one inclusion proof and one durable commit are timed on each.
   The records are appended by the store's own append path
   (``log_tables.append_entries``, the rows a commit writes: entry, root index, tree
   nodes, head) in transactions of FILL_BATCH entries, without signing a receipt each
   (10⁶ receipts would take minutes and are not what an open reads). The full check
   (``verifier store-check``, O(n)) is timed at 10³ and 10⁵ for comparison, and so is
   filing a claim with its claim-start entry (spec §9.6: a leaf and its tree nodes,
   O(log n) rows; the median of CLAIMS). With ``TWINAUDIT_TEST_PG_DSN`` set, the same
   on PostgreSQL at 10³ and 10⁵. ``--claims-only`` times only the claims, at 10³ and
   10⁵ records.
2. **Claim state per request.** A claim runs to the end of a record of N = 10³ and
   N = 10⁵ synthetic pairs (TinyCNN, untrained, so the test does not detect), with the
   protocol's default windows (8, then 16 pairs a request); after every request the
   bytes the verifier saves are counted: the state (what ``save_claim`` rewrites) and
   the transcript part (appended). For comparison, the state in the earlier layout
   (the claim map, every opened index and every indicator) is encoded from the same
   session at the same points.
"""

from __future__ import annotations

import argparse
import os
import secrets
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import msgpack
import torch
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from demo.pairset import PairSet
from demo.synthetic import synthetic_pairs
from demo.tiny_cnn import TinyCNN
from twinaudit.practitioner.torch_oracle import TorchClassifierOracle
from twinaudit.protocol.claim.scores.classifier import ScoreSpec
from twinaudit.protocol.encoding import decode
from twinaudit.protocol.escrow_messages import EscrowRequest, make_entry
from twinaudit.protocol.items import encode_item
from twinaudit.protocol.stats.base import TiePolicy
from twinaudit.verifier.claim import ClaimParams, ClaimRecord, ClaimSession
from twinaudit.verifier.escrow.log_check import check_log
from twinaudit.verifier.escrow.log_tables import append_entries, read_frontier
from twinaudit.verifier.escrow.sql_store import SqlEscrowStore
from twinaudit.verifier.escrow.sqlite_store import SqliteEscrowStore
from twinaudit.verifier.escrow.store import ClaimLease, ClaimStartFields

KEY = Ed25519PrivateKey.from_private_bytes(bytes(range(32)))
SIZES = (1_000, 100_000, 1_000_000)
PG_SIZES = (1_000, 100_000)
CHECKED_SIZES = (1_000, 100_000)
FILL_BATCH = 10_000
OPENS = 9
#: Claims filed, each with its claim-start entry, per store (the median is reported).
CLAIMS = 9
CLAIM_SIZES = (1_000, 100_000)
STATE_PAIRS = (1_000, 100_000)
TIME = datetime(2026, 11, 28, tzinfo=UTC)


def _request(i: int) -> EscrowRequest:
    return EscrowRequest(
        root=i.to_bytes(32, "big"), n_pairs=1000, item_kind="image", owner=f"bench-{i % 97}"
    )


def _fill(store: SqlEscrowStore, target: int) -> None:
    """Append records until the log has ``target``, through the store's append path."""
    db = store.db
    while store.size() < target:
        with db.lock, db.transaction(write=True) as cur:
            size, _ = db.head(cur, lock=True)
            rows = []
            for i in range(size, min(target, size + FILL_BATCH)):
                rho = secrets.token_bytes(32)
                entry = make_entry(_request(i), index=i, time=TIME, rho=rho)
                rows.append((entry.encode(), rho, entry.root))
            append_entries(cur, read_frontier(cur, size), rows)


def _claim_entry_s(store: SqlEscrowStore) -> float:
    """File CLAIMS claims on record 0, each appending its claim-start entry; the median."""
    spent = []
    for _ in range(CLAIMS):
        claim_id = uuid.uuid4().hex
        start = time.perf_counter()
        store.create_claim(
            claim_id,
            0,
            "open",
            b"state",
            lease=ClaimLease(claim_id, 60.0),
            log=ClaimStartFields(bytes(32)),
        )
        spent.append(time.perf_counter() - start)
    return statistics.median(spent)


def _claims_part() -> None:
    """Only the claim-start entries: SQLite stores of CLAIM_SIZES records."""
    with tempfile.TemporaryDirectory(prefix="bench-history-") as tmp:
        print("Claims filed with their log entries, SQLite (WAL, synchronous=FULL):")
        figures = {}
        for size in CLAIM_SIZES:
            with SqliteEscrowStore(Path(tmp) / f"escrow-{size}.db", KEY) as store:
                _fill(store, size)
                figures[size] = _claim_entry_s(store)
            print(f"  {size:>9,} records: one claim filed {figures[size] * 1000:5.2f} ms")
        low, high = min(CLAIM_SIZES), max(CLAIM_SIZES)
        print(f"  -> at {high:,} / at {low:,} records: {figures[high] / figures[low]:.2f}x")


def _open_s(open_store: Callable[[], SqlEscrowStore]) -> float:
    start = time.perf_counter()
    open_store().close()
    return time.perf_counter() - start


def _open_figures(open_store: Callable[[int], SqlEscrowStore], sizes: tuple[int, ...]) -> None:
    """One store per size; the opens of all sizes interleaved, OPENS rounds; then the rest."""
    for size in sizes:
        with open_store(size) as store:
            start = time.perf_counter()
            _fill(store, size)
            print(f"  {size:>9,} records appended in {time.perf_counter() - start:.0f} s")
    spent: dict[int, list[float]] = {size: [] for size in sizes}
    for _ in range(OPENS):
        for size in sizes:
            spent[size].append(_open_s(lambda n=size: open_store(n)))
    opens = {size: statistics.median(times) for size, times in spent.items()}
    for size in sizes:
        with open_store(size) as store:
            start = time.perf_counter()
            store.inclusion_proof(size // 3, size)
            proof_s = time.perf_counter() - start
            start = time.perf_counter()
            store.commit(_request(2**40 + size))  # one durable commit, its receipt signed
            commit_s = time.perf_counter() - start
            claim_s = _claim_entry_s(store)
            check = ""
            if size in CHECKED_SIZES:
                start = time.perf_counter()
                check_log(store.db, store.public_key)
                check = f", full check {time.perf_counter() - start:6.2f} s"
        print(
            f"  {size:>9,} records: open {opens[size] * 1000:6.1f} ms (median of {OPENS},"
            f" {min(spent[size]) * 1000:.1f} to {max(spent[size]) * 1000:.1f}), inclusion proof"
            f" {proof_s * 1000:5.2f} ms, one commit {commit_s * 1000:5.1f} ms, one claim"
            f" filed with its log entry {claim_s * 1000:5.1f} ms (median of {CLAIMS}){check}"
        )
    low, high = min(sizes), max(sizes)
    print(f"  -> open at {high:,} / open at {low:,} records: {opens[high] / opens[low]:.2f}x")


def _open_part() -> None:
    with tempfile.TemporaryDirectory(prefix="bench-history-") as tmp:
        print(f"Store open, SQLite (WAL, synchronous=FULL), in {tmp}, warm page cache:")
        paths = {size: Path(tmp) / f"escrow-{size}.db" for size in SIZES}
        _open_figures(lambda n: SqliteEscrowStore(paths[n], KEY), SIZES)
        largest = paths[SIZES[-1]].stat().st_size
        print(f"  database file: {largest / 2**20:,.0f} MiB at {SIZES[-1]:,} records")
    dsn = os.environ.get("TWINAUDIT_TEST_PG_DSN")
    if dsn:
        _postgres_opens(dsn)


def _postgres_opens(dsn: str) -> None:
    import psycopg  # noqa: PLC0415

    from twinaudit.verifier.escrow.postgres_store import PostgresEscrowStore  # noqa: PLC0415

    schemas = {size: f"bench_{uuid.uuid4().hex[:12]}" for size in PG_SIZES}
    print("Store open, PostgreSQL (local server, a new connection each):")
    try:
        _open_figures(lambda n: PostgresEscrowStore(dsn, KEY, schema=schemas[n]), PG_SIZES)
    finally:
        with psycopg.connect(dsn, autocommit=True) as conn:
            for schema in schemas.values():
                conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")


def _amount(count: float) -> str:
    """A byte count in B, kB, MB or GB (powers of 1000)."""
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if count >= scale:
            return f"{count / scale:,.1f} {unit}"
    return f"{count:,.0f} B"


def _earlier_layout_bytes(session: ClaimSession) -> int:
    """The size of the state in the layout saved before (canonical msgpack is this size)."""
    state = decode(session.snapshot())
    del state["format"]  # the earlier layout had none, and these three fields besides
    state.update(claim=session.claim_map, opened=session.opened, indicators=session.indicators)
    return len(msgpack.packb(state, use_bin_type=True))


def _claim_state(n_pairs: int, oracle: TorchClassifierOracle) -> None:
    pairs = synthetic_pairs(n_pairs, seed=5, epsilon=16)
    versions = [tuple(encode_item(item) for item in pairs.items(i)) for i in range(n_pairs)]
    owner_set = PairSet.commit("image", versions)
    rho = bytes(range(32))
    record = ClaimRecord(0, owner_set.root, n_pairs, "image", rho, "2026-11-28T00:00:00Z")
    params = ClaimParams(
        0,
        owner_set.root,
        "in-process",
        "bench",
        ScoreSpec(k=1, perturbation="dither", knowledge="C2"),
        "pprm-chernoff",
        0.05,
        tie_rule=TiePolicy.COIN,
    )
    session = ClaimSession.start("bench", record, params, oracle, bytes(range(32, 64)))
    state_sizes, earlier_sizes, part_sizes = [], [], []
    start = time.perf_counter()
    while indices := session.next_request():
        session.submit(
            [(i, owner_set.pair_opening(i), owner_set.opening(i).proof) for i in indices]
        )
        state, part = session.checkpoint()
        state_sizes.append(len(state))
        part_sizes.append(len(part))
        earlier_sizes.append(_earlier_layout_bytes(session))
    spent = time.perf_counter() - start
    requests = len(state_sizes)
    print(
        f"  N = {n_pairs:>7,}: {requests:,} requests, {len(session.opened):,} pairs opened"
        f" (stop: {session.stop}) in {spent:.0f} s"
    )
    print(
        f"    state per request: {min(state_sizes)}..{max(state_sizes)} bytes"
        f" (mean {statistics.mean(state_sizes):.0f}), {_amount(sum(state_sizes))} in all;"
        f" transcript part per request: mean {statistics.mean(part_sizes):,.0f} bytes"
    )
    print(
        f"    earlier layout: {earlier_sizes[0]:,} bytes at the first request, "
        f"{earlier_sizes[-1]:,} at the last, {_amount(sum(earlier_sizes))} in all"
        f" -> {sum(earlier_sizes) / sum(state_sizes):,.0f}x what is saved now"
    )


def _state_part() -> None:
    torch.set_num_threads(1)
    torch.manual_seed(0)
    oracle = TorchClassifierOracle(TinyCNN().eval(), n_classes=10, model_name="bench")
    print("Claim state saved per request (windows of 8 then 16 pairs, claim to the end):")
    for n_pairs in STATE_PAIRS:
        _claim_state(n_pairs, oracle)


def main(argv: list[str] | None = None) -> None:
    """Print the store-open and claim-state figures."""
    parser = argparse.ArgumentParser(prog="python -m bench.bench_history")
    parts = parser.add_mutually_exclusive_group()
    parts.add_argument("--open-only", action="store_true", help="only the store opens")
    parts.add_argument("--state-only", action="store_true", help="only the claim state")
    parts.add_argument(
        "--claims-only", action="store_true", help="only claims filed with their log entries"
    )
    args = parser.parse_args([] if argv is None else argv)
    print(f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at start")
    if args.claims_only:
        _claims_part()
        return
    if not args.state_only:
        _open_part()
    if not args.open_only:
        _state_part()
    print(f"load average {os.getloadavg()[0]:.1f} at the end")


if __name__ == "__main__":
    import sys

    main(sys.argv[1:])
