"""Per-image random draws of the marking run, from the secret marking seed only.

Image ``i``'s draws for a given purpose (``"bernoulli"``, ``"gaussian"``,
``"pgd-start"``) come from the protocol's ChaCha20 stream (:mod:`twinaudit.protocol.prg`)
named by the 32-byte marking seed and the label
``twinaudit/marking/v1/<purpose>/<i>``. They depend on nothing else: not on the other
images of a batch, not on numpy, torch or Python global RNGs, and not on the numpy
version (the floats are built from the keystream's bytes by fixed formulas).

ChaCha20 is a cryptographic generator: without the seed the draws are unpredictable.
That matters, because the seed must stay **secret**: for a noise mark, anyone who
knows the seed, the marker and the image index can recompute δ and so turn the
published version into the hidden one.
"""

from __future__ import annotations

from typing import Final

import numpy as np
import numpy.typing as npt

from twinaudit.protocol import limits
from twinaudit.protocol.errors import InputError
from twinaudit.protocol.prg import Prg

#: Label prefix of every marking stream (bumped if any formula below changes).
LABEL_PREFIX: Final = "twinaudit/marking/v1/"

_TWO_PI: Final = 2.0 * np.pi


def check_seed(seed: object) -> bytes:
    """Return ``seed`` if it is exactly 32 bytes, else raise InputError."""
    if not isinstance(seed, bytes) or len(seed) != limits.HASH_BYTES:
        raise InputError(f"the marking seed must be exactly {limits.HASH_BYTES} bytes")
    return seed


def image_stream(seed: bytes, purpose: str, index: int) -> Prg:
    """Return the stream of image ``index`` for ``purpose``."""
    return Prg(check_seed(seed), f"{LABEL_PREFIX}{purpose}/{index}")


def uniforms(prg: Prg, count: int) -> npt.NDArray[np.float64]:
    """Return ``count`` floats in [0, 1): ``(u64 >> 11) · 2⁻⁵³`` of little-endian words."""
    words = np.frombuffer(prg.read(8 * count), dtype="<u8")
    return (words >> np.uint64(11)).astype(np.float64) * (1.0 / (1 << 53))


def signs(prg: Prg, count: int) -> npt.NDArray[np.int8]:
    """Return ``count`` fair ±1 values: bit ``k`` of the stream (LSB first) 1 → +1."""
    bits = np.unpackbits(
        np.frombuffer(prg.read((count + 7) // 8), dtype=np.uint8), count=count, bitorder="little"
    )
    return (bits.astype(np.int8) * 2 - 1).astype(np.int8)


def normals(prg: Prg, count: int) -> npt.NDArray[np.float64]:
    """Return ``count`` standard normal draws by the Box–Muller transform.

    Pairs ``(u, v)`` of :func:`uniforms` give ``√(−2 ln(1 − u)) · cos(2πv)``; one
    normal per pair, so the formula is short and the stream position fixed.
    """
    u = uniforms(prg, 2 * count).reshape(count, 2)
    radius = np.sqrt(-2.0 * np.log1p(-u[:, 0]))
    return radius * np.cos(_TWO_PI * u[:, 1])
