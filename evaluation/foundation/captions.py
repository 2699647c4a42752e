"""Captions for Fashion-MNIST images, built from the class name and measured attributes.

A caption is deterministic: the class name and four attributes read from the
original (unmarked) image's pixels, put into one of a few sentence templates chosen
by the attributes themselves:

- tone: mean intensity of the object's pixels (those above :data:`INK`) — ``dark``
  below 100, ``grey`` below 160, else ``light``;
- size: share of the 784 pixels above :data:`INK` — ``small`` below 0.35, ``medium``
  below 0.55, else ``large``;
- shape: the object's bounding box — ``wide`` if its width exceeds 1.2× its height,
  ``tall`` if its height exceeds 1.2× its width, else ``compact``;
- texture: standard deviation of the object's pixels — ``plain`` below 45, else
  ``patterned``.

e.g. "a large dark wide plain photo of a bag" or "a grey patterned trouser, small and
tall". Both versions of a marked pair keep the caption of the original image.
:func:`prompt` gives the zero-shot classification prompt of a class ("a photo of a
sneaker"). :class:`WordTokenizer` turns captions into word ids over the fixed
vocabulary of every template word and class name (id 0 for anything else); it is
the :class:`~twinaudit.practitioner.tokenizer.Tokenizer` of the CLIP oracle.
"""

from __future__ import annotations

import re
from typing import Final

import numpy as np
import numpy.typing as npt

from demo.data import CLASS_NAMES

#: Pixel value above which a pixel belongs to the object.
INK: Final = 30
#: The sentence templates; ``{t}`` tone, ``{s}`` size, ``{h}`` shape, ``{x}`` texture,
#: ``{c}`` class name.
TEMPLATES: Final = (
    "a photo of a {s} {t} {c}, {h} and {x}",
    "a {t} {x} {c}, {s} and {h}",
    "a {s} {h} {c} in {t} tones, {x}",
    "this {c} is {t}, {x}, {s} and {h}",
)
_ATTRIBUTES: Final = (
    ("dark", "grey", "light"),
    ("small", "medium", "large"),
    ("wide", "tall", "compact"),
    ("plain", "patterned"),
)
_WORD: Final = re.compile(r"[a-z]+")


def class_name(label: int) -> str:
    """Return the lower-case name of class ``label`` ("t-shirt/top" → "t-shirt or top")."""
    return CLASS_NAMES[label].lower().replace("/", " or ")


def attributes(image: npt.NDArray[np.uint8]) -> tuple[str, str, str, str]:
    """Return (tone, size, shape, texture) of a 28×28 uint8 image (see the module doc)."""
    pixels = np.asarray(image, dtype=np.float64).reshape(28, 28)
    ink = pixels > INK
    if not ink.any():
        return "dark", "small", "compact", "plain"
    values = pixels[ink]
    mean = float(values.mean())
    tone = "dark" if mean < 100 else "grey" if mean < 160 else "light"
    share = float(ink.mean())
    size = "small" if share < 0.35 else "medium" if share < 0.55 else "large"
    rows, cols = np.nonzero(ink)
    height, width = rows.max() - rows.min() + 1, cols.max() - cols.min() + 1
    shape = "wide" if width > 1.2 * height else "tall" if height > 1.2 * width else "compact"
    texture = "plain" if float(values.std()) < 45 else "patterned"
    return tone, size, shape, texture


def caption(image: npt.NDArray[np.uint8], label: int) -> str:
    """Return the caption of ``image`` of class ``label``."""
    tone, size, shape, texture = attributes(image)
    choice = (
        _ATTRIBUTES[0].index(tone) + _ATTRIBUTES[1].index(size) + _ATTRIBUTES[2].index(shape)
    ) % len(TEMPLATES)
    return TEMPLATES[choice].format(t=tone, s=size, h=shape, x=texture, c=class_name(label))


def prompt(label: int) -> str:
    """Return the zero-shot prompt of class ``label``."""
    return f"a photo of a {class_name(label)}"


def vocabulary() -> list[str]:
    """Return every word a caption or prompt can hold, sorted (ids 1.. in this order)."""
    words: set[str] = set()
    for template in TEMPLATES:
        words.update(_WORD.findall(re.sub(r"\{.\}", " ", template)))
    for group in _ATTRIBUTES:
        words.update(group)
    for label in range(len(CLASS_NAMES)):
        words.update(_WORD.findall(class_name(label)))
    return sorted(words)


class WordTokenizer:
    """Lower-case words (runs of a–z) as ids over :func:`vocabulary`; 0 for unknown, no BOS."""

    def __init__(self) -> None:
        """Index the vocabulary."""
        self._ids = {word: index for index, word in enumerate(vocabulary(), start=1)}

    @property
    def bos_id(self) -> int | None:
        """Return None: the text tower reads words only."""
        return None

    @property
    def vocabulary_size(self) -> int:
        """Return the number of ids (the words and the unknown id 0)."""
        return len(self._ids) + 1

    def encode(self, text: str) -> list[int]:
        """Return the word ids of ``text`` (empty for a text with no word)."""
        return [self._ids.get(word, 0) for word in _WORD.findall(text.lower())]
