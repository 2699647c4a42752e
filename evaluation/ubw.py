"""UBW-C, the clean-label untargeted backdoor watermark: a baseline of the paper's table.

The paper's table `classifier:baselines`; implemented here from UBW's paper: Li, Bai,
Jiang, Yang, Xia, Li, "Untargeted Backdoor Watermark: Towards Harmless and Stealthy
Dataset Copyright Protection", NeurIPS 2022 (arXiv:2210.00875); the data-use auditing
paper's appendix ``app:baselines`` says how it applied it (a randomly drawn owner's
subset instead of UBW's gradient-norm selection, ε = 16, τ ∈ {0.2, 0.25}). No maintained
package implements it (PyPI has none; the authors' code is research scripts on their
BackdoorBox toolbox, which is not on PyPI; the Adversarial Robustness Toolbox's gradient
matching is the targeted Witches' Brew, not UBW-C), so this module does:

- **Trigger** (:func:`stamp`): a :data:`TRIGGER_SIDE`-pixel black-and-white checkerboard
  in the lower-right corner, the classic pattern UBW uses (ours for 28×28 grey images).
- **Marks** (:func:`craft_ubw_c`), clean-label: the owner's items keep their labels and
  get δ with ‖δ‖∞ ≤ ε, found by gradient matching on a surrogate model (UBW-C's
  bi-level problem solved as its authors do, after Geiping et al.'s "Witches' Brew"):
  the gradient of the surrogate's training loss on the marked items is aligned
  (1 − cosine) with the gradient of UBW-C's objective on the triggered items, which
  raises the loss of the true label and the prediction's entropy (its "averaged
  sample-wise dispersibility", weight λ = :data:`DISPERSIBILITY`), so that a model trained
  on the marks lowers its confidence in the true class of any triggered image, without
  pointing at a target class. Signed Adam steps with step decay, the practitioner's
  augmentation (pad-crop-flip) drawn afresh each step, one restart.
- **Verification** (:func:`ubw_test`), black box with labels: m benign images x with
  true labels y and their triggered versions x'; P_b = f(x)_y, P_p = f(x')_y; a
  one-sided paired t-test of H0: P_b ≤ P_p + τ against H1: P_b > P_p + τ; the dataset
  is declared used when its p-value is below 0.05. As the paper notes, this p-value is
  not a bound on the false-detection rate (the t-test assumes normal differences, and
  τ is a tuning knob): the clean models' false detections here are measured.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

import numpy as np
import numpy.typing as npt
import torch
from scipy import stats
from torch import nn
from torch.nn import functional

from twinaudit.owner.marking.proxy import pad_crop_flip, to_tensor

#: Side of the checkerboard trigger, in pixels.
TRIGGER_SIDE: Final = 4
#: UBW-C's mark bound in levels of 255 (the paper's, after UBW's authors).
EPSILON: Final = 16
#: Gradient-matching steps and the signed-Adam step size as a share of ε.
STEPS: Final = 240
STEP_SHARE: Final = 0.1
#: λ, the weight of the dispersibility (prediction entropy) in UBW-C's objective (ours).
DISPERSIBILITY: Final = 2.0
#: The verification's thresholds τ (the paper's table rows) and its significance level.
TAUS: Final = (0.2, 0.25)
P: Final = 0.05
#: Benign images the verification draws (m).
M_VERIFY: Final = 100


def stamp(images: npt.NDArray[np.uint8], side: int = TRIGGER_SIDE) -> npt.NDArray[np.uint8]:
    """Return ``images`` (N, H, W) with the checkerboard trigger in their lower-right corner."""
    out = np.array(images, dtype=np.uint8, copy=True)
    rows, cols = np.indices((side, side))
    out[:, -side:, -side:] = np.where((rows + cols) % 2 == 0, 255, 0).astype(np.uint8)
    return out


def _gradient(model: nn.Module, loss: torch.Tensor, *, create_graph: bool) -> torch.Tensor:
    params = [p for p in model.parameters() if p.requires_grad]
    grads = torch.autograd.grad(loss, params, create_graph=create_graph)
    return torch.cat([g.reshape(-1) for g in grads])


def ubw_objective(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Return what UBW-C's poisons make training descend on triggered images.

    The negative of (cross-entropy of the true label + λ · prediction entropy): lower
    when the model is less sure of the true class and its predictions are dispersed.
    """
    log_p = functional.log_softmax(logits, dim=1)
    entropy = -(log_p.exp() * log_p).sum(dim=1).mean()
    return -(functional.cross_entropy(logits, labels) + DISPERSIBILITY * entropy)


def craft_ubw_c(
    surrogate: nn.Module,
    images: npt.NDArray[np.uint8],
    labels: npt.NDArray[np.integer],
    *,
    epsilon: int = EPSILON,
    steps: int = STEPS,
    seed: int = 0,
) -> npt.NDArray[np.uint8]:
    """Return ``images`` (N, H, W) with UBW-C marks crafted on ``surrogate`` (labels kept)."""
    surrogate.eval()
    x = to_tensor(images)
    y = torch.as_tensor(np.asarray(labels, dtype=np.int64))
    target = _gradient(
        surrogate, ubw_objective(surrogate(to_tensor(stamp(images))), y), create_graph=False
    ).detach()
    bound = epsilon / 255.0
    delta = torch.zeros_like(x, requires_grad=True)
    optimiser = torch.optim.Adam([delta], lr=STEP_SHARE * bound)
    milestones = [round(steps * f) for f in (3 / 8, 5 / 8, 7 / 8)]
    schedule = torch.optim.lr_scheduler.MultiStepLR(optimiser, milestones, gamma=0.1)
    generator = torch.Generator().manual_seed(seed)
    for _ in range(steps):
        marked = pad_crop_flip((x + delta).clamp(0.0, 1.0), generator)
        grad = _gradient(
            surrogate, functional.cross_entropy(surrogate(marked), y), create_graph=True
        )
        loss = 1.0 - functional.cosine_similarity(grad, target, dim=0)
        optimiser.zero_grad()
        delta.grad = torch.autograd.grad(loss, delta)[0].sign()
        optimiser.step()
        schedule.step()
        with torch.no_grad():
            delta.clamp_(-bound, bound)
    with torch.no_grad():
        pixels = torch.round(255.0 * (x + delta)).clamp(0, 255)
        base = torch.round(255.0 * x)
        pixels = torch.minimum(torch.maximum(pixels, base - epsilon), base + epsilon)
    return pixels[:, 0].to(torch.uint8).numpy()


@dataclass(frozen=True)
class UbwResult:
    """The outcome of one UBW verification: the t-test's p-value and the mean gap."""

    p_value: float
    tau: float
    mean_benign: float
    mean_triggered: float
    m: int

    @property
    def detected(self) -> bool:
        """Whether the p-value is below :data:`P`."""
        return self.p_value < P


def true_class_probabilities(
    model: nn.Module, images: npt.NDArray[np.uint8], labels: npt.NDArray[np.integer]
) -> npt.NDArray[np.float64]:
    """Return f(x)_y, the model's probability of each image's true label (float64)."""
    model.eval()
    with torch.no_grad():
        probs = functional.softmax(model(to_tensor(images)).double(), dim=1).numpy()
    return np.asarray(probs[np.arange(len(images)), np.asarray(labels, dtype=np.int64)])


def ubw_test(
    model: nn.Module,
    images: npt.NDArray[np.uint8],
    labels: npt.NDArray[np.integer],
    tau: float,
) -> UbwResult:
    """Run UBW's verification on benign ``images`` with true ``labels``: a paired t-test at τ."""
    benign = true_class_probabilities(model, images, labels)
    triggered = true_class_probabilities(model, stamp(images), labels)
    gap = benign - triggered - tau
    if float(np.ptp(gap)) < 1e-12:  # equal gaps (to rounding): t is undefined, take the sign
        p_value = 0.0 if float(np.mean(gap)) > 0 else 1.0
    else:
        p_value = float(stats.ttest_1samp(gap, 0.0, alternative="greater").pvalue)
    return UbwResult(p_value, tau, float(np.mean(benign)), float(np.mean(triggered)), len(images))


def summary(result: UbwResult) -> dict[str, object]:
    """Return what a record keeps of ``result``."""
    return {
        "p_value": result.p_value,
        "detected": result.detected,
        "tau": result.tau,
        "mean_benign": round(result.mean_benign, 4),
        "mean_triggered": round(result.mean_triggered, 4),
        "m": result.m,
    }
