"""Classifier oracles: the torch adapter, the gRPC service and client, and their failure modes."""

import hashlib
import socket
import time

import grpc
import numpy as np
import pytest

torch = pytest.importorskip("torch")

from tests.support.grpc_serving import OracleServers  # noqa: E402
from tests.support.models import TinyCNN  # noqa: E402
from twinaudit.practitioner.grpc_server import (  # noqa: E402
    SERVICE_NAME,
    OracleServicer,
    describe_response,
    serve_oracle,
)
from twinaudit.practitioner.torch_oracle import TorchClassifierOracle, state_dict_digest  # noqa: E402
from twinaudit.protocol.errors import InputError, OracleError, ParameterError  # noqa: E402
from twinaudit.protocol.oracles.base import ClassifierOracle, ClassifyAnswer, OracleInfo  # noqa: E402
from twinaudit.verifier.oracles.grpc_client import GrpcClassifierOracle  # noqa: E402
from twinaudit.wire import transport  # noqa: E402
from twinaudit.wire.oracle.v1 import oracle_pb2, oracle_pb2_grpc  # noqa: E402


@pytest.fixture(scope="module", autouse=True)
def _one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def _model(seed=0, n_classes=10):
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return TinyCNN(n_classes)


def _images(n=7, seed=0, shape=(28, 28, 1)):
    return np.random.default_rng(seed).random((n, *shape)).astype(np.float32)


def _expected_probs(model, images, mean=0.0, std=1.0):
    x = (torch.from_numpy(images).permute(0, 3, 1, 2) - mean) / std
    with torch.no_grad():
        return torch.softmax(model(x).double(), dim=1).numpy()


@pytest.fixture(scope="module")
def model():
    return _model()


@pytest.fixture(scope="module")
def oracle(model):
    return TorchClassifierOracle(model, n_classes=10, model_name="tiny", max_batch=4)


@pytest.fixture
def serve():
    """Start servers for oracles or servicers on 127.0.0.1:0; stop them afterwards."""
    servers = OracleServers(GrpcClassifierOracle)
    yield servers.start
    servers.close()


# --- the torch adapter -------------------------------------------------------------------


def test_torch_oracle_describes_itself(oracle, model):
    assert oracle.describe() == {
        "model_name": "tiny",
        "model_digest": state_dict_digest(model),
        "capabilities": ["classify"],
        "classify_output": "probabilities",
        "n_classes": 10,
        "max_batch": 4,
    }
    assert OracleInfo.from_value(oracle.describe()) == oracle.info


def test_state_dict_digest_follows_the_documented_format(model):
    hasher = hashlib.sha256(b"twinaudit/state-dict/v1\x00")
    u64 = lambda v: v.to_bytes(8, "little")  # noqa: E731
    for name, tensor in sorted(model.state_dict().items()):
        data = tensor.contiguous().numpy().tobytes()
        dtype = str(tensor.dtype).encode()
        hasher.update(u64(len(name)) + name.encode() + u64(len(dtype)) + dtype)
        hasher.update(u64(tensor.dim()) + b"".join(u64(d) for d in tensor.shape))
        hasher.update(u64(len(data)) + data)
    assert state_dict_digest(model) == hasher.hexdigest()
    assert state_dict_digest(_model(0)) == state_dict_digest(model)
    changed = _model(0)
    with torch.no_grad():
        changed.fc.bias[3] += 1e-6
    assert state_dict_digest(changed) != state_dict_digest(model)


def test_torch_oracle_probabilities(oracle, model):
    images = _images(7)
    answer = oracle.classify(images)
    assert answer.output == "probabilities"
    assert answer.probabilities.shape == (7, 10)
    # Batches of 4 and 3; the answer matches a float64 softmax of the logits.
    np.testing.assert_allclose(answer.probabilities, _expected_probs(model, images), atol=1e-6)
    whole = TorchClassifierOracle(model, n_classes=10, max_batch=256).classify(images)
    np.testing.assert_allclose(answer.probabilities, whole.probabilities, atol=1e-6)


def test_torch_oracle_label_only(model):
    images = _images(9, seed=1)
    labels = TorchClassifierOracle(model, n_classes=10, label_only=True).classify(images)
    assert labels.output == "label"
    assert labels.labels.dtype == np.int64
    assert np.array_equal(labels.labels, _expected_probs(model, images).argmax(axis=1))
    info = TorchClassifierOracle(model, n_classes=10, label_only=True).info
    assert info.classify_output == "label"


def test_torch_oracle_normalises_per_channel(model):
    images = _images(3, seed=2)
    normed = TorchClassifierOracle(model, n_classes=10, mean=[0.25], std=[0.5])
    np.testing.assert_allclose(
        normed.classify(images).probabilities, _expected_probs(model, images, 0.25, 0.5), atol=1e-6
    )


def test_torch_oracle_probes_the_class_count(model):
    assert TorchClassifierOracle(model, probe_shape=(28, 28, 1)).info.n_classes == 10


@pytest.mark.parametrize(
    "kwargs",
    [
        {"n_classes": 10, "mean": [0.5]},
        {"n_classes": 10, "mean": [0.5], "std": [0.0]},
        {"n_classes": 10, "mean": [0.5, 0.5], "std": [1.0, 1.0]},
        {"n_classes": 10, "mean": [0.5, 0.5, 0.5], "std": [1.0]},
        {"n_classes": 10, "mean": [np.nan], "std": [1.0]},
        {"n_classes": 10, "max_batch": 0},
        {"n_classes": 10, "max_batch": 5000},
        {"n_classes": 1},
        {"n_classes": 10, "model_name": ""},
        {},
        {"probe_shape": (28, 28)},
        {"n_classes": 10, "device": "no-such-device"},
        *([] if torch.cuda.is_available() else [{"n_classes": 10, "device": "cuda"}]),
    ],
)
def test_torch_oracle_parameters(model, kwargs):
    with pytest.raises(ParameterError):
        TorchClassifierOracle(model, **kwargs)


def test_torch_oracle_needs_a_module():
    with pytest.raises(ParameterError):
        TorchClassifierOracle("not a module", n_classes=10)


@pytest.mark.parametrize(
    "images",
    [
        np.zeros((2, 28, 28, 1), dtype=np.float64),
        np.zeros((28, 28, 1), dtype=np.float32),
        np.zeros((0, 28, 28, 1), dtype=np.float32),
        np.full((1, 28, 28, 1), np.nan, dtype=np.float32),
        np.full((1, 28, 28, 1), 1.01, dtype=np.float32),
        np.zeros((1, 28, 28, 2), dtype=np.float32),
        np.zeros((1, 20, 20, 1), dtype=np.float32),  # the model itself refuses this size
    ],
)
def test_torch_oracle_rejects_bad_images(oracle, images):
    with pytest.raises(InputError):
        oracle.classify(images)


class _Broken(torch.nn.Module):
    def __init__(self, output):
        super().__init__()
        self.output = output

    def forward(self, x):
        return self.output(x.shape[0])


@pytest.mark.parametrize(
    "output",
    [
        lambda n: torch.full((n, 10), float("nan")),
        torch.zeros,
        lambda n: torch.zeros((n, 9)),
        lambda n: torch.zeros((n, 10), dtype=torch.int64),
        lambda n: [0] * n,
    ],
)
def test_torch_oracle_rejects_malformed_model_output(output):
    oracle = TorchClassifierOracle(_Broken(output), n_classes=10)
    with pytest.raises(OracleError) as info:
        oracle.classify(_images(2))
    assert info.value.reason == "invalid-answer"


# --- gRPC --------------------------------------------------------------------------------


class _Recording(ClassifierOracle):
    """Pass-through that records the batch sizes it was asked."""

    def __init__(self, inner, delay_s=0.0):
        self.inner, self.batches, self.delay_s = inner, [], delay_s

    @property
    def info(self):
        return self.inner.info

    def classify(self, images):
        self.batches.append(images.shape[0])
        time.sleep(self.delay_s)
        return self.inner.classify(images)


def test_grpc_round_trip_equals_in_process(oracle, serve):
    recording = _Recording(oracle)
    client, channel = serve(recording)
    transport.wait_healthy(channel, SERVICE_NAME)
    assert client.describe() == oracle.describe()
    images = _images(10, seed=3)
    remote = client.classify(images)
    assert recording.batches == [4, 4, 2]  # split by the oracle's max_batch
    assert np.array_equal(remote.probabilities, oracle.classify(images).probabilities)


def test_grpc_client_splits_by_message_size(oracle, serve):
    recording = _Recording(oracle)
    per_image = 28 * 28 * 4 + 16
    client, _ = serve(recording, max_message_bytes=2 * per_image + 300)
    images = _images(5, seed=4)
    answer = client.classify(images)
    assert recording.batches == [2, 2, 1]
    assert np.array_equal(answer.probabilities, oracle.classify(images).probabilities)


def test_grpc_label_only(model, serve):
    local = TorchClassifierOracle(model, n_classes=10, label_only=True, max_batch=8)
    client, _ = serve(local)
    images = _images(11, seed=5)
    answer = client.classify(images)
    assert client.info.classify_output == "label"
    assert answer.output == "label"
    assert np.array_equal(answer.labels, local.classify(images).labels)


def test_slow_oracle_hits_the_deadline(oracle, serve):
    client, _ = serve(_Recording(oracle, delay_s=2.0), timeout_s=0.3)
    assert client.info.n_classes == 10  # Describe is quick
    start = time.monotonic()
    with pytest.raises(OracleError) as info:
        client.classify(_images(1))
    assert info.value.reason == "deadline"
    assert time.monotonic() - start < 1.5


def test_unreachable_oracle():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    channel = transport.make_channel(f"127.0.0.1:{port}")
    try:
        client = GrpcClassifierOracle(channel, timeout_s=5.0)
        with pytest.raises(OracleError) as info:
            client.classify(_images(1))
        assert info.value.reason == "unreachable"
    finally:
        channel.close()


GOOD_INFO = OracleInfo("broken", "0" * 64, ("classify",), "probabilities", 3, 8)


class _BrokenServicer(oracle_pb2_grpc.OracleServicer):
    """Answers Describe with ``info`` and Classify with whatever ``answer(n)`` builds."""

    def __init__(self, answer, info=GOOD_INFO):
        self.answer, self.info = answer, info

    def Describe(self, request, context):
        return (
            self.info
            if isinstance(self.info, oracle_pb2.DescribeResponse)
            else (describe_response(self.info))
        )

    def Classify(self, request, context):
        result = self.answer(len(request.images))
        if isinstance(result, grpc.StatusCode):
            context.abort(result, "refused")
        return result


def _probs(n, rows=None, **kw):
    values = rows if rows is not None else [0.2, 0.3, 0.5] * n
    return oracle_pb2.ClassifyResponse(
        output="probabilities", n_classes=3, probabilities=values, **kw
    )


BROKEN_ANSWERS = {
    "nan": lambda n: _probs(n, [float("nan"), 0.5, 0.5] * n),
    "inf": lambda n: _probs(n, [float("inf"), 0.0, 0.0] * n),
    "negative": lambda n: _probs(n, [-0.5, 0.5, 1.0] * n),
    "not summing to one": lambda n: _probs(n, [0.2, 0.2, 0.2] * n),
    "too few values": lambda n: _probs(n, [0.2, 0.3, 0.5] * (n - 1)),
    "too many values": lambda n: _probs(n, [0.2, 0.3, 0.5] * (n + 1)),
    "labels as well": lambda n: _probs(n, labels=[0] * n),
    "wrong output kind": lambda n: oracle_pb2.ClassifyResponse(
        output="label", n_classes=3, labels=[0] * n
    ),
    "unknown output kind": lambda n: oracle_pb2.ClassifyResponse(output="logits", n_classes=3),
    "wrong class count": lambda n: oracle_pb2.ClassifyResponse(
        output="probabilities", n_classes=2, probabilities=[0.5, 0.5] * n
    ),
    "internal error": lambda n: grpc.StatusCode.INTERNAL,
    "invalid argument": lambda n: grpc.StatusCode.INVALID_ARGUMENT,
}


@pytest.mark.parametrize("case", sorted(BROKEN_ANSWERS))
def test_broken_server_answers_are_invalid(serve, case):
    client, _ = serve(_BrokenServicer(BROKEN_ANSWERS[case]))
    assert client.info == GOOD_INFO
    with pytest.raises(OracleError) as info:
        client.classify(_images(2))
    assert info.value.reason == "invalid-answer"


@pytest.mark.parametrize(
    "labels", [[0, 3], [0], [0, 0, 0]], ids=["out of range", "too few", "too many"]
)
def test_broken_label_answers_are_invalid(serve, labels):
    info = OracleInfo("broken", "0" * 64, ("classify",), "label", 3, 8)
    answer = lambda n: oracle_pb2.ClassifyResponse(output="label", n_classes=3, labels=labels)  # noqa: E731
    client, _ = serve(_BrokenServicer(answer, info))
    with pytest.raises(OracleError) as error:
        client.classify(_images(2))
    assert error.value.reason == "invalid-answer"


def _description(**change) -> oracle_pb2.DescribeResponse:
    """A valid classifier's description with the fields of ``change`` replaced."""
    fields = {
        "model_name": "m",
        "model_digest": "d",
        "capabilities": ["classify"],
        "classify_output": "probabilities",
        "n_classes": 3,
        "max_batch": 8,
    }
    return oracle_pb2.DescribeResponse(**(fields | change))


@pytest.mark.parametrize(
    "description",
    [
        _description(n_classes=0),
        _description(classify_output="logits"),
        _description(capabilities=["embed-images"]),
        _description(max_batch=0),
        _description(model_name=""),
    ],
)
def test_invalid_descriptions(serve, description):
    client, _ = serve(_BrokenServicer(BROKEN_ANSWERS["nan"], description))
    with pytest.raises(OracleError) as info:
        client.classify(_images(1))
    assert info.value.reason == "invalid-answer"


def test_oracle_exception_is_internal(serve):
    client, channel = serve(_FailingOracle())
    stub = oracle_pb2_grpc.OracleStub(channel)
    with pytest.raises(grpc.RpcError) as info:
        stub.Classify(_request(_images(1)), timeout=5)
    assert info.value.code() == grpc.StatusCode.INTERNAL
    assert "boom" not in info.value.details()
    with pytest.raises(OracleError):
        client.classify(_images(1))


class _FailingOracle(ClassifierOracle):
    info = GOOD_INFO

    def classify(self, images):
        raise ZeroDivisionError("boom")


def _request(images, **overrides):
    n, h, w, c = images.shape
    return oracle_pb2.ClassifyRequest(
        images=[
            oracle_pb2.Image(
                **{
                    "height": h,
                    "width": w,
                    "channels": c,
                    "pixels_f32le": images[i].astype("<f4").tobytes(),
                    **overrides,
                }
            )
            for i in range(n)
        ]
    )


def _raw_stub(serve, oracle, **servicer):
    _, channel = serve(OracleServicer(oracle, **servicer))
    return oracle_pb2_grpc.OracleStub(channel)


def _status(call):
    with pytest.raises(grpc.RpcError) as info:
        call()
    return info.value.code()


def test_oversized_requests_are_resource_exhausted(oracle, serve):
    stub = _raw_stub(serve, oracle, max_request_bytes=10_000)
    assert _status(lambda: stub.Classify(_request(_images(4)), timeout=5)) == (
        grpc.StatusCode.RESOURCE_EXHAUSTED
    )  # 4 images of 3136 bytes: over 10,000 bytes
    assert stub.Classify(_request(_images(3)), timeout=5).n_classes == 10
    stub = _raw_stub(serve, oracle)
    assert _status(lambda: stub.Classify(_request(_images(5)), timeout=5)) == (
        grpc.StatusCode.RESOURCE_EXHAUSTED
    )  # more than max_batch = 4


@pytest.mark.slow
def test_message_above_the_transport_limit_is_resource_exhausted(oracle):
    server, port = serve_oracle(oracle, "127.0.0.1:0")
    big = grpc.insecure_channel(
        f"127.0.0.1:{port}", options=[("grpc.max_send_message_length", 300 * 1024 * 1024)]
    )
    try:
        stub = oracle_pb2_grpc.OracleStub(big)
        side = 3000  # two images of 36 MB: above 64 MiB together (one alone may be more)
        image = oracle_pb2.Image(
            height=side, width=side, channels=1, pixels_f32le=bytes(4 * side * side)
        )
        request = oracle_pb2.ClassifyRequest(images=[image, image])
        assert _status(lambda: stub.Classify(request, timeout=20)) == (
            grpc.StatusCode.RESOURCE_EXHAUSTED
        )
        pixels = bytes(transport.MAX_QUERY_MESSAGE_BYTES)  # above the largest one-query request
        request = oracle_pb2.ClassifyRequest(
            images=[oracle_pb2.Image(height=1, width=1, channels=1, pixels_f32le=pixels)]
        )
        assert _status(lambda: stub.Classify(request, timeout=20)) == (
            grpc.StatusCode.RESOURCE_EXHAUSTED
        )
    finally:
        big.close()
        server.stop(None)


@pytest.mark.parametrize(
    ("build", "why"),
    [
        (lambda x: oracle_pb2.ClassifyRequest(), "empty"),
        (lambda x: _request(x, pixels_f32le=b"\x00" * 12), "pixel bytes"),
        (lambda x: _request(x, channels=2), "channels"),
        (lambda x: _request(x, height=0, pixels_f32le=b""), "height"),
        (lambda x: _request(np.concatenate([x[:1], np.full_like(x[:1], np.nan)])), "nan"),
        (lambda x: _request(np.full_like(x, 2.0)), "range"),
        (
            lambda x: oracle_pb2.ClassifyRequest(
                images=[*_request(x[:1]).images, *_request(_images(1, shape=(27, 28, 1))).images]
            ),
            "mixed shapes",
        ),
        (lambda x: _request(_images(1, shape=(20, 20, 1))), "model refuses"),
    ],
)
def test_invalid_requests_are_invalid_argument(oracle, serve, build, why):
    stub = _raw_stub(serve, oracle)
    assert _status(lambda: stub.Classify(build(_images(2)), timeout=5)) == (
        grpc.StatusCode.INVALID_ARGUMENT
    ), why


def test_other_rpcs_are_unimplemented(oracle, serve):
    stub = _raw_stub(serve, oracle)
    for call, request in [
        (stub.EmbedImages, oracle_pb2.EmbedImagesRequest()),
        (stub.TokenLogprobs, oracle_pb2.TokenLogprobsRequest()),
        (stub.EmbedImageText, oracle_pb2.EmbedImageTextRequest()),
    ]:
        assert _status(lambda c=call, r=request: c(r, timeout=5)) == grpc.StatusCode.UNIMPLEMENTED


def test_client_rejects_images_before_sending(oracle, serve):
    client, _ = serve(oracle)
    with pytest.raises(InputError):
        client.classify(np.zeros((1, 28, 28, 1)))
    with pytest.raises(ParameterError):
        GrpcClassifierOracle(None, timeout_s=0)


def test_answers_concatenate_only_alike():
    a = ClassifyAnswer(labels=np.array([1], dtype=np.int64))
    b = ClassifyAnswer(probabilities=np.array([[1.0, 0.0]]))
    with pytest.raises(OracleError):
        ClassifyAnswer.concatenate([a, b])
    with pytest.raises(OracleError):
        ClassifyAnswer.concatenate([])


# --- the test-support trainer ------------------------------------------------------------


def test_training_is_deterministic_and_leaves_global_rngs_alone():
    from tests.support.data import synthetic_pairs
    from tests.support.models import train_classifier

    pairs = synthetic_pairs(64, seed=3, epsilon=16)
    torch_state, numpy_state = torch.get_rng_state(), np.random.get_state()
    runs = [
        train_classifier(pairs.version0, pairs.labels, epochs=2, seed=5, augment=augment)
        for augment in ("none", "none", "pad-shift-flip")
    ]
    assert torch.equal(torch.get_rng_state(), torch_state)
    assert np.array_equal(np.random.get_state()[1], numpy_state[1])
    assert state_dict_digest(runs[0]) == state_dict_digest(runs[1])
    assert state_dict_digest(runs[0]) != state_dict_digest(runs[2])
    assert not runs[0].training
