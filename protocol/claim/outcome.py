"""A pair's outcome from its two scores (spec §7.1), for the claim engine and replay alike.

The published version's score ``s_pub`` wins when ``s_pub − s_hid > m`` and loses when
``s_hid − s_pub > m``, each difference rounded to binary64; otherwise the pair ties.
``m`` is the score's tie margin (``margin`` of the image-classifier score, 0 for every
other score), so with ``m = 0`` only equal scores tie. Whether a pair ties depends on
``|s_pub − s_hid|`` alone, the same whichever twin was published, so under H0 the
untied pairs stay fair coins. A tie is skipped (rule ``skip``) or decided by the coin
of the PRG stream ``tie/<i>`` (rule ``coin``, the paper's).

:func:`outcome` is the one rule: the claim engine (``twinaudit.verifier.claim``) records what it
returns, and replay (``twinaudit.verifier.replay``) recomputes it from the transcript. Both feed
it to the test with :func:`feed`, which adds the pair's grade (§7.5.1) for a graded test.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Final

from twinaudit.protocol.errors import InputError, ParameterError
from twinaudit.protocol.prg import Prg
from twinaudit.protocol.stats.base import SequentialTest, Step, TiePolicy
from twinaudit.protocol.stats.graded import grade_of

from .scores.classifier import MAX_MARGIN

#: How the published twin compared with the hidden one: above by more than the margin,
#: below by more than the margin, or neither.
WIN: Final = 1
LOSS: Final = -1
TIE: Final = 0

#: The outcome characters of spec §11: decided by the scores (1, 0), a tie decided by
#: the coin (heads h, tails t), a tie skipped (s).
WON: Final = "1"
LOST: Final = "0"
HEADS: Final = "h"
TAILS: Final = "t"
SKIPPED: Final = "s"
OUTCOME_CHARS: Final = frozenset({WON, LOST, HEADS, TAILS, SKIPPED})
#: The indicator bit each outcome fed to the test stands for (a skipped tie feeds none).
INDICATOR_BITS: Final = {WON: 1, HEADS: 1, LOST: 0, TAILS: 0}


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


def outcome(
    scores: Sequence[float],
    published: int,
    *,
    margin: float,
    tie_rule: TiePolicy,
    seed: bytes,
    index: int,
) -> str:
    """Return pair ``index``'s outcome character from its two versions' scores.

    ``scores`` are version 0's and version 1's, ``published`` the publication bit,
    ``margin`` the score's tie margin, ``seed`` the claim's audit seed (for the tie
    coin of stream ``tie/<index>``, drawn only on a tie under the ``coin`` rule).
    """
    result = compare(scores[published], scores[1 - published], margin)
    if result != TIE:
        return WON if result == WIN else LOST
    if tie_rule is TiePolicy.SKIP:
        return SKIPPED
    return HEADS if Prg(seed, f"tie/{index}").coin() else TAILS


def feed(
    test: SequentialTest, char: str, scores: Sequence[float], published: int, margin: float
) -> Step | None:
    """Feed pair outcome ``char`` to ``test``; return its step (None for a skipped tie).

    A graded test (spec §7.5) also gets the pair's grade: the decade of
    ``|s_pub − s_hid|`` over ``margin`` for a decided pair, grade 1 for a coin tie.
    """
    if char == SKIPPED:
        return None
    bit = bool(INDICATOR_BITS[char])
    if not test.graded:
        return test.update(bit)
    if char in (HEADS, TAILS):
        return test.update(bit, 1)
    grade = grade_of(scores[published] - scores[1 - published], margin)
    return test.update(bit, grade)
