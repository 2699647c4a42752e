"""Encoder, language-model and image-text oracles over gRPC: round trips, splits, failures.

A claim run through a served oracle gives the same verdict payload as the same claim
run in-process: answers cross the wire as exact binary64.
"""

import grpc
import numpy as np
import pytest
import torch

from tests.support import foundation as fm
from tests.support.grpc_serving import OracleServers
from tests.verifier.test_claim_foundation_models import RHO, _payload, _run, _session
from twinaudit.practitioner.grpc_server import describe_response
from twinaudit.practitioner.tokenizer import ByteTokenizer
from twinaudit.practitioner.torch_encoder import TorchEncoderOracle, TorchImageTextOracle
from twinaudit.practitioner.torch_lm import TorchLanguageModelOracle
from twinaudit.protocol.claim.scores.function_only import LanguageSpec
from twinaudit.protocol.encoding import encode
from twinaudit.protocol.errors import InputError, OracleError
from twinaudit.protocol.oracles.base import OracleInfo
from twinaudit.verifier.oracles.grpc_client import GrpcClassifierOracle, GrpcOracle
from twinaudit.wire.oracle.v1 import oracle_pb2, oracle_pb2_grpc

torch.set_num_threads(1)


@pytest.fixture
def serve():
    """Start servers for oracles or servicers on 127.0.0.1:0; stop them afterwards."""
    servers = OracleServers(GrpcOracle)
    yield servers.start
    servers.close()


def _images(n, side=fm.SIDE):
    return np.random.default_rng(n).random((n, side, side, 1), dtype=np.float32)


@pytest.fixture(scope="module")
def encoder():
    return TorchEncoderOracle(fm.train_encoder([], steps=0), max_batch=4)


@pytest.fixture(scope="module")
def lm():
    return TorchLanguageModelOracle(fm.train_lm([], steps=0), ByteTokenizer(), max_batch=3)


@pytest.fixture(scope="module")
def clip():
    return TorchImageTextOracle(fm.train_dual([], steps=0), ByteTokenizer(bos=False), max_batch=6)


def test_embed_images_round_trip(serve, encoder):
    client, _ = serve(encoder)
    images = _images(10)
    remote = client.embed_images(images)
    assert client.info == encoder.info
    assert np.array_equal(remote.embeddings, encoder.embed_images(images).embeddings)


def test_token_logprobs_round_trip(serve, lm):
    client, _ = serve(lm)
    texts = ["amber grove", "a", "ünïcode text", "x" * 300, "willow"]
    remote = client.token_logprobs(texts)
    local = lm.token_logprobs(texts)
    assert [v.tolist() for v in remote.logprobs] == [v.tolist() for v in local.logprobs]


@pytest.mark.parametrize("client_args", [{}, {"max_message_bytes": 100_000}])
def test_embed_image_text_round_trip_whole_or_split(serve, clip, client_args):
    client, _ = serve(clip, **client_args)
    images, texts = _images(5), ["red shirt", "blue boots", "bag"]
    remote = client.embed_image_text(images, texts)
    local = clip.embed_image_text(images, texts)
    # Split requests batch the images differently; float32 products may round differently.
    assert np.allclose(remote.images, local.images, rtol=1e-5, atol=1e-6)
    assert np.array_equal(remote.texts, local.texts)
    many = client.embed_image_text(_images(9), [f"caption {i}" for i in range(8)])
    assert many.images.shape[0] == 9 and many.texts.shape[0] == 8
    # Captions alone (twinaudit.verifier.windows.image_text sends them so when images differ in
    # shape): this raised ValueError from range() before.
    alone = client.embed_image_text(None, texts)
    assert alone.images.shape[0] == 0 and np.array_equal(alone.texts, local.texts)


def test_missing_capabilities_are_refused(serve, encoder, lm):
    client, channel = serve(encoder)
    with pytest.raises(OracleError) as info:
        client.token_logprobs(["hello"])
    assert info.value.reason == "invalid-answer"
    stub = oracle_pb2_grpc.OracleStub(channel)
    for call, request in [
        (stub.Classify, oracle_pb2.ClassifyRequest()),
        (stub.TokenLogprobs, oracle_pb2.TokenLogprobsRequest(texts=["a"])),
        (stub.EmbedImageText, oracle_pb2.EmbedImageTextRequest(texts=["a"])),
    ]:
        with pytest.raises(grpc.RpcError) as error:
            call(request, timeout=5)
        assert error.value.code() == grpc.StatusCode.UNIMPLEMENTED
    _, lm_channel = serve(lm)
    with pytest.raises(OracleError):
        GrpcClassifierOracle(lm_channel, 5).info  # noqa: B018 - the property asks


def _raw(serve, oracle):
    _, channel = serve(oracle)
    return oracle_pb2_grpc.OracleStub(channel)


@pytest.mark.parametrize(
    ("target", "call", "request_", "status"),
    [
        ("lm", "TokenLogprobs", oracle_pb2.TokenLogprobsRequest(), "INVALID_ARGUMENT"),
        ("lm", "TokenLogprobs", oracle_pb2.TokenLogprobsRequest(texts=[""]), "INVALID_ARGUMENT"),
        (
            "lm",
            "TokenLogprobs",
            oracle_pb2.TokenLogprobsRequest(texts=["a"] * 4),
            "RESOURCE_EXHAUSTED",
        ),
        ("encoder", "EmbedImages", oracle_pb2.EmbedImagesRequest(), "INVALID_ARGUMENT"),
        (
            "encoder",
            "EmbedImages",
            oracle_pb2.EmbedImagesRequest(
                images=[oracle_pb2.Image(height=2, width=2, channels=1, pixels_f32le=b"\0" * 4)]
            ),
            "INVALID_ARGUMENT",
        ),
        ("clip", "EmbedImageText", oracle_pb2.EmbedImageTextRequest(), "INVALID_ARGUMENT"),
        (
            "clip",
            "EmbedImageText",
            oracle_pb2.EmbedImageTextRequest(texts=["a"] * 7),
            "RESOURCE_EXHAUSTED",
        ),
    ],
)
def test_invalid_requests(serve, request, target, call, request_, status):
    stub = _raw(serve, request.getfixturevalue(target))
    with pytest.raises(grpc.RpcError) as error:
        getattr(stub, call)(request_, timeout=5)
    assert error.value.code() == getattr(grpc.StatusCode, status)


INFO = {
    "embed-images": OracleInfo("broken", "d", ("embed-images",), "", 0, 16),
    "token-logprobs": OracleInfo("broken", "d", ("token-logprobs",), "", 0, 16),
    "embed-image-text": OracleInfo("broken", "d", ("embed-image-text",), "", 0, 16),
}


class _Broken(oracle_pb2_grpc.OracleServicer):
    def __init__(self, capability, answer):
        self.info, self.answer = INFO[capability], answer

    def Describe(self, request, context):
        return describe_response(self.info)

    def EmbedImages(self, request, context):
        return self.answer(len(request.images))

    def TokenLogprobs(self, request, context):
        return self.answer(len(request.texts))

    def EmbedImageText(self, request, context):
        return self.answer(len(request.images), len(request.texts))


def _emb(n, dim=3, values=None):
    return oracle_pb2.EmbedImagesResponse(dim=dim, values=values or [0.5] * (n * dim))


def _lp(*rows):
    return oracle_pb2.TokenLogprobsResponse(
        items=[oracle_pb2.TokenLogprobs(logprobs=r) for r in rows]
    )


BROKEN = {
    "embeddings: NaN": ("embed-images", lambda n: _emb(n, values=[float("nan")] * (n * 3))),
    "embeddings: too few": ("embed-images", lambda n: _emb(n, values=[0.5] * (n * 3 - 1))),
    "embeddings: dimension 0": ("embed-images", lambda n: _emb(n, dim=0, values=[])),
    "embeddings: huge": ("embed-images", lambda n: _emb(n, values=[1e30] * (n * 3))),
    "logprobs: missing item": ("token-logprobs", lambda n: _lp(*[[-1.0]] * (n - 1))),
    "logprobs: NaN": ("token-logprobs", lambda n: _lp(*[[float("nan")]] * n)),
    "logprobs: positive": ("token-logprobs", lambda n: _lp(*[[0.5]] * n)),
    "image-text: texts for no text": (
        "embed-image-text",
        lambda n, m: oracle_pb2.EmbedImageTextResponse(
            dim=2, image_values=[1.0] * (2 * n), text_values=[1.0] * 2 * (m + 1)
        ),
    ),
    "image-text: dimensions differ": (
        "embed-image-text",
        lambda n, m: oracle_pb2.EmbedImageTextResponse(
            dim=2 if n else 3, image_values=[1.0] * (2 * n), text_values=[1.0] * (3 * m)
        ),
    ),
}


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_broken_answers_are_invalid(serve, case):
    capability, answer = BROKEN[case]
    client, _ = serve(_Broken(capability, answer), max_message_bytes=200_000)
    with pytest.raises(OracleError) as info:
        if capability == "embed-images":
            client.embed_images(_images(2))
        elif capability == "token-logprobs":
            client.token_logprobs(["a", "b"])
        else:
            client.embed_image_text(_images(2), ["a", "b"])
    assert info.value.reason == "invalid-answer"


def test_client_checks_inputs_before_sending(serve, lm, clip):
    client, _ = serve(lm)
    with pytest.raises(InputError):
        client.token_logprobs([])
    clip_client, _ = serve(clip)
    with pytest.raises(InputError):
        clip_client.embed_image_text(None, [])


def test_a_claim_through_grpc_equals_the_claim_in_process(serve):
    pairs = fm.text_pairs(12, seed=4)
    case = {"pair_set": fm.commit("text", pairs), "kind": "text", "score": LanguageSpec()}
    local = TorchLanguageModelOracle(
        fm.train_lm([a.text for a, _ in pairs], steps=20), ByteTokenizer()
    )
    client, _ = serve(local)
    direct = _run(_session(case, local, window=4), case["pair_set"])
    remote = _run(_session(case, client, window=4), case["pair_set"])
    assert encode(_payload(remote)) == encode(_payload(direct))
    assert RHO  # the claims share the record's randomness
