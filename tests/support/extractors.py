"""A tiny, seeded feature extractor for PGD marking in tests (``module:callable`` form)."""

from __future__ import annotations

import torch
from torch import nn


def tiny_extractor() -> nn.Module:
    """Return a fixed two-layer conv net (weights from a local seed, never the global RNG)."""
    generator = torch.Generator().manual_seed(1234)
    net = nn.Sequential(
        nn.Conv2d(3, 8, 3, stride=2, padding=1),
        nn.ReLU(),
        nn.Conv2d(8, 16, 3, stride=2, padding=1),
        nn.ReLU(),
        nn.AdaptiveAvgPool2d(2),
    )
    with torch.no_grad():
        for parameter in net.parameters():
            parameter.copy_(torch.randn(parameter.shape, generator=generator) * 0.3)
    return net
