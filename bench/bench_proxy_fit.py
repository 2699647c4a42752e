"""What the proxy of the owner's own items costs, trained until it fits them or every step.

Run with ``python -m bench proxy_fit``. ``owner mark --labels`` (and without labels, on
the images' clusters) trains a proxy CNN on the very items it marks. Before issue #39
part 3 it trained a fixed 3,160 optimiser steps whatever the number of images; it now
stops at the first epoch where :class:`twinaudit.owner.marking.proxy.FitCheck` says it fits them
(``--no-proxy-converge`` trains every step). For each collection, both ways, in one
run: the steps trained, the CPU seconds of the training (one torch thread, as
``owner mark`` trains), their ratio, and the accuracy on the items themselves without
augmentation:

- rung (a)'s owner: 200 Fashion-MNIST training images at 28 px, their labels;
- 64 colour photos at 32 px, ten labels: crops of the scikit-image and scikit-learn
  sample photos (the sizes the issue's "7 CPU-minutes for 64 colour photos" had);
- 1,000 Fashion-MNIST training images at 28 px (eight batches an epoch).

Fashion-MNIST is read from ``--data`` (default ``/usr/share/datasets/fashion-mnist``,
what ``scripts/ci-data.sh`` installs).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Final

import numpy as np
import numpy.typing as npt
import torch

from twinaudit.owner.marking.proxy import (
    BATCH,
    OWN_STEPS,
    FitCheck,
    own_proxy_epochs,
    square_images,
    to_tensor,
    train_own_proxy,
)

Pixels = npt.NDArray[np.uint8]

DATA: Final = Path("/usr/share/datasets/fashion-mnist")
#: Side of a photo crop before it is squared to the proxy's 32 px.
CROP: Final = 192


def fashion(folder: Path, n: int) -> tuple[Pixels, npt.NDArray[np.int64]]:
    """Return ``n`` Fashion-MNIST training images (N, 28, 28, 1) and labels, seeded."""
    from demo.data import load  # noqa: PLC0415 - the demo's reader

    data = load(folder)
    index = np.random.default_rng(0).permutation(len(data.train_images))[:n]
    return data.train_images[index][..., None], data.train_labels[index].astype(np.int64)


def photo_crops(n: int = 64, classes: int = 10) -> tuple[Pixels, npt.NDArray[np.int64]]:
    """Return ``n`` colour crops of the sample photos at 32 px and ``classes`` labels."""
    import skimage.data  # noqa: PLC0415 - the ml extra
    from sklearn.datasets import load_sample_images  # noqa: PLC0415 - dev only

    photos = [np.asarray(skimage.data.astronaut()), np.asarray(skimage.data.coffee())]
    photos += [np.asarray(skimage.data.chelsea()), np.asarray(skimage.data.rocket())]
    photos += [np.asarray(image) for image in load_sample_images().images]
    rng = np.random.default_rng(0)
    crops = []
    for k in range(n):
        photo = photos[k % len(photos)]
        top = int(rng.integers(0, photo.shape[0] - CROP))
        left = int(rng.integers(0, photo.shape[1] - CROP))
        crops.append(photo[top : top + CROP, left : left + CROP, :3])
    squares = square_images(np.ascontiguousarray(np.stack(crops)), 32)
    return squares, (np.arange(n) % classes).astype(np.int64)


def accuracy(model: torch.nn.Module, images: Pixels, labels: npt.NDArray[np.int64]) -> float:
    """Return ``model``'s accuracy on ``images`` as they are (no augmentation)."""
    with torch.no_grad():
        predicted = model(to_tensor(images)).argmax(1).numpy()
    return float((predicted == labels).mean())


def run(name: str, images: Pixels, labels: npt.NDArray[np.int64]) -> None:
    """Train both ways on one collection and print a line each and their ratio."""
    per_epoch = -(-len(images) // BATCH)
    cap = own_proxy_epochs(len(images)) * per_epoch
    seconds: dict[bool, float] = {}
    for converge in (False, True):
        check = FitCheck(len(images))
        start = time.process_time()
        model = train_own_proxy(images, labels, converge=converge, check=check)
        seconds[converge] = time.process_time() - start
        steps = cap if check.stopped_step is None else check.stopped_step
        how = "until it fits" if converge else "every step   "
        print(
            f"  {name:<34} {how}  {steps:5d} of {cap} steps  {seconds[converge]:7.1f} CPU s  "
            f"accuracy {accuracy(model, images, labels):.4f}",
            flush=True,
        )
    print(f"  {name:<34} ratio of CPU time  {seconds[True] / seconds[False]:.2f}", flush=True)


def main(argv: list[str] | None = None) -> int:
    """Print the cost of the proxy both ways for each collection."""
    parser = argparse.ArgumentParser(prog="python -m bench.bench_proxy_fit", description=__doc__)
    parser.add_argument("--data", type=Path, default=DATA, help="Fashion-MNIST folder")
    args = parser.parse_args(argv if argv is not None else [])
    print(f"the proxy of the owner's own items; schedule {OWN_STEPS} steps; one torch thread")
    images, labels = fashion(args.data, 200)
    run("200 Fashion-MNIST items, 28 px", images, labels)
    images, labels = photo_crops()
    run("64 colour photos, 32 px", images, labels)
    images, labels = fashion(args.data, 1000)
    run("1,000 Fashion-MNIST items, 28 px", images, labels)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
