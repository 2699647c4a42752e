"""Synthetic "images" with class structure and ±ε twin marks (numpy only).

Small, fast, download-free data for experiments: the benchmarks (``bench/``) and the
tests audit these pairs with :class:`demo.tiny_cnn.TinyCNN` models.

Each item is ``128 + 40·(prototype[label] + noise·field)`` rounded and clipped to
0..255, where prototypes and fields are smooth random patterns (a 7×7 Gaussian grid
upsampled bilinearly to 28×28). The item noise is strong, so a small CNN reaches
100% training accuracy only by memorising items — which is what makes the twin
marks detectable. The mark of pair ``i`` is a ±ε sign pattern on 4×4 pixel blocks;
version 0 is ``clip(x + δ)``, version 1 ``clip(x − δ)``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from twinaudit.protocol.items import ImageItem

SIDE = 28
N_CLASSES = 10
_GRID = 7
_BLOCK = 4


def _interp_matrix(out: int, inp: int) -> npt.NDArray[np.float64]:
    # Bilinear weights with half-pixel centres, edge-clamped.
    src = np.clip((np.arange(out) + 0.5) * inp / out - 0.5, 0, inp - 1)
    low = np.floor(src).astype(int)
    high = np.minimum(low + 1, inp - 1)
    frac = src - low
    m = np.zeros((out, inp))
    m[np.arange(out), low] += 1 - frac
    m[np.arange(out), high] += frac
    return m


def smooth_fields(rng: np.random.Generator, n: int) -> npt.NDArray[np.float64]:
    """Return ``n`` smooth 28×28 standard-normal-ish fields."""
    m = _interp_matrix(SIDE, _GRID)
    grid = rng.standard_normal((n, _GRID, _GRID))
    fields: npt.NDArray[np.float64] = np.einsum("ij,njk,lk->nil", m, grid, m)
    return fields


@dataclass(frozen=True)
class SyntheticPairs:
    """Twin-marked pairs: ``version0``/``version1`` uint8 (n, 28, 28, 1), ``labels`` int64 (n,)."""

    version0: npt.NDArray[np.uint8]
    version1: npt.NDArray[np.uint8]
    labels: npt.NDArray[np.int64]

    def __len__(self) -> int:
        return int(self.labels.shape[0])

    def version(self, bits: npt.NDArray[np.integer]) -> npt.NDArray[np.uint8]:
        """Return, for each pair ``i``, version ``bits[i]`` (shape (n, 28, 28, 1))."""
        bits = np.asarray(bits).reshape(-1, 1, 1, 1)
        return np.where(bits == 1, self.version1, self.version0)

    def items(self, index: int) -> tuple[ImageItem, ImageItem]:
        """Return pair ``index`` as two labelled :class:`ImageItem` versions."""
        label = int(self.labels[index])
        return ImageItem(self.version0[index], label), ImageItem(self.version1[index], label)


def synthetic_pairs(
    n: int, seed: int, epsilon: int, *, noise: float = 4.0, class_seed: int = 0
) -> SyntheticPairs:
    """Make ``n`` twin-marked pairs; items and marks from ``seed``, classes from ``class_seed``.

    Sets made with different ``seed`` and the same ``class_seed`` share the class
    prototypes, so a model trained on one set is a fair "not trained on" control for
    another. Uses only local numpy generators.
    """
    rng = np.random.default_rng(seed)
    base, labels = _raw(rng, n, noise, class_seed)
    signs = np.where(rng.random((n, SIDE // _BLOCK, SIDE // _BLOCK)) < 0.5, -1.0, 1.0)
    delta = float(epsilon) * np.kron(signs, np.ones((_BLOCK, _BLOCK)))
    v0 = np.clip(base + delta, 0, 255).astype(np.uint8)[..., None]
    v1 = np.clip(base - delta, 0, 255).astype(np.uint8)[..., None]
    return SyntheticPairs(v0, v1, labels)


def _raw(
    rng: np.random.Generator, n: int, noise: float, class_seed: int
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.int64]]:
    prototypes = smooth_fields(np.random.default_rng(class_seed), N_CLASSES)
    labels = rng.integers(0, N_CLASSES, n).astype(np.int64)
    base = 128.0 + 40.0 * (prototypes[labels] + noise * smooth_fields(rng, n))
    return np.clip(np.round(base), 0, 255), labels


def synthetic_images(
    n: int, seed: int, *, noise: float = 4.0, class_seed: int = 0
) -> tuple[npt.NDArray[np.uint8], npt.NDArray[np.int64]]:
    """Return ``n`` unmarked images (n, 28, 28, 1) and labels: raw input for ``owner mark``.

    The same images :func:`synthetic_pairs` marks for the same ``seed`` and ``class_seed``.
    """
    base, labels = _raw(np.random.default_rng(seed), n, noise, class_seed)
    return base.astype(np.uint8)[..., None], labels
