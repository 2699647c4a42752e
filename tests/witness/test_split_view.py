"""A forked log is caught (issue #43 item 5): witnesses refuse it, clients refuse it.

A modified arbiter keeps two logs under one key (two stores signed with ``KEY``): the
honest one A, which its witnesses cosign, and a fork B it shows someone else. The
witnesses refuse to cosign B's checkpoint (409, then 422: it does not extend what they
cosigned); the owner's client with a 2-of-2 witness policy refuses to escrow on B (the
checkpoint note carries no cosignature); a verdict made on B is refused by ``verifier
check`` under the policy, even with A's cosignatures pasted onto B's note; the same
flow on A passes. All in one process, on 127.0.0.1, with real HTTP and gRPC.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from demo.seeded import SeededEntropy
from tests.support.data import synthetic_images
from tests.support.fake_oracle import LinearOracle
from tests.support.keys import KEY
from tests.support.witnesses import RunningWitness, in_process_witness, policy_file
from twinaudit.cli.main import main
from twinaudit.owner.mark import mark_path, secret_from_seed
from twinaudit.owner.marking import MarkingConfig
from twinaudit.practitioner.grpc_server import serve_oracle
from twinaudit.protocol.checkpoint_note import add_signatures, arbiter_key
from twinaudit.protocol.keys import public_key_pem
from twinaudit.protocol.log_evidence import LogEvidence, parse_log_evidence
from twinaudit.protocol.note import parse_note
from twinaudit.protocol.tlog_witness import AddCheckpoint
from twinaudit.verifier.escrow.cosigning import CheckpointCosigning, WitnessEndpoint
from twinaudit.verifier.escrow.sqlite_store import SqliteEscrowStore
from twinaudit.verifier.server import serve_arbiter
from twinaudit.wire.escrow.v1 import escrow_pb2, escrow_pb2_grpc
from twinaudit.wire.http_call import Deadline, http_call
from twinaudit.wire.transport import make_channel

GAUSSIAN = MarkingConfig(marker="gaussian", epsilon=10, batch_size=8)


class Arbiter:
    """One of the modified arbiter's two logs, served with cosignature collection."""

    def __init__(self, db: Path, witnesses: list[RunningWitness]) -> None:
        self.store = SqliteEscrowStore(db, KEY, entropy=SeededEntropy(db.name.encode()))
        endpoints = [WitnessEndpoint(w.url, w.vkey) for w in witnesses]
        self.cosigning = CheckpointCosigning(self.store, endpoints, timeout_s=5.0)
        self.server, port = serve_arbiter(
            self.store, KEY, "127.0.0.1:0", entropy=SeededEntropy(b"c"), cosigning=self.cosigning
        )
        self.address = f"127.0.0.1:{port}"

    def note(self) -> bytes:
        stub = escrow_pb2_grpc.EscrowStub(make_channel(self.address))
        return bytes(stub.GetCheckpoint(escrow_pb2.GetCheckpointRequest()).checkpoint_note)

    def close(self) -> None:
        self.server.stop(None)
        self.cosigning.close()
        self.store.close()


@pytest.fixture
def world(tmp_path: Path) -> Iterator[dict]:
    with (
        in_process_witness(tmp_path, "w1.example", 40, KEY.public_key()) as w1,
        in_process_witness(tmp_path, "w2.example", 80, KEY.public_key()) as w2,
    ):
        honest, fork = Arbiter(tmp_path / "a.db", [w1, w2]), Arbiter(tmp_path / "b.db", [w1, w2])
        oracle, port = serve_oracle(LinearOracle(), "127.0.0.1:0")
        (tmp_path / "arbiter.key.pub").write_bytes(public_key_pem(KEY.public_key()))
        policy = policy_file(
            tmp_path / "policy.txt",
            [(w1.name, w1.vkey), (w2.name, w2.vkey)],
            2,
            log=arbiter_key(KEY.public_key()).vkey(),
        )
        try:
            yield {
                "honest": honest,
                "fork": fork,
                "witnesses": (w1, w2),
                "oracle": f"127.0.0.1:{port}",
                "policy": policy,
                "pub": tmp_path / "arbiter.key.pub",
            }
        finally:
            oracle.stop(None)
            honest.close()
            fork.close()


def _vault(tmp_path: Path, name: str, seed: int) -> Path:
    raw, labels = synthetic_images(24, seed=seed)
    np.save(tmp_path / f"{name}.npy", raw)
    (tmp_path / f"{name}.json").write_text(json.dumps([int(y) for y in labels]))
    mark_path(
        tmp_path / f"{name}.npy",
        tmp_path / name,
        GAUSSIAN,
        labels=tmp_path / f"{name}.json",
        secret=secret_from_seed(name),
        show_progress=False,
    )
    return tmp_path / name


def _escrow(vault: Path, arbiter: Arbiter, pub: Path, *options: str) -> int:
    address = arbiter.address
    return main(
        ["owner", "escrow", str(vault), "--arbiter", address, "--arbiter-key", str(pub), *options]
    )


def _claim(vault: Path, arbiter: Arbiter, world: dict, out: Path, *options: str) -> int:
    return main(
        [
            "owner",
            "claim",
            str(vault),
            "--arbiter",
            arbiter.address,
            "--arbiter-key",
            str(world["pub"]),
            "--oracle",
            world["oracle"],
            "--max-pairs",
            "6",
            "--out",
            str(out),
            *options,
        ]
    )


def _check(verdict: Path, world: dict, *options: str) -> int:
    return main(
        [
            "verifier",
            "check",
            str(verdict),
            "--pubkey",
            str(world["pub"]),
            "--witness-policy",
            str(world["policy"]),
            *options,
        ]
    )


@pytest.mark.slow
def test_witnesses_and_clients_refuse_a_forked_log(world, tmp_path, capsys) -> None:
    honest, fork, policy = world["honest"], world["fork"], str(world["policy"])
    w1, w2 = world["witnesses"]
    # The honest log: escrow and claim under the 2-of-2 policy, and the verdict checks.
    alice = _vault(tmp_path, "alice", 7)
    assert _escrow(alice, honest, world["pub"], "--witness-policy", policy) == 0
    assert "cosigned by w1.example, w2.example" in capsys.readouterr().out
    assert _claim(alice, honest, world, tmp_path / "va", "--witness-policy", policy) == 0
    assert (tmp_path / "va" / "log-evidence.json").exists()
    capsys.readouterr()
    assert _check(tmp_path / "va" / "verdict.json", world) == 0
    assert "cosigned by w1.example, w2.example" in capsys.readouterr().out

    # The fork: an owner with the policy is refused before anything is committed.
    bob = _vault(tmp_path, "bob", 8)
    assert _escrow(bob, fork, world["pub"], "--witness-policy", policy) == 1
    err = capsys.readouterr().err
    assert "[verification-failed]" in err and "missing: w1.example, w2.example" in err
    assert fork.store.size() == 0
    # An owner without a policy escrows on the fork, whose log then holds another
    # record 0 than the honest log: the witnesses refuse to cosign it (409, then 422).
    assert _escrow(bob, fork, world["pub"]) == 0
    note = fork.note()
    assert [s.name for s in parse_note(note).signatures] == [arbiter_key(KEY.public_key()).name]
    for witness in (w1, w2):
        stale = _add_checkpoint(witness, AddCheckpoint(0, (), note))
        # 409 with the honest log's size as the witness last cosigned it: 1 after alice's
        # escrow, or up to 3 once the arbiter's background collection has also sent it the
        # checkpoint with her claim-start and verdict entries (spec §9.6): a race.
        assert stale.status == 409
        known = int(stale.body)
        assert 1 <= known <= honest.store.size()
        forked = _add_checkpoint(witness, AddCheckpoint(known, (), note))
        # Never cosigned: at size 1 another root (422), past it a smaller tree (400).
        assert forked.status == (422 if known == 1 else 400), forked
    # An owner with the policy files no claim on the fork: her record is not witnessed.
    assert _claim(bob, fork, world, tmp_path / "vb", "--witness-policy", policy) == 1
    assert "no claim was filed" in capsys.readouterr().err
    assert not (tmp_path / "vb").exists()
    # A claim on the fork without a policy gives a verdict signed by the arbiter's key ...
    assert _claim(bob, fork, world, tmp_path / "vb") == 0
    verdict = tmp_path / "vb" / "verdict.json"
    assert main(["verifier", "check", str(verdict), "--pubkey", str(world["pub"])]) == 0
    capsys.readouterr()
    # ... and its log evidence, from the fork, fails the policy: no witness cosigned it.
    index = 0
    stub = escrow_pb2_grpc.EscrowStub(make_channel(fork.address))
    proof = stub.GetInclusionProof(escrow_pb2.GetInclusionProofRequest(index=index, size=1)).proof
    record = stub.GetRecord(escrow_pb2.GetRecordRequest(index=index)).entry
    evidence = LogEvidence(fork.note(), bytes(record), tuple(bytes(h) for h in proof))
    (tmp_path / "vb" / "log-evidence.json").write_bytes(evidence.encode())
    assert _check(verdict, world) == 1
    err = capsys.readouterr().err
    assert "missing: w1.example, w2.example" in err
    # The honest log's cosignatures pasted onto the fork's note do not verify over it.
    honest_note = parse_log_evidence((tmp_path / "va" / "log-evidence.json").read_bytes())
    pasted = add_signatures(
        fork.note(),
        [s for s in parse_note(honest_note.checkpoint_note).signatures if s.name.startswith("w")],
    )
    (tmp_path / "vb" / "log-evidence.json").write_bytes(
        LogEvidence(pasted, evidence.entry, evidence.inclusion_proof).encode()
    )
    assert _check(verdict, world) == 1
    assert "[invalid-signature]" in capsys.readouterr().err
    # And the honest log's note does not hold the fork's record.
    (tmp_path / "vb" / "log-evidence.json").write_bytes(
        LogEvidence(honest_note.checkpoint_note, evidence.entry, evidence.inclusion_proof).encode()
    )
    assert _check(verdict, world) == 1
    assert "INVALID" in capsys.readouterr().err


def _add_checkpoint(witness: RunningWitness, request: AddCheckpoint):
    return http_call(
        witness.url + "add-checkpoint",
        deadline=Deadline(5.0),
        max_bytes=4096,
        what="witness",
        body=request.encode(),
    )
