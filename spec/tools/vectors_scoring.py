"""Build spec/vectors/scoring.json: perturbation draws and copies, cosines, scores (§10.3–§10.6).

Run ``python -m spec.tools.vectors_scoring`` to rewrite the file; the conformance test
fails if the file differs from what :func:`build` returns. Floats are C99 hexadecimal
strings (``float.hex()``; ``nan`` and ``inf`` for the invalid cases), which are exact.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import numpy as np

from protocol import SPEC_VERSION
from protocol.prg import Prg
from verifier.oracles.base import ClassifyAnswer
from verifier.oracles.embedding import EmbeddingAnswer
from verifier.oracles.image_text import ImageTextAnswer
from verifier.oracles.language import LogprobAnswer
from verifier.scoring import classifier, encoder, image_text, language
from verifier.scoring.augment import apply, bilinear_axis, draw_params, resize_bilinear, to_unit
from verifier.scoring.cosine import cosine
from verifier.scoring.outcome import LOSS, TIE, WIN, compare

from .typed_json import from_typed
from .vectors_core import case, render

VECTOR_FILE = Path(__file__).resolve().parent.parent / "vectors" / "scoring.json"
SEED = bytes(range(32))


def _hex(values: Any) -> Any:
    """Floats (nested lists of them) as hex strings."""
    if isinstance(values, list):
        return [_hex(v) for v in values]
    return float(values).hex()


def _floats(values: Any) -> Any:
    if isinstance(values, list):
        return [_floats(v) for v in values]
    return float.fromhex(values)


def _matrix(rows: list[list[str]]) -> np.ndarray[Any, Any]:
    return np.array(_floats(rows), dtype=np.float64).reshape(len(rows), -1)


def params_json(params: dict[str, Any]) -> dict[str, Any]:
    """A parameter map as JSON: byte strings (a ``dither`` key) as ``{"bin": hex}``."""
    return {k: {"bin": v.hex()} if isinstance(v, bytes) else v for k, v in params.items()}


def params_value(params: dict[str, Any]) -> dict[str, Any]:
    """The parameter map a JSON one (:func:`params_json`) stands for."""
    return {
        k: bytes.fromhex(v["bin"]) if isinstance(v, dict) and set(v) == {"bin"} else v
        for k, v in params.items()
    }


def draws(inp: dict[str, Any]) -> dict[str, Any]:
    """The parameter maps of ``k`` copies drawn from the stream (seed, label)."""
    prg = Prg(bytes.fromhex(inp["seed"]), inp["label"])
    drawn = draw_params(inp["family"], prg, inp["height"], inp["width"], inp["k"])
    return {"params": [params_json(p) for p in drawn]}


def copy_digest(inp: dict[str, Any]) -> dict[str, Any]:
    """SHA-256 of the float32 copy that one parameter map makes of a uint8 image."""
    pixels = np.frombuffer(bytes.fromhex(inp["pixels"]), dtype=np.uint8)
    image = to_unit(pixels.reshape(inp["height"], inp["width"], inp["channels"]).copy())
    copy = apply(image, params_value(inp["params"]))
    return {"sha256": hashlib.sha256(copy.tobytes()).hexdigest()}


def resize(inp: dict[str, Any]) -> dict[str, Any]:
    """The binary64 bilinear resize of §10.3 of an (h, w, C) image of binary64 values."""
    shape = (inp["height"], inp["width"], inp["channels"])
    image = np.array(_floats(inp["values"]), dtype=np.float64).reshape(shape)
    out = resize_bilinear(image, inp["out_height"], inp["out_width"])
    return {"values": _hex(out.reshape(-1).tolist())}


def _other_orders(image: np.ndarray[Any, Any], height: int, width: int) -> list[Any]:
    """The same bilinear weights evaluated in three other orders (rows first; lerp forms)."""
    r0, r1, ly = bilinear_axis(image.shape[0], height)
    c0, c1, lx = bilinear_axis(image.shape[1], width)
    lxc, lyc = lx[None, :, None], ly[:, None, None]
    p00, p01 = image[r0][:, c0], image[r0][:, c1]
    p10, p11 = image[r1][:, c0], image[r1][:, c1]
    rows_first = (p00 * (1.0 - lyc) + p10 * lyc) * (1.0 - lxc) + (
        p01 * (1.0 - lyc) + p11 * lyc
    ) * lxc
    top, bottom = p00 + (p01 - p00) * lxc, p10 + (p11 - p10) * lxc
    lerp = top + (bottom - top) * lyc
    left, right = p00 + (p10 - p00) * lyc, p01 + (p11 - p01) * lyc
    lerp_rows_first = left + (right - left) * lxc
    return [rows_first, lerp, lerp_rows_first]


def _resize_cases() -> list[dict[str, Any]]:
    """Resizes whose binary64 output differs from every other evaluation order tried."""
    cases = []
    for name, (h, w, out_h, out_w) in {
        "upscale 3x5 to 7x9": (3, 5, 7, 9),
        "downscale 6x7 to 4x5": (6, 7, 4, 5),
    }.items():
        for seed in range(1000):
            pixels = np.random.default_rng([seed, h, w]).integers(0, 256, (h, w, 1))
            image = pixels.astype(np.float64) / 255.0
            mine = resize_bilinear(image, out_h, out_w)
            if all(not np.array_equal(mine, other) for other in _other_orders(image, out_h, out_w)):
                break
        else:  # pragma: no cover - a seed is found within the first few
            raise AssertionError(f"no distinguishing image for {name}")
        inp = {
            "height": h,
            "width": w,
            "channels": 1,
            "values": _hex(image.reshape(-1).tolist()),
            "out_height": out_h,
            "out_width": out_w,
        }
        cases.append(case(name, "resize", inp, lambda i=inp: resize(i)))
    bad = {
        "height": 1,
        "width": 1,
        "channels": 1,
        "values": [(0.5).hex()],
        "out_height": 0,
        "out_width": 2,
    }
    cases.append(case("invalid: resize to no rows", "resize", bad, lambda: resize(bad)))
    return cases


def classifier_score(inp: dict[str, Any]) -> dict[str, Any]:
    """The image-classifier score of one version from its K answers (§10.3)."""
    if "probabilities" in inp:
        answer = ClassifyAnswer(probabilities=_matrix(inp["probabilities"]))
    else:
        answer = ClassifyAnswer(labels=np.array(inp["labels"], dtype=np.int64))
    spec = classifier.ScoreSpec.from_value(
        {k: from_typed(v) if isinstance(v, dict) else v for k, v in inp["score"].items()}
    )
    value = classifier.score(spec, answer, n_classes=inp["n_classes"], label=inp["label"])
    return {"score": value.hex()}


def pair_outcome(inp: dict[str, Any]) -> dict[str, Any]:
    """A pair's outcome from its two scores and the tie margin (§7.1)."""
    value = compare(
        float.fromhex(inp["s_pub"]), float.fromhex(inp["s_hid"]), float.fromhex(inp["margin"])
    )
    return {"outcome": {WIN: "win", LOSS: "loss", TIE: "tie"}[value]}


def cosine_case(inp: dict[str, Any]) -> dict[str, Any]:
    """cos(u, v) by the rules of §10.4."""
    u, v = _matrix([inp["u"]]), _matrix([inp["v"]])
    ImageTextAnswer(u, u).validate(1, 1)
    ImageTextAnswer(v, v).validate(1, 1)
    return {"cosine": cosine(u[0], v[0]).hex()}


def encoder_score(inp: dict[str, Any]) -> dict[str, Any]:
    """The image-encoder score of one version from its K embeddings."""
    embeddings = _matrix(inp["embeddings"])
    spec = encoder.EncoderSpec(k=embeddings.shape[0])
    return {"score": encoder.score(spec, EmbeddingAnswer(embeddings)).hex()}


def language_score(inp: dict[str, Any]) -> dict[str, Any]:
    """The language-model score of one text from its token log-probabilities."""
    values = np.array(_floats(inp["logprobs"]), dtype=np.float64).reshape(-1)
    LogprobAnswer((values,)).validate(1)
    return {"score": language.score(values).hex()}


def image_text_score(inp: dict[str, Any]) -> dict[str, Any]:
    """The image-text score of one version from its image and caption embeddings."""
    image, caption = _matrix([inp["image"]]), _matrix([inp["caption"]])
    ImageTextAnswer(image, caption).validate(1, 1)
    return {"score": image_text.score(image[0], caption[0]).hex()}


def _draw_cases() -> list[dict[str, Any]]:
    cases = []
    for family, height, width, k in [
        ("none", 4, 4, 2),
        ("random-resized-crop", 28, 28, 4),
        ("pad-shift-flip", 32, 32, 4),
        ("random-resized-crop-flip", 28, 28, 4),
        ("simclr-crop-flip", 32, 24, 6),
        ("dither", 3, 4, 2),
        ("pad-shift-flip-dither", 6, 5, 2),
    ]:
        inp = {
            "family": family,
            "seed": SEED.hex(),
            "label": "augment/7/1",
            "height": height,
            "width": width,
            "k": k,
        }
        cases.append(
            case(f"{family} {height}x{width}, k={k}", "draws", inp, lambda i=inp: draws(i))
        )
    bad = {"family": "rotate", "seed": SEED.hex(), "label": "x", "height": 4, "width": 4, "k": 1}
    cases.append(case("invalid: unknown family", "draws", bad, lambda: draws(bad)))
    return cases


def _copy_cases() -> list[dict[str, Any]]:
    rng = np.random.default_rng(7)
    pixels = rng.integers(0, 256, (6, 5, 3), dtype=np.uint8)
    base = {"height": 6, "width": 5, "channels": 3, "pixels": pixels.tobytes().hex()}
    cases = []
    for name, params in [
        (
            "crop and flip",
            {
                "family": "random-resized-crop-flip",
                "top": 1,
                "left": 0,
                "height": 4,
                "width": 5,
                "flip": True,
            },
        ),
        (
            "SimCLR crop, no flip",
            {
                "family": "simclr-crop-flip",
                "top": 2,
                "left": 1,
                "height": 3,
                "width": 2,
                "flip": False,
            },
        ),
        (
            "SimCLR crop and flip",
            {
                "family": "simclr-crop-flip",
                "top": 0,
                "left": 3,
                "height": 2,
                "width": 2,
                "flip": True,
            },
        ),
        ("dither", {"family": "dither", "key": {"bin": bytes(range(32, 64)).hex()}}),
        (
            "shift, flip and dither",
            {
                "family": "pad-shift-flip-dither",
                "top": 6,
                "left": 1,
                "flip": True,
                "key": {"bin": bytes(range(64, 96)).hex()},
            },
        ),
    ]:
        inp = {**base, "params": params}
        cases.append(case(name, "copy", inp, lambda i=inp: copy_digest(i)))
    # Dark and bright pixels: a step below 0 or above 255 is clipped.
    edges = np.array([[[0], [255], [1], [254]], [[0], [255], [128], [0]]], dtype=np.uint8)
    inp = {
        "height": 2,
        "width": 4,
        "channels": 1,
        "pixels": edges.tobytes().hex(),
        "params": {"family": "dither", "key": {"bin": bytes(range(1, 33)).hex()}},
    }
    cases.append(case("dither at 0 and 255", "copy", inp, lambda i=inp: copy_digest(i)))
    short = {**base, "params": {"family": "dither", "key": {"bin": bytes(31).hex()}}}
    cases.append(case("invalid: dither key of 31 bytes", "copy", short, lambda: copy_digest(short)))
    bad = {
        **base,
        "params": {
            "family": "simclr-crop-flip",
            "top": 0,
            "left": 0,
            "height": 7,
            "width": 2,
            "flip": False,
        },
    }
    cases.append(case("invalid: crop taller than the image", "copy", bad, lambda: copy_digest(bad)))
    return cases


def _classifier_cases() -> list[dict[str, Any]]:
    rng = np.random.default_rng(13)
    soft = rng.dirichlet(np.ones(4), size=3)
    # A memorised item: the label's probability within 1e-9 of 1, the rest tiny.
    sure = np.array([[1e-12, 1.0 - 1e-9 - 2e-12, 1e-9, 1e-12], [0.0, 1.0 - 3e-10, 2e-10, 1e-10]])
    wrong = np.array([[1.0, 0.0, 0.0, 0.0]])

    def score_map(
        k: int, knowledge: str, statistic: str | None = None, margin: Any = None
    ) -> dict[str, Any]:
        value: dict[str, Any] = {
            "function": "image-classifier",
            "k": k,
            "perturbation": "none",
            "knowledge": knowledge,
        }
        if statistic is not None:
            value["statistic"] = statistic
        if margin is not None:  # {"float": hex} or {"int": decimal}, as typed JSON
            value["margin"] = margin
        return value

    tenth = {"float": (0.1).hex()}

    rows: list[tuple[str, dict[str, Any], dict[str, Any]]] = [
        ("C1 entropy, K=3", score_map(3, "C1"), {"probabilities": _hex(soft.tolist()), "label": 2}),
        (
            "C2 entropy, K=3",
            score_map(3, "C2"),
            {"probabilities": _hex(soft.tolist()), "label": None},
        ),
        (
            "C1 entropy, near-certain",
            score_map(2, "C1"),
            {"probabilities": _hex(sure.tolist()), "label": 1},
        ),
        (
            "C1 entropy, certain of a wrong class",
            score_map(1, "C1"),
            {"probabilities": _hex(wrong.tolist()), "label": 3},
        ),
        ("C3 entropy, K=4 labels", score_map(4, "C3"), {"labels": [2, 2, 0, 2], "label": 2}),
        ("C4 entropy, K=4 labels", score_map(4, "C4"), {"labels": [1, 3, 1, 1], "label": None}),
        (
            "C1 logit, K=3",
            score_map(3, "C1", "logit"),
            {"probabilities": _hex(soft.tolist()), "label": 0},
        ),
        (
            "C2 logit, K=3",
            score_map(3, "C2", "logit"),
            {"probabilities": _hex(soft.tolist()), "label": None},
        ),
        (
            "C1 logit, near-certain",
            score_map(2, "C1", "logit"),
            {"probabilities": _hex(sure.tolist()), "label": 1},
        ),
        (
            "C1 logit, zero probability floored",
            score_map(1, "C1", "logit"),
            {"probabilities": _hex(wrong.tolist()), "label": 3},
        ),
        (
            "invalid: logit for label-only C3",
            score_map(4, "C3", "logit"),
            {"labels": [2, 2, 0, 2], "label": 2},
        ),
        (
            "C1 entropy, K=3, margin 0.1 (the score is unchanged)",
            score_map(3, "C1", margin=tenth),
            {"probabilities": _hex(soft.tolist()), "label": 2},
        ),
        (
            "C2 logit, K=3, margin 0.1",
            score_map(3, "C2", "logit", margin=tenth),
            {"probabilities": _hex(soft.tolist()), "label": None},
        ),
        (
            "invalid: margin for label-only C3",
            score_map(4, "C3", margin=tenth),
            {"labels": [2, 2, 0, 2], "label": 2},
        ),
        (
            "invalid: margin 0.0 spelled out",
            score_map(3, "C1", margin={"float": (0.0).hex()}),
            {"probabilities": _hex(soft.tolist()), "label": 2},
        ),
        (
            "invalid: negative margin",
            score_map(3, "C1", margin={"float": (-0.1).hex()}),
            {"probabilities": _hex(soft.tolist()), "label": 2},
        ),
        (
            "invalid: margin above 10000",
            score_map(3, "C1", margin={"float": (10000.5).hex()}),
            {"probabilities": _hex(soft.tolist()), "label": 2},
        ),
        (
            "invalid: an integer margin",
            score_map(3, "C1", margin={"int": "1"}),
            {"probabilities": _hex(soft.tolist()), "label": 2},
        ),
        (
            "invalid: 'entropy' spelled out",
            score_map(3, "C1", "entropy"),
            {"probabilities": _hex(soft.tolist()), "label": 2},
        ),
        (
            "invalid: probabilities sum to 1.01",
            score_map(1, "C1", "logit"),
            {"probabilities": _hex([[0.5, 0.51, 0.0, 0.0]]), "label": 0},
        ),
        (
            "invalid: label outside the classes",
            score_map(3, "C1", "logit"),
            {"probabilities": _hex(soft.tolist()), "label": 4},
        ),
    ]
    cases = []
    for name, score_value, answer in rows:
        inp = {"score": score_value, "n_classes": 4, **answer}
        cases.append(case(name, "classifier-score", inp, lambda i=inp: classifier_score(i)))
    return cases


def _outcome_cases() -> list[dict[str, Any]]:
    inf = float("inf")
    rows = [
        ("equal scores tie", -0.25, -0.25, 0.0),
        ("the smallest difference wins without a margin", 1.0, 1.0 - 2.0**-53, 0.0),
        ("lower loses", -3.0, -1.0, 0.0),
        ("within the margin ties", -0.05, -0.1, 0.1),
        # 0.3 − 0.2 rounds to 0.09999999999999998, below the margin 0.1: a tie.
        ("the rounded difference decides", 0.3, 0.2, 0.1),
        ("a difference equal to the margin ties", 0.5, 0.25, 0.25),
        ("beyond the margin wins", -0.01, -0.5, 0.1),
        ("beyond the margin loses", -2.0, -0.5, 0.1),
        ("invalid: infinite score", -inf, -0.5, 0.0),
        ("invalid: NaN score", float("nan"), -0.5, 0.0),
        ("invalid: negative margin", -1.0, -0.5, -0.1),
    ]
    cases = []
    for name, s_pub, s_hid, margin in rows:
        inp = {"s_pub": s_pub.hex(), "s_hid": s_hid.hex(), "margin": margin.hex()}
        cases.append(case(name, "outcome", inp, lambda i=inp: pair_outcome(i)))
    return cases


def _cosine_cases() -> list[dict[str, Any]]:
    rng = np.random.default_rng(11)
    rows = [
        ("orthogonal", [1.0, 0.0], [0.0, 2.0]),
        ("opposite", [0.5, -1.5, 2.0], [-1.0, 3.0, -4.0]),
        ("random, D=16", rng.standard_normal(16).tolist(), rng.standard_normal(16).tolist()),
        # A naive left-to-right dot product gives 0 here; the exactly rounded one gives 1.
        ("cancellation needs the exact sum", [1e16, 1.0, -1e16], [1.0, 1.0, 1.0]),
        ("invalid: zero vector", [0.0, 0.0], [1.0, 2.0]),
        ("invalid: NaN", [float("nan"), 1.0], [1.0, 2.0]),
        ("invalid: entry above 2^64", [2.0**65, 1.0], [1.0, 2.0]),
        ("invalid: lengths differ", [1.0, 2.0, 3.0], [1.0, 2.0]),
    ]
    cases = []
    for name, u, v in rows:
        inp = {"u": _hex(u), "v": _hex(v)}
        cases.append(case(name, "cosine", inp, lambda i=inp: cosine_case(i)))
    return cases


def _encoder_cases() -> list[dict[str, Any]]:
    rng = np.random.default_rng(5)
    near = rng.standard_normal(8)
    rows = [
        ("K=2, D=3", [[1.0, 2.0, 3.0], [3.0, 2.0, 1.0]]),
        ("K=8, D=8, nearly aligned", (near + 0.1 * rng.standard_normal((8, 8))).tolist()),
        ("K=6, D=5, random", rng.standard_normal((6, 5)).tolist()),
        ("invalid: one copy", [[1.0, 2.0]]),
        ("invalid: a zero embedding", [[1.0, 2.0], [0.0, 0.0], [2.0, 1.0]]),
        ("invalid: infinity", [[1.0, float("inf")], [1.0, 2.0]]),
    ]
    cases = []
    for name, embeddings in rows:
        inp = {"embeddings": _hex(embeddings)}
        cases.append(case(name, "encoder-score", inp, lambda i=inp: encoder_score(i)))
    return cases


def _language_cases() -> list[dict[str, Any]]:
    rng = np.random.default_rng(3)
    rows = [
        ("five tokens", [-0.5, -1.25, -3.0, -0.125, -2.0]),
        ("random, 40 tokens", (-rng.exponential(2.0, 40)).tolist()),
        ("no token after the first", []),
        ("a certain token", [0.0, -1.0]),
        ("invalid: positive log-probability", [-1.0, 0.25]),
        ("invalid: minus infinity", [-1.0, float("-inf")]),
    ]
    cases = []
    for name, values in rows:
        inp = {"logprobs": _hex(values)}
        cases.append(case(name, "language-score", inp, lambda i=inp: language_score(i)))
    return cases


def _image_text_cases() -> list[dict[str, Any]]:
    rng = np.random.default_rng(9)
    rows = [
        ("D=4", [0.25, -1.0, 2.0, 0.5], [1.0, 0.0, 1.5, -0.5]),
        ("random, D=32", rng.standard_normal(32).tolist(), rng.standard_normal(32).tolist()),
        ("invalid: dimensions differ", [1.0, 2.0], [1.0, 2.0, 3.0]),
        ("invalid: zero caption embedding", [1.0, 2.0], [0.0, 0.0]),
    ]
    cases = []
    for name, image, caption in rows:
        inp = {"image": _hex(image), "caption": _hex(caption)}
        cases.append(case(name, "image-text-score", inp, lambda i=inp: image_text_score(i)))
    return cases


def build() -> dict[str, Any]:
    """Return the scoring vector document."""
    return {
        "spec_version": SPEC_VERSION,
        "topic": "scoring",
        "description": (
            "Score functions (spec §10.3-§10.6). 'draws': the parameter maps of k copies "
            "drawn from the PRG stream (seed, label) for a family and an image size. "
            "'copy': SHA-256 of the float32 copy (H, W, C row-major, little-endian) that "
            "a parameter map makes of the uint8 image 'pixels' (a byte string in a map, a "
            "dither key, is written {\"bin\": hex}). 'resize': the binary64 output, row-major, "
            "of the bilinear resize of §10.3 of an image of binary64 values; each valid case's "
            "output differs from the same weights evaluated rows first or as a + (b - a)·λ. "
            "'classifier-score': the image-classifier "
            "score (spec 10.3) of one version, from the claim's score map, the oracle's "
            "number of classes, the committed label (null: none) and the K answers "
            "('probabilities' rows or 'labels'); a float in the score map (the margin) is "
            'written {"float": hex}, an integer where a float belongs {"int": decimal}. '
            "'outcome': a pair's outcome (win, loss or tie) from its two scores and the "
            "tie margin (spec 7.1). 'cosine': cos(u, v) with "
            "exactly rounded sums. 'encoder-score': the sum of the cosines of the K(K-1)/2 "
            "pairs of distinct rows. 'language-score': the mean of the log-probabilities "
            "(0 when there is none). 'image-text-score': cos(image, caption). Floats are "
            "C99 hex strings; invalid cases name the error code."
        ),
        "cases": [
            *_draw_cases(),
            *_copy_cases(),
            *_resize_cases(),
            *_classifier_cases(),
            *_outcome_cases(),
            *_cosine_cases(),
            *_encoder_cases(),
            *_language_cases(),
            *_image_text_cases(),
        ],
    }


def main() -> None:
    """Rewrite spec/vectors/scoring.json."""
    VECTOR_FILE.write_text(render(build()), encoding="utf-8")


if __name__ == "__main__":
    main()
