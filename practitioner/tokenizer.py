"""The tokenizer interface of the in-process text oracles, and a byte-level tokenizer.

A :class:`Tokenizer` turns a text into token ids (``encode``) and may name a
beginning-of-sequence id (``bos_id``) that a language model conditions the first
token on. :class:`ByteTokenizer` is the simplest one: the text's UTF-8 bytes as ids
0–255, with 256 as BOS if asked for — enough for small models trained from scratch;
real models bring their own (see :mod:`twinaudit.practitioner.hf`).
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from twinaudit.protocol.errors import InputError, OracleError


@runtime_checkable
class Tokenizer(Protocol):
    """Text to token ids."""

    @property
    def bos_id(self) -> int | None:
        """Return the beginning-of-sequence id the model expects first, or None."""

    def encode(self, text: str) -> list[int]:
        """Return the token ids of ``text`` (without any special token)."""


class ByteTokenizer:
    """UTF-8 bytes as token ids 0–255; id 256 is BOS when ``bos`` is true (vocabulary 257)."""

    def __init__(self, bos: bool = True) -> None:
        """Use BOS id 256 when ``bos``."""
        self._bos = 256 if bos else None

    @property
    def bos_id(self) -> int | None:
        """Return 256 when the tokenizer was made with ``bos``, else None."""
        return self._bos

    @property
    def vocabulary_size(self) -> int:
        """Return 257: the byte values and BOS."""
        return 257

    def encode(self, text: str) -> list[int]:
        """Return the UTF-8 bytes of ``text``."""
        return list(text.encode("utf-8"))


def encode_checked(tokenizer: Tokenizer, text: str, max_tokens: int | None) -> list[int]:
    """Tokenise ``text``; check the ids are integers and fit ``max_tokens`` (with BOS)."""
    ids = tokenizer.encode(text)
    if not isinstance(ids, list) or not all(
        isinstance(i, int) and not isinstance(i, bool) and i >= 0 for i in ids
    ):
        raise OracleError("invalid-answer", "the tokenizer returned something other than ids")
    if not ids:
        raise InputError("the text has no tokens")
    if tokenizer.bos_id is not None:
        ids = [tokenizer.bos_id, *ids]
    if max_tokens is not None and len(ids) > max_tokens:
        raise InputError(f"the text has {len(ids)} tokens, more than the model's {max_tokens}")
    return ids
