"""The photo rung (issue #39, part 7): the owner's items are photos, the model's input is not.

A practitioner never trains on an owner's photo as it is: she resizes it to her model's
input. Here the owner's 200 items of an experiment (rung (a)'s share) are made photos
of about a megapixel — each 28×28 Fashion-MNIST image upscaled to
:data:`PHOTO_SIDE` px with PIL's bicubic filter, given a colour tint of unit
luminance, a low-frequency texture and sensor noise (:func:`make_photo`) — and
written as a folder of PNG files with a JSON label list. The owner marks them with
``owner mark``'s defaults with labels (``proxy-own``), at full size, through the
CLI's own configuration code (:func:`twinaudit.owner.kinds.marking_config`) and
:func:`twinaudit.owner.mark.mark`: the default neutral mark (:data:`NEUTRAL_MARKER`) and the
same with ``--no-neutral-mark`` (:data:`FREE_MARKER`), from the same photos and
secret.

The practitioner resizes the published photos with her own library and settings
(:func:`practitioner_resize`: PIL, to grey, Lanczos to 28×28) and trains rung (a)'s
network on them beside her other 28 px images. Her model is served so that it resizes
every query the same way before the network (:class:`ResizingOracle`): the claim
sends the items at their native size, and the oracle brings them to its own input.

numpy, PIL and the verifier's oracle interface only; nothing here trains.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Final

import numpy as np
import numpy.typing as npt
from PIL import Image

from twinaudit.owner.images.sources import open_source
from twinaudit.owner.kinds import ImageOptions, MarkOptions, marking_config
from twinaudit.owner.mark import mark
from twinaudit.owner.marking import MarkingConfig
from twinaudit.owner.marking import proxy as proxy_module
from twinaudit.owner.vault import Vault
from twinaudit.protocol.oracles.base import ClassifierOracle, ClassifyAnswer, F32Images, OracleInfo
from twinaudit.protocol.seeds import publication_bits

#: The work directory's record of the photo vaults' mark sizes (keyed by vault name).
MARK_SIZES_FILE: Final = "photo-marks.jsonl"
#: The photos' side: 1024 × 1024 px, about a megapixel (1.05 MP).
PHOTO_SIDE: Final = 1024
#: The vault marker names of the photo rung: ``owner mark``'s default with labels
#: (``proxy-own``, neutral mark) and the same with ``--no-neutral-mark``.
NEUTRAL_MARKER: Final = "photoown"
FREE_MARKER: Final = "photoownfree"
#: The default mark published as JPEG files (:data:`PUBLISHED_JPEG_QUALITIES`): a vault made
#: as :data:`NEUTRAL_MARKER`'s (the same photos, secret, proxy and settings: bit for bit
#: when marked with the same torch threads; PGD's sign steps follow the float sums'
#: order, so with other threads a few pairs' marks differ); the practitioner decodes the
#: JPEG she downloaded before her resize.
JPEG_MARKER: Final = "photoownjpeg"
#: The same, published at a lower JPEG quality (:data:`PUBLISHED_JPEG_QUALITIES`).
JPEG_LOW_MARKER: Final = "photoownjpeglow"
#: Whether each photo marker's marks are neutral (``MarkingConfig.neutral_mark``).
PHOTO_MARKERS: Final = {
    NEUTRAL_MARKER: True,
    FREE_MARKER: False,
    JPEG_MARKER: True,
    JPEG_LOW_MARKER: True,
}
#: The JPEG quality the owner publishes each JPEG marker's photos at (PIL's encoder,
#: 4:2:0 chroma subsampling, its default at these qualities): 85, a photo site's
#: re-encoding; 75, PIL's own default quality.
PUBLISHED_JPEG_QUALITIES: Final = {JPEG_MARKER: 85, JPEG_LOW_MARKER: 75}
#: The side of the practitioner's model input (rung (a)'s network).
MODEL_SIDE: Final = 28
#: The practitioner's resize: PIL's Lanczos filter (antialiased when reducing).
PRACTITIONER_FILTER: Final = Image.Resampling.LANCZOS
#: The photos' texture: low-frequency multiplicative grain (relative amplitude), its
#: grid, and the sensor noise (levels, Gaussian).
TEXTURE_AMPLITUDE: Final = 0.06
TEXTURE_GRID: Final = 64
NOISE_LEVELS: Final = 3.0
#: How far each channel of a photo's tint strays from grey before it is brought back
#: to unit luminance (ITU-R 601, what PIL's conversion to grey weighs).
TINT_SPREAD: Final = 0.15
LUMA: Final = np.array([0.299, 0.587, 0.114])


#: The input her fixed-input model declares (H, W, C), as ``oracle serve`` would.
MODEL_INPUT: Final = (MODEL_SIDE, MODEL_SIDE, 1)
#: The trainers whose photo models are audited as the product audits a fixed-input
#: model: the oracle declares :data:`MODEL_INPUT` and the arbiter fits every query to it
#: (spec §10.2 step 5, rule ``area``, then the copies drawn at that size). The photo
#: rung trained as rung (b) is; rung (a)'s models answer behind her own resize
#: (:class:`ResizingOracle`), as its claims were recorded.
ARBITER_FIT_TRAINERS: Final = frozenset({"resnet-sgd"})


def is_photo_marker(marker: str) -> bool:
    """Return whether ``marker`` names one of the photo rung's vaults."""
    return marker in PHOTO_MARKERS


def fits_at_arbiter(trainer: str) -> bool:
    """Return whether claims on photos reach a ``trainer`` model through the arbiter's fit."""
    return trainer in ARBITER_FIT_TRAINERS


def make_photo(
    item: npt.NDArray[np.uint8], rng: np.random.Generator, side: int = PHOTO_SIDE
) -> npt.NDArray[np.uint8]:
    """Return a ``side``×``side`` RGB photo (uint8) made from a small grey ``item``.

    Bicubic upscaling (PIL), a colour tint whose luminance is one (so that the grey a
    practitioner converts it to keeps the item's brightness), a multiplicative
    texture of relative amplitude :data:`TEXTURE_AMPLITUDE` on a
    :data:`TEXTURE_GRID`-cell grid upscaled bilinearly, and Gaussian sensor noise of
    :data:`NOISE_LEVELS` levels; rounded and clipped to 0..255.
    """
    grey = np.asarray(
        Image.fromarray(np.ascontiguousarray(item)).resize((side, side), Image.Resampling.BICUBIC),
        dtype=np.float32,
    )
    tint = 1.0 + rng.uniform(-TINT_SPREAD, TINT_SPREAD, size=3)
    tint /= float(LUMA @ tint)
    grain = rng.normal(0.0, 1.0, size=(TEXTURE_GRID, TEXTURE_GRID)).astype(np.float32)
    grain_image = Image.fromarray(grain, mode="F").resize((side, side), Image.Resampling.BILINEAR)
    texture = 1.0 + TEXTURE_AMPLITUDE * np.asarray(grain_image, dtype=np.float32)
    photo = grey[:, :, None] * texture[:, :, None] * tint[None, None, :].astype(np.float32)
    photo += rng.normal(0.0, NOISE_LEVELS, size=photo.shape).astype(np.float32)
    pixels: npt.NDArray[np.uint8] = np.clip(np.rint(photo), 0, 255).astype(np.uint8)
    return pixels


def write_photos(
    items: npt.NDArray[np.uint8],
    labels: npt.NDArray[np.integer],
    folder: Path,
    *,
    seed: int,
    side: int = PHOTO_SIDE,
) -> Path:
    """Write ``items`` (N, h, w) as photos ``folder/photos/photo-NNNN.png``; return the labels file.

    The labels go, in the photos' order, to ``folder/labels.json``. The randomness is
    seeded by ``seed`` (the experiment's): the same items make the same photos.
    """
    photos = folder / "photos"
    photos.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng([seed, 39, 7])
    for index, item in enumerate(items):
        photo = make_photo(item, rng, side)
        Image.fromarray(photo).save(photos / f"photo-{index:04d}.png", compress_level=1)
    labels_file = folder / "labels.json"
    labels_file.write_text(json.dumps([int(y) for y in labels]))
    return labels_file


@contextlib.contextmanager
def proxies_kept_in(folder: Path) -> Iterator[None]:
    """While open, each proxy ``owner mark`` trains on the owner's items is kept in ``folder``.

    :func:`twinaudit.owner.marking.proxy.train_own_proxy` is wrapped: a proxy already trained on
    the same images, labels, seed and steps is read back from its file instead of
    trained again (training is deterministic on one thread, so it is the same proxy,
    and the vault records its weights' digest either way). The neutral and the free
    marks of a seed share one proxy: 3,160 steps once, not twice.
    """
    original = proxy_module.train_own_proxy

    def kept(
        images: npt.NDArray[np.uint8],
        labels: npt.NDArray[np.integer],
        *,
        seed: int = 0,
        steps: int | None = None,
        converge: bool = True,
        device: str = "cpu",
        progress: Callable[[int, float, float], None] | None = None,
        check: proxy_module.FitCheck | None = None,
    ) -> proxy_module.SmallCNN:
        fit = " fit" if converge else ""  # the names of proxies trained every step stay
        what = f"{images.shape} {seed} {steps} {proxy_module.OWN_STEPS}{fit}".encode()
        name = hashlib.sha256(what + images.tobytes() + np.asarray(labels).tobytes()).hexdigest()
        path = folder / f"own-photos-{name[:16]}.pt"
        if path.exists():
            return proxy_module.load_proxy_state(str(path))[0]
        model = original(
            images,
            labels,
            seed=seed,
            steps=steps,
            converge=converge,
            device=device,
            progress=progress,
            check=check,
        )
        folder.mkdir(parents=True, exist_ok=True)
        proxy_module.write_proxy(model, path)
        return model

    proxy_module.train_own_proxy = kept
    try:
        yield
    finally:
        proxy_module.train_own_proxy = original


def mark_photos(
    folder: Path, vault_path: Path, *, neutral: bool, secret: bytes, proxies: Path | None = None
) -> MarkingConfig:
    """Mark the photos :func:`write_photos` wrote in ``folder`` as ``owner mark`` does with labels.

    The configuration is the CLI's (:func:`twinaudit.owner.kinds.marking_config`: no option but
    the labels, and ``--no-neutral-mark`` when ``neutral`` is false) as it was when the
    photo rung ran, before ``--proxy-converge`` (so ``--no-proxy-converge``); returns it. With
    ``proxies``, the proxy is kept there and shared (:func:`proxies_kept_in`).
    """
    options = MarkOptions(
        input=folder / "photos",
        out=vault_path,
        secret=secret,
        show_progress=False,
        image=ImageOptions(
            labels=folder / "labels.json",
            neutral_mark=None if neutral else False,
            proxy_converge=False,
        ),
    )
    source = open_source(options.input, labels=options.image.labels)
    config = marking_config(options, source)
    with proxies_kept_in(proxies) if proxies is not None else contextlib.nullcontext():
        mark(source, vault_path, config, secret=secret, show_progress=False)
    return config


def practitioner_resize(
    photo: npt.NDArray[np.uint8], side: int = MODEL_SIDE
) -> npt.NDArray[np.uint8]:
    """Return the practitioner's ``side``×``side`` grey copy of ``photo`` (H, W, C) uint8.

    PIL: converted to grey (``"L"``, ITU-R 601 luma), then resized with
    :data:`PRACTITIONER_FILTER`.
    """
    pixels = photo[..., 0] if photo.shape[-1] == 1 else photo
    image = Image.fromarray(np.ascontiguousarray(pixels))
    if image.mode != "L":
        image = image.convert("L")
    return np.asarray(image.resize((side, side), PRACTITIONER_FILTER), dtype=np.uint8)


def published_bits(vault: Vault, rho: bytes) -> npt.NDArray[np.bool_]:
    """Return the publication bits of ``vault`` under the arbiter randomness ``rho``."""
    return np.array(publication_bits(vault.root, rho, len(vault)), dtype=bool)


def iter_pairs(vault: Vault) -> Iterator[tuple[npt.NDArray[np.uint8], npt.NDArray[np.uint8], int]]:
    """Yield each pair's two versions (H, W, C) and its label (−1 without), in order."""
    for _, v0, v1, labels, _ in vault.chunks():
        for k, label in enumerate(labels):
            yield v0[k], v1[k], int(label) if label is not None else -1


def publication_quality(marker: str) -> int | None:
    """Return the JPEG quality ``marker``'s photos are published at (None: as PNG, exactly)."""
    return PUBLISHED_JPEG_QUALITIES.get(marker)


def as_published(image: npt.NDArray[np.uint8], quality: int | None) -> npt.NDArray[np.uint8]:
    """Return the photo a practitioner downloads: ``image`` itself, or its JPEG decoded."""
    if quality is None:
        return image
    buffer = io.BytesIO()
    Image.fromarray(image.squeeze(axis=2) if image.shape[2] == 1 else image).save(
        buffer, format="JPEG", quality=quality
    )
    decoded = np.asarray(Image.open(buffer), dtype=np.uint8)
    return decoded.reshape(image.shape)


def published_resized(
    vault: Vault, rho: bytes, quality: int | None = None
) -> tuple[npt.NDArray[np.uint8], npt.NDArray[np.int64]]:
    """Return what the practitioner trains on from ``vault``: the published versions, resized.

    Version b_i of pair i (the bits of ``rho``), published as JPEG at ``quality`` when it
    is not None (:func:`as_published`), through :func:`practitioner_resize`.
    """
    bits = published_bits(vault, rho)
    images, labels = [], []
    for index, (v0, v1, label) in enumerate(iter_pairs(vault)):
        images.append(practitioner_resize(as_published(v1 if bits[index] else v0, quality)))
        labels.append(label)
    return np.stack(images), np.array(labels, dtype=np.int64)


def mark_sizes(
    vault: Vault, photos: Path, rho: bytes, quality: int | None = None
) -> dict[str, float | int]:
    """Measure the marks of ``vault`` at full size and after the practitioner's resize.

    Against the original photos in ``photos`` (the folder :func:`write_photos` wrote),
    over every pair's published version: the largest and mean |δ| in levels at full
    size (every channel of every pixel), and the same between the practitioner's
    resized copies of the published and of the original photo; also the mean of each
    photo's mean δ (a brightness shift) at full size. With ``quality`` (JPEG
    publication), the resized copy of the published photo is of its JPEG decoded; the
    full-size figures stay the committed version's.
    """
    bits = published_bits(vault, rho)
    names = sorted(p.name for p in photos.iterdir() if p.suffix == ".png")
    full_max = small_max = 0
    full_mean: list[float] = []
    small_mean: list[float] = []
    shift: list[float] = []
    for index, (v0, v1, _) in enumerate(iter_pairs(vault)):
        original = np.asarray(Image.open(photos / names[index]), dtype=np.uint8)
        published = v1 if bits[index] else v0
        delta = published.astype(np.int16) - original.reshape(published.shape).astype(np.int16)
        full_max = max(full_max, int(np.abs(delta).max()))
        full_mean.append(float(np.abs(delta).mean()))
        shift.append(float(delta.mean()))
        resized = practitioner_resize(as_published(published, quality)).astype(np.int16)
        small = resized - practitioner_resize(original).astype(np.int16)
        small_max = max(small_max, int(np.abs(small).max()))
        small_mean.append(float(np.abs(small).mean()))
    return {
        "pairs": len(full_mean),
        "full_max": full_max,
        "full_mean": round(float(np.mean(full_mean)), 3),
        "full_shift": round(float(np.mean(shift)), 3),
        "resized_max": small_max,
        "resized_mean": round(float(np.mean(small_mean)), 3),
    }


def load_mark_sizes(path: Path) -> dict[str, dict[str, object]]:
    """Return the mark-size records in ``path`` by vault name (none if it is not there)."""
    if not path.exists():
        return {}
    found: dict[str, dict[str, object]] = {}
    for line in path.read_text().splitlines():
        try:
            record = json.loads(line)
        except json.JSONDecodeError:  # a torn last line
            continue
        found[str(record["key"])] = record
    return found


class ResizingOracle(ClassifierOracle):
    """A classifier served behind the practitioner's own resize (her deployment).

    Each query (float32 (N, H, W, C) in [0, 1], at the item's native size) is rounded
    to 8-bit, brought to the model's input by :func:`practitioner_resize`, and passed
    to the wrapped oracle as (N, side, side, 1). The description is the wrapped one's.
    """

    def __init__(self, inner: ClassifierOracle, side: int = MODEL_SIDE) -> None:
        """Serve ``inner`` (a model taking ``side``×``side`` grey images)."""
        self._inner = inner
        self._side = side

    @property
    def info(self) -> OracleInfo:
        """Return the wrapped oracle's self-description."""
        return self._inner.info

    def classify(self, images: F32Images) -> ClassifyAnswer:
        """Resize each image as the practitioner does, then classify."""
        pixels = np.clip(np.rint(np.asarray(images) * 255.0), 0, 255).astype(np.uint8)
        small = np.stack([practitioner_resize(image, self._side) for image in pixels])
        return self._inner.classify(small[..., None].astype(np.float32) / 255.0)
