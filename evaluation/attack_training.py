"""Training-time attacks on the audit: how a practitioner who expects one can train.

Each is a change to the demo practitioner's training (:func:`demo.practitioner.train`:
the 1.62M-weight CNN, Adam with cosine decay, the same batches and augmentation)
named by :attr:`evaluation.specs.ModelSpec.attack` (the paper's table
``classifier:robustness``, §5.3.5; early stopping and training without augmentation
need no attack name: they are a spec's ``epochs`` and ``recipe``):

``dp<σ>`` — DP-SGD (Abadi et al., "Deep Learning with Differential Privacy", CCS
    2016), written here: each example's gradient is clipped to L2 norm
    :data:`DP_CLIP`, the clipped gradients summed, Gaussian noise of standard
    deviation ``σ·C`` added, and the sum divided by the batch size before Adam's step
    (DP-Adam). The per-example norms come from layer hooks (:class:`ExampleNorms`,
    "ghost clipping": a ``torch.func`` ``vmap`` of per-example gradients was 80 times
    slower than a plain step on this CNN; the tests check the hooks' norms against it).
    Batches are the shuffled batches of the other models, not Poisson samples, so no
    (ε, δ) is claimed: the rows name σ.
``advreg`` — adversarial regularisation (Nasr, Shokri, Houmansadr, "Machine Learning
    with Membership Privacy using Adversarial Regularization", CCS 2018): an
    inference model h (an MLP on the softmax vector and the one-hot label) is trained
    at every step to tell the batch (members) from as many reference images
    (non-members: Fashion-MNIST test images the accuracy does not use); the
    classifier then minimises cross-entropy + λ·mean log h(f(x), y) on its batch,
    i.e. it learns to make its members look like non-members. λ = 1 (the paper's).
``gauss<σ>`` — Gaussian noise of standard deviation σ levels (of 255) added once to
    every training image (rounded, clipped), then ordinary training.
``markperturb`` — the practitioner runs the marking algorithm with the CLI's
    defaults on her whole training set (PGD, ε = 10, on a ``proxy-own`` extractor
    trained on her own labelled images) and trains on one randomly chosen version of
    each image.

All randomness is seeded by the model's training seed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

import numpy as np
import numpy.typing as npt
import torch
import torch.nn.functional as F  # noqa: N812 - the usual torch alias
from torch import nn

from demo.models import DemoCNN, make_net
from demo.practitioner import augmenter, train
from twinaudit.owner.marking import MarkingConfig
from twinaudit.owner.marking.config import OWN_PROXY, pgd_defaults
from twinaudit.owner.marking.extractors import proxy_extractor
from twinaudit.owner.marking.markers import make_marker
from twinaudit.owner.marking.proxy import OWN_STEPS, to_tensor, train_own_proxy

from .specs import ATTACK_NAME

#: DP-SGD's per-example clipping norm C.
DP_CLIP: Final = 1.0
#: Adversarial regularisation's λ (Nasr et al.'s, the paper's 1.0).
ADVREG_LAMBDA: Final = 1.0
#: Hidden units of the inference model h.
ADVREG_HIDDEN: Final = 64
#: The mark bound ``markperturb`` uses: the CLI's default.
MARKPERTURB_EPSILON: Final = 10


def check_attack(attack: str) -> None:
    """Raise ``ValueError`` unless ``attack`` is "" or a training attack's name."""
    if attack and not ATTACK_NAME.fullmatch(attack):
        raise ValueError(
            f"unknown training attack {attack!r}: dp<σ>, gauss<σ>, advreg, markperturb"
        )


def train_attacked(
    images: npt.NDArray[np.uint8],
    labels: npt.NDArray[np.int64],
    *,
    attack: str,
    epochs: int,
    seed: int,
    recipe: str,
    device: str = "cpu",
    reference: npt.NDArray[np.uint8] | None = None,
    proxy_steps: int = OWN_STEPS,
) -> DemoCNN:
    """Train the demo CNN on ``images`` under ``attack``; return it on the CPU in eval mode.

    ``reference`` (uint8 images) is ``advreg``'s non-member set; ``proxy_steps`` the
    steps of ``markperturb``'s proxy (fewer in smoke runs).
    """
    check_attack(attack)
    if attack.startswith("gauss"):
        noisy = gaussian_noise(images, float(attack[len("gauss") :]), seed)
        return train(noisy, labels, epochs=epochs, seed=seed, recipe=recipe, device=device)
    if attack == "markperturb":
        marked = mark_perturb(images, labels, seed, proxy_steps=proxy_steps)
        torch.set_num_threads(1)
        return train(marked, labels, epochs=epochs, seed=seed, recipe=recipe, device=device)
    if attack == "advreg":
        if reference is None:
            raise ValueError("advreg needs a reference set of non-member images")
        return train_advreg(
            images, labels, reference, epochs=epochs, seed=seed, recipe=recipe, device=device
        )
    sigma = float(attack[len("dp") :])
    return train_dp(
        images, labels, sigma=sigma, epochs=epochs, seed=seed, recipe=recipe, device=device
    )


def gaussian_noise(images: npt.NDArray[np.uint8], sigma: float, seed: int) -> npt.NDArray[np.uint8]:
    """Return ``images`` plus N(0, σ²) noise in levels, rounded and clipped to 0..255."""
    rng = np.random.default_rng([seed, 11])
    noisy = images.astype(np.float64) + rng.normal(0.0, sigma, size=images.shape)
    return np.clip(np.rint(noisy), 0, 255).astype(np.uint8)


def mark_perturb(
    images: npt.NDArray[np.uint8],
    labels: npt.NDArray[np.int64],
    seed: int,
    *,
    proxy_steps: int = OWN_STEPS,
) -> npt.NDArray[np.uint8]:
    """Mark every image as ``owner mark`` does by default with labels; keep one version each.

    A ``proxy-own`` extractor trained on these images and labels, PGD with its
    defaults at ε = :data:`MARKPERTURB_EPSILON`; the version of image ``i`` is a coin
    of the seeded generator (the practitioner's, not the protocol's).
    """
    torch.set_num_threads(1)
    proxy = train_own_proxy(images, labels, seed=seed, steps=proxy_steps, converge=False)
    side = int(images.shape[1])
    pgd = pgd_defaults(OWN_PROXY, MARKPERTURB_EPSILON)
    config = MarkingConfig(
        marker="pgd",
        epsilon=MARKPERTURB_EPSILON,
        extractor=OWN_PROXY,
        steps=int(pgd["steps"]),
        step_size=float(pgd["step_size"]),
        batch_size=int(pgd["batch_size"]),
        input_size=side,
    )
    secret = np.random.default_rng([seed, 13]).bytes(32)
    marker = make_marker(config, secret, extractor=proxy_extractor(proxy, side))
    pixels = images.reshape(*images.shape[:3], -1)
    version0, version1 = marker.mark(pixels, 0)
    bits = np.random.default_rng([seed, 17]).random(len(images)) < 0.5
    chosen = np.where(bits[:, None, None, None], version1, version0)
    return chosen.reshape(images.shape).astype(np.uint8)


def _cosine(optimiser: torch.optim.Optimizer, steps: int) -> torch.optim.lr_scheduler.LRScheduler:
    return torch.optim.lr_scheduler.CosineAnnealingLR(optimiser, steps)


def _batches(
    n: int, epochs: int, batch_size: int, generator: torch.Generator
) -> Callable[[], list[torch.Tensor]]:
    def epoch() -> list[torch.Tensor]:
        order = torch.randperm(n, generator=generator)
        return [order[s : s + batch_size] for s in range(0, n, batch_size)]

    return epoch


class ExampleNorms:
    """Per-example gradient norms of a network's Linear and Conv2d layers, by hooks.

    Each layer's input is kept on the forward pass and its output's gradient read on
    the backward pass; from the two, each example's squared gradient norm is
    accumulated without materialising the per-example gradients where a layer allows
    (a Linear layer's is ``‖a_i‖²·‖b_i‖²``; a convolution's is computed from its
    unfolded input, which is small here). The sum over layers is :attr:`squared`.
    """

    def __init__(self, model: nn.Module) -> None:
        """Watch the layers of ``model`` that hold parameters (Linear or Conv2d only)."""
        self.squared: torch.Tensor | None = None
        self.active = False
        self._inputs: dict[nn.Module, torch.Tensor] = {}
        for module in model.modules():
            if not any(True for _ in module.parameters(recurse=False)):
                continue
            if not isinstance(module, nn.Linear | nn.Conv2d):
                raise ValueError(f"per-example norms of {type(module).__name__} are not written")
            module.register_forward_hook(self._forward)

    def start(self) -> None:
        """Measure the next backward pass (forget the last one's norms)."""
        self.active, self.squared = True, None

    def stop(self) -> torch.Tensor:
        """Stop measuring; return each example's squared gradient norm of that pass."""
        self.active = False
        if self.squared is None:
            raise ValueError("no backward pass was measured")
        return self.squared

    def _forward(
        self, module: nn.Module, inputs: tuple[torch.Tensor, ...], out: torch.Tensor
    ) -> None:
        if not self.active or not out.requires_grad:
            return
        activation = inputs[0].detach()
        out.register_hook(  # type: ignore[no-untyped-call]
            lambda grad: self._backward(module, activation, grad.detach())
        )

    def _backward(self, module: nn.Module, a: torch.Tensor, b: torch.Tensor) -> None:
        if isinstance(module, nn.Linear):
            squared = a.pow(2).sum(1) * b.pow(2).sum(1)
            bias = b
        else:
            assert isinstance(module, nn.Conv2d)
            padding = module.padding
            if isinstance(padding, str):
                raise ValueError("per-example norms of a convolution padded by name")
            columns = F.unfold(a, module.kernel_size, module.dilation, padding, module.stride)
            weight = torch.einsum("nol,nkl->nok", b.flatten(2), columns)
            squared = weight.pow(2).sum((1, 2))
            bias = b.sum((2, 3))
        if module.bias is not None:
            squared = squared + bias.pow(2).sum(1)
        self.squared = squared if self.squared is None else self.squared + squared


def train_dp(
    images: npt.NDArray[np.uint8],
    labels: npt.NDArray[np.int64],
    *,
    sigma: float,
    epochs: int,
    seed: int,
    recipe: str,
    device: str = "cpu",
    batch_size: int = 128,
    lr: float = 1e-3,
    clip: float = DP_CLIP,
    make: Callable[[], DemoCNN] = make_net,
) -> DemoCNN:
    """Train with DP-SGD (per-example clipping to ``clip``, noise ``σ·clip``) and Adam.

    Per batch: a forward pass, a backward pass that measures each example's gradient
    norm (:class:`ExampleNorms`), then the backward pass of Σ_i f_i·loss_i with
    f_i = min(1, C/‖g_i‖) — whose gradient is the sum of the clipped per-example
    gradients — plus noise, over the batch size. The demo's batches, augmentation,
    learning rate and cosine decay; see the module docstring for what is not claimed.
    """
    torch.manual_seed(seed)
    model = make().to(device)
    model.train()
    norms = ExampleNorms(model)
    params = [p for p in model.parameters() if p.requires_grad]
    optimiser = torch.optim.Adam(params, lr=lr)
    steps = epochs * ((len(images) + batch_size - 1) // batch_size)
    schedule = _cosine(optimiser, steps)
    x_all = to_tensor(images)
    y_all = torch.from_numpy(np.asarray(labels, dtype=np.int64))
    generator = torch.Generator().manual_seed(seed)
    noise = torch.Generator().manual_seed(seed + 1_000_003)
    augment = augmenter(recipe)
    epoch_batches = _batches(len(images), epochs, batch_size, generator)
    for _ in range(epochs):
        for index in epoch_batches():
            batch = augment(x_all[index], generator) if augment is not None else x_all[index]
            target = y_all[index].to(device)
            norms.start()
            losses = F.cross_entropy(model(batch.to(device)), target, reduction="none")
            torch.autograd.grad(losses.sum(), params, retain_graph=True)
            factor = (clip / (norms.stop().sqrt() + 1e-12)).clamp(max=1.0).detach()
            optimiser.zero_grad()
            (factor * losses).sum().backward()  # type: ignore[no-untyped-call]
            for p in params:
                assert p.grad is not None
                drawn = torch.randn(p.shape, generator=noise).to(device)
                p.grad = (p.grad + sigma * clip * drawn) / len(index)
            optimiser.step()
            schedule.step()
    return model.to("cpu").eval()


class _Inference(nn.Module):
    """Nasr et al.'s inference model, reduced: an MLP on (softmax vector, one-hot label)."""

    def __init__(self, n_classes: int) -> None:
        super().__init__()
        self.n_classes = n_classes
        self.net = nn.Sequential(
            nn.Linear(2 * n_classes, ADVREG_HIDDEN),
            nn.ReLU(),
            nn.Linear(ADVREG_HIDDEN, ADVREG_HIDDEN),
            nn.ReLU(),
            nn.Linear(ADVREG_HIDDEN, 1),
        )

    def forward(self, probabilities: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        onehot = F.one_hot(labels, self.n_classes).to(probabilities.dtype)
        out: torch.Tensor = self.net(torch.cat([probabilities, onehot], dim=1)).squeeze(1)
        return out


def train_advreg(
    images: npt.NDArray[np.uint8],
    labels: npt.NDArray[np.int64],
    reference: npt.NDArray[np.uint8],
    *,
    epochs: int,
    seed: int,
    recipe: str,
    device: str = "cpu",
    batch_size: int = 128,
    lr: float = 1e-3,
    strength: float = ADVREG_LAMBDA,
    make: Callable[[], DemoCNN] = make_net,
) -> DemoCNN:
    """Train with adversarial regularisation against a membership-inference model.

    Per batch: one step of the inference model on (batch: members, as many reference
    images: non-members; binary cross-entropy), then one step of the classifier on
    cross-entropy + ``strength`` · mean log h(f(x), y) over the batch. The reference
    images' labels are the classifier's own predictions (the practitioner need not
    label them).
    """
    torch.manual_seed(seed)
    model = make().to(device)
    n_classes = int(model(torch.zeros(1, 1, *images.shape[1:3], device=device)).shape[1])
    inference = _Inference(n_classes).to(device)
    optimiser = torch.optim.Adam(model.parameters(), lr=lr)
    attack_optimiser = torch.optim.Adam(inference.parameters(), lr=lr)
    steps = epochs * ((len(images) + batch_size - 1) // batch_size)
    schedule = _cosine(optimiser, steps)
    x_all, x_ref = to_tensor(images), to_tensor(reference)
    y_all = torch.from_numpy(np.asarray(labels, dtype=np.int64))
    generator = torch.Generator().manual_seed(seed)
    augment = augmenter(recipe)
    epoch_batches = _batches(len(images), epochs, batch_size, generator)
    model.train()
    for _ in range(epochs):
        for index in epoch_batches():
            batch = augment(x_all[index], generator) if augment is not None else x_all[index]
            batch, target = batch.to(device), y_all[index].to(device)
            chosen = torch.randint(0, len(x_ref), (len(index),), generator=generator)
            ref = x_ref[chosen].to(device)
            with torch.no_grad():
                member = F.softmax(model(batch), dim=1)
                outsider = F.softmax(model(ref), dim=1)
            attack_optimiser.zero_grad()
            scores = torch.cat([inference(member, target), inference(outsider, outsider.argmax(1))])
            truth = torch.cat([torch.ones(len(index)), torch.zeros(len(index))]).to(device)
            F.binary_cross_entropy_with_logits(scores, truth).backward()  # type: ignore[no-untyped-call]
            attack_optimiser.step()
            optimiser.zero_grad()
            logits = model(batch)
            gain = F.logsigmoid(inference(F.softmax(logits, dim=1), target)).mean()
            loss = F.cross_entropy(logits, target) + strength * gain
            loss.backward()  # type: ignore[no-untyped-call]
            optimiser.step()
            schedule.step()
    return model.to("cpu").eval()
