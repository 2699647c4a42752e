"""Every server refuses what it cannot serve with a typed answer (issue #22 D7, D9, ports).

Real in-process servers on 127.0.0.1: the arbiter (escrow and verifier services on
SQLite) and a model oracle. Each case sends raw request bytes to one method and
expects ``INVALID_ARGUMENT``, never gRPC's ``UNKNOWN`` ("Exception calling
application") or ``INTERNAL`` ("Exception deserializing request!"), and the arbiter's
log unchanged. Then: a port already in use is refused (gRPC's SO_REUSEPORT would let
a second server share it and split the clients), and so is ``--listen`` without a
host, each by the CLI with one line on stderr and a non-zero exit.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from grpc_health.v1 import health_pb2

from tests.support.arbiter import sqlite_arbiter
from tests.support.claims import make_pairset
from tests.support.fake_oracle import LinearOracle
from tests.support.keys import KEY
from twinaudit.cli.main import main as cli_main
from twinaudit.owner.claim_client import sign_start
from twinaudit.owner.escrow_client import escrow_root, fetch_checkpoint
from twinaudit.practitioner.grpc_server import serve_oracle
from twinaudit.protocol.errors import InputError
from twinaudit.protocol.keys import key_id, write_keypair
from twinaudit.verifier.escrow.service import serve_escrow
from twinaudit.verifier.escrow.sqlite_store import SqliteEscrowStore
from twinaudit.verifier.server import serve_arbiter
from twinaudit.wire import transport
from twinaudit.wire.escrow.v1 import escrow_pb2
from twinaudit.wire.oracle.v1 import oracle_pb2
from twinaudit.wire.transport import make_channel, make_server, parse_address
from twinaudit.wire.verifier.v1 import verifier_pb2 as vpb

ROOT = bytes([7]) * 32
PAIRS = make_pairset(16, seed=5)
TIMEOUT_S = 10.0
#: Not a message of any type: a field tag with the invalid wire type 7.
GARBAGE = b"\x0f\xff\xff"
BAD_UTF8 = b"\xff\xfe"
SQL = "' OR 1=1 --"


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """An arbiter holding two records (0: ROOT, 1: PAIRS), and an oracle; a channel to each."""
    directory = tmp_path_factory.mktemp("arbiter")
    oracle, port = serve_oracle(LinearOracle(), "127.0.0.1:0")
    with sqlite_arbiter(directory, KEY) as address:
        arbiter = make_channel(address)
        for root, n_pairs in ((ROOT, 8), (PAIRS.root, len(PAIRS))):
            escrow_root(
                arbiter,
                root=root,
                n_pairs=n_pairs,
                item_kind="image",
                owner="o",
                claim_key=PAIRS.claim_public_key(),
                arbiter_public_key=KEY.public_key(),
            )
        channel = make_channel(f"127.0.0.1:{port}")
        try:
            yield {"arbiter": arbiter, "oracle": channel, "oracle address": f"127.0.0.1:{port}"}
        finally:
            channel.close()
            arbiter.close()
            oracle.stop(None)


def _refusal(channel: grpc.Channel, method: str, request: bytes, streaming: bool) -> grpc.RpcError:
    """Send ``request`` as raw bytes; return the error the server answered with."""
    with pytest.raises(grpc.RpcError) as refused:
        if streaming:
            for _ in channel.stream_stream(method)(iter([request]), timeout=TIMEOUT_S):
                pass
        else:
            channel.unary_unary(method)(request, timeout=TIMEOUT_S)
    return refused.value


def _start(**fields: object) -> bytes:
    """A claim stream's first message: a valid ClaimStart changed by ``fields``, then signed.

    Both records bind the claim key of ``PAIRS``; the request is signed after the change,
    so that what is refused is the change, not a missing signature (spec §10.7).
    """
    start = vpb.ClaimStart(
        spec_version="0.2",
        record_index=0,
        record_root=ROOT,
        tie_rule="skip",
        model=vpb.ModelRef(oracle_endpoint="127.0.0.1:9", name="m"),
        score=vpb.ScoreSpec(function="image-classifier", k=1, perturbation="none", knowledge="C1"),
        test=vpb.TestSpec(name="mixture-e", p=0.05),
    )
    for name, value in fields.items():
        if name == "endpoint":
            start.model.oracle_endpoint = value
        else:
            setattr(start, name, value)
    sign_start(start, PAIRS.claim_key, key_id(KEY.public_key()))
    return vpb.ClaimMessage(start=start).SerializeToString()


def _length_delimited(number: int, payload: bytes) -> bytes:
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        out.append(value & 0x7F | (0x80 if value > 0x7F else 0))
        value >>= 7
        if not value:
            return bytes(out)


def _bad_utf8(message: Descriptor, depth: int = 0) -> bytes | None:
    """Bytes of ``message`` with invalid UTF-8 in its first string field, or None."""
    for field in message.fields:
        if field.type == FieldDescriptor.TYPE_STRING:
            return _length_delimited(field.number, BAD_UTF8)
    for field in message.fields:
        if field.type == FieldDescriptor.TYPE_MESSAGE and depth < 3:
            inner = _bad_utf8(field.message_type, depth + 1)
            if inner is not None:
                return _length_delimited(field.number, inner)
    return None


def _every_method() -> list[tuple[str, str, Descriptor, bool]]:
    """(server, path, request type, client streaming) of every method the servers offer."""
    methods = []
    for server, module in (
        ("arbiter", vpb),
        ("arbiter", escrow_pb2),
        ("oracle", oracle_pb2),
        ("arbiter", health_pb2),
        ("oracle", health_pb2),
    ):
        for service in module.DESCRIPTOR.services_by_name.values():
            for method in service.methods:
                if method.name == "Watch":
                    continue  # health's server stream never ends by itself
                path = f"/{service.full_name}/{method.name}"
                methods.append((server, path, method.input_type, method.client_streaming))
    return methods


METHODS = _every_method()


@pytest.mark.parametrize(
    ("server", "method", "request_type", "streaming"), METHODS, ids=[m[1] for m in METHODS]
)
def test_every_method_refuses_bytes_that_do_not_parse(
    servers, server, method, request_type, streaming
):
    invalid = grpc.StatusCode.INVALID_ARGUMENT
    assert _refusal(servers[server], method, GARBAGE, streaming).code() == invalid
    bad = _bad_utf8(request_type)
    if bad is not None:  # D9: invalid UTF-8 in a string field
        assert _refusal(servers[server], method, bad, streaming).code() == invalid


VERDICT = "/twinaudit.verifier.v1.Verifier/GetVerdict"
CLAIM = "/twinaudit.verifier.v1.Verifier/FileClaim"


@pytest.mark.parametrize(
    ("method", "message", "status", "reason"),
    [
        # D7: a claim id that is not one is INVALID_ARGUMENT, never UNKNOWN.
        (VERDICT, vpb.GetVerdictRequest(claim_id=""), "INVALID_ARGUMENT", "1 to 128"),
        (VERDICT, vpb.GetVerdictRequest(claim_id="a" * 129), "INVALID_ARGUMENT", "1 to 128"),
        (VERDICT, vpb.GetVerdictRequest(claim_id="a" * 10**6), "INVALID_ARGUMENT", "1 to 128"),
        (VERDICT, vpb.GetVerdictRequest(claim_id=SQL), "INVALID_ARGUMENT", "ASCII letters"),
        (VERDICT, vpb.GetVerdictRequest(claim_id="née"), "INVALID_ARGUMENT", "ASCII letters"),
        (VERDICT, vpb.GetVerdictRequest(claim_id="a" * 128), "NOT_FOUND", "no verdict"),
        (CLAIM, _start(resume_claim_id="a" * 129), "INVALID_ARGUMENT", "1 to 128"),
        (CLAIM, _start(resume_claim_id=SQL), "INVALID_ARGUMENT", "ASCII letters"),
        # The oracle endpoint is dialled only when it is HOST:PORT.
        (CLAIM, _start(endpoint=SQL), "INVALID_ARGUMENT", "HOST:PORT"),
        (CLAIM, _start(endpoint=f"{SQL}:1"), "INVALID_ARGUMENT", "no valid host name"),
        (CLAIM, _start(endpoint="noport"), "INVALID_ARGUMENT", "HOST:PORT"),
        (CLAIM, _start(endpoint="localhost:99999"), "INVALID_ARGUMENT", "outside 1..65535"),
        (CLAIM, _start(endpoint=""), "INVALID_ARGUMENT", "no oracle endpoint"),
        (CLAIM, _start(tie_rule=SQL), "INVALID_ARGUMENT", "tie rule"),
    ],
    ids=lambda value: value if isinstance(value, str) and not value.startswith("/") else "",
)
def test_malformed_ids_are_invalid_arguments(servers, method, message, status, reason):
    raw = message if isinstance(message, bytes) else message.SerializeToString()
    before, _ = fetch_checkpoint(servers["arbiter"], arbiter_public_key=KEY.public_key())
    refused = _refusal(servers["arbiter"], method, raw, method == CLAIM)
    assert refused.code().name == status and reason in refused.details()
    after, _ = fetch_checkpoint(servers["arbiter"], arbiter_public_key=KEY.public_key())
    # Nothing stored for any of them: no escrow entry and no claim-start entry (spec §9.6),
    # whatever the module's other tests (a claim that was filed, say) appended before.
    assert after.size == before.size and after.root == before.root


def test_a_message_that_does_not_parse_in_a_running_claim(servers):
    """The claim starts and asks for openings; the answer is garbage: INVALID_ARGUMENT."""
    start = _start(record_index=1, record_root=PAIRS.root, endpoint=servers["oracle address"])
    stream = servers["arbiter"].stream_stream(
        CLAIM, response_deserializer=vpb.VerifierMessage.FromString
    )
    kinds = []
    with pytest.raises(grpc.RpcError) as refused:
        for message in stream(iter([start, GARBAGE]), timeout=TIMEOUT_S):
            kinds.append(message.WhichOneof("kind"))
    assert kinds == ["accepted", "request"], refused.value.details()
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "not a valid message" in refused.value.details()


# --- Addresses and ports --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("address", "expected"),
    [
        ("127.0.0.1:7443", ("127.0.0.1", 7443)),
        ("localhost:1", ("localhost", 1)),
        ("arbiter.example.org:65535", ("arbiter.example.org", 65535)),
        ("[::1]:7443", ("[::1]", 7443)),
        ("7443", "HOST:PORT"),
        (":7443", "HOST:PORT"),
        ("localhost", "HOST:PORT"),
        ("localhost:", "not a port"),
        ("localhost:http", "not a port"),
        ("localhost:0", "outside"),
        ("localhost:65536", "outside"),
        ("[::1:7443", "HOST:PORT"),
        ("[nope]:7443", "IPv6"),
        ("a b:1", "host name"),
        (f"{SQL}:1", "host name"),
        ("dns:///a:1", "host name"),
        ("x" * 400 + ":1", "at most 259 bytes"),
    ],
)
def test_parse_address(address, expected):
    if isinstance(expected, tuple):
        assert parse_address(address) == expected
    else:
        with pytest.raises(InputError, match=expected):
            parse_address(address)
    assert parse_address("127.0.0.1:0", port_zero=True) == ("127.0.0.1", 0)


@pytest.fixture
def busy_port() -> Iterator[int]:
    """A port a plain socket listens on (not a gRPC server: any listener counts)."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        yield listener.getsockname()[1]


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SqliteEscrowStore]:
    with SqliteEscrowStore(tmp_path / "escrow.db", KEY) as opened:
        yield opened


def test_every_server_refuses_a_port_in_use(store, busy_port):
    listen = f"127.0.0.1:{busy_port}"
    for start in (
        lambda: serve_arbiter(store, KEY, listen),
        lambda: serve_escrow(store, listen),
        lambda: serve_oracle(LinearOracle(), listen),
    ):
        with pytest.raises(InputError, match="already in use") as refused:
            start()
        assert "\n" not in refused.value.diagnostics()


def test_a_second_grpc_server_cannot_share_the_port(store, monkeypatch):
    """Without the early check, gRPC itself must fail the bind: SO_REUSEPORT is off."""
    first, port = serve_oracle(LinearOracle(), "127.0.0.1:0")
    try:
        monkeypatch.setattr(transport, "_refuse_port_in_use", lambda *args: None)
        with pytest.raises(InputError, match="in use or not local"):
            make_server(f"127.0.0.1:{port}", lambda server: None)
    finally:
        first.stop(None)


def _stderr_lines(capfd: pytest.CaptureFixture[str]) -> list[str]:
    return [line for line in capfd.readouterr().err.splitlines() if line.strip()]


@pytest.mark.parametrize("listen", ["7443", "localhost", ":7443", "busy"])
def test_verifier_serve_refuses_with_one_line(tmp_path, capfd, busy_port, listen):
    write_keypair(tmp_path / "arbiter.key")
    address = f"127.0.0.1:{busy_port}" if listen == "busy" else listen
    db = tmp_path / "escrow.db"
    args = ["verifier", "serve", "--listen", address, "--db", str(db)]
    status = cli_main([*args, "--key", str(tmp_path / "arbiter.key")])
    lines = _stderr_lines(capfd)
    assert status == 2
    assert len(lines) == 1 and lines[0].startswith("twinaudit: error: [invalid-input]")
    assert ("already in use" if listen == "busy" else "--listen must be HOST:PORT") in lines[0]
    assert db.exists() == (listen == "busy")  # a malformed address opens nothing


def test_oracle_serve_refuses_with_one_line(tmp_path, capfd, busy_port):
    torch = pytest.importorskip("torch")
    from tests.support.models import TinyCNN

    weights = tmp_path / "tiny.pt"
    torch.save(TinyCNN().state_dict(), weights)
    model = ["--model", str(weights), "--arch", "tests.support.models:TinyCNN"]
    for listen, message in (("7443", "--listen must be HOST:PORT"), ("busy", "already in use")):
        address = f"127.0.0.1:{busy_port}" if listen == "busy" else listen
        args = ["oracle", "serve", "--listen", address, "--n-classes", "10", *model]
        status = cli_main(args)
        lines = _stderr_lines(capfd)
        assert status == 2
        assert len(lines) == 1 and message in lines[0]
