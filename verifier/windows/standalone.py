"""Pairs scored as a claim scores them, outside a claim (spec §10.2 steps 5–6).

A claim (``twinaudit.verifier.claim``) takes each window of opened pairs through its
score function's window logic, :class:`~.base.WindowScorer`: :meth:`~.base.WindowScorer.build`
draws every version's queries from the pair's own streams ``augment/<i>/<v>`` and
shuffles the window's with ``shuffle/<j>``, :meth:`~.base.WindowScorer.ask` sends them
and validates the answer, and :meth:`~.base.WindowScorer.score` puts it back in order
and scores both versions. :func:`score_pairs` runs those same three calls on pairs its
caller holds, in windows of a size the caller chooses, with no test, escrow or
transcript: the owner's estimate before she publishes (``twinaudit owner estimate``)
scores her pairs with it, so that what it measures is what a claim on the same seed
and answers would compute. A pair's scores do not depend on the window it falls in
(its copies come from its own streams; only the order the queries are sent in does),
for an oracle that answers each query on its own.
"""

from __future__ import annotations

from collections.abc import Sequence

from twinaudit.protocol.errors import ParameterError
from twinaudit.protocol.items import Item
from twinaudit.protocol.oracles.base import Oracle

from .base import AnyWindowScorer, PairScores


def score_pairs(
    scorer: AnyWindowScorer,
    oracle: Oracle,
    seed: bytes,
    indices: Sequence[int],
    items: Sequence[tuple[Item, Item]],
    *,
    window: int,
) -> list[PairScores]:
    """Score pairs ``indices`` (whose versions are ``items``) as a claim with ``seed`` would.

    ``seed`` is the claim's audit seed (spec §5.5), ``scorer`` the window logic of its
    score (:func:`~.registry.scorer_for`, with the shape queries are fitted to where the
    claim fits them). The pairs go to the oracle ``window`` at a time, in the order
    given, as windows numbered from 0. Returns each pair's scores and record fields, in
    that order. Raises the typed errors a claim raises: an oracle of the wrong kind or
    an item the score does not read (``ParameterError``, ``InputError``), an invalid
    answer (``OracleError``).
    """
    if isinstance(window, bool) or not isinstance(window, int) or window < 1:
        raise ParameterError(f"a window holds at least one pair, not {window!r}")
    if len(indices) != len(items):
        raise ParameterError(f"{len(indices)} pair indices for {len(items)} pairs")
    info = oracle.info
    scorer.check_oracle(oracle, info)
    scored: list[PairScores] = []
    for number, start in enumerate(range(0, len(items), window)):
        part_indices = list(indices[start : start + window])
        part_items = list(items[start : start + window])
        for first, second in part_items:
            scorer.check_item(first)
            scorer.check_item(second)
        batch = scorer.build(seed, number, part_indices, part_items)
        answer = scorer.ask(oracle, info, batch)
        scored.extend(scorer.score(info, batch, answer, part_items))
    return scored
