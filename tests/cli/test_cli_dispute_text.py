"""A dispute over texts through the console script, each role in its own process.

verifier keygen → verifier serve → owner mark --kind text → owner escrow → owner
publish → (practitioner trains a tiny byte-level language model on what was
published) → oracle serve --kind lm → owner claim (``--score language-model``) →
verifier check → verifier replay. Also ``owner claim``'s choice of score function:
the defaults by item kind and the refusals of options a function does not take.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from tests.owner.test_owner_text_fixtures import ENTRIES, mark_text_args, write_text_inputs
from tests.support import foundation as fm
from tests.support.cli_processes import (
    arbiter_process,
    check_and_replay,
    claim_args,
    cli,
    serve,
    stop,
)
from tests.support.threads import one_thread  # noqa: F401 - the fixture
from twinaudit.cli.main import main
from twinaudit.owner.claim_client import ScoreChoice, choose_score
from twinaudit.owner.text.publication import read_published_texts
from twinaudit.protocol.claim.verdict import check_verdict
from twinaudit.protocol.errors import InputError, ParameterError
from twinaudit.protocol.items import CaptionedImageItem, ImageItem
from twinaudit.protocol.keys import load_public_key

#: More synonyms than the shared fixture's, so that most of the sentences can be marked.
MORE_ENTRIES = {
    **ENTRIES,
    "cinema": ["film|movies|pictures"],
    "class": ["course|lesson|seminar"],
    "true": ["real|genuine|actual"],
    "potential": ["promise|capacity|possibility"],
    "fascinating": ["captivating|absorbing|gripping"],
    "watch": ["view|observe|see"],
    "way": ["manner|fashion|method"],
    "brawn": ["muscle|strength|power"],
    "detail": ["particulars|specifics|minutiae"],
    "gift": ["talent|knack|flair"],
    "failure": ["flop|fiasco|disaster"],
    "loud": ["noisy|blaring|deafening"],
    "silly": ["foolish|absurd|daft"],
    "dreary": ["dismal|gloomy|bleak"],
    "classic": ["masterpiece|standard|gem"],
    "excellent": ["superb|outstanding|great"],
    "tired": ["stale|worn|weary"],
    "courage": ["bravery|valor|nerve"],
    "hope": ["optimism|faith|promise"],
    "striking": ["stunning|impressive|arresting"],
    "hollow": ["empty|shallow|vacant"],
    "superb": ["excellent|splendid|magnificent"],
    "music": ["score|soundtrack|songs"],
}


pytestmark = pytest.mark.usefixtures("one_thread")


# --- which score a claim names ------------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "function", "options", "expected"),
    [
        (
            "image",
            None,
            {},  # without labels: C4, which needs copies that differ
            ScoreChoice("image-classifier", 32, "pad-shift-flip-dither", "unlabelled"),
        ),
        (
            "image",
            None,
            {"has_labels": True},
            ScoreChoice("image-classifier", 1, "dither", "labelled"),
        ),
        (
            "image",
            None,
            {"k": 8, "knowledge": "C3", "has_labels": True},
            ScoreChoice("image-classifier", 8, "dither", "C3"),
        ),
        (
            "image",
            None,
            {"statistic": "logit", "has_labels": True},
            ScoreChoice("image-classifier", 1, "dither", "C1", "logit"),
        ),
        (
            "image",
            None,
            {"statistic": "logit"},
            ScoreChoice("image-classifier", 1, "dither", "C2", "logit"),
        ),
        # A family of copies that differ, without --k: 32 copies, not one lone crop.
        (
            "image",
            None,
            {"perturbation": "pad-shift-flip"},
            ScoreChoice("image-classifier", 32, "pad-shift-flip", "unlabelled"),
        ),
        (
            "image",
            None,
            {"perturbation": "none", "has_labels": True},
            ScoreChoice("image-classifier", 1, "none", "labelled"),
        ),
        (
            "image",
            None,
            {"perturbation": "pad-shift-flip-dither", "k": 4},
            ScoreChoice("image-classifier", 4, "pad-shift-flip-dither", "unlabelled"),
        ),
        (
            "image",
            "image-encoder",
            {},
            ScoreChoice("image-encoder", 64, "random-resized-crop-flip-v2"),
        ),
        (
            "image",
            "image-encoder",
            {"k": 16, "perturbation": "pad-shift-flip"},
            ScoreChoice("image-encoder", 16, "pad-shift-flip"),
        ),
        ("text", None, {}, ScoreChoice("language-model")),
        ("text", "language-model", {}, ScoreChoice("language-model")),
        ("captioned-image", None, {}, ScoreChoice("image-text")),
    ],
)
def test_choose_score(kind, function, options, expected):
    assert choose_score(kind, function, **options) == expected


@pytest.mark.parametrize(
    ("kind", "function", "options", "error", "message"),
    [
        ("text", None, {"k": 4}, InputError, "--k does not apply to --score language-model"),
        ("text", None, {"perturbation": "none"}, InputError, "(it takes no parameters)"),
        ("captioned-image", None, {"knowledge": "C1"}, InputError, "--score image-text"),
        ("image", "image-encoder", {"knowledge": "C2"}, InputError, "takes --k, --perturbation"),
        ("image", "language-model", {}, InputError, "scores text items; this vault holds image"),
        ("text", "image-classifier", {}, InputError, "scores image items"),
        ("captioned-image", "image-encoder", {}, InputError, "scores image items"),
        ("image", "no-such-score", {}, InputError, "unknown score function"),
        ("image", "image-encoder", {"k": 1}, ParameterError, "k must be an integer in 2.."),
        ("image", None, {"perturbation": "blur"}, ParameterError, "unknown perturbation"),
        ("image", None, {"knowledge": "C9"}, ParameterError, "unknown knowledge condition"),
    ],
)
def test_choose_score_refuses(kind, function, options, error, message):
    with pytest.raises(error, match=message.replace("(", r"\(").replace(")", r"\)")):
        choose_score(kind, function, **options)


# --- the disputes -------------------------------------------------------------------------


def _serve_oracle(kind: str, weights: Path, arch: str, tokenizer: str) -> tuple[Any, str]:
    """Serve a torch module with ``oracle serve --kind``; return the process and address."""
    return serve(
        "oracle",
        "serve",
        "--kind",
        kind,
        "--model",
        str(weights),
        "--arch",
        arch,
        "--tokenizer",
        tokenizer,
        "--threads",
        "1",
        "--listen",
        "127.0.0.1:0",
        ready="listening on",
    )


def _score(out: Path, pub: Path) -> object:
    """Return the score map of the signed verdict in ``out``."""
    verdict = check_verdict((out / "verdict.json").read_bytes(), load_public_key(pub))
    return verdict.claim.score.to_value()


@pytest.mark.slow
def test_text_dispute_through_the_cli(tmp_path, capsys):
    reviews, thesaurus = write_text_inputs(tmp_path, MORE_ENTRIES)
    with arbiter_process(tmp_path) as (address, pub):
        vault = tmp_path / "vault"
        result = cli(
            *mark_text_args(
                reviews,
                thesaurus,
                vault,
                "--drop-unmarkable",
                min_similarity="0.8",
                seed="text dispute",
            )
        )
        assert "text pairs" in result.stdout
        escrow = ("owner", "escrow", str(vault), "--arbiter", address, "--arbiter-key", str(pub))
        assert "as record 0" in cli(*escrow).stdout
        cli("owner", "publish", str(vault), "--out", str(tmp_path / "pub"), "--quiet")
        published = [text for _, text in read_published_texts(tmp_path / "pub" / "texts.jsonl")]
        assert len(published) >= 20

        # The practitioner trains a language model on the published texts and serves it.
        torch.save(fm.train_lm(published, steps=150).state_dict(), tmp_path / "lm.pt")
        oracle, endpoint = _serve_oracle(
            "lm", tmp_path / "lm.pt", "tests.support.foundation:ByteLm", "bytes"
        )
        try:
            claim = claim_args(vault, address, pub, endpoint)
            # Options the language-model score does not take are refused before any claim.
            for refused, message in (
                (("--k", "4"), "--k does not apply to --score language-model"),
                (("--score", "image-classifier"), "scores image items; this vault holds text"),
            ):
                assert main([*claim, *refused, "--out", str(tmp_path / "no")]) == 2
                assert message in capsys.readouterr().err
            assert not (tmp_path / "no").exists()

            out = tmp_path / "verdict"
            result = cli(
                *claim, "--score", "language-model", "--model-name", "lm", "--out", str(out)
            )
            assert result.stdout.startswith("DETECTED"), result.stdout + result.stderr
            assert "successes" in result.stderr  # progress was shown
        finally:
            stop(oracle)
        check_and_replay(out, pub, "DETECTED")
        assert _score(out, pub) == {"function": "language-model"}


@pytest.mark.slow
def test_captioned_image_dispute_through_the_cli(tmp_path):
    rng = np.random.default_rng(0)
    n = 24
    grey = 128 + rng.integers(-20, 21, size=(n, 1, 1, 1))
    np.save(
        tmp_path / "photos.npy", np.broadcast_to(grey, (n, fm.SIDE, fm.SIDE, 1)).astype(np.uint8)
    )
    captions = [" ".join(fm.WORDS[i] for i in rng.integers(0, len(fm.WORDS), 4)) for _ in range(n)]
    (tmp_path / "captions.json").write_text(json.dumps(captions), encoding="utf-8")
    with arbiter_process(tmp_path) as (address, pub):
        vault = tmp_path / "vault"
        result = cli(
            "owner",
            "mark",
            str(tmp_path / "photos.npy"),
            "--kind",
            "captioned-image",
            "--captions",
            str(tmp_path / "captions.json"),
            "--marker",
            "bernoulli",
            "--epsilon",
            "48",
            "--out",
            str(vault),
            "--seed",
            "captioned dispute",
            "--quiet",
        )
        assert f"marked {n} captioned-image pairs" in result.stdout
        cli("owner", "escrow", str(vault), "--arbiter", address, "--arbiter-key", str(pub))
        cli("owner", "publish", str(vault), "--out", str(tmp_path / "pub"), "--quiet")
        images = np.load(tmp_path / "pub" / "photos.npy")
        with (tmp_path / "pub" / "captions.csv").open(newline="", encoding="utf-8") as stream:
            published_captions = [row[1] for row in list(csv.reader(stream))[1:]]
        assert published_captions == captions

        # The practitioner trains a CLIP-style model on the published pairs and serves it.
        items = [
            CaptionedImageItem(ImageItem(image), caption)
            for image, caption in zip(images, captions, strict=True)
        ]
        torch.save(fm.train_dual(items).state_dict(), tmp_path / "dual.pt")
        oracle, endpoint = _serve_oracle(
            "clip", tmp_path / "dual.pt", "tests.support.foundation:DualEncoder", "bytes-no-bos"
        )
        try:
            out = tmp_path / "verdict"
            # No --score: a captioned-image vault is audited with the image-text score.
            result = cli(*claim_args(vault, address, pub, endpoint), "--out", str(out))
            assert result.stdout.startswith("DETECTED"), result.stdout + result.stderr
        finally:
            stop(oracle)
        check_and_replay(out, pub, "DETECTED")
        assert _score(out, pub) == {"function": "image-text"}
