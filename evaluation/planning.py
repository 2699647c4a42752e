"""How long ``--plan`` says the models left to train will take, from models trained here.

A model's training time depends on its network, data and epochs and on the machine, so
the estimate for a model left to train is the median training time of the models of the
same kind (trainer, training-set size, epochs, recipe, attack) already trained on the
same kind of device in the work directory; a model with none is of unknown time.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from .records import trained_on
from .specs import ModelSpec

__all__ = ["TrainingEstimate", "TrainingTimes"]

_Kind = tuple[str, int, int, str, str]


def _kind(spec: Mapping[str, object]) -> _Kind:
    return (
        str(spec.get("trainer", "demo")),
        int(str(spec["n_train"])),
        int(str(spec["epochs"])),
        str(spec.get("recipe", "")),
        str(spec.get("attack", "")),
    )


def _device_kind(device: str) -> str:
    """``cpu`` or ``cuda``: ``cuda (NVIDIA H100 …)`` and ``cuda:1`` are one kind."""
    return device.split(maxsplit=1)[0].split(":", maxsplit=1)[0]


@dataclass(frozen=True)
class TrainingEstimate:
    """Seconds of training for the models with a measured kind, and how many had none."""

    seconds: float
    measured: int
    unknown: int

    def describe(self, jobs: int, device: str) -> str:
        """Say it for ``--plan``: hours at ``jobs`` at a time, and what it rests on."""
        if self.measured == 0:
            return f"time unknown: no model of their kind trained on {device} here"
        hours = self.seconds / max(1, jobs) / 3600
        told = f"~{hours:.1f} h on {device}, from models of their kind trained here"
        return told + (f"; {self.unknown} of unknown time" if self.unknown else "")


def measured_seconds(summaries: Iterable[Mapping[str, object]], device: str) -> dict[_Kind, float]:
    """Return the median training seconds per kind of model among ``summaries`` on ``device``."""
    seconds: dict[_Kind, list[float]] = {}
    for summary in summaries:
        spec = summary.get("spec")
        if not isinstance(spec, Mapping) or "train_seconds" not in summary:
            continue
        if _device_kind(trained_on(summary)) != _device_kind(device):
            continue
        seconds.setdefault(_kind(spec), []).append(float(str(summary["train_seconds"])))
    return {kind: statistics.median(values) for kind, values in seconds.items()}


def _summaries(models: Path) -> Iterable[Mapping[str, object]]:
    for path in sorted(models.glob("*/model.json")):
        try:
            summary = json.loads(path.read_text())
        except (OSError, ValueError):
            continue  # a summary being written, or not one: it measures nothing
        if isinstance(summary, Mapping):
            yield summary


@dataclass(frozen=True)
class TrainingTimes:
    """The median training seconds per kind of model trained on ``device``'s kind here."""

    device: str
    seconds: Mapping[_Kind, float]

    @classmethod
    def measure(cls, models: Path, device: str) -> TrainingTimes:
        """Read the summaries in ``models``' folders (once, for every plan of a command)."""
        return cls(device, measured_seconds(_summaries(models), device))

    def estimate(self, missing: Sequence[ModelSpec]) -> TrainingEstimate:
        """Estimate the training of ``missing`` from the models of their kind."""
        times = [self.seconds.get(_kind(vars(m))) for m in missing]
        return TrainingEstimate(
            seconds=sum(t for t in times if t is not None),
            measured=sum(t is not None for t in times),
            unknown=sum(t is None for t in times),
        )

    def said(self, missing: Sequence[ModelSpec], jobs: int) -> str:
        """Return `` (the estimate, in words)`` for ``--plan``, or "" with nothing to train."""
        return f" ({self.estimate(missing).describe(jobs, self.device)})" if missing else ""
