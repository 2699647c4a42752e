"""How long rung (b)'s ResNet must train to fit its training set: one clean model, timed.

Issue #19 asks rung (b)'s practitioner to train to convergence (≥ 99% train
accuracy). This trains the clean model of rung (b)'s seed 0 (the ladder's split, the
shared 90% and other images in the owner's place) with the rung's recipe at the
epochs and weight decay given, one torch thread, and prints one JSON line: train
and test accuracy and seconds. Nothing is written to the work directory's models.

Run: ``python -m evaluation.convergence --epochs 120 --weight-decay 5e-4``.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch

from demo.data import locate
from demo.practitioner import accuracy

from .build import Workspace, describe_machine
from .specs import STANDARD_N_TRAIN, STANDARD_TRAINER, ModelSpec
from .standard import WEIGHT_DECAY, train_standard


def main(argv: list[str] | None = None) -> int:
    """Train one clean rung-(b) model with the settings given; print its accuracies."""
    parser = argparse.ArgumentParser(prog="python -m evaluation.convergence", description=__doc__)
    parser.add_argument("--epochs", type=int, required=True)
    parser.add_argument("--weight-decay", type=float, default=WEIGHT_DECAY)
    parser.add_argument("--work", type=Path, default=Path("runs/evaluation"))
    parser.add_argument("--data", type=Path, help="Fashion-MNIST folder (see python -m demo)")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    workspace = Workspace(args.work, locate(args.data))
    spec = ModelSpec(
        0,
        fraction=0.0,
        epsilon=10,
        n_train=STANDARD_N_TRAIN,
        epochs=args.epochs,
        trainer=STANDARD_TRAINER,
    )
    images, labels = workspace.training_set(spec)
    began = time.monotonic()
    model = train_standard(
        images, labels, epochs=args.epochs, seed=0, weight_decay=args.weight_decay
    )
    data = workspace.fashion_mnist()
    record = {
        "epochs": args.epochs,
        "weight_decay": args.weight_decay,
        "train_accuracy": round(accuracy(model, images, labels), 4),
        "test_accuracy": round(accuracy(model, data.test_images, data.test_labels), 4),
        "seconds": round(time.monotonic() - began, 1),
        "machine": describe_machine("cpu"),
    }
    print(json.dumps(record))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
