"""The window logic of each score function, by spec type."""

from __future__ import annotations

from protocol.errors import ParameterError
from verifier.scoring.classifier import ScoreSpec
from verifier.scoring.encoder import EncoderSpec
from verifier.scoring.image_text import ImageTextSpec
from verifier.scoring.language import LanguageSpec
from verifier.scoring.registry import AnyScoreSpec

from .base import AnyWindowScorer
from .classifier import ClassifierWindows
from .encoder import EncoderWindows
from .image_text import ImageTextWindows
from .language import LanguageWindows


def scorer_for(spec: AnyScoreSpec) -> AnyWindowScorer:
    """Return the window logic of ``spec``'s score function."""
    if isinstance(spec, ScoreSpec):
        return ClassifierWindows(spec)
    if isinstance(spec, EncoderSpec):
        return EncoderWindows(spec)
    if isinstance(spec, LanguageSpec):
        return LanguageWindows(spec)
    if isinstance(spec, ImageTextSpec):
        return ImageTextWindows(spec)
    raise ParameterError(f"no score function for {type(spec).__name__}")
