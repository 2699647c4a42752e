"""The ladder's ordinary practitioner: a small ResNet trained the way practitioners train.

Issue #19's rung (b) asks whether an audit finds data use in a model that was not
built to memorise: a residual network (BatchNorm, no wide fully connected layer),
SGD with Nesterov momentum and weight decay, pad-crop-flip augmentation and a
one-cycle learning-rate schedule, trained to convergence (≥ 99% train accuracy) on
a training set of ten thousand images or more. Nothing in it was chosen for the
audit's sake; the recipe is the usual CIFAR one, scaled to 28×28 grey images.

Rung (c), the paper's scale, trains :func:`make_resnet18` (the CIFAR form of
ResNet-18: 11.2M weights, a 3×3 stem, no max-pool, four stages of two blocks) with the
same recipe on batches of :data:`SCALE_BATCH` at a peak of :data:`SCALE_LR` (the usual
linear scaling of the batch-128 recipe), in bfloat16 autocast on an accelerator, as
practitioners train on one.

Training is deterministic for a fixed number of torch threads, as the demo's: the
weights are initialised under ``torch.manual_seed(seed)`` and batches are shuffled and
augmented from a ``torch.Generator`` seeded with ``seed``.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import numpy.typing as npt
import torch
import torch.nn.functional as F  # noqa: N812 - the usual torch alias
from torch import nn

from demo.models import N_CLASSES
from demo.practitioner import augmenter
from twinaudit.owner.marking.proxy import fit

#: Channels of the three stages (at 14×14, 7×7 and 4×4: each stage halves the side, the
#: first too, which keeps a CPU epoch of 10,000 images near 10 s on one thread).
WIDTHS = (32, 64, 128)
#: Residual blocks per stage.
BLOCKS = 1
#: SGD settings: the usual CIFAR recipe.
LR = 0.1
MOMENTUM = 0.9
WEIGHT_DECAY = 5e-4
BATCH = 128
#: Rung (c)'s batch and peak learning rate (4 × the batch, 4 × the rate).
SCALE_BATCH = 512
SCALE_LR = 0.4


class Block(nn.Module):
    """A basic residual block: conv3×3–BN–ReLU–conv3×3–BN, plus the (projected) input."""

    def __init__(self, c_in: int, c_out: int, stride: int) -> None:
        """Build the block; a 1×1 projection when the shape changes."""
        super().__init__()
        self.conv1 = nn.Conv2d(c_in, c_out, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(c_out)
        self.conv2 = nn.Conv2d(c_out, c_out, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(c_out)
        self.short: nn.Module = nn.Identity()
        if stride != 1 or c_in != c_out:
            self.short = nn.Sequential(
                nn.Conv2d(c_in, c_out, 1, stride, bias=False), nn.BatchNorm2d(c_out)
            )

    def forward(self, x):  # type: ignore[no-untyped-def]
        """Return ReLU(F(x) + shortcut(x))."""
        out = F.relu(self.bn1(self.conv1(x)))
        return F.relu(self.bn2(self.conv2(out)) + self.short(x))


class SmallResNet(nn.Module):
    """Stem conv3×3, stages of ``blocks`` blocks, global average pool, linear.

    Each stage's first block has stride 2, the first stage's ``first_stride``. With
    the defaults it has 309k weights (the demo's CNN has 1.62M, 99% of them in one
    fully connected layer).
    """

    def __init__(
        self, widths: tuple[int, ...] = WIDTHS, blocks: int = BLOCKS, first_stride: int = 2
    ) -> None:
        """Build the network (PyTorch's default initialisation; seed torch before)."""
        super().__init__()
        self.stem = nn.Sequential(
            nn.Conv2d(1, widths[0], 3, 1, 1, bias=False), nn.BatchNorm2d(widths[0]), nn.ReLU()
        )
        layers: list[nn.Module] = []
        c_in = widths[0]
        for stage, width in enumerate(widths):
            for b in range(blocks):
                stride = (first_stride if stage == 0 else 2) if b == 0 else 1
                layers.append(Block(c_in, width, stride))
                c_in = width
        self.stages = nn.Sequential(*layers)
        self.head = nn.Linear(c_in, N_CLASSES)

    def forward(self, x):  # type: ignore[no-untyped-def]
        """Return logits (N, classes) for images (N, 1, 28, 28) in [0, 1]."""
        out = self.stages(self.stem(x))
        return self.head(torch.flatten(F.adaptive_avg_pool2d(out, 1), 1))


def make_resnet() -> SmallResNet:
    """Return an untrained :class:`SmallResNet` (the ``--arch`` entry point of ``oracle serve``)."""
    return SmallResNet()


def make_resnet18() -> SmallResNet:
    """Return an untrained CIFAR-form ResNet-18 for one-channel 28×28 images (11.2M weights).

    Stages of 64, 128, 256 and 512 channels at 28×28, 14×14, 7×7 and 4×4, two basic
    blocks each: the network of the paper's classifier experiments.
    """
    return SmallResNet(widths=(64, 128, 256, 512), blocks=2, first_stride=1)


def train_standard(
    images: npt.NDArray[np.uint8],
    labels: npt.NDArray[np.integer],
    *,
    epochs: int,
    seed: int = 0,
    recipe: str = "pad-crop-flip",
    device: str = "cpu",
    weight_decay: float = WEIGHT_DECAY,
    make: Callable[[], SmallResNet] = make_resnet,
    batch: int = BATCH,
    lr: float = LR,
    mixed: bool = False,
    progress: Callable[[int, float, float], None] | None = None,
) -> SmallResNet:
    """Train a fresh network of ``make`` with SGD; return it on the CPU in eval mode.

    Nesterov momentum :data:`MOMENTUM`, weight decay ``weight_decay`` (not on
    BatchNorm and biases, as is usual), batches of ``batch``, and a one-cycle
    schedule peaking at ``lr`` after 15% of the steps and annealing (cosine) to
    near 0. With ``mixed`` on an accelerator the steps run in bfloat16 autocast on
    channels-last tensors (on the CPU it changes nothing). ``progress(epoch, loss,
    accuracy)`` is called after each epoch (loss and accuracy on that epoch's
    augmented batches).
    """
    torch.manual_seed(seed)
    mixed = mixed and device != "cpu"
    model = make().to(device)
    if mixed:
        # Module.to takes memory_format at run time; torch's stubs do not list it.
        model = model.to(memory_format=torch.channels_last)  # type: ignore[call-overload]
    decay = [p for p in model.parameters() if p.ndim > 1]
    no_decay = [p for p in model.parameters() if p.ndim <= 1]
    optimiser = torch.optim.SGD(
        [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0}],
        lr=lr,
        momentum=MOMENTUM,
        nesterov=True,
    )
    per_epoch = (len(images) + batch - 1) // batch
    schedule = torch.optim.lr_scheduler.OneCycleLR(
        optimiser, max_lr=lr, total_steps=epochs * per_epoch, pct_start=0.15
    )
    fit(
        model,
        images,
        labels,
        optimiser=optimiser,
        schedule=schedule,
        epochs=epochs,
        seed=seed,
        batch_size=batch,
        augment=augmenter(recipe),
        progress=progress,
        device=device,
        mixed=mixed,
    )
    back: SmallResNet = model.to("cpu", memory_format=torch.contiguous_format)  # type: ignore[call-overload]
    return back.eval()
