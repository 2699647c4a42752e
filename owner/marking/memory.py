"""How much memory marking may use (``owner mark --memory``), and the batches that fit in it.

A marking run holds, for every image of the batch it marks, the pixels as read, both
versions, and the bytes of the chunk file the vault writes: :data:`HELD_PER_BYTE` bytes
per byte of pixels. The full-resolution work (the mark carried back to full size,
rounded and applied to the image) runs on one image at a time, in bands of rows
(:mod:`twinaudit.owner.marking.full_size`), so it adds a bounded amount whatever the photo's size.
PGD itself runs at the working resolution (:attr:`MarkingConfig.work_scale`), except on
images small enough to be marked at their own size (or with ``work_scale`` 0), where
its float tensors cost :data:`FULL_SIZE_PGD_PER_BYTE` more per byte of pixels.

Batches are therefore cut by bytes as well as by count
(:meth:`~twinaudit.owner.images.sources.ImageSource.batches`): at most as many images of a shape
as fit in the memory setting less :data:`BASE_BYTES`, the process before any image
(interpreter, torch, the extractor, PGD at the working resolution), and never more
than the vault's largest chunk. The model is an upper bound, checked by
``tests/owner/test_marking_memory.py`` on 30 photos of 4 MP (the child's peak resident
memory) and measured by ``python -m bench mark_scale`` up to 12 MP (1,000 photos of
12 MP marked end to end peaked at 1,252 MiB with the default 2 GiB).

Plain arithmetic: no torch.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable
from typing import Final

from twinaudit.protocol.errors import ParameterError

#: Units ``--memory`` accepts (binary multiples; ``G`` and ``GiB`` mean the same).
_UNITS: Final = {"": 1, "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}
_MEMORY = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([KMGT]?)(?:I?B)?\s*", re.IGNORECASE)

#: The default memory setting: a marking run stays within 2 GiB whatever its photos.
DEFAULT_MEMORY: Final = 2 * 2**30
#: The smallest setting accepted (:data:`BASE_BYTES` and room for a batch of photos).
MIN_MEMORY: Final = 768 * 2**20
#: The largest setting accepted (a bound on the arithmetic, not on any machine).
MAX_MEMORY: Final = 2**50
#: The process before any image: the interpreter with torch and numpy, the extractor,
#: the proxy's training set at its side, PGD's tensors at the working resolution and
#: the bands of the full-resolution work. Measured: 330-420 MiB resident marking
#: photos with the proxy or EfficientNet-Lite0 on the CPU; the rest is margin.
BASE_BYTES: Final = 640 * 2**20
#: Bytes held per byte of a batch's pixels: the pixels read, both versions, and the
#: chunk file's bytes (at most both versions again; compressed since vault format 2,
#: about a quarter of that for photos) while the vault writes it; and one more,
#: measured: 40 photos of 11 MP in batches of 8 peaked 290 MiB above the five (the
#: allocator keeps freed image-sized blocks).
HELD_PER_BYTE: Final = 6
#: Bytes more per byte of pixels for an image PGD optimises at its own size: the image
#: and δ in float32, the twins, their gradient (measured about 40; margin kept).
FULL_SIZE_PGD_PER_BYTE: Final = 48
#: Bytes held once for the largest image, whatever the batch: decoding it (the codec's
#: buffer and its array) and the noise markers' δ in int16. Measured on a 12 MP photo,
#: the peak resident memory of one decode over the pixels' bytes: 3.3 to 3.8 for PNG,
#: JPEG, TIFF, BMP and GIF, 3.4 for HEIC turned upright by its own rotation (libheif);
#: 4.8 for a JPEG turned upright by its EXIF orientation and 6.2
#: for WebP, which :data:`BASE_BYTES`' margin holds (eight 12 MP WebP photos marked with
#: ``--memory 1G`` peaked at 573 MiB, with 2G at 1,023 MiB).
ONE_IMAGE_PER_BYTE: Final = 4


#: Bytes per byte of the proxy's training set (its 32 px copies of every image, in
#: three channels): the uint8 copies and their float32 tensor.
TRAINING_PER_BYTE: Final = 5


def proxy_training_bytes(count: int, side: int) -> int:
    """Return the bytes the training set of a proxy on ``count`` images at ``side`` holds."""
    return count * side * side * 3 * TRAINING_PER_BYTE


#: Bytes held per byte of a batch's pixels while ``owner proxy`` reads them: the pixels
#: and, for a grey image among colour ones, its copy in three channels.
READ_PER_BYTE: Final = 4


def proxy_read_batches(
    memory: int, shapes: Iterable[tuple[int, int, int]], count: int, side: int
) -> Callable[[tuple[int, int, int]], int]:
    """Return how many images of a shape a batch read for a proxy's training holds.

    Within ``memory``, less :data:`BASE_BYTES`, the training set of ``count`` images at
    ``side`` (:func:`proxy_training_bytes`) and one image's decoding work
    (:func:`batch_budget`). Raises ParameterError when nothing is left, or when one
    image of a shape does not fit (on the first batch of that shape).
    """
    listed = list(shapes)
    budget = batch_budget(memory, listed) - proxy_training_bytes(count, side)
    if budget <= 0:
        raise ParameterError(
            f"training a proxy on {count} images at {side}x{side} needs more than "
            f"{describe(memory)} of memory: give --memory {describe(memory - budget + 2**27)} "
            "or more"
        )

    def fits(shape: tuple[int, int, int]) -> int:
        return images_per_batch(math.prod(shape) * READ_PER_BYTE, budget, 1024)

    return fits


def parse_memory(text: str) -> int:
    """Return the bytes of a memory setting such as ``2G``, ``1536M``, ``1.5GiB`` or ``800000000``.

    Raises:
        ParameterError: not a number with an optional K, M, G or T unit, or outside
            :data:`MIN_MEMORY`..:data:`MAX_MEMORY`.

    """
    match = _MEMORY.fullmatch(text) if isinstance(text, str) else None
    if match is None:
        raise ParameterError(f"--memory takes a size such as 2G or 1536M, not {text!r}")
    value = int(float(match.group(1)) * _UNITS[match.group(2).upper()])
    return check_memory(value)


def check_memory(value: int) -> int:
    """Return ``value`` if it is a memory setting in range; raise ParameterError otherwise."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ParameterError(f"the memory setting must be an integer of bytes, not {value!r}")
    if not MIN_MEMORY <= value <= MAX_MEMORY:
        raise ParameterError(
            f"the memory setting must be {describe(MIN_MEMORY)} or more, not {describe(value)}"
        )
    return value


def describe(size: int) -> str:
    """Return ``size`` bytes for a person: in GiB from one GiB, else in MiB."""
    if size >= 2**30:
        return f"{size / 2**30:.1f} GiB"
    return f"{size / 2**20:.0f} MiB"


def image_cost(shape: tuple[int, int, int], *, full_size_pgd: bool) -> int:
    """Return the bytes one image of ``shape`` (H, W, C) costs while its batch is marked."""
    size = math.prod(shape)
    return size * (HELD_PER_BYTE + (FULL_SIZE_PGD_PER_BYTE if full_size_pgd else 0))


def batch_budget(memory: int, shapes: Iterable[tuple[int, int, int]]) -> int:
    """Return the bytes a batch may cost under ``memory`` for images of these ``shapes``.

    What is left of ``memory`` once :data:`BASE_BYTES` and the one-image work for the
    largest of ``shapes`` are set aside. Raises ParameterError when nothing is left.
    """
    check_memory(memory)
    largest = max((math.prod(shape) for shape in shapes), default=0)
    budget = memory - BASE_BYTES - ONE_IMAGE_PER_BYTE * largest
    if budget <= 0:
        raise ParameterError(
            f"marking these images needs more than {describe(memory)} of memory: "
            f"give --memory {describe(memory - budget + 2**27)} or more"
        )
    return budget


def images_per_batch(cost: int, budget: int, batch_size: int) -> int:
    """Return how many images costing ``cost`` bytes each a batch holds (at most ``batch_size``).

    Raises ParameterError when even one does not fit in ``budget``.
    """
    if cost > budget:
        raise ParameterError(
            f"one image needs {describe(cost)} of memory while it is marked, more than the "
            f"{describe(budget)} the memory setting leaves: raise --memory"
        )
    return max(1, min(batch_size, budget // max(cost, 1)))
