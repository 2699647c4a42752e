"""Output defences around a classifier oracle: top-κ, MemGuard, PairDetect (pixels, features)."""

import numpy as np
import pytest

from twinaudit.practitioner.defences import (
    DefenceSpec,
    FeaturePairDetectOracle,
    MemGuardOracle,
    PairDetectOracle,
    TopKOracle,
    memguard,
    parse_defence,
    top_k,
    wrap,
)
from twinaudit.protocol.errors import InputError
from twinaudit.protocol.oracles.base import ClassifierOracle, ClassifyAnswer, OracleInfo

RNG = np.random.default_rng(0)


class _Softmax(ClassifierOracle):
    """A fixed random linear model over pixels: different images, different answers."""

    def __init__(self, label_only=False, framework=""):
        self._w = np.random.default_rng(1).normal(size=(28 * 28, 10))
        self._label_only = label_only
        self.calls = 0
        output = "label" if label_only else "probabilities"
        self._info = OracleInfo("m", "d" * 64, ("classify",), output, 10, 256, framework)

    @property
    def info(self):
        return self._info

    def classify(self, images):
        self.calls += 1
        logits = images.reshape(len(images), -1).astype(np.float64) @ self._w * 0.3
        p = np.exp(logits - logits.max(axis=1, keepdims=True))
        p /= p.sum(axis=1, keepdims=True)
        if self._label_only:
            return ClassifyAnswer(labels=p.argmax(axis=1).astype(np.int64))
        return ClassifyAnswer(probabilities=p)


def _images(n):
    base = RNG.integers(0, 256, size=(n, 28, 28, 1)).astype(np.uint8)
    base[:, :4] = 0  # a black border, as Fashion-MNIST has
    return base


def _unit(levels):
    return (np.asarray(levels, dtype=np.float64) / 255.0).astype(np.float32)


def _twins(image, epsilon):
    """Return x + δ and x − δ with a ±ε mark (clipped to 0..255)."""
    mark = np.where(RNG.random(image.shape) < 0.5, -epsilon, epsilon)
    return (
        np.clip(image.astype(int) + mark, 0, 255).astype(np.uint8),
        np.clip(image.astype(int) - mark, 0, 255).astype(np.uint8),
    )


@pytest.mark.parametrize(
    ("text", "spec"),
    [
        ("topk:3", DefenceSpec("topk", (3.0,))),
        ("memguard", DefenceSpec("memguard", (0.5, 0.6))),
        ("memguard:0.2,0.9", DefenceSpec("memguard", (0.2, 0.9))),
        ("pairdetect", DefenceSpec("pairdetect", (10.0,))),
        ("pairdetect-features:24", DefenceSpec("pairdetect-features", (24.0,))),
    ],
)
def test_parse_defence_fills_defaults_and_prints_back(text, spec):
    parsed = parse_defence(text)
    assert parsed == spec
    assert parse_defence(str(parsed)) == parsed


@pytest.mark.parametrize(
    "text",
    [
        "",
        "blur",
        "topk",
        "topk:0",
        "topk:1.5",
        "memguard:0",
        "memguard:0.5,0.5",
        "pairdetect:0",
        "pairdetect:1,2",
        "topk:x",
        "topk:nan",
        "x" * 65,
    ],
)
def test_parse_defence_refuses_bad_specs(text):
    with pytest.raises(InputError):
        parse_defence(text)


def test_top_k_keeps_the_k_largest_rescaled_and_the_label():
    p = np.array([[0.1, 0.5, 0.2, 0.2], [0.25, 0.25, 0.25, 0.25]])
    out = top_k(p, 2)
    np.testing.assert_allclose(out[0], [0, 0.5 / 0.7, 0.2 / 0.7, 0])  # the tie: lower index
    np.testing.assert_allclose(out[1], [0.5, 0.5, 0, 0])
    oracle = TopKOracle(_Softmax(), 1)
    answer = oracle.classify(_unit(_images(5))).validate(5, 10)
    assert set(np.unique(answer.probabilities)) == {0.0, 1.0}


def test_memguard_keeps_the_label_and_the_expected_distortion_within_budget():
    p = np.array([[0.97, 0.01, 0.02], [0.4, 0.35, 0.25], [0.9, 0.1, 0.0]])
    moved = memguard(p, 0.6, 10.0, np.zeros(3))  # a budget that always applies phase I
    np.testing.assert_allclose(moved[:, 0], 0.6)
    np.testing.assert_allclose(moved.sum(axis=1), 1.0)
    assert (moved.argmax(axis=1) == p.argmax(axis=1)).all()
    assert moved[0, 2] > moved[0, 1]  # the others keep their order
    # Phase II: applied when the coin is below budget / ‖r‖₁ (‖r‖₁ = 0.74 for row 0).
    kept = memguard(p[:1], 0.6, 0.5, np.array([0.7]))
    np.testing.assert_array_equal(kept, p[:1])
    applied = memguard(p[:1], 0.6, 0.5, np.array([0.6]))
    np.testing.assert_allclose(applied[0, 0], 0.6)
    oracle = MemGuardOracle(_Softmax())
    images = _unit(_images(64))
    first, again = oracle.classify(images), oracle.classify(images)
    np.testing.assert_array_equal(first.probabilities, again.probabilities)  # a hashed coin
    honest = _Softmax().classify(images).probabilities
    first.validate(64, 10)
    assert (first.probabilities.argmax(axis=1) == honest.argmax(axis=1)).all()
    assert np.abs(first.probabilities - honest).sum(axis=1).mean() <= 0.5 + 0.2


def test_probability_defences_refuse_a_label_only_oracle():
    with pytest.raises(InputError, match="labels"):
        TopKOracle(_Softmax(label_only=True), 3)
    with pytest.raises(InputError, match="labels"):
        MemGuardOracle(_Softmax(label_only=True))


def test_pairdetect_answers_twins_alike_across_calls_and_leaves_others_alone():
    images = _images(6)
    inner = _Softmax()
    oracle = PairDetectOracle(inner, 10)
    first = oracle.classify(_unit(images)).probabilities
    twins = np.stack([_twins(image, 10)[0] for image in images])
    dithered = np.clip(twins.astype(int) + RNG.integers(-1, 2, twins.shape), 0, 255)
    second = oracle.classify(_unit(dithered)).probabilities  # a later call: from memory
    np.testing.assert_array_equal(first, second)
    assert oracle.recognised == 6
    assert oracle.queries == 12
    others = _unit(_images(4))
    np.testing.assert_array_equal(
        oracle.classify(others).probabilities, inner.classify(others).probabilities
    )
    assert oracle.recognised == 6  # distinct images are not near-duplicates


def test_the_papers_strict_rule_misses_twins_whose_marks_reach_epsilon():
    image = _images(1)
    plus, minus = _twins(image[0], 10)
    strict = PairDetectOracle(_Softmax(), 10, slack=0, inclusive=False)
    strict.classify(_unit(np.stack([plus, minus])))
    assert strict.recognised == 0
    ours = PairDetectOracle(_Softmax(), 10)
    ours.classify(_unit(np.stack([plus, minus])))
    assert ours.recognised == 1


def test_pairdetect_without_memory_compares_within_one_call_only():
    plus, minus = _twins(_images(1)[0], 10)
    oracle = PairDetectOracle(_Softmax(label_only=True), 10, memory=0)
    oracle.classify(_unit(plus[None]))
    oracle.classify(_unit(minus[None]))
    assert oracle.recognised == 0
    labels = oracle.classify(_unit(np.stack([plus, minus]))).labels
    assert labels[0] == labels[1]
    assert oracle.recognised == 1


def _shift_flip(image, down, right, flip):
    padded = np.pad(image, ((4, 4), (4, 4), (0, 0)))
    out = padded[4 - down : 32 - down, 4 - right : 32 - right]
    return out[:, ::-1] if flip else out


def test_feature_pairdetect_sees_through_shifts_and_flips_the_pixel_one_misses():
    image = np.zeros((28, 28, 1), dtype=np.uint8)
    image[6:22, 9:19] = RNG.integers(120, 250, size=(16, 10, 1))  # an object on black
    plus, minus = _twins(image, 10)
    queries = np.stack([_shift_flip(plus, 2, -3, False), _shift_flip(minus, -1, 2, True)])
    pixels = PairDetectOracle(_Softmax(), 10)
    pixels.classify(_unit(queries))
    assert pixels.recognised == 0
    features = FeaturePairDetectOracle(_Softmax(), 10)
    answer = features.classify(_unit(queries)).probabilities
    assert features.recognised == 1
    np.testing.assert_array_equal(answer[0], answer[1])
    other = np.zeros_like(image)
    other[3:25, 4:24] = 200  # another object: not a near-duplicate
    features.classify(_unit(other[None]))
    assert features.recognised == 1


def test_a_wrapped_oracle_reports_its_defences_in_describe_and_keeps_its_identity():
    inner = _Softmax(framework="torch 2.13.0+cpu")
    oracle = wrap(inner, ["pairdetect", "topk:3"])
    assert isinstance(oracle, TopKOracle)
    assert isinstance(oracle.inner, PairDetectOracle)
    described = oracle.describe()
    assert described["framework"] == "torch 2.13.0+cpu + defence pairdetect:10 + defence topk:3"
    assert described["model_digest"] == inner.describe()["model_digest"]
    assert described["model_name"] == "m"
    assert OracleInfo.from_value(described) == oracle.info  # a valid Describe map
    assert wrap(_Softmax(), ["memguard"]).describe()["framework"] == "defence memguard:0.5,0.6"
    assert wrap(inner, []) is inner


def test_oracle_serve_refuses_a_bad_defence_before_loading_anything(tmp_path, capsys):
    from twinaudit.cli.main import main as cli_main

    missing = str(tmp_path / "missing.pt")
    base = ["oracle", "serve", "--listen", "127.0.0.1:0", "--model", missing, "--n-classes", "10"]
    assert cli_main([*base, "--defence", "topk:0"]) == 2
    assert "topk" in capsys.readouterr().err
    assert cli_main([*base, "--kind", "encoder", "--defence", "topk:1"]) == 2
    assert "--defence applies to --kind classifier" in capsys.readouterr().err
