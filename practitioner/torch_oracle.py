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

from twinaudit.protocol.errors import ModelMismatchError, OracleError, ParameterError
from twinaudit.protocol.oracles.base import (
    MAX_CLASSES,
    ClassifierOracle,
    ClassifyAnswer,
    F32Images,
    OracleInfo,
    check_images,
)

from .formats import LoadedModel
from .torch_images import (
    ImageInput,
    check_max_batch,
    probe,
    run_fixed,
    weight_dtypes,
)

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

    ``model`` is a module, or a :class:`~twinaudit.practitioner.formats.LoadedModel` (a
    module loaded from a file, with its format, framework, digest and what the file
    declares: its input shape and a fixed batch size, which the oracle then honours).

    With a ``probe_shape`` (H, W, C), or an input shape the file declares, the model
    is run once at start on zero images (:func:`~twinaudit.practitioner.torch_images.probe`):
    it must answer (N, classes) finite floats for one image and for two (unless its
    batch is fixed or ``max_batch`` is 1), and ``n_classes``, when given, must be the
    number of classes it answers; otherwise that number becomes ``n_classes``. A
    model that does not fit raises a
    :class:`~twinaudit.protocol.errors.ModelMismatchError`. Without a shape,
    ``n_classes`` is required and nothing is probed.

    ``mean``/``std`` (1 or 3 values each, ``std > 0``) normalise the inputs per
    channel. ``device`` is where the model runs (default the CPU). Calls are
    serialised by a lock, so one oracle may back a multi-threaded server. The
    description reports the input shape probed, and, for a loaded model, its framework
    and format.
    """

    def __init__(
        self,
        model: torch.nn.Module | LoadedModel,
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
        """Wrap ``model`` (set to eval mode), probe it if a shape is known, describe it."""
        loaded = model if isinstance(model, LoadedModel) else None
        module = model.module if isinstance(model, LoadedModel) else model
        if not isinstance(module, torch.nn.Module):
            raise ParameterError("the model must be a torch.nn.Module")
        self._input = ImageInput(mean, std)
        check_max_batch(max_batch)
        try:
            self._device = torch.device(device)
            self._model = module.to(self._device)
        except (RuntimeError, AssertionError) as exc:
            raise ParameterError(f"cannot run the model on device {device!r}: {exc}") from None
        # torch.export modules refuse eval(); they keep the mode they were exported in.
        with contextlib.suppress(NotImplementedError):
            self._model.eval()
        self._lock = threading.Lock()
        self._fixed_batch = loaded.fixed_batch if loaded is not None else None
        self._max_batch = min(max_batch, self._fixed_batch or max_batch)
        self._label_only = bool(label_only)
        shape = input_shape_of(loaded, probe_shape)
        if shape is not None:
            n_classes = self._probe(shape, n_classes, max_batch)
        elif n_classes is None:
            raise ParameterError("give n_classes or a probe_shape (H, W, C) to find it")
        try:
            self._info = OracleInfo(
                model_name=model_name,
                model_digest=loaded.digest
                if loaded is not None and loaded.digest is not None
                else state_dict_digest(self._model),
                capabilities=("classify",),
                classify_output="label" if self._label_only else "probabilities",
                n_classes=n_classes,
                max_batch=max_batch,
                framework=loaded.framework if loaded is not None else "",
                model_format=loaded.model_format if loaded is not None else "",
                input_shape=shape or (),
            )
        except OracleError as exc:
            raise ParameterError(f"invalid oracle description: {exc}") from None

    @property
    def info(self) -> OracleInfo:
        """Return the oracle's self-description."""
        return self._info

    def _probe(self, shape: tuple[int, int, int], n_classes: int | None, max_batch: int) -> int:
        """Probe the model on zero images of ``shape``; return its number of classes."""
        out = probe(
            self._raw,
            shape,
            fixed_batch=self._fixed_batch,
            max_batch=max_batch,
            what="classes",
            weights=weight_dtypes(self._model),
        )
        found = int(out.shape[1])
        if not 2 <= found <= MAX_CLASSES:
            raise ModelMismatchError(
                "class-count",
                f"the model returns {found} classes; a classifier has 2..{MAX_CLASSES}",
            )
        if n_classes is not None and found != n_classes:
            raise ModelMismatchError(
                "class-count", f"the model returns {found} classes, where {n_classes} were given"
            )
        return found

    def _raw(self, images: F32Images) -> object:
        """Run the model on a batch (padded to a fixed batch); return its output on the CPU."""
        x = self._input.tensor(images).to(self._device)
        out = run_fixed(self._model, x, self._fixed_batch, "a batch")
        return out.to("cpu") if isinstance(out, torch.Tensor) else out

    def _forward(self, images: F32Images) -> torch.Tensor:
        out = self._raw(images)
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


def input_shape_of(
    loaded: LoadedModel | None, given: tuple[int, int, int] | None
) -> tuple[int, int, int] | None:
    """Return the input shape to probe: the one given, or the one the file declares.

    Both present must agree, and a shape given for a file that leaves some dimensions
    dynamic must match those it fixes (``ModelMismatchError("input-shape")``). A given
    shape must be three positive integers (``ParameterError``).
    """
    if given is not None and (
        len(given) != 3 or not all(isinstance(s, int) and s >= 1 for s in given)
    ):
        raise ParameterError(f"probe shape must be (H, W, C), got {given!r}")
    if given is None or loaded is None:
        return given if given is not None else (loaded.input_shape if loaded else None)
    # (H, W, C) as the file declares them, None for a dynamic one (nothing declared: all None)
    dims = loaded.declared_input
    declared: tuple[int | None, ...] = (
        (dims[2], dims[3], dims[1]) if len(dims) == 4 else loaded.input_shape or (None,) * 3
    )
    if any(d is not None and d != g for d, g in zip(declared, given, strict=True)):
        shown = ",".join("?" if d is None else str(d) for d in declared)
        raise ModelMismatchError(
            "input-shape",
            f"the input shape given is {','.join(map(str, given))} (H,W,C) but the "
            f"{loaded.model_format} file declares {shown}",
        )
    return given
