"""Marking benchmark: PGD throughput at the defaults against raw forward+backward passes.

Run with ``python -m bench marking`` (or ``python -m bench.bench_marking``). On the
first 512 Fashion-MNIST training images (synthetic images, with a note, when the
Debian dataset file is absent) it marks with the default :class:`MarkingConfig`
(pgd on EfficientNet-Lite0, CPU, 2 threads), and times the same number of
forward+backward passes of the same extractor on the same batches without the
marking bookkeeping (random start, projection, rounding, clamping). Marking and raw
passes alternate batch by batch (two rounds), so both see the same CPU contention;
the bench prints the total ratio and the median per-batch ratio (target: at most
1.2x), the load average, and how many cores the process really got. It then reports
the mean feature distance ‖h(x⁰) − h(x¹)‖₂ (same extractor, same input size) of the
PGD twins and of the Gaussian and Bernoulli marks at the same ε.

``python -m bench.bench_marking --sweep [N]`` measures the settings table of
:class:`MarkingConfig`'s docstring instead (several minutes): images/s and mean
feature distance for pgd at several step counts and input sizes, and for the noise
marks, on the first N images (default 256).
"""

from __future__ import annotations

import argparse
import functools
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import numpy as np
import numpy.typing as npt
import torch

from twinaudit.owner.images.sources import open_source
from twinaudit.owner.marking import MarkingConfig, feature_distances, load_extractor, make_marker
from twinaudit.owner.marking.extractors import Extractor, to_unit_tensor
from twinaudit.owner.marking.markers import Marker, PgdMarker

FASHION_MNIST = Path("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz")
N_IMAGES = 512
ROUNDS = 2
THREADS = 2
SEED = bytes(range(32))
TARGET_OVERHEAD = 1.2
DEMO_IMAGES = 1000
REFERENCE_SIZE = 224  # EfficientNet-Lite0's native resolution
REFERENCE_PAIRS = 64
#: Sweep: input size -> (batch size, PGD step counts). Larger inputs run faster in
#: smaller batches on this CPU (measured: at 96px, batch 8 ~1.3x batch 16).
SWEEP_GRID = {
    32: (32, (1, 3, 5, 10)),
    64: (16, (0, 1, 3, 5, 10)),
    96: (8, (1, 3, 5)),
    128: (8, (2, 3)),
}

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


@dataclass
class Round:
    """One pass over the images: marking and raw times, per-batch ratios, the twins."""

    mark_seconds: float
    raw_seconds: float
    batch_ratios: npt.NDArray[np.float64]
    versions: tuple[Pixels, Pixels]


def interleaved_round(marker: PgdMarker, pixels: Pixels, *, first_raw: bool) -> Round:
    """Mark every batch and run its raw passes right before or after (alternating order).

    Interleaving at batch granularity exposes both to the same CPU contention.
    """
    cfg = marker.config
    bs = cfg.batch_size
    mark_t: list[float] = []
    raw_t: list[float] = []
    parts: list[tuple[Pixels, Pixels]] = []
    for i in range(0, len(pixels), bs):
        batch = pixels[i : i + bs]
        order = ("raw", "mark") if first_raw == (i // bs % 2 == 0) else ("mark", "raw")
        for kind in order:
            if kind == "mark":
                seconds, twins = timed(functools.partial(marker.mark, batch, i))
                mark_t.append(seconds)
                parts.append(twins)
            else:
                raw = functools.partial(raw_passes, marker.extractor, batch, bs, cfg.steps)
                raw_t.append(timed(raw)[0])
    ratios = np.asarray(mark_t) / np.asarray(raw_t)
    versions = np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])
    return Round(sum(mark_t), sum(raw_t), ratios, versions)


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

    n = len(pixels)
    load_before = os.getloadavg()[0]
    cpu_start, wall_start = time.process_time(), time.perf_counter()
    rounds = [interleaved_round(marker, pixels, first_raw=r % 2 == 1) for r in range(ROUNDS)]
    cpu_share = (time.process_time() - cpu_start) / (time.perf_counter() - wall_start)
    mark_s = sum(r.mark_seconds for r in rounds)
    raw_s = sum(r.raw_seconds for r in rounds)
    batch_ratios = np.concatenate([r.batch_ratios for r in rounds])
    print(
        f"timed {ROUNDS} rounds, mark and raw alternating batch by batch; load average "
        f"{load_before:.2f} before, {os.getloadavg()[0]:.2f} after; this process used "
        f"{cpu_share:.2f} of {THREADS} cores"
        + (" -- SHARED CPU, figures below are slowed" if cpu_share < 0.8 * THREADS else "")
    )
    print(
        f"marking: {ROUNDS * n / mark_s:7.1f} images/s "
        f"(per round: {', '.join(f'{r.mark_seconds:.1f}' for r in rounds)} s)"
    )
    print(
        f"raw forward+backward, same {n * 2 * cfg.steps} twin passes per round: "
        f"{ROUNDS * n / raw_s:7.1f} images/s "
        f"(per round: {', '.join(f'{r.raw_seconds:.1f}' for r in rounds)} s)"
    )
    print(
        f"overhead of marking over raw passes: {mark_s / raw_s:.3f}x in total, median per batch "
        f"{np.median(batch_ratios):.3f}x (target <= {TARGET_OVERHEAD}x)"
    )
    print(f"-> {DEMO_IMAGES} images at this rate: {DEMO_IMAGES * mark_s / (ROUNDS * n):.0f} s")
    same = all(
        np.array_equal(a, b) for a, b in zip(rounds[0].versions, rounds[1].versions, strict=True)
    )
    print(f"the marking rounds gave identical bytes: {same}")

    distances = {"pgd": feature_distances(extractor, *rounds[0].versions).mean()}
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
    print(
        f"{'setting':36s} {'images/s':>9s} {'cpu/wall':>8s} {'distance':>9s} "
        f"{'@' + str(REFERENCE_SIZE):>7s}"
    )
    for size, (batch_size, step_counts) in SWEEP_GRID.items():
        extractor = load_extractor("efficientnet-lite0", input_size=size)
        rows: list[tuple[str, MarkingConfig]] = [
            (f"{name} (size {size})", MarkingConfig(marker=name, input_size=size))
            for name in ("bernoulli", "gaussian")
        ]
        for steps in step_counts:
            step_size = 2.5 * 10 / steps if steps else 1.0
            label = f"pgd steps={steps:<2d} a={step_size:4.1f} size {size} bs {batch_size}"
            rows.append(
                (
                    label,
                    MarkingConfig(
                        steps=steps, step_size=step_size, input_size=size, batch_size=batch_size
                    ),
                )
            )
        if size == MarkingConfig().input_size:
            rows.append(("pgd defaults", MarkingConfig()))
        for label, cfg in rows:
            marker = make_marker(cfg, SEED, device="cpu")
            cpu = time.process_time()
            seconds, (v0, v1) = timed(functools.partial(mark_all, marker, pixels, cfg.batch_size))
            load = (time.process_time() - cpu) / seconds
            near = feature_distances(extractor, v0, v1).mean()
            far = feature_distances(
                reference, v0[:REFERENCE_PAIRS], v1[:REFERENCE_PAIRS], batch_size=32
            ).mean()
            rate = (
                f"{n / seconds:9.1f} {load:8.2f}" if cfg.marker == "pgd" else f"{'-':>9s} {'':8s}"
            )
            print(f"{label:36s} {rate} {near:9.2f} {far:7.2f}", flush=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sweep", nargs="?", const=256, type=int, metavar="N")
    args = parser.parse_args()
    if args.sweep:
        sweep(args.sweep)
    else:
        main()
