"""Run every score-function vector (spec/vectors/scoring.json) against the implementation.

Each case is interpreted from its JSON alone, as a second implementation would; the
last tests check the committed file is what the builder produces, and that the exact
sums matter (a naive dot product gets the cancellation case wrong).
"""

import hashlib
import json
import math
from pathlib import Path

import numpy as np
import pytest

from spec.tools import vectors_scoring
from spec.tools.vectors_core import render
from tests.support.vectors import raises_its_error
from twinaudit.protocol.claim.outcome import LOSS, TIE, WIN, compare
from twinaudit.protocol.claim.scores import classifier
from twinaudit.protocol.errors import ParameterError
from twinaudit.protocol.oracles.base import ClassifyAnswer
from twinaudit.protocol.oracles.embedding import EmbeddingAnswer, check_embeddings
from twinaudit.protocol.oracles.language import LogprobAnswer
from twinaudit.protocol.prg import Prg
from twinaudit.verifier.scoring import encoder, image_text, language
from twinaudit.verifier.scoring.augment import (
    apply,
    crop_size,
    draw_params,
    resize_bilinear,
    to_unit,
)
from twinaudit.verifier.scoring.cosine import cosine
from twinaudit.verifier.scoring.fit import fit_image

VECTORS = Path(__file__).resolve().parents[2] / "spec" / "vectors"
DOC = json.loads((VECTORS / "scoring.json").read_text(encoding="utf-8"))


def _vector(values):
    return np.array([float.fromhex(x) for x in values], dtype=np.float64)


def _typed_bytes(params):
    """Read a JSON parameter map: ``{"bin": hex}`` is a byte string."""
    return {
        k: bytes.fromhex(v["bin"]) if isinstance(v, dict) and set(v) == {"bin"} else v
        for k, v in params.items()
    }


def _typed(value):
    """Read a typed-JSON scalar of a score map: ``{"float": hex}`` or ``{"int": decimal}``."""
    ((tag, raw),) = value.items()
    return float.fromhex(raw) if tag == "float" else int(raw)


def _json_bytes(params):
    return {k: {"bin": v.hex()} if isinstance(v, bytes) else v for k, v in params.items()}


def _run(case):
    kind, inp = case["kind"], case["input"]
    if kind == "draws":
        prg = Prg(bytes.fromhex(inp["seed"]), inp["label"])
        drawn = draw_params(inp["family"], prg, inp["height"], inp["width"], inp["k"])
        return {"params": [_json_bytes(p) for p in drawn]}
    if kind == "copy":
        shape = (inp["height"], inp["width"], inp["channels"])
        pixels = np.frombuffer(bytes.fromhex(inp["pixels"]), dtype=np.uint8).reshape(shape)
        copy = apply(to_unit(pixels.copy()), _typed_bytes(inp["params"]))
        return {"sha256": hashlib.sha256(copy.astype("<f4").tobytes()).hexdigest()}
    if kind == "crop-size":
        return _crop_size(inp)
    if kind == "resize":
        shape = (inp["height"], inp["width"], inp["channels"])
        image = _vector(inp["values"]).reshape(shape)
        out = resize_bilinear(image, inp["out_height"], inp["out_width"])
        return {"values": [float(x).hex() for x in out.reshape(-1)]}
    if kind == "fit":
        shape = (inp["height"], inp["width"], inp["channels"])
        pixels = np.frombuffer(bytes.fromhex(inp["pixels"]), dtype=np.uint8).reshape(shape)
        return {"pixels": fit_image(pixels, tuple(inp["input_shape"])).tobytes().hex()}
    if kind == "classifier-score":
        if "probabilities" in inp:
            answer = ClassifyAnswer(
                probabilities=np.stack([_vector(r) for r in inp["probabilities"]])
            )
        else:
            answer = ClassifyAnswer(labels=np.array(inp["labels"], dtype=np.int64))
        score_map = {k: _typed(v) if isinstance(v, dict) else v for k, v in inp["score"].items()}
        spec = classifier.ScoreSpec.from_value(score_map)
        value = classifier.score(spec, answer, n_classes=inp["n_classes"], label=inp["label"])
        return {"score": value.hex()}
    if kind == "legacy-score":
        return vectors_scoring.legacy_check(inp)
    if kind == "outcome":
        s_pub, s_hid = float.fromhex(inp["s_pub"]), float.fromhex(inp["s_hid"])
        value = compare(s_pub, s_hid, float.fromhex(inp["margin"]))
        return {"outcome": {WIN: "win", LOSS: "loss", TIE: "tie"}[value]}
    if kind == "cosine":
        u, v = _vector(inp["u"]), _vector(inp["v"])
        check_embeddings(u.reshape(1, -1), 1)
        check_embeddings(v.reshape(1, -1), 1)
        return {"cosine": cosine(u, v).hex()}
    if kind == "encoder-score":
        rows = np.stack([_vector(row) for row in inp["embeddings"]])
        spec = encoder.EncoderSpec(k=rows.shape[0])
        return {"score": encoder.score(spec, EmbeddingAnswer(rows)).hex()}
    if kind == "language-score":
        values = _vector(inp["logprobs"]).reshape(-1)
        LogprobAnswer((values,)).validate(1)
        return {"score": language.score(values).hex()}
    if kind == "image-text-score":
        image, caption = _vector(inp["image"]), _vector(inp["caption"])
        check_embeddings(image.reshape(1, -1), 1)
        check_embeddings(caption.reshape(1, -1), 1)
        return {"score": image_text.score(image, caption).hex()}
    raise AssertionError(kind)


def _crop_size(inp):
    """One attempt of a -v2 crop (§10.3), through the implementation's crop_size."""
    height, width = inp["height"], inp["width"]
    for side in (height, width):
        if not (isinstance(side, int) and 1 <= side <= 4096):
            raise ParameterError(f"image side {side!r}")
    uniforms = []
    for name in ("scale_bits", "aspect_bits"):
        if not (isinstance(inp[name], int) and 0 <= inp[name] < 1 << 53):
            raise ParameterError(f"{name} {inp[name]!r}")
        uniforms.append(inp[name] * 2.0**-53)
    w, h = crop_size(inp["family"], height * width, *uniforms)
    return {"width": w, "height": h, "accepted": 1 <= w <= width and 1 <= h <= height}


@pytest.mark.parametrize("case", [pytest.param(c, id=c["name"]) for c in DOC["cases"]])
def test_case(case):
    if not case["valid"]:
        raises_its_error(case, lambda: _run(case))
        return
    assert _run(case) == case["expected"]


def test_every_kind_has_valid_and_invalid_cases():
    kinds = {(c["kind"], c["valid"]) for c in DOC["cases"]}
    kinds_named = (
        "draws",
        "copy",
        "crop-size",
        "resize",
        "fit",
        "classifier-score",
        "legacy-score",
        "outcome",
        "cosine",
        "encoder-score",
        "language-score",
        "image-text-score",
    )
    for kind in kinds_named:
        assert (kind, True) in kinds and (kind, False) in kinds, kind


def test_the_exact_sum_decides_the_cancellation_case():
    (case,) = [c for c in DOC["cases"] if "cancellation" in c["name"]]
    u, v = _vector(case["input"]["u"]), _vector(case["input"]["v"])
    naive = 0.0
    for a, b in zip(u.tolist(), v.tolist(), strict=True):
        naive += a * b
    assert naive == 0.0
    assert float.fromhex(case["expected"]["cosine"]) > 0.0
    assert math.isclose(float.fromhex(case["expected"]["cosine"]), 1 / math.sqrt(6e32))


# Spec §10.3's resize and other plausible evaluations of the same interpolation, written
# here from the spec's words alone: each maps (p00, p01, p10, p11, λy, λx) to the output.
def _spec_bilinear(p00, p01, p10, p11, ly, lx):
    return (p00 * (1.0 - lx) + p01 * lx) * (1.0 - ly) + (p10 * (1.0 - lx) + p11 * lx) * ly


def _rows_first(p00, p01, p10, p11, ly, lx):
    return (p00 * (1.0 - ly) + p10 * ly) * (1.0 - lx) + (p01 * (1.0 - ly) + p11 * ly) * lx


def _lerp(p00, p01, p10, p11, ly, lx):
    top, bottom = p00 + (p01 - p00) * lx, p10 + (p11 - p10) * lx
    return top + (bottom - top) * ly


def _four_weights(p00, p01, p10, p11, ly, lx):
    return (
        p00 * ((1.0 - ly) * (1.0 - lx))
        + p01 * ((1.0 - ly) * lx)
        + p10 * (ly * (1.0 - lx))
        + p11 * (ly * lx)
    )


def _spec_coordinate(d, n, m):
    return (d + 0.5) * (n / m) - 0.5


def _scaled_first_coordinate(d, n, m):
    return (d + 0.5) * n / m - 0.5


BILINEAR_ORDERS = {
    "spec": (_spec_bilinear, _spec_coordinate),
    "rows first": (_rows_first, _spec_coordinate),
    "lerp": (_lerp, _spec_coordinate),
    "four weights": (_four_weights, _spec_coordinate),
    "coordinate scaled first": (_spec_bilinear, _scaled_first_coordinate),
}


def _resize_by(image, out_h, out_w, order):
    """Resize a nested list image[y][x][c] of floats with one of BILINEAR_ORDERS."""
    combine, coordinate = BILINEAR_ORDERS[order]

    def axis(n, m):
        weights = []
        for d in range(m):
            x = max(coordinate(d, n, m), 0.0)
            low = min(math.floor(x), n - 1)
            weights.append((low, min(low + 1, n - 1), x - low))
        return weights

    rows, cols = axis(len(image), out_h), axis(len(image[0]), out_w)
    return [
        [
            [
                combine(
                    image[i0][j0][c], image[i0][j1][c], image[i1][j0][c], image[i1][j1][c], ly, lx
                )
                for c in range(len(image[0][0]))
            ]
            for j0, j1, lx in cols
        ]
        for i0, i1, ly in rows
    ]


def _crop_copy_digest(inp, order):
    """SHA-256 of a crop family's float32 copy, resized with ``order``."""
    h, w, c = inp["height"], inp["width"], inp["channels"]
    pixels = bytes.fromhex(inp["pixels"])
    image = [
        [[pixels[(y * w + x) * c + k] / 255.0 for k in range(c)] for x in range(w)]
        for y in range(h)
    ]
    params = inp["params"]
    top, left = params["top"], params["left"]
    crop = [row[left : left + params["width"]] for row in image[top : top + params["height"]]]
    out = _resize_by(crop, h, w, order)
    if params.get("flip"):
        out = [row[::-1] for row in out]
    flat = [min(max(v, 0.0), 1.0) for row in out for pixel in row for v in pixel]
    return hashlib.sha256(np.array(flat, dtype="<f4").tobytes()).hexdigest()


ORDER_CASES = [
    c for c in DOC["cases"] if c["kind"] == "copy" and "pins the resize order" in c["name"]
]


@pytest.mark.parametrize("case", [pytest.param(c, id=c["name"]) for c in ORDER_CASES])
def test_only_the_spec_order_of_the_bilinear_arithmetic_passes_the_crop_vectors(case):
    """Four plausible ways to evaluate the same interpolation each give another copy hash.

    (On the small images of the other crop vectors they all give the spec's hashes.)
    """
    expected = case["expected"]["sha256"]
    assert _crop_copy_digest(case["input"], "spec") == expected
    for order in BILINEAR_ORDERS.keys() - {"spec"}:
        assert _crop_copy_digest(case["input"], order) != expected, order


def test_other_orders_pass_the_small_crop_vectors_they_cannot_tell_apart():
    small = [
        c
        for c in DOC["cases"]
        if c["kind"] == "copy"
        and c["valid"]
        and "height" in c["input"]["params"]
        and c not in ORDER_CASES
    ]
    assert small and ORDER_CASES
    for case in small:
        for order in BILINEAR_ORDERS:
            assert _crop_copy_digest(case["input"], order) == case["expected"]["sha256"]


@pytest.mark.parametrize(
    "case",
    [pytest.param(c, id=c["name"]) for c in DOC["cases"] if c["kind"] == "resize" and c["valid"]],
)
def test_only_the_spec_order_passes_the_resize_vectors(case):
    inp = case["input"]
    values = [float.fromhex(x) for x in inp["values"]]
    w, c = inp["width"], inp["channels"]
    image = [
        [[values[(y * w + x) * c + k] for k in range(c)] for x in range(w)]
        for y in range(inp["height"])
    ]
    for order in BILINEAR_ORDERS:
        out = _resize_by(image, inp["out_height"], inp["out_width"], order)
        flat = [float(v).hex() for row in out for pixel in row for v in pixel]
        assert (flat == case["expected"]["values"]) == (order == "spec"), order


#: §10.3's -v2 attempt written out from the spec alone, and evaluations it does not allow.
_SCALES = {"random-resized-crop-v2": (0.8, 1.0), "random-resized-crop-flip-v2": (0.8, 1.0)}
_SCALES["simclr-crop-flip-v2"] = (0.08, 1.0)


def _half_even(x):
    return round(x)


def _half_up(x):
    return math.floor(x + 0.5)


def _attempt(inp, how):
    low, high = _SCALES[inp["family"]]
    u, v = inp["scale_bits"] * 2.0**-53, inp["aspect_bits"] * 2.0**-53
    area = float(inp["height"] * inp["width"])
    s = low + (high - low) * u
    t = -1.0 + 2.0 * v
    a, b = 7.0 + t, 7.0 - t
    if how == "spec":
        return _half_even(math.sqrt(((area * s) * a) / b)), _half_even(
            math.sqrt(((area * s) * b) / a)
        )
    if how == "ratio first":
        r = a / b
        return _half_even(math.sqrt((area * s) * r)), _half_even(math.sqrt((area * s) / r))
    if how == "roots apart":
        return _half_even(math.sqrt((area * s) * a) / math.sqrt(b)), _half_even(
            math.sqrt((area * s) * b) / math.sqrt(a)
        )
    if how == "s times aspect":
        return _half_even(math.sqrt(area * ((s * a) / b))), _half_even(
            math.sqrt(area * ((s * b) / a))
        )
    if how == "x = t/7":
        x = t / 7.0
        return _half_even(math.sqrt(((area * s) * (1.0 + x)) / (1.0 - x))), _half_even(
            math.sqrt(((area * s) * (1.0 - x)) / (1.0 + x))
        )
    if how == "lerp s":
        target = area * (low * (1.0 - u) + high * u)
        return _half_even(math.sqrt((target * a) / b)), _half_even(math.sqrt((target * b) / a))
    assert how == "half up"
    return _half_up(math.sqrt(((area * s) * a) / b)), _half_up(math.sqrt(((area * s) * b) / a))


CROP_SIZE_CASES = [c for c in DOC["cases"] if c["kind"] == "crop-size" and c["valid"]]


@pytest.mark.parametrize(
    "how", ["ratio first", "roots apart", "s times aspect", "x = t/7", "lerp s", "half up"]
)
def test_only_the_spec_arithmetic_of_a_v2_crop_passes_the_crop_size_vectors(how):
    """Each other order of the + − × ÷ sqrt of §10.3 (or half up) fails a case at least."""
    assert CROP_SIZE_CASES
    for case in CROP_SIZE_CASES:
        expected = case["expected"]
        assert _attempt(case["input"], "spec") == (expected["width"], expected["height"])
    failed = [
        c["name"]
        for c in CROP_SIZE_CASES
        if _attempt(c["input"], how) != (c["expected"]["width"], c["expected"]["height"])
    ]
    assert failed, how


def test_v2_crop_draws_need_no_libm(monkeypatch):
    """The -v2 draws vectors replay with exp and log unavailable (they are libm-free)."""
    import twinaudit.verifier.scoring.augment as module

    def refuse(*_):
        raise AssertionError("libm")

    monkeypatch.setattr(module.math, "exp", refuse)
    monkeypatch.setattr(module.math, "log", refuse)
    v2 = [c for c in DOC["cases"] if c["kind"] == "draws" and c["input"]["family"].endswith("-v2")]
    assert len(v2) >= 3
    for case in v2:
        assert _run(case) == case["expected"]


@pytest.mark.slow
def test_file_matches_builder():
    assert (VECTORS / "scoring.json").read_text(encoding="utf-8") == render(vectors_scoring.build())
