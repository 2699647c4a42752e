"""An in-process language-model oracle around a causal torch module (CPU, eval, no grad).

The module maps int64 token ids of shape (1, T) to next-token logits of shape
(1, T, V): position ``t`` scores the token at ``t + 1``. For each text the oracle
tokenises it (:class:`~twinaudit.practitioner.tokenizer.Tokenizer`, with the BOS id first
when the tokenizer has one), runs the module once, and answers ``log_softmax`` in
float64 of the logits at positions ``0..T−2`` taken at the ids ``1..T−1`` — the
log-probability of every token after the first, so of every text token when a BOS
leads. A text longer than ``max_tokens`` (BOS included) is refused, never
truncated. Calls are serialised by a lock.

The model is a module, or a :class:`~twinaudit.practitioner.formats.LoadedModel` whose
format, framework and digest the description reports (a Hugging Face model,
:mod:`twinaudit.practitioner.hf`).
"""

from __future__ import annotations

import contextlib
import threading

import numpy as np
import numpy.typing as npt
import torch

from twinaudit.protocol.errors import OracleError, ParameterError
from twinaudit.protocol.oracles.base import OracleInfo
from twinaudit.protocol.oracles.language import (
    LanguageModelOracle,
    LogprobAnswer,
    check_logprobs,
    check_texts,
)

from .formats import LoadedModel
from .tokenizer import Tokenizer, encode_checked
from .torch_images import check_max_batch, run_model
from .torch_oracle import DEFAULT_MAX_BATCH, state_dict_digest


class TorchLanguageModelOracle(LanguageModelOracle):
    """Serve a causal ``torch.nn.Module`` and its tokenizer as a language-model oracle."""

    def __init__(
        self,
        model: torch.nn.Module | LoadedModel,
        tokenizer: Tokenizer,
        *,
        model_name: str = "torch-lm",
        max_batch: int = DEFAULT_MAX_BATCH,
        max_tokens: int | None = None,
    ) -> None:
        """Wrap ``model`` (eval mode) and ``tokenizer``; compute the model's digest."""
        loaded = model if isinstance(model, LoadedModel) else None
        model = model.module if isinstance(model, LoadedModel) else model
        if not isinstance(model, torch.nn.Module):
            raise ParameterError("the model must be a torch.nn.Module")
        if not isinstance(tokenizer, Tokenizer):
            raise ParameterError("the tokenizer needs encode() and bos_id")
        if max_tokens is not None and (isinstance(max_tokens, bool) or max_tokens < 2):
            raise ParameterError(f"max_tokens must be at least 2, got {max_tokens!r}")
        self._model = model.to("cpu")
        with contextlib.suppress(NotImplementedError):  # torch.export modules refuse eval()
            self._model.eval()
        self._tokenizer = tokenizer
        self._max_tokens = max_tokens
        self._lock = threading.Lock()
        try:
            self._info = OracleInfo(
                model_name,
                loaded.digest
                if loaded is not None and loaded.digest is not None
                else state_dict_digest(self._model),
                ("token-logprobs",),
                "",
                0,
                check_max_batch(max_batch),
                framework=loaded.framework if loaded is not None else "",
                model_format=loaded.model_format if loaded is not None else "",
            )
        except OracleError as exc:
            raise ParameterError(f"invalid oracle description: {exc}") from None

    @property
    def info(self) -> OracleInfo:
        """Return the oracle's self-description."""
        return self._info

    def _logprobs(self, ids: list[int]) -> npt.NDArray[np.float64]:
        if len(ids) < 2:
            return np.zeros(0, dtype=np.float64)
        tokens = torch.tensor([ids], dtype=torch.int64)
        out = run_model(self._model, tokens, "a text")
        if (
            not isinstance(out, torch.Tensor)
            or out.dim() != 3
            or tuple(out.shape[:2]) != (1, len(ids))
            or out.shape[2] <= max(ids)
        ):
            shape = tuple(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__
            raise OracleError(
                "invalid-answer", f"the model returned {shape}, not (1, {len(ids)}, vocabulary)"
            )
        if not out.is_floating_point() or not bool(torch.all(torch.isfinite(out))):
            raise OracleError("invalid-answer", "the model returned non-finite logits")
        logp = torch.log_softmax(out[0, :-1].to(torch.float64), dim=-1)
        target = torch.tensor(ids[1:], dtype=torch.int64).unsqueeze(1)
        values = logp.gather(1, target).squeeze(1).numpy().copy()
        return check_logprobs(values)

    def token_logprobs(self, texts: list[str]) -> LogprobAnswer:
        """Return each text's token log-probabilities (see the module docstring)."""
        texts = check_texts(texts)
        with self._lock:
            vectors = tuple(
                self._logprobs(encode_checked(self._tokenizer, text, self._max_tokens))
                for text in texts
            )
        return LogprobAnswer(vectors).validate(len(texts))
