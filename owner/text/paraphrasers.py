"""Pluggable paraphrasers: two paraphrases of a text from a model the owner has.

The paper made its text pairs with a paraphrase model (§6.2). Two adapters:

- :class:`Seq2SeqParaphraser`: a Hugging Face sequence-to-sequence model (a T5
  paraphraser, say) from a local directory. ``transformers`` is imported only when
  one is loaded (:meth:`Seq2SeqParaphraser.load`), with downloads disabled; the model
  generates two sequences by beam search (deterministic).
- :class:`ChatParaphraser`: an OpenAI-compatible ``/chat/completions`` endpoint
  (HTTP through :mod:`urllib`), asked at temperature 0 for a JSON object
  ``{"a": ..., "b": ...}``. The API key, if any, is read from an environment
  variable and is never recorded in the vault.

A paraphraser returns two texts; :mod:`twinaudit.owner.text.marking` checks them (valid text
items, different from each other, each within the similarity bound). Failures are
:class:`ParaphraserError`; identical versions are reported as such, by text name.
"""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final, Protocol

from twinaudit.protocol.errors import NotFoundError, ParaphraserError

#: Seconds one chat request may take.
DEFAULT_TIMEOUT_S: Final = 60.0
#: Largest chat response read.
MAX_RESPONSE_BYTES: Final = 4 * 1024 * 1024
#: Environment variable holding the chat endpoint's API key, by default.
DEFAULT_API_KEY_ENV: Final = "OPENAI_API_KEY"
#: Beams searched by the seq2seq paraphraser (it returns the best two).
SEQ2SEQ_BEAMS: Final = 8
#: Prefix the seq2seq paraphraser puts before the text (T5 paraphrasers expect one).
SEQ2SEQ_PREFIX: Final = "paraphrase: "

_INSTRUCTION: Final = (
    "Paraphrase the user's text twice. Keep its meaning, tone and language. Make the "
    "two paraphrases use different words from each other wherever the meaning allows. "
    'Answer with only a JSON object {"a": "<first paraphrase>", "b": "<second paraphrase>"}.'
)


class Paraphraser(Protocol):
    """Makes two paraphrases of each text."""

    name: str

    def paraphrase(self, texts: Sequence[str]) -> list[tuple[str, str]]:
        """Return two paraphrases per text, in order."""
        ...


class Seq2SeqParaphraser:
    """Two beam-search outputs of a Hugging Face seq2seq model (tokenizer and model given)."""

    def __init__(self, name: str, tokenizer: Any, model: Any, *, max_new_tokens: int = 128) -> None:
        """Use an already loaded ``tokenizer`` and ``model`` (see :meth:`load`)."""
        self.name = name
        self._tokenizer = tokenizer
        self._model = model
        self._max_new_tokens = max_new_tokens

    @classmethod
    def load(cls, path: str, *, device: str = "cpu") -> Seq2SeqParaphraser:
        """Load a seq2seq model and its tokenizer from a local directory, offline.

        Raises:
            NotFoundError: ``transformers`` is not installed, or ``path`` is no model.

        """
        if not Path(path).is_dir():
            raise NotFoundError(f"{path}: no such model directory (models are not downloaded)")
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        try:
            from twinaudit.owner.marking.torchvision_shim import import_torchvision  # noqa: PLC0415 - optional, loaded on use

            import_torchvision()
            import transformers  # noqa: PLC0415 - optional, loaded on use
        except ImportError as exc:
            raise NotFoundError(
                f"the seq2seq paraphraser needs the transformers package: {exc}"
            ) from None
        try:
            tokenizer = transformers.AutoTokenizer.from_pretrained(path, local_files_only=True)
            model = transformers.AutoModelForSeq2SeqLM.from_pretrained(path, local_files_only=True)
        except (OSError, ValueError) as exc:
            raise NotFoundError(f"{path}: not a seq2seq model: {exc}") from None
        return cls(Path(path).name, tokenizer, model.to(device).eval())

    def paraphrase(self, texts: Sequence[str]) -> list[tuple[str, str]]:
        """Return the two best beams for each text."""
        import torch  # noqa: PLC0415 - optional, loaded on use

        pairs = []
        for text in texts:
            inputs = self._tokenizer(SEQ2SEQ_PREFIX + text, return_tensors="pt", truncation=True)
            with torch.no_grad():
                outputs = self._model.generate(
                    **inputs,
                    num_beams=SEQ2SEQ_BEAMS,
                    num_return_sequences=2,
                    max_new_tokens=self._max_new_tokens,
                    do_sample=False,
                )
            decoded = self._tokenizer.batch_decode(outputs, skip_special_tokens=True)
            if len(decoded) != 2:
                raise ParaphraserError("invalid-answer", f"{len(decoded)} sequences, not 2")
            pairs.append((str(decoded[0]).strip(), str(decoded[1]).strip()))
        return pairs


class ChatParaphraser:
    """Two paraphrases per text from an OpenAI-compatible chat completions endpoint."""

    def __init__(
        self,
        endpoint: str,
        model: str,
        *,
        api_key_env: str = DEFAULT_API_KEY_ENV,
        timeout_s: float = DEFAULT_TIMEOUT_S,
    ) -> None:
        """Talk to ``endpoint`` (the base URL, e.g. ``http://host:8000/v1``) about ``model``."""
        if not endpoint.startswith(("http://", "https://")):
            raise NotFoundError(f"{endpoint!r} is not an http(s) URL")
        self.name = model
        self._url = endpoint.rstrip("/") + "/chat/completions"
        self._model = model
        self._key = os.environ.get(api_key_env)
        self._timeout = timeout_s

    def paraphrase(self, texts: Sequence[str]) -> list[tuple[str, str]]:
        """Ask the endpoint once per text."""
        return [self._one(text) for text in texts]

    def _one(self, text: str) -> tuple[str, str]:
        body = {
            "model": self._model,
            "temperature": 0,
            "messages": [
                {"role": "system", "content": _INSTRUCTION},
                {"role": "user", "content": text},
            ],
        }
        headers = {"Content-Type": "application/json"}
        if self._key:
            headers["Authorization"] = f"Bearer {self._key}"
        request = urllib.request.Request(
            self._url, data=json.dumps(body).encode("utf-8"), headers=headers, method="POST"
        )
        try:
            with urllib.request.urlopen(request, timeout=self._timeout) as response:
                data = response.read(MAX_RESPONSE_BYTES + 1)
        except urllib.error.HTTPError as exc:
            raise ParaphraserError("unreachable", f"{self._url}: HTTP {exc.code}") from None
        except (urllib.error.URLError, OSError) as exc:
            raise ParaphraserError("unreachable", f"{self._url}: {exc}") from None
        if len(data) > MAX_RESPONSE_BYTES:
            raise ParaphraserError("invalid-answer", f"response above {MAX_RESPONSE_BYTES} bytes")
        return _parse_chat_answer(data)


def _parse_chat_answer(data: bytes) -> tuple[str, str]:
    try:
        answer = json.loads(data)
        content = answer["choices"][0]["message"]["content"]
    except (ValueError, KeyError, IndexError, TypeError):
        raise ParaphraserError("invalid-answer", "not a chat completion response") from None
    if not isinstance(content, str):
        raise ParaphraserError("invalid-answer", "the message content is not text")
    text = content.strip()
    if text.startswith("```"):  # a fenced block: keep what is inside
        text = text.strip("`").removeprefix("json").strip()
    try:
        pair = json.loads(text)
    except ValueError:
        raise ParaphraserError(
            "invalid-answer", f"the content is not JSON: {text[:80]!r}"
        ) from None
    if not (
        isinstance(pair, dict) and isinstance(pair.get("a"), str) and isinstance(pair.get("b"), str)
    ):
        raise ParaphraserError("invalid-answer", 'the content is not {"a": text, "b": text}')
    return pair["a"].strip(), pair["b"].strip()
