"""A dispute with two witnesses, each role in its own process on 127.0.0.1 (issue #43).

witness keygen ×2 → witness serve ×2 → verifier serve --witness ×2 → owner escrow and
owner claim with a 2-of-2 witness policy → oracle serve (a tiny CNN) → verifier check
and twinaudit verify with the policy: the verdict's record is in a checkpoint both
witnesses cosigned. The same verdict is refused when one witness's cosignature is
missing from its log evidence, or stale (made an hour before the verdict), and a 1-of-2
policy takes the evidence that lacks one.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from tests.support.cli_processes import (
    claim_args,
    cli,
    escrow_args,
    serve,
    serve_arbiter,
    serve_tiny_cnn,
    stop,
)
from tests.support.data import synthetic_images
from tests.support.models import tiny_cnn_16
from tests.support.witnesses import policy_file, recosigned, without_lines_of
from twinaudit.owner.mark import mark_path, secret_from_seed
from twinaudit.owner.marking import MarkingConfig
from twinaudit.owner.witnessed import epoch_seconds
from twinaudit.protocol.claim.verdict import check_verdict
from twinaudit.protocol.keys import load_private_key, load_public_key
from twinaudit.protocol.log_evidence import LogEvidence, parse_log_evidence
from twinaudit.protocol.note import parse_vkey
from twinaudit.protocol.witness_policy import read_policy

N_PAIRS = 24


def _witness(tmp_path: Path, name: str, arbiter_pub: Path):
    key = tmp_path / f"{name}.key"
    vkey = parse_vkey(cli("witness", "keygen", "--key", str(key), "--name", name).stdout.strip())
    process, url = serve(
        "witness",
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--key",
        str(key),
        "--name",
        name,
        "--db",
        str(tmp_path / f"{name}.db"),
        "--arbiter-pubkey",
        str(arbiter_pub),
        ready="serving on",
    )
    return process, url, vkey, key


@pytest.mark.slow
def test_a_verdict_checked_under_a_two_of_two_witness_policy(tmp_path: Path) -> None:
    cli("verifier", "keygen", "--key", str(tmp_path / "arbiter.key"))
    pub = tmp_path / "arbiter.key.pub"
    processes = []
    try:
        witnesses = []
        for name in ("w1.example", "w2.example"):
            process, url, vkey, key = _witness(tmp_path, name, pub)
            processes.append(process)
            witnesses.append((name, vkey, url, key))
        arbiter, address = serve_arbiter(
            tmp_path, *(f"--witness={url}={vkey.vkey()}" for _, vkey, url, _ in witnesses)
        )
        processes.append(arbiter)
        log = cli("witness", "vkey", "--arbiter-pubkey", str(pub)).stdout.strip()
        pairs = [(name, vkey) for name, vkey, _, _ in witnesses]
        both = policy_file(tmp_path / "both.policy", pairs, 2, log=log)
        either = policy_file(tmp_path / "either.policy", pairs, 1, log=log)
        assert read_policy(both).policy.threshold == 2

        # The owner marks, escrows under the policy, and the record is witnessed.
        raw, labels = synthetic_images(N_PAIRS, seed=5)
        np.save(tmp_path / "photos.npy", raw)
        (tmp_path / "labels.json").write_text(json.dumps([int(y) for y in labels]))
        vault = tmp_path / "vault"
        mark_path(
            tmp_path / "photos.npy",
            vault,
            MarkingConfig(marker="gaussian", epsilon=10, batch_size=8),
            labels=tmp_path / "labels.json",
            secret=secret_from_seed("witnessed"),
            show_progress=False,
        )
        escrow = cli(
            *escrow_args(vault, address, pub),
            "--witness-policy",
            str(both),
        )
        assert "cosigned by w1.example, w2.example" in escrow.stdout, escrow.stdout

        # The practitioner serves a tiny CNN (untrained: the decision does not matter).
        torch.manual_seed(0)
        torch.save(tiny_cnn_16().state_dict(), tmp_path / "model.pt")
        oracle, endpoint = serve_tiny_cnn(tmp_path / "model.pt")
        processes.append(oracle)
        out = tmp_path / "verdict"
        claim = cli(
            *claim_args(vault, address, pub, endpoint),
            "--max-pairs",
            "8",
            "--out",
            str(out),
            "--witness-policy",
            str(both),
        )
        assert "cosigned by w1.example, w2.example" in claim.stdout, claim.stdout + claim.stderr
    finally:
        for process in processes:
            stop(process)

    # Anyone, offline: the verdict checks under the 2-of-2 policy.
    verdict = out / "verdict.json"
    check = cli(
        "verifier", "check", str(verdict), "--pubkey", str(pub), "--witness-policy", str(both)
    )
    assert "VALID verdict" in check.stdout
    assert "cosigned by w1.example, w2.example" in check.stdout
    verify = cli(
        "verify", str(verdict), "--pubkey", str(pub), "--witness-policy", str(both), "--json"
    )
    assert json.loads(verify.stdout)["witnessed_by"] == ["w1.example", "w2.example"]

    evidence = parse_log_evidence((out / "log-evidence.json").read_bytes())

    def refused(note: bytes, policy: Path) -> tuple[int, str]:
        path = tmp_path / "edited.json"
        path.write_bytes(LogEvidence(note, evidence.entry, evidence.inclusion_proof).encode())
        result = cli(
            "verifier",
            "check",
            str(verdict),
            "--pubkey",
            str(pub),
            "--witness-policy",
            str(policy),
            "--log-evidence",
            str(path),
            check=False,
        )
        return result.returncode, result.stderr

    # w2's cosignature missing: refused by 2-of-2, naming it; 1-of-2 takes it.
    missing = without_lines_of(evidence.checkpoint_note, "w2.example")
    code, err = refused(missing, both)
    assert code == 1 and "missing: w2.example" in err and "[verification-failed]" in err
    assert refused(missing, either)[0] == 0
    # w2's cosignature stale: made (with its own key) an hour before the verdict.
    signed = check_verdict(verdict.read_bytes(), load_public_key(pub))
    key = load_private_key(tmp_path / "w2.example.key")
    an_hour_before = epoch_seconds(signed.time) - 3600
    stale = recosigned(evidence.checkpoint_note, "w2.example", key, an_hour_before)
    code, err = refused(stale, both)
    assert code == 1 and "stale: w2.example" in err
    # twinaudit verify refuses it too, at its own stage.
    result = cli(
        "verify",
        str(verdict),
        "--pubkey",
        str(pub),
        "--witness-policy",
        str(both),
        "--log-evidence",
        str(tmp_path / "edited.json"),
        check=False,
    )
    assert result.returncode == 1 and "NOT WITNESSED" in result.stderr
