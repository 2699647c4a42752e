"""A Hugging Face ``transformers`` causal LM as a language-model oracle (optional).

:func:`load_hf_language_model` loads a model directory (or a name already in the
local cache: ``local_files_only``, nothing is downloaded) with ``AutoTokenizer`` and
``AutoModelForCausalLM`` in float32 on the CPU and serves it through
:class:`~verifier.oracles.torch_lm.TorchLanguageModelOracle`. The tokenizer's BOS
token, when it has one, leads every text, so every token of the text is scored; the
model's ``max_position_embeddings`` bounds the tokens (longer texts are refused,
never truncated). ``transformers`` is imported only when a model is loaded; without
it the loader raises :class:`~protocol.errors.ParameterError`.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

import torch

from protocol.errors import InputError, ParameterError

from .torch_lm import TorchLanguageModelOracle
from .torch_oracle import DEFAULT_MAX_BATCH


class HfTokenizer:
    """A ``transformers`` tokenizer seen through :class:`~verifier.oracles.tokenizer.Tokenizer`."""

    def __init__(self, tokenizer: Any) -> None:
        """Wrap ``tokenizer`` (anything callable like a ``PreTrainedTokenizer``)."""
        self._tokenizer = tokenizer

    @property
    def bos_id(self) -> int | None:
        """Return the tokenizer's BOS id, or None when it has none."""
        bos = getattr(self._tokenizer, "bos_token_id", None)
        return bos if isinstance(bos, int) and not isinstance(bos, bool) else None

    def encode(self, text: str) -> list[int]:
        """Return the text's ids without special tokens."""
        ids = self._tokenizer(text, add_special_tokens=False)["input_ids"]
        return [int(i) for i in ids]


class LogitsOnly(torch.nn.Module):
    """Call a ``transformers`` causal LM on ids and return only its ``logits``."""

    def __init__(self, model: torch.nn.Module) -> None:
        """Wrap ``model``."""
        super().__init__()
        self.model = model

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        """Return the (1, T, V) next-token logits."""
        logits = self.model(input_ids=ids).logits
        assert isinstance(logits, torch.Tensor)
        return logits


def load_hf_language_model(
    path: str | Path,
    *,
    model_name: str | None = None,
    max_batch: int = DEFAULT_MAX_BATCH,
) -> TorchLanguageModelOracle:
    """Load a local ``transformers`` causal LM and its tokenizer as an oracle."""
    try:
        transformers = importlib.import_module("transformers")
    except ImportError:
        raise ParameterError(
            "serving a Hugging Face model needs the 'transformers' package"
        ) from None
    try:
        tokenizer = transformers.AutoTokenizer.from_pretrained(str(path), local_files_only=True)
        model = transformers.AutoModelForCausalLM.from_pretrained(str(path), local_files_only=True)
    except (OSError, ValueError) as exc:
        raise InputError(f"cannot load a causal LM from {str(path)!r}: {exc}") from None
    model = model.float()
    limit = getattr(getattr(model, "config", None), "max_position_embeddings", None)
    return TorchLanguageModelOracle(
        LogitsOnly(model),
        HfTokenizer(tokenizer),
        model_name=model_name or Path(str(path)).name or "hf-model",
        max_batch=max_batch,
        max_tokens=limit if isinstance(limit, int) and limit >= 2 else None,
    )
