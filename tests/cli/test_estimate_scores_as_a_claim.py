"""``owner estimate`` scores a pair as a claim does: the same copies, scores and outcome.

The estimate's :func:`~twinaudit.cli.estimate.pair_outcomes` and a real claim
(:class:`~twinaudit.verifier.claim.ClaimSession`) run on the same committed pairs, audit
seed, publication bits and oracle; every pair the claim opened must carry, in its
transcript record, the estimate's two scores bit for bit and the estimate's outcome.
The pairs are chosen so that the comparison can fail: their outcomes mix wins and
losses (and ties where the score allows them), and another seed's copies score them
otherwise, so an estimate that drew, fitted, averaged or compared differently from the
claim would disagree with it somewhere.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from demo.pairset import PairSet
from tests.support.claims import make_pairset, run_session
from tests.support.fake_oracle import LinearOracle
from twinaudit.cli.estimate import OUTCOME_SIGNS, pair_outcomes, pair_scores
from twinaudit.protocol.claim.scores.classifier import ScoreSpec
from twinaudit.protocol.claim.transcript import iter_records
from twinaudit.protocol.errors import ParameterError
from twinaudit.protocol.items import ImageItem, Item, decode_pair
from twinaudit.protocol.oracles.base import ClassifierOracle, ClassifyAnswer, OracleInfo
from twinaudit.protocol.seeds import audit_seed, publication_bits
from twinaudit.protocol.stats.base import TiePolicy
from twinaudit.verifier.windows import score_pairs, scorer_for

N_PAIRS = 40
RHO = bytes(range(32))
NONCE = bytes(range(32, 64))


class OneAtATime(ClassifierOracle):
    """A :class:`LinearOracle` asked one image at a time, describing ``input_shape``.

    Each answer is then a function of its own image alone, whatever else its request
    holds, as the claim's windows and the estimate's (of other sizes) assume.
    """

    def __init__(self, inner: LinearOracle, input_shape: tuple[int, ...] = ()) -> None:
        self._inner = inner
        self._info = dataclasses.replace(inner.info, input_shape=input_shape)

    @property
    def info(self) -> OracleInfo:
        return self._info

    def classify(self, images: np.ndarray) -> ClassifyAnswer:
        return ClassifyAnswer.concatenate(
            [self._inner.classify(images[n : n + 1]) for n in range(len(images))]
        )


CASES = {
    "C1 pad-shift-flip K=2": (ScoreSpec(k=2, perturbation="pad-shift-flip", knowledge="C1"), {}),
    "C3 noise K=4, labels only": (
        ScoreSpec(k=4, perturbation="noise", knowledge="C3"),
        {"label_only": True},
    ),
    "C2 logit crops K=3, margin": (
        ScoreSpec(
            k=3,
            perturbation="random-resized-crop-v2",
            knowledge="C2",
            statistic="logit",
            margin=1.0,
        ),
        {},
    ),
    "C1 dither, fitted to 16x16": (
        ScoreSpec(k=1, perturbation="dither", knowledge="C1"),
        {"shape": (16, 16, 1)},
    ),
}


def _items(pair_set: PairSet) -> list[tuple[ImageItem, ImageItem]]:
    """Both versions of every pair, as the claim decodes them from the owner's openings."""
    items = []
    for i in range(len(pair_set)):
        opening = pair_set.pair_opening(i)
        first, second = decode_pair(opening.version0, opening.version1, "image")
        assert isinstance(first, ImageItem) and isinstance(second, ImageItem)
        items.append((first, second))
    return items


@pytest.fixture(scope="module")
def pairs():
    """The committed synthetic pairs (28x28 grey, labelled) and their versions as arrays."""
    pair_set = make_pairset(N_PAIRS, seed=3, epsilon=16, salt_seed=b"estimate")
    items = _items(pair_set)
    versions = np.stack([np.stack([a.pixels, b.pixels]) for a, b in items])
    labels = [a.label for a, _ in items]
    return pair_set, versions, labels


def _oracle(options: dict) -> OneAtATime:
    shape = options.get("shape", ())
    inner = LinearOracle(shape=shape or (28, 28, 1), label_only=options.get("label_only", False))
    return OneAtATime(inner, input_shape=shape)


@pytest.mark.parametrize("case", CASES)
def test_the_estimate_scores_every_pair_as_the_claim_does(case, pairs):
    spec, options = CASES[case]
    pair_set, versions, labels = pairs
    oracle = _oracle(options)
    session = run_session(
        pair_set, oracle, score=spec, rho=RHO, claim_nonce=NONCE, tie_rule=TiePolicy.SKIP
    )
    assert session.claim.fit_shape == options.get("shape")  # fitted as the estimate fits
    seed = audit_seed(pair_set.root, RHO, NONCE)
    assert session.seed == seed
    bits = publication_bits(pair_set.root, RHO, N_PAIRS)
    transcript = iter_records(session.transcript.to_bytes())
    records = [r for r in transcript if r["type"] == "pair" and r["outcome"]]
    assert len(records) >= 10

    scores = pair_scores(oracle, versions=versions, labels=labels, seed=seed, spec=spec)
    outcomes = pair_outcomes(
        oracle, versions=versions, labels=labels, bits=bits, seed=seed, spec=spec
    )
    for record in records:
        index = record["index"]
        assert record["published"] == bits[index]
        assert list(scores[index]) == record["scores"], index  # bit for bit
        assert outcomes[index] == OUTCOME_SIGNS[record["outcome"]], index

    # The comparison can fail: the claim's outcomes are not all alike ...
    compared = {int(outcomes[r["index"]]) for r in records}
    assert {1, -1} <= compared
    if spec.label_only or spec.margin:
        assert 0 in compared  # ... ties included where the score makes them ...
    # ... and copies drawn from another seed's streams score these pairs otherwise.
    other = pair_scores(oracle, versions=versions, labels=labels, seed=bytes(32), spec=spec)
    assert any(other[r["index"]] != scores[r["index"]] for r in records)


def test_standalone_windows_refuse_what_a_claim_would(pairs):
    _, versions, labels = pairs
    scorer = scorer_for(ScoreSpec(k=1, perturbation="dither", knowledge="C1"))
    items: list[tuple[Item, Item]] = list(
        _items(make_pairset(2, seed=3, epsilon=16, salt_seed=b"estimate"))
    )
    oracle = _oracle({})
    for window in (0, True, 1.5):
        with pytest.raises(ParameterError, match="window"):
            score_pairs(scorer, oracle, bytes(32), [0, 1], items, window=window)
    with pytest.raises(ParameterError, match="indices"):
        score_pairs(scorer, oracle, bytes(32), [0], items, window=1)
    # A label-only oracle cannot serve C1, as at a claim's start.
    spec = ScoreSpec(k=1, perturbation="dither", knowledge="C1")
    with pytest.raises(ParameterError, match="probabilit"):
        pair_scores(
            _oracle({"label_only": True}),
            versions=versions[:2],
            labels=labels[:2],
            seed=bytes(32),
            spec=spec,
        )
