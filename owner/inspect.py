"""``owner inspect``: what a vault holds, and checks an owner (or her counsel) can read.

The report gives the counts, the marking configuration, the escrow receipt (verified
again when the vault is opened), the ε bound checked over every pixel against the
original images with the perceptual measures of the first pairs next to it (CIEDE2000
colour difference, SSIM and colour cast, :mod:`twinaudit.owner.images.perceptual`), the mean
feature-space distance between the two versions of the first pairs (whatever their
sizes: the extractor resizes every image to its input side), and optionally a contact
sheet of the first pairs (rows: raw, published, hidden, amplified difference, as in the
paper's figures 6-8; images of several sizes are fitted to one cell for display). The
contact sheet shows hidden versions: it is private, written with mode 0600, and must
not be published.

The distance is measured in the marking extractor unless another is asked for. Marks
made with ``proxy-own`` or ``proxy-clusters`` are the exception: that proxy is trained
while marking and the vault keeps only its weights' digest, so the distance is measured
in the default ImageNet extractor instead, and the report says so.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import numpy.typing as npt

from twinaudit.protocol.encoding import Value, encode
from twinaudit.protocol.errors import InputError, ParameterError
from twinaudit.protocol.keys import key_id

from . import marking  # its torch-dependent names load on first use
from .images.perceptual import PerceptualCheck, PerceptualMeasure
from .images.sheet import write_fitted_contact_sheet
from .images.sources import ImageSource
from .marking import MarkingConfig
from .marking.config import IMAGENET_EXTRACTOR, TRAINED_WHILE_MARKING
from .plain_data import FieldsRecord
from .vault import Vault
from .vault.files import tree_bytes

Pixels = npt.NDArray[np.uint8]

#: Pairs whose two versions the perceptual measures compare with their originals (the
#: first ones; CIEDE2000 and SSIM cost about a second per version of a photo).
PERCEPTUAL_PAIRS = 16


@dataclass
class EpsilonCheck:
    """The largest ‖xᵏ − x‖∞ over every pixel of both versions of every pair."""

    epsilon: int
    pixels_checked: int = 0
    max_deviation: int = 0
    pairs_over: int = 0

    @property
    def holds(self) -> bool:
        """Whether every pixel of every version is within ε of the original."""
        return self.pairs_over == 0 and self.max_deviation <= self.epsilon

    def add(self, raw: Pixels, version0: Pixels, version1: Pixels) -> None:
        """Check one batch of originals against both versions."""
        original = raw.astype(np.int16)
        deviation = np.maximum(
            np.abs(version0.astype(np.int16) - original),
            np.abs(version1.astype(np.int16) - original),
        )
        per_pair = deviation.reshape(len(raw), -1).max(axis=1)
        self.pixels_checked += 2 * raw.size
        self.max_deviation = max(self.max_deviation, int(per_pair.max(initial=0)))
        self.pairs_over += int((per_pair > self.epsilon).sum())


@dataclass(frozen=True)
class FeatureDistance(FieldsRecord):
    """Mean and median ‖h(x⁰) − h(x¹)‖₂ over the first pairs of a vault.

    ``pairs`` is the number of pairs measured and ``sizes`` the number of distinct
    image sizes (H×W) among them. ``fallback`` is None when the distance is measured
    in the extractor asked for (by default the marking one), else why it is not.
    """

    extractor: str
    input_size: int
    pairs: int
    sizes: int
    mean: float
    median: float
    fallback: str | None = None

    def text(self) -> str:
        """Return the report's lines on the distance."""
        sizes = f" of {self.sizes} sizes" if self.sizes > 1 else ""
        line = (
            f"  feature distance ||h(x^0) - h(x^1)||: mean {self.mean:.4f},"
            f" median {self.median:.4f} over {self.pairs} pairs{sizes} ({self.extractor},"
            f" input {self.input_size}px)"
        )
        return line if self.fallback is None else f"{line}\n    {self.fallback}"


@dataclass(frozen=True)
class ReceiptSummary(FieldsRecord):
    """Where the vault's root was escrowed (the receipt verified when the vault opened)."""

    record: int
    time: str
    log_size: int
    arbiter: str


def receipt_line(receipt: ReceiptSummary | None) -> str:
    """Return the report's line on the vault's receipt (or on its absence)."""
    if receipt is None:
        return "  receipt: none (not escrowed yet; nothing may be published)"
    return (
        f"  receipt: valid, record {receipt.record} at {receipt.time}, "
        f"log size {receipt.log_size}, arbiter key {receipt.arbiter}"
    )


@dataclass(frozen=True)
class Storage:
    """What the vault takes on disk, against the input's files when those were given."""

    format_version: int
    vault_bytes: int
    #: The bytes of the input's files (a folder: its images), with ``--input`` only.
    input_bytes: int | None = None

    def text(self) -> str:
        """Return the report's line."""
        line = f"  storage: vault format {self.format_version}, {_bytes_text(self.vault_bytes)}"
        if self.input_bytes:
            line += (
                f", {self.vault_bytes / self.input_bytes:.2f}x the "
                f"{_bytes_text(self.input_bytes)} of the input's files"
            )
        return line

    def to_value(self) -> dict[str, Value]:
        """Return the storage as plain data (for ``--json``)."""
        return {
            "format_version": self.format_version,
            "vault_bytes": self.vault_bytes,
            "input_bytes": self.input_bytes,
        }


def _bytes_text(size: int) -> str:
    return f"{size / 1e6:.1f} MB" if size >= 10**5 else f"{size / 1e3:.1f} kB"


@dataclass
class InspectReport:
    """Everything ``owner inspect`` found."""

    path: Path
    n_pairs: int
    item_kind: str
    config: MarkingConfig
    source: dict[str, Value]
    receipt: ReceiptSummary | None
    epsilon: EpsilonCheck | None = None
    perceptual: PerceptualMeasure | None = None
    feature_distance: FeatureDistance | None = None
    sheet: Path | None = None
    sheet_pairs: int = 0
    storage: Storage | None = None
    notes: list[str] = field(default_factory=list)

    def to_value(self) -> dict[str, Value]:
        """Return the report as plain data (for ``--json``)."""
        eps: dict[str, Value] | None = None
        if self.epsilon is not None:
            eps = {
                "epsilon": self.epsilon.epsilon,
                "pixels_checked": self.epsilon.pixels_checked,
                "max_deviation": self.epsilon.max_deviation,
                "pairs_over": self.epsilon.pairs_over,
                "holds": self.epsilon.holds,
            }
        return {
            "vault": str(self.path),
            "n_pairs": self.n_pairs,
            "item_kind": self.item_kind,
            "config": self.config.to_value(),
            "source": self.source,
            "receipt": None if self.receipt is None else self.receipt.to_value(),
            "epsilon_check": eps,
            "perceptual": None if self.perceptual is None else dict(self.perceptual.to_value()),
            "feature_distance": (
                None if self.feature_distance is None else self.feature_distance.to_value()
            ),
            "contact_sheet": None if self.sheet is None else str(self.sheet),
            "contact_sheet_pairs": self.sheet_pairs,
            "storage": None if self.storage is None else self.storage.to_value(),
            "notes": list[Value](self.notes),
        }

    def to_text(self) -> str:
        """Return the report for a person."""
        lines = [
            f"vault {self.path}: {self.n_pairs} {self.item_kind} pairs",
            f"  input: {_plain(self.source.get('format'))} {_shape_text(self.source)}",
            f"  marking: {_config_text(self.config)}",
        ]
        lines.append(receipt_line(self.receipt))
        if self.storage is not None:
            lines.append(self.storage.text())
        if self.epsilon is None:
            lines.append("  epsilon check: skipped (no --input with the original images)")
        else:
            e = self.epsilon
            verdict = "holds" if e.holds else f"FAILS for {e.pairs_over} pairs"
            lines.append(
                f"  epsilon check: max |x^k - x| = {e.max_deviation} <= {e.epsilon} {verdict}"
                f" ({e.pixels_checked} pixels checked)"
            )
        if self.perceptual is not None:
            lines.append(self.perceptual.text())
        if self.feature_distance is not None:
            lines.append(self.feature_distance.text())
        if self.sheet is not None:
            lines.append(
                f"  contact sheet of {self.sheet_pairs} pairs (private: shows hidden versions):"
                f" {self.sheet}"
            )
        lines.extend(f"  note: {note}" for note in self.notes)
        return "\n".join(lines)


def _plain(value: Value) -> str:
    return value.hex() if isinstance(value, bytes) else str(value)


def _shape_text(source: dict[str, Value]) -> str:
    """Return the source's shapes as ``count x HxWxC`` items."""
    shapes = source.get("shapes")
    if not isinstance(shapes, list):
        return ""
    parts = []
    for entry in shapes:
        if isinstance(entry, dict) and isinstance(entry.get("shape"), list):
            dims = entry["shape"]
            assert isinstance(dims, list)
            size = "x".join(_plain(d) for d in dims)
            parts.append(f"{_plain(entry.get('count'))} x {size}")
    return ", ".join(parts)


def _config_text(config: MarkingConfig) -> str:
    text = f"{config.marker}, epsilon {config.epsilon}"
    if config.marker == "pgd":
        text += (
            f", extractor {config.extractor} ({config.input_size}px),"
            f" {config.steps} steps of {config.step_size}"
        )
    return text


def inspect_vault(
    vault: Vault,
    *,
    source: ImageSource | None = None,
    distance_pairs: int = 512,
    extractor: str | None = None,
    sheet: Path | None = None,
    sheet_pairs: int = 8,
) -> InspectReport:
    """Inspect an opened vault.

    ``source`` (the original images the vault was marked from) enables the ε check
    over every pixel and the raw row of the contact sheet; it must be the recorded
    input (same images, same hashes). The first ``distance_pairs`` pairs, whatever
    their sizes (0 to skip), are embedded with ``extractor`` to report the feature
    distance; by default the marking extractor, except for marks made with
    ``proxy-own`` or ``proxy-clusters``, which the vault does not keep: then the default
    ImageNet extractor, and the report says so. ``sheet`` writes a contact sheet of the first
    ``sheet_pairs`` pairs, images of several sizes fitted to one cell for display.
    """
    if vault.item_kind == "text":
        raise ParameterError(
            f"{vault.path} holds texts: inspect it with "
            "twinaudit.owner.text.report.inspect_text_vault"
        )
    if sheet is not None and sheet_pairs < 1:
        raise ParameterError(f"the contact sheet needs at least 1 pair, got {sheet_pairs}")
    config = MarkingConfig.from_value(vault.config)
    report = InspectReport(
        vault.path, vault.n_pairs, vault.item_kind, config, vault.source, receipt_summary(vault)
    )
    if profiled := [profile for profile in vault.colour_profiles() if profile is not None]:
        report.notes.append(
            f"{len(profiled)} of {vault.n_pairs} images carry an ICC colour profile "
            f"({len(set(profiled))} distinct), kept and published with them; the perceptual "
            "measure reads the colour ones through their profiles"
        )
    report.storage = Storage(vault.format_version, tree_bytes(vault.path))
    if source is not None:
        _require_same_input(vault, source)
        report.storage = replace(report.storage, input_bytes=source.file_bytes())
        report.epsilon, report.perceptual = _check_epsilon(vault, source, config)
    if distance_pairs > 0:
        report.feature_distance = _feature_distance(vault, config, distance_pairs, extractor)
    if sheet is not None:
        report.sheet_pairs = _contact_sheet(vault, source, config, sheet, sheet_pairs)
        report.sheet = sheet
        if vault.receipt is None:
            report.notes.append("no receipt yet: the sheet shows version 0 and version 1")
    return report


def receipt_summary(vault: Vault) -> ReceiptSummary | None:
    """Return where the vault's root was escrowed, or None before escrow."""
    if vault.receipt is None or vault.arbiter_public_key is None:
        return None
    entry = vault.receipt.entry
    return ReceiptSummary(
        entry.index, entry.time, vault.receipt.log_size, key_id(vault.arbiter_public_key)
    )


def _require_same_input(vault: Vault, source: ImageSource) -> None:
    described = source.describe()
    for key in ("format", "count", "shapes", "images"):
        if encode(described.get(key)) != encode(vault.source.get(key)):
            raise InputError(
                f"{source.path} is not the input this vault was marked from ({key} differs)"
            )


def _check_epsilon(
    vault: Vault, source: ImageSource, config: MarkingConfig
) -> tuple[EpsilonCheck, PerceptualMeasure | None]:
    """Check ε over every pixel; measure the first :data:`PERCEPTUAL_PAIRS` pairs' look."""
    check = EpsilonCheck(config.epsilon)
    perceptual = PerceptualCheck()
    try:
        batches = source.batches_at(vault.chunk_spans())
    except ParameterError:
        raise InputError(
            f"{source.path}: its images do not line up with the vault's chunks"
        ) from None
    chunks = zip(vault.chunks(), batches, strict=True)
    profiles = vault.colour_profiles()
    for (start, version0, version1, _, names), batch in chunks:
        if batch.start != start or batch.pixels.shape != version0.shape:
            raise InputError(f"{source.path}: its images do not line up with the vault's chunks")
        check.add(batch.pixels, version0, version1)
        photo = _marked_at_work_scale(config, version0.shape[1:3])
        for offset in range(min(len(batch), PERCEPTUAL_PAIRS - perceptual.images // 2)):
            original, name, profile = batch.pixels[offset], names[offset], profiles[start + offset]
            for version in (version0, version1):
                perceptual.add(original, version[offset], photo=photo, name=name, profile=profile)
    return check, perceptual.result()


def _marked_at_work_scale(config: MarkingConfig, size: tuple[int, ...]) -> bool:
    """Return whether PGD marked images of ``size`` (H, W) at a working resolution."""
    side = config.work_scale * config.input_size
    return config.marker == "pgd" and side > 0 and max(size) > side


def _pair_chunks(vault: Vault, count: int) -> Iterator[tuple[Pixels, Pixels]]:
    """Yield both versions of the first ``count`` pairs, chunk by chunk (one shape each)."""
    left = count
    for _, version0, version1, _, _ in vault.chunks():
        if left <= 0:
            return
        take = min(left, len(version0))
        yield version0[:take], version1[:take]
        left -= take


def _feature_distance(
    vault: Vault, config: MarkingConfig, pairs: int, extractor_name: str | None
) -> FeatureDistance:
    name = extractor_name or config.extractor
    weights = config.extractor_weights if extractor_name is None else None
    input_size = config.input_size
    fallback = None
    if name in TRAINED_WHILE_MARKING:
        if config.extractor != name:
            raise ParameterError(
                f"{name} exists only while marking, and these marks were not made with"
                " it: give another extractor for the distance"
            )
        # That proxy was trained while marking and kept only as its digest: the
        # distance is measured in the default ImageNet extractor's features instead.
        kept = name
        name, weights, input_size = IMAGENET_EXTRACTOR, None, MarkingConfig().input_size
        fallback = (
            f"measured in {name}, not in {kept} (the extractor of the marks), because"
            " the marking proxy is not kept in the vault, only its weights' digest"
        )
    extractor = marking.load_extractor(name, weights=weights, input_size=input_size)
    measured: list[npt.NDArray[np.float64]] = []
    sizes: set[tuple[int, ...]] = set()
    for version0, version1 in _pair_chunks(vault, pairs):  # the extractor resizes each
        measured.append(marking.feature_distances(extractor, version0, version1))
        sizes.add(version0.shape[1:3])
    distances = np.concatenate(measured)  # a finished vault has at least one pair
    return FeatureDistance(
        name,
        input_size,
        len(distances),
        len(sizes),
        float(distances.mean()),
        float(np.median(distances)),
        fallback,
    )


def _first_images(source: ImageSource, count: int) -> list[Pixels]:
    """Return the source's first ``count`` images (its batches never mix shapes)."""
    images: list[Pixels] = []
    for batch in source.batches(count):
        images.extend(batch.pixels[: count - len(images)])
        if len(images) == count:
            break
    return images


def _contact_sheet(
    vault: Vault, source: ImageSource | None, config: MarkingConfig, path: Path, count: int
) -> int:
    """Write the sheet of the first ``count`` pairs, whatever their sizes; return how many."""
    version0: list[Pixels] = []
    version1: list[Pixels] = []
    for first, second in _pair_chunks(vault, count):
        version0.extend(first)
        version1.extend(second)
    shown = len(version0)
    rows: list[tuple[str, list[Pixels]]] = []
    if source is not None:
        rows.append(("raw", _first_images(source, shown)))
    if vault.receipt is not None:
        bits = vault.publication_bits()[:shown]
        published = [b if bit else a for a, b, bit in zip(version0, version1, bits, strict=True)]
        hidden = [a if bit else b for a, b, bit in zip(version0, version1, bits, strict=True)]
        rows += [("published", published), ("hidden", hidden)]
    else:
        rows += [("version 0", version0), ("version 1", version1)]
    gain = 127.0 / (2 * config.epsilon)
    difference = [
        np.clip(128.0 + gain * (a.astype(np.float64) - b.astype(np.float64)), 0, 255).astype(
            np.uint8
        )
        for a, b in zip(version0, version1, strict=True)
    ]
    rows.append((f"difference x{gain:.1f}", difference))
    write_fitted_contact_sheet(path, rows)
    os.chmod(path, 0o600)
    return shown
