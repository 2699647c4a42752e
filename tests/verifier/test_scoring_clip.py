"""The image-text score (spec §10.6), its answers, and the in-process torch oracles for images.

Covers :class:`TorchImageTextOracle` and :class:`TorchEncoderOracle`: shapes, digests,
batching, and every way a model's output can be malformed.
"""

import numpy as np
import pytest
import torch

from twinaudit.practitioner.tokenizer import ByteTokenizer
from twinaudit.practitioner.torch_encoder import TorchEncoderOracle, TorchImageTextOracle
from twinaudit.practitioner.torch_oracle import state_dict_digest
from twinaudit.protocol.claim.functions import score_spec_from_fields, score_spec_from_value
from twinaudit.protocol.errors import InputError, OracleError, ParameterError
from twinaudit.protocol.items import CaptionedImageItem, ImageItem
from twinaudit.protocol.oracles.base import OracleInfo
from twinaudit.protocol.oracles.image_text import ImageTextAnswer
from twinaudit.verifier.scoring.cosine import cosine
from twinaudit.verifier.scoring.image_text import ImageTextSpec, make_query, score

torch.set_num_threads(1)

#: What float32 outputs computed in batches of other sizes may differ by here.
BATCH_ORDER_ATOL = 1e-5


def _images(n, side=6, channels=3):
    return np.random.default_rng(n).random((n, side, side, channels), dtype=np.float32)


def test_spec():
    spec = ImageTextSpec()
    assert spec.to_value() == {"function": "image-text"}
    assert score_spec_from_value(spec.to_value()) == spec
    assert score_spec_from_fields("image-text", 0, "", "") == spec
    assert spec.queries_per_version == 1 and spec.item_kind == "captioned-image"
    with pytest.raises(ParameterError):
        score_spec_from_value({"function": "image-text", "k": 1})
    spec.check_oracle(OracleInfo("m", "d", ("embed-image-text",), "", 0, 8))
    with pytest.raises(ParameterError):
        spec.check_oracle(OracleInfo("m", "d", ("embed-images",), "", 0, 8))
    with pytest.raises(ParameterError):
        spec.check_item(ImageItem(np.zeros((2, 2, 1), dtype=np.uint8)))


def test_query_is_the_unperturbed_image():
    pixels = np.arange(12, dtype=np.uint8).reshape(2, 2, 3)
    query = make_query(CaptionedImageItem(ImageItem(pixels), "a cat"))
    assert query.dtype == np.float32
    assert np.array_equal(query, (pixels / 255.0).astype(np.float32))


def test_score_is_the_cosine():
    image, caption = np.array([1.0, 2.0, 2.0]), np.array([2.0, 1.0, 2.0])
    assert score(image, caption) == 8.0 / 9.0
    assert score(image, caption) == cosine(caption, image)


@pytest.mark.parametrize(
    ("images", "texts", "counts"),
    [
        (np.zeros((2, 4)) + 1, np.ones((1, 3)), (2, 1)),
        (np.ones((2, 4)), np.ones((2, 4)), (2, 1)),
        (np.ones((1, 4)), np.ones((1, 4)), (2, 1)),
        (np.ones((2, 4)), np.full((1, 4), np.nan), (2, 1)),
        (np.ones((2, 4)), np.ones((1, 4), dtype=np.float32), (2, 1)),
    ],
)
def test_invalid_image_text_answers(images, texts, counts):
    with pytest.raises(OracleError) as info:
        ImageTextAnswer(images, texts).validate(*counts)
    assert info.value.reason == "invalid-answer"


class Dual(torch.nn.Module):
    def __init__(self, text_output="ok"):
        super().__init__()
        self.image = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(6 * 6 * 3, 5))
        self.tokens = torch.nn.Embedding(257, 5)
        self.text_output = text_output

    def encode_image(self, x):
        return self.image(x)

    def encode_text(self, ids):
        out = self.tokens(ids).mean(dim=1)
        if self.text_output == "flat":
            return out[0]
        if self.text_output == "nan":
            return out * float("nan")
        if self.text_output == "int":
            return out.long()
        return out


def test_torch_image_text_oracle():
    model = Dual()
    oracle = TorchImageTextOracle(model, ByteTokenizer(bos=False), max_batch=2)
    images = _images(5)
    answer = oracle.embed_image_text(images, ["a red shirt", "boots"])
    assert answer.images.shape == (5, 5) and answer.texts.shape == (2, 5)
    with torch.inference_mode():
        direct = model.encode_image(torch.from_numpy(images).permute(0, 3, 1, 2))
        text = model.encode_text(torch.tensor([list(b"boots")]))
    # The oracle runs the images in batches of 2 and the direct call in one batch of 5, so
    # float32 sums of the 108 products are taken in another order: outputs near zero can
    # differ by far more than numpy's default relative tolerance allows (it failed about
    # 2% of initial weights, issue #44). An absolute bound: over 3,000 initial weights the
    # largest difference was 2.4e-7 (about one float32 step at these magnitudes), and a
    # wrong image or row moves an output by about 0.1.
    assert np.allclose(answer.images, direct.double().numpy(), rtol=0, atol=BATCH_ORDER_ATOL)
    assert np.allclose(answer.texts[1], text.double().numpy()[0], rtol=0, atol=BATCH_ORDER_ATOL)
    info = oracle.info
    assert info.capabilities == ("embed-image-text",)
    assert info.model_digest == state_dict_digest(model)


@pytest.mark.parametrize("output", ["flat", "nan", "int"])
def test_torch_image_text_rejects_malformed_text_embeddings(output):
    oracle = TorchImageTextOracle(Dual(output), ByteTokenizer(bos=False))
    with pytest.raises(OracleError) as info:
        oracle.embed_image_text(_images(1), ["shirt"])
    assert info.value.reason == "invalid-answer"


def test_torch_image_text_parameters_and_inputs():
    with pytest.raises(ParameterError):
        TorchImageTextOracle(torch.nn.Linear(2, 2), ByteTokenizer())
    oracle = TorchImageTextOracle(Dual(), ByteTokenizer(bos=False), max_tokens=3)
    with pytest.raises(InputError):
        oracle.embed_image_text(_images(1), ["too long"])
    with pytest.raises(InputError):
        oracle.embed_image_text(_images(1, side=5), ["ok"])
    with pytest.raises(InputError):
        oracle.embed_image_text(None, [])
    # Either kind may be left out (what a split gRPC request asks for).
    only_images = oracle.embed_image_text(_images(2), [])
    assert only_images.images.shape == (2, 5) and only_images.texts.shape == (0, 5)
    only_texts = oracle.embed_image_text(None, ["ok"])
    assert only_texts.images.shape == (0, 5) and only_texts.texts.shape == (1, 5)


class Encoder(torch.nn.Module):
    def __init__(self, output="ok"):
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(6 * 6 * 3, 7))
        self.output = output

    def forward(self, x):
        out = self.net(x)
        if self.output == "rows":
            return out[:-1]
        if self.output == "3d":
            return out[:, None]
        if self.output == "inf":
            return out / 0.0
        return out


def test_torch_encoder_oracle_batches_and_describes_itself():
    model = Encoder()
    images = _images(7)
    whole = TorchEncoderOracle(model).embed_images(images)
    split = TorchEncoderOracle(model, max_batch=3).embed_images(images)
    assert whole.embeddings.shape == (7, 7) and whole.embeddings.dtype == np.float64
    # float32 matrix products may round differently by batch size: equal to float32 precision
    assert np.allclose(whole.embeddings, split.embeddings, rtol=1e-5, atol=1e-6)
    normalised = TorchEncoderOracle(model, mean=[0.5], std=[0.25]).embed_images(images)
    with torch.inference_mode():
        x = (torch.from_numpy(images).permute(0, 3, 1, 2) - 0.5) / 0.25
        assert np.allclose(normalised.embeddings, model(x).double().numpy())
    info = TorchEncoderOracle(model, model_name="enc").info
    assert info.to_value() == {
        "model_name": "enc",
        "model_digest": state_dict_digest(model),
        "capabilities": ["embed-images"],
        "classify_output": "",
        "n_classes": 0,
        "max_batch": 256,
    }


@pytest.mark.parametrize("output", ["rows", "3d", "inf"])
def test_torch_encoder_rejects_malformed_output(output):
    with pytest.raises(OracleError) as info:
        TorchEncoderOracle(Encoder(output)).embed_images(_images(3))
    assert info.value.reason == "invalid-answer"


def test_torch_encoder_rejects_bad_images_and_parameters():
    oracle = TorchEncoderOracle(Encoder())
    for bad in (_images(2).astype(np.float64), _images(2) * 2, _images(2, side=5)):
        with pytest.raises(InputError):
            oracle.embed_images(bad)
    with pytest.raises(ParameterError):
        TorchEncoderOracle(Encoder(), mean=[0.5])
    with pytest.raises(ParameterError):
        TorchEncoderOracle("model")
