"""Text marking: thesaurus parser, words, sources, the substitution search, the config."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tests.owner.test_owner_text_fixtures import SENTENCES, FakeEmbedder, write_thesaurus
from twinaudit.owner.text.config import TextMarkingConfig
from twinaudit.owner.text.similarity import similarities
from twinaudit.owner.text.sources import open_text_source
from twinaudit.owner.text.substitution import SubstitutionSearch, TextPlan
from twinaudit.owner.text.thesaurus import Thesaurus
from twinaudit.owner.text.words import (
    fix_articles,
    is_plain_synonym,
    is_replaceable,
    split_words,
    word_distance,
)
from twinaudit.protocol.errors import InputError, LimitExceededError, NotFoundError, ParameterError
from twinaudit.protocol.items import MAX_TEXT_BYTES

SEED = bytes(range(32))


@pytest.fixture
def thesaurus(tmp_path):
    return Thesaurus(write_thesaurus(tmp_path))


# --- Thesaurus ---------------------------------------------------------------------------


def test_thesaurus_keeps_plain_and_similar_single_words(thesaurus):
    # generic terms, antonyms, related terms and multi-word terms are left out
    assert thesaurus.synonyms("film") == ("movie", "picture", "flick", "layer")
    assert thesaurus.synonyms("happy") == ("glad", "cheerful")
    assert thesaurus.synonyms("movie") == ("film", "picture", "flick")
    assert thesaurus.synonyms("Film") == thesaurus.synonyms("film")
    assert thesaurus.synonyms("zebra") == ()
    assert "FILM" in thesaurus
    assert len(thesaurus) == 20
    assert len(thesaurus.describe()["sha256"]) == 64


def test_thesaurus_drops_the_word_itself_and_annotated_adjectives(thesaurus):
    assert thesaurus.synonyms("good") == ("fine",)  # "well (adj)" is an annotation


def test_thesaurus_missing_file(tmp_path):
    with pytest.raises(NotFoundError, match="no such thesaurus"):
        Thesaurus(tmp_path / "absent.dat")


def test_thesaurus_malformed_entry_is_named(tmp_path):
    path = write_thesaurus(tmp_path, {"film": ["movie"]})
    path.write_bytes(path.read_bytes().replace(b"(noun)|movie", b"movie-without-pos"))
    with pytest.raises(InputError, match=r"entry 'film'.*malformed sense line"):
        Thesaurus(path).synonyms("film")


def test_thesaurus_offset_pointing_elsewhere(tmp_path):
    path = write_thesaurus(tmp_path, {"film": ["movie"], "movie": ["film"]})
    index = path.with_suffix(".idx")
    index.write_text("UTF-8\n2\nfilm|6\nmovie|100000\n", encoding="utf-8")
    with pytest.raises(InputError, match="past the end"):
        Thesaurus(path).synonyms("movie")
    index.write_text("UTF-8\n2\nfilm|6\nmovie|0\n", encoding="utf-8")  # the "UTF-8" line
    with pytest.raises(InputError, match="expected the header"):
        Thesaurus(path).synonyms("movie")


@pytest.mark.parametrize(
    ("index_text", "match"),
    [
        ("NO-SUCH-ENCODING\n1\nfilm|6\n", "encoding"),
        ("UTF-8\nmany\nfilm|6\n", "number of entries"),
        ("UTF-8\n1\nfilm-6\n", "line 3"),
    ],
)
def test_thesaurus_malformed_index(tmp_path, index_text, match):
    path = write_thesaurus(tmp_path, {"film": ["movie"]})
    path.with_suffix(".idx").write_text(index_text, encoding="utf-8")
    with pytest.raises(InputError, match=match):
        Thesaurus(path)


def test_debian_thesaurus_when_installed():
    from twinaudit.owner.text.thesaurus import DEFAULT_THESAURUS

    if not DEFAULT_THESAURUS.exists():
        pytest.skip("mythes-en-us is not installed")
    real = Thesaurus(DEFAULT_THESAURUS)
    assert len(real) > 100_000
    assert "movie" in real.synonyms("film")
    assert "unhappy" not in real.synonyms("happy")


# --- Words -------------------------------------------------------------------------------


def test_split_words_is_lossless_and_alternates():
    text = "  It's a well-made, 2-hour film!\nReally."
    pieces = split_words(text)
    assert "".join(pieces) == text
    assert pieces[1::2] == ["It's", "a", "well-made", "hour", "film", "Really"]


def test_replaceable_words_skip_function_words_names_and_acronyms():
    pieces = split_words("The film by Marker is AWFUL. Great story, and good.")
    chosen = [pieces[i] for i in range(1, len(pieces), 2) if is_replaceable(pieces, i)]
    assert chosen == ["film", "Great", "story", "good"]


@pytest.mark.parametrize(
    ("first", "second", "distance"),
    [
        ("a good film", "a good film", 0),
        ("a good film", "a fine film", 1),
        ("a good film", "a good movie .", 2),
        ("good film", "a good film", 1),
        ("Good film", "good film", 1),
        ("", "two words", 2),
    ],
)
def test_word_distance(first, second, distance):
    assert word_distance(first, second) == distance
    assert word_distance(second, first) == distance


@pytest.mark.parametrize(
    ("synonym", "word", "plain"),
    [
        ("movie", "film", True),
        ("African-American", "black", False),
        ("ne'er", "never", False),
        ("isn't", "isn't", True),
        ("well-made", "good", True),
    ],
)
def test_plain_synonyms(synonym, word, plain):
    assert is_plain_synonym(synonym, word) is plain


def test_articles_follow_the_swapped_word():
    pieces = split_words("An exhaustive study and a dull one")
    pieces[3] = "complete"
    pieces[11] = "awful"
    fix_articles(pieces, [3, 11])
    assert "".join(pieces) == "A complete study and an awful one"


# --- Sources -----------------------------------------------------------------------------


def test_jsonl_csv_and_plain_sources(tmp_path):
    jsonl = tmp_path / "reviews.jsonl"
    jsonl.write_text(
        json.dumps({"review": "Good film.", "id": 1})
        + "\n\n"
        + json.dumps({"review": "Dull."})
        + "\n"
    )
    source = open_text_source(jsonl, field="review")
    assert source.texts == ["Good film.", "Dull."]
    assert source.names == ["reviews.jsonl:1", "reviews.jsonl:3"]
    assert source.describe()["format"] == "jsonl"
    assert source.describe()["field"] == "review"

    table = tmp_path / "reviews.csv"
    table.write_text('id,text\n1,"Good, long\nfilm."\n2,Dull.\n', encoding="utf-8")
    source = open_text_source(table)
    assert source.texts == ["Good, long\nfilm.", "Dull."]
    assert source.names == ["reviews.csv:2", "reviews.csv:4"]

    plain = tmp_path / "reviews.txt"
    plain.write_text("Good film.\r\nDull.\n", encoding="utf-8")
    source = open_text_source(plain)
    assert source.texts == ["Good film.", "Dull."]
    assert source.describe()["sha256"] == source.sha256 != ""


@pytest.mark.parametrize(
    ("name", "content", "options", "error", "match"),
    [
        ("a.txt", "Good.\n\nDull.\n", {}, InputError, r"a\.txt:2 \(empty\)"),
        ("a.jsonl", '{"text": "  "}\n', {}, InputError, r"a\.jsonl:1 \(empty\)"),
        ("a.jsonl", '{"text": "ok"}\n{"text": \n', {}, InputError, r"a\.jsonl:2: not JSON"),
        ("a.jsonl", '["ok"]\n', {}, InputError, "must be an object"),
        ("a.jsonl", '{"body": "ok"}\n', {}, InputError, "has no field 'text'"),
        ("a.jsonl", '{"text": 3}\n', {}, InputError, "non-string field"),
        ("a.csv", "id,body\n1,ok\n", {}, InputError, "no column 'text'"),
        ("a.csv", "", {}, InputError, "empty CSV"),
        ("a.csv", 'text,id\n"ok,1\n', {}, InputError, "malformed CSV"),
        ("a.csv", "text,id\nok,1,2\n", {}, InputError, "3 fields"),
        ("a.txt", "", {}, InputError, "holds no texts"),
        ("a.txt", "ok\n", {"field": "text"}, ParameterError, "no fields"),
        ("a.txt", "ok\n", {"text_format": "xml"}, ParameterError, "unknown text format"),
    ],
)
def test_bad_text_inputs(tmp_path, name, content, options, error, match):
    path = tmp_path / name
    path.write_text(content, encoding="utf-8")
    with pytest.raises(error, match=match):
        open_text_source(path, **options)


def test_over_long_and_non_utf8_texts(tmp_path):
    path = tmp_path / "a.txt"
    path.write_text("fine\n" + "x" * (MAX_TEXT_BYTES + 1) + "\n\n", encoding="utf-8")
    with pytest.raises(
        InputError, match=r"2 text\(s\).*a\.txt:2 \(65537 UTF-8 bytes.*a\.txt:3 \(empty"
    ):
        open_text_source(path)
    path.write_bytes(b"caf\xe9\n")
    with pytest.raises(InputError, match="not UTF-8"):
        open_text_source(path)
    with pytest.raises(NotFoundError):
        open_text_source(tmp_path / "absent.txt")


def test_file_size_limit(tmp_path, monkeypatch):
    import twinaudit.owner.text.sources as sources

    monkeypatch.setattr(sources, "MAX_TEXT_FILE_BYTES", 10)
    path = tmp_path / "a.txt"
    path.write_text("a long enough line\n", encoding="utf-8")
    with pytest.raises(LimitExceededError):
        open_text_source(path)


# --- Substitution search -----------------------------------------------------------------


DENSE = [
    "a funny clever story about a small journey with a sweet ending and a dull plot",
    "the beautiful film has a strong plot a sharp ending and a charming journey",
    "a slow dull movie with a weak story and a big clever ending",
    "funny and sweet and charming the small film is a beautiful journey with a strong story",
    "a sharp clever plot a big strong ending and a funny beautiful movie",
    "the weak slow story of a small film and its dull sweet ending",
]


def _search(thesaurus, bound=0.8, seed=SEED, embedder=None):
    config = TextMarkingConfig(min_similarity=bound, max_candidates=3)
    return SubstitutionSearch(thesaurus, embedder or FakeEmbedder(), config, seed)


def _mark(search, texts):
    plans = search.plan(texts)
    chosen = [k for k, plan in enumerate(plans) if plan.markable]
    return plans, chosen, search.mark([plans[k] for k in chosen], chosen)


def test_search_respects_the_bound_and_reports_true_figures(thesaurus):
    search = _search(thesaurus, bound=0.8)
    texts = SENTENCES + DENSE  # DENSE: more swappable words than the bound allows
    _, chosen, marked = _mark(search, texts)
    assert len(chosen) >= 15 + len(DENSE)
    originals = [texts[k] for k in chosen]
    embedder = FakeEmbedder()
    for versions, similarity in (
        ([m.version0 for m in marked], [m.similarity0 for m in marked]),
        ([m.version1 for m in marked], [m.similarity1 for m in marked]),
    ):
        measured = similarities(embedder, originals, versions)
        assert (measured >= 0.8 - 1e-12).all()
        np.testing.assert_allclose(measured, similarity, atol=1e-9)
    for item in marked:
        assert item.version0 != item.version1
        assert item.distance == word_distance(item.version0, item.version1) >= 1


def _naive(search, plan: TextPlan) -> int:
    """Baseline: swap words left to right into one version only, best synonym, under the bound."""
    embedder, bound = search.embedder, search.config.min_similarity
    original = embedder.embed([plan.text])[0]
    pieces = list(plan.pieces)
    swaps = 0
    for slot in plan.slots:
        trial = list(pieces)
        trial[slot.piece] = slot.candidates[0]
        if float(embedder.embed(["".join(trial)])[0] @ original) >= bound:
            pieces, swaps = trial, swaps + 1
    return word_distance(plan.text, "".join(pieces))


def test_search_beats_a_one_sided_baseline(thesaurus):
    search = _search(thesaurus, bound=0.8)
    plans, chosen, marked = _mark(search, DENSE)
    assert len(chosen) == len(DENSE)
    ours = np.mean([m.distance for m in marked])
    naive = np.mean([_naive(search, plans[k]) for k in chosen])
    assert ours >= 1.5 * naive, (ours, naive)


def test_search_is_deterministic_given_the_secret(thesaurus):
    first = _mark(_search(thesaurus), SENTENCES)[2]
    again = _mark(_search(thesaurus), SENTENCES)[2]
    other = _mark(_search(thesaurus, seed=b"\x01" * 32), SENTENCES)[2]
    assert first == again
    assert [(m.version0, m.version1) for m in first] != [(m.version0, m.version1) for m in other]


def test_search_batches_one_embedding_per_round(thesaurus):
    embedder = FakeEmbedder()
    search = _search(thesaurus, embedder=embedder)
    plans = search.plan(SENTENCES)
    calls = embedder.calls
    chosen = [k for k, plan in enumerate(plans) if plan.markable]
    search.mark([plans[k] for k in chosen], chosen)
    longest = max(len(plans[k].slots) for k in chosen)
    assert embedder.calls - calls <= 2 * longest + 1  # rounds, not texts x words


def test_unmarkable_texts_are_told_apart(thesaurus):
    search = _search(thesaurus, bound=0.99)
    plans = search.plan(["Unrelentingly stupid.", "A good film about a happy family."])
    assert plans[0].words_with_synonyms == 0 and not plans[0].markable
    assert plans[1].words_with_synonyms > 0 and not plans[1].markable


# --- Config ------------------------------------------------------------------------------


def test_config_round_trip_and_strictness():
    config = TextMarkingConfig(min_similarity=0.9, drop_unmarkable=True, thesaurus_sha256="a" * 64)
    assert TextMarkingConfig.from_value(config.to_value()) == config
    value = config.to_value()
    with pytest.raises(InputError, match="unexpected"):
        TextMarkingConfig.from_value({**value, "extra": 1})
    with pytest.raises(InputError, match="must be float"):
        TextMarkingConfig.from_value({**value, "min_similarity": "0.9"})
    with pytest.raises(InputError, match="kind 'text'"):
        TextMarkingConfig.from_value({**value, "kind": "image"})


@pytest.mark.parametrize(
    ("change", "match"),
    [
        ({"marker": "gpt"}, "unknown text marker"),
        ({"min_similarity": 1.0}, r"\(0, 1\)"),
        ({"min_similarity": float("nan")}, r"\(0, 1\)"),
        ({"max_candidates": 0}, "max_candidates"),
        ({"embedder": "bert"}, "unknown embedder"),
        ({"marker": "chat", "model": "m"}, "endpoint"),
        ({"marker": "seq2seq"}, "needs a model"),
        ({"endpoint": "http://x"}, "chat marker only"),
        ({"thesaurus_sha256": "xyz"}, "hex"),
    ],
)
def test_config_rejects(change, match):
    with pytest.raises(ParameterError, match=match):
        TextMarkingConfig(**change)


def test_marking_an_unmarkable_plan_is_refused(thesaurus):
    search = _search(thesaurus)
    plans = search.plan(["Unrelentingly stupid."])
    with pytest.raises(ParameterError, match="unmarkable"):
        search.mark(plans, [0])
    with pytest.raises(ParameterError, match="indices"):
        search.mark(plans, [])
