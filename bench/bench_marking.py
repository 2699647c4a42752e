"""Marking benchmark: PGD throughput at the defaults against raw forward+backward passes.

Run with ``python -m bench marking`` (or ``python -m bench.bench_marking``). On the
first 512 Fashion-MNIST training images (synthetic images, with a note, when the
Debian dataset file is absent) it marks with the default :class:`MarkingConfig`
(pgd on EfficientNet-Lite0, CPU, 2 threads), and times the same number of
forward+backward passes of the same extractor on the same batches without the
marking bookkeeping (random start, projection, rounding, clamping). The two are timed
in the order mark, raw, raw, mark and the best of each is compared; the target
overhead is at most 1.2x. It then reports the mean feature distance
‖h(x⁰) − h(x¹)‖₂ (same extractor, same input size) of the PGD twins and of the
Gaussian and Bernoulli marks at the same ε.

``python -m bench.bench_marking --sweep [N]`` measures the settings table of
:class:`MarkingConfig`'s docstring instead (several minutes): images/s and mean
feature distance for pgd at several step counts and input sizes, and for the noise
marks, on the first N images (default 256).
"""

from __future__ import annotations

import argparse
import functools
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import numpy as np
import numpy.typing as npt
import torch

from owner.images.sources import open_source
from owner.marking import MarkingConfig, feature_distances, load_extractor, make_marker
from owner.marking.extractors import Extractor, to_unit_tensor
from owner.marking.markers import Marker, PgdMarker

FASHION_MNIST = Path("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz")
N_IMAGES = 512
THREADS = 2
SEED = bytes(range(32))
TARGET_OVERHEAD = 1.2
DEMO_IMAGES = 1000
REFERENCE_SIZE = 224  # EfficientNet-Lite0's native resolution
REFERENCE_PAIRS = 64

Pixels = npt.NDArray[np.uint8]
T = TypeVar("T")


def load_images(n: int) -> tuple[Pixels, str]:
    """Return the first ``n`` Fashion-MNIST training images (N, 28, 28, 1) and their origin."""
    if not FASHION_MNIST.is_file():
        rng = np.random.default_rng(0)
        pixels = rng.integers(0, 256, size=(n, 28, 28, 1), dtype=np.uint8)
        return pixels, f"NOTE: {FASHION_MNIST} absent; {n} synthetic 28x28 noise images"
    batch = next(iter(open_source(FASHION_MNIST).batches(n)))
    pixels = batch.pixels[:n].copy()
    return pixels, f"{len(pixels)} Fashion-MNIST training images ({FASHION_MNIST.name})"


def mark_all(marker: Marker, pixels: Pixels, batch_size: int) -> tuple[Pixels, Pixels]:
    """Mark ``pixels`` batch by batch, as the owner's marking run calls the marker."""
    parts = [marker.mark(pixels[i : i + batch_size], i) for i in range(0, len(pixels), batch_size)]
    return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])


def raw_passes(extractor: Extractor, pixels: Pixels, batch_size: int, steps: int) -> None:
    """Run PGD's forward+backward passes (2B twins, ``steps`` per batch) with nothing else."""
    for i in range(0, len(pixels), batch_size):
        x = to_unit_tensor(pixels[i : i + batch_size], extractor.device)
        twins = torch.cat([x, x])
        for _ in range(steps):
            inputs = twins.detach().requires_grad_(True)
            torch.autograd.grad(extractor.features(inputs).sum(), inputs)


def timed(fn: Callable[[], T]) -> tuple[float, T]:
    """Return (wall seconds, result) of ``fn()``."""
    start = time.perf_counter()
    result = fn()
    return time.perf_counter() - start, result


def main() -> None:
    torch.set_num_threads(THREADS)
    pixels, origin = load_images(N_IMAGES)
    cfg = MarkingConfig()
    marker = make_marker(cfg, SEED, device="cpu")
    assert isinstance(marker, PgdMarker)
    extractor = marker.extractor
    bs = cfg.batch_size
    print(f"{origin}; torch {torch.__version__}, {THREADS} threads, CPU")
    print(
        f"defaults: marker={cfg.marker} extractor={cfg.extractor} epsilon={cfg.epsilon} "
        f"steps={cfg.steps} step_size={cfg.step_size} batch_size={bs} input_size={cfg.input_size}"
    )
    mark_all(marker, pixels[:bs], bs)  # warm-up (allocator, oneDNN kernels)
    raw_passes(extractor, pixels[:bs], bs, cfg.steps)

    versions: list[tuple[Pixels, Pixels]] = []
    mark_s: list[float] = []
    raw_s: list[float] = []
    for kind in ("mark", "raw", "raw", "mark"):
        if kind == "mark":
            seconds, marked = timed(lambda: mark_all(marker, pixels, bs))
            mark_s.append(seconds)
            versions.append(marked)
        else:
            raw_s.append(timed(lambda: raw_passes(extractor, pixels, bs, cfg.steps))[0])
    n = len(pixels)
    passes = n * 2 * cfg.steps
    best_mark, best_raw = min(mark_s), min(raw_s)
    print(
        f"marking: {n / best_mark:7.1f} images/s (best of {len(mark_s)}: "
        f"{', '.join(f'{t:.1f}' for t in mark_s)} s)"
    )
    print(
        f"raw forward+backward, same {passes} twin passes: {n / best_raw:7.1f} images/s "
        f"(best of {len(raw_s)}: {', '.join(f'{t:.1f}' for t in raw_s)} s)"
    )
    ratio = best_mark / best_raw
    print(f"overhead of marking over raw passes: {ratio:.3f}x (target <= {TARGET_OVERHEAD}x)")
    print(f"-> {DEMO_IMAGES} images at this rate: {DEMO_IMAGES * best_mark / n:.0f} s")
    same = all(np.array_equal(a, b) for a, b in zip(versions[0], versions[1], strict=True))
    print(f"the two marking runs gave identical bytes: {same}")

    distances = {"pgd": feature_distances(extractor, *versions[0]).mean()}
    for name in ("gaussian", "bernoulli"):
        noise = make_marker(MarkingConfig(marker=name, epsilon=cfg.epsilon), SEED)
        distances[name] = feature_distances(extractor, *mark_all(noise, pixels, bs)).mean()
    print(
        f"mean feature distance at epsilon={cfg.epsilon} ({cfg.extractor}, "
        f"{cfg.input_size}px): "
        + ", ".join(f"{k} {v:.2f}" for k, v in distances.items())
        + f"; pgd / bernoulli = {distances['pgd'] / distances['bernoulli']:.2f}x"
    )


def sweep(n: int) -> None:
    """Print images/s and mean feature distances for a grid of settings."""
    torch.set_num_threads(THREADS)
    pixels, origin = load_images(n)
    reference = load_extractor("efficientnet-lite0", input_size=REFERENCE_SIZE)
    print(f"{origin}; {THREADS} threads, CPU; epsilon=10, step_size=2.5*epsilon/steps")
    print(
        f"distance: mean ||h(x0)-h(x1)||_2 with EfficientNet-Lite0 at the crafting size (all "
        f"{n} pairs) and at {REFERENCE_SIZE}px (first {REFERENCE_PAIRS} pairs)"
    )
    print(f"{'setting':34s} {'images/s':>9s} {'distance':>9s} {'@' + str(REFERENCE_SIZE):>8s}")
    grid = {32: (1, 3, 5, 10), 64: (0, 1, 3, 5, 10), 96: (1, 3, 5), 128: (3,)}
    for size, step_counts in grid.items():
        extractor = load_extractor("efficientnet-lite0", input_size=size)
        rows: list[tuple[str, MarkingConfig]] = [
            (f"{name} (size {size})", MarkingConfig(marker=name, input_size=size))
            for name in ("bernoulli", "gaussian")
        ]
        for steps in step_counts:
            step_size = 2.5 * 10 / steps if steps else 1.0
            label = f"pgd steps={steps:<2d} a={step_size:4.1f} size {size}"
            rows.append((label, MarkingConfig(steps=steps, step_size=step_size, input_size=size)))
        for label, cfg in rows:
            marker = make_marker(cfg, SEED, device="cpu")
            seconds, (v0, v1) = timed(functools.partial(mark_all, marker, pixels, cfg.batch_size))
            near = feature_distances(extractor, v0, v1).mean()
            far = feature_distances(
                reference, v0[:REFERENCE_PAIRS], v1[:REFERENCE_PAIRS], batch_size=32
            ).mean()
            rate = f"{n / seconds:9.1f}" if cfg.marker == "pgd" else f"{'-':>9s}"
            print(f"{label:34s} {rate} {near:9.2f} {far:8.2f}", flush=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sweep", nargs="?", const=256, type=int, metavar="N")
    args = parser.parse_args()
    if args.sweep:
        sweep(args.sweep)
    else:
        main()
