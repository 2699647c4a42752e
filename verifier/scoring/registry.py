"""The score functions a claim may name (spec §10.1), parsed from a claim map or a proto.

==================  ======================  ===================  ==================
function            item kind               oracle capability    queries / version
==================  ======================  ===================  ==================
image-classifier    image                   classify             K
image-encoder       image                   embed-images         K
language-model      text                    token-logprobs       1
image-text          captioned-image         embed-image-text     1
==================  ======================  ===================  ==================
"""

from __future__ import annotations

from typing import Final

from protocol.errors import ParameterError
from verifier.oracles.base import OracleInfo

from . import classifier, encoder, image_text, language
from .classifier import ScoreSpec
from .encoder import EncoderSpec
from .image_text import ImageTextSpec
from .knowledge import KNOWLEDGE_CHOICES, KNOWLEDGE_WORDS, PendingScoreSpec
from .language import LanguageSpec

#: Any score function's claim parameters.
AnyScoreSpec = ScoreSpec | EncoderSpec | LanguageSpec | ImageTextSpec
#: What a claim's score fields ask for: a score, or an image-classifier score whose
#: knowledge condition is a word the oracle's description settles (:func:`resolve_score`).
ScoreRequest = AnyScoreSpec | PendingScoreSpec
#: The score functions, by claim name.
FUNCTIONS: Final = (classifier.FUNCTION, encoder.FUNCTION, language.FUNCTION, image_text.FUNCTION)


def score_spec_from_value(value: object) -> AnyScoreSpec:
    """Parse a claim's ``score`` map strictly, whichever function it names."""
    function = value.get("function") if isinstance(value, dict) else None
    if function == classifier.FUNCTION:
        return ScoreSpec.from_value(value)
    if function == encoder.FUNCTION:
        return EncoderSpec.from_value(value)
    if function == language.FUNCTION:
        return LanguageSpec.from_value(value)
    if function == image_text.FUNCTION:
        return ImageTextSpec.from_value(value)
    raise ParameterError(f"unknown score function {function!r}; known: {FUNCTIONS}")


def score_spec_from_fields(
    function: str,
    k: int,
    perturbation: str,
    knowledge: str,
    statistic: str = "",
    *,
    margin: float = 0.0,
) -> AnyScoreSpec:
    """Build a score spec from the fields of the proto's ``ScoreSpec``.

    Fields a function does not use must be unset (0 or empty). For ``image-encoder``
    an unset ``k`` or ``perturbation`` takes its default (64, ``random-resized-crop-flip``).
    """
    if function == classifier.FUNCTION:
        return ScoreSpec(
            k=k,
            perturbation=perturbation,
            knowledge=knowledge,
            statistic=statistic or "entropy",
            margin=float(margin),
        )
    if statistic:
        raise ParameterError(f"the {function!r} score takes no statistic")
    if margin:
        raise ParameterError(f"the {function!r} score takes no tie margin")
    if knowledge:
        raise ParameterError(f"the {function!r} score takes no knowledge condition")
    if function == encoder.FUNCTION:
        return EncoderSpec(
            k=k or encoder.DEFAULT_K, perturbation=perturbation or encoder.DEFAULT_PERTURBATION
        )
    if k or perturbation:
        raise ParameterError(f"the {function!r} score takes no k and no perturbation")
    if function == language.FUNCTION:
        return LanguageSpec()
    if function == image_text.FUNCTION:
        return ImageTextSpec()
    raise ParameterError(f"unknown score function {function!r}; known: {FUNCTIONS}")


def score_request_from_fields(
    function: str,
    k: int,
    perturbation: str,
    knowledge: str,
    statistic: str = "",
    *,
    margin: float = 0.0,
) -> ScoreRequest:
    """Like :func:`score_spec_from_fields`, but the classifier's ``knowledge`` may be a word.

    A word (``labelled``, ``unlabelled``; :mod:`verifier.scoring.knowledge`) gives a
    :class:`PendingScoreSpec`, every other field validated; anything that is neither a
    word nor C1–C4 is ``invalid-parameter``.
    """
    if function == classifier.FUNCTION and knowledge in KNOWLEDGE_WORDS:
        probabilities_condition = KNOWLEDGE_WORDS[knowledge][0]
        template = score_spec_from_fields(
            function, k, perturbation, probabilities_condition, statistic, margin=margin
        )
        assert isinstance(template, ScoreSpec)
        return PendingScoreSpec(knowledge, template)
    if function == classifier.FUNCTION and knowledge not in KNOWLEDGE_CHOICES:
        raise ParameterError(
            f"unknown knowledge condition {knowledge!r}; known: {KNOWLEDGE_CHOICES}"
        )
    return score_spec_from_fields(function, k, perturbation, knowledge, statistic, margin=margin)


def resolve_score(request: ScoreRequest, info: OracleInfo) -> AnyScoreSpec:
    """Return the score a claim's request names against an oracle described by ``info``."""
    return request.resolve(info) if isinstance(request, PendingScoreSpec) else request
