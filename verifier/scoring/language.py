"""The language-model score function (paper §6.2; spec §10.5).

A version of a text pair is scored by the negative mean token loss of the text
under the model: the mean of the log-probabilities the oracle reports for the
text's tokens (:func:`~verifier.oracles.language.mean_logprob`: exactly rounded sum
divided by the count, binary64; 0.0 when the oracle reports no token). One query
per version, no perturbation: the text is sent as committed.

The paper scores by the negative loss of Carlini et al.; the mean (rather than the
sum) over tokens is the usual per-token loss, so that the two versions of a pair —
paraphrases that may differ in length — are compared on one scale.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Final

from protocol.errors import ParameterError
from protocol.items import TextItem
from verifier.oracles.language import F64Vector, mean_logprob

from .function_only import FunctionOnlySpec

#: The score function's claim name.
FUNCTION: Final = "language-model"
#: The oracle capability it needs.
CAPABILITY: Final = "token-logprobs"


@dataclass(frozen=True, kw_only=True)
class LanguageSpec(FunctionOnlySpec):
    """The score part of a claim: ``{"function": "language-model"}``."""

    FUNCTION: ClassVar[str] = FUNCTION
    CAPABILITY: ClassVar[str] = CAPABILITY
    item_kind: ClassVar[str] = "text"

    function: str = FUNCTION

    def check_item(self, item: object) -> TextItem:
        """Return ``item`` if it is a text item, else raise ``ParameterError``."""
        if not isinstance(item, TextItem):
            raise ParameterError("the language-model score scores text items")
        return item


def score(logprobs: F64Vector) -> float:
    """Return the float64 score of one text from its token log-probabilities."""
    return mean_logprob(logprobs)
