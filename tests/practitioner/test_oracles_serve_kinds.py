"""``twinaudit oracle serve --kind encoder|lm|clip`` as real processes, and its usage errors."""

import numpy as np
import pytest
import torch

from tests.cli.test_cmd_oracle import _run, _serve, _stop
from tests.practitioner.test_oracles_openai import _good, _json, _Server
from tests.support import foundation as fm
from twinaudit.practitioner.tokenizer import ByteTokenizer
from twinaudit.practitioner.torch_encoder import TorchEncoderOracle, TorchImageTextOracle
from twinaudit.practitioner.torch_lm import TorchLanguageModelOracle
from twinaudit.verifier.oracles.grpc_client import GrpcOracle
from twinaudit.wire.transport import make_channel

torch.set_num_threads(1)


def _save(model, path):
    torch.save(model.state_dict(), path)
    return str(path)


def _client(address):
    channel = make_channel(address)
    return GrpcOracle(channel, 20), channel


@pytest.mark.slow
def test_serve_encoder_lm_and_clip_modules(tmp_path):
    encoder = fm.train_encoder([], steps=0, seed=3)
    lm = fm.train_lm([], steps=0, seed=3)
    dual = fm.train_dual([], steps=0, seed=3)
    images = np.random.default_rng(0).random((5, fm.SIDE, fm.SIDE, 1), dtype=np.float32)
    texts = ["amber grove", "willow"]
    runs = [
        (
            ("--kind", "encoder", "--model", _save(encoder, tmp_path / "e.pt")),
            "tests.support.foundation:MlpEncoder",
            lambda c: c.embed_images(images).embeddings,
            TorchEncoderOracle(encoder).embed_images(images).embeddings,
        ),
        (
            ("--kind", "lm", "--model", _save(lm, tmp_path / "l.pt"), "--tokenizer", "bytes"),
            "tests.support.foundation:ByteLm",
            lambda c: np.concatenate(c.token_logprobs(texts).logprobs),
            np.concatenate(
                TorchLanguageModelOracle(lm, ByteTokenizer()).token_logprobs(texts).logprobs
            ),
        ),
        (
            (
                "--kind",
                "clip",
                "--model",
                _save(dual, tmp_path / "c.pt"),
                "--tokenizer",
                "bytes-no-bos",
            ),
            "tests.support.foundation:DualEncoder",
            lambda c: c.embed_image_text(images, texts).texts,
            TorchImageTextOracle(dual, ByteTokenizer(bos=False))
            .embed_image_text(images, texts)
            .texts,
        ),
    ]
    for args, arch, ask, expected in runs:
        process, address = _serve(*args, "--arch", arch, "--name", "tiny")
        try:
            client, channel = _client(address)
            try:
                assert client.info.model_name == "tiny"
                got = ask(client)
                assert np.allclose(np.asarray(got), np.asarray(expected), rtol=1e-6, atol=1e-7)
            finally:
                channel.close()
        finally:
            _stop(process)


@pytest.mark.slow
def test_serve_relays_an_openai_compatible_endpoint():
    fake = _Server(_json(_good))
    try:
        process, address = _serve(
            "--kind", "lm", "--openai-url", fake.url, "--openai-model", "remote-lm"
        )
        try:
            client, channel = _client(address)
            try:
                assert client.info.capabilities == ("token-logprobs",)
                answer = client.token_logprobs(["one two three"])
                assert answer.logprobs[0].tolist() == [-0.25, -0.5, -0.75]
            finally:
                channel.close()
        finally:
            _stop(process)
    finally:
        fake.close()


def test_usage_errors(tmp_path, capsys):
    weights = _save(fm.train_lm([], steps=0), tmp_path / "l.pt")
    arch = "tests.support.foundation:ByteLm"
    cases = [
        (("--kind", "encoder"), "needs --model"),
        (("--kind", "lm"), "exactly one of"),
        (("--kind", "lm", "--model", weights, "--arch", arch), "--tokenizer"),
        (
            ("--kind", "lm", "--model", weights, "--arch", arch, "--openai-url", "http://h/v1"),
            "exactly one of",
        ),
        (("--kind", "lm", "--openai-url", "http://h/v1"), "--openai-model"),
        (("--kind", "lm", "--openai-url", "ftp://h", "--openai-model", "m"), "http"),
        (
            (
                "--kind",
                "lm",
                "--openai-url",
                "http://h/v1",
                "--openai-model",
                "m",
                "--api-key-env",
                "TWINAUDIT_NO_SUCH_VARIABLE",
            ),
            "not set",
        ),
        (
            ("--kind", "lm", "--model", weights, "--arch", arch, "--tokenizer", "os:getcwd"),
            "did not return a tokenizer",
        ),
        (("--kind", "lm", "--hf", str(tmp_path)), "cannot load a causal LM"),
        (
            ("--kind", "clip", "--model", weights, "--arch", arch, "--tokenizer", "bytes"),
            "encode_image",
        ),
    ]
    for args, message in cases:
        status, err = _run(capsys, *args)
        assert status == 2, (args, err)
        assert message in err, (args, err)
