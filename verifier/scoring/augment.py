"""Perturbation families of the image score functions (spec §10.3, §10.4).

Each of the K copies of a version is described by a *parameter map* — a canonical
map of integers and booleans, recorded in the transcript — drawn from the version's
PRG stream ``augment/<i>/<v>`` by :func:`draw_params` and applied by :func:`apply`.
Everything here is plain IEEE 754 binary64 arithmetic in numpy; nothing reads a
global RNG, so a replay (or another implementation) draws the same parameters and
produces the same query bytes.

Families, and their draws per copy in this order (``prg`` is the stream):

``none``
    No draw. Parameters ``{"family": "none"}``; the copy is the image itself.

``random-resized-crop`` (torchvision's ``RandomResizedCrop`` algorithm, scale
(0.8, 1.0), ratio (3/4, 4/3))
    With ``A = float(H·W)``, for ``attempt = 1..10``:

    1. ``s = prg.uniform_range(0.8, 1.0)``;
    2. ``r = prg.uniform_range(LOG_RATIO_LO, LOG_RATIO_HI)`` with
       ``LOG_RATIO_LO = ln(0.75)`` and ``LOG_RATIO_HI = ln(fl(4/3))``, exactly the
       binary64 values ``-0x1.269621134db92p-2`` and ``0x1.269621134db91p-2``;
    3. ``a = exp(r)``, ``w = rint(sqrt((A·s)·a))``, ``h = rint(sqrt((A·s)/a))``
       where ``rint`` rounds half to even and every operation is binary64 (``exp``
       as the C library's: an ``exp`` off by one ulp could change a draw only where
       a square root lands within about 1e-16 of a half-integer; the integers
       drawn are what the transcript records and what :func:`apply` uses);
    4. if ``1 ≤ w ≤ W`` and ``1 ≤ h ≤ H``: ``top = prg.randint(0, H−h)``, then
       ``left = prg.randint(0, W−w)``, and stop.

    If no attempt is accepted (no further draws), the centre-crop fallback: with
    ``q = W/H``, if ``q < 0.75`` then ``w = W``, ``h = rint(W/0.75)``; else if
    ``q > 4/3`` then ``h = H``, ``w = rint(H·(4/3))``; else ``h, w = H, W``; and
    ``top = (H−h) // 2``, ``left = (W−w) // 2``. Parameters
    ``{"family": "random-resized-crop", "top", "left", "height", "width"}``. The
    crop is resized back to ``H×W`` by :func:`resize_bilinear`.

``random-resized-crop-flip`` (the paper's crops, then a horizontal flip)
    The ``random-resized-crop`` draws above, then ``flip = prg.coin()``. Parameters
    ``{"family": "random-resized-crop-flip", "top", "left", "height", "width",
    "flip"}``. The crop is resized back to ``H×W`` and mirrored left–right when
    ``flip`` is true.

``simclr-crop-flip`` (SimCLR's crop and flip: ``RandomResizedCrop`` with scale
(0.08, 1.0), ratio (3/4, 4/3), then a horizontal flip with probability 1/2)
    The ``random-resized-crop`` procedure above with ``s = prg.uniform_range(0.08,
    1.0)`` in step 1 (everything else, the fallback included, unchanged), then
    ``flip = prg.coin()``. Parameters ``{"family": "simclr-crop-flip", "top",
    "left", "height", "width", "flip"}``. The crop is resized back to ``H×W`` and
    mirrored left–right when ``flip`` is true.

``random-resized-crop-v2``, ``random-resized-crop-flip-v2``, ``simclr-crop-flip-v2``
(the same crops, drawn without libm)
    As the family without ``-v2``, but each attempt draws ``s`` as in step 1, then
    ``t = prg.uniform_range(-1.0, 1.0)``, and with ``T = A·s``, ``a = 7 + t`` and
    ``b = 7 − t`` (so that ``a/b`` lies in [3/4, 4/3)) takes
    ``w = rint(sqrt((T·a)/b))`` and ``h = rint(sqrt((T·b)/a))`` (:func:`crop_size`):
    every operation is one of IEEE 754's correctly rounded ``+ − × ÷ sqrt``, so every
    conforming platform draws the same integers, where ``exp`` in step 3 of the
    families without ``-v2`` is the C library's. The aspect ratio ``a/b`` is not
    log-uniform, but its logarithm ``2·artanh(t/7)`` has a density within 2.1 % of
    uniform over the same range. Parameters as the family without ``-v2``, with the
    family's own name.

``dither`` (the image itself, each intensity moved by at most one level)
    ``key = prg.read(32)``. Parameters ``{"family": "dither", "key": <32 bytes>}``.
    With ``β_m`` bit ``m`` of the bit stream (spec §5.4) of the PRG stream named by
    seed ``key`` and label ``"dither"``, the intensity ``p_n`` (0..255) at position
    ``n`` of the image in row-major (row, column, channel) order becomes
    ``min(max(p_n + β_{2n} − β_{2n+1}, 0), 255)``: one level down with probability ¼,
    up with ¼, unchanged with ½. It is the family to use where no perturbation is
    wanted: a copy is never the published file (a query bit-identical to it would
    tell the oracle which twin is published), yet it is as close to it as 8-bit
    images allow.

``pad-shift-flip-dither`` (``pad-shift-flip``, then ``dither``)
    The ``pad-shift-flip`` draws, then ``key = prg.read(32)``. Parameters
    ``{"family": "pad-shift-flip-dither", "top", "left", "flip", "key"}``. The
    ``pad-shift-flip`` copy (window of the zero-padded image, mirrored if ``flip``) is
    dithered as ``dither`` describes, in its own row-major order. A ``pad-shift-flip``
    copy is one of the 162 placements of the image, which a host holding the published
    file can list; this one is not.

``noise`` (each intensity moved by up to 31 levels)
    ``key = prg.read(32)``. Parameters ``{"family": "noise", "key": <32 bytes>}``.
    With ``β_m`` bit ``m`` of the bit stream of seed ``key`` and label ``"noise"``,
    position ``n`` (row-major, as ``dither``) reads ``v_n = Σ_j β_{6n+j}·2^j`` for
    ``j`` in 0..5 and moves by ``v_n − 31`` where ``v_n < 32``, else ``v_n − 32``
    (symmetric in −31..31, 0 twice as likely as any other step), clipped to 0..255.
    For models that fit their training images exactly and answer labels only: such a
    model labels copies within a level or a shift of an image alike, and copies this
    far away now and then not (:func:`noise_steps`).

``pad-shift-flip`` (the usual CIFAR training augmentation)
    ``top = prg.randint(0, 8)``, ``left = prg.randint(0, 8)``, ``flip = prg.coin()``.
    Parameters ``{"family": "pad-shift-flip", "top", "left", "flip"}``. The image is
    padded with 4 rows/columns of zeros on every side, the ``H×W`` window at
    ``(top, left)`` is cut out, and mirrored left–right when ``flip`` is true.

Copies are drawn one after the other from the same stream (copy 0 first). Pixel
values enter as float64 in [0, 1] (:func:`to_unit`: ``u8 / 255``) and leave as
float32 rounded to nearest, clipped to [0, 1].
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Final

import numpy as np
import numpy.typing as npt

from twinaudit.protocol.claim.scores.perturbations import FAMILIES, MAX_COPIES
from twinaudit.protocol.encoding import Value
from twinaudit.protocol.errors import InputError, ParameterError
from twinaudit.protocol.items import MAX_IMAGE_SIDE
from twinaudit.protocol.prg import Prg

#: Area fraction range of ``random-resized-crop``.
SCALE: Final = (0.8, 1.0)
#: Area fraction range of ``simclr-crop-flip`` (SimCLR's crops).
SIMCLR_SCALE: Final = (0.08, 1.0)
#: Aspect-ratio (width / height) range of the crop families.
RATIO: Final = (3.0 / 4.0, 4.0 / 3.0)
#: ``ln`` of :data:`RATIO`; the log-aspect is drawn uniformly between them (the crop
#: families without ``-v2``).
LOG_RATIO: Final = (math.log(RATIO[0]), math.log(RATIO[1]))
#: The ``-v2`` crops' aspect is ``(ASPECT_CENTRE + t)/(ASPECT_CENTRE − t)`` for ``t`` in
#: [−1, 1): (7 − 1)/(7 + 1) = 3/4 and (7 + 1)/(7 − 1) = 4/3, :data:`RATIO`'s bounds.
ASPECT_CENTRE: Final = 7.0


@dataclass(frozen=True)
class CropFamily:
    """How a crop family draws: its area range, whether it flips, how it draws the aspect.

    ``exact``: the aspect is libm-free (the ``-v2`` families, :func:`crop_size`); else it
    is ``exp`` of a uniform log-ratio (the paper's code, which depends on libm).
    """

    scale: tuple[float, float]
    flip: bool
    exact: bool


#: The crop families, by name.
CROP_FAMILIES: Final[Mapping[str, CropFamily]] = MappingProxyType(
    {
        "random-resized-crop": CropFamily(SCALE, flip=False, exact=False),
        "random-resized-crop-flip": CropFamily(SCALE, flip=True, exact=False),
        "simclr-crop-flip": CropFamily(SIMCLR_SCALE, flip=True, exact=False),
        "random-resized-crop-v2": CropFamily(SCALE, flip=False, exact=True),
        "random-resized-crop-flip-v2": CropFamily(SCALE, flip=True, exact=True),
        "simclr-crop-flip-v2": CropFamily(SIMCLR_SCALE, flip=True, exact=True),
    }
)
#: Attempts before the centre-crop fallback.
CROP_ATTEMPTS: Final = 10
#: Zero padding of ``pad-shift-flip`` on each side, in pixels.
PAD: Final = 4
#: Bytes of a ``dither`` copy's key, and the label of the stream its bits come from.
DITHER_KEY_BYTES: Final = 32
DITHER_LABEL: Final = "dither"
#: The label of the stream a ``noise`` copy's bits come from (its key is as long as
#: ``dither``'s), and the bits each intensity reads.
NOISE_LABEL: Final = "noise"
NOISE_BITS: Final = 6

F64Image = npt.NDArray[np.float64]
F32Image = npt.NDArray[np.float32]


def stream_label(pair_index: int, version: int) -> str:
    """Return the PRG label of the augmentation stream of one version (``augment/<i>/<v>``)."""
    if isinstance(pair_index, bool) or not isinstance(pair_index, int) or pair_index < 0:
        raise ParameterError(f"pair index must be a non-negative integer, got {pair_index!r}")
    if version not in (0, 1) or isinstance(version, bool):
        raise ParameterError(f"version must be 0 or 1, got {version!r}")
    return f"augment/{pair_index}/{version}"


def to_unit(pixels: npt.NDArray[np.uint8]) -> F64Image:
    """Return uint8 pixels (H, W, C) as float64 intensities ``p / 255`` in [0, 1]."""
    if not isinstance(pixels, np.ndarray) or pixels.dtype != np.uint8 or pixels.ndim != 3:
        raise InputError("pixels must be a uint8 array of shape (H, W, C)")
    return pixels.astype(np.float64) / 255.0


def _check_int(value: object, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ParameterError(f"{name} must be an integer, got {value!r}")
    return value


def _check_size(height: int, width: int) -> None:
    for name, side in (("height", height), ("width", width)):
        _check_int(side, name)
        if not 1 <= side <= MAX_IMAGE_SIDE:
            raise ParameterError(f"image {name} {side} outside 1..{MAX_IMAGE_SIDE}")


def crop_size(family: str, area: int, u_scale: float, u_aspect: float) -> tuple[int, int]:
    """Return the ``(width, height)`` one attempt of a ``-v2`` crop family draws.

    ``area`` is the image's ``H·W`` and ``u_scale``, ``u_aspect`` are the attempt's two
    ``uniform()`` draws (spec §10.3): ``s = lo + (hi − lo)·u_scale`` over the family's
    area range, ``t = −1 + 2·u_aspect``, ``T = A·s``, ``a = 7 + t``, ``b = 7 − t``,
    ``w = rint(sqrt((T·a)/b))`` and ``h = rint(sqrt((T·b)/a))``, each operation rounded
    to nearest binary64 in that order and ``rint`` to the nearest integer, half to even
    (Python's ``round``). Any other family raises ``ParameterError``: the families
    without ``-v2`` draw their aspect with ``exp``.
    """
    crop = CROP_FAMILIES.get(family)
    if crop is None or not crop.exact:
        raise ParameterError(f"{family!r} is not a -v2 crop family")
    _check_int(area, "area")
    if not 1 <= area <= MAX_IMAGE_SIDE * MAX_IMAGE_SIDE:
        raise ParameterError(f"image area {area} outside 1..{MAX_IMAGE_SIDE**2}")
    for name, u in (("u_scale", u_scale), ("u_aspect", u_aspect)):
        if not (isinstance(u, float) and 0.0 <= u < 1.0):
            raise ParameterError(f"{name} must be a float in [0, 1), got {u!r}")
    low, high = crop.scale
    s = low + (high - low) * u_scale  # Prg.uniform_range(low, high)
    t = -1.0 + 2.0 * u_aspect  # Prg.uniform_range(-1.0, 1.0)
    target = float(area) * s
    a = ASPECT_CENTRE + t
    b = ASPECT_CENTRE - t
    return round(math.sqrt((target * a) / b)), round(math.sqrt((target * b) / a))


def _crop_box(prg: Prg, family: str, crop: CropFamily, height: int, width: int) -> dict[str, Value]:
    """Draw one copy's crop box (spec §10.3): up to 10 attempts, else the centred crop."""
    area = height * width
    for _ in range(CROP_ATTEMPTS):
        if crop.exact:
            u_scale = prg.uniform()
            w, h = crop_size(family, area, u_scale, prg.uniform())
        else:
            target = float(area) * prg.uniform_range(*crop.scale)
            aspect = math.exp(prg.uniform_range(*LOG_RATIO))  # libm's exp
            w = round(math.sqrt(target * aspect))
            h = round(math.sqrt(target / aspect))
        if 0 < w <= width and 0 < h <= height:
            top = prg.randint(0, height - h)
            left = prg.randint(0, width - w)
            return {"family": family, "top": top, "left": left, "height": h, "width": w}
    in_ratio = width / height
    if in_ratio < RATIO[0]:
        w, h = width, round(width / RATIO[0])
    elif in_ratio > RATIO[1]:
        h, w = height, round(height * RATIO[1])
    else:
        h, w = height, width
    return {
        "family": family,
        "top": (height - h) // 2,
        "left": (width - w) // 2,
        "height": h,
        "width": w,
    }


def draw_params(family: str, prg: Prg, height: int, width: int, k: int) -> list[dict[str, Value]]:
    """Draw the parameter maps of ``k`` copies of an ``height × width`` image from ``prg``.

    The draws follow the module docstring exactly; the maps are canonical values
    ready for the transcript. Unknown families, sizes or ``k`` outside
    ``1..MAX_COPIES`` raise :class:`~twinaudit.protocol.errors.ParameterError`.
    """
    if family not in FAMILIES:
        raise ParameterError(f"unknown perturbation family {family!r}; known: {FAMILIES}")
    if not isinstance(prg, Prg):
        raise ParameterError("draw_params needs a twinaudit.protocol.prg.Prg stream")
    _check_size(height, width)
    _check_int(k, "k")
    if not 1 <= k <= MAX_COPIES:
        raise ParameterError(f"k must be in 1..{MAX_COPIES}, got {k}")
    params: list[dict[str, Value]] = []
    for _ in range(k):
        if family == "none":
            params.append({"family": "none"})
        elif family in CROP_FAMILIES:
            crop = CROP_FAMILIES[family]
            box = _crop_box(prg, family, crop, height, width)
            if crop.flip:
                box["flip"] = prg.coin()
            params.append(box)
        elif family in ("dither", "noise"):
            params.append({"family": family, "key": prg.read(DITHER_KEY_BYTES)})
        else:  # pad-shift-flip, and pad-shift-flip-dither
            top = prg.randint(0, 2 * PAD)
            left = prg.randint(0, 2 * PAD)
            drawn: dict[str, Value] = {"family": family, "top": top, "left": left}
            drawn["flip"] = prg.coin()
            if family == "pad-shift-flip-dither":
                drawn["key"] = prg.read(DITHER_KEY_BYTES)
            params.append(drawn)
    return params


def bilinear_axis(
    in_size: int, out_size: int
) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.intp], npt.NDArray[np.float64]]:
    """Return ``(i0, i1, λ)`` per output index of one axis (§10.3's resize weights)."""
    scale = in_size / out_size
    src = (np.arange(out_size, dtype=np.float64) + 0.5) * scale - 0.5
    src = np.maximum(src, 0.0)
    low = np.minimum(np.floor(src).astype(np.intp), in_size - 1)
    high = np.minimum(low + 1, in_size - 1)
    return low, high, src - low


def resize_bilinear(image: F64Image, out_height: int, out_width: int) -> F64Image:
    """Resize an (h, w, C) float64 image to (out_height, out_width, C), bilinear.

    Half-pixel centres (``align_corners=False``), no antialiasing, edge clamping —
    the definition of torch's ``interpolate(mode="bilinear")``, evaluated in binary64:
    for each output index ``d`` along an axis of input size ``n`` and output size
    ``m``, ``x = max((d + 0.5)·(n/m) − 0.5, 0)``, ``i0 = min(floor(x), n−1)``,
    ``i1 = min(i0 + 1, n−1)``, ``λ = x − i0``. With row weights ``(i0, i1, λy)`` and
    column weights ``(j0, j1, λx)``:
    ``r(i) = p[i, j0]·(1 − λx) + p[i, j1]·λx`` and
    ``out = r(i0)·(1 − λy) + r(i1)·λy``, each product and sum rounded to binary64.
    """
    if image.ndim != 3 or image.dtype != np.float64:
        raise InputError("resize_bilinear needs a float64 (H, W, C) array")
    _check_size(out_height, out_width)
    in_h, in_w = image.shape[0], image.shape[1]
    if in_h < 1 or in_w < 1:
        raise InputError("cannot resize an empty image")
    r0, r1, ly = bilinear_axis(in_h, out_height)
    c0, c1, lx = bilinear_axis(in_w, out_width)
    lxc = lx[None, :, None]
    lyc = ly[:, None, None]
    top = image[r0][:, c0] * (1.0 - lxc) + image[r0][:, c1] * lxc
    bottom = image[r1][:, c0] * (1.0 - lxc) + image[r1][:, c1] * lxc
    out: F64Image = top * (1.0 - lyc) + bottom * lyc
    return out


def _finish(image: F64Image) -> F32Image:
    return np.ascontiguousarray(np.clip(image, 0.0, 1.0).astype(np.float32))


def _field(params: dict[str, Value], name: str, low: int, high: int) -> int:
    value = _check_int(params.get(name), name)
    if not low <= value <= high:
        raise ParameterError(f"{name} {value} outside {low}..{high}")
    return value


def _check_keys(params: dict[str, Value], keys: set[str]) -> None:
    if set(params) != keys:
        raise ParameterError(f"parameters {sorted(params)} are not exactly {sorted(keys)}")


def _flip(params: dict[str, Value]) -> bool:
    flip = params["flip"]
    if not isinstance(flip, bool):
        raise ParameterError(f"flip must be a boolean, got {flip!r}")
    return flip


def stream_bits(key: bytes, label: str, count: int) -> npt.NDArray[np.int16]:
    """Return bits ``0 .. count−1`` of the stream of seed ``key`` and ``label`` as 0/1.

    The same bits as :func:`twinaudit.protocol.prg.bit_stream` from position 0 (spec §5.4: least
    significant bit first within each byte of the keystream), unpacked by numpy.
    """
    raw = np.frombuffer(Prg(key, label).read((count + 7) // 8), dtype=np.uint8)
    bits: npt.NDArray[np.int16] = np.unpackbits(raw, bitorder="little")[:count].astype(np.int16)
    return bits


def dither_steps(key: bytes, size: int) -> npt.NDArray[np.int16]:
    """Return the ``size`` steps (−1, 0 or +1) a ``dither`` copy with ``key`` adds, in order."""
    bits = stream_bits(key, DITHER_LABEL, 2 * size)
    steps: npt.NDArray[np.int16] = bits[0::2] - bits[1::2]
    return steps


def noise_steps(key: bytes, size: int) -> npt.NDArray[np.int16]:
    """Return the ``size`` steps (−31..31) a ``noise`` copy with ``key`` adds, in order."""
    bits = stream_bits(key, NOISE_LABEL, NOISE_BITS * size)
    weights = (1 << np.arange(NOISE_BITS, dtype=np.int16)).astype(np.int16)
    values = bits.reshape(size, NOISE_BITS) @ weights  # least significant bit first
    steps: npt.NDArray[np.int16] = np.where(values < 32, values - 31, values - 32).astype(np.int16)
    return steps


def _dither(image: F64Image, params: dict[str, Value]) -> F64Image:
    """Move each intensity by the steps of a ``dither`` or ``noise`` map, clipped to 0..255."""
    _check_keys(params, {"family", "key"})
    key = params["key"]
    noise = params["family"] == "noise"
    if not isinstance(key, bytes) or len(key) != DITHER_KEY_BYTES:
        raise ParameterError(f"a {'noise' if noise else 'dither'} key is {DITHER_KEY_BYTES} bytes")
    levels = np.rint(image * 255.0).astype(np.int16)  # exact: the image is p/255
    steps = noise_steps if noise else dither_steps
    moved = levels + steps(key, levels.size).reshape(levels.shape)
    out: F64Image = np.clip(moved, 0, 255).astype(np.float64) / 255.0
    return out


def apply(image: F64Image, params: dict[str, Value]) -> F32Image:
    """Return the copy of ``image`` (float64 (H, W, C) in [0, 1]) that ``params`` describes.

    The result is float32 (H, W, C) in [0, 1]. Parameter maps are checked strictly
    (exact keys, integer ranges that fit the image) with
    :class:`~twinaudit.protocol.errors.ParameterError`; a malformed image raises
    :class:`~twinaudit.protocol.errors.InputError`.
    """
    if not isinstance(image, np.ndarray) or image.dtype != np.float64 or image.ndim != 3:
        raise InputError("apply needs a float64 image of shape (H, W, C)")
    height, width, channels = image.shape
    _check_size(height, width)
    if channels not in (1, 3):
        raise InputError(f"images have 1 or 3 channels, not {channels}")
    if not bool(np.all((image >= 0.0) & (image <= 1.0))):  # also rejects NaN
        raise InputError("image intensities must be finite and in [0, 1]")
    if not isinstance(params, dict):
        raise ParameterError("perturbation parameters must be a map")
    family = params.get("family")
    if family == "none":
        _check_keys(params, {"family"})
        return _finish(image)
    if family in ("dither", "noise"):
        return _finish(_dither(image, params))
    if isinstance(family, str) and family in CROP_FAMILIES:
        flips = CROP_FAMILIES[family].flip
        keys = {"family", "top", "left", "height", "width"}
        _check_keys(params, keys | {"flip"} if flips else keys)
        h = _field(params, "height", 1, height)
        w = _field(params, "width", 1, width)
        top = _field(params, "top", 0, height - h)
        left = _field(params, "left", 0, width - w)
        crop = image[top : top + h, left : left + w]
        resized = resize_bilinear(np.ascontiguousarray(crop), height, width)
        if flips and _flip(params):
            resized = resized[:, ::-1]
        return _finish(resized)
    if family in ("pad-shift-flip", "pad-shift-flip-dither"):
        keys = {"family", "top", "left", "flip"}
        _check_keys(params, keys if family == "pad-shift-flip" else keys | {"key"})
        top = _field(params, "top", 0, 2 * PAD)
        left = _field(params, "left", 0, 2 * PAD)
        flip = _flip(params)
        padded = np.zeros((height + 2 * PAD, width + 2 * PAD, channels), dtype=np.float64)
        padded[PAD : PAD + height, PAD : PAD + width] = image
        window = padded[top : top + height, left : left + width]
        moved = np.ascontiguousarray(window[:, ::-1] if flip else window)
        if family == "pad-shift-flip-dither":
            moved = _dither(moved, {"family": "dither", "key": params["key"]})
        return _finish(moved)
    raise ParameterError(f"unknown perturbation family {family!r}")


def perturb(image: F64Image, params: list[dict[str, Value]]) -> F32Image:
    """Return the copies for a list of parameter maps, stacked as float32 (K, H, W, C)."""
    if not params:
        raise ParameterError("at least one parameter map is needed")
    if len(params) > MAX_COPIES:
        raise ParameterError(f"at most {MAX_COPIES} copies, got {len(params)}")
    return np.stack([apply(image, p) for p in params])


def draw_copies(
    family: str, k: int, pixels: npt.NDArray[np.uint8], prg: Prg
) -> tuple[list[dict[str, Value]], F32Image]:
    """Draw K copies of one version's image from ``prg``; return their parameters and images.

    ``prg`` is the version's ``augment/<i>/<v>`` stream; the images are float32
    (K, H, W, C) in [0, 1] (what the K-copies scores send).
    """
    height, width, _ = pixels.shape
    params = draw_params(family, prg, int(height), int(width), k)
    return params, perturb(to_unit(pixels), params)
