"""Issue #19's score rules: the ``dither`` family (no query is a published file), the
``noise`` family (copies up to 31 levels away, for models that fit their training images
exactly) and the ``logit`` statistic (the label's log-odds per copy, which does not
saturate)."""

import math

import numpy as np
import pytest

from twinaudit.protocol.claim.functions import score_spec_from_fields
from twinaudit.protocol.claim.scores.classifier import LOGIT_FLOOR, ScoreSpec, mean_log_odds, score
from twinaudit.protocol.errors import OracleError, ParameterError
from twinaudit.protocol.oracles.base import ClassifyAnswer
from twinaudit.protocol.prg import Prg, bit_stream
from twinaudit.verifier.scoring.augment import (
    DITHER_KEY_BYTES,
    apply,
    dither_steps,
    draw_copies,
    draw_params,
    noise_steps,
    stream_bits,
    to_unit,
)

SEED = bytes(range(32))


def _image(height=28, width=28, channels=1, seed=0):
    return np.random.default_rng(seed).integers(0, 256, (height, width, channels), dtype=np.uint8)


# --- dither ------------------------------------------------------------------------------------


@pytest.mark.parametrize("family", ["dither", "noise"])
def test_dither_and_noise_draw_a_32_byte_key_per_copy_from_the_stream(family):
    params = draw_params(family, Prg(SEED, "augment/3/0"), 28, 28, 3)
    stream = Prg(SEED, "augment/3/0")
    assert params == [{"family": family, "key": stream.read(DITHER_KEY_BYTES)} for _ in range(3)]


def test_dither_steps_are_bit_differences_in_row_major_order():
    key = bytes(range(100, 132))
    bits = bit_stream(key, "dither", 0, 2 * 12)
    expected = [int(bits[2 * n]) - int(bits[2 * n + 1]) for n in range(12)]
    assert dither_steps(key, 12).tolist() == expected


def test_a_dither_copy_moves_every_intensity_by_at_most_one_level_and_clips():
    pixels = _image(6, 5, 3)
    pixels[0, :, :] = 0
    pixels[1, :, :] = 255
    key = bytes(range(32))
    copy = apply(to_unit(pixels), {"family": "dither", "key": key})
    levels = np.rint(copy.astype(np.float64) * 255).astype(int)
    steps = dither_steps(key, pixels.size).reshape(pixels.shape)
    assert np.array_equal(levels, np.clip(pixels.astype(int) + steps, 0, 255))
    assert copy.dtype == np.float32
    # Each copy is exactly (q / 255) rounded to float32, never something in between.
    assert np.array_equal(copy, (levels / 255.0).astype(np.float32))


def test_no_dither_copy_is_the_published_file():
    pixels = _image()
    _, copies = draw_copies("dither", 16, pixels, Prg(SEED, "augment/0/1"))
    published = to_unit(pixels).astype(np.float32)
    for copy in copies:
        assert not np.array_equal(copy, published)
    # ... while a `none` copy is, bit for bit (the leak dither closes).
    _, plain = draw_copies("none", 1, pixels, Prg(SEED, "augment/0/1"))
    assert np.array_equal(plain[0], published)
    # About half the intensities move, a quarter each way.
    moved = np.rint(copies.astype(np.float64) * 255) - pixels[None].astype(np.float64)
    assert set(np.unique(moved)) <= {-1.0, 0.0, 1.0}
    assert 0.4 < float(np.mean(moved != 0)) < 0.6


@pytest.mark.parametrize(
    "params",
    [
        {"family": "dither"},
        {"family": "dither", "key": bytes(31)},
        {"family": "dither", "key": "00" * 32},
        {"family": "dither", "key": bytes(32), "flip": False},
    ],
)
def test_malformed_dither_parameters_are_refused(params):
    with pytest.raises(ParameterError):
        apply(to_unit(_image(4, 4)), params)


def test_the_encoder_does_not_take_dither():
    with pytest.raises(ParameterError):
        score_spec_from_fields("image-encoder", 8, "dither", "")


# --- logit -------------------------------------------------------------------------------------


def _logit(knowledge="C1", k=2):
    return ScoreSpec(k=k, perturbation="dither", knowledge=knowledge, statistic="logit")


def test_logit_by_hand():
    rows = np.array([[0.7, 0.2, 0.1], [0.5, 0.25, 0.25]])
    value = score(_logit(), ClassifyAnswer(probabilities=rows), n_classes=3, label=0)
    expected = ((math.log(0.7) - math.log(0.2 + 0.1)) + (math.log(0.5) - math.log(0.5))) / 2
    assert value == expected


def test_logit_keeps_ordering_where_the_entropy_saturates():
    # Two memorised versions: the label's probability within 1e-9 of 1 in both.
    closer = np.array([[1.0 - 1e-12, 1e-12, 0.0]])
    further = np.array([[1.0 - 1e-10, 1e-10, 0.0]])
    entropy = ScoreSpec(k=1, perturbation="none", knowledge="C1")
    logit = ScoreSpec(k=1, perturbation="none", knowledge="C1", statistic="logit")
    scores = {
        name: [
            score(spec, ClassifyAnswer(probabilities=p), n_classes=3, label=0)
            for p in (closer, further)
        ]
        for name, spec in (("entropy", entropy), ("logit", logit))
    }
    assert scores["logit"][0] - scores["logit"][1] == pytest.approx(math.log(100), rel=1e-9)
    assert scores["entropy"][0] >= scores["entropy"][1]
    assert abs(scores["entropy"][0] - scores["entropy"][1]) < 1e-9


def test_logit_floors_a_zero_probability():
    rows = np.array([[1.0, 0.0, 0.0]])
    value = score(_logit(k=1), ClassifyAnswer(probabilities=rows), n_classes=3, label=1)
    assert value == math.log(LOGIT_FLOOR) - math.log(1.0)


def test_c2_logit_uses_the_class_of_largest_mean_lowest_index_first():
    rows = np.array([[0.4, 0.4, 0.2], [0.4, 0.4, 0.2]])
    assert mean_log_odds(rows, None) == mean_log_odds(rows, 0)
    rows = np.array([[0.1, 0.6, 0.3], [0.5, 0.2, 0.3]])  # sums 0.6, 0.8, 0.6: class 1
    assert mean_log_odds(rows, None) == mean_log_odds(rows, 1)


def test_logit_needs_probabilities():
    for knowledge in ("C3", "C4"):
        with pytest.raises(ParameterError, match="probability vectors"):
            _logit(knowledge)
    with pytest.raises(OracleError):
        score(_logit(), ClassifyAnswer(labels=np.array([0, 1])), n_classes=3, label=0)


def test_the_score_map_names_logit_and_leaves_the_default_out():
    assert "statistic" not in ScoreSpec(k=1, perturbation="none", knowledge="C1").to_value()
    value = _logit().to_value()
    assert value["statistic"] == "logit"
    assert ScoreSpec.from_value(value) == _logit()
    with pytest.raises(ParameterError, match="left out"):
        ScoreSpec.from_value({**value, "statistic": "entropy"})
    with pytest.raises(ParameterError):
        ScoreSpec.from_value({**value, "statistic": "margin"})
    with pytest.raises(ParameterError):
        ScoreSpec.from_value({**value, "extra": 1})


def test_proto_fields_carry_the_statistic():
    assert score_spec_from_fields("image-classifier", 2, "dither", "C1", "logit") == _logit()
    plain = score_spec_from_fields("image-classifier", 2, "dither", "C1", "")
    assert plain == score_spec_from_fields("image-classifier", 2, "dither", "C1", "entropy")
    assert isinstance(plain, ScoreSpec) and plain.statistic == "entropy"
    with pytest.raises(ParameterError, match="no statistic"):
        score_spec_from_fields("language-model", 0, "", "", "logit")


def test_pad_shift_flip_dither_is_a_placement_then_a_dither_and_never_a_placement():
    pixels = _image(8, 8)
    params = draw_params("pad-shift-flip-dither", Prg(SEED, "augment/2/1"), 8, 8, 4)
    stream = Prg(SEED, "augment/2/1")
    for drawn in params:
        top, left, flip = stream.randint(0, 8), stream.randint(0, 8), stream.coin()
        assert drawn == {
            "family": "pad-shift-flip-dither",
            "top": top,
            "left": left,
            "flip": flip,
            "key": stream.read(DITHER_KEY_BYTES),
        }
        placed = apply(
            to_unit(pixels), {"family": "pad-shift-flip", "top": top, "left": left, "flip": flip}
        )
        placed_levels = np.rint(placed.astype(np.float64) * 255).astype(int)
        copy = apply(to_unit(pixels), drawn)
        steps = dither_steps(drawn["key"], pixels.size).reshape(pixels.shape)
        expected = np.clip(placed_levels + steps, 0, 255)
        assert np.array_equal(np.rint(copy.astype(np.float64) * 255).astype(int), expected)
        assert not np.array_equal(copy, placed)
    with pytest.raises(ParameterError):
        apply(
            to_unit(pixels), {"family": "pad-shift-flip-dither", "top": 0, "left": 0, "flip": False}
        )


# --- noise -------------------------------------------------------------------------------------


@pytest.mark.parametrize("count", [1, 7, 8, 13, 4099])
def test_stream_bits_are_the_bit_stream_of_spec_5_4(count):
    key = bytes(range(40, 72))
    expected = [int(b) for b in bit_stream(key, "noise", 0, count)]
    assert stream_bits(key, "noise", count).tolist() == expected


def test_noise_steps_read_six_bits_least_significant_first_and_skip_no_value():
    key = bytes(range(5, 37))
    bits = bit_stream(key, "noise", 0, 6 * 40)
    values = [sum(int(bits[6 * n + j]) << j for j in range(6)) for n in range(40)]
    expected = [v - 31 if v < 32 else v - 32 for v in values]
    assert noise_steps(key, 40).tolist() == expected


def test_noise_steps_are_symmetric_in_minus_31_to_31_with_zero_twice_as_likely():
    steps = noise_steps(bytes(32), 64 * 4000)
    counts = np.bincount(steps + 31, minlength=63)
    assert steps.min() == -31 and steps.max() == 31
    # Expected 4,000 of each step and 8,000 zeros: far from chance deviations (sd ≈ 63).
    assert abs(int(counts[31]) - 8000) < 600
    others = np.delete(counts, 31)
    assert int(np.abs(others - 4000).max()) < 400
    assert abs(float(steps.mean())) < 0.1


def test_a_noise_copy_moves_each_intensity_by_its_step_and_clips():
    pixels = np.array([[[0], [255], [3], [250]], [[128], [31], [224], [0]]], dtype=np.uint8)
    key = bytes(range(9, 41))
    copy = apply(to_unit(pixels), {"family": "noise", "key": key})
    levels = np.rint(copy.astype(np.float64) * 255).astype(int)
    steps = noise_steps(key, pixels.size).reshape(pixels.shape)
    assert np.array_equal(levels, np.clip(pixels.astype(int) + steps, 0, 255))
    assert copy.dtype == np.float32


def test_noise_copies_differ_from_the_image_and_from_each_other():
    pixels = _image(12, 12, seed=3)
    _, copies = draw_copies("noise", 8, pixels, Prg(SEED, "augment/0/0"))
    levels = np.rint(copies.astype(np.float64) * 255).astype(int)
    moved = np.abs(levels - pixels[None].astype(int))
    assert moved.max() <= 31 and moved.max() >= 16
    assert all(not np.array_equal(levels[i], levels[j]) for i in range(8) for j in range(i))


@pytest.mark.parametrize(
    "params",
    [
        {"family": "noise"},
        {"family": "noise", "key": bytes(33)},
        {"family": "noise", "key": bytes(32), "top": 0},
    ],
)
def test_malformed_noise_parameters_are_refused(params):
    with pytest.raises(ParameterError):
        apply(to_unit(_image(4, 4)), params)


def test_c3_and_c4_claims_name_noise_and_the_image_encoder_may_too():
    for knowledge in ("C3", "C4"):
        spec = score_spec_from_fields("image-classifier", 32, "noise", knowledge)
        assert (spec.perturbation, spec.k) == ("noise", 32)
    assert score_spec_from_fields("image-encoder", 8, "noise", "").perturbation == "noise"
