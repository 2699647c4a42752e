"""A tiny CNN for 28×28×1 inputs and a deterministic CPU trainer.

For experiments that need a real classifier oracle in seconds: the benchmarks
(``bench/``) and the tests serve :class:`TinyCNN` (``oracle serve --arch
demo.tiny_cnn:TinyCNN``) and train it on :mod:`demo.synthetic` pairs.

:func:`train_classifier` is a pure function of its arguments (for a fixed number of
torch threads): weights are initialised and batches shuffled under a forked torch
RNG seeded with ``seed``, so nothing leaks into — or out of — the global RNGs the
rest of the process uses.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
import numpy.typing as npt
import torch
import torch.nn.functional as F  # noqa: N812 - the usual torch alias
from torch import nn

from .synthetic import N_CLASSES

__all__ = ["TinyCNN", "accuracy", "tiny_cnn_16", "train_classifier"]

_PAD = 4


class TinyCNN(nn.Module):
    """conv3×3(1→8)–ReLU–maxpool2, conv3×3(8→8)–ReLU–maxpool2, linear(392→classes); 4.6k weights."""

    def __init__(self, n_classes: int = N_CLASSES, width: int = 8) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(1, width, 3, padding=1)
        self.conv2 = nn.Conv2d(width, width, 3, padding=1)
        self.fc = nn.Linear(width * 7 * 7, n_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Return the logits (n, classes) of a float batch (n, 1, 28, 28)."""
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        logits: torch.Tensor = self.fc(x.flatten(1))
        return logits


def _pad_shift_flip(x: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    n, _, h, w = x.shape
    padded = F.pad(x, (_PAD, _PAD, _PAD, _PAD))
    offsets = torch.randint(0, 2 * _PAD + 1, (n, 2), generator=generator)
    flips = torch.randint(0, 2, (n, 1), generator=generator).bool()
    rows = offsets[:, :1] + torch.arange(h)
    forward = torch.arange(w).expand(n, w)
    cols = offsets[:, 1:] + torch.where(flips, w - 1 - forward, forward)
    batch = torch.arange(n)[:, None, None]
    # (n, h, w, C) by advanced indexing, back to (n, C, h, w).
    out = padded.permute(0, 2, 3, 1)[batch, rows[:, :, None], cols[:, None, :]]
    return out.permute(0, 3, 1, 2).contiguous()


def train_classifier(
    images: npt.NDArray[np.uint8],
    labels: npt.NDArray[np.integer],
    *,
    epochs: int = 60,
    seed: int = 0,
    augment: Literal["none", "pad-shift-flip"] = "none",
    lr: float = 3e-3,
    batch_size: int = 32,
    n_classes: int = N_CLASSES,
    width: int = 8,
) -> TinyCNN:
    """Train a :class:`TinyCNN` on uint8 NHWC images (CPU, Adam); return it in eval mode.

    ``augment="pad-shift-flip"`` applies the verifier's family of the same name
    (zero-pad 4, random 28×28 window, horizontal flip with probability 1/2) to
    every training batch.
    """
    if augment not in ("none", "pad-shift-flip"):
        raise ValueError(f"unknown augmentation {augment!r}")
    x = torch.tensor(images, dtype=torch.float32).permute(0, 3, 1, 2) / 255.0
    y = torch.tensor(np.asarray(labels), dtype=torch.int64)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = TinyCNN(n_classes, width)
    generator = torch.Generator().manual_seed(seed)
    optimiser = torch.optim.Adam(model.parameters(), lr=lr)
    model.train()
    for _ in range(epochs):
        order = torch.randperm(x.shape[0], generator=generator)
        for start in range(0, x.shape[0], batch_size):
            index = order[start : start + batch_size]
            batch = x[index]
            if augment == "pad-shift-flip":
                batch = _pad_shift_flip(batch, generator)
            optimiser.zero_grad()
            F.cross_entropy(model(batch), y[index]).backward()  # type: ignore[no-untyped-call]
            optimiser.step()
    return model.eval()


def accuracy(
    model: nn.Module, images: npt.NDArray[np.uint8], labels: npt.NDArray[np.integer]
) -> float:
    """Return the top-1 accuracy of ``model`` on uint8 NHWC images."""
    x = torch.tensor(images, dtype=torch.float32).permute(0, 3, 1, 2) / 255.0
    with torch.inference_mode():
        predicted = model(x).argmax(dim=1).numpy()
    return float(np.mean(predicted == np.asarray(labels)))


def tiny_cnn_16() -> TinyCNN:
    """Architecture entry point for ``oracle serve --arch`` (a width-16 TinyCNN)."""
    return TinyCNN(width=16)
