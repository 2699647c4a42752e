"""Caps on a model's declared input: one image's side and its elements.

The arbiter checks them on a model file it is asked to hold, from the file's structure
alone (an ONNX graph's declared inputs, ``--input-shape``), before anything loads it;
the practitioner's loader checks them on every model it loads, before its first probe.
A declared input over a cap (finding N4 of issue #40: a 205-byte ONNX file declaring a
65536² input stalled ``verifier model add`` for 307 s) is refused with a
:class:`~twinaudit.protocol.errors.LimitExceededError` naming the cap.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Final

from twinaudit.protocol.errors import LimitExceededError

#: Largest declared input dimension (height, width, channels) of an image model.
MAX_INPUT_SIDE: Final = 8192
#: Most elements of one declared input (one image: H × W × C).
MAX_INPUT_ELEMENTS: Final = 1 << 26


def check_dims(dims: Sequence[int], what: str) -> None:
    """Refuse a declared input with a dimension or an element count over the caps.

    Args:
        dims: The input's fixed dimensions (a symbolic one left out or given as 0).
        what: The input's name in the error message.

    Raises:
        LimitExceededError: A dimension above :data:`MAX_INPUT_SIDE`, or more than
            :data:`MAX_INPUT_ELEMENTS` elements.

    """
    for dim in dims:
        if dim > MAX_INPUT_SIDE:
            raise LimitExceededError(f"{what} dimension", dim, MAX_INPUT_SIDE)
    elements = math.prod(d for d in dims if d > 0)
    if elements > MAX_INPUT_ELEMENTS:
        raise LimitExceededError(f"{what} elements", elements, MAX_INPUT_ELEMENTS)


def check_input_shape(shape: tuple[int, int, int]) -> None:
    """Refuse an ``--input-shape`` H,W,C over the caps (it sizes the probe's batch)."""
    check_dims(shape, "--input-shape")


__all__ = ["MAX_INPUT_ELEMENTS", "MAX_INPUT_SIDE", "check_dims", "check_input_shape"]
