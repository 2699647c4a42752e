"""The order in which a claim opens pairs (spec §10.2 step 2), with excluded pairs.

A claim opens the record's pairs in the order of the ``order`` stream of its audit seed
(the forward Fisher–Yates permutation of spec §5.3 over all ``n`` pairs). A claim that
excludes the pairs earlier claims on the record opened (its claim map's ``excluded``,
§10.1) takes the same permutation and skips every excluded index: the order replay
recomputes from the seed and the claim map alone. Skipping keeps the order uniform over
the remaining pairs (a uniform permutation restricted to a subset is uniform on it) and
leaves a claim without exclusions exactly as it was.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from twinaudit.protocol.errors import InputError
from twinaudit.protocol.prg import without_replacement


def check_excluded(excluded: object, n_pairs: int, what: str = "claim.excluded") -> list[int]:
    """Return ``excluded`` if it is a claim map's exclusion list for ``n_pairs`` pairs.

    Spec §10.1: a non-empty list of strictly increasing integers in ``0..n_pairs−1``
    that leaves at least one pair (at most ``n_pairs − 1`` entries); a boolean is not an
    integer. Anything else is ``invalid-input``.
    """
    if not isinstance(excluded, list) or not excluded:
        raise InputError(f"{what} must be a non-empty list of pair indices")
    if len(excluded) >= n_pairs:
        raise InputError(f"{what} must leave at least one of the record's {n_pairs} pairs")
    previous = -1
    for index in excluded:
        if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < n_pairs:
            raise InputError(f"{what} must hold pair indices in 0..{n_pairs - 1}")
        if index <= previous:
            raise InputError(f"{what} must be strictly increasing")
        previous = index
    return excluded


def claim_order(seed: bytes, n_pairs: int, excluded: Iterable[int] = ()) -> Iterator[int]:
    """Yield the pairs of a claim in the order it opens them (spec §10.2 step 2).

    The ``order`` stream's permutation of ``0..n_pairs−1`` (§5.3), lazily, without the
    indices in ``excluded``. Each output costs the draws of the permutation up to it,
    excluded positions included, so the first ``k`` outputs need at most
    ``k + len(excluded)`` draws.
    """
    skip = frozenset(excluded)
    for index in without_replacement(seed, n_pairs):
        if index not in skip:
            yield index
