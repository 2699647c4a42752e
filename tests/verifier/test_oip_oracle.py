"""The Open Inference Protocol oracle without a model server: addresses, tensors, batches, retries.

Table-driven: one row per address, metadata or answer, valid or not, with the error
it must raise (typed, one line). The transports' retry rules are checked against a
local HTTP endpoint that answers what each row says and against a closed gRPC port;
:mod:`tests.verifier.test_oip_mlserver` runs the same client against a real MLServer.
"""

from __future__ import annotations

import http.server
import json
import socket
import threading
from typing import Any

import numpy as np
import pytest

from twinaudit.protocol.errors import (
    InputError,
    LimitExceededError,
    OracleError,
    ParameterError,
    TransientError,
)
from twinaudit.verifier.oracles import oip_transport
from twinaudit.verifier.oracles.dial import dial_oracle
from twinaudit.verifier.oracles.grpc_client import GrpcOracle
from twinaudit.verifier.oracles.oip_address import OipOptions, is_oip_address, parse_oip_address
from twinaudit.verifier.oracles.oip_oracle import OipOracle, dial_oip
from twinaudit.verifier.oracles.oip_tensors import (
    ModelMeta,
    Tensor,
    TensorMeta,
    model_meta_from_json,
    plan_model,
)
from twinaudit.verifier.oracles.oip_transport import (
    with_retries,
)

# -- addresses ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("address", "expected"),
    [
        ("oip+http://127.0.0.1:8080/v2/models/m", ("rest", "m", "", "", OipOptions())),
        (
            "oip+http://h.example:80/serving/v2/models/m-1/versions/3?outputs=logits&max-batch=8",
            ("rest", "m-1", "3", "/serving", OipOptions(outputs="logits", max_batch=8)),
        ),
        (
            "oip+grpc://[::1]:8081/resnet.v2?kind=encoder&timeout=2.5&retries=0",
            ("grpc", "resnet.v2", "", "", OipOptions(kind="encoder", timeout_s=2.5, retries=0)),
        ),
        (
            "oip+grpc://127.0.0.1:1/m/versions/v7?classes=10&digest=sha256:ab12",
            ("grpc", "m", "v7", "", OipOptions(classes=10, digest="sha256:ab12")),
        ),
        (
            "oip+https://127.0.0.1:8443/v2/models/m?layout=flat&shape=28,28,1&mean=0.5&std=0.25",
            (
                "rest",
                "m",
                "",
                "",
                OipOptions(layout="flat", shape=(28, 28, 1), mean=(0.5,), std=(0.25,)),
            ),
        ),
    ],
)
def test_addresses_parse(address, expected):
    parsed = parse_oip_address(address)
    assert is_oip_address(address)
    assert (parsed.transport, parsed.model, parsed.version, parsed.prefix, parsed.options) == (
        expected
    )


@pytest.mark.parametrize(
    ("address", "error", "words"),
    [
        ("oip+ftp://127.0.0.1:1/m", InputError, "starts with one of"),
        ("oip+http://127.0.0.1/v2/models/m", InputError, "HOST:PORT"),
        ("oip+http://127.0.0.1:0/v2/models/m", InputError, "outside 1..65535"),
        ("oip+http://127.0.0.1:8080/models/m", InputError, "/v2/models/NAME"),
        ("oip+http://127.0.0.1:8080/v2/models/m/infer", InputError, "/v2/models/NAME"),
        ("oip+grpc://127.0.0.1:8080/v2/models/m", InputError, "/NAME[/versions/VERSION]"),
        ("oip+grpc://127.0.0.1:8080/", InputError, "/NAME"),
        ("oip+grpc://127.0.0.1:8080/m?colour=red", InputError, "unknown"),
        ("oip+grpc://127.0.0.1:8080/m?outputs=logits&outputs=labels", InputError, "twice"),
        ("oip+grpc://127.0.0.1:8080/m?outputs=", InputError, "no value"),
        ("oip+grpc://127.0.0.1:8080/m?outputs=scores", ParameterError, "not one of"),
        ("oip+grpc://127.0.0.1:8080/m?classes=1", ParameterError, "outside 2.."),
        ("oip+grpc://127.0.0.1:8080/m?max-batch=0", ParameterError, "outside 1..4096"),
        ("oip+grpc://127.0.0.1:8080/m?retries=9", ParameterError, "outside 0..5"),
        ("oip+grpc://127.0.0.1:8080/m?timeout=0", ParameterError, "timeout"),
        ("oip+grpc://127.0.0.1:8080/m?timeout=nan", ParameterError, "finite"),
        ("oip+grpc://127.0.0.1:8080/m?shape=28,28,2", ParameterError, "C must be 1 or 3"),
        ("oip+grpc://127.0.0.1:8080/m?mean=0.5", ParameterError, "go together"),
        ("oip+grpc://127.0.0.1:8080/m?mean=0.5&std=0", ParameterError, "positive"),
        ("oip+grpc://127.0.0.1:8080/m?kind=encoder&classes=4", ParameterError, "encoder"),
        ("oip+grpc://127.0.0.1:8080/m?digest=a%20b", InputError, "not a digest"),
        ("oip+grpc://127.0.0.1:8080/m#frag", InputError, "fragment"),
        ("oip+grpc://127.0.0.1:8080/" + "m" * 300, InputError, "longer than 256"),
        ("oip+grpc://127.0.0.1:8080/m$", InputError, "letters, digits"),
    ],
)
def test_bad_addresses_are_refused_in_one_line(address, error, words):
    with pytest.raises(error) as info:
        parse_oip_address(address)
    assert words in str(info.value) and "\n" not in str(info.value)
    with pytest.raises(error):  # the arbiter's dialler refuses it before contacting anything
        dial_oracle(address, timeout_s=1)


def test_host_port_addresses_still_reach_twinaudit_oracles():
    assert not is_oip_address("127.0.0.1:7500")
    assert isinstance(dial_oracle("127.0.0.1:7500", timeout_s=1), GrpcOracle)
    with pytest.raises(InputError):
        dial_oracle("not an address", timeout_s=1)


# -- metadata to plans -----------------------------------------------------------------


def _meta(inputs=(("x", "FP32", (-1, 28, 28, 1)),), outputs=(("y", "FP32", (-1, 10)),)):
    return ModelMeta(
        "m",
        (),
        "onnxruntime_onnx",
        tuple(TensorMeta(*t) for t in inputs),
        tuple(TensorMeta(*t) for t in outputs),
    )


def _plan(query="", meta=None, framework="triton 2.50"):
    return plan_model(parse_oip_address(f"oip+grpc://127.0.0.1:1/m?{query}"), meta or _meta())


def test_a_plan_describes_the_model():
    plan = _plan()
    info = plan.info
    assert (info.model_name, info.capabilities, info.classify_output) == (
        "m",
        ("classify",),
        "probabilities",
    )
    assert (info.n_classes, info.max_batch, info.input_shape) == (10, 64, (28, 28, 1))
    assert info.framework == "onnxruntime_onnx"
    assert info.model_digest == "unverified: remote OIP endpoint"
    named = plan_model(
        parse_oip_address("oip+http://127.0.0.1:1/v2/models/m/versions/2?digest=sha256:00"),
        _meta(),
        "triton 2.50",
    ).info
    assert named.model_name == "m/versions/2" and named.model_digest == "sha256:00"
    assert named.framework == "triton 2.50, onnxruntime_onnx"
    labels = _plan("classes=7", _meta(outputs=(("y", "INT64", (-1,)),))).info
    assert (labels.classify_output, labels.n_classes) == ("label", 7)
    nchw = _plan("", _meta(inputs=(("x", "UINT8", (4, 3, 32, 32)),)))
    assert (nchw.layout, nchw.image, nchw.fixed_batch, nchw.info.max_batch) == (
        "nchw",
        (32, 32, 3),
        4,
        4,
    )
    encoder = _plan("kind=encoder&shape=8,8,3", _meta(inputs=(("x", "FP16", (-1, 192)),)))
    assert encoder.info.capabilities == ("embed-images",) and encoder.layout == "flat"
    free = _plan("layout=nhwc", _meta(inputs=(("x", "FP32", (-1, -1, -1, 3)),)))
    assert free.image == (-1, -1, 3) and free.info.input_shape == ()


@pytest.mark.parametrize(
    ("query", "meta", "words"),
    [
        ("", _meta(inputs=()), "declares no input"),
        ("", _meta(inputs=(("a", "FP32", (-1, 4)), ("b", "FP32", (-1, 4)))), "input=NAME"),
        ("input=c", _meta(inputs=(("a", "FP32", (-1, 8, 8, 1)),)), "no input tensor 'c'"),
        ("", _meta(outputs=(("p", "FP32", (-1, 10)), ("q", "FP32", (-1, 10)))), "output=NAME"),
        ("", _meta(inputs=(("x", "BYTES", (-1,)),)), "images go as"),
        ("", _meta(inputs=(("x", "FP32", (28, 28, 1)),)), "batch dimension"),
        ("", _meta(inputs=(("x", "FP32", (-1, 3, 8, 3)),)), "name one with layout="),
        ("layout=nchw", _meta(), "does not fit"),
        ("", _meta(inputs=(("x", "FP32", (-1, 784)),)), "add shape=H,W,C"),
        ("shape=27,28,1", _meta(inputs=(("x", "FP32", (-1, 784)),)), "784 values"),
        ("shape=32,32,1", _meta(), "does not fit"),
        ("", _meta(outputs=(("y", "INT64", (-1,)),)), "add classes=N"),
        ("", _meta(outputs=(("y", "FP32", (-1, -1)),)), "add classes=N"),
        ("classes=9", _meta(), "output has 10 classes"),
        ("outputs=logits", _meta(outputs=(("y", "INT32", (-1, 10)),)), "not logits"),
        ("", _meta(outputs=(("y", "FP32", (-1, 10, 1)),)), "[N, classes]"),
        ("kind=encoder", _meta(outputs=(("y", "INT8", (-1, 4)),)), "floating [N, D]"),
        ("max-batch=8", _meta(inputs=(("x", "FP32", (4, 28, 28, 1)),)), "fixed at 4"),
        ("mean=0.5&std=0.5", _meta(inputs=(("x", "UINT8", (-1, 28, 28, 1)),)), "UINT8"),
    ],
)
def test_metadata_that_does_not_settle_the_mapping_is_refused(query, meta, words):
    with pytest.raises(ParameterError) as info:
        _plan(query, meta)
    assert words in str(info.value) and "\n" not in str(info.value)


@pytest.mark.parametrize(
    "metadata",
    [
        [],
        {"name": "", "inputs": [], "outputs": []},
        {"name": "m", "inputs": [{"name": "x", "datatype": "FP32", "shape": [-2]}]},
        {"name": "m", "inputs": [{"name": "x", "datatype": "FP32", "shape": "28"}]},
        {"name": "m", "inputs": [{"name": "x", "datatype": "FP32", "shape": [True]}]},
        {"name": "m", "inputs": ["x"]},
        {"name": "m", "versions": "1", "inputs": [], "outputs": []},
        {"name": "m", "inputs": [{"name": "x", "datatype": "FP32", "shape": [-1] * 9}]},
    ],
)
def test_malformed_metadata_is_an_invalid_answer(metadata):
    with pytest.raises(OracleError) as info:
        model_meta_from_json(metadata)
    assert info.value.reason == "invalid-answer"


# -- tensors ---------------------------------------------------------------------------


def _images(n=3, shape=(4, 4, 1), seed=0):
    return np.random.default_rng(seed).integers(0, 256, (n, *shape)).astype(np.float32) / 255


def test_images_are_encoded_in_the_models_layout_and_datatype():
    images = _images(2, (4, 4, 3))
    meta = _meta(inputs=(("x", "FP32", (-1, 3, 4, 4)),), outputs=(("y", "FP32", (-1, 10)),))
    nchw = _plan("mean=0.5,0.5,0.5&std=0.5,0.5,0.5", meta).encode(images)
    assert nchw.shape == (2, 3, 4, 4) and nchw.datatype == "FP32"
    np.testing.assert_array_equal(
        nchw.data.reshape(2, 3, 4, 4), ((images - 0.5) / 0.5).transpose(0, 3, 1, 2)
    )
    flat = _plan("shape=4,4,3", _meta(inputs=(("x", "FP64", (-1, 48)),))).encode(images)
    assert flat.shape == (2, 48) and flat.data.dtype == np.dtype("<f8")
    np.testing.assert_array_equal(flat.data, images.reshape(-1).astype(np.float64))
    uint8 = _plan("", _meta(inputs=(("x", "UINT8", (-1, 4, 4, 3)),))).encode(images)
    np.testing.assert_array_equal(uint8.data, np.rint(images * 255).astype(np.uint8).reshape(-1))
    fixed = _plan("", _meta(inputs=(("x", "FP32", (4, 4, 4, 3)),))).encode(images)
    assert fixed.shape == (4, 4, 4, 3)  # padded with two blank images
    assert not fixed.data.reshape(4, -1)[2:].any()


def _tensor(values, datatype="FP64", name="y", shape=None):
    data = np.asarray(values)
    return Tensor(name, datatype, tuple(shape or data.shape), data.reshape(-1))


LABEL_META = _meta(outputs=(("y", "FP64", (-1,)),))


def test_answers_are_mapped_to_the_projects_output_kinds():
    probs = np.full((2, 10), 0.1)
    answer = _plan().classify_answer(_tensor(probs), 2)
    np.testing.assert_array_equal(answer.probabilities, probs)
    logits = np.arange(20, dtype=np.float64).reshape(2, 10)
    soft = _plan("outputs=logits").classify_answer(_tensor(logits, "FP32"), 2).probabilities
    np.testing.assert_allclose(soft.sum(axis=1), 1.0, rtol=0, atol=1e-15)
    assert soft.argmax(axis=1).tolist() == [9, 9]
    meta = _meta(outputs=(("y", "INT64", (-1, 1)),))
    labels = _plan("classes=10", meta).classify_answer(_tensor([[3], [7]], "INT64"), 2)
    assert labels.output == "label" and labels.labels.tolist() == [3, 7]
    float_labels = _plan("outputs=labels&classes=10", LABEL_META).classify_answer(
        _tensor([3.0, 7.0]), 2
    )
    assert float_labels.labels.tolist() == [3, 7]
    # A fixed batch's padding answers are dropped.
    fixed = _plan("", _meta(inputs=(("x", "FP32", (4, 28, 28, 1)),)))
    assert fixed.classify_answer(_tensor(np.full((4, 10), 0.1)), 3).probabilities.shape == (3, 10)
    encoder = _plan("kind=encoder", _meta(outputs=(("e", "FP32", (-1, -1)),)))
    embeddings = encoder.embedding_answer(_tensor(np.ones((2, 5)), "FP32", "e"), 2)
    assert embeddings.embeddings.shape == (2, 5)


@pytest.mark.parametrize(
    ("query", "tensor", "words"),
    [
        ("", _tensor(np.full((2, 10), 0.1), name="z"), "answered tensor 'z'"),
        ("", _tensor(np.full((2, 10), 0.1), "INT64"), "expected one of"),
        ("", _tensor(np.full((3, 10), 0.1)), "expected [2, 10]"),
        ("", _tensor(np.full((2, 9), 0.1)), "expected [2, 10]"),
        ("", _tensor(np.full((2, 10), 0.1), shape=(2, 11)), "does not hold"),
        ("", _tensor(np.arange(20.0).reshape(2, 10)), "outputs=logits"),
        ("", _tensor(np.full((2, 10), np.nan)), "not probability vectors"),
        ("outputs=logits", _tensor(np.full((2, 10), np.inf)), "NaN or infinity"),
        ("outputs=labels&classes=10", _tensor([3.5, 1.0]), "whole numbers"),
        ("outputs=labels&classes=10", _tensor([3, 10], "INT32"), "labels outside"),
        ("outputs=labels&classes=10", _tensor([[1, 2], [3, 4]], "INT32"), "expected [2]"),
    ],
)
def test_answers_that_break_the_mapping_are_invalid(query, tensor, words):
    plan = _plan(query, LABEL_META if "labels" in query else None)
    with pytest.raises(OracleError) as info:
        plan.classify_answer(tensor, 2)
    assert info.value.reason == "invalid-answer" and words in str(info.value)


def test_images_the_model_does_not_take_are_refused_before_sending():
    with pytest.raises(InputError, match="takes images of shape"):
        _plan().check_images(_images(1, (8, 8, 1)))


# -- batching and retries, through a fake transport ---------------------------------------


class FakeTransport:
    """Answers uniform probabilities; fails the first ``failures`` requests with ``error``."""

    def __init__(self, meta: ModelMeta, failures: int = 0, error: Exception | None = None):
        self.meta = meta
        self.failures = failures
        self.error = error or TransientError("unreachable", "connection refused")
        self.sent: list[Tensor] = []
        self.closed = False

    def element_bytes(self, datatype: str) -> int:
        return 4

    def framework(self) -> str:
        return "fake 1.0"

    def model_metadata(self) -> ModelMeta:
        return self.meta

    def infer(self, tensor: Tensor, output: str, max_values: int) -> Tensor:
        self.sent.append(tensor)
        assert max_values == tensor.shape[0] * 10
        if self.failures:
            self.failures -= 1
            raise self.error
        n = tensor.shape[0]
        return Tensor(output, "FP32", (n, 10), np.full(n * 10, 0.1, dtype=np.float64))

    def close(self) -> None:
        self.closed = True


def _oracle(query: str, meta: ModelMeta | None = None, **fake: Any) -> tuple[OipOracle, Any]:
    transport = FakeTransport(meta or _meta(), **fake)
    address = parse_oip_address(f"oip+grpc://127.0.0.1:1/m?{query}")
    return OipOracle(address, transport), transport


def test_batches_respect_the_configured_max_batch():
    oracle, transport = _oracle("max-batch=3")
    answer = oracle.classify(_images(7, (28, 28, 1)))
    assert answer.probabilities.shape == (7, 10)
    assert [t.shape[0] for t in transport.sent] == [3, 3, 1]
    assert oracle.info.framework == "fake 1.0, onnxruntime_onnx"


def test_a_fixed_batch_is_sent_whole_and_padded():
    oracle, transport = _oracle("", _meta(inputs=(("x", "FP32", (4, 28, 28, 1)),)))
    assert oracle.classify(_images(5, (28, 28, 1))).probabilities.shape == (5, 10)
    assert [t.shape[0] for t in transport.sent] == [4, 4]


def test_a_request_above_the_size_cap_is_split():
    meta = _meta(inputs=(("x", "FP32", (-1, 256, 256, 1)),))
    oracle, transport = _oracle(f"request-bytes={2 * 4 * 256 * 256}", meta)
    oracle.classify(_images(5, (256, 256, 1)))
    assert [t.shape[0] for t in transport.sent] == [2, 2, 1]
    oracle, transport = _oracle(f"request-bytes={4 * 256 * 256 - 4}", meta)
    with pytest.raises(LimitExceededError):
        oracle.classify(_images(1, (256, 256, 1)))
    assert not transport.sent
    for wrong in ("request-bytes=65535", "request-bytes=67108864", "request-bytes=1e6"):
        with pytest.raises(ParameterError):
            parse_oip_address(f"oip+grpc://127.0.0.1:1/m?{wrong}")


def test_unavailable_is_retried_a_bounded_number_of_times(monkeypatch):
    monkeypatch.setattr(oip_transport, "RETRY_PAUSE_S", 0.0)
    oracle, transport = _oracle("retries=2", failures=2)
    oracle.classify(_images(1, (28, 28, 1)))
    assert len(transport.sent) == 3
    oracle, transport = _oracle("retries=2", failures=3)
    with pytest.raises(OracleError) as info:
        oracle.classify(_images(1, (28, 28, 1)))
    assert len(transport.sent) == 3 and info.value.reason == "unreachable"
    assert not isinstance(info.value, TransientError) and "tried 3 times" in str(info.value)


@pytest.mark.parametrize(
    "error",
    [OracleError("deadline", "no answer in 1 s"), OracleError("invalid-answer", "HTTP 400")],
)
def test_other_failures_are_not_retried(error):
    oracle, transport = _oracle("retries=5", failures=1, error=error)
    with pytest.raises(OracleError) as info:
        oracle.classify(_images(1, (28, 28, 1)))
    assert len(transport.sent) == 1 and info.value.reason == error.reason


def test_with_retries_pauses_grow_and_stop():
    calls = []

    def call():
        calls.append(1)
        raise TransientError("invalid-answer", "HTTP 503")

    with pytest.raises(OracleError) as info:
        with_retries(call, 1, pause_s=0.0)
    assert len(calls) == 2 and "HTTP 503 (tried 2 times)" in str(info.value)


def test_a_capability_the_model_lacks_is_refused():
    oracle, _ = _oracle("")
    with pytest.raises(OracleError, match="does not offer 'embed-images'"):
        oracle.embed_images(_images(1, (28, 28, 1)))


# -- the REST and gRPC transports' own errors ------------------------------------------


class _Stub(http.server.BaseHTTPRequestHandler):
    """Answers each request with the next (status, body) of the server's script."""

    def do_GET(self):
        self._answer()

    def do_POST(self):
        length = int(self.headers.get("Content-Length", 0))
        self.server.bodies.append(json.loads(self.rfile.read(length)))
        self._answer()

    def _answer(self):
        self.server.paths.append(self.path)
        status, body = self.server.script.pop(0)
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


METADATA = {
    "name": "m",
    "versions": ["1"],
    "platform": "pytorch",
    "inputs": [{"name": "x", "datatype": "FP32", "shape": [-1, 2, 2, 1]}],
    "outputs": [{"name": "y", "datatype": "FP32", "shape": [-1, 3]}],
}
ANSWER = {
    "outputs": [{"name": "y", "datatype": "FP32", "shape": [1, 3], "data": [[0.2, 0.3, 0.5]]}]
}


@pytest.fixture
def rest_server(monkeypatch):
    monkeypatch.setattr(oip_transport, "RETRY_PAUSE_S", 0.0)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Stub)
    server.script, server.paths, server.bodies = [], [], []
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def test_rest_retries_5xx_and_reads_nested_data(rest_server):
    rest_server.script = [
        (200, {"name": "kserve", "version": "0.21.0", "extensions": []}),
        (200, METADATA),
        (503, {"error": "warming up"}),
        (502, {}),
        (200, ANSWER),
    ]
    port = rest_server.server_address[1]
    oracle = dial_oip(f"oip+http://127.0.0.1:{port}/v2/models/m?retries=2")
    answer = oracle.classify(np.zeros((1, 2, 2, 1), dtype=np.float32))
    assert answer.probabilities.tolist() == [[0.2, 0.3, 0.5]]
    assert oracle.info.model_name == "m/versions/1"
    assert oracle.info.framework == "kserve 0.21.0, pytorch"
    assert rest_server.paths == ["/v2", "/v2/models/m"] + ["/v2/models/m/infer"] * 3
    sent = rest_server.bodies[-1]["inputs"][0]
    assert (sent["name"], sent["datatype"], sent["shape"]) == ("x", "FP32", [1, 2, 2, 1])
    assert rest_server.bodies[-1]["outputs"] == [{"name": "y"}]


def test_rest_does_not_retry_a_4xx(rest_server):
    rest_server.script = [
        (404, {}),  # no server metadata: the framework is left out
        (200, METADATA),
        (400, {"error": "bad input\nTraceback (most recent call last): ..."}),
    ]
    port = rest_server.server_address[1]
    oracle = dial_oip(f"oip+http://127.0.0.1:{port}/v2/models/m?retries=5")
    with pytest.raises(OracleError) as info:
        oracle.classify(np.zeros((1, 2, 2, 1), dtype=np.float32))
    assert str(info.value) == (
        "oracle invalid-answer: /v2/models/m/infer answered HTTP 400: bad input"
    )
    assert len(rest_server.paths) == 3 and oracle.info.framework == "pytorch"


@pytest.mark.parametrize(
    "reply",
    [
        {"outputs": "y"},
        {"outputs": [{"name": "y", "datatype": "FP32", "shape": [1, 3], "data": ["a", 1, 2]}]},
        {"outputs": [{"name": "y", "datatype": "FP32", "shape": [1, 3], "data": [[1], 2, 3]}]},
        {"outputs": [{"name": "y", "datatype": "FP32", "shape": [1, -1], "data": [1, 2, 3]}]},
        {"outputs": [{"name": "z", "datatype": "FP32", "shape": [1, 3], "data": [1, 2, 3]}]},
        {"outputs": [{"name": "y", "datatype": "INT8", "shape": [1, 3], "data": [1, 2, 300]}]},
    ],
)
def test_rest_replies_that_break_the_protocol_are_invalid(rest_server, reply):
    rest_server.script = [(200, {}), (200, METADATA), (200, reply)]
    port = rest_server.server_address[1]
    oracle = dial_oip(f"oip+http://127.0.0.1:{port}/v2/models/m")
    with pytest.raises(OracleError) as info:
        oracle.classify(np.zeros((1, 2, 2, 1), dtype=np.float32))
    assert info.value.reason == "invalid-answer" and "\n" not in str(info.value)


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.mark.parametrize(
    "scheme", ["oip+grpc://127.0.0.1:{}/m", "oip+http://127.0.0.1:{}/v2/models/m"]
)
def test_nothing_listening_is_unreachable_after_the_retries(scheme, monkeypatch):
    monkeypatch.setattr(oip_transport, "RETRY_PAUSE_S", 0.0)
    oracle = dial_oracle(scheme.format(_closed_port()) + "?retries=1&timeout=5", timeout_s=1)
    with pytest.raises(OracleError) as info:
        _ = oracle.info
    assert info.value.reason == "unreachable" and "tried 2 times" in str(info.value)
