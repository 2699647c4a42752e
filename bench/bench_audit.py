"""Wall time of one audit through gRPC against the same audit in-process.

The same claim — same pairs, salts, arbiter randomness and claim nonce, hence the
same queries — runs twice on the same torch model:

- in-process: a ClaimSession calling the model's TorchClassifierOracle directly;
- through gRPC: the owner's claim client streaming openings to the arbiter's
  verifier service, which queries the model served by ``twinaudit oracle serve`` in
  its own process on localhost, as a practitioner would run it.

Both runs open a fixed number of pairs (max_pairs, with a model that was not
trained on them, so the test does not stop early). Prints both times and the ratio
(target ≤ 1.2×), measured in this run.
"""

from __future__ import annotations

import hashlib
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from demo.pairset import PairSet
from demo.seeded import SeededEntropy
from demo.synthetic import synthetic_pairs
from demo.tiny_cnn import TinyCNN
from twinaudit.owner.claim_client import run_claim
from twinaudit.owner.escrow_client import escrow_root
from twinaudit.practitioner.formats import load_model
from twinaudit.practitioner.torch_oracle import TorchClassifierOracle
from twinaudit.protocol.claim.scores.classifier import ScoreSpec
from twinaudit.protocol.items import encode_item
from twinaudit.protocol.stats.base import TiePolicy
from twinaudit.verifier.claim import ClaimParams, ClaimRecord, ClaimSession
from twinaudit.verifier.escrow.sqlite_store import SqliteEscrowStore
from twinaudit.verifier.server import serve_arbiter
from twinaudit.wire.transport import make_channel

N_PAIRS = 400
K = 16
PERTURBATION = "random-resized-crop"
#: The ``--arch`` entry point of the served model (and of the in-process one).
ARCH = "demo.tiny_cnn:TinyCNN"


def _model() -> TinyCNN:
    torch.manual_seed(0)
    return TinyCNN().eval()


def _serve_oracle(weights: Path) -> tuple[subprocess.Popen[str], str]:
    """Start ``twinaudit oracle serve`` on the saved weights; return it and its address."""
    command = [
        sys.executable,
        "-m",
        "twinaudit",
        "oracle",
        "serve",
        "--model",
        str(weights),
        "--arch",
        ARCH,
        "--n-classes",
        "10",
        "--name",
        "bench",
        "--threads",
        "2",
        "--listen",
        "127.0.0.1:0",
    ]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None
    for line in process.stdout:
        if line.startswith("listening on "):
            return process, line.split()[-1]
    raise RuntimeError("oracle serve did not start")


REPEATS = 5
#: (window, window_max): constant requests of 8 pairs, the protocol default (8 then
#: 16 at a time), growing to 64, and constant requests of 32.
WINDOWS = ((8, 8), (8, 16), (8, 64), (32, 32))


def _grpc_claim(channel, request, owner_set):
    start = time.perf_counter()
    outcome = run_claim(
        channel, request, owner_set.opening, claim_key=owner_set.claim_key, timeout_s=3600
    )
    return time.perf_counter() - start, outcome.transcript_hash


def _local_claim(record, params, oracle, nonce, owner_set):
    start = time.perf_counter()
    session = ClaimSession.start("local", record, params, oracle, nonce)
    while indices := session.next_request():
        session.submit(
            [(i, owner_set.pair_opening(i), owner_set.opening(i).proof) for i in indices]
        )
    return time.perf_counter() - start, session


def main() -> None:
    """Run the audit both ways (warmed up, alternating, median of REPEATS) and print the ratio."""
    torch.set_num_threads(2)
    pairs = synthetic_pairs(N_PAIRS, seed=5, epsilon=16)
    versions = [tuple(encode_item(item) for item in pairs.items(i)) for i in range(N_PAIRS)]
    salts = [hashlib.sha256(i.to_bytes(8, "big")).digest() for i in range(N_PAIRS)]
    owner_set = PairSet("image", versions, salts)
    key = Ed25519PrivateKey.from_private_bytes(bytes(32))
    score = ScoreSpec(k=K, perturbation=PERTURBATION, knowledge="C2")
    with tempfile.TemporaryDirectory() as tmp:
        store = SqliteEscrowStore(Path(tmp) / "escrow.db", key, entropy=SeededEntropy(b"rho"))
        arbiter, port = serve_arbiter(store, key, "127.0.0.1:0", entropy=SeededEntropy(b"claims"))
        weights = Path(tmp) / "model.pt"
        torch.save(_model().state_dict(), weights)
        oracle_process, endpoint = _serve_oracle(weights)
        channel = make_channel(f"127.0.0.1:{port}")
        receipt = escrow_root(
            channel,
            root=owner_set.root,
            n_pairs=N_PAIRS,
            item_kind="image",
            owner="bench",
            claim_key=owner_set.claim_public_key(),
            arbiter_public_key=key.public_key(),
        ).receipt
        stored = store.entry(receipt.entry.index)
        entry = stored.entry
        record = ClaimRecord(
            entry.index, entry.root, entry.n_pairs, entry.item_kind, stored.rho, entry.time
        )
        # Loaded from the same file by the same loader as the served one, so both
        # describe the model alike (framework, format) and record the same transcript.
        local = TorchClassifierOracle(
            load_model(weights, arch=ARCH),
            n_classes=10,
            model_name="bench",
        )
        # The arbiter draws (claim id, nonce) from its entropy for every claim; the
        # in-process runs replay the same nonces, so both make the same queries.
        nonces = SeededEntropy(b"claims")
        results, same = {}, True
        for window, window_max in WINDOWS:
            grpc_times, local_times = [], []
            for run in range(REPEATS + 1):  # run 0 warms both paths up and is not counted
                pairs_now = 16 if run == 0 else N_PAIRS
                # One claim, filed through gRPC and started in-process.
                params = ClaimParams(
                    entry.index,
                    entry.root,
                    endpoint,
                    "bench",
                    score,
                    "pprm-chernoff",
                    0.05,
                    tie_rule=TiePolicy.COIN,
                    max_pairs=pairs_now,
                    window=window,
                    window_max=window_max,
                )
                nonces(16)
                nonce = nonces(32)
                grpc_s, head = _grpc_claim(channel, params, owner_set)
                local_s, session = _local_claim(record, params, local, nonce, owner_set)
                same = same and session.transcript.head == head
                if run:
                    grpc_times.append(grpc_s)
                    local_times.append(local_s)
            results[(window, window_max)] = (local_times, grpc_times)
        oracle_process.terminate()
        oracle_process.wait(30)
        arbiter.stop(None)
        store.close()
        channel.close()
    queries = session.queries
    print(
        f"audit of {N_PAIRS} pairs, K={K} ({PERTURBATION}), {queries} queries, model TinyCNN;"
        f" median of {REPEATS} alternating runs after a warm-up; the oracle is"
        " `twinaudit oracle serve` in its own process, escrow and claim state on SQLite"
    )
    for (window, window_max), (local_times, grpc_times) in results.items():
        local_med, grpc_med = statistics.median(local_times), statistics.median(grpc_times)
        print(
            f"  window {window:3d} to {window_max:3d} pairs/request: in-process "
            f"{local_med:5.2f} s, via gRPC "
            f"{grpc_med:5.2f} s -> ratio {grpc_med / local_med:.2f}x (target <= 1.2x)  "
            f"[runs {[round(t, 2) for t in local_times]} / {[round(t, 2) for t in grpc_times]}]"
        )
    print(f"  identical transcripts both ways: {same}")


if __name__ == "__main__":
    main()
