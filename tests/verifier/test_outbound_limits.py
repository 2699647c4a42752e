"""Every outbound call of a claim has a whole-call deadline and a byte cap (issue #40).

Real hostile HTTP servers on 127.0.0.1 (:mod:`tests.support.hostile_http`), each
finding of the issue reproduced as it was measured on main 30eb2ba:

- N2: a server that drips one byte at a time held a call far past its deadline (the
  client's ``timeout=`` was per read), and sixteen such claims took every thread of the
  arbiter: its health check, ``GetCheckpoint`` and ``Commit`` then missed their deadlines;
- N3: a reply was read up to 64 MiB and parsed whole (``json.loads``) before it was
  measured: 63 MiB of nested lists took 2.8 GB and minutes;
- N8: a redirect was followed, to any URL.

gRPC replies (the OIP gRPC API, practitioners' oracles and arbiter-held children) are
held the same way: measured against what was asked before protobuf parses them.

The deadlines here are short (half a second), so that each test takes seconds.
"""

from __future__ import annotations

import itertools
import socket
import ssl
import time
import tracemalloc
from collections.abc import Iterator
from concurrent import futures
from pathlib import Path

import grpc
import numpy as np
import pytest
from cryptography.hazmat.primitives.asymmetric import ec
from grpc_health.v1 import health_pb2, health_pb2_grpc

from demo.hostile_claims import CLAIM_KEY, file_hostile_claims
from demo.hostile_http import HostileServer, drip, flood, hostile_server, redirect
from tests.support.keys import KEY
from tests.support.pki import certificate, certificate_pem, key_pem
from twinaudit.practitioner.openai_lm import OpenAICompletionsOracle
from twinaudit.protocol.errors import OracleError
from twinaudit.protocol.keys import raw_public_key
from twinaudit.verifier.escrow.sqlite_store import SqliteEscrowStore
from twinaudit.verifier.oracles.dial import dial_oracle
from twinaudit.verifier.server import serve_arbiter
from twinaudit.wire.escrow.v1 import escrow_pb2, escrow_pb2_grpc
from twinaudit.wire.oip.v2 import grpc_predict_v2_pb2 as oip_pb
from twinaudit.wire.oracle.v1 import oracle_pb2
from twinaudit.wire.transport import TlsFiles, make_channel
from twinaudit.wire.verifier.v1 import verifier_pb2 as vpb
from twinaudit.wire.verifier.v1 import verifier_pb2_grpc as vpb_grpc

#: The deadline of every hostile call here, and how late its failure may come.
DEADLINE_S = 0.5
LATE_S = 1.0
#: A drip: one byte per 0.2 s, for 8 s at most (far beyond the deadline).
DRIP_S = 0.2
DRIP_TOTAL_S = 8.0


def _rest(server: HostileServer, query: str = "") -> str:
    return f"oip+{server.url}/v2/models/m?timeout={DEADLINE_S}&retries=0{query}"


def _classify_one(address: str) -> None:
    oracle = dial_oracle(address, timeout_s=DEADLINE_S)
    oracle.classify(np.zeros((1, 2, 2, 1), dtype=np.float32))


def _timed_failure(call) -> tuple[OracleError, float]:
    start = time.monotonic()
    with pytest.raises(OracleError) as info:
        call()
    return info.value, time.monotonic() - start


# -- N2: a whole-call deadline, however slowly the server sends ---------------------------


@pytest.mark.parametrize("head_whole", [False, True], ids=["status-line", "body"])
def test_a_dripping_metadata_reply_ends_at_the_deadline(head_whole):
    """N2 as measured: the drip at claim start, on the metadata request."""
    with hostile_server(drip(DRIP_S, DRIP_TOTAL_S, head_whole=head_whole)) as server:
        error, took = _timed_failure(lambda: dial_oracle(_rest(server), timeout_s=9).info)
    assert error.reason == "deadline", error
    assert f"{DEADLINE_S:g} s deadline" in str(error)
    assert took < DEADLINE_S + LATE_S


def test_a_dripping_completions_endpoint_ends_at_the_deadline():
    """The practitioner's relay to an OpenAI-compatible endpoint has the same deadline."""
    with hostile_server(drip(DRIP_S, DRIP_TOTAL_S)) as server:
        oracle = OpenAICompletionsOracle(f"{server.url}/v1", "m", timeout_s=DEADLINE_S)
        error, took = _timed_failure(lambda: oracle.token_logprobs(["a text"]))
    assert error.reason == "deadline" and took < DEADLINE_S + LATE_S


# -- N3: a byte cap while the reply streams, before it is parsed --------------------------

METADATA = (
    b'{"name": "m", "versions": ["1"], "platform": "p", '
    b'"inputs": [{"name": "x", "datatype": "FP32", "shape": [-1, 2, 2, 1]}], '
    b'"outputs": [{"name": "y", "datatype": "FP32", "shape": [-1, 3]}]}'
)


def _nested_lists(size: int) -> Iterator[bytes]:
    """An inference reply whose data is ``size`` bytes of empty lists, never closed."""
    yield b'{"outputs": [{"name": "y", "datatype": "FP32", "shape": [1, 3], "data": ['
    for _ in range(size // 65536):
        yield b"[]," * 21845


def _metadata_then(flooding):
    """Answer the metadata of a one-image, three-class model; flood every inference."""
    served = flood(lambda: [METADATA])

    def behave(handler):
        (flooding if handler.path.endswith("/infer") else served)(handler)

    return behave


@pytest.mark.parametrize("declared", [False, True], ids=["streamed", "content-length"])
def test_a_flooding_inference_reply_is_refused_at_its_cap(declared):
    """N3: 8 MiB of nested lists (main read and parsed it all) for three numbers."""
    length = 8 * 2**20 if declared else None
    behaviour = _metadata_then(flood(lambda: _nested_lists(8 * 2**20), length=length))
    with hostile_server(behaviour) as server:
        tracemalloc.start()
        try:
            error, _ = _timed_failure(lambda: _classify_one(_rest(server)))
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    assert error.reason == "invalid-answer", error
    assert "above the cap of 65632 bytes" in str(error)  # 64 KiB and 32 bytes per value
    assert peak < 2 * 2**20, f"{peak / 2**20:.1f} MiB traced"


def test_a_reply_within_its_cap_holds_no_more_values_than_asked():
    """Under the cap, the parse stops at the values the request asks for (three)."""
    many = b"[" + b"[0]," * 15000 + b"[0]]"
    reply = b'{"outputs": [{"name": "y", "datatype": "FP32", "shape": [1, 3], "data": ' + many
    with hostile_server(_metadata_then(flood(lambda: [reply + b"}]}"]))) as server:
        error, _ = _timed_failure(lambda: _classify_one(_rest(server)))
    assert error.reason == "invalid-answer" and "more than 3 values" in str(error)


def test_a_flooding_metadata_reply_is_refused_at_its_cap():
    endless = flood(
        lambda: itertools.chain([b'{"name": "m", "versions": ['], itertools.repeat(b'"1",' * 16384))
    )
    with hostile_server(endless) as server:
        error, _ = _timed_failure(lambda: dial_oracle(_rest(server), timeout_s=9).info)
    assert error.reason == "invalid-answer" and "above the cap of 262144 bytes" in str(error)


def test_a_flooding_completions_reply_is_refused_at_its_cap():
    endless = flood(lambda: itertools.chain([b'{"choices": ['], itertools.repeat(b"[]," * 16384)))
    with hostile_server(endless) as server:
        oracle = OpenAICompletionsOracle(f"{server.url}/v1", "m", timeout_s=5)
        error, _ = _timed_failure(lambda: oracle.token_logprobs(["a text"]))
    assert error.reason == "invalid-answer" and "above the cap" in str(error)


# -- N8: no redirects -------------------------------------------------------------------------


def test_a_redirect_is_refused_and_never_followed():
    with hostile_server(flood(lambda: [METADATA])) as target:
        with hostile_server(redirect(f"{target.url}/v2/models/m")) as server:
            error, _ = _timed_failure(lambda: dial_oracle(_rest(server), timeout_s=9).info)
            oracle = OpenAICompletionsOracle(f"{server.url}/v1", "m", timeout_s=5)
            relayed, _ = _timed_failure(lambda: oracle.token_logprobs(["a text"]))
        assert target.requests == []
    assert error.reason == "invalid-answer" and "HTTP 302, a redirect" in str(error)
    assert relayed.reason == "invalid-answer" and "HTTP 302, a redirect" in str(relayed)


# -- TLS: the same call over oip+https, the handshake within the deadline ------------------


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    """A CA and a server certificate for 127.0.0.1; the CA's file, and another CA's."""
    folder = tmp_path_factory.mktemp("pki")
    files = {}
    for name in ("ca", "other"):
        key = ec.generate_private_key(ec.SECP256R1())
        files[name] = (certificate(name, key, None, ca=True), key)
        (folder / f"{name}.pem").write_bytes(certificate_pem(files[name][0]))
    ca, ca_key = files["ca"]
    server_key = ec.generate_private_key(ec.SECP256R1())
    server = certificate("server", server_key, (ca.subject, ca_key), server=True)
    (folder / "server.pem").write_bytes(certificate_pem(server) + key_pem(server_key))
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(folder / "server.pem")
    return {"server": context, "ca": folder / "ca.pem", "other": folder / "other.pem"}


def test_an_https_model_server_is_verified_with_the_oracle_ca(pki):
    with hostile_server(flood(lambda: [METADATA]), tls=pki["server"]) as server:
        trusted = dial_oracle(_rest(server), tls=TlsFiles(ca=pki["ca"]), timeout_s=9)
        assert trusted.info.model_name == "m/versions/1"
        stranger = dial_oracle(_rest(server), tls=TlsFiles(ca=pki["other"]), timeout_s=9)
        error, _ = _timed_failure(lambda: stranger.info)
    assert error.reason == "unreachable" and "CERTIFICATE_VERIFY_FAILED" in str(error)


def test_a_tls_handshake_never_answered_ends_at_the_deadline(pki):
    with socket.socket() as silent:  # listens, and never accepts: the handshake hangs
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        address = f"oip+https://127.0.0.1:{silent.getsockname()[1]}/v2/models/m"
        oracle = dial_oracle(
            f"{address}?timeout={DEADLINE_S}&retries=0", tls=TlsFiles(ca=pki["ca"]), timeout_s=9
        )
        error, took = _timed_failure(lambda: oracle.info)
    assert error.reason == "deadline" and took < DEADLINE_S + LATE_S


# -- N2: hostile claims never take the threads of the other calls ----------------------------

#: More hostile claims than the arbiter had threads on main (16).
HOSTILE_CLAIMS = 20


def _probe(channel: grpc.Channel) -> dict[str, float]:
    """Call health, GetCheckpoint, Commit and GetVerdict once each; return their seconds."""
    health = health_pb2_grpc.HealthStub(channel)
    escrow = escrow_pb2_grpc.EscrowStub(channel)
    verifier = vpb_grpc.VerifierStub(channel)
    commit = escrow_pb2.CommitRequest(
        spec_version="0.2",
        root=bytes([9]) * 32,
        n_pairs=8,
        item_kind="image",
        owner="o",
        claim_key=raw_public_key(CLAIM_KEY.public_key()),
    )
    calls = {
        "health": lambda: health.Check(health_pb2.HealthCheckRequest(), timeout=3),
        "GetCheckpoint": lambda: escrow.GetCheckpoint(escrow_pb2.GetCheckpointRequest(), timeout=3),
        "Commit": lambda: escrow.Commit(commit, timeout=3),
    }
    took = {}
    for name, call in calls.items():
        start = time.monotonic()
        call()
        took[name] = time.monotonic() - start
    start = time.monotonic()
    with pytest.raises(grpc.RpcError) as missing:
        verifier.GetVerdict(vpb.GetVerdictRequest(claim_id="0" * 32), timeout=3)
    assert missing.value.code() == grpc.StatusCode.NOT_FOUND
    took["GetVerdict"] = time.monotonic() - start
    return took


def test_hostile_claims_leave_escrow_verdicts_and_health_their_threads(tmp_path: Path):
    """N2: twenty claims whose oracle drips hold their threads; the other calls answer."""
    store = SqliteEscrowStore(tmp_path / "escrow.db", KEY)
    arbiter, port = serve_arbiter(store, KEY, "127.0.0.1:0")
    channel = make_channel(f"127.0.0.1:{port}")
    claims = []
    try:
        with hostile_server(drip(DRIP_S, 30.0)) as server:
            address = f"oip+{server.url}/v2/models/m?timeout=30&retries=0"
            claims = file_hostile_claims(channel, KEY.public_key(), address, HOSTILE_CLAIMS)
            assert server.wait_for(16, timeout_s=20), len(server.requests)
            took = _probe(channel)
            assert max(took.values()) < 1.0, took
            end = time.monotonic() + 5
            while sum(c.done() for c in claims) < HOSTILE_CLAIMS - 16 and time.monotonic() < end:
                time.sleep(0.05)
            refused = [c for c in claims if c.done()]
            assert {c.code() for c in refused} == {grpc.StatusCode.RESOURCE_EXHAUSTED}
            assert len(refused) == HOSTILE_CLAIMS - 16 and len(server.requests) == 16
            assert "claims running at once" in refused[0].details()
    finally:
        for claim in claims:
            claim.cancel()
        channel.close()
        arbiter.stop(None)
        store.close()


# -- N3 over gRPC: a reply is measured against its request before it is parsed ---------------


def _raw_grpc_server(service: str, answers: dict[str, bytes]) -> tuple[grpc.Server, int]:
    """A gRPC server answering each method of ``service`` with fixed bytes."""

    def handler(data: bytes):
        return lambda request, context: data

    methods = {
        name: grpc.unary_unary_rpc_method_handler(handler(data)) for name, data in answers.items()
    }
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2), options=_GRPC_OPTIONS)
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(service, methods),))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    return server, port


_GRPC_OPTIONS = [("grpc.max_send_message_length", 64 * 2**20)]
#: Eight million one-byte labels: 8 MiB on the wire, 64 MiB once parsed (and more).
_LABELS = [1] * (8 * 2**20)


def test_a_flooding_oip_grpc_reply_is_refused_before_it_is_parsed():
    output = oip_pb.ModelInferResponse.InferOutputTensor(
        name="y", datatype="INT64", shape=[len(_LABELS)]
    )
    output.contents.int64_contents.extend(_LABELS)
    metadata = oip_pb.ModelMetadataResponse(
        name="m",
        inputs=[
            oip_pb.ModelMetadataResponse.TensorMetadata(
                name="x", datatype="FP32", shape=[-1, 2, 2, 1]
            )
        ],
        outputs=[
            oip_pb.ModelMetadataResponse.TensorMetadata(name="y", datatype="INT64", shape=[-1])
        ],
    )
    answers = {
        "ServerMetadata": b"",
        "ModelMetadata": metadata.SerializeToString(),
        "ModelInfer": oip_pb.ModelInferResponse(outputs=[output]).SerializeToString(),
    }
    server, port = _raw_grpc_server("inference.GRPCInferenceService", answers)
    try:
        address = f"oip+grpc://127.0.0.1:{port}/m?timeout=5&retries=0&classes=10"
        error, _ = _timed_failure(lambda: _classify_one(address))
    finally:
        server.stop(None)
    assert error.reason == "invalid-answer", error
    assert "ModelInfer answered 8388" in str(error) and "above the cap of 65546" in str(error)


def test_a_flooding_oracle_grpc_reply_is_refused_before_it_is_parsed():
    """The client of practitioners' oracles and of arbiter-held children (``GrpcOracle``)."""
    describe = oracle_pb2.DescribeResponse(
        model_name="m",
        model_digest="d",
        capabilities=["classify"],
        classify_output="label",
        n_classes=10,
        max_batch=8,
    )
    answers = {
        "Describe": describe.SerializeToString(),
        "Classify": oracle_pb2.ClassifyResponse(
            output="label", n_classes=10, labels=_LABELS
        ).SerializeToString(),
    }
    server, port = _raw_grpc_server("twinaudit.oracle.v1.Oracle", answers)
    try:
        error, _ = _timed_failure(lambda: _classify_one(f"127.0.0.1:{port}"))
    finally:
        server.stop(None)
    assert error.reason == "invalid-answer", error
    assert "Classify answered 8388" in str(error) and "above the cap of 65636" in str(error)


def test_issue_40_n3_a_grpc_reply_of_empty_messages_is_refused_before_they_are_built():
    """Two bytes on the wire, a message object in memory: 16x before the bounded reader.

    30,000 empty items fit the cap of a request for one long text, so only their count,
    taken before any is built (:mod:`twinaudit.verifier.oracles.proto_reader`), refuses them.
    """
    describe = oracle_pb2.DescribeResponse(
        model_name="m", model_digest="d", capabilities=["token-logprobs"], max_batch=8
    )
    items = oracle_pb2.TokenLogprobsResponse(items=[oracle_pb2.TokenLogprobs()] * 30_000)
    answers = {"Describe": describe.SerializeToString(), "TokenLogprobs": items.SerializeToString()}
    server, port = _raw_grpc_server("twinaudit.oracle.v1.Oracle", answers)
    try:
        oracle = dial_oracle(f"127.0.0.1:{port}", timeout_s=DEADLINE_S)
        error, _ = _timed_failure(lambda: oracle.token_logprobs(["x" * 20_000]))
    finally:
        server.stop(None)
    assert error.reason == "invalid-answer", error
    assert "TokenLogprobs: the reply holds more messages or strings than were asked" in str(error)
