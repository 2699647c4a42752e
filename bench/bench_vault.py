"""The vault's size against the input photos: formats 3 (JPEGs kept), 2 (compact), 1 (raw).

Run with ``python -m bench vault`` (``python -m bench.bench_vault --synthetic 0`` for the
real photos only). Two sets of JPEG photos are marked with ``owner mark photos/ --labels``
(``proxy-own``, the default with labels; its proxy trained 50 steps rather than 3,160 to
save time: the marks have the default's form, PGD's ±ε steps at the working resolution
carried back to full size, neutral), in this process:

- real photos: scikit-learn's ``china.jpg`` and ``flower.jpg`` as shipped (640×427 JPEG
  files), and scikit-image's astronaut, coffee, chelsea and rocket photos (stored as
  PNG in the package) written as JPEG at quality 92;
- synthetic photo-like images (:func:`bench.bench_photos.photos`: a smooth colour field,
  soft shapes, sensor-like noise of σ = 4) of 1 MP, written as JPEG at quality 92 (as
  ``bench mark_scale`` writes them).

For each set it prints the bytes of the input files; of the vault ``owner mark`` wrote
(format 4: format 3's chunks) and their ratio to the inputs (target ≤ 3×, issue #39),
with how many items it kept as their JPEG; of the same vault written in formats 2 and 1
from its pairs (the same root, checked); what the format-3 chunks hold (the JPEGs,
their correction planes, the midpoints of the items not kept as JPEGs, the mark, the
clipped levels' parity) and the format-2 chunks (the photo as the versions' midpoint,
the mark, the parity) and, for reference, the midpoint as a WebP lossless file (a
stronger lossless image coder); the CPU time of writing and of reading back every chunk
in each format; and the time of a claim's openings, every pair opened in a random order
(an audit's order is random),
each format from a freshly opened vault.
"""

from __future__ import annotations

import argparse
import io
import os
import random
import shutil
import struct
import sys
import tempfile
import time
from pathlib import Path
from typing import Final

import numpy as np
import skimage.data
from PIL import Image
from sklearn.datasets import load_sample_images

from bench.bench_photos import photos
from twinaudit.cli.main import main as twinaudit
from twinaudit.owner.mark import secret_from_seed
from twinaudit.owner.vault import Vault, VaultWriter
from twinaudit.owner.vault.chunks import encode_chunk
from twinaudit.owner.vault.jpeg_pairs import JPEG_CODING
from twinaudit.owner.vault.jpeg_pairs import MAGIC as MAGIC3
from twinaudit.owner.vault.migration import Originals, originals_in
from twinaudit.owner.vault.pair_codec import MAGIC

#: JPEG quality of the photos written here (``bench mark_scale`` writes at 92 too).
QUALITY: Final = 92
#: scikit-image's colour photos (the package stores them as PNG).
SKIMAGE_PHOTOS: Final = ("astronaut", "coffee", "chelsea", "rocket")
#: Proxy training steps (marking costs the same whatever the weights).
TRAIN_STEPS: Final = 50
TARGET: Final = 3.0
#: ``owner mark --seed``: the secret, reproducible (the format-1 copy needs it).
SEED_TEXT: Final = "bench vault"


def real_photos(folder: Path) -> None:
    """Write the real photos into ``folder`` (scikit-learn's JPEG files as they are)."""
    folder.mkdir(parents=True)
    sample_dir = Path(load_sample_images().filenames[0]).parent
    for name in ("china.jpg", "flower.jpg"):
        shutil.copyfile(sample_dir / name, folder / name)
    for name in SKIMAGE_PHOTOS:
        Image.fromarray(getattr(skimage.data, name)()).save(folder / f"{name}.jpg", quality=QUALITY)


def synthetic_photos(folder: Path, count: int, height: int, width: int) -> None:
    """Write ``count`` synthetic photo-like images of ``height`` × ``width`` as JPEGs."""
    folder.mkdir(parents=True)
    for index, image in enumerate(photos(count, height, width, seed=5)):
        Image.fromarray(image).save(folder / f"photo-{index:03d}.jpg", quality=QUALITY)


def labels_for(folder: Path) -> Path:
    """Write a labels CSV (two classes) for the photos of ``folder``; return its path."""
    rows = ["filename,label"]
    rows += [f"{p.name},{i % 2}" for i, p in enumerate(sorted(folder.glob("*.jpg")))]
    path = folder.parent / f"{folder.name}.csv"
    path.write_text("\n".join(rows) + "\n")
    return path


def tree_bytes(path: Path) -> int:
    """Return the bytes of every file under ``path``."""
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def stream_bytes(vault: Path) -> tuple[int, int, int]:
    """Return the bytes of the midpoint, mark and parity streams of a format-2 vault."""
    totals = [0, 0, 0]
    for chunk in sorted((vault / "chunks").glob("*.pairs")):
        with chunk.open("rb") as handle:
            head = handle.read(len(MAGIC) + 16)
            count = struct.unpack_from(">I", head, len(MAGIC))[0]
            lengths = struct.unpack(f">{3 * count}Q", handle.read(24 * count))
        for k, length in enumerate(lengths):
            totals[k % 3] += length
    return totals[0], totals[1], totals[2]


def format3_bytes(vault: Path) -> dict[str, int]:
    """Return what the chunks of a format-3 vault hold, in bytes, and the items per coding."""
    totals = dict.fromkeys(("midpoint", "correction", "mark", "parity", "jpeg", "jpeg items"), 0)
    totals["items"] = 0
    for chunk in sorted((vault / "chunks").glob("*.pairs")):
        data = chunk.read_bytes()
        assert data.startswith(MAGIC3)
        count = struct.unpack_from(">I", data, len(MAGIC3))[0]
        (decoder,) = struct.unpack_from(">H", data, len(MAGIC3) + 16)
        entries = len(MAGIC3) + 18 + decoder
        for item in range(count):
            coding, _, first, mark, parity, jpeg = struct.unpack_from(
                ">B32s4Q", data, entries + 65 * item
            )
            kept = coding == JPEG_CODING
            totals["correction" if kept else "midpoint"] += first
            totals["mark"] += mark
            totals["parity"] += parity
            totals["jpeg"] += jpeg
            totals["jpeg items"] += kept
            totals["items"] += 1
    return totals


def webp_midpoints(vault: Vault) -> int:
    """Return the bytes of every pair's midpoint (the photo) as a WebP lossless file."""
    total = 0
    for _, versions0, versions1, _, _ in vault.chunks():
        for first, second in zip(versions0, versions1, strict=True):
            midpoint = ((first.astype(np.int16) + second) >> 1).astype(np.uint8)
            if midpoint.shape[2] == 1:
                midpoint = np.repeat(midpoint, 3, axis=2)
            out = io.BytesIO()
            Image.fromarray(midpoint).save(out, "WEBP", lossless=True, quality=100, method=4)
            total += len(out.getvalue())
    return total


def open_all(vault: Path, order: list[int]) -> float:
    """Return the wall seconds of opening every pair of a freshly opened vault, in ``order``."""
    opened = Vault.open(vault)
    start = time.perf_counter()
    for index in order:
        opened.opening(index)
    return time.perf_counter() - start


def read_all(vault: Vault) -> float:
    """Return the CPU seconds of reading (and checking) every chunk of ``vault``."""
    start = time.process_time()
    for _ in vault.chunks():
        pass
    return time.process_time() - start


def encode_all(vault: Vault, format_version: int, originals: Originals | None = None) -> float:
    """Return the CPU seconds of encoding every chunk of ``vault`` in ``format_version``.

    ``originals`` gives each item's source file (format 3); reading them is not timed.
    """
    total = 0.0
    for _, versions0, versions1, _, names in vault.chunks():
        kept = None if originals is None else [originals(name) for name in names]
        start = time.process_time()
        encode_chunk(versions0, versions1, format_version, kept)
        total += time.process_time() - start
    return total


def bench_set(label: str, folder: Path, work: Path) -> None:
    """Mark one set of photos and print its figures (module docstring)."""
    labels = labels_for(folder)
    inputs = sum(p.stat().st_size for p in folder.glob("*.jpg"))
    count = len(list(folder.glob("*.jpg")))
    megapixels = sum(int(np.prod(Image.open(p).size)) for p in folder.glob("*.jpg")) / 1e6
    compact = work / f"{folder.name}-vault"
    argv = ["owner", "mark", str(folder), "--labels", str(labels), "--out", str(compact)]
    code = twinaudit([*argv, "--seed", SEED_TEXT, "-q"])
    assert code == 0, code
    new = Vault.open(compact)
    assert new.format_version == 4  # format 3's chunks, with any colour profiles
    secret = secret_from_seed(SEED_TEXT)
    two, raw = work / f"{folder.name}-format2", work / f"{folder.name}-format1"
    middle, old = format_copy(new, two, secret, 2), format_copy(new, raw, secret, 1)
    assert old.root == new.root == middle.root
    sizes = {3: tree_bytes(compact), 2: tree_bytes(two), 1: tree_bytes(raw)}
    held = format3_bytes(compact)
    midpoint, mark, parity = stream_bytes(two)
    order = list(range(new.n_pairs))
    random.Random(0).shuffle(order)
    opens = {version: open_all(path, order) for version, path in ((3, compact), (2, two), (1, raw))}
    print(
        f"{label}: {count} photos, {megapixels:.2f} MP, inputs {inputs / 2**20:.2f} MiB "
        f"({inputs / megapixels / 1e6:.2f} bytes/pixel)"
    )
    print(
        "  vault "
        + "; ".join(
            f"format {v} {sizes[v] / 2**20:7.2f} MiB = {sizes[v] / inputs:5.2f}x" for v in (3, 2, 1)
        )
        + f" the inputs (target <= {TARGET}x); format 3 / format 2 = {sizes[3] / sizes[2]:.3f}"
    )
    print(
        f"  format 3 chunks: {held['jpeg items']} of {held['items']} items kept as their JPEG; "
        f"JPEGs {held['jpeg'] / inputs:.3f}x the inputs, their corrections "
        f"{held['correction'] / inputs:.4f}x, midpoints of the others "
        f"{held['midpoint'] / inputs:.3f}x, mark {held['mark'] / inputs:.2f}x, parity "
        f"{held['parity'] / inputs:.3f}x"
    )
    print(
        f"  format 2 chunks: midpoint (the photo) {midpoint / inputs:.2f}x the inputs, mark "
        f"{mark / inputs:.2f}x, parity {parity / inputs:.3f}x; for reference, the midpoint "
        f"as WebP lossless (Pillow, method 4) {webp_midpoints(new) / inputs:.2f}x"
    )
    sources = originals_in(folder)
    print(
        f"  CPU s to write every chunk: format 3 {encode_all(new, 3, sources):.2f}, format 2 "
        f"{encode_all(new, 2):.2f}, format 1 {encode_all(new, 1):.2f}; to read them back: "
        f"format 3 {read_all(new):.2f}, format 2 {read_all(middle):.2f}, format 1 "
        f"{read_all(old):.2f}"
    )
    print(
        f"  {len(order)} openings in a random order: "
        + ", ".join(
            f"format {v} {opens[v]:.2f} s ({opens[v] / len(order) * 1e3:.1f} ms each)"
            for v in (3, 2, 1)
        ),
        flush=True,
    )


def format_copy(vault: Vault, path: Path, secret: bytes, format_version: int) -> Vault:
    """Write ``vault``'s pairs again in ``format_version``, chunk for chunk (same secret)."""
    with VaultWriter.create_or_resume(
        path,
        item_kind=vault.item_kind,
        source=vault.source,
        config=vault.config,
        n_items=vault.n_pairs,
        secret=secret,
        format_version=format_version,
    ) as writer:
        for _, versions0, versions1, labels, names in vault.chunks():
            writer.append(versions0, versions1, labels, names)
        return writer.finish()


def main(argv: list[str] | None = None) -> None:
    """Print the figures of the module docstring."""
    parser = argparse.ArgumentParser(prog="python -m bench.bench_vault", description=__doc__)
    parser.add_argument(
        "--synthetic", type=int, default=8, help="synthetic 1 MP photos (default 8; 0: none)"
    )
    args = parser.parse_args([] if argv is None else argv)
    import twinaudit.owner.marking.proxy as proxy  # noqa: PLC0415

    proxy.OWN_STEPS = TRAIN_STEPS  # type: ignore[misc]
    proxy.OWN_EPOCHS = 1  # type: ignore[misc]
    print(
        f"load average {os.getloadavg()[0]:.1f}; JPEG quality {QUALITY}; proxy trained "
        f"{TRAIN_STEPS} steps",
        flush=True,
    )
    with tempfile.TemporaryDirectory(prefix="bench-vault-") as tmp:
        work = Path(tmp)
        real_photos(work / "real")
        bench_set("real photos (scikit-learn, scikit-image)", work / "real", work)
        if args.synthetic:
            synthetic_photos(work / "synthetic", args.synthetic, 864, 1152)
            bench_set("synthetic photo-like, 1 MP (1152x864)", work / "synthetic", work)


if __name__ == "__main__":
    main(sys.argv[1:])
