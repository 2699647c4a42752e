"""Image input shared by the in-process torch oracles: layout, normalisation, checks.

Images arrive as float32 (N, H, W, C) in [0, 1]. :class:`ImageInput` moves them to
NCHW and, when given per-channel ``mean`` and ``std`` (1 or 3 finite values each,
``std > 0``), normalises them as ``(x − mean_c) / std_c``. :func:`run_model` runs a
module on such a batch under ``torch.inference_mode`` and turns the model's own
failures into typed errors; :func:`run_fixed` pads a batch to a model's fixed batch
size. :func:`probe` runs a model once on zero images of a given shape, at start, so
that a model that does not fit the oracle is refused with a
:class:`ModelMismatchError` before any query. Imports torch.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import torch

from twinaudit.protocol.errors import InputError, ModelMismatchError, ParameterError
from twinaudit.protocol.oracles.base import MAX_ORACLE_BATCH, F32Images


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
    """Run ``model(x)`` without gradients; a model that rejects the input is an InputError.

    A torch.export program's failed shape guard is an ``AssertionError``; it is a
    rejected input too. The message is the first line of the model's.
    """
    try:
        with torch.inference_mode():
            return model(x)
    except (RuntimeError, ValueError, TypeError, IndexError, AssertionError) as exc:
        reason = _reason(exc)
        raise InputError(f"the model rejected {what} of shape {tuple(x.shape)}: {reason}") from None


def _reason(exc: BaseException) -> str:
    """Return one line of a model's error: the first, or TorchScript's last (its cause)."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    if not lines:
        return type(exc).__name__
    if lines[0].startswith("The following operation failed in the TorchScript interpreter"):
        return lines[-1]
    return lines[0]


def run_fixed(
    model: Callable[[torch.Tensor], object], x: torch.Tensor, fixed_batch: int | None, what: str
) -> object:
    """Run ``model`` on ``x``; with a ``fixed_batch``, pad ``x`` with zero images to it.

    ``x`` has at most ``fixed_batch`` images; the answers to the padding are cut off
    (the output must then be a tensor with ``fixed_batch`` rows).
    """
    n = int(x.shape[0])
    if fixed_batch is None or n == fixed_batch:
        return run_model(model, x, what)
    if n > fixed_batch:
        raise InputError(f"{n} images for a model with a fixed batch of {fixed_batch}")
    padding = x.new_zeros((fixed_batch - n, *x.shape[1:]))
    out = run_model(model, torch.cat([x, padding]), what)
    if isinstance(out, torch.Tensor) and out.dim() >= 1 and out.shape[0] == fixed_batch:
        return out[:n]
    return out


def _output_shape(out: object) -> str:
    """Describe what a model returned: a tensor's shape, or the type of anything else."""
    if isinstance(out, torch.Tensor):
        return f"a tensor of shape {tuple(out.shape)}"
    if hasattr(out, "logits"):  # a transformers ModelOutput
        return (
            f"{type(out).__name__} (not a tensor; a Hugging Face model: serve the directory "
            "save_pretrained wrote with --hf)"
        )
    return f"{type(out).__name__} (not a tensor)"


def weight_dtypes(module: torch.nn.Module) -> list[str]:
    """Return the floating dtypes of a module's parameters and buffers other than float32."""
    tensors = [*module.parameters(), *module.buffers()]
    found = {str(t.dtype) for t in tensors if t.is_floating_point() and t.dtype != torch.float32}
    return sorted(found)


def probe(
    forward: Callable[[F32Images], object],
    shape: tuple[int, int, int],
    *,
    fixed_batch: int | None,
    max_batch: int,
    what: str,
    weights: Sequence[str] = (),
) -> torch.Tensor:
    """Run ``forward`` on zero images of ``shape`` (H, W, C); return its first output rows.

    The model must answer a float (N, K) tensor, K ≥ 1, finite, for N images: one
    image (padded to its ``fixed_batch``, if it has one), and, when the batch is not
    fixed and ``max_batch`` allows, two, so that a model that takes only one image at
    a time is found now.
    ``what`` names the rows (``"classes"``, ``"dimensions"``). Every defect is a
    :class:`ModelMismatchError`; returns the float64 (N, K) output for one image.
    ``weights`` lists the model's weight dtypes other than float32
    (:func:`weight_dtypes`): a refused probe is then reported as a ``dtype`` mismatch.
    """
    sizes = [1] if fixed_batch is not None or max_batch < 2 else [1, 2]
    result: torch.Tensor | None = None
    for n in sizes:
        images = np.zeros((n, *shape), dtype=np.float32)
        try:
            out = forward(images)
        except ModelMismatchError:
            raise
        except InputError as exc:
            if n > 1 and fixed_batch is None:
                raise ModelMismatchError(
                    "fixed-batch",
                    f"the model takes one image but not {n} ({exc}): serve it with "
                    "--max-batch 1, or export it with a dynamic batch",
                ) from None
            if weights:
                raise ModelMismatchError(
                    "dtype",
                    f"the model's weights are {', '.join(weights)}, its input float32 images "
                    f"({exc})",
                ) from None
            raise ModelMismatchError("input", f"a probe image of shape {shape}: {exc}") from None
        if isinstance(out, torch.Tensor):
            out = out.detach().to("cpu")
        if not isinstance(out, torch.Tensor) or out.dim() != 2 or out.shape[1] < 1:
            raise ModelMismatchError(
                "output-shape",
                f"the model returns {_output_shape(out)} for {n} image(s) of shape {shape}; "
                f"the oracle needs (N, {what})",
            )
        if out.shape[0] != n:
            mismatch = "fixed-batch" if n > 1 and out.shape[0] == 1 else "output-shape"
            raise ModelMismatchError(
                mismatch,
                f"the model returns {out.shape[0]} rows for {n} image(s) of shape {shape}",
            )
        if not out.is_floating_point():
            raise ModelMismatchError("dtype", f"the model returns {out.dtype}, not floating point")
        if not bool(torch.all(torch.isfinite(out))):
            raise ModelMismatchError("non-finite", "the model returns NaN or infinity on zeros")
        if result is None:
            result = out.to(torch.float64)
    assert result is not None
    return result
