"""A whole dispute through the console script, each role in its own process.

verifier keygen → verifier serve → owner escrow → (practitioner trains on what was
published) → oracle serve → owner claim → verifier check → verifier replay.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from owner.pairset import PairSet
from protocol.escrow_messages import open_receipt
from protocol.items import encode_item
from protocol.keys import load_public_key
from tests.support.claims import fixed_salts
from tests.support.data import synthetic_pairs
from tests.support.models import train_classifier

ROOT = Path(__file__).resolve().parent.parent
N_PAIRS = 120


def _cli(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "twinaudit", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=check,
    )


def _serve(*args: str, ready: str) -> tuple[subprocess.Popen[str], str]:
    process = subprocess.Popen(
        [sys.executable, "-m", "twinaudit", *args], cwd=ROOT, stdout=subprocess.PIPE, text=True
    )
    assert process.stdout is not None
    for line in process.stdout:
        if ready in line:
            return process, line.split()[-1]
    raise AssertionError(f"{args[0]} did not start")


def _stop(process: subprocess.Popen[str]) -> None:
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        process.kill()


@pytest.mark.slow
def test_dispute_through_the_cli(tmp_path):
    _cli("verifier", "keygen", "--key", str(tmp_path / "arbiter.key"))
    pub = tmp_path / "arbiter.key.pub"
    arbiter, address = _serve(
        "verifier",
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--db",
        str(tmp_path / "escrow.db"),
        "--key",
        str(tmp_path / "arbiter.key"),
        ready="serving on",
    )
    processes = [arbiter]
    try:
        pairs = synthetic_pairs(N_PAIRS, seed=21, epsilon=32)
        versions = [tuple(encode_item(item) for item in pairs.items(i)) for i in range(N_PAIRS)]
        pair_set = PairSet("image", versions, fixed_salts(N_PAIRS, b"cli"))
        pair_set.save(tmp_path / "pairs.bin")
        result = _cli(
            "owner",
            "escrow",
            str(tmp_path / "pairs.bin"),
            "--arbiter",
            address,
            "--arbiter-key",
            str(pub),
            "--owner",
            "cli test",
            "--receipt",
            str(tmp_path / "receipt.json"),
        )
        assert "escrowed 120 pairs as record 0" in result.stdout
        refused = _cli(
            "owner",
            "escrow",
            str(tmp_path / "pairs.bin"),
            "--arbiter",
            address,
            "--arbiter-key",
            str(pub),
            "--receipt",
            str(tmp_path / "receipt.json"),
            check=False,
        )
        assert refused.returncode == 2  # never overwrites a receipt

        # The practitioner trains on what the owner published, and serves the model.
        receipt = open_receipt((tmp_path / "receipt.json").read_bytes(), load_public_key(pub))
        published = pair_set.published(receipt.rho)
        bits = np.array([published[i] == versions[i][1] for i in range(N_PAIRS)], dtype=int)
        with torch.random.fork_rng(devices=[]):
            model = train_classifier(pairs.version(bits), pairs.labels, epochs=40, seed=0, width=16)
        torch.save(model.state_dict(), tmp_path / "model.pt")
        oracle, endpoint = _serve(
            "oracle",
            "serve",
            "--model",
            str(tmp_path / "model.pt"),
            "--arch",
            "tests.support.models:tiny_cnn_16",
            "--n-classes",
            "10",
            "--threads",
            "1",
            "--listen",
            "127.0.0.1:0",
            ready="listening on",
        )
        processes.append(oracle)

        out = tmp_path / "verdict"
        result = _cli(
            "owner",
            "claim",
            str(tmp_path / "pairs.bin"),
            "--receipt",
            str(tmp_path / "receipt.json"),
            "--arbiter",
            address,
            "--arbiter-key",
            str(pub),
            "--oracle",
            endpoint,
            "--model-name",
            "practitioner",
            "--knowledge",
            "C1",
            "--out",
            str(out),
        )
        assert result.stdout.startswith("DETECTED"), result.stdout + result.stderr
        assert "successes" in result.stderr  # progress was shown

        check = _cli("verifier", "check", str(out / "verdict.json"), "--pubkey", str(pub))
        assert "VALID verdict" in check.stdout and "DETECTED" in check.stdout
        replay = _cli(
            "verifier",
            "replay",
            str(out / "verdict.json"),
            "--transcript",
            str(out / "transcript.bin"),
            "--pubkey",
            str(pub),
        )
        assert "identical to the verdict" in replay.stdout

        tampered = tmp_path / "pairs-tampered.bin"
        data = bytearray((tmp_path / "pairs.bin").read_bytes())
        data[-5] ^= 0x01
        tampered.write_bytes(bytes(data))
        refused = _cli(
            "owner",
            "claim",
            str(tampered),
            "--receipt",
            str(tmp_path / "receipt.json"),
            "--arbiter",
            address,
            "--arbiter-key",
            str(pub),
            "--oracle",
            endpoint,
            "--out",
            str(tmp_path / "other"),
            check=False,
        )
        assert refused.returncode != 0 and "modified" in refused.stderr
    finally:
        for process in processes:
            _stop(process)
    assert os.stat(tmp_path / "arbiter.key").st_mode & 0o077 == 0
