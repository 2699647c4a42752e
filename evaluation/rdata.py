"""RData, radioactive data: a baseline of the paper's baselines and several-owners tables.

The paper's tables `classifier:baselines` and `classifier:multiple_users`; implemented
here from RData's paper:
Sablayrolles, Douze, Schmid, Jégou, "Radioactive data: tracing through training", ICML
2020 (arXiv:2002.00937); the data-use auditing paper describes how it applied it in its
appendix "Introduction of Radioactive Data and UBW-C" (``app:baselines``). No maintained
package implements it (PyPI has none; the authors' research scripts are not a library),
so this module does, in its own code:

- **Carriers.** One random unit vector u_g per group of classes, drawn independently and
  uniformly on the sphere of the marking network's feature space (d = 1,024: the hidden
  layer of the owner's proxy, :class:`twinaudit.owner.marking.proxy.SmallCNN`), from a seed of the
  owner's. Groups (:data:`GROUPINGS`): ``class`` (one carrier per class: the owner knows
  the label the practitioner will give each item, RData as published), ``superclass``
  (one per coarse label, :data:`SUPERCLASSES`) and ``one`` (one carrier for all her
  items: no label knowledge).
- **Marks** (:func:`mark_rdata`). For an item x of group g, x̃ = x + δ with
  ‖δ‖∞ ≤ ε, δ found by Adam on the paper's loss in the marking network's features φ:
  −⟨φ(x̃) − φ(x), u_g⟩ + λ‖φ(x̃) − φ(x)‖², both terms scaled by ‖φ(x)‖ (so that λ does
  not depend on the features' scale), under the practitioner's augmentation
  (pad-crop-flip drawn afresh each step, the same for x and x̃), then rounded to 8 bits.
  The pixel-space ℓ2 term of the paper is left to the ε bound.
- **Test** (:func:`rdata_test`), white box: the model's last linear layer W (classes ×
  d_m) is carried into the marking network's feature space by the least-squares map B
  with φ_m(x) ≈ B^T φ(x) + c over public alignment images (so logits ≈ (B w_c)·φ(x) +
  const): v_c = B w_c. Under H0 (the model never saw the marks) u_g is uniform on the
  sphere and independent of v_c, so cos(v_c, u_g) follows (1 + cos)/2 ~ Beta((d−1)/2,
  (d−1)/2) exactly, whatever the model; its upper tail is the p-value of that class.
  Per group, the smallest p-value of its classes times their number (Bonferroni: the
  classes of a group share its carrier, so their cosines are not independent); the
  groups' carriers are independent, so their p-values combine by Fisher's method
  (−2 Σ log p ~ χ² with 2G degrees of freedom). ``class`` is then RData's own combined
  test; ``one`` is the best class's p-value times ten. Detected when the combined
  p-value is below p = 0.05: a false-detection rate of at most p, as the paper credits
  RData with.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Final

import numpy as np
import numpy.typing as npt
import torch
from scipy import special, stats
from torch import nn

from twinaudit.owner.marking.proxy import pad_crop_flip, to_tensor

#: How the owner groups her items, one carrier per group: by class, by coarse label, or all one.
GROUPINGS: Final = ("class", "superclass", "one")
#: Fashion-MNIST's coarse labels (the dataset has none; ours, as the paper made its own
#: for TinyImageNet): tops (T-shirt/top, pullover, coat, shirt), trousers and dresses,
#: footwear (sandal, sneaker, ankle boot), bags.
SUPERCLASSES: Final = ((0, 2, 4, 6), (1, 3), (5, 7, 9), (8,))
#: Classes of Fashion-MNIST.
N_CLASSES: Final = 10
#: RData's mark bound in levels of 255 (the paper's, for RData).
EPSILON: Final = 10
#: Adam steps of the marking and their learning rate as a share of ε.
STEPS: Final = 100
STEP_SHARE: Final = 0.1
#: λ, the weight of the feature-space distance in the marking loss (relative units).
FEATURE_WEIGHT: Final = 1.0
#: The p-value below which the test detects (the paper's threshold).
P: Final = 0.05


def groups(grouping: str, n_classes: int = N_CLASSES) -> tuple[tuple[int, ...], ...]:
    """Return the classes of each group of ``grouping`` (see :data:`GROUPINGS`)."""
    if grouping == "class":
        return tuple((c,) for c in range(n_classes))
    if grouping == "superclass":
        return SUPERCLASSES
    if grouping == "one":
        return (tuple(range(n_classes)),)
    raise ValueError(f"unknown grouping {grouping!r}; known: {GROUPINGS}")


def group_index(grouping: str, labels: npt.NDArray[np.integer]) -> npt.NDArray[np.int64]:
    """Return, for each label, the index of its group in :func:`groups`."""
    lookup = np.zeros(N_CLASSES, dtype=np.int64)
    for g, classes in enumerate(groups(grouping)):
        lookup[list(classes)] = g
    return lookup[np.asarray(labels, dtype=np.int64)]


def carriers(seed: str, n: int, dim: int) -> npt.NDArray[np.float64]:
    """Return ``n`` independent uniform unit vectors of R^``dim`` drawn from ``seed``."""
    digest = hashlib.sha256(f"twinaudit evaluation rdata carriers\x00{seed}".encode()).digest()
    rng = np.random.default_rng(int.from_bytes(digest[:8], "big"))
    vectors = rng.standard_normal((n, dim))
    unit: npt.NDArray[np.float64] = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    return unit


def mark_rdata(
    extractor: nn.Module,
    images: npt.NDArray[np.uint8],
    group_of: npt.NDArray[np.integer],
    directions: npt.NDArray[np.float64],
    *,
    epsilon: int = EPSILON,
    steps: int = STEPS,
    seed: int = 0,
    batch: int = 250,
) -> npt.NDArray[np.uint8]:
    """Return ``images`` (N, H, W) with RData marks: features pushed along their group's carrier.

    ``extractor`` maps (N, 1, H, W) images in [0, 1] to features (N, d);
    ``directions[group_of[i]]`` is item i's carrier. Each mark is within ``epsilon``
    levels of 255 of the item in every pixel.
    """
    extractor.eval()
    for p in extractor.parameters():
        p.requires_grad_(False)
    bound = epsilon / 255.0
    out = []
    for start in range(0, len(images), batch):
        x = to_tensor(images[start : start + batch])
        u = torch.from_numpy(directions[np.asarray(group_of[start : start + batch])]).float()
        delta = torch.zeros_like(x, requires_grad=True)
        optimiser = torch.optim.Adam([delta], lr=STEP_SHARE * bound)
        generator = torch.Generator().manual_seed(seed * 1_000_003 + start)
        for _ in range(steps):
            state = generator.get_state()
            clean = extractor(pad_crop_flip(x, generator))
            generator.set_state(state)  # the same crops and flips for the marked items
            marked = extractor(pad_crop_flip((x + delta).clamp(0.0, 1.0), generator))
            scale = clean.norm(dim=1).clamp_min(1e-6)
            shift = marked - clean
            along = (shift * u).sum(dim=1) / scale
            spread = shift.pow(2).sum(dim=1) / scale.pow(2)
            loss = (-along + FEATURE_WEIGHT * spread).sum()
            optimiser.zero_grad()
            loss.backward()
            optimiser.step()
            with torch.no_grad():
                delta.clamp_(-bound, bound)
        with torch.no_grad():
            pixels = torch.round(255.0 * (x + delta)).clamp(0, 255)
            low = torch.round(255.0 * x) - epsilon
            high = torch.round(255.0 * x) + epsilon
            pixels = torch.minimum(torch.maximum(pixels, low), high)
        out.append(pixels[:, 0].to(torch.uint8).numpy())
    return np.concatenate(out)


def features(module: nn.Module, images: npt.NDArray[np.uint8], batch: int = 500) -> np.ndarray:
    """Return ``module``'s features of ``images`` (N, H, W) as float64 (N, d)."""
    module.eval()
    parts = []
    with torch.no_grad():
        for start in range(0, len(images), batch):
            parts.append(module(to_tensor(images[start : start + batch])).double().numpy())
    return np.concatenate(parts)


def last_layer(model: nn.Module) -> tuple[nn.Module, nn.Linear]:
    """Return a classifier's feature map and its last linear layer (white-box access).

    Models with a ``hidden_layer()`` and a ``classifier`` ending in a linear layer
    (the demo's and the proxy's :class:`~twinaudit.owner.marking.proxy.SmallCNN`) are supported.
    """
    head = getattr(model, "classifier", None)
    hidden = getattr(model, "hidden_layer", None)
    if not callable(hidden) or not isinstance(head, nn.Sequential):
        raise TypeError(f"{type(model).__name__}: RData needs a SmallCNN-like classifier")
    linear = head[-1]
    if not isinstance(linear, nn.Linear):
        raise TypeError("the classifier's last layer is not linear")
    features_of = hidden()
    if not isinstance(features_of, nn.Module):
        raise TypeError("hidden_layer() must return a module")
    return features_of, linear


def class_directions(
    model: nn.Module,
    marker: nn.Module,
    alignment: npt.NDArray[np.uint8],
    *,
    model_features: np.ndarray | None = None,
) -> npt.NDArray[np.float64]:
    """Return the model's class directions in the marking network's feature space (C, d).

    ``marker`` is the marking network's feature map; ``alignment`` are public images
    (never the owner's) on which the least-squares map between the two feature spaces
    (with an intercept) is fitted. ``model_features`` are the model's features of
    ``alignment`` when the caller has them already (several owners, one model).
    """
    hidden, linear = last_layer(model)
    mine = features(marker, alignment)
    theirs = features(hidden, alignment) if model_features is None else model_features
    design = np.hstack([mine, np.ones((len(mine), 1))])
    solution, *_ = np.linalg.lstsq(design, theirs, rcond=None)
    b = solution[:-1]  # (d, d_m): φ_m ≈ φ·B + c
    weights = linear.weight.detach().double().numpy()  # (C, d_m)
    return np.asarray(weights @ b.T)


def cosine_p_value(cosine: float, dim: int) -> float:
    """Return P(cos(v, u) ≥ ``cosine``) for u uniform on the sphere of R^``dim``, v fixed."""
    a = (dim - 1) / 2.0
    return float(special.betainc(a, a, (1.0 - min(1.0, max(-1.0, cosine))) / 2.0))


@dataclass(frozen=True)
class RDataResult:
    """The outcome of one RData test: combined p-value, per-group p-values, cosines."""

    p_value: float
    group_p: tuple[float, ...]
    cosines: tuple[tuple[float, ...], ...]

    @property
    def detected(self) -> bool:
        """Whether the combined p-value is below :data:`P`."""
        return self.p_value < P


def rdata_test(
    directions: npt.NDArray[np.float64],
    group_carriers: npt.NDArray[np.float64],
    grouping: str,
) -> RDataResult:
    """Test class ``directions`` (C, d) against the carriers of ``grouping`` (G, d).

    Bonferroni within a group (its classes share a carrier), Fisher across groups
    (independent carriers); see the module's docstring for why the bound holds.
    """
    dim = group_carriers.shape[1]
    group_p = []
    cosines = []
    for g, classes in enumerate(groups(grouping, len(directions))):
        u = group_carriers[g]
        cs = []
        for c in classes:
            v = directions[c]
            norm = float(np.linalg.norm(v))
            cs.append(float(v @ u) / norm if norm > 0 else 0.0)
        cosines.append(tuple(cs))
        smallest = min(cosine_p_value(c, dim) for c in cs)
        group_p.append(min(1.0, len(classes) * smallest))
    statistic = -2.0 * sum(float(np.log(max(p, 1e-300))) for p in group_p)
    combined = float(stats.chi2.sf(statistic, 2 * len(group_p)))
    return RDataResult(combined, tuple(group_p), tuple(cosines))


def run_rdata(
    model: nn.Module,
    marker: nn.Module,
    alignment: npt.NDArray[np.uint8],
    group_carriers: npt.NDArray[np.float64],
    grouping: str,
    *,
    model_features: np.ndarray | None = None,
) -> RDataResult:
    """Align ``model`` with the marking network ``marker`` and run :func:`rdata_test`."""
    directions = class_directions(model, marker, alignment, model_features=model_features)
    return rdata_test(directions, group_carriers, grouping)


def summary(result: RDataResult) -> dict[str, object]:
    """Return what a record keeps of ``result``."""
    return {
        "p_value": result.p_value,
        "detected": result.detected,
        "group_p": list(result.group_p),
        "max_cosine": max(max(c) for c in result.cosines),
    }
