"""What every score function's window logic shares: a wrong oracle, a wrong answer type."""

from __future__ import annotations

import numpy as np
import pytest

from twinaudit.protocol.claim.scores.classifier import ScoreSpec
from twinaudit.protocol.claim.scores.encoder import EncoderSpec
from twinaudit.protocol.claim.scores.function_only import ImageTextSpec, LanguageSpec
from twinaudit.protocol.errors import OracleError, ParameterError
from twinaudit.protocol.oracles.base import ClassifierOracle, OracleInfo
from twinaudit.protocol.oracles.embedding import EmbeddingAnswer, EncoderOracle
from twinaudit.protocol.oracles.image_text import ImageTextAnswer, ImageTextOracle
from twinaudit.protocol.oracles.language import LanguageModelOracle
from twinaudit.verifier.windows import QueryBatch, scorer_for

INFO = OracleInfo("broken", "digest", ("classify",), "probabilities", 10, 8)


class _Answers:
    """Answers every query method with ``[]``: no answer type of any score."""

    info = INFO

    def classify(self, images: object) -> object:
        return []

    def embed_images(self, images: object) -> object:
        return []

    def token_logprobs(self, texts: object) -> object:
        return []

    def embed_image_text(self, images: object, texts: object) -> object:
        return []


class _Classifier(_Answers, ClassifierOracle):
    pass


class _Encoder(_Answers, EncoderOracle):
    pass


class _Language(_Answers, LanguageModelOracle):
    pass


class _ImageText(_Answers, ImageTextOracle):
    pass


IMAGES = QueryBatch(np.zeros((2, 4, 4, 1), dtype=np.float32), ["a", "b"], [0, 1], [0, 1])
CASES = [
    (ScoreSpec(k=1, perturbation="none", knowledge="C2"), _Classifier, "ClassifyAnswer"),
    (EncoderSpec(k=2), _Encoder, "EmbeddingAnswer"),
    (LanguageSpec(), _Language, "LogprobAnswer"),
    (ImageTextSpec(), _ImageText, "ImageTextAnswer"),
]


@pytest.mark.parametrize(("spec", "oracle", "answer"), CASES)
def test_an_answer_of_the_wrong_type_is_an_invalid_answer(spec, oracle, answer):
    with pytest.raises(OracleError, match=f"answered a list, not a {answer}") as info:
        scorer_for(spec).ask(oracle(), INFO, IMAGES)
    assert info.value.reason == "invalid-answer"


@pytest.mark.parametrize(("spec", "oracle", "_"), CASES)
def test_an_oracle_of_another_interface_is_refused(spec, oracle, _):
    other = _Language if oracle is not _Language else _Encoder
    with pytest.raises(ParameterError, match=f"is not a {scorer_for(spec).oracle_type.__name__}"):
        scorer_for(spec).check_oracle(other(), INFO)
    scorer_for(spec).check_oracle(oracle(), INFO)


class _Embedder(ImageTextOracle, EncoderOracle):
    """Embeds an image as (its side, its channels, its first pixel), a text as its length."""

    info = INFO

    def __init__(self) -> None:
        self.requests: list[tuple[tuple[int, ...] | None, int]] = []

    def _rows(self, images):
        return np.array([[im.shape[0], im.shape[2], im[0, 0, 0]] for im in images], np.float64)

    def embed_images(self, images):
        self.requests.append((images.shape, 0))
        return EmbeddingAnswer(self._rows(images))

    def embed_image_text(self, images, texts):
        self.requests.append((None if images is None else images.shape, len(texts)))
        rows = np.zeros((0, 3)) if images is None else self._rows(images)
        words = np.array([[len(t), 0.0, 0.0] for t in texts], np.float64).reshape(-1, 3)
        return ImageTextAnswer(rows, words)


MIXED = [np.full((4, 4, 1), 0.1, np.float32), np.full((6, 6, 3), 0.2, np.float32)]
MIXED_BATCH = QueryBatch([MIXED[0], MIXED[1], MIXED[0] + 0.5], ["ab", "c"], [0, 1, 2], [0, 1])


def test_image_text_queries_of_several_shapes_go_per_shape_texts_once():
    oracle = _Embedder()
    answer = scorer_for(ImageTextSpec()).query(oracle, MIXED_BATCH)
    assert oracle.requests == [(None, 2), ((2, 4, 4, 1), 0), ((1, 6, 6, 3), 0)]
    assert answer.images[:, 0].tolist() == [4, 6, 4]  # back in sent order
    assert answer.images[:, 2].tolist() == pytest.approx([0.1, 0.2, 0.6])
    assert answer.texts[:, 0].tolist() == [2, 1]


def test_encoder_queries_of_several_shapes_go_per_shape():
    oracle = _Embedder()
    answer = scorer_for(EncoderSpec(k=2)).query(oracle, MIXED_BATCH)
    assert oracle.requests == [((2, 4, 4, 1), 0), ((1, 6, 6, 3), 0)]
    assert answer.embeddings[:, 0].tolist() == [4, 6, 4]
