"""The text marking configuration, recorded in the vault (plain data, no torch).

Defaults: thesaurus substitution, similarity bound τ = 0.85, up to 4 synonyms tried per
word, 256 texts per vault chunk. τ = 0.85 was chosen on Rotten Tomatoes review
sentences (see ``owner/text/substitution.py``): one synonym swap costs about 0.02-0.10
of cosine similarity under MiniLM, so 0.85 leaves room for two to four swaps per
version in a typical 20-word sentence while keeping the meaning; ``0.9`` halves the
swaps, ``0.8`` lets weaker synonyms in.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, fields
from typing import Final

from twinaudit.protocol.encoding import Value
from twinaudit.protocol.errors import InputError, ParameterError

from ..plain_data import check_field_names, check_int, fields_value, optional_field, typed_field
from .similarity import EMBEDDERS

#: Text markers: thesaurus substitution (offline default), a Hugging Face seq2seq
#: paraphraser, an OpenAI-compatible chat endpoint.
TEXT_MARKERS: Final = ("thesaurus", "seq2seq", "chat")
#: Most synonyms tried per word.
MAX_CANDIDATES: Final = 50
#: Most texts per vault chunk.
MAX_TEXT_BATCH: Final = 65536
#: Longest model name, path or endpoint accepted.
MAX_NAME_CHARS: Final = 4096

#: How errors about a recorded configuration name it.
_WHAT: Final = "text marking config"
_SHA256_HEX: Final = re.compile(r"[0-9a-f]{64}")


@dataclass(frozen=True)
class TextMarkingConfig:
    """Settings of one text marking run.

    Attributes:
        marker: ``"thesaurus"``, ``"seq2seq"`` or ``"chat"``.
        min_similarity: τ, the bound on the embedding cosine similarity of each
            version to its original, in (0, 1).
        embedder: the sentence embedder that measures it (``all-MiniLM-L6-v2``).
        max_candidates: synonyms tried per word (thesaurus marker).
        batch_size: texts per vault chunk (and per embedding round).
        drop_unmarkable: leave out texts no version can be made for (reported), rather
            than refusing the whole input.
        thesaurus_sha256: the SHA-256 of the thesaurus data file (set by the run, so
            that a resumed run uses the same thesaurus).
        model: the paraphrase model (seq2seq: a local path or name; chat: the model id).
        endpoint: the chat endpoint's base URL (``http(s)://host/v1``).

    """

    marker: str = "thesaurus"
    min_similarity: float = 0.85
    embedder: str = "all-MiniLM-L6-v2"
    max_candidates: int = 4
    batch_size: int = 256
    drop_unmarkable: bool = False
    thesaurus_sha256: str | None = None
    model: str | None = None
    endpoint: str | None = None

    def __post_init__(self) -> None:
        """Check every field; raise ParameterError on the first one out of its domain."""
        if self.marker not in TEXT_MARKERS:
            raise ParameterError(
                f"unknown text marker {self.marker!r}; choose one of {TEXT_MARKERS}"
            )
        bound = self.min_similarity
        if isinstance(bound, bool) or not isinstance(bound, int | float):
            raise ParameterError("min_similarity must be a number")
        if not (math.isfinite(bound) and 0.0 < bound < 1.0):
            raise ParameterError(f"min_similarity must be in (0, 1), got {bound!r}")
        object.__setattr__(self, "min_similarity", float(bound))
        if self.embedder not in EMBEDDERS:
            raise ParameterError(f"unknown embedder {self.embedder!r}; choose one of {EMBEDDERS}")
        check_int("max_candidates", self.max_candidates, 1, MAX_CANDIDATES)
        check_int("batch_size", self.batch_size, 1, MAX_TEXT_BATCH)
        if not isinstance(self.drop_unmarkable, bool):
            raise ParameterError("drop_unmarkable must be a boolean")
        if self.thesaurus_sha256 is not None and not (
            isinstance(self.thesaurus_sha256, str) and _SHA256_HEX.fullmatch(self.thesaurus_sha256)
        ):
            raise ParameterError("thesaurus_sha256 must be None or 64 lowercase hex digits")
        for name in ("model", "endpoint"):
            value = getattr(self, name)
            if value is not None and not (
                isinstance(value, str) and 0 < len(value) <= MAX_NAME_CHARS
            ):
                raise ParameterError(f"{name} must be None or a non-empty string")
        if self.marker in ("seq2seq", "chat") and self.model is None:
            raise ParameterError(f"the {self.marker} marker needs a model")
        if self.marker == "chat" and self.endpoint is None:
            raise ParameterError("the chat marker needs an endpoint URL")
        if self.marker != "chat" and self.endpoint is not None:
            raise ParameterError("an endpoint applies to the chat marker only")

    def to_value(self) -> dict[str, Value]:
        """Return the canonical-encodable record of this configuration (every field)."""
        return {"kind": "text", **fields_value(self)}

    @classmethod
    def from_value(cls, value: Value) -> TextMarkingConfig:
        """Rebuild a configuration from :meth:`to_value`'s output, strictly.

        Raises:
            InputError: not a map with exactly the recorded fields, or a wrong type.
            ParameterError: a field of the right type outside its domain.

        """
        if not isinstance(value, dict) or value.get("kind") != "text":
            raise InputError("a text marking config must be a map with kind 'text'")
        check_field_names(value, [f.name for f in fields(cls)] + ["kind"], _WHAT)
        drop = value["drop_unmarkable"]
        if not isinstance(drop, bool):
            raise InputError("text marking config field 'drop_unmarkable' must be bool")
        return cls(
            marker=typed_field(value, "marker", str, _WHAT),
            min_similarity=typed_field(value, "min_similarity", float, _WHAT),
            embedder=typed_field(value, "embedder", str, _WHAT),
            max_candidates=typed_field(value, "max_candidates", int, _WHAT),
            batch_size=typed_field(value, "batch_size", int, _WHAT),
            drop_unmarkable=drop,
            thesaurus_sha256=optional_field(value, "thesaurus_sha256", str, _WHAT),
            model=optional_field(value, "model", str, _WHAT),
            endpoint=optional_field(value, "endpoint", str, _WHAT),
        )
