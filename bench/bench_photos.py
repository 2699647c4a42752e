"""Marking photos by megapixel: images/s at 0.3, 1 and 4 MP, cost ratios, memory, PNG output.

Run with ``python -m bench photos`` (``python -m bench.bench_photos --threads 1`` for
another thread count). Synthetic photo-like RGB images (a smooth colour field with soft
edges and sensor-like noise, generated here from a fixed seed; no file is read) at
640×480, 1152×864 and 2304×1728, marked with the default marker of ``owner mark``
without labels (PGD on EfficientNet-Lite0, :class:`MarkingConfig`'s defaults) in
batches of one size, as ``owner mark`` batches them. For each size it reports:

- images/s and CPU seconds per image of the default marker (``work_scale`` 2: PGD at a
  working resolution, the mark carried back to full size), and of the same marker at
  full resolution (``work_scale`` 0, the marker before the working resolution);
- the ratio of each to the raw extractor cost: the same number of forward and backward
  passes of the extractor on the same batches (2B twins, ``steps`` per batch), fed the
  photos at full size (the extractor's own resize included) and, stricter, fed at the
  extractor's input size (the network alone); target ≤ 1.2×;
- the mean feature distance ‖h(x⁰) − h(x¹)‖₂ of the twins at full size, both markers
  (the working resolution must not weaken the mark);
- the peak resident memory of marking one batch (``ru_maxrss`` of a child process);
- PNG output of one marked 4 MP image: bytes and seconds at several zlib levels.

Marking and raw passes alternate batch by batch so that both see the same CPU
contention; the load average and the cores the process got are printed.
"""

from __future__ import annotations

import argparse
import io
import multiprocessing
import os
import resource
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Final

import numpy as np
import numpy.typing as npt
import torch
from PIL import Image
from torch.nn import functional

from twinaudit.cli.threads import default_threads, use_threads
from twinaudit.owner.marking import MarkingConfig, feature_distances, make_marker
from twinaudit.owner.marking.extractors import Extractor
from twinaudit.owner.marking.markers import Marker, PgdMarker

Pixels = npt.NDArray[np.uint8]

#: (label, height, width, images) per size; the images form batches of one size.
SIZES: Final = (
    ("0.3 MP", 480, 640, 8),
    ("1 MP", 864, 1152, 8),
    ("4 MP", 1728, 2304, 4),
)
SEED: Final = bytes(range(32))
TARGET: Final = 1.2
PNG_LEVELS: Final = (1, 3, 6, 9)


def photos(count: int, height: int, width: int, seed: int = 0) -> Pixels:
    """Return ``count`` photo-like RGB images (count, height, width, 3), uint8.

    A smooth colour field (a bicubic upsampling of a coarse random grid), a few soft-edged
    shapes, and Gaussian noise of σ = 4 levels like a camera's.
    """
    rng = np.random.default_rng(seed)
    coarse = torch.from_numpy(rng.uniform(20, 235, size=(count, 3, 6, 8)).astype(np.float32))
    field = functional.interpolate(coarse, size=(height, width), mode="bicubic")
    ys, xs = np.mgrid[0:height, 0:width].astype(np.float32)
    out = field.permute(0, 2, 3, 1).numpy().copy()
    for k in range(count):
        for _ in range(4):
            cy, cx = rng.uniform(0, height), rng.uniform(0, width)
            radius = rng.uniform(0.05, 0.3) * min(height, width)
            inside = 0.5 - 0.5 * np.tanh((np.hypot(ys - cy, xs - cx) - radius) / 4.0)
            out[k] += inside[..., None] * rng.uniform(-80, 80, size=3).astype(np.float32)
    out += rng.normal(0.0, 4.0, size=out.shape).astype(np.float32)
    return np.clip(out, 0, 255).round().astype(np.uint8)


def raw_passes(extractor: Extractor, x: torch.Tensor, steps: int) -> None:
    """Run PGD's forward and backward passes on the twins of ``x`` with nothing else."""
    twins = torch.cat([x, x])
    for _ in range(steps):
        inputs = twins.detach().requires_grad_(True)
        torch.autograd.grad(extractor.features(inputs).sum(), inputs)


@dataclass
class Timing:
    """Wall and CPU seconds summed over the timed calls."""

    wall: float = 0.0
    cpu: float = 0.0

    def add(self, fn: Callable[[], object]) -> object:
        """Time ``fn()`` into this total; return its result."""
        cpu, wall = time.process_time(), time.perf_counter()
        result = fn()
        self.cpu += time.process_time() - cpu
        self.wall += time.perf_counter() - wall
        return result


def _peak_rss_mib(config: MarkingConfig, pixels: Pixels, threads: int) -> tuple[float, float]:
    """Return a fresh process's peak RSS (MiB) with the marker built, then after marking."""
    context = multiprocessing.get_context("spawn")
    with context.Pool(1) as pool:
        built, marked = pool.apply(_mark_and_measure, (config, pixels, threads))
    return float(built), float(marked)


def _high_water_mib() -> float:
    """Return this process's peak RSS (``VmHWM``; ``ru_maxrss`` survives exec, this not)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _mark_and_measure(config: MarkingConfig, pixels: Pixels, threads: int) -> tuple[float, float]:
    use_threads(threads)
    marker = make_marker(config, SEED, device="cpu")
    built = _high_water_mib()
    marker.mark(pixels, 0)
    return built, _high_water_mib()


def bench_size(
    label: str, pixels: Pixels, markers: dict[str, Marker], threads: int
) -> tuple[float, float]:
    """Print the figures of one size (see the module docstring); return (CPU, wall) seconds."""
    default = markers["default"]
    assert isinstance(default, PgdMarker)
    extractor, cfg = default.extractor, default.config
    bs = cfg.batch_size
    side = extractor.input_size or pixels.shape[1]
    times = {name: Timing() for name in (*markers, "raw-full", "raw-input")}
    versions: dict[str, list[tuple[Pixels, Pixels]]] = {name: [] for name in markers}
    for start in range(0, len(pixels), bs):
        batch = pixels[start : start + bs]
        full = torch.from_numpy(batch).permute(0, 3, 1, 2).float() / 255.0
        small = torch.rand(len(batch), 3, side, side)
        # Bound now (partial), not looked up when called: each job is this batch's.
        jobs: list[tuple[str, Callable[[], object]]] = [
            ("raw-full", partial(raw_passes, extractor, full, cfg.steps)),
            ("raw-input", partial(raw_passes, extractor, small, cfg.steps)),
        ]
        jobs += [(name, partial(m.mark, batch, start)) for name, m in markers.items()]
        if (start // bs) % 2:
            jobs.reverse()
        for name, job in jobs:
            result = times[name].add(job)
            if name in versions:
                versions[name].append(result)  # type: ignore[arg-type]
    n = len(pixels)
    raw_full, raw_input = times["raw-full"], times["raw-input"]
    print(
        f"{label} ({pixels.shape[2]}x{pixels.shape[1]}, {n} images, batches of {bs}): raw "
        f"extractor passes {n / raw_full.wall:.2f} images/s ({raw_full.cpu / n:.2f} CPU s/image) "
        f"fed at full size, {n / raw_input.wall:.2f} ({raw_input.cpu / n:.2f}) fed at "
        f"{side}x{side}"
    )
    for name, marker in markers.items():
        t = times[name]
        v0 = np.concatenate([v[0] for v in versions[name]])
        v1 = np.concatenate([v[1] for v in versions[name]])
        distance = float(feature_distances(extractor, v0, v1).mean())
        built, peak = _peak_rss_mib(marker.config, pixels[:bs], threads)
        print(
            f"  {name:<16} {n / t.wall:6.2f} images/s, {t.cpu / n:5.2f} CPU s/image; "
            f"x raw at full size {t.wall / raw_full.wall:5.2f}, at input size "
            f"{t.wall / raw_input.wall:5.2f} (target <= {TARGET}); distance {distance:5.1f}; "
            f"peak RSS {peak:,.0f} MiB marking a batch ({built:,.0f} with the marker built)",
            flush=True,
        )
    return (
        sum(t.cpu for t in times.values()),
        sum(t.wall for t in times.values()),
    )


def bench_png(pixels: Pixels) -> None:
    """Print the bytes and seconds of one image written as PNG at several zlib levels."""
    from twinaudit.owner.images.writers import PNG_COMPRESS_LEVEL  # noqa: PLC0415

    raw = pixels.nbytes
    parts = []
    for level in PNG_LEVELS:
        stream = io.BytesIO()
        start = time.perf_counter()
        Image.fromarray(pixels).save(stream, format="PNG", compress_level=level)
        seconds = time.perf_counter() - start
        mark = " (owner publish)" if level == PNG_COMPRESS_LEVEL else ""
        parts.append(
            f"level {level}{mark}: {stream.tell() / 2**20:.2f} MiB "
            f"({stream.tell() / raw:.0%} of raw) in {seconds:.2f} s"
        )
    print(f"PNG of one marked {pixels.shape[1]}x{pixels.shape[0]} image: " + "; ".join(parts))


def main(argv: list[str] | None = None) -> None:
    """Run the photo benchmark (``--threads`` as ``owner mark``'s)."""
    parser = argparse.ArgumentParser(prog="python -m bench.bench_photos", description=__doc__)
    parser.add_argument(
        "--threads",
        type=int,
        default=None,
        help=f"torch threads (default: owner mark's, {default_threads()} here)",
    )
    parser.add_argument(
        "--sizes", nargs="+", choices=[s[0] for s in SIZES], help="sizes to run (default all)"
    )
    args = parser.parse_args([] if argv is None else argv)
    threads = args.threads or default_threads()
    use_threads(threads)
    config = MarkingConfig()
    markers: dict[str, Marker] = {
        "default": make_marker(config, SEED, device="cpu"),
        "full resolution": make_marker(MarkingConfig(work_scale=0), SEED, device="cpu"),
    }
    print(
        f"torch {torch.__version__}, {threads} threads, OMP_WAIT_POLICY="
        f"{os.environ.get('OMP_WAIT_POLICY', 'unset')}, {os.cpu_count()} CPUs; defaults: "
        f"pgd on {config.extractor} at {config.input_size}px, {config.steps} steps, "
        f"batch {config.batch_size}, work_scale {config.work_scale}"
    )
    warm = photos(1, 96, 128, seed=99)
    for marker in markers.values():
        marker.mark(warm, 0)
    load = os.getloadavg()[0]
    cpu = wall = 0.0
    marked = None
    for index, (label, height, width, count) in enumerate(SIZES):
        if args.sizes and label not in args.sizes:
            continue
        pixels = photos(count, height, width, seed=index)
        size_cpu, size_wall = bench_size(label, pixels, markers, threads)
        cpu, wall = cpu + size_cpu, wall + size_wall
        marked = markers["default"].mark(pixels[:1], 0)[0][0]
    share = cpu / wall if wall else 0.0
    print(
        f"load average {load:.2f} before, {os.getloadavg()[0]:.2f} after; this process got "
        f"{share:.2f} of {threads} threads' cores"
        + (" -- SHARED CPU, the rates above are slowed" if share < 0.8 * threads else "")
    )
    if marked is not None:
        bench_png(marked)


if __name__ == "__main__":
    main(sys.argv[1:])
