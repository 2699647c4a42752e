"""Marking photos at scale with ``owner mark``'s defaults: cost against the extractor, memory.

Run with ``python -m bench mark_scale`` (``python -m bench.bench_mark_scale --sizes
"12 MP" --end-to-end 1000`` for one size and an end-to-end run). Synthetic photo-like
RGB images (:func:`bench.bench_photos.photos`) at 0.3, 1, 4 and 12 MP (4000×3000, a
phone camera's photo: 36 MB of pixels, within the 48 MiB an image item holds, spec
§2.3) are marked as
``owner mark photos/`` marks them by default, with labels (``proxy-own``) and without
(``proxy-clusters``): PGD with the proxy settings (10 steps of ε/4, batches of up to 64
cut to the memory setting) on a small CNN trained on the photos at 32 px, at the
working resolution (64 px on the longer side), the mark carried back to full size in
bands (:mod:`twinaudit.owner.marking.full_size`), neutral (:attr:`MarkingConfig.neutral_mark`).
The proxies are trained 50 steps here (their cost is the training's, not marking's).

For each size it prints:

- the marker's images/s and its ratio to the raw extractor on the same batches, marking
  and raw passes alternating: the same number of forward and backward passes (2B twins,
  10 per batch) of the proxy fed the photos at full size (its own antialiased resize
  included: what the extractor costs on a photo), and, stricter, fed 32 × 32 inputs
  (the network alone); target ≤ 1.5× (issue #39); the same ratios of CPU time follow,
  which a machine shared with other work moves less than wall time;
- the floor of any marker that writes both versions at full size: the photos plus one
  and minus one, timed in the same rounds, into two new arrays (:func:`two_versions`,
  as the marker allocates its output) and into two arrays already written once
  (:func:`two_versions_into`, as a marker that kept its output buffers from one batch
  to the next would), against the network alone at 32 px (``1 + floor / network`` is
  the least such a marker can reach against it, whatever its search costs);
- the peak resident memory of a fresh process that runs ``owner mark`` with labels on
  those photos (written as JPEG files) end to end, decoding, the proxy, marking and the
  vault, with the default memory setting (2 GiB).

``--end-to-end N`` also marks N photos of 12 MP end to end without labels (the default
proxy training included) in a fresh process and prints its wall and CPU time, its peak
resident memory against the setting, and the vault's size on disk against the JPEGs'
(both versions: since vault format 3 a photo read from a JPEG is kept as the file's
bytes and a correction plane; 72 MB a photo raw, in format 1). Drawing a synthetic
12 MP photo costs about 3 CPU s, so the N photos are made from
:data:`E2E_DISTINCT` drawn ones, each copy rolled, flipped and shifted in colour by its
own seed: every photo's pixels are its own, and their JPEGs compress as the drawn
ones do.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import resource
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Final

import numpy as np
import numpy.typing as npt
import torch
from PIL import Image

from bench.bench_photos import Timing, photos, raw_passes
from twinaudit.cli.threads import default_threads, use_threads
from twinaudit.owner.marking import MarkingConfig, make_marker
from twinaudit.owner.marking.clusters import cluster_labels
from twinaudit.owner.marking.config import CLUSTERS_PROXY, OWN_PROXY, pgd_defaults
from twinaudit.owner.marking.extractors import proxy_extractor
from twinaudit.owner.marking.markers import Marker, PgdMarker
from twinaudit.owner.marking.memory import DEFAULT_MEMORY, describe
from twinaudit.owner.marking.proxy import square_images, train_own_proxy

Pixels = npt.NDArray[np.uint8]

#: (label, height, width, images) per size.
SIZES: Final = (
    ("0.3 MP", 480, 640, 16),
    ("1 MP", 864, 1152, 8),
    ("4 MP", 1728, 2304, 4),
    ("12 MP", 3000, 4000, 2),
)
#: The end-to-end run's photos: a 12 MP phone photo, 4:3.
LARGEST: Final = (3000, 4000)
#: Photos drawn for the end-to-end run; the others are variations of them.
E2E_DISTINCT: Final = 16
SEED: Final = bytes(range(32))
TARGET: Final = 1.5
SIDE: Final = 32
#: Proxy training steps in this benchmark (marking costs the same whatever the weights).
TRAIN_STEPS: Final = 50


def default_config(extractor: str) -> MarkingConfig:
    """Return ``owner mark``'s default configuration for photos of mixed size."""
    pgd = pgd_defaults(extractor, MarkingConfig().epsilon)
    return MarkingConfig(
        extractor=extractor,
        input_size=SIDE,
        steps=int(pgd["steps"]),
        step_size=float(pgd["step_size"]),
        batch_size=int(pgd["batch_size"]),
    )


def default_markers(pixels: Pixels) -> dict[str, Marker]:
    """Return the markers with labels and without, their proxies trained on ``pixels``."""
    squares = square_images(pixels, SIDE)
    targets = {
        OWN_PROXY: np.arange(len(pixels)) % 2,
        CLUSTERS_PROXY: cluster_labels(squares, k=2),
    }
    markers: dict[str, Marker] = {}
    for extractor, labels in targets.items():
        model = train_own_proxy(squares, labels, seed=0, steps=TRAIN_STEPS, converge=False)
        markers[extractor] = make_marker(
            default_config(extractor), SEED, device="cpu", extractor=proxy_extractor(model, SIDE)
        )
    return markers


def _high_water_bytes() -> int:
    """Return this process's peak RSS (``VmHWM``)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _run_mark(argv: list[str], train_steps: int | None, threads: int) -> tuple[int, int, float]:
    """In a fresh process: run ``twinaudit ARGV``; return exit code, peak RSS, CPU seconds."""
    import twinaudit.owner.marking.proxy as proxy  # noqa: PLC0415

    if train_steps is not None:
        proxy.OWN_STEPS = train_steps  # type: ignore[misc]
        proxy.OWN_EPOCHS = 1  # type: ignore[misc]
    from twinaudit.cli.main import main  # noqa: PLC0415

    code = main([*argv, "--threads", str(threads), "-q"])
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return code, _high_water_bytes(), usage.ru_utime + usage.ru_stime


def mark_in_child(argv: list[str], train_steps: int | None, threads: int) -> tuple[int, int, float]:
    """Run :func:`_run_mark` in a fresh (spawned) process."""
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        return pool.apply(_run_mark, (argv, train_steps, threads))


def two_versions(pixels: Pixels) -> tuple[Pixels, Pixels]:
    """Return two new arrays, ``pixels`` ± 1: the cost of writing two versions of the photos."""
    return pixels + np.uint8(1), pixels - np.uint8(1)


def two_versions_into(pixels: Pixels, out: Pixels) -> None:
    """Write ``pixels`` ± 1 into ``out`` (2, …), an array already written: no new pages."""
    np.add(pixels, np.uint8(1), out=out[0])
    np.subtract(pixels, np.uint8(1), out=out[1])


def write_folder(folder: Path, pixels: Pixels) -> Path:
    """Write the photos as JPEGs (quality 92) and a labels CSV; return the CSV."""
    folder.mkdir(parents=True)
    rows = ["filename,label"]
    for index, image in enumerate(pixels):
        name = f"photo-{index:04d}.jpg"
        Image.fromarray(image).save(folder / name, quality=92)
        rows.append(f"{name},{index % 2}")
    labels = folder.parent / f"{folder.name}.csv"
    labels.write_text("\n".join(rows) + "\n")
    return labels


def bench_size(label: str, pixels: Pixels, threads: int, work: Path) -> None:
    """Print one size's figures (module docstring)."""
    markers = default_markers(pixels)
    some = markers[OWN_PROXY]
    assert isinstance(some, PgdMarker)
    extractor, steps = some.extractor, some.config.steps
    for marker in markers.values():  # warm up: first calls allocate
        marker.mark(pixels[:1], 0)
    full = torch.from_numpy(pixels).permute(0, 3, 1, 2).float() / 255.0
    small = torch.rand(len(pixels), 3, SIDE, SIDE)
    kept = np.zeros((2, *pixels.shape), dtype=np.uint8)  # written once, before timing
    floors = ("floor", "floor-kept")
    times = {name: Timing() for name in ("raw-full", "raw-input", *floors, *markers)}
    for round_ in range(2):
        jobs: list[tuple[str, Callable[[], object]]] = [
            ("raw-full", partial(raw_passes, extractor, full, steps)),
            ("raw-input", partial(raw_passes, extractor, small, steps)),
            ("floor", partial(two_versions, pixels)),
            ("floor-kept", partial(two_versions_into, pixels, kept)),
        ]
        jobs += [(name, partial(m.mark, pixels, 0)) for name, m in markers.items()]
        for name, job in reversed(jobs) if round_ else jobs:
            times[name].add(job)
    del full
    n = 2 * len(pixels)
    raw_full, raw_input = times["raw-full"], times["raw-input"]
    folder = work / label.replace(" ", "")
    labels = write_folder(folder, pixels)
    code, peak, _ = mark_in_child(
        ["owner", "mark", str(folder), "--labels", str(labels), "--out", str(work / "vault")],
        TRAIN_STEPS,
        threads,
    )
    shutil.rmtree(work / "vault", ignore_errors=True)
    print(
        f"{label} ({pixels.shape[2]}x{pixels.shape[1]}, {len(pixels)} images, one batch, two"
        f" rounds): raw extractor {n / raw_full.wall:.2f} images/s fed at full size,"
        f" {n / raw_input.wall:.2f} fed at {SIDE}x{SIDE}; owner mark with labels end to end:"
        f" exit {code}, peak RSS {peak / 2**20:,.0f} MiB (setting {describe(DEFAULT_MEMORY)})"
    )
    for name, into in zip(floors, ("new arrays", "arrays kept"), strict=True):
        floor = times[name]
        wall_ratio, cpu_ratio = floor.wall / raw_input.wall, floor.cpu / raw_input.cpu
        print(
            f"  two versions written into {into} (the floor): {floor.cpu / n:.4f} CPU s/image,"
            f" x the network alone at {SIDE} px {wall_ratio:.2f} (CPU {cpu_ratio:.2f}): no"
            f" marker writing both so is below {1 + cpu_ratio:.2f}x it",
            flush=True,
        )
    for name in markers:
        t = times[name]
        print(
            f"  {name:<15} {n / t.wall:7.2f} images/s, {t.cpu / n:5.2f} CPU s/image;"
            f" x raw at full size {t.wall / raw_full.wall:5.2f}, at {SIDE} px"
            f" {t.wall / raw_input.wall:6.2f} (target <= {TARGET}); CPU time x raw at full"
            f" size {t.cpu / raw_full.cpu:5.2f}, at {SIDE} px {t.cpu / raw_input.cpu:6.2f}",
            flush=True,
        )


def e2e_photo(drawn: Pixels, index: int) -> Pixels:
    """Return the end-to-end run's photo ``index``: a drawn photo varied by its own seed."""
    rng = np.random.default_rng(1000 + index)
    base = drawn[index % len(drawn)]
    shifted = np.roll(
        base, (int(rng.integers(base.shape[0])), int(rng.integers(base.shape[1]))), (0, 1)
    )
    if rng.integers(2):
        shifted = shifted[:, ::-1]
    offset = rng.integers(-12, 13, size=3).astype(np.int16)
    varied: Pixels = np.clip(shifted.astype(np.int16) + offset, 0, 255).astype(np.uint8)
    return varied


def end_to_end(count: int, threads: int, work: Path) -> None:
    """Mark ``count`` 12 MP photos without labels, the default proxy training included."""
    folder = work / "e2e"
    folder.mkdir()
    drawn = photos(min(count, E2E_DISTINCT), *LARGEST, seed=100)
    for index in range(count):
        image = drawn[index] if index < len(drawn) else e2e_photo(drawn, index)
        Image.fromarray(image).save(folder / f"photo-{index:05d}.jpg", quality=92)
    del drawn
    jpegs = sum(f.stat().st_size for f in folder.iterdir())
    print(f"wrote {count} JPEGs of 12 MP, {jpegs / 2**30:.2f} GiB", flush=True)
    began = time.perf_counter()
    code, peak, cpu = mark_in_child(
        ["owner", "mark", str(folder), "--out", str(work / "vault-e2e")], None, threads
    )
    wall = time.perf_counter() - began
    size = sum(f.stat().st_size for f in (work / "vault-e2e").rglob("*") if f.is_file())
    print(
        f"end to end, {count} photos of 12 MP ({LARGEST[1]}x{LARGEST[0]} JPEG) without labels,"
        f" defaults: exit {code}, {wall:.0f} s wall, {cpu:.0f} CPU s ({count / wall:.2f}"
        f" photos/s, {cpu / count:.2f} CPU s a photo, the proxy's training included), peak RSS"
        f" {peak / 2**20:,.0f} MiB of the {describe(DEFAULT_MEMORY)} setting, vault"
        f" {size / 2**30:.2f} GiB on disk, {size / jpegs:.2f}x the JPEGs' {jpegs / 2**30:.2f} GiB",
        flush=True,
    )


def main(argv: list[str] | None = None) -> None:
    """Run the benchmark (module docstring)."""
    parser = argparse.ArgumentParser(prog="python -m bench.bench_mark_scale", description=__doc__)
    parser.add_argument("--threads", type=int, default=None, help="torch threads")
    parser.add_argument(
        "--sizes",
        nargs="*",
        choices=[s[0] for s in SIZES],
        help="sizes to run (default all; none with --sizes alone, for --end-to-end only)",
    )
    parser.add_argument(
        "--end-to-end", type=int, default=0, metavar="N", help="also mark N 12 MP photos"
    )
    parser.add_argument("--work", type=Path, help="folder for the photos and vaults (a temp)")
    args = parser.parse_args([] if argv is None else argv)
    threads = args.threads or default_threads()
    use_threads(threads)
    print(
        f"torch {torch.__version__}, {threads} threads, {os.cpu_count()} CPUs, load average"
        f" {os.getloadavg()[0]:.2f}; owner mark's defaults for photos: {default_config(OWN_PROXY)}"
    )
    work = Path(tempfile.mkdtemp(prefix="bench-mark-scale-", dir=args.work))
    cpu, wall = time.process_time(), time.perf_counter()
    try:
        for index, (label, height, width, count) in enumerate(SIZES):
            if args.sizes is not None and label not in args.sizes:
                continue
            bench_size(label, photos(count, height, width, seed=index), threads, work)
        share = (time.process_time() - cpu) / max(time.perf_counter() - wall, 1e-9)
        print(
            f"load average {os.getloadavg()[0]:.2f} after; this process got {share:.2f} of"
            f" {threads} threads' cores"
        )
        if args.end_to_end:
            end_to_end(args.end_to_end, threads, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main(sys.argv[1:])
