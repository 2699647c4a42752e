"""Hostile claims against the arbiter: do its other calls still answer? (issue #40 N2)

Run with ``python -m bench.bench_outbound`` (or ``python -m bench outbound``). One
arbiter (``serve_arbiter`` on a fresh SQLite store, 127.0.0.1, plaintext, escrow rate
limit off so that every ``Commit`` is a durable write) and one HTTP server on 127.0.0.1
that drips one byte per second (:func:`demo.hostile_http.drip`). 32 claims are filed
whose oracle is that server (``oip+http://…?timeout=60&retries=0``): each claim's first
oracle call, the server metadata at claim start, is dripped, and holds the claim's
thread for its whole 60 s deadline.

While they are in flight, a client calls health ``Check``, ``GetCheckpoint``,
``Commit`` and ``GetVerdict`` (of no claim: ``NOT_FOUND``) in turn, ROUNDS times, and
the latency of each call is taken: p50, p99 and the worst. Three phases, in one run:

1. no claim (the baseline);
2. the default settings (``--max-claims 16``): 32 hostile claims filed, 16 in flight
   and 16 refused at once (``RESOURCE_EXHAUSTED``);
3. ``--max-claims 32``: all 32 hostile claims in flight.

Target: p99 under 1 s for every call in every phase. Before issue #40, 16 such claims
took all 16 threads of the server, and every other call missed its deadline.
"""

from __future__ import annotations

import os
import platform
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import grpc
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from grpc_health.v1 import health_pb2, health_pb2_grpc

from demo.hostile_claims import CLAIM_KEY, file_hostile_claims
from demo.hostile_http import HostileServer, drip, hostile_server
from twinaudit.protocol import SPEC_VERSION
from twinaudit.protocol.keys import raw_public_key
from twinaudit.verifier.escrow.sqlite_store import SqliteEscrowStore
from twinaudit.verifier.server import serve_arbiter
from twinaudit.wire.escrow.v1 import escrow_pb2, escrow_pb2_grpc
from twinaudit.wire.transport import make_channel
from twinaudit.wire.verifier.v1 import verifier_pb2 as vpb
from twinaudit.wire.verifier.v1 import verifier_pb2_grpc as vpb_grpc

KEY = Ed25519PrivateKey.from_private_bytes(bytes(range(32)))
HOSTILE_CLAIMS = 32
ROUNDS = 150
TARGET_P99_S = 1.0
CALL_DEADLINE_S = 10.0


def _calls(channel: grpc.Channel) -> dict[str, Callable[[int], object]]:
    health = health_pb2_grpc.HealthStub(channel)
    escrow = escrow_pb2_grpc.EscrowStub(channel)
    verifier = vpb_grpc.VerifierStub(channel)

    def commit(i: int) -> object:
        request = escrow_pb2.CommitRequest(
            spec_version=SPEC_VERSION,
            root=(1 << 200 | time.monotonic_ns() << 16 | i).to_bytes(32, "big"),
            n_pairs=8,
            item_kind="image",
            owner="bench",
            claim_key=raw_public_key(CLAIM_KEY.public_key()),
        )
        return escrow.Commit(request, timeout=CALL_DEADLINE_S)

    def verdict(i: int) -> object:
        try:
            return verifier.GetVerdict(
                vpb.GetVerdictRequest(claim_id="0" * 32), timeout=CALL_DEADLINE_S
            )
        except grpc.RpcError as exc:
            if exc.code() != grpc.StatusCode.NOT_FOUND:
                raise
            return exc

    return {
        "health Check": lambda i: health.Check(
            health_pb2.HealthCheckRequest(), timeout=CALL_DEADLINE_S
        ),
        "GetCheckpoint": lambda i: escrow.GetCheckpoint(
            escrow_pb2.GetCheckpointRequest(), timeout=CALL_DEADLINE_S
        ),
        "Commit": commit,
        "GetVerdict": verdict,
    }


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def _measure(channel: grpc.Channel) -> dict[str, list[float]]:
    """Call every method ROUNDS times, in turn; return each one's latencies (seconds)."""
    calls = _calls(channel)
    took: dict[str, list[float]] = {name: [] for name in calls}
    for i in range(ROUNDS):
        for name, call in calls.items():
            start = time.perf_counter()
            try:
                call(i)
            except grpc.RpcError as exc:  # a missed deadline: counted at its full length
                print(f"  {name}: {exc.code().name}")
            took[name].append(time.perf_counter() - start)
    return took


def _phase(
    title: str, directory: Path, max_claims: int, claims: int, server: HostileServer
) -> dict[str, list[float]]:
    store = SqliteEscrowStore(directory / f"{max_claims}-{claims}.db", KEY)
    arbiter, port = serve_arbiter(
        store, KEY, "127.0.0.1:0", escrow_rate_limit=None, max_claims=max_claims
    )
    channel = make_channel(f"127.0.0.1:{port}")
    filed: list[Any] = []
    try:
        address = f"oip+{server.url}/v2/models/m?timeout=60&retries=0"
        before = len(server.requests)
        filed = file_hostile_claims(channel, KEY.public_key(), address, claims)
        running = min(claims, max_claims)
        if not server.wait_for(before + running, timeout_s=30):
            raise RuntimeError(f"only {len(server.requests) - before} claims reached the oracle")
        deadline = time.monotonic() + 10
        while sum(f.done() for f in filed) < claims - running and time.monotonic() < deadline:
            time.sleep(0.05)
        refused = sum(f.done() for f in filed)
        print(
            f"{title}: --max-claims {max_claims}, {claims} hostile claims filed, "
            f"{len(server.requests) - before} in flight (oracle dripping), {refused} refused",
            flush=True,
        )
        return _measure(channel)
    finally:
        for claim in filed:
            claim.cancel()
        channel.close()
        arbiter.stop(None)
        store.close()


def main() -> None:
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} cores, Python "
        f"{platform.python_version()}, {platform.system()} {platform.release()}; "
        f"load average {os.getloadavg()[0]:.1f}"
    )
    results: list[tuple[str, dict[str, list[float]]]] = []
    with tempfile.TemporaryDirectory() as folder:
        for title, max_claims, claims in (
            ("no claim", 16, 0),
            ("default", 16, HOSTILE_CLAIMS),
            ("all in flight", HOSTILE_CLAIMS, HOSTILE_CLAIMS),
        ):
            # A fresh dripping server per phase: the claims of the last one end with it.
            with hostile_server(drip(1.0, 120.0)) as server:
                results.append((title, _phase(title, Path(folder), max_claims, claims, server)))
    print(f"\n{ROUNDS} calls of each method per phase; latency in ms (target: p99 < 1 s)")
    print("| phase | call | p50 | p99 | worst | target |")
    print("|---|---|---:|---:|---:|---|")
    for title, took in results:
        for name, values in took.items():
            p99 = _percentile(values, 0.99)
            print(
                f"| {title} | {name} | {1000 * _percentile(values, 0.5):.1f} | "
                f"{1000 * p99:.1f} | {1000 * max(values):.1f} | "
                f"{'met' if p99 < TARGET_P99_S else 'over'} |"
            )


if __name__ == "__main__":
    main()
