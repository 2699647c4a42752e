"""Markers: turn each image x into twins x⁰ = x + δ, x¹ = x − δ with ‖δ‖∞ ≤ ε (paper Eq. 2).

Three markers, chosen by :attr:`MarkingConfig.marker`:

- ``pgd`` (the paper's default): maximise ‖h(x + δ) − h(x − δ)‖₂ over the box
  ‖δ‖∞ ≤ ε for a feature extractor h, by projected signed-gradient ascent from a
  uniform random start in the box. Both twins are clamped to [0, 255] inside the
  objective, so the search sees exactly the images it will output. The images of a
  batch are optimised together (their objectives are independent: the extractor is in
  eval mode), so a given batch always gives the same bytes on the same machine.
- ``bernoulli`` (appendix E): δ = ±ε per pixel and channel, each sign a fair coin.
- ``gaussian`` (appendix E): δ = clip(N(0, σ²), −ε, ε) per pixel and channel; the
  paper does not state σ, we take σ = ε (about a third of the values hit the bound).

Outputs are ``version0 = clamp(x + round(δ))`` and ``version1 = clamp(x − round(δ))``
as uint8 (round half to even, clamp to 0..255), so each version is within ε of x
everywhere. Randomness is per image (see :mod:`twinaudit.owner.marking.noise`): the noise
markers' output for image ``i`` does not depend on its batch-mates.

The marking seed is **secret**. A model trainer who learned it (and the marker) could
regenerate a noise mark δ and compute the hidden twin from the published one, which
would let her train on, or recognise, both versions and defeat the audit.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Final

import numpy as np
import numpy.typing as npt
import torch

from twinaudit.protocol import limits
from twinaudit.protocol.errors import InputError, ParameterError
from twinaudit.protocol.items import MAX_IMAGE_SIDE
from twinaudit.protocol.prg import Prg

from .config import MarkingConfig
from .extractors import Extractor, check_pixels, load_extractor
from .full_size import apply_rounded, apply_upsampled, rounded_bands, working_copy
from .memory import image_cost
from .noise import check_seed, image_stream, normals, signs, uniforms

Pixels = npt.NDArray[np.uint8]
Deltas = npt.NDArray[np.int16]
#: A mark found at a working resolution, float32 (C, h, w), before it is carried back.
MarkField = npt.NDArray[np.float32]


class Marker(ABC):
    """Makes the twin versions of the owner's images, batch by batch."""

    def __init__(self, config: MarkingConfig, seed: bytes) -> None:
        """Keep the configuration and the (secret, 32-byte) marking seed."""
        self.config = config
        self._seed = check_seed(seed)

    def mark(self, pixels: Pixels, first_index: int) -> tuple[Pixels, Pixels]:
        """Return ``(version0, version1)`` of images ``first_index .. first_index + B − 1``.

        Args:
            pixels: uint8 (B, H, W, C), C in {1, 3}.
            first_index: global index of the first image in the owner's set.

        Raises:
            InputError: wrong dtype or shape, or an index outside 0..MAX_PAIRS.

        """
        version0, version1, _ = self.mark_with_fields(pixels, first_index)
        return version0, version1

    def mark_with_fields(
        self, pixels: Pixels, first_index: int
    ) -> tuple[Pixels, Pixels, list[MarkField | None]]:
        """Return both versions, as :meth:`mark` does, and each image's mark field.

        An image's field is the float32 δ ``(C, h, w)`` its mark was carried back from
        (upsampled bilinearly and rounded), for a mark found at a working resolution;
        None otherwise. A vault stores such a mark as what the field's prediction misses
        (:mod:`twinaudit.owner.vault.mark_fields`).
        """
        check_pixels(pixels)
        if max(pixels.shape[1:3]) > MAX_IMAGE_SIDE:
            raise InputError(f"image sides above {MAX_IMAGE_SIDE} are not accepted")
        _check_index(first_index, pixels.shape[0])
        versions = np.empty((2, *pixels.shape), dtype=np.uint8)
        fields: list[MarkField | None] = [None] * pixels.shape[0]
        self.mark_into(pixels, first_index, versions, fields)
        return versions[0], versions[1], fields

    def mark_into(
        self,
        pixels: Pixels,
        first_index: int,
        versions: Pixels,
        fields: list[MarkField | None] | None = None,
    ) -> None:
        """Write both versions of checked ``pixels`` into ``versions`` (2, B, H, W, C).

        By default from :meth:`deltas` of the whole batch, applied image by image (no
        field). A marker that carries a mark back from a field sets it in ``fields``.
        """
        del fields  # a mark drawn at full size has none
        delta = self.deltas(pixels, first_index)
        for k in range(pixels.shape[0]):
            apply_rounded(pixels[k], delta[k], versions[0, k], versions[1, k])

    def memory_per_image(self, shape: tuple[int, int, int]) -> int:
        """Return the bytes an image of ``shape`` (H, W, C) costs in a batch being marked."""
        return image_cost(shape, full_size_pgd=False)

    @abstractmethod
    def deltas(self, pixels: Pixels, first_index: int) -> Deltas:
        """Return the integer marks δ (B, H, W, C), |δ| ≤ ε, for checked inputs."""


class NoiseMarker(Marker):
    """A marker whose δ for image ``i`` is drawn from image ``i``'s own stream."""

    purpose: str = ""

    def deltas(self, pixels: Pixels, first_index: int) -> Deltas:
        """Return each image's δ, drawn independently of the others."""
        out = np.empty(pixels.shape, dtype=np.int16)
        for k in range(pixels.shape[0]):
            out[k] = self._image_delta(pixels.shape[1:], first_index + k)
        return out

    def mark_into(
        self,
        pixels: Pixels,
        first_index: int,
        versions: Pixels,
        fields: list[MarkField | None] | None = None,
    ) -> None:
        """Draw and apply each image's δ in turn: one image's δ in memory at a time."""
        del fields  # drawn at full size: no field
        for k in range(pixels.shape[0]):
            delta = self._image_delta(pixels.shape[1:], first_index + k)
            apply_rounded(pixels[k], delta, versions[0, k], versions[1, k])

    def _image_delta(self, shape: tuple[int, ...], index: int) -> Deltas:
        draw = self.draw(image_stream(self._seed, self.purpose, index), int(np.prod(shape)))
        return draw.reshape(shape)

    @abstractmethod
    def draw(self, stream: Prg, size: int) -> Deltas:
        """Return ``size`` integer marks in [−ε, ε] from one image's stream."""


class BernoulliMarker(NoiseMarker):
    """δ = ±ε per pixel and channel with fair coins (appendix E, "Bernoulli mark")."""

    purpose = "bernoulli"

    def draw(self, stream: Prg, size: int) -> Deltas:
        """Return ``size`` values in {−ε, +ε}."""
        return signs(stream, size).astype(np.int16) * np.int16(self.config.epsilon)


class GaussianMarker(NoiseMarker):
    """δ = round(clip(N(0, ε²), −ε, ε)) per pixel and channel (appendix E, "Gaussian mark")."""

    purpose = "gaussian"

    def draw(self, stream: Prg, size: int) -> Deltas:
        """Return ``size`` rounded, clipped Gaussian values with σ = ε."""
        eps = float(self.config.epsilon)
        values = np.clip(normals(stream, size) * eps, -eps, eps)
        return np.rint(values).astype(np.int16)


class PgdMarker(Marker):
    """Projected signed-gradient ascent on ‖h(x + δ) − h(x − δ)‖₂ (paper §4.1, §5.2)."""

    def __init__(self, config: MarkingConfig, seed: bytes, extractor: Extractor) -> None:
        """Keep the extractor (already on its device, frozen) for every batch."""
        super().__init__(config, seed)
        self.extractor = extractor

    def deltas(self, pixels: Pixels, first_index: int) -> Deltas:
        """Optimise δ per chunk of ``config.batch_size`` images."""
        out = np.empty(pixels.shape, dtype=np.int16)
        size = self.config.batch_size
        for start in range(0, pixels.shape[0], size):
            chunk = pixels[start : start + size]
            out[start : start + size] = self._chunk_deltas(chunk, first_index + start)
        return out

    def random_start(
        self, pixels: Pixels, first_index: int, shape: tuple[int, int] | None = None
    ) -> npt.NDArray[np.float32]:
        """Return the uniform start δ₀ ∈ [−ε, ε) per image, channel-first (B, C, H, W).

        ``shape`` (height, width) is the working resolution when it is not the images'.
        """
        batch, height, width, channels = pixels.shape
        if shape is not None:
            height, width = shape
        size = channels * height * width
        eps = float(self.config.epsilon)
        start = np.empty((batch, channels, height, width), dtype=np.float32)
        for k in range(batch):
            u = uniforms(image_stream(self._seed, "pgd-start", first_index + k), size)
            start[k] = ((2.0 * u - 1.0) * eps).reshape(channels, height, width)
        return start

    def work_shape(self, height: int, width: int) -> tuple[int, int]:
        """Return the (height, width) PGD optimises an image of this size at.

        The image's own size unless its longer side exceeds ``work_scale`` times the side
        the extractor sees; then that longer side, the other scaled in proportion (at
        least 1). See :attr:`MarkingConfig.work_scale`.
        """
        side = self.extractor.input_size
        scale = self.config.work_scale
        if side is None or scale == 0 or max(height, width) <= scale * side:
            return height, width
        limit = scale * side
        factor = limit / max(height, width)
        return max(1, round(height * factor)), max(1, round(width * factor))

    def mark_into(
        self,
        pixels: Pixels,
        first_index: int,
        versions: Pixels,
        fields: list[MarkField | None] | None = None,
    ) -> None:
        """Optimise δ per chunk of ``config.batch_size`` images and write both versions.

        A photo marked at a working resolution has its δ carried back to full size and
        applied image by image, in bands (:mod:`twinaudit.owner.marking.full_size`);
        that δ is its field in ``fields``.
        """
        size = self.config.batch_size
        full = (pixels.shape[1], pixels.shape[2])
        for start in range(0, pixels.shape[0], size):
            chunk = pixels[start : start + size]
            delta = self._work_deltas(chunk, first_index + start)
            for k in range(chunk.shape[0]):
                plus, minus = versions[0, start + k], versions[1, start + k]
                if self.work_shape(*full) == full:
                    rounded = delta[k].round().to(torch.int16).permute(1, 2, 0).cpu().numpy()
                    apply_rounded(chunk[k], rounded, plus, minus)
                else:
                    apply_upsampled(chunk[k], delta[k], plus, minus)
                    if fields is not None:
                        fields[start + k] = delta[k].numpy().astype(np.float32, copy=True)

    def memory_per_image(self, shape: tuple[int, int, int]) -> int:
        """Return the bytes an image of ``shape`` costs in a batch (more at its own size)."""
        full_size = self.work_shape(shape[0], shape[1]) == (shape[0], shape[1])
        return image_cost(shape, full_size_pgd=full_size)

    def _chunk_deltas(self, pixels: Pixels, first_index: int) -> Deltas:
        delta = self._work_deltas(pixels, first_index)
        full = (pixels.shape[1], pixels.shape[2])
        out = np.empty(pixels.shape, dtype=np.int16)
        for k in range(pixels.shape[0]):
            if self.work_shape(*full) == full:
                out[k] = delta[k].round().to(torch.int16).permute(1, 2, 0).cpu().numpy()
                continue
            for rows, band in rounded_bands(delta[k], *full):
                out[k, rows] = band.numpy()
        return out

    def _work_deltas(self, pixels: Pixels, first_index: int) -> torch.Tensor:
        """Return the batch's δ at the working resolution, float (B, C, h, w), on the CPU."""
        device = self.extractor.device
        full = (pixels.shape[1], pixels.shape[2])
        work = self.work_shape(*full)
        if work == full:
            x = torch.from_numpy(np.ascontiguousarray(pixels)).to(device)
            x = x.permute(0, 3, 1, 2).float()
        else:
            # Optimise on a working-resolution copy, made image by image from the uint8
            # pixels; δ goes back to full size in bands (twinaudit.owner.marking.full_size).
            x = torch.stack([working_copy(image, work) for image in pixels]).to(device)
        delta = torch.from_numpy(self.random_start(pixels, first_index, work)).to(device)
        cfg = self.config
        neutral = cfg.neutral_mark and work != full
        if neutral:
            delta = neutral_projection(delta, float(cfg.epsilon))
        delta = pgd_ascent(
            self.extractor,
            x,
            delta,
            epsilon=float(cfg.epsilon),
            steps=cfg.steps,
            step_size=cfg.step_size,
            neutral=neutral,
        )
        return delta.cpu()


def pgd_ascent(
    extractor: Extractor,
    x: torch.Tensor,
    delta: torch.Tensor,
    *,
    epsilon: float,
    steps: int,
    step_size: float,
    neutral: bool = False,
) -> torch.Tensor:
    """Run ``steps`` of δ ← clip(δ + α·sign(∇δ Σᵢ‖h(x⁺ᵢ) − h(x⁻ᵢ)‖₂), −ε, ε).

    ``x`` and ``delta`` are float (B, C, H, W) in pixel units; x± = clamp(x ± δ, 0, 255).
    Each step is one forward and one backward pass over the 2B twins. With ``neutral``,
    each step ends with :func:`neutral_projection` instead of the clip alone.
    """
    batch = x.shape[0]
    for _ in range(steps):
        delta = delta.detach().requires_grad_(True)
        twins = torch.cat([(x + delta).clamp(0.0, 255.0), (x - delta).clamp(0.0, 255.0)])
        feats = extractor.features(twins / 255.0)
        distance = torch.linalg.vector_norm(feats[:batch] - feats[batch:], dim=1).sum()
        (grad,) = torch.autograd.grad(distance, delta)
        with torch.no_grad():
            delta = (delta + step_size * grad.sign()).clamp(-epsilon, epsilon)
            if neutral:
                delta = neutral_projection(delta, epsilon)
    return delta.detach()


#: Alternations of the neutral projection: to grey and zero mean, then clip to ±ε.
PROJECTION_ROUNDS: Final = 2


def neutral_projection(delta: torch.Tensor, epsilon: float) -> torch.Tensor:
    """Return δ (B, C, H, W) made the same in every channel and of mean zero, in ±ε.

    :data:`PROJECTION_ROUNDS` times: the mean over the channels, less its mean over the
    image, clipped to ±ε (alternating projections onto the grey zero-mean marks and
    the box). Measured on photos (``python -m bench perceptual``): no colour cast, and
    a CIEDE2000 difference a third of the free mark's.
    """
    grey = delta.mean(dim=1, keepdim=True)
    for _ in range(PROJECTION_ROUNDS):
        grey = (grey - grey.mean(dim=(2, 3), keepdim=True)).clamp(-epsilon, epsilon)
    return grey.expand_as(delta).contiguous()


def make_marker(
    config: MarkingConfig,
    seed: bytes,
    *,
    device: str | None = None,
    extractor: Extractor | None = None,
) -> Marker:
    """Build the marker ``config`` names; PGD loads its extractor here, once.

    Args:
        config: the marking settings.
        seed: the 32 secret bytes all randomness derives from (see the module docstring).
        device: torch device for PGD; ``None`` picks CUDA when available, else the CPU.
        extractor: PGD's extractor, already built (``proxy-own``, trained while
            marking); ``None`` loads the one ``config`` names.

    Raises:
        InputError: the seed is not 32 bytes; the extractor cannot be built.
        ParameterError: the device is unknown or unavailable.
        NotFoundError: the extractor's weights file is missing.

    """
    if not isinstance(config, MarkingConfig):
        raise InputError("config must be a MarkingConfig")
    check_seed(seed)
    if config.marker == "bernoulli":
        return BernoulliMarker(config, seed)
    if config.marker == "gaussian":
        return GaussianMarker(config, seed)
    torch_device = pick_device(device)
    if extractor is None:
        extractor = load_extractor(
            config.extractor,
            weights=config.extractor_weights,
            input_size=config.input_size,
        )
    return PgdMarker(config, seed, extractor.to(torch_device))


def pick_device(device: str | None) -> torch.device:
    """Return the torch device ``device`` names; ``None`` picks CUDA when available, else the CPU.

    Raises ParameterError for a name torch does not know or a CUDA device without CUDA.
    """
    if device is None:
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        chosen = torch.device(device)
    except (RuntimeError, TypeError) as exc:
        raise ParameterError(f"unknown torch device {device!r}: {exc}") from None
    if chosen.type == "cuda" and not torch.cuda.is_available():
        raise ParameterError(f"device {device!r} requested but CUDA is not available")
    return chosen


def _check_index(first_index: object, count: int) -> None:
    if isinstance(first_index, bool) or not isinstance(first_index, int):
        raise InputError("first_index must be an integer")
    if first_index < 0 or first_index + count > limits.MAX_PAIRS:
        raise InputError(f"images {first_index}..{first_index + count - 1} outside 0..MAX_PAIRS")
