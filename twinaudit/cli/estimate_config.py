"""The settings of ``twinaudit owner estimate`` (:mod:`twinaudit.cli.estimate`), without torch.

Kept apart so that building the command line (``twinaudit --help``) imports nothing
heavy: the estimate itself trains a network.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from twinaudit.protocol.errors import InputError

#: Share of the owner's pairs kept out of the proxy practitioner's training (the control).
CONTROL_SHARE: Final = 0.2
#: The owner's twins' share of the practitioner's training set (the paper's 10%).
SHARE: Final = 0.1
#: The practitioner's optimiser steps (the demo's: 500 epochs of 2,000 images, batches of 128).
STEPS: Final = 8000
#: The claim's test and false-detection bound the estimate plans for unless told.
TEST: Final = "mixture-e"
P: Final = 0.05


@dataclass(frozen=True)
class EstimateConfig:
    """How the estimate is made: the proxy practitioner's training and the claim scored."""

    #: The knowledge conditions scored: C1 and C3 (the oracles a claim meets most) unless told.
    conditions: tuple[str, ...] = ("C1", "C3")
    k: int | None = None
    perturbation: str | None = None
    statistic: str | None = None
    steps: int = STEPS
    share: float = SHARE
    seed: int = 0
    control_share: float = CONTROL_SHARE
    test: str = TEST
    p: float = P

    def __post_init__(self) -> None:
        """Reject settings no estimate can be made with."""
        if not self.conditions:
            raise InputError("name at least one knowledge condition to estimate")
        if self.steps < 1:
            raise InputError("--steps must be at least 1")
        if not 0.01 <= self.share <= 0.9:
            raise InputError("--share must lie in [0.01, 0.9]")
        if not 0.05 <= self.control_share <= 0.5:
            raise InputError("--control-share must lie in [0.05, 0.5]")
        if not 0.0 < self.p < 1.0:
            raise InputError("--false-detection must lie strictly between 0 and 1")
