"""The owner's proxy practitioner: a small CNN trained on public data, whose features mark.

The PGD marker pushes the two versions of an image apart in the features of an
extractor h (paper Eq. 2). An ImageNet network sees a 28×28 grey garment, resized,
as little like what a small classifier trained on such images sees; measured on
Fashion-MNIST at ε = 10, marks made in its features left the hidden twin as easy for
the trained model as the published one. A *proxy* is an extractor of the audited
kind: a small classifier the owner trains herself on labelled public images of her
domain. Twins far apart in its hidden layer are far apart for the classifiers that
learn from her published images too, so a model that fitted the published twin
answers the hidden one as an image it never saw (``docs/results.md``, "Regime
ladder").

:class:`SmallCNN` (conv 16, conv 32, a wide hidden layer) is the proxy; it is also the
demo's practitioner network (``demo.models``). :func:`train_proxy` trains it the way
the demo trains (Adam, cosine decay, pad-crop-flip), :func:`save_proxy` writes the
weights with the input they expect, and :func:`load_proxy` returns the
:class:`~twinaudit.owner.marking.extractors.Extractor` of its hidden layer, which
``--extractor proxy-cnn --extractor-weights FILE`` names.

:func:`train_own_proxy` trains the same proxy on the owner's own labelled images,
the very ones she marks, until it fits them (a convergence check on its training loss,
at most a schedule set by their number): what ``owner mark`` does when she gives
labels and no extractor (``--extractor proxy-own``), so that an owner without labelled
public data still marks in the features of her domain.

Training is deterministic for a fixed number of torch threads: weights initialised
under ``torch.manual_seed(seed)``, batches shuffled and augmented from a
``torch.Generator`` seeded with ``seed``.
"""

from __future__ import annotations

import hashlib
import pickle
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO, Final

import numpy as np
import numpy.typing as npt
import torch
import torch.nn.functional as F  # noqa: N812 - the usual torch alias
from torch import nn

from twinaudit.protocol.atomic_file import write_atomically
from twinaudit.protocol.errors import InputError, ParameterError

from .config import OWN_PROXY_EPOCHS, OWN_PROXY_STEPS, PROXY_EPOCHS, PROXY_TRAIN_BATCH

#: Zero padding on each side before the random crop of :func:`pad_crop_flip` (pixels).
PAD: Final = 4
#: The proxy's defaults: channels of its first convolution, units of its hidden layer.
WIDTH: Final = 16
HIDDEN: Final = 1024
#: Side of the square input the proxy takes unless told (Fashion-MNIST's).
SIDE: Final = 28
#: Training defaults of :func:`train_proxy`.
EPOCHS: Final = PROXY_EPOCHS
BATCH: Final = PROXY_TRAIN_BATCH
LR: Final = 1e-3
#: The schedule of a proxy trained on the owner's own items (:func:`train_own_proxy`,
#: :func:`own_proxy_epochs`): at least the optimiser steps of :data:`EPOCHS` epochs over
#: 10,000 images in batches of :data:`BATCH`, and at least :data:`OWN_EPOCHS` epochs.
OWN_STEPS: Final = OWN_PROXY_STEPS
OWN_EPOCHS: Final = OWN_PROXY_EPOCHS
#: The convergence check of :func:`train_own_proxy`: it stops once the mean training loss
#: (cross-entropy on the augmented batches) over its last whole epochs of at least
#: :data:`CONVERGED_WINDOW` optimiser steps is below :data:`CONVERGED_LOSS`, the proxy then
#: fitting nearly every one of the owner's items however they are cropped and flipped.
#: On 200 Fashion-MNIST images (two batches an epoch) it stops at step 1,606 of 3,160
#: (``python -m bench proxy_fit``; docs/benchmarks.md, "The proxy's training").
CONVERGED_LOSS: Final = 0.01
CONVERGED_WINDOW: Final = 64
#: Keys of a proxy file that describe the input rather than hold weights.
_META: Final = ("proxy.side", "proxy.channels")

Augment = Callable[[torch.Tensor, torch.Generator], torch.Tensor]


def conv_layers(width: int, channels: int = 1) -> list[nn.Module]:
    """Return conv3×3(C→w)–ReLU–pool, conv3×3(w→2w)–ReLU–pool: a side shrinks fourfold."""
    return [
        nn.Conv2d(channels, width, 3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(width, 2 * width, 3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),
    ]


class SmallCNN(nn.Module):
    """conv3×3(C→w)–ReLU–pool, conv3×3(w→2w)–ReLU–pool, fc(→hidden)–ReLU–fc(→classes).

    For ``side``×``side`` inputs with ``channels`` channels (``side`` divisible by 4).
    With w = 16 and 1,024 hidden units on 28×28 grey images it has 1.62M weights, 99%
    of them in the hidden layer: capacity to memorise a few thousand images cheaply.
    """

    def __init__(
        self,
        *,
        channels: int = 1,
        side: int = SIDE,
        width: int = WIDTH,
        hidden: int = HIDDEN,
        n_classes: int = 10,
    ) -> None:
        """Build the layers (PyTorch's default initialisation; seed torch before)."""
        super().__init__()
        if side < 4 or side % 4:
            raise ParameterError(f"the proxy's side must be a multiple of 4, not {side}")
        self.features = nn.Sequential(*conv_layers(width, channels))
        self.classifier = nn.Sequential(
            nn.Flatten(),
            nn.Linear(2 * width * (side // 4) ** 2, hidden),
            nn.ReLU(),
            nn.Linear(hidden, n_classes),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Return logits (N, classes) for images (N, C, side, side) in [0, 1]."""
        out: torch.Tensor = self.classifier(self.features(x))
        return out

    def hidden_layer(self) -> nn.Module:
        """Return the module mapping an input to its hidden-layer activations (the features)."""
        return nn.Sequential(self.features, *list(self.classifier)[:3])


def to_tensor(images: npt.NDArray[np.uint8]) -> torch.Tensor:
    """Return uint8 images (N, H, W) or (N, H, W, C) as float32 (N, C, H, W) in [0, 1]."""
    array = images.reshape(images.shape[0], images.shape[1], images.shape[2], -1)
    return torch.from_numpy(np.array(array, dtype=np.uint8)).permute(0, 3, 1, 2).float() / 255.0


def pad_crop_flip(x: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """Return a batch (N, C, H, W) padded by :data:`PAD`, randomly cropped back and flipped.

    Each image gets its own crop offset (uniform in 0..2·PAD per axis) and its own
    left–right flip (probability ½), all drawn from ``generator``.
    """
    n, _, height, width = x.shape
    padded = F.pad(x, (PAD, PAD, PAD, PAD))
    tops = torch.randint(0, 2 * PAD + 1, (n,), generator=generator)
    lefts = torch.randint(0, 2 * PAD + 1, (n,), generator=generator)
    flips = torch.randint(0, 2, (n,), generator=generator).bool()
    rows = tops[:, None] + torch.arange(height)  # (n, H)
    cols = torch.arange(width).expand(n, width)
    cols = lefts[:, None] + torch.where(flips[:, None], width - 1 - cols, cols)  # (n, W)
    batch = torch.arange(n)[:, None, None]
    out = padded.permute(0, 2, 3, 1)[batch, rows[:, :, None], cols[:, None, :]]
    return out.permute(0, 3, 1, 2).contiguous()


def fit(
    model: nn.Module,
    images: npt.NDArray[np.uint8],
    labels: npt.NDArray[np.integer],
    *,
    optimiser: torch.optim.Optimizer,
    schedule: torch.optim.lr_scheduler.LRScheduler | None,
    epochs: int,
    seed: int,
    batch_size: int,
    augment: Augment | None,
    progress: Callable[[int, float, float], None] | None = None,
    device: str = "cpu",
    mixed: bool = False,
    stop: Callable[[int, float, float], bool] | None = None,
) -> int:
    """Train ``model`` (already on ``device``) in place: cross-entropy, one step per batch.

    Batches are shuffled and augmented (``augment``) from a ``torch.Generator`` seeded
    with ``seed``, on the CPU; ``schedule`` (if any) steps after every batch. With
    ``mixed`` (an accelerator only) the forward pass runs in bfloat16 autocast and
    batches are sent channels-last.
    ``progress(epoch, loss, train_accuracy)`` is called after every epoch (the mean loss
    and the accuracy on the augmented batches seen in that epoch); then
    ``stop(epoch, loss, train_accuracy)``, with the same figures, ends training early when
    it returns true. Returns the epochs trained.
    """
    x = to_tensor(images)
    y = torch.from_numpy(np.asarray(labels, dtype=np.int64))
    generator = torch.Generator().manual_seed(seed)
    model.train()
    measure = progress is not None or stop is not None
    epoch = 0
    for epoch in range(1, epochs + 1):
        order = torch.randperm(x.shape[0], generator=generator)
        total_loss, correct = 0.0, 0
        for start in range(0, x.shape[0], batch_size):
            index = order[start : start + batch_size]
            batch = augment(x[index], generator) if augment is not None else x[index]
            target = y[index].to(device)
            optimiser.zero_grad()
            if mixed:
                with torch.autocast(device_type=torch.device(device).type, dtype=torch.bfloat16):
                    logits = model(batch.to(device, memory_format=torch.channels_last))
                    loss = F.cross_entropy(logits.float(), target)
            else:
                logits = model(batch.to(device))
                loss = F.cross_entropy(logits, target)
            loss.backward()  # type: ignore[no-untyped-call]
            optimiser.step()
            if schedule is not None:
                schedule.step()
            if measure:  # reading the loss waits for the device: only when asked
                total_loss += float(loss.detach()) * len(index)
                correct += int((logits.argmax(1) == target).sum())
        if progress is not None:
            progress(epoch, total_loss / x.shape[0], correct / x.shape[0])
        if stop is not None and stop(epoch, total_loss / x.shape[0], correct / x.shape[0]):
            break
    return epoch


def train_proxy(
    images: npt.NDArray[np.uint8],
    labels: npt.NDArray[np.integer],
    *,
    epochs: int = EPOCHS,
    seed: int = 0,
    progress: Callable[[int, float, float], None] | None = None,
    stop: Callable[[int, float, float], bool] | None = None,
    device: str = "cpu",
) -> SmallCNN:
    """Train a proxy on labelled uint8 images (N, H, W, C), H = W divisible by 4; eval mode.

    Adam at :data:`LR` with a cosine decay to 0 over ``epochs`` epochs' steps, batches of
    :data:`BATCH`, pad-crop-flip augmentation. Labels are 0..n−1 (``n`` the classes).
    ``stop`` may end training before (:func:`fit`); the schedule keeps its length. The
    model trains on ``device`` and is returned on the CPU.
    """
    if images.ndim == 3:
        images = images[..., None]
    if images.ndim != 4 or images.dtype != np.uint8 or images.shape[1] != images.shape[2]:
        raise InputError("a proxy trains on square uint8 images (N, H, W, C)")
    classes = np.asarray(labels)
    if len(classes) != len(images) or len(classes) == 0 or int(classes.min()) < 0:
        raise InputError("a proxy needs one label (0 or more) per image")
    torch.manual_seed(seed)
    model = SmallCNN(
        channels=images.shape[3], side=images.shape[1], n_classes=max(int(classes.max()) + 1, 2)
    ).to(device)
    optimiser = torch.optim.Adam(model.parameters(), lr=LR)
    steps = epochs * ((len(images) + BATCH - 1) // BATCH)
    schedule = torch.optim.lr_scheduler.CosineAnnealingLR(optimiser, steps)
    fit(
        model,
        images,
        classes,
        optimiser=optimiser,
        schedule=schedule,
        epochs=epochs,
        seed=seed,
        batch_size=BATCH,
        augment=pad_crop_flip,
        progress=progress,
        device=device,
        stop=stop,
    )
    return model.cpu().eval()


def own_proxy_epochs(n_images: int, steps: int | None = None) -> int:
    """Return the epochs of the schedule of a proxy of the owner's own ``n_images`` items.

    By default the most it trains (:func:`train_own_proxy` stops before once it fits
    them): whole epochs of at least :data:`OWN_STEPS` optimiser steps, and at least
    :data:`OWN_EPOCHS` epochs. A few hundred items need the steps, not the epochs, to fit
    (200 Fashion-MNIST items fit at about 1,600 steps, 800 epochs, and not on a schedule
    of 800 steps); a collection of more than 10,368 items (81 batches an epoch) gets the
    epochs, each item seen as often as the public proxy's are (docs/benchmarks.md, "The
    proxy's training"). ``steps`` other than None asks for whole epochs of at least that
    many steps and nothing else (smoke runs).
    """
    if n_images < 1:
        raise InputError("a proxy needs at least one image")
    per_epoch = (n_images + BATCH - 1) // BATCH
    if steps is not None:
        return max(1, -(-steps // per_epoch))
    return max(1, -(-OWN_STEPS // per_epoch), OWN_EPOCHS)


class FitCheck:
    """The convergence check of :func:`train_own_proxy`, called after every epoch.

    True once the mean of the last epochs' training losses, over whole epochs of at
    least :data:`CONVERGED_WINDOW` optimiser steps together (one epoch is
    ⌈n / :data:`BATCH`⌉ steps), is below :data:`CONVERGED_LOSS`. Records the epoch it
    stopped at (``stopped``, and ``stopped_step`` the optimiser steps then), None while
    it has not.
    """

    def __init__(self, n_images: int) -> None:
        """Check a proxy trained on ``n_images`` images."""
        self.per_epoch = (n_images + BATCH - 1) // BATCH
        self.window = max(1, -(-CONVERGED_WINDOW // self.per_epoch))
        self.losses: deque[float] = deque(maxlen=self.window)
        self.stopped: int | None = None

    @property
    def stopped_step(self) -> int | None:
        """Return the optimiser steps trained when it stopped, None while it has not."""
        return None if self.stopped is None else self.stopped * self.per_epoch

    def __call__(self, epoch: int, loss: float, _accuracy: float) -> bool:
        """Record epoch ``epoch``'s mean loss; return whether training may stop."""
        self.losses.append(loss)
        if len(self.losses) == self.window and sum(self.losses) / self.window < CONVERGED_LOSS:
            self.stopped = epoch
            return True
        return False


def train_own_proxy(
    images: npt.NDArray[np.uint8],
    labels: npt.NDArray[np.integer],
    *,
    seed: int = 0,
    steps: int | None = None,
    converge: bool = True,
    device: str = "cpu",
    progress: Callable[[int, float, float], None] | None = None,
    check: FitCheck | None = None,
) -> SmallCNN:
    """Train a proxy on the owner's own labelled images until it fits them.

    What ``owner mark`` does when she gives labels and no extractor: a proxy of her
    domain trained on the very items she marks. It trains with :func:`train_proxy`'s
    recipe, its schedule :func:`own_proxy_epochs` long (at least the steps the proxy
    trained on 10,000 public images takes, and at least its epochs; ``steps`` other
    than None are for smoke runs), and with ``converge`` it stops at the first epoch
    where ``check`` (a :class:`FitCheck` of the images, made here when not given; it
    records where it stopped) says it fits them; without, it trains every step (what
    ``owner mark`` did before ``MarkingConfig.proxy_converge``).

    On the CPU it trains on one torch thread (the caller's thread count is restored
    after), so that a resumed marking run on the same machine retrains bit-identical
    weights whatever ``--threads`` it is given; on a GPU with cuDNN's deterministic
    algorithms, for the same reason.
    """
    epochs = own_proxy_epochs(len(images), steps)
    stop = (check if check is not None else FitCheck(len(images))) if converge else None
    threads = torch.get_num_threads()
    cudnn = torch.backends.cudnn
    deterministic, benchmark = cudnn.deterministic, cudnn.benchmark
    torch.set_num_threads(1)
    cudnn.deterministic, cudnn.benchmark = True, False
    try:
        return train_proxy(
            images, labels, epochs=epochs, seed=seed, progress=progress, stop=stop, device=device
        )
    finally:
        torch.set_num_threads(threads)
        cudnn.deterministic, cudnn.benchmark = deterministic, benchmark


def weights_digest(model: nn.Module) -> str:
    """Return ``"sha256:"`` and the hex SHA-256 of ``model``'s weights.

    Hashed in state-dict order: each tensor's name, dtype, shape and little-endian
    bytes, each piece length-prefixed, so two models hash alike only if every
    weight is bit-identical.
    """
    digest = hashlib.sha256(b"twinaudit/owner/v1/proxy-weights\x00")
    for name, tensor in model.state_dict().items():
        data = tensor.detach().cpu().contiguous().numpy()
        for piece in (name.encode(), str(data.dtype).encode(), repr(data.shape).encode()):
            digest.update(len(piece).to_bytes(8, "little") + piece)
        raw = data.astype(data.dtype.newbyteorder("<"), copy=False).tobytes()
        digest.update(len(raw).to_bytes(8, "little") + raw)
    return "sha256:" + digest.hexdigest()


def save_proxy(model: SmallCNN, path: Path | BinaryIO) -> None:
    """Write the proxy's weights and the input they expect (side, channels) to ``path``.

    ``path`` is a file name or an open binary stream (:func:`write_proxy` gives one).
    """
    conv = model.features[0]
    assert isinstance(conv, nn.Conv2d)
    first = model.classifier[1]
    assert isinstance(first, nn.Linear)
    side = 4 * round((first.in_features / (2 * conv.out_channels)) ** 0.5)
    state = dict(model.state_dict())
    state["proxy.side"] = torch.tensor(side)
    state["proxy.channels"] = torch.tensor(conv.in_channels)
    torch.save(state, path)


def load_proxy_state(path: str) -> tuple[SmallCNN, int]:
    """Return the proxy saved at ``path`` (eval mode) and the side of its input.

    Raises ``InputError`` for a file that is not a proxy's.
    """
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except (OSError, RuntimeError, ValueError, EOFError, pickle.UnpicklingError) as exc:
        raise InputError(f"cannot read the proxy {path!r}: {exc}") from None
    if not isinstance(state, dict) or any(k not in state for k in _META):
        raise InputError(f"{path!r} is not a proxy written by twinaudit owner proxy")
    side, channels = (int(state.pop(k)) for k in _META)
    try:
        width = int(state["features.0.weight"].shape[0])
        hidden, _ = state["classifier.1.weight"].shape
        n_classes = int(state["classifier.3.weight"].shape[0])
        model = SmallCNN(
            channels=channels, side=side, width=width, hidden=int(hidden), n_classes=n_classes
        )
        model.load_state_dict(state, strict=True)
    except (KeyError, RuntimeError, ParameterError, AttributeError) as exc:
        raise InputError(f"the proxy {path!r} does not fit its own description: {exc}") from None
    return model.eval(), side


def square_images(pixels: npt.NDArray[np.uint8], side: int) -> npt.NDArray[np.uint8]:
    """Return uint8 images (B, H, W, C) resized to ``side``×``side`` (bilinear, antialiased).

    Images with a side above ``side`` (photos) are resized as uint8 (torch's fast path,
    no float copy of the batch: a batch of photos is gigabytes in float); smaller ones
    in float, image by image, then rounded.
    """
    if pixels.shape[1] == pixels.shape[2] == side:
        return pixels
    x = torch.from_numpy(np.require(pixels, requirements=["C", "W"])).permute(0, 3, 1, 2)
    if pixels.shape[1] > side or pixels.shape[2] > side:
        out = F.interpolate(x, size=(side, side), mode="bilinear", antialias=True)
        return np.ascontiguousarray(out.permute(0, 2, 3, 1).numpy())
    squares = [
        F.interpolate(x[k : k + 1].float(), size=(side, side), mode="bilinear")
        for k in range(x.shape[0])
    ]
    out = torch.cat(squares).round().clamp(0, 255).to(torch.uint8)
    return np.ascontiguousarray(out.permute(0, 2, 3, 1).numpy())


def write_proxy(model: SmallCNN, path: Path) -> None:
    """Write the proxy to ``path`` atomically (:mod:`twinaudit.protocol.atomic_file`)."""
    write_atomically(path, lambda stream: save_proxy(model, stream))
