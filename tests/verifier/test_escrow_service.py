"""The escrow gRPC service over real sockets on 127.0.0.1, with the owner's client."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from grpc_health.v1 import health_pb2, health_pb2_grpc

from tests.support import pki as certificates
from tests.support.keys import KEY, OTHER
from twinaudit.owner.escrow_client import escrow_root, fetch_checkpoint
from twinaudit.protocol import limits
from twinaudit.protocol.errors import InputError, SignatureError, VerificationError
from twinaudit.protocol.escrow_messages import (
    Checkpoint,
    decode_entry,
    sign_checkpoint,
    verify_checkpoint,
    verify_log_extension,
    verify_record,
)
from twinaudit.protocol.keys import key_id, raw_public_key
from twinaudit.verifier.escrow.service import SERVICE_NAME, serve_escrow
from twinaudit.verifier.escrow.sqlite_store import SqliteEscrowStore
from twinaudit.verifier.escrow.store import StoredEntry
from twinaudit.wire.escrow.v1 import escrow_pb2, escrow_pb2_grpc
from twinaudit.wire.transport import TlsFiles, make_channel, wait_healthy

ROOT = bytes(range(32))
#: The owner's claim key the records bind (spec §9.1).
CLAIM_KEY = raw_public_key(Ed25519PrivateKey.from_private_bytes(bytes(range(64, 96))).public_key())
TIMEOUT_S = 10.0


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SqliteEscrowStore]:
    opened = SqliteEscrowStore(tmp_path / "escrow.db", KEY)
    try:
        yield opened
    finally:
        opened.close()


def _serve(store: SqliteEscrowStore, tls: TlsFiles | None = None) -> tuple[grpc.Server, str]:
    # No rate limit: some tests commit more than the default burst (the limits' own
    # tests below serve with theirs).
    server, port = serve_escrow(store, "127.0.0.1:0", tls=tls, max_workers=4, rate_limit=None)
    return server, f"127.0.0.1:{port}"


@pytest.fixture
def server(store: SqliteEscrowStore) -> Iterator[str]:
    running, target = _serve(store)
    try:
        yield target
    finally:
        running.stop(None)


@pytest.fixture
def channel(server: str) -> Iterator[grpc.Channel]:
    opened = make_channel(server)
    try:
        yield opened
    finally:
        opened.close()


def _escrow(channel: grpc.Channel, **overrides: Any):
    args: dict[str, Any] = {
        "root": ROOT,
        "n_pairs": 64,
        "item_kind": "image",
        "owner": "alice",
        "claim_key": CLAIM_KEY,
        "arbiter_public_key": KEY.public_key(),
        "timeout_s": TIMEOUT_S,
    }
    args.update(overrides)
    escrowed = escrow_root(channel, **args)
    return escrowed.receipt, escrowed.envelope


# --- Happy path -------------------------------------------------------------------------


def test_commit_and_verify_with_the_owner_client(channel, store):
    receipt, signed = _escrow(channel)
    assert receipt.entry.root == ROOT
    assert receipt.entry.n_pairs == 64
    assert receipt.entry.index == 0
    assert store.entry(0) == StoredEntry(receipt.entry, receipt.rho)
    second, _ = _escrow(channel, root=bytes(32), owner="bob")
    assert second.entry.index == 1
    assert second.rho != receipt.rho
    assert json.loads(signed)["payloadType"].endswith("escrow-receipt.v1+msgpack")


def test_a_root_in_the_log_is_refused_without_its_receipt(channel, store):
    """Issue #22 D10, spec §9.1: one record per root; its rho is never sent again."""
    first, _ = _escrow(channel)
    for owner in ("alice", "mallory"):
        with pytest.raises(grpc.RpcError) as refused:
            _escrow(channel, owner=owner)
        assert refused.value.code() == grpc.StatusCode.FAILED_PRECONDITION
        assert "already escrowed as record 0" in refused.value.details()
        assert first.rho.hex() not in refused.value.details()
    assert store.size() == 1


def test_get_record_checkpoint_and_proofs(channel, store):
    for n in range(5):
        _escrow(channel, root=n.to_bytes(32, "big"))
    stub = escrow_pb2_grpc.EscrowStub(channel)
    first = verify_checkpoint(
        stub.GetCheckpoint(escrow_pb2.GetCheckpointRequest(), timeout=TIMEOUT_S).checkpoint,
        KEY.public_key(),
    )
    assert first.size == 5
    _escrow(channel, root=bytes([0xAB]) * 32)
    record = stub.GetRecord(escrow_pb2.GetRecordRequest(index=2), timeout=TIMEOUT_S)
    entry, checkpoint = verify_record(
        record.entry,
        record.log_size,
        list(record.inclusion_proof),
        record.checkpoint,
        KEY.public_key(),
    )
    assert entry.index == 2
    assert entry.root == (2).to_bytes(32, "big")
    assert checkpoint.size == 6
    assert store.entry(2).rho not in record.entry  # the public entry has only rho's digest
    assert decode_entry(record.entry) == entry
    proof = stub.GetConsistencyProof(
        escrow_pb2.GetConsistencyProofRequest(old_size=first.size, new_size=checkpoint.size),
        timeout=TIMEOUT_S,
    ).proof
    verify_log_extension(first, checkpoint, list(proof))
    inclusion = stub.GetInclusionProof(
        escrow_pb2.GetInclusionProofRequest(index=2, size=6), timeout=TIMEOUT_S
    ).proof
    assert list(inclusion) == list(record.inclusion_proof)


def test_fetch_checkpoint_requires_an_extension(channel, store):
    first, signed = fetch_checkpoint(channel, arbiter_public_key=KEY.public_key())
    assert (first.size, signed) == (0, store.checkpoint())
    _escrow(channel)
    second, _ = fetch_checkpoint(channel, arbiter_public_key=KEY.public_key(), previous=first)
    assert second.size == 1
    _escrow(channel, root=bytes(32))
    third, _ = fetch_checkpoint(channel, arbiter_public_key=KEY.public_key(), previous=second)
    assert third.size == 2
    fork = Checkpoint(arbiter=third.arbiter, size=1, root=bytes(32), time=third.time)
    with pytest.raises(VerificationError):  # a forked log: same size, other root
        fetch_checkpoint(channel, arbiter_public_key=KEY.public_key(), previous=fork)
    ahead = Checkpoint(arbiter=third.arbiter, size=5, root=bytes(32), time=third.time)
    with pytest.raises(VerificationError):  # the log would have shrunk
        fetch_checkpoint(channel, arbiter_public_key=KEY.public_key(), previous=ahead)
    with pytest.raises(SignatureError):
        fetch_checkpoint(channel, arbiter_public_key=OTHER.public_key())


def test_health_reports_serving(channel):
    wait_healthy(channel, SERVICE_NAME, timeout_s=TIMEOUT_S)
    stub = health_pb2_grpc.HealthStub(channel)
    for name in ("", SERVICE_NAME):
        answer = stub.Check(health_pb2.HealthCheckRequest(service=name), timeout=TIMEOUT_S)
        assert answer.status == health_pb2.HealthCheckResponse.SERVING


# --- Bad requests -----------------------------------------------------------------------

GOOD = {
    "spec_version": "0.2",
    "root": ROOT,
    "n_pairs": 10,
    "item_kind": "text",
    "owner": "o",
    "claim_key": CLAIM_KEY,
}

BAD_COMMITS = [
    ("root too short", {"root": ROOT[:31]}, grpc.StatusCode.INVALID_ARGUMENT),
    ("root empty", {"root": b""}, grpc.StatusCode.INVALID_ARGUMENT),
    ("root too long", {"root": ROOT + b"\x00"}, grpc.StatusCode.INVALID_ARGUMENT),
    ("n_pairs zero", {"n_pairs": 0}, grpc.StatusCode.INVALID_ARGUMENT),
    ("n_pairs above MAX_PAIRS", {"n_pairs": limits.MAX_PAIRS + 1},
     grpc.StatusCode.RESOURCE_EXHAUSTED),
    ("n_pairs 2**64-1", {"n_pairs": (1 << 64) - 1}, grpc.StatusCode.RESOURCE_EXHAUSTED),
    ("unknown item kind", {"item_kind": "audio"}, grpc.StatusCode.INVALID_ARGUMENT),
    ("empty item kind", {"item_kind": ""}, grpc.StatusCode.INVALID_ARGUMENT),
    ("wrong spec version", {"spec_version": "0.1"}, grpc.StatusCode.FAILED_PRECONDITION),
    ("missing spec version", {"spec_version": ""}, grpc.StatusCode.FAILED_PRECONDITION),
    ("owner label too long", {"owner": "é" * 129}, grpc.StatusCode.RESOURCE_EXHAUSTED),
    # Spec §9.1: a record binds its owner's claim key, or anyone could claim on it (#40 N1).
    ("claim key missing", {"claim_key": b""}, grpc.StatusCode.INVALID_ARGUMENT),
    ("claim key short", {"claim_key": CLAIM_KEY[:31]}, grpc.StatusCode.INVALID_ARGUMENT),
    ("claim key long", {"claim_key": CLAIM_KEY + b"\x00"}, grpc.StatusCode.INVALID_ARGUMENT),
]  # fmt: skip


@pytest.mark.parametrize(
    ("change", "code"), [c[1:] for c in BAD_COMMITS], ids=[c[0] for c in BAD_COMMITS]
)
def test_bad_commit_gets_its_status_and_stores_nothing(channel, store, change, code):
    stub = escrow_pb2_grpc.EscrowStub(channel)
    stub.Commit(escrow_pb2.CommitRequest(**GOOD), timeout=TIMEOUT_S)
    before = store.checkpoint()
    with pytest.raises(grpc.RpcError) as info:
        stub.Commit(escrow_pb2.CommitRequest(**{**GOOD, **change}), timeout=TIMEOUT_S)
    assert info.value.code() == code
    assert info.value.details()  # a human-readable reason
    assert store.size() == 1
    assert store.checkpoint() == before


@pytest.mark.parametrize(
    ("call", "request_", "code"),
    [
        ("GetRecord", escrow_pb2.GetRecordRequest(index=1), grpc.StatusCode.NOT_FOUND),
        ("GetRecord", escrow_pb2.GetRecordRequest(index=(1 << 64) - 1), grpc.StatusCode.NOT_FOUND),
        (
            "GetInclusionProof",
            escrow_pb2.GetInclusionProofRequest(index=0, size=2),
            grpc.StatusCode.NOT_FOUND,
        ),
        (
            "GetInclusionProof",
            escrow_pb2.GetInclusionProofRequest(index=1, size=1),
            grpc.StatusCode.INVALID_ARGUMENT,
        ),
        (
            "GetInclusionProof",
            escrow_pb2.GetInclusionProofRequest(index=0, size=0),
            grpc.StatusCode.INVALID_ARGUMENT,
        ),
        (
            "GetConsistencyProof",
            escrow_pb2.GetConsistencyProofRequest(old_size=0, new_size=5),
            grpc.StatusCode.NOT_FOUND,
        ),
        (
            "GetConsistencyProof",
            escrow_pb2.GetConsistencyProofRequest(old_size=1, new_size=0),
            grpc.StatusCode.INVALID_ARGUMENT,
        ),
    ],
    ids=[
        "record beyond the log",
        "record 2**64-1",
        "inclusion in a size not reached",
        "inclusion index not below size",
        "inclusion in the empty log",
        "consistency to a size not reached",
        "consistency old > new",
    ],
)
def test_bad_lookups(channel, call, request_, code):
    _escrow(channel)
    stub = escrow_pb2_grpc.EscrowStub(channel)
    with pytest.raises(grpc.RpcError) as info:
        getattr(stub, call)(request_, timeout=TIMEOUT_S)
    assert info.value.code() == code


def test_client_refuses_bad_requests_before_sending(channel, store):
    with pytest.raises(InputError):
        _escrow(channel, root=b"short")
    with pytest.raises(InputError):
        _escrow(channel, n_pairs=0)
    assert store.size() == 0


# --- A dishonest or wrong arbiter -------------------------------------------------------


class _TamperingEscrow(escrow_pb2_grpc.EscrowServicer):
    """Forwards to a real escrow service, changing the receipts it returns."""

    def __init__(self, target: str, mode: str) -> None:
        self._channel = make_channel(target)
        self._stub = escrow_pb2_grpc.EscrowStub(self._channel)
        self._mode = mode

    def Commit(self, request, context):
        if self._mode == "other-claim-key":  # the record would bind someone else's key
            forged = escrow_pb2.CommitRequest()
            forged.CopyFrom(request)
            forged.claim_key = raw_public_key(OTHER.public_key())
            receipt = self._stub.Commit(forged, timeout=TIMEOUT_S).receipt
            return escrow_pb2.CommitResponse(receipt=receipt)
        receipt = self._stub.Commit(request, timeout=TIMEOUT_S).receipt
        if self._mode == "flip-byte":
            doc = json.loads(receipt)
            sig = doc["signatures"][0]["sig"]
            doc["signatures"][0]["sig"] = ("B" if sig[0] == "A" else "A") + sig[1:]
            receipt = json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()
        elif self._mode == "other-root":
            forged = escrow_pb2.CommitRequest()
            forged.CopyFrom(request)
            forged.root = bytes(32)
            receipt = self._stub.Commit(forged, timeout=TIMEOUT_S).receipt
        return escrow_pb2.CommitResponse(receipt=receipt)

    def GetCheckpoint(self, request, context):
        if self._mode == "rolled-back":  # a checkpoint from a larger log, signed by KEY
            larger = Checkpoint(
                arbiter=key_id(KEY.public_key()),
                size=5,
                root=bytes(32),
                time="2026-01-01T00:00:00Z",
            )
            return escrow_pb2.GetCheckpointResponse(checkpoint=sign_checkpoint(larger, KEY))
        return self._stub.GetCheckpoint(request, timeout=TIMEOUT_S)

    def GetInclusionProof(self, request, context):
        proof = list(self._stub.GetInclusionProof(request, timeout=TIMEOUT_S).proof)
        if self._mode == "bad-proof":
            proof = [bytes(32)] * len(proof)
        return escrow_pb2.GetInclusionProofResponse(proof=proof)


@pytest.mark.parametrize(
    ("mode", "error"),
    [
        ("flip-byte", SignatureError),
        ("other-root", VerificationError),
        ("other-claim-key", VerificationError),
        ("bad-proof", VerificationError),
        ("rolled-back", VerificationError),
    ],
)
def test_client_rejects_a_tampered_receipt(server, store, mode, error):
    from twinaudit.wire.transport import make_server

    proxy = _TamperingEscrow(server, mode)
    running, port = make_server(
        "127.0.0.1:0",
        lambda s: escrow_pb2_grpc.add_EscrowServicer_to_server(proxy, s),
    )
    # Start with a non-empty log, so that an inclusion proof has hashes to falsify.
    with make_channel(server) as direct:
        _escrow(direct, root=bytes([9]) * 32)
    try:
        with make_channel(f"127.0.0.1:{port}") as channel, pytest.raises(error):
            _escrow(channel)
    finally:
        running.stop(None)
        proxy._channel.close()


def test_client_rejects_a_receipt_from_another_arbiter(channel, store):
    """Issue #22: the key is checked before the commit, so the log holds nothing."""
    with pytest.raises(SignatureError):
        _escrow(channel, arbiter_public_key=OTHER.public_key())
    assert store.size() == 0


def test_client_deadline(store):
    """A server that never answers makes the client fail with DEADLINE_EXCEEDED."""
    import socket

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    try:
        with make_channel(f"127.0.0.1:{listener.getsockname()[1]}") as channel:
            with pytest.raises(grpc.RpcError) as info:
                _escrow(channel, timeout_s=0.5)
            assert info.value.code() in (
                grpc.StatusCode.DEADLINE_EXCEEDED,
                grpc.StatusCode.UNAVAILABLE,
            )
    finally:
        listener.close()


# --- TLS and mTLS -----------------------------------------------------------------------


def _write(path: Path, cert: x509.Certificate, key: ec.EllipticCurvePrivateKey | None) -> None:
    path.with_suffix(".crt").write_bytes(certificates.certificate_pem(cert))
    if key is not None:
        path.with_suffix(".key").write_bytes(certificates.key_pem(key))
        path.with_suffix(".key").chmod(0o600)  # a server refuses a key others can read


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A CA, a server certificate for 127.0.0.1/localhost and a client certificate."""
    root = tmp_path_factory.mktemp("pki")
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = certificates.certificate("twinaudit test CA", ca_key, None, ca=True)
    _write(root / "ca", ca, None)
    for name, is_server in (("server", True), ("client", False)):
        key = ec.generate_private_key(ec.SECP256R1())
        cert = certificates.certificate(
            f"twinaudit test {name}", key, (ca.subject, ca_key), server=is_server
        )
        _write(root / name, cert, key)
    return root


def test_tls(store, pki):
    server_tls = TlsFiles(cert=pki / "server.crt", key=pki / "server.key")
    running, target = _serve(store, server_tls)
    try:
        with make_channel(target, tls=TlsFiles(ca=pki / "ca.crt")) as channel:
            wait_healthy(channel, SERVICE_NAME, timeout_s=TIMEOUT_S)
            receipt, _ = _escrow(channel)
            assert receipt.entry.index == 0
        with make_channel(target) as plaintext, pytest.raises(grpc.RpcError):
            _escrow(plaintext, timeout_s=2.0)
    finally:
        running.stop(None)


def test_mtls_requires_a_client_certificate(store, pki):
    server_tls = TlsFiles(cert=pki / "server.crt", key=pki / "server.key", ca=pki / "ca.crt")
    running, target = _serve(store, server_tls)
    try:
        client_tls = TlsFiles(cert=pki / "client.crt", key=pki / "client.key", ca=pki / "ca.crt")
        with make_channel(target, tls=client_tls) as channel:
            receipt, _ = _escrow(channel)
            assert receipt.entry.index == 0
        with make_channel(target, tls=TlsFiles(ca=pki / "ca.crt")) as anonymous:
            with pytest.raises(grpc.RpcError) as info:
                _escrow(anonymous, timeout_s=2.0)
            assert info.value.code() in (
                grpc.StatusCode.UNAVAILABLE,
                grpc.StatusCode.DEADLINE_EXCEEDED,
            )
        assert store.size() == 1
    finally:
        running.stop(None)


# --- Rate limits (spec §13: grinding over receipts) -------------------------------------


def test_commits_past_the_clients_rate_limit_are_refused_and_not_stored(store):
    from twinaudit.verifier.escrow.rate_limit import RateLimit

    server, port = serve_escrow(
        store, "127.0.0.1:0", max_workers=4, rate_limit=RateLimit(per_second=0.001, burst=2)
    )
    try:
        with make_channel(f"127.0.0.1:{port}") as channel:
            _escrow(channel)
            _escrow(channel, root=bytes(32), owner="bob")  # a new owner name, the same client
            with pytest.raises(grpc.RpcError) as refused:
                _escrow(channel, root=bytes([1]) * 32, owner="carol")
            assert refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
            assert "escrow rate limit reached for addr:127.0.0.1" in refused.value.details()
            assert "retry in" in refused.value.details()
            # Reads are not limited.
            stub = escrow_pb2_grpc.EscrowStub(channel)
            stub.GetCheckpoint(escrow_pb2.GetCheckpointRequest(), timeout=TIMEOUT_S)
    finally:
        server.stop(None)
    assert store.size() == 2


def test_mtls_clients_are_limited_by_certificate(store, pki):
    from twinaudit.verifier.escrow.rate_limit import RateLimit

    server_tls = TlsFiles(cert=pki / "server.crt", key=pki / "server.key", ca=pki / "ca.crt")
    server, port = serve_escrow(
        store, "localhost:0", tls=server_tls, rate_limit=RateLimit(per_second=0.001, burst=1)
    )
    try:
        client_tls = TlsFiles(cert=pki / "client.crt", key=pki / "client.key", ca=pki / "ca.crt")
        with make_channel(f"localhost:{port}", tls=client_tls) as channel:
            _escrow(channel)
            with pytest.raises(grpc.RpcError) as refused:
                _escrow(channel)
            assert refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
            assert "for cert:" in refused.value.details()
    finally:
        server.stop(None)
    assert store.size() == 1
