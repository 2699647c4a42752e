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

HTTP errors are ``invalid-answer`` too (with the status), and so is a redirect, which is
never followed; a refused connection is ``unreachable``, and a request unfinished when
its deadline passes is ``deadline``: the deadline covers the whole call, however slowly
the server sends (:func:`~twinaudit.wire.http_call.http_call`). The reply is capped
while it streams by what the request asks for (:func:`reply_cap`) and read event by event
(:mod:`~twinaudit.wire.json_reply`): only each choice's index, whether its text is its
prompt, its token count and its log-probabilities are kept (issue #40 N2, N3, N8).
Nothing is contacted until a query is made.
"""

from __future__ import annotations

import json
import math
from array import array
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Final

import numpy as np

from twinaudit.protocol.errors import OracleError, ParameterError
from twinaudit.protocol.oracles.base import OracleInfo
from twinaudit.protocol.oracles.language import (
    MAX_TEXTS,
    MAX_TOKENS,
    LanguageModelOracle,
    LogprobAnswer,
    check_texts,
)
from twinaudit.wire.http_call import Deadline, http_call
from twinaudit.wire.json_reply import Event, events, expect, keys, skip

#: Largest reply body read, in bytes (whatever the prompts).
MAX_RESPONSE_BYTES: Final = 64 * 1024 * 1024
#: A reply's room beyond its choices, each choice's beyond its prompt, and the bytes it
#: may spend per byte of its prompt (up to two tokens a byte, each with its text,
#: log-probability, offset and top log-probabilities): see :func:`reply_cap`.
REPLY_OVERHEAD_BYTES: Final = 64 * 1024
CHOICE_OVERHEAD_BYTES: Final = 4096
REPLY_BYTES_PER_PROMPT_BYTE: Final = 256
#: Default seconds a request may take, all of it.
DEFAULT_TIMEOUT_S: Final = 120.0
#: Default texts per request.
DEFAULT_MAX_BATCH: Final = 16


def _invalid(message: str) -> OracleError:
    return OracleError("invalid-answer", message)


def reply_cap(prompts: list[str]) -> int:
    """Return the byte cap of the reply to a request for ``prompts``."""
    size = sum(
        CHOICE_OVERHEAD_BYTES + REPLY_BYTES_PER_PROMPT_BYTE * len(p.encode("utf-8"))
        for p in prompts
    )
    return min(MAX_RESPONSE_BYTES, REPLY_OVERHEAD_BYTES + size)


@dataclass
class _Choice:
    """What a reply's choice holds that the oracle reads (the rest is passed over)."""

    #: The choice's index: None where it gives none (its position then stands for it).
    index: object = None
    #: The prompt its text equals (the oracle's own string), or None.
    text: str | None = None
    logprobs: bool = False
    tokens: int | None = None
    values: array[float] | None = None
    #: The first token after the first whose log-probability is null or not a number.
    problem: str | None = None


def _count(stream: Iterator[Event], first: Event) -> int | None:
    """Return how many items the array that begins with ``first`` holds (None: no array)."""
    if first[0] != "start_array":
        skip(stream, first[0])
        return None
    count = 0
    for event, _ in stream:
        if event == "end_array":
            return count
        skip(stream, event)
        count += 1
        if count > MAX_TOKENS + 1:
            raise _invalid(f"a choice has over {MAX_TOKENS} tokens")
    return count


def _values(stream: Iterator[Event], first: Event, choice: _Choice) -> None:
    """Read ``token_logprobs`` (the first may be null; every later one a number)."""
    if first[0] != "start_array":
        skip(stream, first[0])
        return
    values = choice.values = array("d")
    for event, value in stream:
        if event == "end_array":
            return
        index = len(values)
        if index > MAX_TOKENS:
            raise _invalid(f"a choice has over {MAX_TOKENS} log-probabilities")
        if event == "number":
            values.append(value)
            continue
        skip(stream, event)
        values.append(math.nan)
        if index and choice.problem is None:
            choice.problem = (
                f"token {index} has no log-probability"
                if event == "null"
                else f"token {index} log-probability is not a number"
            )


def _read_choice(stream: Iterator[Event], prompts: dict[str, str]) -> _Choice:
    """Read one choice object (just opened)."""
    choice = _Choice()
    what = "a choice of the completions reply"
    for key, first in keys(stream, what, ("index", "text", "logprobs")):
        if key == "index":
            skip(stream, first[0])
            choice.index = first[1] if first[0] == "number" else first[0]  # a str: refused
        elif key == "text":
            skip(stream, first[0])
            choice.text = prompts.get(first[1]) if first[0] == "string" else None
        elif first[0] != "start_map":
            skip(stream, first[0])
        else:
            choice.logprobs = True
            for name, inner in keys(stream, what, ("tokens", "token_logprobs")):
                if name == "tokens":
                    choice.tokens = _count(stream, inner)
                else:
                    _values(stream, inner, choice)
    return choice


def _check_choice(choice: _Choice, prompt: str, position: int) -> np.ndarray[Any, Any]:
    """Return the log-probabilities after the first token of one choice (see the module)."""
    if choice.text is None or choice.text != prompt:
        raise _invalid(
            f"choice {position} does not echo its prompt exactly (truncated, altered or "
            "continued text)"
        )
    if not choice.logprobs:
        raise _invalid(f"choice {position} has no log-probabilities")
    tokens, values = choice.tokens, choice.values
    if tokens is None or values is None or not values:
        raise _invalid(f"choice {position} has no token log-probabilities")
    if tokens != len(values):
        raise _invalid(f"choice {position} has {tokens} tokens, {len(values)} values")
    if choice.problem is not None:
        raise _invalid(f"choice {position}: {choice.problem}")
    out = np.frombuffer(values, dtype=np.float64)[1:]
    bad = np.flatnonzero(~(np.isfinite(out) & (out <= 0.0)))
    if bad.size:
        raise _invalid(f"choice {position}: token {bad[0] + 1} log-probability {out[bad[0]]!r}")
    return out.copy()


def parse_completions(body: bytes, prompts: list[str]) -> LogprobAnswer:
    """Parse a completions reply for ``prompts`` into a validated :class:`LogprobAnswer`."""
    what = "the completions reply"
    stream = events(body, what)
    first, _ = next(stream)
    expect(first, "start_map", what, f"no choices for {len(prompts)} prompts")
    known = {p: p for p in prompts}
    choices: list[_Choice] | None = None
    for _, (opening, _) in keys(stream, what, ("choices",)):
        if opening != "start_array":
            skip(stream, opening)
            continue
        choices = []
        for event, _ in stream:
            if event == "end_array":
                break
            if len(choices) == len(prompts):
                raise _invalid(f"over {len(prompts)} choices for {len(prompts)} prompts")
            if event != "start_map":
                skip(stream, event)
                choices.append(_Choice(index="not an object"))
                continue
            choices.append(_read_choice(stream, known))
    for _ in stream:  # nothing but the end (trailing bytes are refused)
        pass
    if choices is None or len(choices) != len(prompts):
        count = len(choices) if choices is not None else "no"
        raise _invalid(f"{count} choices for {len(prompts)} prompts")
    by_index: dict[int, _Choice] = {}
    for position, choice in enumerate(choices):
        index = choice.index if choice.index is not None else position
        if not isinstance(index, int) or isinstance(index, bool) or index in by_index:
            raise _invalid(f"choice {position} has a missing or repeated index")
        by_index[index] = choice
    if sorted(by_index) != list(range(len(prompts))):
        raise _invalid("the choices' indices are not 0..n-1")
    vectors = tuple(_check_choice(by_index[i], prompts[i], i) for i in range(len(prompts)))
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
        reply = http_call(
            self._url,
            deadline=Deadline(self._timeout_s),
            max_bytes=reply_cap(prompts),
            what=self._url,
            body=body,
            headers=headers,
        )
        if not 200 <= reply.status < 300:
            raise _invalid(f"the endpoint answered HTTP {reply.status}")
        return reply.body

    def token_logprobs(self, texts: list[str]) -> LogprobAnswer:
        """Ask the endpoint for each text's token log-probabilities, max_batch at a time."""
        texts = check_texts(texts)
        parts = []
        for start in range(0, len(texts), self._max_batch):
            batch = texts[start : start + self._max_batch]
            parts.append(parse_completions(self._post(batch), batch))
        return LogprobAnswer.concatenate(parts).validate(len(texts))
