"""What every score function's window logic shares: a wrong oracle, a wrong answer type."""

from __future__ import annotations

import numpy as np
import pytest

from protocol.errors import OracleError, ParameterError
from verifier.oracles.base import ClassifierOracle, OracleInfo
from verifier.oracles.embedding import EncoderOracle
from verifier.oracles.image_text import ImageTextOracle
from verifier.oracles.language import LanguageModelOracle
from verifier.scoring.classifier import ScoreSpec
from verifier.scoring.encoder import EncoderSpec
from verifier.scoring.image_text import ImageTextSpec
from verifier.scoring.language import LanguageSpec
from verifier.windows import QueryBatch, scorer_for

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
