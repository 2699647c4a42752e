"""Run the image-classifier score function on twin pairs and count successes (tests only).

:func:`success_rate` is the verifier's per-pair computation without escrow or test:
for each pair, both versions' K copies are drawn from their ``augment/<i>/<v>``
streams under ``seed``, the oracle answers, and the published version *succeeds*
when its score is strictly higher. Ties are counted separately (no coin).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from demo.synthetic import SyntheticPairs
from twinaudit.protocol.oracles.base import ClassifierOracle, ClassifyAnswer
from twinaudit.protocol.prg import Prg
from twinaudit.verifier.scoring.augment import stream_label
from twinaudit.verifier.scoring.classifier import ScoreSpec, make_queries, score


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
    n_classes = oracle.info.n_classes
    out = np.empty((len(pairs), 2), dtype=np.float64)
    for index in range(len(pairs)):
        items = pairs.items(index)
        queries = [
            make_queries(spec, items[v], Prg(seed, stream_label(index, v)))[1] for v in (0, 1)
        ]
        answer = oracle.classify(np.concatenate(queries))
        for v in (0, 1):
            rows = slice(v * spec.k, (v + 1) * spec.k)
            part = (
                ClassifyAnswer(probabilities=answer.probabilities[rows])
                if answer.probabilities is not None
                else ClassifyAnswer(
                    labels=answer.labels[rows] if answer.labels is not None else None
                )
            )
            out[index, v] = score(spec, part, n_classes=n_classes, label=items[v].label)
    return out


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
