"""The data split of one experiment: base set, shared set, the owner's items, others, utility.

Images (encoder, CLIP) come from Fashion-MNIST's 60,000 training images, drawn
without replacement in one seeded permutation (numpy PCG64, seed = the experiment's):
the base set (``n_base``), the shared 90% of the fine-tuning set (M − N), the owner's
N items, N other items (the clean model's replacement for them), and ``n_utility``
labelled reference images for the encoder's k-NN probe; utility is measured on the
first ``n_utility`` test images. Sentences (LM) are drawn the same way from the
corpus (:mod:`evaluation.foundation.corpus`): base set, shared, owner, other, and
``n_utility`` held-out sentences for perplexity.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from demo.data import FashionMnist

from .captions import caption
from .specs import Sizes

Images = npt.NDArray[np.uint8]
Labels = npt.NDArray[np.int64]


@dataclass(frozen=True)
class ImageSplit:
    """The images (N, 28, 28) and labels of each part of an image experiment."""

    base: Images
    base_labels: Labels
    shared: Images
    shared_labels: Labels
    owner: Images
    owner_labels: Labels
    other: Images
    other_labels: Labels
    reference: Images
    reference_labels: Labels
    test: Images
    test_labels: Labels

    def captions(self, part: str) -> list[str]:
        """Return the captions of the images of ``part`` ("base", "shared", "owner", "other")."""
        images, labels = getattr(self, part), getattr(self, f"{part}_labels")
        return [caption(image, int(label)) for image, label in zip(images, labels, strict=True)]


@dataclass(frozen=True)
class TextSplit:
    """The sentences of each part of a language-model experiment."""

    base: list[str]
    shared: list[str]
    owner: list[str]
    other: list[str]
    held_out: list[str]


def _cuts(total: int, sizes: Sizes, last: int) -> list[int]:
    counts = [sizes.n_base, sizes.n_train - sizes.n_owner, sizes.n_owner, sizes.n_owner, last]
    if sum(counts) > total:
        raise ValueError(f"the split needs {sum(counts)} items, the data has {total}")
    return list(np.cumsum([0, *counts]))


def image_split(data: FashionMnist, seed: int, sizes: Sizes) -> ImageSplit:
    """Draw the image split of experiment ``seed``."""
    images, labels = data.train_images, data.train_labels.astype(np.int64)
    order = np.random.default_rng(seed).permutation(len(images))
    cut = _cuts(len(images), sizes, sizes.n_utility)
    base, shared, owner, other, reference = (np.sort(order[cut[i] : cut[i + 1]]) for i in range(5))
    test = slice(0, sizes.n_utility)
    return ImageSplit(
        base=images[base],
        base_labels=labels[base],
        shared=images[shared],
        shared_labels=labels[shared],
        owner=images[owner],
        owner_labels=labels[owner],
        other=images[other],
        other_labels=labels[other],
        reference=images[reference],
        reference_labels=labels[reference],
        test=data.test_images[test],
        test_labels=data.test_labels[test].astype(np.int64),
    )


def text_split(sentences: Sequence[str], seed: int, sizes: Sizes) -> TextSplit:
    """Draw the sentence split of experiment ``seed``."""
    order = np.random.default_rng(seed).permutation(len(sentences))
    cut = _cuts(len(sentences), sizes, sizes.n_utility)
    parts = [[sentences[i] for i in np.sort(order[cut[k] : cut[k + 1]])] for k in range(5)]
    return TextSplit(*parts)
