"""``owner mark``: stream an image source through a marker into a vault, resumably.

The source is read batch by batch (:meth:`~twinaudit.owner.images.sources.ImageSource.batches`),
each batch is marked and written to the vault as one durable chunk, and the vault is
finished (commitments and Merkle root) when every image is in. Killed at any point and
run again with the same input and options, the run resumes after the last durable chunk
and produces exactly the files an uninterrupted run would have: batches restart at a
chunk boundary, where the batching rule yields the same batches, and the marker's
randomness depends only on the vault's secret and each image's index.
"""

from __future__ import annotations

import hashlib
import math
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from twinaudit.protocol.encoding import encode
from twinaudit.protocol.errors import InputError, ParameterError

from . import marking
from .captioned.sources import CaptionedSource
from .images.sources import ImageSource, open_source
from .marking import MarkingConfig
from .marking.config import CLUSTERS_PROXY, MIN_CLUSTERED, OWN_PROXY, TRAINED_WHILE_MARKING
from .marking.memory import (
    DEFAULT_MEMORY,
    batch_budget,
    describe,
    image_cost,
    images_per_batch,
    proxy_training_bytes,
)
from .progress import Progress
from .vault import Vault, VaultWriter
from .vault.layout import MANIFEST_FILE, MAX_CHUNK_BYTES, SECRET_BYTES
from .vault.secret import marking_seed

if TYPE_CHECKING:
    from .marking import Extractor

#: Domain prefix of a secret derived from a user-given seed (reproducible runs only).
_SEED_PREFIX = b"twinaudit/owner/v1/secret-from-seed\x00"


def secret_from_seed(seed: str) -> bytes:
    """Return a vault secret derived from ``seed``: reproducible, and only as secret as it.

    For tests, demos and experiments. A real owner lets the vault draw its secret from
    the OS: anyone who learns the secret can derive every salt and the marking seed,
    and, with the published images, the hidden versions of noise marks.
    """
    if not seed:
        raise ParameterError("the seed must not be empty")
    return hashlib.sha256(_SEED_PREFIX + seed.encode("utf-8")).digest()


@dataclass(frozen=True)
class MarkResult:
    """What a marking run did: the finished vault and how many images this run marked."""

    vault: Vault
    marked_now: int
    resumed_from: int


def mark(
    source: ImageSource | CaptionedSource,
    vault_path: Path,
    config: MarkingConfig,
    *,
    secret: bytes | None = None,
    device: str | None = None,
    memory: int = DEFAULT_MEMORY,
    show_progress: bool = True,
) -> MarkResult:
    """Mark every image of ``source`` into the vault at ``vault_path`` and finish it.

    A :class:`~twinaudit.owner.captioned.sources.CaptionedSource` makes a captioned-image vault:
    each image is marked the same way and both versions keep the image's caption.

    Every image is checked first (:meth:`~twinaudit.owner.images.sources.ImageSource.check_pixels`),
    so that a file that cannot be marked is named, with every other one, before any
    work. Creates the vault, or resumes an unfinished one started with the same source and
    configuration (a different one is refused, naming the difference). ``secret`` is
    for reproducible runs (see :func:`secret_from_seed`); by default a new vault draws
    its own. A vault that is already finished is opened and returned, provided it was
    made from the same source with the same configuration.

    ``memory`` (bytes) bounds what the run holds whatever the images' size and number
    (:mod:`twinaudit.owner.marking.memory`): batches are cut to fit it, and images that cannot
    fit are refused before any work. A run resumed with the same ``memory`` cuts the
    same batches, and so writes exactly the files an uninterrupted run would have.
    """
    images = source.images if isinstance(source, CaptionedSource) else source
    description = source.describe()
    captions = source.captions if isinstance(source, CaptionedSource) else None
    own_proxy = config.marker == "pgd" and config.extractor in TRAINED_WHILE_MARKING
    if own_proxy and config.extractor == OWN_PROXY and not images.has_labels:
        raise InputError(
            "the proxy-own extractor learns the images' labels: give --labels, or choose "
            f"another --extractor ({CLUSTERS_PROXY} learns the images' clusters instead)"
        )
    if own_proxy and config.extractor == CLUSTERS_PROXY and len(images) < MIN_CLUSTERED:
        raise InputError(
            f"the {CLUSTERS_PROXY} extractor needs at least {MIN_CLUSTERED} images to "
            f"cluster, not {len(images)}: give --labels, or choose another --extractor"
        )
    # A memory setting too small for the largest image (or for the proxy's copies of
    # them all) is refused from the headers; then every image is decoded once before
    # anything is built or written: a bad file is named with all the others at once, not
    # after minutes of marking. A proxy trained here takes its small copies of the
    # images from that pass instead of decoding every image again.
    budget = _check_memory(images, config, memory)
    # A finished vault trains no proxy again (below): no copies for it.
    trains_proxy = own_proxy and not (vault_path / MANIFEST_FILE).exists()
    squares = _ProxySquares(images, config.input_size) if trains_proxy else None
    if not images.check_pixels(visit=None if squares is None else squares.add):
        squares = None  # arrays: no pass ran, the proxy reads them itself
    item_kind = "image" if captions is None else "captioned-image"
    if (vault_path / MANIFEST_FILE).exists():
        vault = Vault.open(vault_path)
        recorded_config = MarkingConfig.from_value(vault.config)
        if own_proxy and recorded_config.extractor == config.extractor:
            # The proxy's digest is the record's; the source's equality stands for it.
            config = replace(config, extractor_weights=recorded_config.extractor_weights)
        for what, recorded, given in (
            ("source", vault.source, description),
            ("config", vault.config, config.to_value()),
        ):
            if encode(recorded) != encode(given):
                raise ParameterError(
                    f"{vault_path} is a finished vault made with another {what}; "
                    "mark into a new directory"
                )
        return MarkResult(vault, 0, vault.n_pairs)
    extractor = None
    if own_proxy:
        config, extractor = _train_own_proxy(
            images,
            config,
            budget=budget,
            show_progress=show_progress,
            device=device,
            squared=None if squares is None else squares.squared(),
        )
        del squares
    marker = None
    if not vault_path.exists() or (vault_path.is_dir() and not any(vault_path.iterdir())):
        # A new vault: build the marker (loading and checking the extractor) before
        # anything is written, so a bad option leaves no directory behind.
        secret = secret if secret is not None else os.urandom(SECRET_BYTES)
        marker = marking.make_marker(
            config, marking_seed(secret), device=device, extractor=extractor
        )
    with VaultWriter.create_or_resume(
        vault_path,
        item_kind=item_kind,
        source=description,
        config=config.to_value(),
        n_items=len(source),
        secret=secret,
    ) as writer:
        resumed_from = writer.completed
        if writer.completed < len(source):
            if marker is None:
                marker = marking.make_marker(
                    config, writer.marking_seed, device=device, extractor=extractor
                )
            progress = (
                Progress(f"marking ({config.marker})", len(source), done=writer.completed)
                if show_progress
                else None
            )
            batches = source.batches(
                config.batch_size, start=writer.completed, fits=_fits(marker, budget, config)
            )
            try:
                for batch in batches:
                    version0, version1, fields = marker.mark_with_fields(batch.pixels, batch.start)
                    batch_captions = (
                        None if captions is None else captions[batch.start : batch.stop]
                    )
                    writer.append(
                        version0,
                        version1,
                        batch.labels,
                        batch.names,
                        batch_captions,
                        originals=batch.originals,
                        photos=batch.pixels if batch.originals is not None else None,
                        # A run begun before format 4 continues without them, as begun.
                        profiles=batch.profiles if writer.keeps_profiles else None,
                        fields=fields,
                    )
                    if progress is not None:
                        progress.update(len(batch))
                    # Let go of this batch before the next is read: one batch in memory.
                    del batch, version0, version1, fields
            except BaseException:
                if show_progress and writer.completed > 0:
                    print(
                        f"{vault_path} holds {writer.completed} of {len(source)} marked "
                        "images, every one durable: the same command resumes after them",
                        file=sys.stderr,
                        flush=True,
                    )
                raise
            if progress is not None:
                progress.finish()
        vault = writer.finish()
    return MarkResult(vault, len(source) - resumed_from, resumed_from)


def _check_memory(images: ImageSource, config: MarkingConfig, memory: int) -> int:
    """Return the bytes a batch may cost under ``memory``; refuse images that cannot fit.

    Whether PGD works at an image's own size is judged from ``config.input_size`` (a
    ``proxy-cnn`` file's side may differ: the marker's own count is checked again on
    every batch). A proxy trained while marking holds a small copy of every image
    (:func:`~twinaudit.owner.marking.memory.proxy_training_bytes`), which must fit too.
    """
    shapes = source_shapes(images)
    budget = batch_budget(memory, shapes)
    for height, width, channels in shapes:
        side = config.work_scale * config.input_size
        full_size_pgd = config.marker == "pgd" and (side == 0 or max(height, width) <= side)
        cost = image_cost((height, width, channels), full_size_pgd=full_size_pgd)
        images_per_batch(cost, budget, config.batch_size)
    if config.marker == "pgd" and config.extractor in TRAINED_WHILE_MARKING:
        # The proxy trains on a small copy of every image, all in memory at once.
        training = proxy_training_bytes(len(images), config.input_size)
        if training >= budget:
            raise ParameterError(
                f"training the {config.extractor} extractor on {len(images)} images at "
                f"{config.input_size} px holds {describe(training)}, more than the memory "
                f"setting leaves ({describe(budget)}): raise --memory"
            )
    return budget


def _fits(
    marker: marking.Marker, budget: int, config: MarkingConfig
) -> Callable[[tuple[int, int, int]], int]:
    """Return how many images of a shape a batch of ``marker``'s holds within ``budget``."""

    def fits(shape: tuple[int, int, int]) -> int:
        # A batch is one chunk file of the vault, which holds both versions.
        most = min(config.batch_size, MAX_CHUNK_BYTES // (2 * math.prod(shape)))
        return images_per_batch(marker.memory_per_image(shape), budget, most)

    return fits


def _train_own_proxy(
    images: ImageSource,
    config: MarkingConfig,
    *,
    budget: int,
    show_progress: bool,
    device: str | None = None,
    squared: npt.NDArray[np.uint8] | None = None,
) -> tuple[MarkingConfig, Extractor]:
    """Train the ``proxy-own`` or ``proxy-clusters`` extractor on ``images``.

    Every image is resized to ``config.input_size`` (grey ones repeated to three
    channels when any is in colour), read in batches of at most ``budget`` bytes, unless
    ``squared`` holds them so already (:class:`_ProxySquares`, from the check's pass).
    ``proxy-own`` learns the labels, as class indices in sorted order;
    ``proxy-clusters`` each image's cluster
    (:func:`~twinaudit.owner.marking.clusters.cluster_labels`, on the resized images).
    It trains on ``device`` (CUDA when there is one, unless told), until it fits the
    images when ``config.proxy_converge`` (:class:`~twinaudit.owner.marking.proxy.FitCheck`), else
    every step. Returns ``config`` with the trained weights' digest as its
    ``extractor_weights``, and the extractor. Raises ParameterError when ``config``
    already names another digest (a resumed run whose proxy did not train again bit for
    bit).
    """
    # torch is imported here, on use: reading or resuming other vaults does without it.
    from .marking.extractors import proxy_extractor  # noqa: PLC0415
    from .marking.markers import pick_device  # noqa: PLC0415
    from .marking.proxy import (  # noqa: PLC0415
        FitCheck,
        own_proxy_epochs,
        train_own_proxy,
        weights_digest,
    )

    side = config.input_size
    labels = images.labels()
    if squared is None:
        colour = any(channels == 3 for channels in _channel_counts(images))
        pixels = []
        # Read three bytes per pixel byte (the pixels, a grey image's colour copy, its
        # resize) in what the training set, all of it in memory, leaves.
        room = budget - proxy_training_bytes(len(images), side)
        for batch in images.batches(256, fits=lambda shape: room // (3 * math.prod(shape))):
            pixels.append(_square(batch.pixels, side, colour=colour))
        squared = np.concatenate(pixels)
    if config.extractor == CLUSTERS_PROXY:
        from .marking.clusters import cluster_labels  # noqa: PLC0415

        if show_progress:
            print(f"clustering {len(squared)} images for the proxy", flush=True)
        targets = cluster_labels(squared)
        learns = f"images and their {int(targets.max()) + 1} clusters"
    else:
        classes = {label: index for index, label in enumerate(sorted(set(labels)))}  # type: ignore[type-var]
        targets = np.array([classes[label] for label in labels], dtype=np.int64)
        learns = "labelled images"
    epochs = own_proxy_epochs(len(targets))
    check = FitCheck(len(targets))
    # Counted in optimiser steps, as the line above it states the length; an epoch of
    # n images is ⌈n / batch⌉ steps.
    steps = epochs * check.per_epoch
    progress = Progress("training the proxy", steps, unit="steps") if show_progress else None
    done = [0]

    def advance(epoch: int, _loss: float, _accuracy: float) -> None:
        if progress is not None:
            progress.update((epoch - done[0]) * check.per_epoch)
        done[0] = epoch

    torch_device = pick_device(device)
    where = "one thread" if torch_device.type == "cpu" else str(torch_device)
    length = "until it fits them, at most " if config.proxy_converge else ""
    if progress is not None:
        print(
            f"training the {config.extractor} extractor on {len(targets)} {learns} at "
            f"{side}x{side} ({length}{steps} steps, {where})",
            flush=True,
        )
    model = train_own_proxy(
        squared,
        targets,
        seed=0,
        converge=config.proxy_converge,
        device=str(torch_device),
        progress=advance,
        check=check,
    )
    if progress is not None:
        progress.finish()
        if check.stopped_step is not None:
            print(
                f"the proxy fits its {len(targets)} images after {check.stopped_step} steps",
                flush=True,
            )
    digest = weights_digest(model)
    if config.extractor_weights not in (None, digest):
        raise ParameterError(
            f"the proxy trained again on these images has weights {digest}, not the "
            f"recorded {config.extractor_weights}: it retrains bit for bit only on the "
            "same machine, device and torch; mark into a new directory"
        )
    return replace(config, extractor_weights=digest), proxy_extractor(model, side)


def source_shapes(images: ImageSource) -> list[tuple[int, int, int]]:
    """Return the (height, width, channels) of each shape among ``images`` (:meth:`describe`)."""
    shapes = []
    for entry in images.describe()["shapes"]:  # type: ignore[union-attr]
        assert isinstance(entry, dict)
        shape = entry["shape"]
        assert isinstance(shape, list)
        assert all(isinstance(side, int) for side in shape)
        height, width, channels = shape
        shapes.append((int(height), int(width), int(channels)))  # type: ignore[arg-type]
    return shapes


def _square(pixels: npt.NDArray[np.uint8], side: int, *, colour: bool) -> npt.NDArray[np.uint8]:
    """Return images (B, H, W, C) as the proxy takes them: ``side`` square, colour if ``colour``."""
    from .marking.proxy import square_images  # noqa: PLC0415 - torch, on use

    if colour and pixels.shape[3] == 1:
        pixels = np.repeat(pixels, 3, axis=3)
    return square_images(pixels, side)


class _ProxySquares:
    """The proxy's training images, each squared as the check's pass decodes it.

    Squaring image by image gives what squaring a batch of one shape gives (the resize
    treats each image alone), so the proxy trains on the same array either way.
    """

    def __init__(self, images: ImageSource, side: int) -> None:
        """Square the images of ``images`` to ``side``, colour if any of them is."""
        self._count = len(images)
        self._side = side
        self._colour = any(channels == 3 for channels in _channel_counts(images))
        self._squares: dict[int, npt.NDArray[np.uint8]] = {}

    def add(self, index: int, pixels: npt.NDArray[np.uint8]) -> None:
        """Keep image ``index`` squared (an image that did not decode is never added)."""
        self._squares[index] = _square(pixels[np.newaxis], self._side, colour=self._colour)[0]

    def squared(self) -> npt.NDArray[np.uint8]:
        """Return every image, squared, as one (N, side, side, C) array, in source order."""
        missing = self._count - len(self._squares)
        if missing:  # the check refuses any image that does not decode before this
            raise ParameterError(f"{missing} of {self._count} images were not read for the proxy")
        return np.stack([self._squares[index] for index in range(self._count)])


def _channel_counts(images: ImageSource) -> set[int]:
    """Return the channel counts among ``images``' shapes."""
    return {channels for _, _, channels in source_shapes(images)}


def mark_path(
    input_path: Path,
    vault_path: Path,
    config: MarkingConfig,
    *,
    labels: Path | None = None,
    npz_key: str | None = None,
    secret: bytes | None = None,
    device: str | None = None,
    memory: int = DEFAULT_MEMORY,
    show_progress: bool = True,
) -> MarkResult:
    """Open the input at ``input_path`` (folder, npy, npz or idx) and :func:`mark` it."""
    source = open_source(input_path, labels=labels, npz_key=npz_key)
    return mark(
        source,
        vault_path,
        config,
        secret=secret,
        device=device,
        memory=memory,
        show_progress=show_progress,
    )
