"""The owner's item kinds as one table: how each kind is marked, published and inspected.

``twinaudit owner mark``, ``publish`` and ``inspect`` parse their arguments into the
option records below and call the handler of the item kind (:data:`KINDS`); nothing
else branches on the kind. A handler also names the options that do not apply to its
kind (:attr:`ItemKind.foreign_options`), which the command refuses before any work.

- ``image``: images marked by :func:`twinaudit.owner.mark.mark` within ε per pixel, published
  in the input's format (:func:`twinaudit.owner.publish.publish`), inspected with the ε check
  against the originals, feature distances and a contact sheet
  (:func:`twinaudit.owner.inspect.inspect_vault`);
- ``text``: texts marked by synonym swaps or paraphrases
  (:func:`twinaudit.owner.text.marking.mark_texts`), published as one file
  (:func:`twinaudit.owner.text.publication.publish_texts`), inspected against the originals the
  vault keeps (:func:`twinaudit.owner.text.report.inspect_text_vault`);
- ``captioned-image``: the images marked as ``image`` with each caption kept, published
  as images plus a captions file.

Heavy dependencies (torch, the text models) are imported by the handler that needs
them, so building the table costs nothing.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Final, Protocol

from twinaudit.protocol.errors import InputError, VaultIntegrityError

if TYPE_CHECKING:
    from .images.sources import ImageSource
    from .marking import MarkingConfig
    from .vault import Vault

#: Input suffixes that hold texts: ``owner mark`` reads them as ``text`` unless told.
TEXT_SUFFIXES: Final = (".jsonl", ".csv", ".txt")


@dataclass(frozen=True)
class TextOptions:
    """How texts are read and marked (``owner mark``'s text options, with their defaults)."""

    field: str | None = None
    text_format: str | None = None
    min_similarity: float = 0.85
    max_candidates: int = 4
    thesaurus: Path | None = None
    drop_unmarkable: bool = False
    paraphrase_model: str | None = None
    endpoint: str | None = None
    api_key_env: str = "OPENAI_API_KEY"


@dataclass(frozen=True)
class ImageOptions:
    """How images are read and marked (unset: the marking config's defaults)."""

    labels: Path | None = None
    npz_key: str | None = None
    epsilon: int | None = None
    extractor: str | None = None
    extractor_weights: str | None = None
    steps: int | None = None
    step_size: float | None = None
    input_size: int | None = None
    work_scale: int | None = None
    neutral_mark: bool | None = None
    proxy_converge: bool | None = None
    #: Bytes marking may hold (``--memory``); None: the default, 2 GiB.
    memory: int | None = None


@dataclass(frozen=True)
class MarkOptions:
    """One ``owner mark`` run: the input, the vault, and every option of every kind."""

    input: Path
    out: Path
    marker: str | None = None
    batch_size: int | None = None
    captions: Path | None = None
    device: str | None = None
    secret: bytes | None = None
    show_progress: bool = True
    image: ImageOptions = field(default_factory=ImageOptions)
    text: TextOptions = field(default_factory=TextOptions)


@dataclass(frozen=True)
class InspectOptions:
    """One ``owner inspect`` run (``input`` and what reads it: the originals, if given)."""

    input: Path | None = None
    labels: Path | None = None
    npz_key: str | None = None
    captions: Path | None = None
    distance_pairs: int = 512
    extractor: str | None = None
    sheet: Path | None = None
    sheet_pairs: int = 8


class Report(Protocol):
    """What an inspection returns: a JSON-able record and a text rendering."""

    def to_value(self) -> Any:
        """Return the report as plain values."""

    def to_text(self) -> str:
        """Return the report as lines for a terminal."""


@dataclass(frozen=True)
class Inspection:
    """An inspection's report and whether every check it made held."""

    report: Report
    holds: bool


class ItemKind(ABC):
    """One item kind's handlers (the vault's ``item_kind`` names it)."""

    #: The kind's name, as the vault and the escrow record hold it.
    name: str
    #: What ``owner publish`` calls a published item of this kind.
    noun: str
    #: ``owner mark`` options that do not apply to this kind: option name → its default
    #: (an option away from its default is refused).
    foreign_options: Mapping[str, object]

    def check_mark_options(self, values: Mapping[str, object]) -> None:
        """Raise :class:`InputError` for the first foreign option set away from its default."""
        for name, default in self.foreign_options.items():
            if values.get(name, default) != default:
                flag = "--" + name.replace("_", "-")
                raise InputError(f"{flag} does not apply to --kind {self.name}")

    @abstractmethod
    def mark(self, options: MarkOptions) -> list[str]:
        """Mark ``options.input`` into the vault ``options.out``; return the lines to report."""

    def publish(self, vault: Vault, out: Path, *, original: Path | None, show: bool) -> str:
        """Write ``vault``'s published versions under ``out``; return the line to report.

        ``original`` is the input a text vault was marked from (other kinds refuse it).
        """
        from .publish import publish  # noqa: PLC0415 - torch-free but image codecs

        if original is not None:
            raise InputError("--input applies to a text vault marked from a JSON Lines file")
        files = publish(vault, out, show_progress=show)
        return f"published {vault.n_pairs} {self.noun} in {len(files)} files under {out}"

    @abstractmethod
    def inspect(self, vault: Vault, options: InspectOptions) -> Inspection:
        """Inspect ``vault`` (against its originals when ``options.input`` is given)."""


#: Text-only ``owner mark`` options with their defaults.
_TEXT_ONLY: Final = MappingProxyType(
    {
        "field": None,
        "text_format": None,
        "min_similarity": 0.85,
        "max_candidates": 4,
        "thesaurus": None,
        "drop_unmarkable": False,
        "paraphrase_model": None,
        "endpoint": None,
    }
)
#: Image-only ``owner mark`` options with their defaults.
_IMAGE_ONLY: Final = MappingProxyType(
    {
        "labels": None,
        "npz_key": None,
        "extractor_weights": None,
        "steps": None,
        "step_size": None,
        "memory": None,
        "neutral_mark": None,
        "proxy_converge": None,
    }
)


def marked_line(result: Any, pairs: str, timing: str = "") -> str:
    """Return the line that reports a finished marking run (``pairs`` names what was marked)."""
    vault = result.vault
    resumed = f" (resumed after {result.resumed_from})" if result.resumed_from else ""
    return (
        f"marked {vault.n_pairs} {pairs} into {vault.path}{resumed}{timing}; "
        f"root {vault.root.hex()}; next: twinaudit owner escrow"
    )


def marking_config(options: MarkOptions, images: ImageSource) -> MarkingConfig:
    """Return the marking config of ``options`` for the image source ``images``.

    Without an extractor, PGD marks in the features of a proxy trained on the images
    themselves, at the side :func:`~twinaudit.owner.marking.config.own_proxy_side` picks: on their
    labels when they have them (``proxy-own``), else on their clusters
    (``proxy-clusters``); with fewer images than clustering needs, or with a weights
    file, in EfficientNet-Lite0's features.
    """
    from .marking import MarkingConfig  # noqa: PLC0415 - imports torch
    from .marking.config import (  # noqa: PLC0415
        CLUSTERS_PROXY,
        IMAGENET_EXTRACTOR,
        MIN_CLUSTERED,
        OWN_PROXY,
        TRAINED_WHILE_MARKING,
        own_proxy_side,
        pgd_defaults,
    )

    defaults = MarkingConfig()
    image = options.image
    marker = options.marker or defaults.marker
    epsilon = image.epsilon if image.epsilon is not None else defaults.epsilon
    extractor = image.extractor
    # A weights file names a network to load it into: the ImageNet one when none is named.
    trains = marker == "pgd" and image.extractor_weights is None
    if extractor is None and trains and images.has_labels:
        extractor = OWN_PROXY
    elif extractor is None and trains and len(images) >= MIN_CLUSTERED:
        extractor = CLUSTERS_PROXY
    elif extractor is None:
        extractor = IMAGENET_EXTRACTOR
    input_size = image.input_size
    if input_size is None and extractor in TRAINED_WHILE_MARKING:
        from .mark import source_shapes  # noqa: PLC0415

        sides = [(height, width) for height, width, _ in source_shapes(images)]
        input_size = own_proxy_side(sides)
    pgd = pgd_defaults(extractor, epsilon)
    return MarkingConfig(
        marker=marker,
        epsilon=epsilon,
        extractor=extractor,
        extractor_weights=image.extractor_weights,
        steps=image.steps if image.steps is not None else int(pgd["steps"]),
        step_size=image.step_size if image.step_size is not None else float(pgd["step_size"]),
        batch_size=options.batch_size if options.batch_size is not None else int(pgd["batch_size"]),
        input_size=input_size if input_size is not None else defaults.input_size,
        work_scale=image.work_scale if image.work_scale is not None else defaults.work_scale,
        neutral_mark=(
            image.neutral_mark if image.neutral_mark is not None else defaults.neutral_mark
        ),
        proxy_converge=(
            image.proxy_converge if image.proxy_converge is not None else defaults.proxy_converge
        ),
    )


def _memory(options: MarkOptions) -> int:
    """Return the memory setting of ``options`` (the default when not given)."""
    from .marking.memory import DEFAULT_MEMORY  # noqa: PLC0415

    return DEFAULT_MEMORY if options.image.memory is None else options.image.memory


def _inspect_images(
    vault: Vault, options: InspectOptions, source: ImageSource | None
) -> Inspection:
    """Inspect an image-bearing vault; the ε check fails the inspection when it does not hold."""
    from .inspect import inspect_vault  # noqa: PLC0415 - imports torch

    report = inspect_vault(
        vault,
        source=source,
        distance_pairs=options.distance_pairs,
        extractor=options.extractor,
        sheet=options.sheet,
        sheet_pairs=options.sheet_pairs,
    )
    failed = report.epsilon is not None and not report.epsilon.holds
    return Inspection(report, holds=not failed)


class ImageKind(ItemKind):
    """Images: PGD (or noise) marks within ε per pixel."""

    name = "image"
    noun = "images"
    foreign_options = MappingProxyType({"captions": None, **_TEXT_ONLY})

    def mark(self, options: MarkOptions) -> list[str]:
        """Mark the images of ``options.input``; return the report line."""
        from .images.sources import open_source  # noqa: PLC0415
        from .mark import mark  # noqa: PLC0415 - imports torch

        image = options.image
        source = open_source(
            options.input,
            labels=image.labels,
            npz_key=image.npz_key,
            upright=_upright_at(options.out),
        )
        result = mark(
            source,
            options.out,
            marking_config(options, source),
            secret=options.secret,
            device=options.device,
            memory=_memory(options),
            show_progress=options.show_progress,
        )
        return [marked_line(result, "pairs")]

    def inspect(self, vault: Vault, options: InspectOptions) -> Inspection:
        """Inspect an image vault, with the ε check when the originals are given."""
        from .images.sources import open_source, reads_upright  # noqa: PLC0415

        if options.captions is not None:
            raise InputError("--captions applies to a captioned-image vault")
        source = None
        if options.input is not None:
            source = open_source(
                options.input,
                labels=options.labels,
                npz_key=options.npz_key,
                upright=reads_upright(vault.source),  # as the vault read them
            )
        return _inspect_images(vault, options, source)


def _upright_at(out: Path) -> bool:
    """Return whether a vault begun or finished at ``out`` read its folder turned upright.

    True when there is none yet. A vault begun before images were turned by their EXIF
    orientation resumes, or is found finished, reading its folder as it did: as stored.
    A journal that cannot be read gives True; marking then reports what is wrong with it.
    """
    from .images.sources import reads_upright  # noqa: PLC0415
    from .vault.journal import read_header  # noqa: PLC0415
    from .vault.layout import JOURNAL_FILE  # noqa: PLC0415

    if not (out / JOURNAL_FILE).is_file():
        return True
    try:
        return reads_upright(read_header(out).source)
    except VaultIntegrityError:
        return True


class CaptionedImageKind(ItemKind):
    """Captioned images: the images marked as ``image``, each caption kept with its pair."""

    name = "captioned-image"
    noun = "captioned images"
    foreign_options = _TEXT_ONLY

    def mark(self, options: MarkOptions) -> list[str]:
        """Mark the captioned images of ``options.input``; return the report line."""
        from .captioned.sources import open_captioned_source  # noqa: PLC0415
        from .mark import mark  # noqa: PLC0415 - imports torch

        if options.captions is None:
            raise InputError("--kind captioned-image needs --captions (a CSV or JSON file)")
        image = options.image
        source = open_captioned_source(
            options.input,
            options.captions,
            labels=image.labels,
            npz_key=image.npz_key,
            upright=_upright_at(options.out),
        )
        result = mark(
            source,
            options.out,
            marking_config(options, source.images),
            secret=options.secret,
            device=options.device,
            memory=_memory(options),
            show_progress=options.show_progress,
        )
        return [marked_line(result, "captioned-image pairs")]

    def inspect(self, vault: Vault, options: InspectOptions) -> Inspection:
        """Inspect a captioned-image vault; its originals need their captions too."""
        from .captioned.sources import open_captioned_source  # noqa: PLC0415
        from .images.sources import reads_upright  # noqa: PLC0415

        source = None
        if options.input is not None:
            if options.captions is None:
                raise InputError("inspecting a captioned-image vault with --input needs --captions")
            source = open_captioned_source(
                options.input,
                options.captions,
                labels=options.labels,
                npz_key=options.npz_key,
                upright=reads_upright(vault.source),  # as the vault read them
            ).images
        return _inspect_images(vault, options, source)


class TextKind(ItemKind):
    """Texts: synonym swaps (or paraphrases) within an embedding-similarity bound."""

    name = "text"
    noun = "texts"
    foreign_options = MappingProxyType({"captions": None, **_IMAGE_ONLY})

    def mark(self, options: MarkOptions) -> list[str]:
        """Mark the texts of ``options.input``; return the report lines."""
        from .text.config import TextMarkingConfig  # noqa: PLC0415
        from .text.marking import mark_texts  # noqa: PLC0415
        from .text.paraphrasers import (  # noqa: PLC0415 - transformers
            ChatParaphraser,
            Paraphraser,
            Seq2SeqParaphraser,
        )
        from .text.sources import open_text_source  # noqa: PLC0415
        from .text.thesaurus import load_thesaurus  # noqa: PLC0415

        text = options.text
        marker = options.marker or "thesaurus"
        config = TextMarkingConfig(
            marker=marker,
            min_similarity=text.min_similarity,
            max_candidates=text.max_candidates,
            batch_size=options.batch_size if options.batch_size is not None else 256,
            drop_unmarkable=text.drop_unmarkable,
            model=text.paraphrase_model,
            endpoint=text.endpoint,
        )
        if marker != "thesaurus" and text.thesaurus is not None:
            raise InputError("--thesaurus applies to the thesaurus marker only")
        source = open_text_source(options.input, text_format=text.text_format, field=text.field)
        thesaurus = load_thesaurus(text.thesaurus) if marker == "thesaurus" else None
        paraphraser: Paraphraser | None = None
        if marker == "seq2seq":
            assert config.model is not None  # the config refuses seq2seq without a model
            paraphraser = Seq2SeqParaphraser.load(config.model, device=options.device or "cpu")
        elif marker == "chat":
            assert config.model is not None  # the config refuses chat without a model
            assert config.endpoint is not None  # ... or without an endpoint
            paraphraser = ChatParaphraser(
                config.endpoint, config.model, api_key_env=text.api_key_env
            )
        result = mark_texts(
            source,
            options.out,
            config,
            secret=options.secret,
            thesaurus=thesaurus,
            paraphraser=paraphraser,
            show_progress=options.show_progress,
        )
        lines = []
        if result.dropped:
            shown = ", ".join(result.dropped[:10])
            more = f" and {len(result.dropped) - 10} more" if len(result.dropped) > 10 else ""
            lines.append(
                f"left out {len(result.dropped)} unmarkable text(s) (not vaulted, never "
                f"published): {shown}{more}"
            )
        rate = f", {result.marked_now / result.seconds:.1f} texts/s" if result.marked_now else ""
        lines.append(marked_line(result, "text pairs", f" in {result.seconds:.1f} s{rate}"))
        return lines

    def publish(self, vault: Vault, out: Path, *, original: Path | None, show: bool) -> str:
        """Write the published texts as one file (keeping ``original``'s other fields)."""
        from .text.publication import publish_texts  # noqa: PLC0415

        files = publish_texts(vault, out, original=original, show_progress=show)
        return f"published {vault.n_pairs} {self.noun} in {files[0]}"

    def inspect(self, vault: Vault, options: InspectOptions) -> Inspection:
        """Inspect a text vault against the originals it keeps."""
        from .text.report import inspect_text_vault  # noqa: PLC0415

        for flag, value in (
            ("--input", options.input),
            ("--sheet", options.sheet),
            ("--extractor", options.extractor),
            ("--captions", options.captions),
        ):
            if value is not None:
                raise InputError(
                    f"{flag} does not apply to a text vault (its originals are inside)"
                )
        pairs = None if options.distance_pairs < 0 else options.distance_pairs
        report = inspect_text_vault(vault, pairs=pairs)
        return Inspection(report, holds=report.holds)


#: Every item kind an owner can mark, by name.
KINDS: Final[Mapping[str, ItemKind]] = MappingProxyType(
    {kind.name: kind for kind in (ImageKind(), TextKind(), CaptionedImageKind())}
)


def item_kind(name: str) -> ItemKind:
    """Return the handlers of the item kind ``name`` (a vault's ``item_kind``)."""
    try:
        return KINDS[name]
    except KeyError:
        raise InputError(f"unknown item kind {name!r}: one of {', '.join(KINDS)}") from None


def kind_of_input(path: Path) -> str:
    """Return the item kind ``owner mark`` reads ``path`` as when not told: text by suffix."""
    return "text" if path.suffix.lower() in TEXT_SUFFIXES else "image"
