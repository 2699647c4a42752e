"""The arbiter collects cosignatures (spec §9.7.2): proofs from what each witness holds.

Against real witnesses on 127.0.0.1: the note carries each witness's verified line; a
witness that is down, or that cosigns with another key than configured, costs only its
line (and quickly); as the log grows each witness gets a consistency proof from the
size it cosigned, learned from its 409 by an arbiter that restarted without knowing it.
"""

from __future__ import annotations

import socket
import time

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from demo.seeded import SeededEntropy
from tests.support.keys import KEY
from tests.support.witnesses import in_process_witness
from twinaudit.protocol.checkpoint_note import WitnessPolicy, verify_checkpoint_note
from twinaudit.protocol.errors import InputError, ParameterError
from twinaudit.protocol.escrow_messages import EscrowRequest
from twinaudit.protocol.note import COSIGNATURE_V1, VerifierKey, parse_note
from twinaudit.verifier.escrow.cosigning import (
    CheckpointCosigning,
    WitnessEndpoint,
    parse_witness_option,
)
from twinaudit.verifier.escrow.sqlite_store import SqliteEscrowStore

#: A witness key no witness of these tests serves with.
OTHER_WITNESS = Ed25519PrivateKey.from_private_bytes(b"\x33" * 32).public_key()


def _commit(store: SqliteEscrowStore, i: int) -> None:
    store.commit(EscrowRequest(root=bytes([i]) * 32, n_pairs=4, item_kind="image", owner="o"))


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def store(tmp_path):
    store = SqliteEscrowStore(tmp_path / "e.db", KEY, entropy=SeededEntropy(b"r"))
    yield store
    store.close()


def _cosigned(cosigning: CheckpointCosigning, store: SqliteEscrowStore) -> bytes:
    latest = store.latest_checkpoint()
    note = store.checkpoint_note(latest)
    assert note is not None
    return cosigning.cosigned_note(latest, note)


def test_cosignatures_are_collected_and_a_down_witness_costs_only_its_line(tmp_path, store):
    with (
        in_process_witness(tmp_path, "w1.example", 10, KEY.public_key()) as w1,
        in_process_witness(tmp_path, "w2.example", 20, KEY.public_key()) as w2,
    ):
        ghost = WitnessEndpoint(f"http://127.0.0.1:{_closed_port()}/", _other_key("down"))
        endpoints = [WitnessEndpoint(w1.url, w1.vkey), WitnessEndpoint(w2.url, w2.vkey), ghost]
        cosigning = CheckpointCosigning(store, endpoints, timeout_s=2.0)
        try:
            _commit(store, 1)
            started = time.monotonic()
            note = _cosigned(cosigning, store)
            assert time.monotonic() - started < 2.0
            policy = WitnessPolicy((w1.vkey, w2.vkey), 2)
            checked = verify_checkpoint_note(note, KEY.public_key(), policy, now=int(time.time()))
            assert [c.name for c in checked.counted] == ["w1.example", "w2.example"]
            # The log grows by three: each witness gets a proof from size 1.
            for i in (2, 3, 4):
                _commit(store, i)
            note = _cosigned(cosigning, store)
            checked = verify_checkpoint_note(note, KEY.public_key(), policy, now=int(time.time()))
            assert checked.size == 4 and len(checked.counted) == 2
        finally:
            cosigning.close()
        # An arbiter that restarted knows no witness's size: it learns it from the 409.
        for i in (5, 6):
            _commit(store, i)
        again = CheckpointCosigning(store, endpoints[:2], timeout_s=2.0)
        try:
            note = _cosigned(again, store)
            checked = verify_checkpoint_note(note, KEY.public_key(), policy, now=int(time.time()))
            assert checked.size == 6 and len(checked.counted) == 2
        finally:
            again.close()


def test_lines_of_another_key_than_configured_are_dropped(tmp_path, store):
    with in_process_witness(tmp_path, "w1.example", 10, KEY.public_key()) as w1:
        wrong = WitnessEndpoint(w1.url, _other_key("w1.example"))
        cosigning = CheckpointCosigning(store, [wrong], timeout_s=2.0)
        try:
            _commit(store, 1)
            note = _cosigned(cosigning, store)
        finally:
            cosigning.close()
    assert len(parse_note(note).signatures) == 1  # the arbiter's own line only


def test_witness_options_are_checked():
    key = _other_key("w")
    assert parse_witness_option(f"https://w.example/x={key.vkey()}").url == "https://w.example/x"
    with pytest.raises(InputError):
        parse_witness_option(key.vkey())
    with pytest.raises(ParameterError):
        parse_witness_option(f"ftp://w={key.vkey()}")
    with pytest.raises(ParameterError):
        WitnessEndpoint("http://w/", VerifierKey.of("w", 0x01, OTHER_WITNESS))


def _other_key(name: str) -> VerifierKey:
    return VerifierKey.of(name, COSIGNATURE_V1, OTHER_WITNESS)


def test_a_witness_that_never_answers_delays_no_escrow(tmp_path, store):
    """A witness that accepts connections and says nothing: Commit returns at once, and
    GetCheckpoint answers within the witness call's deadline, without its cosignature."""
    from twinaudit.protocol.keys import raw_public_key
    from twinaudit.verifier.server import serve_arbiter
    from twinaudit.wire.escrow.v1 import escrow_pb2, escrow_pb2_grpc
    from twinaudit.wire.transport import make_channel

    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        url = f"http://127.0.0.1:{silent.getsockname()[1]}/"
        mute = WitnessEndpoint(url, _other_key("mute"))
        cosigning = CheckpointCosigning(store, [mute], timeout_s=1.0)
        server, port = serve_arbiter(store, KEY, "127.0.0.1:0", cosigning=cosigning)
        channel = make_channel(f"127.0.0.1:{port}")
        stub = escrow_pb2_grpc.EscrowStub(channel)
        try:
            started = time.monotonic()
            stub.Commit(
                escrow_pb2.CommitRequest(
                    spec_version="0.2",
                    root=bytes(range(32)),
                    n_pairs=4,
                    item_kind="image",
                    owner="o",
                    claim_key=raw_public_key(OTHER_WITNESS),
                )
            )
            committed = time.monotonic() - started
            started = time.monotonic()
            note = bytes(stub.GetCheckpoint(escrow_pb2.GetCheckpointRequest()).checkpoint_note)
            answered = time.monotonic() - started
        finally:
            channel.close()
            server.stop(None)
            cosigning.close()
    assert committed < 0.5, committed  # the commit only wakes the background collection
    assert answered < 1.8, answered  # at most the one deadline that collection waits
    assert len(parse_note(note).signatures) == 1  # the arbiter's line, no cosignature
