"""The image-classifier score (paper Alg. 3): C1–C4 by hand, flooring, clamps, ties, bad answers."""

import math

import numpy as np
import pytest

from twinaudit.protocol.claim.scores.classifier import (
    LABEL_FLOOR,
    LOG_EPSILON,
    ScoreSpec,
    mean_output,
    negative_entropy,
    negative_modified_entropy,
    score,
)
from twinaudit.protocol.errors import OracleError, ParameterError
from twinaudit.protocol.items import ImageItem
from twinaudit.protocol.oracles.base import ClassifyAnswer, OracleInfo

ln = math.log


def _spec(knowledge, k=2, perturbation="none"):
    return ScoreSpec(k=k, perturbation=perturbation, knowledge=knowledge)


def _probs(rows):
    return ClassifyAnswer(probabilities=np.array(rows, dtype=np.float64))


def _labels(values):
    return ClassifyAnswer(labels=np.array(values, dtype=np.int64))


PROBS = _probs([[0.5, 0.5, 0.0], [0.7, 0.1, 0.2]])  # mean (0.6, 0.3, 0.1)


def test_c2_negative_entropy_by_hand():
    value = score(_spec("C2"), PROBS, n_classes=3, label=None)
    assert value == pytest.approx(0.6 * ln(0.6) + 0.3 * ln(0.3) + 0.1 * ln(0.1), abs=1e-15)
    assert value == pytest.approx(-0.8979457248567797, abs=1e-15)


def test_c1_negative_modified_entropy_by_hand():
    value = score(_spec("C1"), PROBS, n_classes=3, label=0)
    assert value == pytest.approx((1 - 0.6) * ln(0.6) + 0.3 * ln(0.7) + 0.1 * ln(0.9), abs=1e-15)
    assert value == pytest.approx(-0.32186878425379867, abs=1e-15)
    # The true class matters: label 2 (p = 0.1) scores much lower.
    assert score(_spec("C1"), PROBS, n_classes=3, label=2) < value


def test_c3_label_only_with_label_by_hand():
    answer = _labels([0, 0, 2, 0])  # counts (3, 0, 1) over K = 4: p = (0.75, 1e-5, 0.25)
    value = score(_spec("C3", k=4), answer, n_classes=3, label=2)
    expected = (1 - 0.25) * ln(0.25) + 0.75 * ln(0.25) + 1e-5 * ln(1 - 1e-5)
    assert value == pytest.approx(expected, abs=1e-15)


def test_c4_label_only_by_hand():
    answer = _labels([0, 0, 2, 0])
    value = score(_spec("C4", k=4), answer, n_classes=3, label=None)
    assert value == pytest.approx(0.75 * ln(0.75) + 1e-5 * ln(1e-5) + 0.25 * ln(0.25), abs=1e-15)


def test_label_only_mean_floors_zeros():
    p = mean_output(_spec("C4", k=3), _labels([1, 1, 1]), 4)
    assert p.tolist() == [LABEL_FLOOR, 1.0, LABEL_FLOOR, LABEL_FLOOR]
    assert score(_spec("C4", k=3), _labels([1, 1, 1]), n_classes=4, label=None) == pytest.approx(
        3 * 1e-5 * ln(1e-5), abs=1e-18
    )
    # C3 with every copy on a wrong class: ln(1 - 1) is clamped to ln(ε).
    value = score(_spec("C3", k=3), _labels([1, 1, 1]), n_classes=4, label=0)
    expected = (1 - 1e-5) * ln(1e-5) + 1.0 * ln(LOG_EPSILON) + 2 * 1e-5 * ln(1 - 1e-5)
    assert value == pytest.approx(expected, abs=1e-12)


def test_zero_times_log_zero_is_zero():
    assert negative_entropy(np.array([1.0, 0.0, 0.0])) == 0.0
    assert score(_spec("C2", k=1), _probs([[1.0, 0.0]]), n_classes=2, label=None) == 0.0
    # A certain, correct answer has the best possible modified entropy, 0.
    assert score(_spec("C1", k=1), _probs([[1.0, 0.0]]), n_classes=2, label=0) == 0.0


def test_modified_entropy_clamps_are_finite():
    # p_y = 0: (1 - 0) ln(max(0, ε)); p_c = 1 for c ≠ y: 1 · ln(ε).
    value = negative_modified_entropy(np.array([0.0, 1.0]), 0)
    assert value == pytest.approx(2 * ln(LOG_EPSILON), abs=1e-12)
    assert math.isfinite(value)
    # Just below the clamp, ln(1 - p) is log1p(-p).
    p = 1.0 - 2e-12
    assert negative_modified_entropy(np.array([1.0 - p, p]), 0) == pytest.approx(
        p * math.log1p(-p) + (1 - (1.0 - p)) * ln(1.0 - p), rel=1e-12
    )


def test_label_only_conditions_reduce_probabilities_to_argmax():
    answer = _probs([[0.2, 0.8], [0.5, 0.5], [0.9, 0.1]])  # argmax 1, 0 (first max), 0
    assert mean_output(_spec("C4", k=3), answer, 2).tolist() == [2 / 3, 1 / 3]


def test_mean_is_a_sequential_float64_sum():
    rows = [[0.1, 0.9], [0.2, 0.8], [0.3, 0.7]]
    acc = np.zeros(2)
    for row in rows:
        acc = acc + np.array(row)
    assert np.array_equal(mean_output(_spec("C2", k=3), _probs(rows), 2), acc / 3.0)


def test_probabilities_are_not_renormalised():
    answer = _probs([[0.6004, 0.4]])  # sums to 1.0004: accepted as is
    p = mean_output(_spec("C2", k=1), answer, 2)
    assert p.tolist() == [0.6004, 0.4]


def test_ties_give_equal_scores():
    # The same multiset of labels in another order: exactly the same score.
    for knowledge, label in (("C3", 1), ("C4", None)):
        spec = _spec(knowledge, k=5)
        a = score(spec, _labels([1, 0, 1, 2, 1]), n_classes=3, label=label)
        b = score(spec, _labels([2, 1, 1, 0, 1]), n_classes=3, label=label)
        assert a == b
    for knowledge, label in (("C1", 0), ("C2", None)):
        spec = _spec(knowledge)
        assert score(spec, PROBS, n_classes=3, label=label) == score(
            spec, _probs(PROBS.probabilities.tolist()), n_classes=3, label=label
        )


def _bad_answers():
    good = [[0.5, 0.5, 0.0], [0.7, 0.1, 0.2]]
    return [
        ("too few rows", "C2", _probs(good[:1])),
        ("too many rows", "C2", _probs([*good, good[0]])),
        ("wrong class count", "C2", _probs([[0.5, 0.5], [0.5, 0.5]])),
        ("nan", "C2", _probs([[np.nan, 0.5, 0.5], good[1]])),
        ("inf", "C1", _probs([[np.inf, 0.0, 0.0], good[1]])),
        ("negative", "C2", _probs([[-0.1, 0.6, 0.5], good[1]])),
        ("above one", "C2", _probs([[1.2, -0.1, -0.1], good[1]])),
        ("sum too small", "C2", _probs([[0.5, 0.4, 0.0], good[1]])),
        ("sum too large", "C1", _probs([[0.5, 0.5, 0.002], good[1]])),
        ("flat vector", "C2", ClassifyAnswer(probabilities=np.array([0.5, 0.5, 0.0]))),
        ("label out of range", "C4", _labels([0, 3])),
        ("negative label", "C3", _labels([0, -1])),
        ("label count", "C4", _labels([0])),
        ("labels for C1", "C1", _labels([0, 1])),
        ("labels for C2", "C2", _labels([0, 1])),
    ]


@pytest.mark.parametrize(
    ("case", "knowledge", "answer"), _bad_answers(), ids=[c[0] for c in _bad_answers()]
)
def test_invalid_answers_are_rejected(case, knowledge, answer):
    with pytest.raises(OracleError) as info:
        score(_spec(knowledge), answer, n_classes=3, label=0)
    assert info.value.reason == "invalid-answer"


@pytest.mark.parametrize(
    "build",
    [
        ClassifyAnswer,
        lambda: ClassifyAnswer(probabilities=np.zeros((1, 2)), labels=np.zeros(1, np.int64)),
        lambda: ClassifyAnswer(probabilities=np.zeros((1, 2), dtype=np.float32)),
        lambda: ClassifyAnswer(labels=np.zeros(1, dtype=np.int32)),
        lambda: ClassifyAnswer(probabilities=[[0.5, 0.5]]),
    ],
)
def test_malformed_answer_objects(build):
    with pytest.raises(OracleError) as info:
        build()
    assert info.value.reason == "invalid-answer"


def test_recorded_answers_round_trip():
    again = ClassifyAnswer.from_value(PROBS.to_value(), "probabilities")
    assert np.array_equal(again.probabilities, PROBS.probabilities)
    labels = _labels([3, 1])
    assert np.array_equal(ClassifyAnswer.from_value(labels.to_value(), "label").labels, [3, 1])
    for value, output in [
        ([[0.5, 1]], "probabilities"),
        ([[0.5], [0.5, 0.5]], "probabilities"),
        ([1.0], "label"),
        ([True], "label"),
        ([1], "logits"),
        ("x", "label"),
    ]:
        with pytest.raises(OracleError):
            ClassifyAnswer.from_value(value, output)


def test_score_needs_a_valid_label_for_c1_c3():
    with pytest.raises(ParameterError):
        score(_spec("C1"), PROBS, n_classes=3, label=None)
    with pytest.raises(ParameterError):
        score(_spec("C1"), PROBS, n_classes=3, label=3)
    with pytest.raises(ParameterError):
        score(_spec("C3", k=2), _labels([0, 1]), n_classes=3, label=True)
    with pytest.raises(ParameterError):
        score(_spec("C2"), PROBS, n_classes=1, label=None)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"k": 0, "perturbation": "none", "knowledge": "C2"},
        {"k": 257, "perturbation": "none", "knowledge": "C2"},
        {"k": True, "perturbation": "none", "knowledge": "C2"},
        {"k": "4", "perturbation": "none", "knowledge": "C2"},
        {"k": 4, "perturbation": "crop", "knowledge": "C2"},
        {"k": 4, "perturbation": "none", "knowledge": "C5"},
        {"k": 4, "perturbation": "none", "knowledge": "c2"},
        {"k": 4, "perturbation": "none", "knowledge": "C2", "function": "text-lm"},
    ],
)
def test_score_spec_validation(kwargs):
    with pytest.raises(ParameterError):
        ScoreSpec(**kwargs)


def test_score_spec_map_round_trip():
    spec = ScoreSpec(k=16, perturbation="random-resized-crop", knowledge="C1")
    value = spec.to_value()
    assert value == {
        "function": "image-classifier",
        "k": 16,
        "perturbation": "random-resized-crop",
        "knowledge": "C1",
        "arithmetic": "basic-v1",
    }
    assert ScoreSpec.from_value(value) == spec
    for bad in [{**value, "extra": 1}, {k: v for k, v in value.items() if k != "k"}, [value]]:
        with pytest.raises(ParameterError):
            ScoreSpec.from_value(bad)


def test_labelled_conditions_need_committed_labels():
    unlabelled = ImageItem(np.zeros((4, 4, 1), np.uint8))
    labelled = ImageItem(np.zeros((4, 4, 1), np.uint8), label=7)
    for knowledge in ("C1", "C3"):
        with pytest.raises(ParameterError):
            _spec(knowledge).check_item(unlabelled)
        assert _spec(knowledge).check_item(labelled) == 7
    for knowledge in ("C2", "C4"):
        assert _spec(knowledge).check_item(unlabelled) is None
        assert _spec(knowledge).check_item(labelled) is None


def test_check_oracle():
    def info(output, caps=("classify",)):
        return OracleInfo("m", "d" * 64, caps, output, 10 if output else 0, 32)

    for knowledge in ("C1", "C2", "C3", "C4"):
        _spec(knowledge).check_oracle(info("probabilities"))
    for knowledge in ("C3", "C4"):
        _spec(knowledge).check_oracle(info("label"))
    for knowledge in ("C1", "C2"):
        with pytest.raises(ParameterError):
            _spec(knowledge).check_oracle(info("label"))
    with pytest.raises(ParameterError):
        _spec("C4").check_oracle(info("", ("embed-images",)))


def test_a_tie_margin_is_a_positive_float_for_probability_conditions_and_in_the_map():
    spec = ScoreSpec(k=1, perturbation="dither", knowledge="C1", margin=0.1)
    assert spec.to_value()["margin"] == 0.1
    assert ScoreSpec.from_value(spec.to_value()) == spec
    assert "margin" not in ScoreSpec(k=1, perturbation="dither", knowledge="C1").to_value()
    base = {"function": "image-classifier", "k": 1, "perturbation": "dither", "knowledge": "C2"}
    for margin in (0.0, -0.5, 1, float("nan"), float("inf"), 1e5, "0.1", True):
        with pytest.raises(ParameterError):
            ScoreSpec.from_value({**base, "margin": margin})
    for knowledge in ("C3", "C4"):
        with pytest.raises(ParameterError, match="probability vectors"):
            ScoreSpec(k=2, perturbation="dither", knowledge=knowledge, margin=0.1)


def test_the_arithmetic_is_in_the_map_only_as_basic_v1():
    base = {"function": "image-classifier", "k": 2, "perturbation": "dither", "knowledge": "C3"}
    assert ScoreSpec.from_value(base).arithmetic == ""  # a claim of the rule before (§1.2)
    spec = ScoreSpec.from_value({**base, "arithmetic": "basic-v1"})
    assert spec.arithmetic == "basic-v1"
    assert spec.to_value() == {**base, "arithmetic": "basic-v1"}
    assert ScoreSpec.from_value(base).to_value() == base
    for bad in ("", "basic-v2", 1):
        with pytest.raises(ParameterError):
            ScoreSpec.from_value({**base, "arithmetic": bad})
    with pytest.raises(ParameterError):
        ScoreSpec(k=2, perturbation="dither", knowledge="C3", arithmetic="libm")
