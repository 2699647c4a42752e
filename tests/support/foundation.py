"""Tiny foundation-model stand-ins for claim tests: pairs, models and their training.

Everything is seeded and small enough to train in a second or two on one CPU thread:

- image pairs: a flat grey image plus a ±ε Bernoulli sign pattern per pair (version 0
  ``x + δ``, version 1 ``x − δ``), so the mark is all there is to learn;
- an MLP image encoder trained SimCLR-style (NT-Xent over two crop-and-flip
  views, drawn with the verifier's own augmentation code from a test stream);
- a byte-level GRU language model trained on a set of texts;
- a CLIP-style dual encoder (MLP on pixels, mean of byte embeddings on text) trained
  with the symmetric InfoNCE loss on (image, caption) pairs.

Training runs inside ``torch.random.fork_rng`` so the global RNG is left alone.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import torch
from torch import nn

from demo.pairset import PairSet
from demo.seeded import fixed_salts
from twinaudit.practitioner.tokenizer import ByteTokenizer
from twinaudit.protocol.items import CaptionedImageItem, ImageItem, TextItem, encode_item
from twinaudit.protocol.prg import Prg
from twinaudit.verifier.scoring.augment import draw_params, perturb, to_unit

SIDE = 12
WORDS = tuple(
    [
        "amber",
        "brisk",
        "cedar",
        "dune",
        "ember",
        "fable",
        "grove",
        "harbor",
        "island",
        "jasper",
        "kettle",
        "lantern",
        "meadow",
        "nectar",
        "orchard",
        "pebble",
        "quartz",
        "river",
        "saffron",
        "timber",
        "umber",
        "velvet",
        "willow",
        "yonder",
        "zephyr",
        "anchor",
        "bramble",
        "candle",
        "dapple",
        "echo",
        "falcon",
        "garnet",
        "hollow",
        "ivory",
        "juniper",
        "kindle",
        "lumen",
    ]
)
SWAPS = {w: w[::-1] for w in WORDS}


def marked_images(n: int, seed: int, epsilon: int = 48) -> list[tuple[ImageItem, ImageItem]]:
    """Return ``n`` pairs of SIDE×SIDE grey images with opposite ±ε sign marks."""
    rng = np.random.default_rng(seed)
    pairs = []
    for _ in range(n):
        base = np.full((SIDE, SIDE, 1), 128, dtype=np.int64) + rng.integers(-20, 21)
        delta = epsilon * rng.choice([-1, 1], size=(SIDE, SIDE, 1))
        v0 = np.clip(base + delta, 0, 255).astype(np.uint8)
        v1 = np.clip(base - delta, 0, 255).astype(np.uint8)
        pairs.append((ImageItem(v0), ImageItem(v1)))
    return pairs


def text_pairs(n: int, seed: int, words: int = 8) -> list[tuple[TextItem, TextItem]]:
    """Return ``n`` pairs of random word sequences whose versions differ in half the words."""
    rng = np.random.default_rng(seed)
    pairs = []
    for _ in range(n):
        chosen = [WORDS[i] for i in rng.integers(0, len(WORDS), words)]
        swapped = rng.permutation(words)[: words // 2]
        v0, v1 = list(chosen), list(chosen)
        for position in swapped:
            (v0 if rng.integers(0, 2) else v1)[position] = SWAPS[chosen[position]]
        pairs.append((TextItem(" ".join(v0)), TextItem(" ".join(v1))))
    return pairs


def captioned_pairs(
    n: int, seed: int, epsilon: int = 48
) -> list[tuple[CaptionedImageItem, CaptionedImageItem]]:
    """Return ``n`` marked image pairs, each pair with one random caption."""
    rng = np.random.default_rng(seed + 1)
    out = []
    for v0, v1 in marked_images(n, seed, epsilon):
        caption = " ".join(WORDS[i] for i in rng.integers(0, len(WORDS), 4))
        out.append((CaptionedImageItem(v0, caption), CaptionedImageItem(v1, caption)))
    return out


def commit(kind: str, pairs: list[tuple[object, object]]) -> PairSet:
    """Commit pairs of items with reproducible salts (so the publication bits are fixed)."""
    versions = [(encode_item(a), encode_item(b)) for a, b in pairs]  # type: ignore[arg-type]
    return PairSet(kind, versions, fixed_salts(len(versions)))


def published(pairs: list, bits: list[bool]) -> list:  # type: ignore[type-arg]
    """Return version ``bits[i]`` of every pair."""
    return [pair[int(b)] for pair, b in zip(pairs, bits, strict=True)]


def _pixels(items: list[ImageItem]) -> npt.NDArray[np.float32]:
    return np.stack([to_unit(i.pixels).astype(np.float32) for i in items])


def _nchw(images: npt.NDArray[np.float32]) -> torch.Tensor:
    return torch.from_numpy(np.ascontiguousarray(images)).permute(0, 3, 1, 2).contiguous()


class MlpEncoder(nn.Module):
    """Flatten, two hidden layers, a D-dimensional embedding."""

    def __init__(self, dim: int = 32) -> None:
        super().__init__()
        self.net = nn.Sequential(
            nn.Flatten(), nn.Linear(SIDE * SIDE, 128), nn.ReLU(), nn.Linear(128, dim)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


def _views(images: list[ImageItem], count: int, label: str) -> npt.NDArray[np.float32]:
    """``count`` SimCLR crop-and-flip views of every image: (count, n, H, W, C)."""
    views = []
    for index, item in enumerate(images):
        params = draw_params(
            "random-resized-crop-flip", Prg(bytes(32), f"{label}/{index}"), SIDE, SIDE, count
        )
        views.append(perturb(to_unit(item.pixels), params))
    return np.stack(views, axis=1)


def _nt_xent(a: torch.Tensor, b: torch.Tensor, temperature: float = 0.2) -> torch.Tensor:
    z = nn.functional.normalize(torch.cat([a, b]), dim=1)
    sim = z @ z.T / temperature
    n = a.shape[0]
    sim = sim.masked_fill(torch.eye(2 * n, dtype=torch.bool), float("-inf"))
    target = torch.cat([torch.arange(n, 2 * n), torch.arange(0, n)])
    return nn.functional.cross_entropy(sim, target)


def train_encoder(images: list[ImageItem], steps: int = 600, seed: int = 0) -> MlpEncoder:
    """Train an MlpEncoder with NT-Xent on two crop-and-flip views per image per step."""
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        model = MlpEncoder()
        if steps:
            bank = torch.from_numpy(_views(images, 16, "train")).permute(0, 1, 4, 2, 3)
            optimiser = torch.optim.Adam(model.parameters(), lr=3e-3)
            picks = torch.randint(0, 16, (steps, 2))
            for step in range(steps):
                a, b = bank[picks[step, 0]], bank[picks[step, 1]]
                loss = _nt_xent(model(a), model(b))
                optimiser.zero_grad()
                loss.backward()
                optimiser.step()
    return model.eval()


class ByteLm(nn.Module):
    """A byte-level GRU language model: ids (1, T) → logits (1, T, 257)."""

    def __init__(self, width: int = 64) -> None:
        super().__init__()
        self.embed = nn.Embedding(257, width)
        self.rnn = nn.GRU(width, width, batch_first=True)
        self.out = nn.Linear(width, 257)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        hidden, _ = self.rnn(self.embed(ids))
        return self.out(hidden)


def train_lm(texts: list[str], steps: int = 120, seed: int = 0) -> ByteLm:
    """Train a ByteLm on ``texts`` (BOS first, whole set per step, padded with BOS)."""
    tokenizer = ByteTokenizer()
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        model = ByteLm()
        if steps:
            rows = [[256, *tokenizer.encode(t)] for t in texts]
            width = max(len(r) for r in rows)
            ids = torch.full((len(rows), width), 256, dtype=torch.int64)
            mask = torch.zeros((len(rows), width), dtype=torch.bool)
            for i, row in enumerate(rows):
                ids[i, : len(row)] = torch.tensor(row)
                mask[i, 1 : len(row)] = True
            optimiser = torch.optim.Adam(model.parameters(), lr=1e-2)
            for _ in range(steps):
                logits = model(ids[:, :-1])
                loss = nn.functional.cross_entropy(logits[mask[:, 1:]], ids[:, 1:][mask[:, 1:]])
                optimiser.zero_grad()
                loss.backward()
                optimiser.step()
    return model.eval()


class DualEncoder(nn.Module):
    """CLIP-style: ``encode_image`` (MLP) and ``encode_text`` (mean byte embedding + linear)."""

    def __init__(self, dim: int = 32) -> None:
        super().__init__()
        self.image = MlpEncoder(dim)
        self.tokens = nn.Embedding(257, 64)
        self.text = nn.Linear(64, dim)

    def encode_image(self, x: torch.Tensor) -> torch.Tensor:
        return self.image(x)

    def encode_text(self, ids: torch.Tensor) -> torch.Tensor:
        return self.text(self.tokens(ids).mean(dim=1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.encode_image(x)


def train_dual(items: list[CaptionedImageItem], steps: int = 150, seed: int = 0) -> DualEncoder:
    """Train a DualEncoder with symmetric InfoNCE on the (image, caption) pairs."""
    tokenizer = ByteTokenizer(bos=False)
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        model = DualEncoder()
        if steps:
            images = _nchw(_pixels([i.image for i in items]))
            captions = [torch.tensor([tokenizer.encode(i.caption)]) for i in items]
            optimiser = torch.optim.Adam(model.parameters(), lr=3e-3)
            target = torch.arange(len(items))
            for _ in range(steps):
                img = nn.functional.normalize(model.encode_image(images), dim=1)
                txt = nn.functional.normalize(
                    torch.cat([model.encode_text(c) for c in captions]), dim=1
                )
                logits = img @ txt.T / 0.1
                loss = nn.functional.cross_entropy(logits, target) + nn.functional.cross_entropy(
                    logits.T, target
                )
                optimiser.zero_grad()
                loss.backward()
                optimiser.step()
    return model.eval()
