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

Then the schedule's length against the number of items (``--schedules`` alone; ``--fits``
alone the above), each trained until it fits or to its schedule's end, with the loss
of the check's last window and the accuracy on the items and on 2,000 Fashion-MNIST
test images:

- the 200 items on schedules of 400, 800 and 1,600 steps, shorter than the default's
  3,160: whether a small collection fits sooner on a shorter schedule;
- 20,000 Fashion-MNIST training images (157 batches an epoch) on whole epochs of 3,160
  steps (21 epochs; the default's length before it counted epochs) and on the default,
  :data:`~twinaudit.owner.marking.proxy.OWN_EPOCHS` epochs.

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
    OWN_EPOCHS,
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


def fashion_test(folder: Path, n: int) -> tuple[Pixels, npt.NDArray[np.int64]]:
    """Return the first ``n`` Fashion-MNIST test images (N, 28, 28, 1) and labels."""
    from demo.data import load  # noqa: PLC0415 - the demo's reader

    data = load(folder)
    return data.test_images[:n][..., None], data.test_labels[:n].astype(np.int64)


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


def schedule(
    name: str,
    images: Pixels,
    labels: npt.NDArray[np.int64],
    held_out: tuple[Pixels, npt.NDArray[np.int64]],
    steps: int | None,
) -> None:
    """Train until it fits on a schedule of ``steps`` (None: the default's) and print a line."""
    per_epoch = -(-len(images) // BATCH)
    epochs = own_proxy_epochs(len(images), steps)
    check = FitCheck(len(images))
    start = time.process_time()
    model = train_own_proxy(images, labels, steps=steps, check=check)
    seconds = time.process_time() - start
    trained = epochs * per_epoch if check.stopped_step is None else check.stopped_step
    fitted = "fits" if check.stopped_step is not None else "does not fit"
    window = sum(check.losses) / len(check.losses)
    print(
        f"  {name:<28} schedule {epochs * per_epoch:5d} steps ({epochs} epochs)  "
        f"{fitted:<12} trained {trained:5d}  {seconds:6.1f} CPU s  loss {window:.4f}  "
        f"accuracy on the items {accuracy(model, images, labels):.4f}, "
        f"held out {accuracy(model, *held_out):.4f}",
        flush=True,
    )


def main(argv: list[str] | None = None) -> int:
    """Print the cost of the proxy both ways for each collection, then the schedules."""
    parser = argparse.ArgumentParser(prog="python -m bench.bench_proxy_fit", description=__doc__)
    parser.add_argument("--data", type=Path, default=DATA, help="Fashion-MNIST folder")
    part = parser.add_mutually_exclusive_group()
    part.add_argument("--fits", action="store_true", help="only until it fits against every step")
    part.add_argument("--schedules", action="store_true", help="only the schedules' lengths")
    args = parser.parse_args(argv if argv is not None else [])
    print(
        f"the proxy of the owner's own items; schedule {OWN_STEPS} steps or {OWN_EPOCHS} "
        "epochs, whichever is more; one torch thread"
    )
    if not args.schedules:
        images, labels = fashion(args.data, 200)
        run("200 Fashion-MNIST items, 28 px", images, labels)
        images, labels = photo_crops()
        run("64 colour photos, 32 px", images, labels)
        images, labels = fashion(args.data, 1000)
        run("1,000 Fashion-MNIST items, 28 px", images, labels)
    if not args.fits:
        held_out = fashion_test(args.data, 2000)
        images, labels = fashion(args.data, 200)
        for steps in (400, 800, 1600):
            schedule("200 Fashion-MNIST items", images, labels, held_out, steps)
        images, labels = fashion(args.data, 20_000)
        schedule("20,000 Fashion-MNIST items", images, labels, held_out, OWN_STEPS)
        schedule("20,000 Fashion-MNIST items", images, labels, held_out, None)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
