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

from . import classifier, encoder, image_text, language
from .classifier import ScoreSpec
from .encoder import EncoderSpec
from .image_text import ImageTextSpec
from .language import LanguageSpec

#: Any score function's claim parameters.
AnyScoreSpec = ScoreSpec | EncoderSpec | LanguageSpec | ImageTextSpec
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
    function: str, k: int, perturbation: str, knowledge: str
) -> AnyScoreSpec:
    """Build a score spec from the four fields of the proto's ``ScoreSpec``.

    Fields a function does not use must be unset (0 or empty). For ``image-encoder``
    an unset ``k`` or ``perturbation`` takes its default (64, ``random-resized-crop-flip``).
    """
    if function == classifier.FUNCTION:
        return ScoreSpec(k=k, perturbation=perturbation, knowledge=knowledge)
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
