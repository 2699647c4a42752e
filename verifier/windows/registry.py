"""The window logic of each score function, attached to its name in the table of scores.

:data:`~twinaudit.protocol.claim.functions.SCORE_FUNCTIONS` names every score function and its
claim parameters; :data:`WINDOW_SCORERS` adds how the verifier builds and scores its
windows. A function of the table without window logic here fails at import.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any, Final

from twinaudit.protocol.claim.functions import SCORE_FUNCTIONS, AnyScoreSpec, score_function
from twinaudit.protocol.errors import ParameterError

from .base import AnyWindowScorer
from .classifier import ClassifierWindows
from .encoder import EncoderWindows
from .image_text import ImageTextWindows
from .language import LanguageWindows

#: Each score function's window logic, by the function's claim name.
WINDOW_SCORERS: Final[Mapping[str, Callable[[Any, Any], AnyWindowScorer]]] = MappingProxyType(
    {
        "image-classifier": ClassifierWindows,
        "image-encoder": EncoderWindows,
        "language-model": LanguageWindows,
        "image-text": ImageTextWindows,
    }
)
if set(WINDOW_SCORERS) != set(SCORE_FUNCTIONS):
    raise ImportError(
        f"window logic for {sorted(WINDOW_SCORERS)}, score functions {sorted(SCORE_FUNCTIONS)}"
    )


def scorer_for(spec: AnyScoreSpec, fit: tuple[int, int, int] | None = None) -> AnyWindowScorer:
    """Return the window logic of ``spec``'s score function.

    ``fit`` is the shape image queries are fitted to (the claim map's ``input_fit``
    with the oracle's ``input_shape``, :attr:`ClaimMap.fit_shape`), or None.
    """
    entry = score_function(spec.function)
    if not isinstance(spec, entry.spec_type):
        raise ParameterError(f"a {type(spec).__name__} is not the {entry.name} score's spec")
    return WINDOW_SCORERS[entry.name](spec, fit)
