"""How visible a mark is: CIEDE2000 colour difference, SSIM and colour cast against the original.

The ε bound says every pixel is within ε levels of the original; it does not say the
change is invisible (issue #39: a mark within 10 levels everywhere turned a sky pink).
:class:`PerceptualCheck` measures, for each version of each pair against its original:

- the CIEDE2000 colour difference ΔE₀₀ per pixel (sRGB, D65; scikit-image's
  ``rgb2lab`` and ``deltaE_ciede2000``): about 1 is the smallest difference a viewer
  notices side by side, 2-3 a noticeable one on a flat area. A colour photo read with
  an ICC profile (Display P3, Adobe RGB) is first converted to sRGB through it
  (LittleCMS, relative colorimetric), both versions and the original alike, so that
  the difference is the one a colour-managed viewer shows;
- the structural similarity (SSIM; scikit-image's ``structural_similarity``, 7×7
  windows, data range 255, colour channels averaged), 1 for identical images;
- the colour cast: the mean change per channel over the whole image, in levels (a mark
  with no colour on average has 0 here; the issue's photo had +5.7 R).

On photos of many megapixels ΔE and SSIM are measured on bands of rows spread evenly
down the image, at most :data:`MAX_MEASURED_PIXELS` pixels of each image (so that
``owner inspect`` costs seconds, not minutes); the cast on every pixel. Grey images are
measured as grey colours.

:data:`DEFAULT_DELTA_E` and :data:`DEFAULT_CAST` are the bounds ``owner inspect`` reports
the default mark against (``docs/owner.md``, "Large photos").
"""

from __future__ import annotations

import functools
import io
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final

import numpy as np
import numpy.typing as npt

Pixels = npt.NDArray[np.uint8]

#: Pixels of one image measured for ΔE and SSIM at most (bands of rows spread evenly).
MAX_MEASURED_PIXELS: Final = 1 << 17
#: Rows of one measured band.
BAND_ROWS: Final = 64
#: The bound on the mean ΔE₀₀ that the default mark keeps on photos (ε = 10).
DEFAULT_DELTA_E: Final = 3.0
#: The bound on the colour cast (levels, largest channel mean) that the default mark keeps.
DEFAULT_CAST: Final = 2.0
#: SSIM's window side (scikit-image's default); images or bands smaller are padded out.
_SSIM_WINDOW: Final = 7


@dataclass
class PerceptualCheck:
    """Perceptual differences of versions from their originals, accumulated image by image."""

    images: int = 0
    #: Versions added that are photos the default's bounds apply to (``add``'s ``photo``).
    photos: int = 0
    _delta_e_sum: float = 0.0
    _delta_e_pixels: int = 0
    _delta_e_max: float = 0.0
    _ssim: list[float] = field(default_factory=list)
    _cast: float = 0.0
    _cast_name: str | None = None
    _worst_delta_e: float = 0.0
    _worst_delta_e_name: str | None = None

    def add(
        self,
        original: Pixels,
        version: Pixels,
        *,
        photo: bool = True,
        name: str | None = None,
        profile: bytes | None = None,
    ) -> None:
        """Measure one version (H, W, C) of an image against its original.

        ``photo``: the image was marked at a working resolution, where the default
        mark's bounds (:data:`DEFAULT_DELTA_E`, :data:`DEFAULT_CAST`) apply. ``name``
        names the image in the measure's worst cases. ``profile``: the ICC profile the
        image was read with; ΔE and SSIM are measured on the colours it gives in sRGB
        (the cast stays in the file's levels). A grey image, or a profile that LittleCMS
        cannot read, is measured as sRGB.
        """
        to_srgb = _to_srgb(profile) if original.shape[2] == 3 else None
        change = version.astype(np.int16) - original.astype(np.int16)
        means = change.reshape(-1, change.shape[-1]).mean(axis=0)
        cast = float(np.abs(means).max())
        if cast > self._cast or self.images == 0:
            self._cast, self._cast_name = cast, name
        del change
        image_sum = 0.0
        image_pixels = 0
        for rows in _bands(original.shape[0], original.shape[1]):
            reference, marked = _rgb(original[rows]), _rgb(version[rows])
            if to_srgb is not None:
                reference, marked = to_srgb(reference), to_srgb(marked)
            delta_e = _delta_e(reference, marked)
            image_sum += float(delta_e.sum())
            image_pixels += delta_e.size
            self._delta_e_max = max(self._delta_e_max, float(delta_e.max()))
            self._ssim.append(_ssim(reference, marked))
        self._delta_e_sum += image_sum
        self._delta_e_pixels += image_pixels
        image_mean = image_sum / image_pixels
        if image_mean > self._worst_delta_e or self.images == 0:
            self._worst_delta_e, self._worst_delta_e_name = image_mean, name
        self.images += 1
        self.photos += int(photo)

    def result(self) -> PerceptualMeasure | None:
        """Return the measure over every image added, or None before the first."""
        if self.images == 0:
            return None
        return PerceptualMeasure(
            images=self.images,
            delta_e_mean=self._delta_e_sum / self._delta_e_pixels,
            delta_e_max=self._delta_e_max,
            ssim_mean=float(np.mean(self._ssim)),
            ssim_min=float(np.min(self._ssim)),
            cast=self._cast,
            photos=self.images == self.photos,
            cast_image=self._cast_name,
            worst_delta_e=self._worst_delta_e,
            worst_delta_e_image=self._worst_delta_e_name,
        )


@dataclass(frozen=True)
class PerceptualMeasure:
    """The perceptual differences of a set of versions from their originals.

    ``delta_e_mean`` is over every measured pixel, ``delta_e_max`` the largest;
    ``ssim_mean`` and ``ssim_min`` over the measured bands; ``cast`` the largest mean
    change of one channel over one image, in levels. ``photos``: every image measured
    was marked at a working resolution, so the default mark's bounds apply (on small
    images marked at their own size, ±ε is a large change of a few pixels, and a
    brightness shift of a 28 px image is no cast on a photo). ``cast_image`` names the
    image whose version has the largest cast, ``worst_delta_e_image`` the one whose
    version has the largest mean ΔE₀₀ (``worst_delta_e``), where names were given.
    """

    images: int
    delta_e_mean: float
    delta_e_max: float
    ssim_mean: float
    ssim_min: float
    cast: float
    photos: bool = True
    cast_image: str | None = None
    worst_delta_e: float = 0.0
    worst_delta_e_image: str | None = None

    @property
    def within_default(self) -> bool | None:
        """Whether the mean ΔE₀₀ and the cast are within the default mark's bounds.

        None where the bounds do not apply (not every image measured is a photo).
        """
        if not self.photos:
            return None
        return self.delta_e_mean <= DEFAULT_DELTA_E and self.cast <= DEFAULT_CAST

    def to_value(self) -> dict[str, float | int | bool | str | None]:
        """Return the measure as plain values (for ``--json``)."""
        return {
            "images": self.images,
            "delta_e2000_mean": self.delta_e_mean,
            "delta_e2000_max": self.delta_e_max,
            "ssim_mean": self.ssim_mean,
            "ssim_min": self.ssim_min,
            "colour_cast": self.cast,
            "within_default_bounds": self.within_default,
            "colour_cast_image": self.cast_image,
            "delta_e2000_worst_image": self.worst_delta_e_image,
            "delta_e2000_worst_image_mean": self.worst_delta_e,
        }

    def text(self) -> str:
        """Return the report's line."""
        bounds = (
            f"the default mark's bounds (mean dE <= {DEFAULT_DELTA_E:g}, cast <= {DEFAULT_CAST:g})"
        )
        if self.within_default is None:
            verdict = f"{bounds} are for photos marked at a working resolution, not these images"
        elif self.within_default:
            verdict = f"within {bounds}"
        else:
            verdict = f"ABOVE {bounds}: visible (a larger epsilon, or --no-neutral-mark?)"
            worst = [
                f"the largest cast is {self.cast_image}'s ({self.cast:.2f})"
                if self.cast_image is not None and self.cast > DEFAULT_CAST
                else "",
                f"the largest mean dE {self.worst_delta_e_image}'s ({self.worst_delta_e:.2f})"
                if self.worst_delta_e_image is not None and self.worst_delta_e > DEFAULT_DELTA_E
                else "",
            ]
            if named := [part for part in worst if part]:
                verdict += "; " + ", ".join(named)
        return (
            f"  perceptual: CIEDE2000 dE mean {self.delta_e_mean:.2f} (max {self.delta_e_max:.1f}),"
            f" SSIM mean {self.ssim_mean:.4f} (min {self.ssim_min:.4f}), colour cast"
            f" {self.cast:.2f} levels over {self.images} versions; {verdict}"
        )


def _bands(height: int, width: int) -> list[slice]:
    """Return the row bands measured: all rows, or bands spread evenly within the cap."""
    if height * width <= MAX_MEASURED_PIXELS:
        return [slice(0, height)]
    count = max(1, MAX_MEASURED_PIXELS // (BAND_ROWS * width))
    tops = np.linspace(0, height - BAND_ROWS, count).astype(int)
    return [slice(int(top), int(top) + BAND_ROWS) for top in tops]


@functools.lru_cache(maxsize=8)
def _to_srgb(profile: bytes | None) -> Callable[[Pixels], Pixels] | None:
    """Return a conversion of RGB pixels through ``profile`` to sRGB, or None (as sRGB).

    None without a profile, or where LittleCMS cannot read it or build the transform.
    """
    if profile is None:
        return None
    from PIL import Image, ImageCms  # noqa: PLC0415 - only for photos with a profile

    try:
        source = ImageCms.ImageCmsProfile(io.BytesIO(profile))
        transform = ImageCms.buildTransform(
            source, ImageCms.createProfile("sRGB"), "RGB", "RGB",
            renderingIntent=ImageCms.Intent.RELATIVE_COLORIMETRIC,
        )  # fmt: skip
    except (ImageCms.PyCMSError, OSError, ValueError, TypeError):
        return None

    def convert(pixels: Pixels) -> Pixels:
        image = Image.fromarray(np.ascontiguousarray(pixels), "RGB")
        converted: Pixels = np.asarray(ImageCms.applyTransform(image, transform), np.uint8)
        return converted

    return convert


def _rgb(pixels: Pixels) -> Pixels:
    """Return (H, W, 3) pixels: a grey image's one channel repeated."""
    return np.repeat(pixels, 3, axis=2) if pixels.shape[2] == 1 else pixels


def _delta_e(reference: Pixels, marked: Pixels) -> npt.NDArray[np.float64]:
    from skimage.color import deltaE_ciede2000, rgb2lab  # noqa: PLC0415 - optional extra

    difference: npt.NDArray[np.float64] = deltaE_ciede2000(rgb2lab(reference), rgb2lab(marked))
    return difference


def _ssim(reference: Pixels, marked: Pixels) -> float:
    from skimage.metrics import structural_similarity  # noqa: PLC0415 - optional extra

    pad = [(0, max(0, _SSIM_WINDOW - side)) for side in reference.shape[:2]] + [(0, 0)]
    if any(after for _, after in pad):
        reference = np.pad(reference, pad, mode="edge")
        marked = np.pad(marked, pad, mode="edge")
    return float(structural_similarity(reference, marked, channel_axis=2, data_range=255))
