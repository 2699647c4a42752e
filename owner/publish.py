"""``owner publish``: write the published version of every pair, and nothing else.

The version of pair ``i`` that is published is ``b_i``, derived from the escrow
receipt's ``rho`` and the vault's root (spec §5.5) — never chosen by the owner — so
nothing can be published before the vault holds a verified receipt. The output is in
the input's format (see :mod:`twinaudit.owner.images.writers`) and holds only the published
pixels, the image names, the labels and each photo's colour profile as it was read: no
salts, bits, hidden versions or vault metadata. It is written to a temporary directory
and renamed into place when complete, so a failed run leaves nothing that looks like a
publication.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path

from twinaudit.protocol.errors import StateError

from .images.sources import ImageBatch
from .images.writers import open_writer, published_name
from .progress import Progress
from .vault import Vault

#: The captions file of a captioned-image publication.
CAPTIONS_CSV = "captions.csv"


def publish(vault: Vault, out_dir: Path, *, show_progress: bool = True) -> list[Path]:
    """Write the published versions of ``vault`` into the new directory ``out_dir``.

    A captioned-image vault is published as its images (in the input's format) and
    ``captions.csv`` (``name,caption``: each image's published name and its caption,
    in order), so that every caption stays with its published image.

    Returns the files written. Raises :class:`~twinaudit.protocol.errors.StateError` when the
    vault has no escrow receipt yet (escrow it first).
    """
    if vault.receipt is None:
        raise StateError(
            f"{vault.path} has no escrow receipt: escrow it first (twinaudit owner escrow); "
            "which version of each pair is published is derived from the receipt"
        )
    has_labels = any(label is not None for label in vault.labels())
    writer = open_writer(vault.source, out_dir, count=vault.n_pairs, labels=has_labels)
    progress = Progress("publishing", vault.n_pairs) if show_progress else None
    captions = vault.captions() if vault.item_kind == "captioned-image" else None
    profiles = vault.colour_profiles()
    try:
        for start, pixels, labels, names in vault.published_chunks():
            chunk_profiles = profiles[start : start + len(names)]
            writer.add(ImageBatch(start, pixels, names, labels, profiles=chunk_profiles))
            if progress is not None:
                progress.update(len(names))
        if captions is not None:
            writer.add_file(CAPTIONS_CSV, _captions_csv(vault, captions))
        files = writer.close()
    except BaseException:
        writer.abort()
        raise
    if progress is not None:
        progress.finish()
    return files


def _captions_csv(vault: Vault, captions: list[str]) -> bytes:
    """Return ``captions.csv``: the header, then each image's published name and caption."""
    folder = vault.source.get("format") == "image-dir"
    stream = io.StringIO(newline="")
    rows = csv.writer(stream, lineterminator="\n")
    rows.writerow(["name", "caption"])
    for name, caption in zip(vault.names(), captions, strict=True):
        rows.writerow([published_name(name) if folder else name, caption])
    return stream.getvalue().encode("utf-8")
