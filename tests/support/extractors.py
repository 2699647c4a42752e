"""A tiny, seeded feature extractor for PGD marking in tests, and quick proxy configs."""

from __future__ import annotations

import torch
from torch import nn

from twinaudit.owner.marking import MarkingConfig
from twinaudit.owner.marking.config import pgd_defaults


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


def proxy_config(extractor: str, side: int = 8, **changes: object) -> MarkingConfig:
    """Return a quick PGD config on a proxy trained while marking (2 steps, batches of 8)."""
    pgd = pgd_defaults(extractor, 10)
    settings: dict[str, object] = {
        "extractor": extractor,
        "steps": 2,
        "step_size": float(pgd["step_size"]),
        "batch_size": 8,
        "input_size": side,
        **changes,
    }
    return MarkingConfig(**settings)  # type: ignore[arg-type]
