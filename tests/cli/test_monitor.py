"""``twinaudit monitor`` against an arbiter double on 127.0.0.1 that can serve two forks.

Two escrow stores under the arbiter's one key hold two histories of one log (fork A and
fork B: the same first root escrowed with different ``rho``, so they differ from entry
0). The double serves the escrow service of either, or A's checkpoints with B's
entries. The monitor follows fork A and reports what concerns the owner's record;
shown fork B (a split view: another log under the same key) or a log whose entries are
not the signed ones, it exits 1, says INCONSISTENT and keeps the saved file as it was.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from concurrent import futures
from pathlib import Path
from typing import Any

import grpc
import pytest

from tests.support.keys import KEY, OTHER
from twinaudit.cli.main import main
from twinaudit.protocol.escrow_messages import EscrowRequest
from twinaudit.protocol.keys import public_key_pem
from twinaudit.verifier.escrow.service import EscrowService
from twinaudit.verifier.escrow.sqlite_store import SqliteEscrowStore
from twinaudit.verifier.escrow.store import ClaimLease, ClaimStartFields, VerdictFields
from twinaudit.wire.escrow.v1 import escrow_pb2_grpc

OWNER_KEY = OTHER.public_key().public_bytes_raw()
STRANGER_KEY = bytes(range(32, 64))


def _request(n: int, owner: str = "alice", key: bytes = OWNER_KEY) -> EscrowRequest:
    return EscrowRequest(
        root=n.to_bytes(32, "big"), n_pairs=10, item_kind="image", owner=owner, claim_key=key
    )


class ForkingEscrow(escrow_pb2_grpc.EscrowServicer):
    """An arbiter that answers from fork A or fork B, or A's checkpoints with B's entries."""

    def __init__(self, a: EscrowService, b: EscrowService) -> None:
        self.forks = {"a": a, "b": b}
        self.mode = "a"

    def _fork(self, call: str) -> EscrowService:
        if self.mode == "a-with-b-entries":
            return self.forks["b" if call == "GetEntries" else "a"]
        return self.forks[self.mode]

    def GetCheckpoint(self, request: Any, context: Any) -> Any:
        return self._fork("GetCheckpoint").GetCheckpoint(request, context)

    def GetConsistencyProof(self, request: Any, context: Any) -> Any:
        return self._fork("GetConsistencyProof").GetConsistencyProof(request, context)

    def GetInclusionProof(self, request: Any, context: Any) -> Any:
        return self._fork("GetInclusionProof").GetInclusionProof(request, context)

    def GetEntries(self, request: Any, context: Any) -> Any:
        return self._fork("GetEntries").GetEntries(request, context)


@pytest.fixture
def world(tmp_path: Path) -> Iterator[dict[str, Any]]:
    a = SqliteEscrowStore(tmp_path / "a.db", KEY)
    b = SqliteEscrowStore(tmp_path / "b.db", KEY)
    a.commit(_request(0))  # record 0: alice's
    a.commit(_request(1, owner="bob", key=STRANGER_KEY))
    _file(a, "first", 0)
    a.finish_claim(
        "first", b"{}", b"", lease=_lease("first"), log=VerdictFields(bytes(32), "not-detected")
    )
    for n in range(4):  # fork B: the same first root, another rho; and more entries
        b.commit(_request(n, owner="bob", key=STRANGER_KEY))
    double = ForkingEscrow(EscrowService(a, rate_limit=None), EscrowService(b, rate_limit=None))
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    escrow_pb2_grpc.add_EscrowServicer_to_server(double, server)  # type: ignore[no-untyped-call]
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    key_file = tmp_path / "arbiter.pub"
    key_file.write_bytes(public_key_pem(KEY.public_key()))
    try:
        yield {
            "a": a,
            "b": b,
            "double": double,
            "address": f"127.0.0.1:{port}",
            "key": key_file,
            "state": tmp_path / "monitor.json",
        }
    finally:
        server.stop(None)
        a.close()
        b.close()


def _lease(name: str) -> ClaimLease:
    return ClaimLease(f"test-{name}", 60.0)


def _file(store: SqliteEscrowStore, claim_id: str, record: int) -> None:
    store.create_claim(
        claim_id,
        record,
        "open",
        b"s",
        lease=_lease(claim_id),
        log=ClaimStartFields(bytes(32), OWNER_KEY),
    )


def _run(world: dict[str, Any], *extra: str) -> list[str]:
    return [
        "monitor",
        "--arbiter",
        world["address"],
        "--arbiter-key",
        str(world["key"]),
        "--from",
        str(world["state"]),
        *extra,
    ]


def _json(capsys: pytest.CaptureFixture[str], argv: list[str]) -> tuple[int, dict[str, Any]]:
    code = main(argv)
    out = capsys.readouterr().out.strip().splitlines()
    return code, json.loads(out[-1])


def test_it_follows_the_log_and_reports_what_concerns_the_record(world, capsys):
    code, first = _json(capsys, _run(world, "--init", "--record", "0", "--json"))
    assert code == 0 and first["consistent"] and first["new_size"] == 4
    kinds = [(f["kind"], f["index"]) for f in first["findings"]]
    assert kinds == [("escrow", 0), ("claim", 2), ("verdict", 3)]
    assert first["findings"][2]["decision"] == "not-detected"
    saved = world["state"].read_bytes()
    # Nothing new: consistent, nothing reported, exit 0 even with --exit-code.
    code, again = _json(capsys, _run(world, "--record", "0", "--json", "--exit-code"))
    assert (code, again["old_size"], again["new_size"], again["reported"]) == (0, 4, 4, 0)
    # Another claim on her record, and another record under her claim key and label.
    _file(world["a"], "second", 0)
    world["a"].commit(_request(9))
    world["a"].commit(_request(10, owner="carol", key=STRANGER_KEY))
    code = main(_run(world, "--record", "0", "--exit-code"))
    text = capsys.readouterr().out
    assert code == 3
    assert "CONSISTENT: the log grew from 4 to 7 entries" in text
    assert "claim filed on record 0 at entry 4" in text
    assert "escrow of record 5 (another record under a watched claim key)" in text
    assert "record 6" not in text
    assert world["state"].read_bytes() != saved


def test_a_key_alone_is_watched(world, capsys):
    code, run = _json(
        capsys, _run(world, "--init", "--key", STRANGER_KEY.hex(), "--json", "--exit-code")
    )
    assert code == 3
    assert [(f["kind"], f["index"]) for f in run["findings"]] == [("escrow", 1)]


@pytest.mark.parametrize("mode", ["b", "a-with-b-entries"])
def test_a_split_view_is_reported_and_the_saved_file_kept(world, capsys, mode):
    assert main(_run(world, "--init", "--record", "0")) == 0
    saved = world["state"].read_bytes()
    capsys.readouterr()
    world["double"].mode = mode  # fork B under the same key, or entries not the signed ones
    if mode == "a-with-b-entries":
        world["a"].commit(_request(20))  # A grows: the new entries are read from B
        world["b"].commit(_request(21, owner="bob", key=STRANGER_KEY))
    code, report = _json(capsys, _run(world, "--record", "0", "--json"))
    assert code == 1
    assert report["consistent"] is False and report["saved_size"] == 4
    assert "does not extend the checkpoint saved" in report["error"]["message"]
    assert world["state"].read_bytes() == saved
    code = main(_run(world, "--record", "0"))
    assert code == 1
    assert "INCONSISTENT" in capsys.readouterr().err


def test_a_first_run_from_a_checkpoint_of_another_fork_is_refused(world, capsys):
    world["double"].mode = "b"
    checkpoint = world["b"].latest_checkpoint().envelope
    world["double"].mode = "a"
    world["state"].write_bytes(checkpoint)  # B's checkpoint, served A's log
    assert main(_run(world, "--record", "0")) == 1
    assert "INCONSISTENT" in capsys.readouterr().err
    assert world["state"].read_bytes() == checkpoint


def test_a_shrunk_log_is_reported(world, capsys):
    world["double"].mode = "b"
    for n in range(10, 14):
        world["b"].commit(_request(n, owner="bob", key=STRANGER_KEY))
    assert main(_run(world, "--init", "--record", "0")) == 0
    world["double"].mode = "a"
    assert main(_run(world, "--record", "0")) == 1
    assert "shrank" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("extra", "state", "message"),
    [
        (["--record", "0"], None, "does not exist"),
        (["--init"], None, "at least one --record or --key"),
        (["--init", "--key", "zz"], None, "64 hex digits"),
        (["--init", "--record", "99"], None, "has no record 99"),
        (["--init", "--record", "2"], None, "not a record"),
        (["--record", "0"], b"not json", "neither a monitor state"),
        (["--record", "0"], b'{"format": "other"}', "format"),
    ],
)
def test_bad_input_is_a_typed_error(world, capsys, extra, state, message):
    if state is not None:
        world["state"].write_bytes(state)
    assert main(_run(world, *extra)) == 2
    assert message in capsys.readouterr().err
    if state is None:
        assert not world["state"].exists()


def test_a_state_saved_for_another_arbiter_is_refused(world, capsys, tmp_path):
    assert main(_run(world, "--init", "--record", "0")) == 0
    other = tmp_path / "other.pub"
    other.write_bytes(public_key_pem(OTHER.public_key()))
    argv = _run(world, "--record", "0")
    argv[argv.index(str(world["key"]))] = str(other)
    assert main(argv) == 2
    assert "another arbiter" in capsys.readouterr().err
