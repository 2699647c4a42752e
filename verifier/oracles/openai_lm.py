"""A language-model oracle backed by an OpenAI-compatible completions endpoint.

Servers such as vLLM answer ``POST {base_url}/completions`` with the prompt's own
token log-probabilities when asked for ``echo: true``, ``logprobs: 0`` and
``max_tokens: 0`` (nothing generated). :class:`OpenAICompletionsOracle` sends a
batch of texts as one request (``prompt`` a list, ``temperature`` 0) and reads, for
each choice, ``logprobs.tokens`` and ``logprobs.token_logprobs``. The first token has
no log-probability (``null``: nothing precedes it, or it is the BOS token the server
added); every later one must have one. An answer is ``OracleError("invalid-answer")``
when (spec §10.5):

- the body is not JSON, has no ``choices`` list, or its choices are not exactly one
  per prompt with indices ``0..n−1``;
- a choice's ``text`` (the echo) is not its prompt followed by nothing — the server
  truncated or altered the text, or generated tokens;
- a choice has no ``logprobs`` object, ``tokens`` and ``token_logprobs`` of different
  lengths or none at all, or a missing (``null``) or non-numeric log-probability
  after the first token, or one that is not finite and ``≤ 0``.

HTTP errors are ``invalid-answer`` too (with the status); a refused connection is
``unreachable`` and a timeout ``deadline``. Replies above :data:`MAX_RESPONSE_BYTES`
are refused. Uses :mod:`urllib` only; nothing is contacted until a query is made.
"""

from __future__ import annotations

import json
import math
import socket
import urllib.error
import urllib.request
from typing import Any, Final

import numpy as np

from protocol.errors import OracleError, ParameterError

from .base import OracleInfo
from .language import MAX_TEXTS, LanguageModelOracle, LogprobAnswer, check_texts

#: Largest reply body read, in bytes.
MAX_RESPONSE_BYTES: Final = 64 * 1024 * 1024
#: Default seconds a request may take.
DEFAULT_TIMEOUT_S: Final = 120.0
#: Default texts per request.
DEFAULT_MAX_BATCH: Final = 16


def _invalid(message: str) -> OracleError:
    return OracleError("invalid-answer", message)


def parse_choice(choice: object, prompt: str, position: int) -> np.ndarray[Any, Any]:
    """Return the log-probabilities after the first token of one choice (see the module)."""
    if not isinstance(choice, dict):
        raise _invalid(f"choice {position} is not an object")
    if choice.get("text") != prompt:
        raise _invalid(
            f"choice {position} does not echo its prompt exactly (truncated, altered or "
            "continued text)"
        )
    logprobs = choice.get("logprobs")
    if not isinstance(logprobs, dict):
        raise _invalid(f"choice {position} has no log-probabilities")
    tokens, values = logprobs.get("tokens"), logprobs.get("token_logprobs")
    if not isinstance(tokens, list) or not isinstance(values, list) or not values:
        raise _invalid(f"choice {position} has no token log-probabilities")
    if len(tokens) != len(values):
        raise _invalid(f"choice {position} has {len(tokens)} tokens, {len(values)} values")
    out = []
    for index, value in enumerate(values[1:], start=1):
        if value is None:
            raise _invalid(f"choice {position}: token {index} has no log-probability")
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise _invalid(f"choice {position}: token {index} log-probability is not a number")
        number = float(value)
        if not (math.isfinite(number) and number <= 0.0):
            raise _invalid(f"choice {position}: token {index} log-probability {number!r}")
        out.append(number)
    return np.array(out, dtype=np.float64)


def parse_completions(body: bytes, prompts: list[str]) -> LogprobAnswer:
    """Parse a completions reply for ``prompts`` into a validated :class:`LogprobAnswer`."""
    try:
        reply = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        raise _invalid("the reply is not JSON") from None
    choices = reply.get("choices") if isinstance(reply, dict) else None
    if not isinstance(choices, list) or len(choices) != len(prompts):
        count = len(choices) if isinstance(choices, list) else "no"
        raise _invalid(f"{count} choices for {len(prompts)} prompts")
    by_index: dict[int, object] = {}
    for position, choice in enumerate(choices):
        index = choice.get("index", position) if isinstance(choice, dict) else None
        if not isinstance(index, int) or isinstance(index, bool) or index in by_index:
            raise _invalid(f"choice {position} has a missing or repeated index")
        by_index[index] = choice
    if sorted(by_index) != list(range(len(prompts))):
        raise _invalid("the choices' indices are not 0..n-1")
    vectors = tuple(parse_choice(by_index[i], prompts[i], i) for i in range(len(prompts)))
    return LogprobAnswer(vectors).validate(len(prompts))


class OpenAICompletionsOracle(LanguageModelOracle):
    """Token log-probabilities from ``{base_url}/completions`` (an OpenAI-style server)."""

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key: str | None = None,
        model_digest: str = "unverified: remote endpoint",
        timeout_s: float = DEFAULT_TIMEOUT_S,
        max_batch: int = DEFAULT_MAX_BATCH,
    ) -> None:
        """Query ``model`` at ``base_url`` (e.g. ``http://host:8000/v1``).

        ``model_digest`` is what Describe reports: the weights behind a remote endpoint
        cannot be hashed from here, so name them if you know them.
        """
        if not base_url.startswith(("http://", "https://")):
            raise ParameterError(f"base URL must be http(s)://…, got {base_url!r}")
        if not timeout_s > 0:
            raise ParameterError(f"timeout must be positive, got {timeout_s!r}")
        if isinstance(max_batch, bool) or not 1 <= max_batch <= MAX_TEXTS:
            raise ParameterError(f"max_batch must be in 1..{MAX_TEXTS}, got {max_batch!r}")
        self._url = base_url.rstrip("/") + "/completions"
        self._model = model
        self._api_key = api_key
        self._timeout_s = float(timeout_s)
        self._max_batch = max_batch
        try:
            self._info = OracleInfo(
                model, model_digest, ("token-logprobs",), "", 0, min(max_batch, 4096)
            )
        except OracleError as exc:
            raise ParameterError(f"invalid oracle description: {exc}") from None

    @property
    def info(self) -> OracleInfo:
        """Return the oracle's self-description."""
        return self._info

    def _post(self, prompts: list[str]) -> bytes:
        body = json.dumps(
            {
                "model": self._model,
                "prompt": prompts,
                "max_tokens": 0,
                "echo": True,
                "logprobs": 0,
                "temperature": 0,
            }
        ).encode("utf-8")
        headers = {"Content-Type": "application/json"}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        request = urllib.request.Request(self._url, data=body, headers=headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=self._timeout_s) as reply:
                data: bytes = reply.read(MAX_RESPONSE_BYTES + 1)
        except urllib.error.HTTPError as exc:
            raise _invalid(f"the endpoint answered HTTP {exc.code}") from None
        except TimeoutError:
            raise OracleError("deadline", f"no answer from {self._url} in time") from None
        except (urllib.error.URLError, ConnectionError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            if isinstance(reason, TimeoutError | socket.timeout):
                raise OracleError("deadline", f"no answer from {self._url} in time") from None
            raise OracleError("unreachable", f"{self._url}: {reason}") from None
        if len(data) > MAX_RESPONSE_BYTES:
            raise _invalid(f"the reply is larger than {MAX_RESPONSE_BYTES} bytes")
        return data

    def token_logprobs(self, texts: list[str]) -> LogprobAnswer:
        """Ask the endpoint for each text's token log-probabilities, max_batch at a time."""
        texts = check_texts(texts)
        parts = []
        for start in range(0, len(texts), self._max_batch):
            batch = texts[start : start + self._max_batch]
            parts.append(parse_completions(self._post(batch), batch))
        return LogprobAnswer.concatenate(parts).validate(len(texts))
