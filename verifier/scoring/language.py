"""The language-model score function (paper §6.2; spec §10.5).

A version of a text pair is scored by the negative mean token loss of the text
under the model: the mean of the log-probabilities the oracle reports for the
text's tokens (:func:`~twinaudit.protocol.oracles.language.mean_logprob`: exactly rounded sum
divided by the count, binary64; 0.0 when the oracle reports no token). One query
per version, no perturbation: the text is sent as committed.

The paper scores by the negative loss of Carlini et al.; the mean (rather than the
sum) over tokens is the usual per-token loss, so that the two versions of a pair —
paraphrases that may differ in length — are compared on one scale.
"""

from __future__ import annotations

from twinaudit.protocol.claim.scores.function_only import LanguageSpec
from twinaudit.protocol.oracles.language import F64Vector, mean_logprob

#: The spec class is the claim protocol's; it is re-exported for the scoring code's callers.
__all__ = ["LanguageSpec", "score"]


def score(logprobs: F64Vector) -> float:
    """Return the float64 score of one text from its token log-probabilities."""
    return mean_logprob(logprobs)
