"""A pair's outcome from its two scores (spec §7.1): the published twin wins, loses or ties.

The published version's score ``s_pub`` wins when ``s_pub − s_hid > m`` and loses when
``s_hid − s_pub > m``, each difference rounded to binary64; otherwise the pair ties.
``m`` is the score's tie margin (``margin`` of the image-classifier score, 0 for every
other score), so with ``m = 0`` only equal scores tie. Whether a pair ties depends on
``|s_pub − s_hid|`` alone, the same whichever twin was published, so under H0 the
untied pairs stay fair coins.
"""

from __future__ import annotations

import math
from typing import Final

from protocol.errors import InputError, ParameterError

from .classifier import MAX_MARGIN, ScoreSpec
from .registry import AnyScoreSpec

#: The outcomes: the published twin scored above the hidden one by more than the margin,
#: below it by more than the margin, or neither.
WIN: Final = 1
LOSS: Final = -1
TIE: Final = 0


def tie_margin(score: AnyScoreSpec) -> float:
    """Return the tie margin ``score`` defines (the image classifier's ``margin``, else 0)."""
    return score.margin if isinstance(score, ScoreSpec) else 0.0


def compare(s_pub: float, s_hid: float, margin: float = 0.0) -> int:
    """Return :data:`WIN`, :data:`LOSS` or :data:`TIE` for one pair's two scores.

    Raises:
        InputError: a score is not finite (spec §7.1: the claim does not proceed).
        ParameterError: the margin is not a float in ``[0, MAX_MARGIN]``.

    """
    if not (math.isfinite(s_pub) and math.isfinite(s_hid)):
        raise InputError(f"scores must be finite, got {s_pub!r} and {s_hid!r}")
    if not isinstance(margin, float) or not 0.0 <= margin <= MAX_MARGIN:
        raise ParameterError(f"the tie margin must be a float in [0, {MAX_MARGIN:g}]")
    if s_pub - s_hid > margin:
        return WIN
    if s_hid - s_pub > margin:
        return LOSS
    return TIE
