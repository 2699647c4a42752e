"""An in-process classifier oracle around a ``torch.nn.Module`` (eval mode, no grad).

The model runs on the CPU unless a torch ``device`` is named (an accelerator, for the
evaluation's large models); its logits come back to the CPU before anything is
computed from them.

Images arrive as float32 (N, H, W, C) in [0, 1]; they are moved to NCHW, optionally
normalised per channel (``(x − mean_c) / std_c``), and fed to the model in batches of
at most ``max_batch``. The model's logits (N, n_classes) become probabilities by a
softmax computed in float64, or, with ``label_only``, the index of the first
maximal logit.

The model digest (:func:`state_dict_digest`) is SHA-256 over the state dict, tensors
in the bytewise order of their UTF-8 names; for each tensor it absorbs, every
integer as 8 bytes little-endian: ``len(name)``, ``name``, ``len(dtype)``, ``dtype``
(torch's name, e.g. ``"torch.float32"``), ``ndim``, each dimension, ``nbytes``, and
the tensor's contiguous CPU bytes (little-endian). The input is prefixed by the ASCII
domain string ``twinaudit/state-dict/v1`` and a zero byte. It identifies the weights
and buffers, not the architecture's code.
"""

from __future__ import annotations

import contextlib
import hashlib
import sys
import threading
from collections.abc import Sequence
from typing import Final

import numpy as np
import torch

from protocol.errors import OracleError, ParameterError

from .base import ClassifierOracle, ClassifyAnswer, F32Images, OracleInfo, check_images
from .torch_images import ImageInput, check_max_batch, run_model

#: Default largest batch the model sees at once.
DEFAULT_MAX_BATCH: Final = 256
_DIGEST_DOMAIN: Final = b"twinaudit/state-dict/v1\x00"


def _u64(value: int) -> bytes:
    return value.to_bytes(8, "little")


def state_dict_digest(module: torch.nn.Module) -> str:
    """Return the hex SHA-256 of ``module``'s state dict (see the module docstring)."""
    if sys.byteorder != "little":  # pragma: no cover - no big-endian platform is supported
        raise ParameterError("model digests are defined on little-endian hosts only")
    state = module.state_dict()
    hasher = hashlib.sha256(_DIGEST_DOMAIN)
    for name in sorted(state, key=lambda key: key.encode("utf-8")):
        tensor = state[name].detach().to("cpu").contiguous()
        raw_name, dtype = name.encode("utf-8"), str(tensor.dtype).encode("ascii")
        data = tensor.reshape(-1).view(torch.uint8).numpy().tobytes() if tensor.numel() else b""
        hasher.update(_u64(len(raw_name)) + raw_name + _u64(len(dtype)) + dtype)
        hasher.update(_u64(tensor.dim()) + b"".join(_u64(int(d)) for d in tensor.shape))
        hasher.update(_u64(len(data)) + data)
    return hasher.hexdigest()


class TorchClassifierOracle(ClassifierOracle):
    """Serve a ``torch.nn.Module`` classifier as a :class:`ClassifierOracle`.

    ``n_classes`` may be left out when ``probe_shape`` (H, W, C) is given: the model
    is then run once on a zero image to find it. ``mean``/``std`` (1 or 3 values
    each, ``std > 0``) normalise the inputs per channel. ``device`` is where the
    model runs (default the CPU). Calls are serialised by a lock, so one oracle may
    back a multi-threaded server.
    """

    def __init__(
        self,
        model: torch.nn.Module,
        *,
        n_classes: int | None = None,
        probe_shape: tuple[int, int, int] | None = None,
        model_name: str = "torch-model",
        mean: Sequence[float] | None = None,
        std: Sequence[float] | None = None,
        max_batch: int = DEFAULT_MAX_BATCH,
        label_only: bool = False,
        device: str = "cpu",
    ) -> None:
        """Wrap ``model`` (set to eval mode) and compute its digest."""
        if not isinstance(model, torch.nn.Module):
            raise ParameterError("the model must be a torch.nn.Module")
        self._input = ImageInput(mean, std)
        check_max_batch(max_batch)
        try:
            self._device = torch.device(device)
            self._model = model.to(self._device)
        except (RuntimeError, AssertionError) as exc:
            raise ParameterError(f"cannot run the model on device {device!r}: {exc}") from None
        # torch.export modules refuse eval(); they keep the mode they were exported in.
        with contextlib.suppress(NotImplementedError):
            self._model.eval()
        self._lock = threading.Lock()
        self._max_batch = max_batch
        self._label_only = bool(label_only)
        if n_classes is None:
            if probe_shape is None:
                raise ParameterError("give n_classes or a probe_shape (H, W, C) to find it")
            n_classes = self._probe(probe_shape)
        try:
            self._info = OracleInfo(
                model_name=model_name,
                model_digest=state_dict_digest(self._model),
                capabilities=("classify",),
                classify_output="label" if self._label_only else "probabilities",
                n_classes=n_classes,
                max_batch=max_batch,
            )
        except OracleError as exc:
            raise ParameterError(f"invalid oracle description: {exc}") from None

    @property
    def info(self) -> OracleInfo:
        """Return the oracle's self-description."""
        return self._info

    def _probe(self, shape: tuple[int, int, int]) -> int:
        if len(shape) != 3 or not all(isinstance(s, int) and s >= 1 for s in shape):
            raise ParameterError(f"probe shape must be (H, W, C), got {shape!r}")
        logits = self._forward(np.zeros((1, *shape), dtype=np.float32))
        return int(logits.shape[1])

    def _forward(self, images: F32Images) -> torch.Tensor:
        out = run_model(self._model, self._input.tensor(images).to(self._device), "a batch")
        if isinstance(out, torch.Tensor):
            out = out.to("cpu")
        if not isinstance(out, torch.Tensor) or out.dim() != 2 or out.shape[0] != images.shape[0]:
            shape = tuple(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__
            raise OracleError("invalid-answer", f"the model returned {shape}, not (N, classes)")
        if not out.is_floating_point() or not bool(torch.all(torch.isfinite(out))):
            raise OracleError("invalid-answer", "the model returned non-finite logits")
        return out

    def classify(self, images: F32Images) -> ClassifyAnswer:
        """Classify float32 (N, H, W, C) images in [0, 1] (see the class docstring)."""
        images = check_images(images)
        n_classes = self._info.n_classes
        parts: list[ClassifyAnswer] = []
        with self._lock:
            for start in range(0, images.shape[0], self._max_batch):
                logits = self._forward(images[start : start + self._max_batch])
                if logits.shape[1] != n_classes:
                    raise OracleError(
                        "invalid-answer",
                        f"the model returned {logits.shape[1]} classes, announced {n_classes}",
                    )
                if self._label_only:
                    labels = torch.argmax(logits, dim=1).to(torch.int64).numpy()
                    parts.append(ClassifyAnswer(labels=labels.astype(np.int64)))
                else:
                    probs = torch.softmax(logits.to(torch.float64), dim=1).numpy()
                    parts.append(ClassifyAnswer(probabilities=probs.astype(np.float64)))
        return ClassifyAnswer.concatenate(parts).validate(images.shape[0], n_classes)
