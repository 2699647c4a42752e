"""Queries fitted to the model's declared input (spec §10.1 ``input_fit``, §10.2 step 5).

A claim on an oracle that declares an ``input_shape`` records ``"input_fit": "area"``
and sends every query at that shape; a claim map without the key (every claim started
before it) sends the items at their own shapes, whatever its Describe map says, and a
claim resumed from such a map keeps doing so.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os

import numpy as np
import pytest

from tests.support.claims import make_pairset, run_session, signed_verdict
from tests.support.fake_oracle import LinearOracle
from tests.support.keys import KEY
from twinaudit.protocol.claim.claim_map import ClaimMap
from twinaudit.protocol.claim.scores.classifier import ScoreSpec
from twinaudit.protocol.claim.transcript import iter_records
from twinaudit.protocol.claim.verdict import check_verdict
from twinaudit.protocol.errors import InputError
from twinaudit.protocol.items import ImageItem, decode_item
from twinaudit.verifier.claim import ClaimParams, ClaimRecord, ClaimSession
from twinaudit.verifier.replay import replay
from twinaudit.verifier.scoring.fit import fit_image


class Declared(LinearOracle):
    """A linear model of ``shape`` that declares it, and records every request's shape."""

    def __init__(self, shape: tuple[int, int, int], *, declare: bool = True) -> None:
        super().__init__(shape=shape)
        if declare:
            self._info = dataclasses.replace(self._info, input_shape=shape)
        self.shapes: set[tuple[int, ...]] = set()

    def classify(self, images):
        self.shapes.add(tuple(images.shape[1:]))
        return super().classify(images)


@pytest.mark.parametrize("family", ["pad-shift-flip", "random-resized-crop-flip-v2"])
def test_a_claim_on_a_declared_input_records_the_fit_and_sends_that_shape(family):
    pairs = make_pairset(12, salt_seed=b"fit")
    oracle = Declared((20, 24, 3))
    score = ScoreSpec(k=2, perturbation=family, knowledge="C1")
    session = run_session(
        pairs, oracle, score=score, max_pairs=6, rho=bytes(32), claim_nonce=bytes(32)
    )
    assert session.claim_map["input_fit"] == "area"
    assert oracle.shapes == {(20, 24, 3)}
    records = [r for r in _records(session) if r["type"] == "pair"]
    assert {tuple(r["shape"]) for r in records} == {(28, 28, 1)}  # the items' own shape
    verdict = check_verdict(signed_verdict(session, KEY), KEY.public_key())
    result = replay(verdict, session.transcript.to_bytes())
    assert result.indicators == verdict.indicators
    if family.startswith("random-resized-crop"):  # crops drawn inside the fitted 20x24
        crops = [p for r in records for version in r["params"] for p in version]
        assert max(p["top"] + p["height"] for p in crops) <= 20
        assert max(p["left"] + p["width"] for p in crops) <= 24
        assert any(p["height"] < 20 or p["width"] < 24 for p in crops)


def test_the_fitted_query_is_the_rule_applied_to_the_version():
    pairs = make_pairset(4, salt_seed=b"fit one")
    oracle = Declared((9, 13, 3))
    session = run_session(
        pairs,
        oracle,
        score=ScoreSpec(k=1, perturbation="none", knowledge="C2"),
        max_pairs=1,
        window=1,
        rho=bytes(32),
        claim_nonce=bytes(32),
    )
    (record,) = [r for r in _records(session) if r["type"] == "pair"]
    index = record["index"]
    opening = pairs.pair_opening(index)
    for version, data in enumerate((opening.version0, opening.version1)):
        item = decode_item(data)
        assert isinstance(item, ImageItem)
        query = (fit_image(item.pixels, (9, 13, 3)).astype(np.float64) / 255.0).astype("<f4")
        assert record["query_digests"][version] == hashlib.sha256(query.tobytes()).digest()


def test_without_a_declared_shape_the_items_go_at_their_own_size():
    pairs = make_pairset(8, salt_seed=b"no fit")
    oracle = Declared((28, 28, 1), declare=False)
    session = run_session(pairs, oracle, max_pairs=4, rho=bytes(32), claim_nonce=bytes(32))
    assert "input_fit" not in session.claim_map


def test_a_claim_started_without_the_fit_resumes_without_it():
    pairs = make_pairset(12, salt_seed=b"resume")
    record = ClaimRecord(0, pairs.root, len(pairs), "image", bytes(32), "2026-11-21T20:00:00Z")
    score = ScoreSpec(k=1, perturbation="none", knowledge="C2")
    params = ClaimParams(0, pairs.root, "in-process", "linear", score, "mixture-e", 0.05)
    oracle = Declared((28, 28, 1))
    old = ClaimSession.start("c", record, params, oracle, bytes(32), input_fit="")
    assert "input_fit" not in old.claim_map  # a claim map written before the key
    indices = old.next_request()
    old.submit([(i, pairs.pair_opening(i), pairs.opening(i).proof) for i in indices])
    snapshot, _ = old.checkpoint()
    resumed = ClaimSession.resume(snapshot, old.transcript.to_bytes(), record, params, oracle)
    assert resumed.claim_map == old.claim_map
    fresh = ClaimSession.start("d", record, params, oracle, os.urandom(32))
    assert fresh.claim_map["input_fit"] == "area"


@pytest.mark.parametrize(
    ("change", "words"),
    [
        (lambda m: m.update(input_fit="bilinear"), "must be one of"),
        (lambda m: m.update(input_fit=True), "must be one of"),
        (lambda m: m["model"]["oracle"].pop("input_shape"), "declares input_shape"),
    ],
)
def test_a_claim_map_read_back_with_a_wrong_fit_is_invalid_input(change, words):
    pairs = make_pairset(8, salt_seed=b"map")
    session = run_session(
        pairs, Declared((28, 28, 1)), max_pairs=2, rho=bytes(32), claim_nonce=bytes(32)
    )
    claim = session.claim_map
    assert ClaimMap.from_value(claim).fit_shape == (28, 28, 1)
    change(claim)
    with pytest.raises(InputError, match=words):
        ClaimMap.from_value(claim)


def _records(session):
    return list(iter_records(session.transcript.to_bytes()))
