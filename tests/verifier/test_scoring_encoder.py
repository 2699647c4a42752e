"""The image-encoder score (spec §10.4): spec parsing, crop-and-flip draws, exact cosines."""

import math

import numpy as np
import pytest

from twinaudit.protocol.claim.functions import score_spec_from_fields, score_spec_from_value
from twinaudit.protocol.errors import OracleError, ParameterError
from twinaudit.protocol.items import ImageItem
from twinaudit.protocol.oracles.base import OracleInfo
from twinaudit.protocol.oracles.embedding import (
    MAX_EMBEDDING_DIM,
    EmbeddingAnswer,
    matrix_from_value,
    matrix_to_value,
)
from twinaudit.protocol.prg import Prg
from twinaudit.verifier.scoring.augment import apply, draw_params, to_unit
from twinaudit.verifier.scoring.cosine import cosine, pairwise_cosine_sum
from twinaudit.verifier.scoring.encoder import EncoderSpec, make_queries, score


@pytest.mark.parametrize(
    "kwargs",
    [
        {"k": 1},
        {"k": 257},
        {"k": True},
        {"k": 2.0},
        {"perturbation": "none"},
        {"perturbation": "rotate"},
        {"function": "image-classifier"},
    ],
)
def test_invalid_specs(kwargs):
    with pytest.raises(ParameterError):
        EncoderSpec(**kwargs)


def test_spec_maps_round_trip_strictly():
    spec = EncoderSpec(k=16, perturbation="simclr-crop-flip")
    assert spec.to_value() == {
        "function": "image-encoder",
        "k": 16,
        "perturbation": "simclr-crop-flip",
    }
    assert score_spec_from_value(spec.to_value()) == spec
    assert spec.queries_per_version == 16 and spec.item_kind == "image"
    for bad in (
        {**spec.to_value(), "knowledge": "C1"},
        {"function": "image-encoder", "k": 16},
        {"function": "image-encoders", "k": 16, "perturbation": "none"},
        "image-encoder",
    ):
        with pytest.raises(ParameterError):
            score_spec_from_value(bad)


def test_proto_fields_default_and_refuse_what_does_not_apply():
    assert score_spec_from_fields("image-encoder", 0, "", "") == EncoderSpec()
    assert EncoderSpec() == EncoderSpec(k=64, perturbation="random-resized-crop-flip-v2")
    assert score_spec_from_fields("image-encoder", 8, "pad-shift-flip", "") == EncoderSpec(
        k=8, perturbation="pad-shift-flip"
    )
    with pytest.raises(ParameterError):
        score_spec_from_fields("image-encoder", 8, "pad-shift-flip", "C2")
    with pytest.raises(ParameterError):
        score_spec_from_fields("language-model", 1, "", "")
    with pytest.raises(ParameterError):
        score_spec_from_fields("image-text", 0, "none", "")
    with pytest.raises(ParameterError):
        score_spec_from_fields("audio", 0, "", "")


def test_check_oracle_and_item():
    spec = EncoderSpec()
    spec.check_oracle(OracleInfo("m", "d", ("embed-images",), "", 0, 8))
    with pytest.raises(ParameterError):
        spec.check_oracle(OracleInfo("m", "d", ("classify",), "label", 10, 8))
    with pytest.raises(ParameterError):
        spec.check_item("not an image")


@pytest.mark.parametrize("family", ["random-resized-crop-flip", "simclr-crop-flip"])
def test_crop_flip_families(family):
    params = draw_params(family, Prg(bytes(32), "augment/3/0"), 20, 16, 64)
    assert {p["flip"] for p in params} == {True, False}
    assert all(1 <= p["height"] <= 20 and 1 <= p["width"] <= 16 for p in params)
    smallest = min(p["height"] * p["width"] for p in params) / (20 * 16)
    if family == "simclr-crop-flip":
        assert smallest < 0.5  # SimCLR crops reach far below the paper's 0.8
    else:
        assert smallest >= 0.7
    image = to_unit(np.random.default_rng(0).integers(0, 256, (20, 16, 3), dtype=np.uint8))
    flipped = next(p for p in params if p["flip"])
    assert np.array_equal(apply(image, flipped), apply(image, {**flipped, "flip": False})[:, ::-1])
    with pytest.raises(ParameterError):
        apply(image, {k: v for k, v in flipped.items() if k != "flip"})


def test_crop_flip_draws_extend_the_crop_draws():
    """``random-resized-crop-flip`` is the paper's crop draw followed by one coin."""
    crop = Prg(bytes(32), "a")
    both = Prg(bytes(32), "a")
    (plain,) = draw_params("random-resized-crop", crop, 28, 28, 1)
    (flip,) = draw_params("random-resized-crop-flip", both, 28, 28, 1)
    assert {k: v for k, v in flip.items() if k not in ("family", "flip")} == {
        k: v for k, v in plain.items() if k != "family"
    }
    assert flip["flip"] == crop.coin()


def test_make_queries_is_deterministic():
    item = ImageItem(np.random.default_rng(1).integers(0, 256, (10, 12, 1), dtype=np.uint8))
    spec = EncoderSpec(k=5)
    params, images = make_queries(spec, item, Prg(bytes(32), "augment/0/1"))
    again, images2 = make_queries(spec, item, Prg(bytes(32), "augment/0/1"))
    assert params == again and np.array_equal(images, images2)
    assert images.shape == (5, 10, 12, 1) and images.dtype == np.float32


def test_pairwise_sum_against_the_papers_double_loop():
    rows = np.random.default_rng(2).standard_normal((9, 7))
    ours = pairwise_cosine_sum(rows)
    paper = sum(
        float(np.dot(a, b) / (np.linalg.norm(a) * np.linalg.norm(b))) for a in rows for b in rows
    )
    assert math.isclose(paper, 9 + 2 * ours, rel_tol=1e-12)


def test_exact_sums_make_the_score_independent_of_order_and_scale():
    rows = np.random.default_rng(3).standard_normal((12, 33))
    base = pairwise_cosine_sum(rows)
    assert pairwise_cosine_sum(rows[::-1].copy()) == base
    assert pairwise_cosine_sum(rows * 8.0) == base  # a power of two scales exactly
    assert pairwise_cosine_sum(rows[:1]) == 0.0
    aligned = np.tile(np.array([[3.0, 4.0]]), (4, 1))
    assert pairwise_cosine_sum(aligned) == 6.0


def test_cosine_rules():
    assert cosine(np.array([3.0, 4.0]), np.array([3.0, 4.0])) == 1.0
    with pytest.raises(OracleError):
        cosine(np.array([0.0, 0.0]), np.array([1.0, 0.0]))
    with pytest.raises(OracleError):
        cosine(np.array([1.0, 0.0]), np.array([1.0, 0.0, 0.0]))


@pytest.mark.parametrize(
    ("values", "rows"),
    [
        (np.zeros((3, 2)), 4),
        (np.zeros((3, 0)), 3),
        (np.zeros((2, MAX_EMBEDDING_DIM + 1)), 2),
        (np.array([[1.0, np.nan]]), 1),
        (np.array([[1.0, -np.inf]]), 1),
        (np.array([[1.0, 2.0**65]]), 1),
    ],
)
def test_invalid_embedding_answers(values, rows):
    with pytest.raises(OracleError) as info:
        EmbeddingAnswer(values).validate(rows)
    assert info.value.reason == "invalid-answer"


def test_answers_must_be_float64_matrices():
    for bad in (np.zeros(3), np.zeros((2, 2), dtype=np.float32), [[1.0]]):
        with pytest.raises(OracleError):
            EmbeddingAnswer(bad)


def test_score_needs_k_rows_with_a_direction():
    spec = EncoderSpec(k=3)
    rows = np.random.default_rng(4).standard_normal((3, 5))
    assert score(spec, EmbeddingAnswer(rows)) == pairwise_cosine_sum(rows)
    with pytest.raises(OracleError):
        score(spec, EmbeddingAnswer(rows[:2]))
    rows[1] = 0.0
    with pytest.raises(OracleError):
        score(spec, EmbeddingAnswer(rows))


def test_recorded_matrices_round_trip_exactly():
    rows = np.random.default_rng(5).standard_normal((4, 6))
    value = matrix_to_value(rows)
    assert value["dim"] == 6 and len(value["values"]) == 4 * 6 * 8
    assert np.array_equal(matrix_from_value(value, 4), rows)
    for bad in (
        {"dim": 6, "values": value["values"][:-8]},
        {"dim": 0, "values": b""},
        {"dim": 6, "values": value["values"], "extra": 1},
        {"dim": 5, "values": value["values"]},
    ):
        with pytest.raises(OracleError):
            matrix_from_value(bad, 4)
    nan = np.frombuffer(value["values"], "<f8").copy()
    nan[0] = np.nan
    with pytest.raises(OracleError):
        matrix_from_value({"dim": 6, "values": nan.tobytes()}, 4)
