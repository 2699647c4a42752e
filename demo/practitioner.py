"""A practitioner: train the demo CNN with crop/flip augmentation and save its state dict.

Training is deterministic for a fixed number of torch threads: weights are
initialised under ``torch.manual_seed(seed)`` and batches are shuffled and augmented
from a ``torch.Generator`` seeded with ``seed``. The augmentation (the *recipe*) is one
of :data:`RECIPES`:

- ``pad-crop-flip`` (the default): "pad 4, random 28×28 crop, horizontal flip with
  probability ½", the CIFAR recipe of the paper's experiments, i.e. the
  ``pad-shift-flip`` family an audit should query with;
- ``random-resized-crop``: a random crop of 8–100% of the area with aspect ratio in
  [3/4, 4/3], resized back to 28×28 (bilinear), and the same flip, the ImageNet recipe;
- ``none``: the images as they are.

Run as ``python -m demo.practitioner --data train.npy --labels labels.npy --out model.pt``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import numpy.typing as npt
import torch
import torch.nn.functional as F  # noqa: N812 - the usual torch alias

from twinaudit.owner.marking import proxy
from twinaudit.owner.marking.proxy import pad_crop_flip, to_tensor

__all__ = ["RECIPES", "accuracy", "augmenter", "pad_crop_flip", "to_tensor", "train"]

from .models import DemoCNN, make_net

#: The training augmentations :func:`train` knows, by name.
RECIPES = ("none", "pad-crop-flip", "random-resized-crop")
#: Area fraction and aspect-ratio range of ``random-resized-crop`` (torchvision's defaults).
RRC_SCALE = (0.08, 1.0)
RRC_RATIO = (3 / 4, 4 / 3)


def random_resized_crop_flip(x: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """Return a batch (N, C, H, W) of random resized crops, each flipped with probability ½.

    Per image: area fraction ``s`` uniform in :data:`RRC_SCALE`, log aspect ratio
    uniform in log :data:`RRC_RATIO`; the crop's sides (as fractions of the image's)
    are ``sqrt(s·r)`` and ``sqrt(s/r)`` clipped to 1, its position uniform among those
    inside the image; it is resampled to H×W bilinearly (``grid_sample``).
    """
    n = x.shape[0]
    draw = torch.rand((4, n), generator=generator, dtype=x.dtype)
    scale = RRC_SCALE[0] + (RRC_SCALE[1] - RRC_SCALE[0]) * draw[0]
    low, high = torch.log(torch.tensor(RRC_RATIO, dtype=x.dtype))
    ratio = torch.exp(low + (high - low) * draw[1])
    width = torch.sqrt(scale * ratio).clamp(max=1.0)
    height = torch.sqrt(scale / ratio).clamp(max=1.0)
    # Centres in normalised coordinates [-1, 1] so that the crop stays inside.
    cx = (1.0 - width) * (2.0 * draw[2] - 1.0)
    cy = (1.0 - height) * (2.0 * draw[3] - 1.0)
    flips = torch.randint(0, 2, (n,), generator=generator).to(x.dtype) * -2.0 + 1.0
    theta = torch.zeros((n, 2, 3), dtype=x.dtype)
    theta[:, 0, 0], theta[:, 0, 2] = width * flips, cx
    theta[:, 1, 1], theta[:, 1, 2] = height, cy
    grid = F.affine_grid(theta, list(x.shape), align_corners=False)
    return F.grid_sample(x, grid, mode="bilinear", padding_mode="border", align_corners=False)


def augmenter(recipe: str) -> Callable[[torch.Tensor, torch.Generator], torch.Tensor] | None:
    """Return the batch augmentation of ``recipe`` (None for ``none``); raise ValueError."""
    if recipe not in RECIPES:
        raise ValueError(f"unknown training recipe {recipe!r}; known: {', '.join(RECIPES)}")
    return {"none": None, "pad-crop-flip": pad_crop_flip}.get(recipe, random_resized_crop_flip)


def train(
    images: npt.NDArray[np.uint8],
    labels: npt.NDArray[np.integer],
    *,
    epochs: int,
    seed: int = 0,
    batch_size: int = 128,
    lr: float = 1e-3,
    recipe: str = "pad-crop-flip",
    cosine: bool = True,
    make: Callable[[], DemoCNN] = make_net,
    progress: Callable[[int, float, float], None] | None = None,
    device: str = "cpu",
) -> DemoCNN:
    """Train a fresh network with Adam on uint8 images; return it on the CPU in eval mode.

    With ``cosine`` the learning rate decays from ``lr`` to 0 along a cosine over all
    steps (the late, small steps are where the network memorises its training items).

    ``progress(epoch, loss, train_accuracy)`` is called after every epoch (the accuracy
    is measured on the augmented batches seen in that epoch).

    ``device`` (a torch device name such as ``"cuda"``) is where the network's steps
    run. Shuffling and augmentation stay on the CPU, drawn from the same generator, so
    a device changes the arithmetic of the steps, not the batches the network sees.
    """
    torch.manual_seed(seed)
    model = make().to(device)
    optimiser = torch.optim.Adam(model.parameters(), lr=lr)
    steps = epochs * ((len(images) + batch_size - 1) // batch_size)
    schedule = torch.optim.lr_scheduler.CosineAnnealingLR(optimiser, steps) if cosine else None
    proxy.fit(
        model,
        images,
        labels,
        optimiser=optimiser,
        schedule=schedule,
        epochs=epochs,
        seed=seed,
        batch_size=batch_size,
        augment=augmenter(recipe),
        progress=progress,
        device=device,
    )
    return model.to("cpu").eval()


def accuracy(
    model: torch.nn.Module,
    images: npt.NDArray[np.uint8],
    labels: npt.NDArray[np.integer],
    *,
    device: str = "cpu",
    batch: int = 1024,
) -> float:
    """Return the top-1 accuracy of ``model`` on uint8 images (no augmentation).

    On the CPU the images go through in one batch; on an accelerator ``device`` in
    batches of ``batch`` (the model is moved there and back to the CPU).
    """
    if device == "cpu":
        with torch.inference_mode():
            predicted = model(to_tensor(images)).argmax(1).numpy()
        return float(np.mean(predicted == np.asarray(labels)))
    model.to(device)
    parts = []
    try:
        with torch.inference_mode():
            for start in range(0, len(images), batch):
                x = to_tensor(images[start : start + batch]).to(device)
                parts.append(model(x).argmax(1).cpu().numpy())
    finally:
        model.to("cpu")
    return float(np.mean(np.concatenate(parts) == np.asarray(labels)))


def main(argv: list[str] | None = None) -> int:
    """Train on ``--images``/``--labels`` (.npy); write ``--out`` and a JSON summary."""
    parser = argparse.ArgumentParser(prog="python -m demo.practitioner", description=__doc__)
    parser.add_argument("--images", type=Path, required=True, help="uint8 (N, 28, 28) .npy")
    parser.add_argument("--labels", type=Path, required=True, help="integer (N,) .npy")
    parser.add_argument("--out", type=Path, required=True, help="state dict to write (.pt)")
    parser.add_argument("--epochs", type=int, required=True)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--threads", type=int, default=2, help="torch CPU threads")
    parser.add_argument(
        "--recipe", choices=RECIPES, default="pad-crop-flip", help="training augmentation"
    )
    parser.add_argument("--test-images", type=Path, help="held-out images for the accuracy")
    parser.add_argument("--test-labels", type=Path)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    images, labels = np.load(args.images), np.load(args.labels)
    began = time.monotonic()
    every = max(1, args.epochs // 20)

    def show(epoch: int, loss: float, acc: float) -> None:
        if epoch % every == 0 or epoch in (1, args.epochs):
            elapsed = time.monotonic() - began
            print(
                f"epoch {epoch:4d}/{args.epochs}  loss {loss:.4f}  augmented-batch accuracy "
                f"{acc:.3f}  {elapsed:5.0f} s",
                file=sys.stderr,
                flush=True,
            )

    model = train(
        images,
        labels,
        epochs=args.epochs,
        seed=args.seed,
        batch_size=args.batch_size,
        lr=args.lr,
        recipe=args.recipe,
        progress=show,
    )
    seconds = time.monotonic() - began
    args.out.parent.mkdir(parents=True, exist_ok=True)
    torch.save(model.state_dict(), args.out)
    info: dict[str, object] = {
        "images": len(images),
        "epochs": args.epochs,
        "recipe": args.recipe,
        "train_accuracy": round(accuracy(model, images, labels), 4),
        "train_seconds": round(seconds, 1),
        "weights": sum(p.numel() for p in model.parameters()),
    }
    if args.test_images is not None and args.test_labels is not None:
        test_images, test_labels = np.load(args.test_images), np.load(args.test_labels)
        info["test_accuracy"] = round(accuracy(model, test_images, test_labels), 4)
    args.out.with_name("model.json").write_text(json.dumps(info, indent=2))
    print(json.dumps(info), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
