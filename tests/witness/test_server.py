"""The witness's HTTP service: the C2SP paths, byte caps, timeouts and statuses."""

from __future__ import annotations

import hashlib
import http.client
import socket
import time

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from tests.support.keys import KEY
from twinaudit.protocol.checkpoint_note import arbiter_key, arbiter_origin, sign_checkpoint_note
from twinaudit.protocol.merkle import MerkleTree
from twinaudit.protocol.tlog_witness import MAX_REQUEST_BYTES, AddCheckpoint
from twinaudit.witness import server as server_module
from twinaudit.witness.cosigner import Cosigner, logs_by_origin
from twinaudit.witness.server import start_witness
from twinaudit.witness.state import WitnessState


@pytest.fixture
def witness(tmp_path):
    key = Ed25519PrivateKey.from_private_bytes(b"\x09" * 32)
    cosigner = Cosigner(
        "w.example",
        key,
        logs_by_origin([arbiter_key(KEY.public_key())]),
        WitnessState(tmp_path / "w.db"),
    )
    server, thread = start_witness(cosigner, "127.0.0.1", 0, "/witness/")
    yield server.port
    server.shutdown()
    server.server_close()
    thread.join(timeout=10)


def _request(port, method, path, body=None, headers=None):
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        connection.request(method, path, body=body, headers=headers or {})
        reply = connection.getresponse()
        return reply.status, reply.getheader("Content-Type"), reply.read()
    finally:
        connection.close()


def _body(n: int = 3) -> bytes:
    t = MerkleTree(bytes([i]) for i in range(n))
    return AddCheckpoint(0, (), sign_checkpoint_note(n, t.root(), KEY)).encode()


def test_add_checkpoint_then_the_monitoring_path(witness) -> None:
    status, kind, body = _request(witness, "POST", "/witness/add-checkpoint", _body())
    assert status == 200 and kind.startswith("text/plain") and body.startswith("—".encode())
    origin_hash = hashlib.sha256(arbiter_origin(KEY.public_key()).encode()).hexdigest()
    status, _, note = _request(witness, "GET", f"/witness/{origin_hash}/checkpoint")
    assert status == 200 and body in note  # the cosignature line it returned
    assert _request(witness, "GET", f"/witness/{'0' * 64}/checkpoint")[0] == 404
    status, kind, size = _request(witness, "POST", "/witness/add-checkpoint", _body(5))
    assert (status, kind, size) == (409, "text/x.tlog.size", b"3\n")


def test_paths_methods_and_caps(witness) -> None:
    assert _request(witness, "POST", "/add-checkpoint", _body())[0] == 404  # not the prefix
    assert _request(witness, "GET", "/witness/add-checkpoint")[0] == 405
    big = {"Content-Length": str(MAX_REQUEST_BYTES + 1)}
    assert _request(witness, "POST", "/witness/add-checkpoint", b"", big)[0] == 413
    # No Content-Length: http.client sends one for bytes, so send by hand.
    with socket.create_connection(("127.0.0.1", witness), timeout=10) as sock:
        sock.sendall(b"POST /witness/add-checkpoint HTTP/1.1\r\nHost: x\r\n\r\n")
        assert sock.recv(64).startswith(b"HTTP/1.1 411")
    assert _request(witness, "POST", "/witness/add-checkpoint", b"old 0\n\n")[0] == 400


def test_a_client_that_stops_sending_is_cut_off(witness, monkeypatch) -> None:
    monkeypatch.setattr(server_module._Handler, "timeout", 0.5)  # the real one is 10 s
    with socket.create_connection(("127.0.0.1", witness), timeout=10) as sock:
        sock.sendall(
            b"POST /witness/add-checkpoint HTTP/1.1\r\nHost: x\r\nContent-Length: 99\r\n\r\n"
        )
        started = time.monotonic()
        answer = sock.recv(64)  # the server gives up on the body and closes
    assert time.monotonic() - started < 5
    assert answer == b""


def test_connections_beyond_the_cap_are_closed_unread(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(server_module, "MAX_CONNECTIONS", 2)  # the real cap is 128
    key = Ed25519PrivateKey.from_private_bytes(b"\x0a" * 32)
    logs = logs_by_origin([arbiter_key(KEY.public_key())])
    cosigner = Cosigner("w.example", key, logs, WitnessState(tmp_path / "c.db"))
    server, thread = start_witness(cosigner, "127.0.0.1", 0)
    try:
        idle = [socket.create_connection(("127.0.0.1", server.port), timeout=10) for _ in range(2)]
        time.sleep(0.2)  # both accepted, each held by its thread
        with socket.create_connection(("127.0.0.1", server.port), timeout=10) as third:
            assert third.recv(64) == b""  # closed at once, before a byte was read
        for sock in idle:
            sock.close()
        time.sleep(0.2)  # their threads end and free their places
        assert _request(server.port, "POST", "/add-checkpoint", _body())[0] == 200
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
