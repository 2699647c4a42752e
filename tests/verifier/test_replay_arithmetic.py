"""Replay under the arithmetic basic-v1 and of claims of the rule before (spec §1.2, §10.3.1, §12).

A claim started now names ``"arithmetic": "basic-v1"`` and replays bit for bit; a claim
of the rule before (no key) replays when each recorded score is within the tolerance of
§1.2 of the score recomputed with the protocol's logarithms, also when the verifier
computed it with the platform's logarithms (as twinaudit's did before 2026-11-24), and
its outcomes follow from the recorded scores.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from tests.support.claims import make_pairset, run_session
from tests.support.fake_oracle import LinearOracle
from tests.support.keys import KEY
from twinaudit.protocol.claim.scores import classifier
from twinaudit.protocol.claim.scores.classifier import ScoreSpec
from twinaudit.protocol.claim.transcript import TranscriptWriter, iter_records
from twinaudit.protocol.claim.verdict import check_verdict
from twinaudit.protocol.encoding import encode
from twinaudit.protocol.envelope import payload_type, sign_envelope
from twinaudit.protocol.errors import VerificationError
from twinaudit.protocol.keys import key_id
from twinaudit.protocol.oracles.base import ClassifyAnswer
from twinaudit.verifier.replay import replay

PAIRS = make_pairset(24, salt_seed=b"issue 42 arithmetic")
C3 = ScoreSpec(k=4, perturbation="pad-shift-flip", knowledge="C3")


def _claim(
    arithmetic: str, score: ScoreSpec = C3, pairs: int = 16
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    session = run_session(
        PAIRS,
        LinearOracle(scale=2.0),  # soft probabilities: logarithms of every size
        score=score,
        max_pairs=pairs,
        rho=bytes(32),
        claim_nonce=bytes(32),
        arithmetic=arithmetic,
    )
    payload = session.verdict_payload(
        arbiter=key_id(KEY.public_key()), time="2026-11-28T12:00:00Z", environment={"os": "x"}
    )
    return payload, list(iter_records(session.transcript.to_bytes()))


def _replayed(payload: dict[str, Any], records: list[dict[str, Any]]):
    writer = TranscriptWriter()
    for record in records:
        writer.append(record)
    payload = dict(payload, transcript={"hash": writer.head, "records": writer.count})
    envelope = sign_envelope(encode(payload), payload_type("verdict"), KEY).to_json()
    return replay(check_verdict(envelope, KEY.public_key()), writer.to_bytes())


def _tolerance(record: dict[str, Any], version: int, spec: ScoreSpec) -> float:
    answer = ClassifyAnswer.from_value(record["answers"][version], "probabilities")
    return classifier.legacy_score(spec, answer, n_classes=10, label=record["label"])[1]


def _nudged(records: list[dict[str, Any]], share: float) -> list[dict[str, Any]]:
    """Move version 0's recorded score of the first decided pair by ``share`` tolerances."""
    records = [dict(r) for r in records]
    for record in records[1:]:
        first, second = record["scores"]
        if first != second:
            step = share * _tolerance(record, 0, C3)
            assert abs(first - second) > 8 * step  # the outcome cannot change
            record["scores"] = [first + step, second]
            return records
    raise AssertionError("no decided pair")


def test_a_claim_started_now_names_basic_v1_and_replays_bit_for_bit():
    payload, records = _claim(classifier.BASIC_ARITHMETIC)
    assert payload["claim"]["score"]["arithmetic"] == "basic-v1"
    assert records[0]["claim"]["score"]["arithmetic"] == "basic-v1"
    _replayed(payload, records)
    with pytest.raises(VerificationError, match="recorded scores differ"):
        _replayed(payload, _nudged(records, 0.25))  # any change at all


def test_a_claim_of_the_rule_before_replays_within_the_tolerance_only():
    payload, records = _claim(classifier.LEGACY_ARITHMETIC)
    assert "arithmetic" not in payload["claim"]["score"]
    result = _replayed(payload, records)
    assert result.indicators == payload["indicators"]
    assert _replayed(payload, _nudged(records, 0.25)).indicators == payload["indicators"]
    with pytest.raises(VerificationError, match="not within"):
        _replayed(payload, _nudged(records, 4.0))


def test_verdicts_computed_with_the_platform_logarithms_replay(monkeypatch):
    """The scores of twinaudit's verifier before 2026-11-24 (glibc's ln and log1p)."""
    platform = classifier._Logs(math.log, lambda q: math.log1p(-q))
    differ = 0
    c3 = ScoreSpec(k=32, perturbation="pad-shift-flip", knowledge="C3")  # log1p(-6/32)...
    c1 = ScoreSpec(k=2, perturbation="pad-shift-flip", knowledge="C1")
    c2 = ScoreSpec(k=2, perturbation="pad-shift-flip", knowledge="C2", statistic="logit")
    for spec in (c3, c1, c2):
        with monkeypatch.context() as patch:
            patch.setattr(classifier, "_CORRECTLY_ROUNDED", platform)
            payload, records = _claim(classifier.LEGACY_ARITHMETIC, spec, 24)
        _replayed(payload, records)
        rounded_once = _claim(classifier.LEGACY_ARITHMETIC, spec, 24)[1]
        pairs = zip(records[1:], rounded_once[1:], strict=True)
        differ += sum(a["scores"] != b["scores"] for a, b in pairs)
    assert differ  # some scores are the platform's, not those of logarithms rounded once


def test_c3_with_one_copy_ties_every_pair_of_two_wrong_labels():
    """Under basic-v1 two versions whose one copy got a wrong label score the same bits."""
    label, classes = 3, 10
    basic = ScoreSpec(k=1, perturbation="dither", knowledge="C3", arithmetic="basic-v1")
    before = ScoreSpec(k=1, perturbation="dither", knowledge="C3", arithmetic="")
    wrong = [c for c in range(classes) if c != label]

    def scores(spec: ScoreSpec) -> set[float]:
        return {
            classifier.score(
                spec, ClassifyAnswer(labels=np.array([c])), n_classes=classes, label=label
            )
            for c in wrong
        }

    assert len(scores(basic)) == 1
    assert len(scores(before)) > 1  # in class order the sums differ in the last bits


def test_c4_scores_depend_on_the_counts_signature_only():
    rng = np.random.default_rng(5)
    spec = ScoreSpec(k=32, perturbation="dither", knowledge="C4", arithmetic="basic-v1")
    for _ in range(50):
        labels = rng.integers(0, 10, size=32)
        shuffled = rng.permutation(10)[labels]  # the classes renamed: the same signature
        first, second = (
            classifier.score(spec, ClassifyAnswer(labels=x), n_classes=10, label=None)
            for x in (labels, shuffled)
        )
        assert first == second
