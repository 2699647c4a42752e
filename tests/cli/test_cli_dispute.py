"""A whole dispute through the console script, each role in its own process.

verifier keygen → verifier serve → owner mark → owner escrow → owner publish →
owner inspect → (practitioner trains on what was published) → oracle serve → owner
claim → verifier check → verifier replay; and the refusals on the way (publishing
before escrow, escrowing twice, claiming from a modified vault).
"""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
import torch

from tests.support.cli_processes import (
    arbiter_process,
    check_and_replay,
    claim_args,
    escrow_args,
    serve_tiny_cnn,
)
from tests.support.cli_processes import cli as _cli
from tests.support.cli_processes import stop as _stop
from tests.support.data import synthetic_images
from tests.support.models import train_classifier

N_PAIRS = 120
#: Strong Bernoulli marks: the tiny CNN below detects them within the 120 pairs.
EPSILON = 48


@pytest.mark.slow
def test_dispute_through_the_cli(tmp_path):
    with arbiter_process(tmp_path) as (address, pub):
        processes = []
        try:
            raw, labels = synthetic_images(N_PAIRS, seed=21)
            np.save(tmp_path / "photos.npy", raw)
            (tmp_path / "labels.json").write_text(json.dumps([int(y) for y in labels]))
            vault = tmp_path / "vault"
            result = _cli(
                "owner",
                "mark",
                str(tmp_path / "photos.npy"),
                "--labels",
                str(tmp_path / "labels.json"),
                "--out",
                str(vault),
                "--marker",
                "bernoulli",
                "--epsilon",
                str(EPSILON),
                "--seed",
                "cli test",
            )
            assert f"marked {N_PAIRS} pairs" in result.stdout
            early = _cli(
                "owner", "publish", str(vault), "--out", str(tmp_path / "pub"), check=False
            )
            assert early.returncode == 1 and "escrow it first" in early.stderr
            assert not (tmp_path / "pub").exists()  # nothing published before a receipt
            escrow = escrow_args(vault, address, pub)
            result = _cli(*escrow, "--owner", "cli test")
            assert f"escrowed {N_PAIRS} pairs as record 0" in result.stdout
            refused = _cli(*escrow, check=False)
            assert refused.returncode == 2 and "already escrowed" in refused.stderr
            _cli("owner", "publish", str(vault), "--out", str(tmp_path / "pub"), "--quiet")
            inspect = _cli(
                "owner",
                "inspect",
                str(vault),
                "--input",
                str(tmp_path / "photos.npy"),
                "--labels",
                str(tmp_path / "labels.json"),
                "--distance-pairs",
                "0",
                "--sheet",
                str(tmp_path / "sheet.png"),
            )
            assert f"max |x^k - x| = {EPSILON} <= {EPSILON} holds" in inspect.stdout
            assert "receipt: valid, record 0" in inspect.stdout
            assert (tmp_path / "sheet.png").stat().st_mode & 0o077 == 0

            # The practitioner trains on what the owner published, and serves the model.
            published = np.load(tmp_path / "pub" / "photos.npy")
            assert published.shape == raw.shape and not np.array_equal(published, raw)
            with torch.random.fork_rng(devices=[]):
                model = train_classifier(published, labels, epochs=40, seed=0, width=16)
            torch.save(model.state_dict(), tmp_path / "model.pt")
            oracle, endpoint = serve_tiny_cnn(tmp_path / "model.pt")
            processes.append(oracle)

            out = tmp_path / "verdict"
            result = _cli(
                *claim_args(vault, address, pub, endpoint),
                "--model-name",
                "practitioner",
                "--knowledge",
                "C1",
                "--out",
                str(out),
            )
            assert result.stdout.startswith("DETECTED"), result.stdout + result.stderr
            assert "successes" in result.stderr  # progress was shown

            check_and_replay(out, pub, "DETECTED")

            chunk = vault / "chunks" / "000000.pairs"
            data = bytearray(chunk.read_bytes())
            data[-5] ^= 0x01
            chunk.write_bytes(bytes(data))
            refused = _cli(
                *claim_args(vault, address, pub, endpoint),
                "--out",
                str(tmp_path / "other"),
                check=False,
            )
            assert refused.returncode == 1 and "chunks/000000.pairs" in refused.stderr
            assert not (tmp_path / "other").exists()
        finally:
            for process in processes:
                _stop(process)
    assert os.stat(tmp_path / "arbiter.key").st_mode & 0o077 == 0
