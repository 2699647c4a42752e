"""The vault's size against the input photos: formats 5 (default), 4, 2 (compact) and 1 (raw).

Run with ``python -m bench vault`` (``python -m bench.bench_vault --synthetic 0`` for the
real photos only; ``--folder DIR`` for a folder of your own photos, of any format
``owner mark`` reads, e.g. HEIC). Sets of photos are marked with ``owner mark photos/
--labels`` (``proxy-own``, the default with labels; its proxy trained 50 steps rather than
3,160 to save time: the marks have the default's form, PGD's ±ε steps at the working
resolution carried back to full size, neutral), in this process:

- real photos: scikit-learn's ``china.jpg`` and ``flower.jpg`` as shipped (640×427 JPEG
  files), and scikit-image's astronaut, coffee, chelsea and rocket photos (stored as
  PNG in the package) written as JPEG at quality 92;
- synthetic photo-like images (:func:`bench.bench_photos.photos`: a smooth colour field,
  soft shapes, sensor-like noise of σ = 4) of 1 MP, written as JPEG at quality 92 (as
  ``bench mark_scale`` writes them).

For each set it prints the bytes of the input files; of the vault ``owner mark`` wrote
(format 5: each photo kept as its JPEG or HEIC file where smaller, and its mark as the
field it was carried back from) and their ratio to the inputs (target ≤ 3×, issue #39);
of the same vault written in formats 4 (the marks as planes, as before format 5), 2 and 1
from its pairs (the same root, checked); what the format-5 and format-4 chunks hold (the
source files, their correction planes, the midpoints of the items not kept as files, the
mark, the clipped levels' parity, the fields) and the format-2 chunks (the photo as the
versions' midpoint, the mark, the parity) and, for reference, the midpoint as a WebP
lossless file (a stronger lossless image coder); the CPU time of writing and of reading
back every chunk in each format; and the time of a claim's openings, every pair opened
in a random order (an audit's order is random), each format from a freshly opened vault.
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
from twinaudit.owner.images.sources import IMAGE_SUFFIXES
from twinaudit.owner.mark import secret_from_seed
from twinaudit.owner.marking.markers import Marker, MarkField
from twinaudit.owner.vault import Vault, VaultWriter
from twinaudit.owner.vault.chunks import encode_chunk
from twinaudit.owner.vault.files import tree_bytes
from twinaudit.owner.vault.jpeg_pairs import FIELD_MAGIC, MIDPOINT_CODING
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


def photo_files(folder: Path) -> list[Path]:
    """Return the image files of ``folder`` that ``owner mark`` reads, sorted."""
    return sorted(p for p in folder.iterdir() if p.suffix.lower() in IMAGE_SUFFIXES)


def labels_for(folder: Path) -> Path:
    """Write a labels CSV (two classes) for the photos of ``folder``; return its path."""
    rows = ["filename,label"]
    rows += [f"{p.name},{i % 2}" for i, p in enumerate(photo_files(folder))]
    path = folder.parent / f"{folder.name}.csv"
    path.write_text("\n".join(rows) + "\n")
    return path


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


def chunk_contents(vault: Path) -> dict[str, int]:
    """Return what the chunks of a format-4 or format-5 vault hold, in bytes, and item counts."""
    names = ("midpoint", "correction", "mark", "parity", "source", "field")
    totals = dict.fromkeys((*names, "source items", "field items", "items"), 0)
    for chunk in sorted((vault / "chunks").glob("*.pairs")):
        data = chunk.read_bytes()
        fields = data.startswith(FIELD_MAGIC)
        assert fields or data.startswith(MAGIC3)
        entry = struct.Struct(">B32s3H5Q" if fields else ">B32s4Q")
        count = struct.unpack_from(">I", data, len(MAGIC3))[0]
        (decoder,) = struct.unpack_from(">H", data, len(MAGIC3) + 16)
        entries = len(MAGIC3) + 18 + decoder
        for item in range(count):
            values = entry.unpack_from(data, entries + entry.size * item)
            coding = values[0]
            first, mark, parity, source, *field = values[5:] if fields else values[2:]
            kept = coding != MIDPOINT_CODING
            totals["correction" if kept else "midpoint"] += first
            totals["mark"] += mark
            totals["parity"] += parity
            totals["source"] += source
            totals["field"] += sum(field)
            totals["source items"] += kept
            totals["field items"] += bool(sum(field))
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


def encode_all(
    vault: Vault,
    format_version: int,
    originals: Originals | None = None,
    fields: dict[int, MarkField] | None = None,
) -> float:
    """Return the CPU seconds of encoding every chunk of ``vault`` in ``format_version``.

    ``originals`` gives each item's source file (formats 3 on), ``fields`` each pair's
    mark field by index (format 5); reading them is not timed.
    """
    total = 0.0
    for start_index, versions0, versions1, _, names in vault.chunks():
        kept = None if originals is None else [originals(name) for name in names]
        given = None
        if fields is not None:
            given = [fields.get(start_index + k) for k in range(len(names))]
        start = time.process_time()
        encode_chunk(versions0, versions1, format_version, kept, fields=given)
        total += time.process_time() - start
    return total


class FieldRecorder:
    """Keeps the mark field of every pair ``owner mark`` marks in this process, by index."""

    def __init__(self) -> None:
        """Start recording (until :meth:`stop`)."""
        self.fields: dict[int, MarkField] = {}
        self._real = Marker.mark_with_fields
        recorder = self

        def recording(
            marker: Marker, pixels: np.ndarray, first_index: int
        ) -> tuple[np.ndarray, np.ndarray, list[MarkField | None]]:
            version0, version1, fields = recorder._real(marker, pixels, first_index)
            for k, field in enumerate(fields):
                if field is not None:
                    recorder.fields[first_index + k] = field
            return version0, version1, fields

        Marker.mark_with_fields = recording  # type: ignore[method-assign]

    def stop(self) -> dict[int, MarkField]:
        """Stop recording; return the fields."""
        Marker.mark_with_fields = self._real  # type: ignore[method-assign]
        return self.fields


def bench_set(label: str, folder: Path, work: Path) -> None:
    """Mark one set of photos and print its figures (module docstring)."""
    labels = labels_for(folder)
    files = photo_files(folder)
    inputs = sum(p.stat().st_size for p in files)
    compact = work / f"{folder.name}-vault"
    argv = ["owner", "mark", str(folder), "--labels", str(labels), "--out", str(compact)]
    recorder = FieldRecorder()
    try:
        code = twinaudit([*argv, "--seed", SEED_TEXT, "-q"])
    finally:
        fields = recorder.stop()
    assert code == 0, code
    new = Vault.open(compact)
    assert new.format_version == 5  # format 4's, the marks stored as their fields
    shapes = new.item_shapes().items()
    megapixels = sum(height * width * count for (height, width, _), count in shapes) / 1e6
    secret = secret_from_seed(SEED_TEXT)
    sources = originals_in(folder)
    paths = {version: work / f"{folder.name}-format{version}" for version in (4, 2, 1)}
    copies = {
        version: format_copy(new, path, secret, version, sources if version == 4 else None)
        for version, path in paths.items()
    }
    assert {copy.root for copy in copies.values()} == {new.root}
    paths[5] = compact
    versions = (5, 4, 2, 1)
    sizes = {version: tree_bytes(paths[version]) for version in versions}
    held = {version: chunk_contents(paths[version]) for version in (5, 4)}
    midpoint, mark, parity = stream_bytes(paths[2])
    order = list(range(new.n_pairs))
    random.Random(0).shuffle(order)
    opens = {version: open_all(paths[version], order) for version in versions}
    print(
        f"{label}: {len(files)} photos, {megapixels:.2f} MP, inputs {inputs / 2**20:.2f} MiB "
        f"({inputs / megapixels / 1e6:.2f} bytes/pixel)"
    )
    print(
        "  vault "
        + "; ".join(
            f"format {v} {sizes[v] / 2**20:7.2f} MiB = {sizes[v] / inputs:5.2f}x" for v in versions
        )
        + f" the inputs (target <= {TARGET}x); format 5 / format 4 = {sizes[5] / sizes[4]:.3f}"
    )
    for version in (5, 4):
        parts = held[version]
        print(
            f"  format {version} chunks: {parts['source items']} of {parts['items']} items kept "
            f"as their file, {parts['field items']} with a mark field; files "
            f"{parts['source'] / inputs:.3f}x the inputs, their corrections "
            f"{parts['correction'] / inputs:.4f}x, midpoints of the others "
            f"{parts['midpoint'] / inputs:.3f}x, mark {parts['mark'] / inputs:.4f}x, parity "
            f"{parts['parity'] / inputs:.4f}x, fields {parts['field'] / inputs:.4f}x"
        )
    print(
        f"  format 2 chunks: midpoint (the photo) {midpoint / inputs:.2f}x the inputs, mark "
        f"{mark / inputs:.2f}x, parity {parity / inputs:.3f}x; for reference, the midpoint "
        f"as WebP lossless (Pillow, method 4) {webp_midpoints(new) / inputs:.2f}x"
    )
    writes = {
        5: encode_all(new, 5, sources, fields),
        4: encode_all(new, 4, sources),
        2: encode_all(new, 2),
        1: encode_all(new, 1),
    }
    reads = {5: read_all(new), **{v: read_all(copies[v]) for v in (4, 2, 1)}}
    print(
        "  CPU s to write every chunk: "
        + ", ".join(f"format {v} {writes[v]:.2f}" for v in versions)
        + "; to read them back: "
        + ", ".join(f"format {v} {reads[v]:.2f}" for v in versions)
    )
    print(
        f"  {len(order)} openings in a random order: "
        + ", ".join(
            f"format {v} {opens[v]:.2f} s ({opens[v] / len(order) * 1e3:.1f} ms each)"
            for v in versions
        ),
        flush=True,
    )


def format_copy(
    vault: Vault, path: Path, secret: bytes, format_version: int, originals: Originals | None
) -> Vault:
    """Write ``vault``'s pairs again in ``format_version``, chunk for chunk (same secret).

    ``originals``, for formats 3 on, gives each item's source file to keep.
    """
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
            kept = None if originals is None else [originals(name) for name in names]
            writer.append(versions0, versions1, labels, names, originals=kept)
        return writer.finish()


def main(argv: list[str] | None = None) -> None:
    """Print the figures of the module docstring."""
    parser = argparse.ArgumentParser(prog="python -m bench.bench_vault", description=__doc__)
    parser.add_argument(
        "--synthetic", type=int, default=8, help="synthetic 1 MP photos (default 8; 0: none)"
    )
    parser.add_argument(
        "--folder", type=Path, default=None, help="also a folder of photos of your own"
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
        if args.folder is not None:
            shutil.copytree(args.folder, work / "folder")
            bench_set(f"the photos of {args.folder}", work / "folder", work)


if __name__ == "__main__":
    main(sys.argv[1:])
