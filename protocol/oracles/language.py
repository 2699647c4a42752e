"""Language-model oracles (capability ``token-logprobs``) and their answers.

A :class:`LanguageModelOracle` answers, for each text of a batch, the natural-log
probabilities the model assigns to the text's tokens given the tokens before them:
every token after the first, or every token when the model conditions the first
on a beginning-of-sequence token (spec §10.5; which tokens is the model's own
tokenisation, stated by the oracle, not something the verifier can check). The
answer is a :class:`LogprobAnswer`, one float64 vector per text. Answers come from a
party the arbiter does not trust: :meth:`LogprobAnswer.validate` checks the count,
the lengths (``0..MAX_TOKENS``) and every value (finite, at most 0), and reports
every defect as ``OracleError("invalid-answer")``. numpy only.
"""

from __future__ import annotations

import abc
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

import numpy as np
import numpy.typing as npt

from twinaudit.protocol.encoding import Value
from twinaudit.protocol.errors import InputError, LimitExceededError, OracleError
from twinaudit.protocol.items import MAX_TEXT_BYTES

from .base import Oracle

#: Most log-probabilities per text (a text has at most MAX_TEXT_BYTES UTF-8 bytes).
MAX_TOKENS: Final = 2 * MAX_TEXT_BYTES
#: Most texts in one :meth:`LanguageModelOracle.token_logprobs` call.
MAX_TEXTS: Final = 1 << 12

F64Vector = npt.NDArray[np.float64]


def _invalid(message: str) -> OracleError:
    return OracleError("invalid-answer", message)


def check_texts(texts: object) -> list[str]:
    """Validate a batch of texts: 1..MAX_TEXTS strings of 1..MAX_TEXT_BYTES UTF-8 bytes."""
    if not isinstance(texts, list | tuple) or not all(isinstance(t, str) for t in texts):
        raise InputError("texts must be a list of strings")
    if not texts:
        raise InputError("a batch needs at least one text")
    if len(texts) > MAX_TEXTS:
        raise LimitExceededError("texts per call", len(texts), MAX_TEXTS)
    for index, text in enumerate(texts):
        try:
            size = len(text.encode("utf-8"))
        except UnicodeEncodeError:
            raise InputError(f"text {index} is not valid Unicode") from None
        if not 1 <= size <= MAX_TEXT_BYTES:
            raise InputError(f"text {index} has {size} UTF-8 bytes, not 1..{MAX_TEXT_BYTES}")
    return list(texts)


def check_logprobs(values: object, what: str = "log-probabilities") -> F64Vector:
    """Return ``values`` if it is a valid float64 vector of token log-probabilities.

    At most :data:`MAX_TOKENS` values, each finite and ``≤ 0``; any defect is
    ``OracleError("invalid-answer")``.
    """
    if not isinstance(values, np.ndarray) or values.dtype != np.float64 or values.ndim != 1:
        raise _invalid(f"{what} must be a float64 vector")
    if values.shape[0] > MAX_TOKENS:
        raise _invalid(f"{what}: {values.shape[0]} values, more than {MAX_TOKENS}")
    if not bool(np.all(np.isfinite(values))):
        raise _invalid(f"{what} contain NaN or infinity")
    if not bool(np.all(values <= 0.0)):
        raise _invalid(f"{what} contain a positive value (a probability above 1)")
    return values


@dataclass(frozen=True)
class LogprobAnswer:
    """The answer to one ``token_logprobs`` call: one float64 vector per text, in order."""

    logprobs: tuple[F64Vector, ...]

    def __post_init__(self) -> None:
        """Require a tuple of float64 vectors (the full checks are in :meth:`validate`)."""
        if not isinstance(self.logprobs, tuple) or not all(
            isinstance(v, np.ndarray) and v.dtype == np.float64 and v.ndim == 1
            for v in self.logprobs
        ):
            raise _invalid("log-probabilities must be a tuple of float64 vectors")

    def __len__(self) -> int:
        """Return the number of texts answered."""
        return len(self.logprobs)

    def validate(self, n_texts: int) -> LogprobAnswer:
        """Check the answer for ``n_texts`` texts (see :func:`check_logprobs`); return it."""
        if len(self.logprobs) != n_texts:
            raise _invalid(f"log-probabilities for {len(self.logprobs)} texts, expected {n_texts}")
        for index, values in enumerate(self.logprobs):
            check_logprobs(values, f"log-probabilities of text {index}")
        return self

    def to_value(self) -> list[Value]:
        """Return the answer as recorded in a transcript: one list of floats per text."""
        return [[float(x) for x in values] for values in self.logprobs]

    @classmethod
    def from_value(cls, value: object, n_texts: int) -> LogprobAnswer:
        """Rebuild and validate a recorded answer (:meth:`to_value`)."""
        if not isinstance(value, list) or not all(
            isinstance(row, list) and all(isinstance(x, float) for x in row) for row in value
        ):
            raise _invalid("recorded log-probabilities must be lists of floats")
        vectors = tuple(np.array(row, dtype=np.float64).reshape(len(row)) for row in value)
        return cls(vectors).validate(n_texts)

    @classmethod
    def concatenate(cls, parts: Sequence[LogprobAnswer]) -> LogprobAnswer:
        """Join the answers of consecutive batches."""
        return cls(tuple(v for part in parts for v in part.logprobs))


def mean_logprob(values: F64Vector) -> float:
    """Return ``fsum(values) / n`` (binary64, exactly rounded sum), or 0.0 for no value."""
    check_logprobs(values)
    n = int(values.shape[0])
    return math.fsum(values.tolist()) / n if n else 0.0


class LanguageModelOracle(Oracle):
    """A black-box language model the verifier may query (capability ``token-logprobs``)."""

    @abc.abstractmethod
    def token_logprobs(self, texts: list[str]) -> LogprobAnswer:
        """Return each text's token log-probabilities (see the module docstring).

        Raises :class:`~twinaudit.protocol.errors.InputError` for a malformed batch and
        :class:`~twinaudit.protocol.errors.OracleError` when the model cannot answer.
        """
