"""Image input shared by the in-process torch oracles: layout, normalisation, checks.

Images arrive as float32 (N, H, W, C) in [0, 1]. :class:`ImageInput` moves them to
NCHW and, when given per-channel ``mean`` and ``std`` (1 or 3 finite values each,
``std > 0``), normalises them as ``(x − mean_c) / std_c``. :func:`run_model` runs a
module on such a batch under ``torch.inference_mode`` and turns the model's own
failures into typed errors. Imports torch.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import torch

from protocol.errors import InputError, ParameterError

from .base import MAX_ORACLE_BATCH, F32Images


def channel_vector(values: Sequence[float] | None, name: str) -> torch.Tensor | None:
    """Return 1 or 3 finite values as a (1, C, 1, 1) float32 tensor (None stays None)."""
    if values is None:
        return None
    array = np.asarray(values, dtype=np.float64)
    if array.ndim != 1 or array.size not in (1, 3) or not bool(np.all(np.isfinite(array))):
        raise ParameterError(f"{name} must be 1 or 3 finite numbers, got {values!r}")
    return torch.tensor(array, dtype=torch.float32).reshape(1, -1, 1, 1)


def check_max_batch(max_batch: object) -> int:
    """Return ``max_batch`` if it is an integer in ``1..MAX_ORACLE_BATCH``."""
    if (
        isinstance(max_batch, bool)
        or not isinstance(max_batch, int)
        or not (1 <= max_batch <= MAX_ORACLE_BATCH)
    ):
        raise ParameterError(f"max_batch must be in 1..{MAX_ORACLE_BATCH}, got {max_batch!r}")
    return max_batch


class ImageInput:
    """Convert (N, H, W, C) float32 batches to the NCHW tensors a model takes."""

    def __init__(self, mean: Sequence[float] | None, std: Sequence[float] | None) -> None:
        """Normalise with ``mean``/``std`` (both or neither)."""
        if (mean is None) != (std is None):
            raise ParameterError("give both mean and std, or neither")
        self.mean = channel_vector(mean, "mean")
        self.std = channel_vector(std, "std")
        if self.std is not None and not bool(torch.all(self.std > 0)):
            raise ParameterError("std must be positive")
        if self.mean is not None and self.std is not None and self.mean.shape != self.std.shape:
            raise ParameterError("mean and std must have the same length")

    def tensor(self, images: F32Images) -> torch.Tensor:
        """Return the batch as a contiguous, normalised NCHW float32 tensor."""
        x = torch.from_numpy(np.ascontiguousarray(images)).permute(0, 3, 1, 2)
        if self.mean is not None and self.std is not None:
            if self.mean.shape[1] not in (1, x.shape[1]):
                raise InputError(
                    f"normalisation has {self.mean.shape[1]} channels, images {x.shape[1]}"
                )
            x = (x - self.mean) / self.std
        return x.contiguous()


def run_model(model: Callable[[torch.Tensor], object], x: torch.Tensor, what: str) -> object:
    """Run ``model(x)`` without gradients; a model that rejects the input is an InputError."""
    try:
        with torch.inference_mode():
            return model(x)
    except (RuntimeError, ValueError, TypeError, IndexError) as exc:
        raise InputError(f"the model rejected {what} of shape {tuple(x.shape)}: {exc}") from None
