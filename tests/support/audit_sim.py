"""Run the image-classifier score function on twin pairs and count successes (tests only).

:func:`success_rate` is the verifier's per-pair computation without escrow or test:
every pair is scored by a claim's window logic
(:func:`twinaudit.verifier.windows.score_pairs`), both versions' K copies drawn from
their ``augment/<i>/<v>`` streams under ``seed``, and the published version
*succeeds* when its score is strictly higher. Ties are counted separately (no coin).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from demo.synthetic import SyntheticPairs
from twinaudit.protocol.claim.scores.classifier import ScoreSpec
from twinaudit.protocol.oracles.base import ClassifierOracle
from twinaudit.verifier.windows import score_pairs, scorer_for

#: Pairs scored a window at a time.
WINDOW = 64


@dataclass(frozen=True)
class Outcome:
    """Successes, failures and ties over the scored pairs; ``q`` counts a tie as 1/2."""

    successes: int
    failures: int
    ties: int

    @property
    def q(self) -> float:
        """Return the success rate with ties counted as one half (their coin's mean)."""
        total = self.successes + self.failures + self.ties
        return (self.successes + 0.5 * self.ties) / total


def pair_scores(
    oracle: ClassifierOracle, pairs: SyntheticPairs, spec: ScoreSpec, seed: bytes
) -> npt.NDArray[np.float64]:
    """Return scores (n, 2): column ``v`` is the score of version ``v`` of each pair."""
    indices = range(len(pairs))
    items = [pairs.items(index) for index in indices]
    scored = score_pairs(scorer_for(spec), oracle, seed, indices, items, window=WINDOW)
    return np.array([pair.scores for pair in scored], dtype=np.float64).reshape(-1, 2)


def success_rate(
    oracle: ClassifierOracle,
    pairs: SyntheticPairs,
    bits: npt.NDArray[np.integer],
    spec: ScoreSpec,
    seed: bytes = bytes(32),
) -> Outcome:
    """Score every pair and compare the published version (``bits[i]``) with the hidden one."""
    scores = pair_scores(oracle, pairs, spec, seed)
    index = np.arange(len(pairs))
    published, hidden = scores[index, bits], scores[index, 1 - np.asarray(bits)]
    return Outcome(
        int(np.sum(published > hidden)),
        int(np.sum(published < hidden)),
        int(np.sum(published == hidden)),
    )
