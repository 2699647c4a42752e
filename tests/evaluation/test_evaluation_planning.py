"""``--plan``'s training time: measured on models of the same kind and device, or unknown."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from evaluation.planning import TrainingTimes
from evaluation.specs import plan_converged_own, plan_scale_own


def _trained(models: Path, spec, seconds: float, device: str = "cpu") -> None:
    folder = models / spec.name
    folder.mkdir(parents=True)
    summary = {"spec": dataclasses.asdict(spec), "train_seconds": seconds, "device": device}
    (folder / "model.json").write_text(json.dumps(summary))


def test_models_left_are_timed_by_the_median_of_their_kind_on_the_same_device(tmp_path):
    models = tmp_path / "models"
    converged = plan_converged_own(range(5)).models  # seed 0's two models, then seed 1's …
    for spec, seconds in zip(converged[:3], (1100.0, 3300.0, 1300.0), strict=True):
        _trained(models, spec, seconds)
    _trained(models, converged[3], 60.0, device="cuda (Some GPU)")  # another machine
    (models / "half-written").mkdir()
    (models / "half-written" / "model.json").write_text("{")

    left = converged[4:]  # six models: the medians of three CPU trainings, 1300 s each
    cpu = TrainingTimes.measure(models, "cpu")
    estimate = cpu.estimate(left)
    assert (estimate.seconds, estimate.measured, estimate.unknown) == (6 * 1300.0, 6, 0)
    assert estimate.describe(2, "cpu") == "~1.1 h on cpu, from models of their kind trained here"
    on_gpu = TrainingTimes.measure(models, "cuda").estimate(left)
    assert (on_gpu.seconds, on_gpu.measured) == (6 * 60.0, 6)

    # ResNet-18 at 54,000 images is of another kind: nothing measured says how long.
    scale = plan_scale_own([0]).models
    unknown = cpu.estimate(scale)
    assert (unknown.measured, unknown.unknown) == (0, 2)
    assert unknown.describe(2, "cpu").startswith("time unknown: no model of their kind")
    both = cpu.estimate([*scale, *left])
    assert both.describe(2, "cpu").endswith("; 2 of unknown time")
    other_epochs = dataclasses.replace(left[0], epochs=80)
    assert cpu.estimate([other_epochs]).unknown == 1
    assert cpu.said([], 2) == "" and cpu.said(left, 2) == f" ({estimate.describe(2, 'cpu')})"
