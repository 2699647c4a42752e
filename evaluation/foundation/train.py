"""Training loops and utility measures of the three foundation models (CPU, seeded).

Each ``train_*`` function takes the data as arrays or strings and, optionally, a
model to continue from (fine-tuning starts from the base model's weights); weights
are initialised under ``torch.manual_seed(seed)`` and batches shuffled and augmented
from a ``torch.Generator`` seeded with ``seed``, so a run is reproducible for a fixed
number of torch threads. The global RNG state is restored afterwards.

- :func:`train_simclr`: NT-Xent over two views of every image, Adam; the views are
  random resized crops (area :data:`CROP_SCALE`, 0.8–1.0 as the audit's
  ``random-resized-crop-flip`` family) with flips (:func:`crop_flip`), or pad-4 shifts
  with flips (:func:`pad_shift_flip`, the ``pad-shift-flip`` family).
- :func:`train_lm`: next-byte cross-entropy, Adam, batches of sentences of similar
  length.
- :func:`train_clip`: symmetric InfoNCE between images and captions, Adam; images
  whose captions are identical count as matches of each other's caption.

Utility: :func:`knn_accuracy` (encoder: cosine k-nearest-neighbour classification
of test images from labelled train images), :func:`perplexity` (LM: per-byte
perplexity of held-out sentences), :func:`zero_shot_accuracy` (CLIP: the class whose
prompt embedding is nearest).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Final

import numpy as np
import numpy.typing as npt
import torch
import torch.nn.functional as F  # noqa: N812 - the usual torch alias

from demo.practitioner import pad_crop_flip

from .captions import WordTokenizer, prompt
from .models import BYTE_VOCABULARY, ByteGru, DualEncoder, SimClr

#: Area fraction range of the training crops (as the audit's `random-resized-crop-flip`).
CROP_SCALE = (0.8, 1.0)
#: Aspect-ratio range of the training crops (as the audit's).
CROP_RATIO = (3 / 4, 4 / 3)
#: The BOS id of the byte tokenizer.
BOS = 256


def to_tensor(images: npt.NDArray[np.uint8]) -> torch.Tensor:
    """Return uint8 images (N, 28, 28) or (N, 28, 28, 1) as float32 (N, 1, 28, 28) in [0, 1]."""
    array = np.asarray(images, dtype=np.uint8).reshape(len(images), 1, 28, 28)
    return torch.from_numpy(array.copy()).float() / 255.0


def crop_flip(x: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """Return a random resized crop of every image of (N, C, H, W), flipped with probability ½."""
    n = x.shape[0]
    draw = torch.rand((4, n), generator=generator)
    scale = CROP_SCALE[0] + (CROP_SCALE[1] - CROP_SCALE[0]) * draw[0]
    low, high = math.log(CROP_RATIO[0]), math.log(CROP_RATIO[1])
    ratio = torch.exp(low + (high - low) * draw[1])
    width = torch.sqrt(scale * ratio).clamp(max=1.0)
    height = torch.sqrt(scale / ratio).clamp(max=1.0)
    cx = (1.0 - width) * (2.0 * draw[2] - 1.0)
    cy = (1.0 - height) * (2.0 * draw[3] - 1.0)
    flips = torch.randint(0, 2, (n,), generator=generator).float() * -2.0 + 1.0
    theta = torch.zeros((n, 2, 3))
    theta[:, 0, 0], theta[:, 0, 2] = width * flips, cx
    theta[:, 1, 1], theta[:, 1, 2] = height, cy
    grid = F.affine_grid(theta, list(x.shape), align_corners=False)
    return F.grid_sample(x, grid, mode="bilinear", padding_mode="border", align_corners=False)


def pad_shift_flip(x: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """Return every image padded by 4, cut back at a random offset, flipped with probability ½.

    The audit's ``pad-shift-flip`` family (:func:`demo.practitioner.pad_crop_flip`): unlike
    a resized crop it moves pixels without resampling them, so a pixel-level mark stays
    intact in every view.
    """
    return pad_crop_flip(x, generator)


#: The SimCLR view augmentations, by the name of the audit family they match.
AUGMENTATIONS: Final = {"random-resized-crop-flip": crop_flip, "pad-shift-flip": pad_shift_flip}


def nt_xent(a: torch.Tensor, b: torch.Tensor, temperature: float) -> torch.Tensor:
    """Return SimCLR's NT-Xent loss of two batches of projections of the same images."""
    z = F.normalize(torch.cat([a, b]), dim=1)
    sim = z @ z.T / temperature
    n = a.shape[0]
    sim = sim.masked_fill(torch.eye(2 * n, dtype=torch.bool), float("-inf"))
    target = torch.cat([torch.arange(n, 2 * n), torch.arange(0, n)])
    return F.cross_entropy(sim, target)


def train_simclr(
    images: npt.NDArray[np.uint8],
    *,
    epochs: int,
    seed: int,
    start: SimClr | None = None,
    batch: int = 256,
    lr: float = 1e-3,
    temperature: float = 0.2,
    augmentation: str = "random-resized-crop-flip",
    device: str = "cpu",
) -> SimClr:
    """Train (or continue training) a :class:`SimClr` on ``images`` for ``epochs`` epochs.

    Each image gets two views per step from ``augmentation`` (one of :data:`AUGMENTATIONS`),
    drawn on the CPU; the steps run on ``device``. The model comes back on the CPU.
    """
    view = AUGMENTATIONS[augmentation]
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        model = (SimClr() if start is None else start).to(device)
        model.train()
        data = to_tensor(images)
        generator = torch.Generator().manual_seed(seed)
        optimiser = torch.optim.Adam(model.parameters(), lr=lr)
        for _ in range(epochs):
            order = torch.randperm(len(data), generator=generator)
            for begin in range(0, len(data) - 1, batch):
                x = data[order[begin : begin + batch]]
                if len(x) < 2:
                    continue
                a, b = view(x, generator).to(device), view(x, generator).to(device)
                loss = nt_xent(model(a), model(b), temperature)
                optimiser.zero_grad()
                loss.backward()  # type: ignore[no-untyped-call]
                optimiser.step()
    return model.to("cpu").eval()


def _byte_rows(texts: Sequence[str]) -> list[list[int]]:
    return [[BOS, *text.encode("utf-8")] for text in texts]


def _padded(rows: Sequence[list[int]]) -> tuple[torch.Tensor, torch.Tensor]:
    """Return ids (B, T) padded with BOS and the mask of real next tokens (B, T − 1)."""
    width = max(len(row) for row in rows)
    ids = torch.full((len(rows), width), BOS, dtype=torch.int64)
    mask = torch.zeros((len(rows), width - 1), dtype=torch.bool)
    for i, row in enumerate(rows):
        ids[i, : len(row)] = torch.tensor(row)
        mask[i, : len(row) - 1] = True
    return ids, mask


def _length_batches(
    rows: Sequence[list[int]], batch: int, generator: torch.Generator
) -> list[list[int]]:
    """Shuffle, then sort windows of 20 batches by length, and cut batches (less padding)."""
    order = torch.randperm(len(rows), generator=generator).tolist()
    window = 20 * batch
    batches: list[list[int]] = []
    for begin in range(0, len(order), window):
        part = sorted(order[begin : begin + window], key=lambda i: len(rows[i]))
        batches.extend(part[b : b + batch] for b in range(0, len(part), batch))
    shuffled = torch.randperm(len(batches), generator=generator).tolist()
    return [batches[i] for i in shuffled]


def train_lm(
    texts: Sequence[str],
    *,
    epochs: int,
    seed: int,
    start: ByteGru | None = None,
    batch: int = 32,
    lr: float = 3e-3,
    device: str = "cpu",
) -> ByteGru:
    """Train (or continue training) a :class:`ByteGru` on ``texts`` for ``epochs`` epochs.

    Batches are drawn on the CPU; the steps run on ``device``. The model comes back on
    the CPU.
    """
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        model = (ByteGru() if start is None else start).to(device)
        model.train()
        rows = _byte_rows(texts)
        generator = torch.Generator().manual_seed(seed)
        optimiser = torch.optim.Adam(model.parameters(), lr=lr)
        for _ in range(epochs):
            for chosen in _length_batches(rows, batch, generator):
                ids, mask = _padded([rows[i] for i in chosen])
                ids, mask = ids.to(device), mask.to(device)
                logits = model(ids[:, :-1])
                loss = F.cross_entropy(logits[mask], ids[:, 1:][mask])
                optimiser.zero_grad()
                loss.backward()  # type: ignore[no-untyped-call]
                clip_gradients(model)
                optimiser.step()
    return model.to("cpu").eval()


def clip_gradients(model: torch.nn.Module, max_norm: float = 1.0) -> None:
    """Clip the gradient norm (recurrent nets need it)."""
    torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)


def _caption_ids(
    captions: Sequence[str], tokenizer: WordTokenizer
) -> tuple[torch.Tensor, torch.Tensor]:
    rows = [tokenizer.encode(c) or [0] for c in captions]
    width = max(len(r) for r in rows)
    ids = torch.zeros((len(rows), width), dtype=torch.int64)
    mask = torch.zeros((len(rows), width), dtype=torch.bool)
    for i, row in enumerate(rows):
        ids[i, : len(row)] = torch.tensor(row)
        mask[i, : len(row)] = True
    return ids, mask


def train_clip(
    images: npt.NDArray[np.uint8],
    captions: Sequence[str],
    *,
    epochs: int,
    seed: int,
    start: DualEncoder | None = None,
    batch: int = 128,
    lr: float = 1e-3,
    temperature: float = 0.1,
    device: str = "cpu",
) -> DualEncoder:
    """Train (or continue training) a :class:`DualEncoder` on (image, caption) pairs.

    Batches are drawn on the CPU; the steps run on ``device``. The model comes back on
    the CPU.
    """
    if len(images) != len(captions):
        raise ValueError(f"{len(images)} images for {len(captions)} captions")
    tokenizer = WordTokenizer()
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        model = (DualEncoder(tokenizer.vocabulary_size) if start is None else start).to(device)
        model.train()
        data = to_tensor(images).to(device)
        ids, mask = (t.to(device) for t in _caption_ids(captions, tokenizer))
        same = {text: index for index, text in enumerate(sorted(set(captions)))}
        groups = torch.tensor([same[c] for c in captions]).to(device)
        generator = torch.Generator().manual_seed(seed)
        optimiser = torch.optim.Adam(model.parameters(), lr=lr)
        for _ in range(epochs):
            order = torch.randperm(len(data), generator=generator)
            for begin in range(0, len(data), batch):
                chosen = order[begin : begin + batch].to(device)
                img = F.normalize(model.encode_image(data[chosen]), dim=1)
                txt = F.normalize(model.encode_text(ids[chosen], mask[chosen]), dim=1)
                logits = img @ txt.T / temperature
                match = (groups[chosen][:, None] == groups[chosen][None, :]).float()
                target = match / match.sum(dim=1, keepdim=True)
                loss = F.cross_entropy(logits, target) + F.cross_entropy(logits.T, target)
                optimiser.zero_grad()
                loss.backward()  # type: ignore[no-untyped-call]
                optimiser.step()
    return model.to("cpu").eval()


def _embed(model: torch.nn.Module, images: npt.NDArray[np.uint8]) -> torch.Tensor:
    with torch.inference_mode():
        parts = [model(to_tensor(images[b : b + 512])) for b in range(0, len(images), 512)]
    return F.normalize(torch.cat(parts), dim=1)


def knn_accuracy(
    encoder: torch.nn.Module,
    *,
    train_images: npt.NDArray[np.uint8],
    train_labels: npt.NDArray[np.int64],
    test_images: npt.NDArray[np.uint8],
    test_labels: npt.NDArray[np.int64],
    k: int = 10,
) -> float:
    """Return the accuracy of a cosine ``k``-NN vote over the encoder's representations."""
    reference, queries = _embed(encoder, train_images), _embed(encoder, test_images)
    neighbours = (queries @ reference.T).topk(k, dim=1).indices
    votes = torch.from_numpy(np.asarray(train_labels, dtype=np.int64))[neighbours]
    predicted = torch.mode(votes, dim=1).values.numpy()
    return float(np.mean(predicted == np.asarray(test_labels)))


def perplexity(model: ByteGru, texts: Sequence[str], batch: int = 64) -> float:
    """Return the per-byte perplexity of ``texts`` (every byte after BOS is predicted)."""
    rows = _byte_rows(texts)
    total, count = 0.0, 0
    with torch.inference_mode():
        for begin in range(0, len(rows), batch):
            ids, mask = _padded(rows[begin : begin + batch])
            logits = model(ids[:, :-1])
            losses = F.cross_entropy(
                logits[mask].reshape(-1, BYTE_VOCABULARY), ids[:, 1:][mask], reduction="sum"
            )
            total += float(losses)
            count += int(mask.sum())
    return math.exp(total / count)


def zero_shot_accuracy(
    model: DualEncoder, images: npt.NDArray[np.uint8], labels: npt.NDArray[np.int64]
) -> float:
    """Return the share of ``images`` whose nearest class prompt is their class's."""
    tokenizer = WordTokenizer()
    ids, mask = _caption_ids([prompt(c) for c in range(10)], tokenizer)
    with torch.inference_mode():
        prompts = F.normalize(model.encode_text(ids, mask), dim=1)
        embedded = [
            model.encode_image(to_tensor(images[b : b + 512])) for b in range(0, len(images), 512)
        ]
    predicted = (F.normalize(torch.cat(embedded), dim=1) @ prompts.T).argmax(dim=1).numpy()
    return float(np.mean(predicted == np.asarray(labels)))
