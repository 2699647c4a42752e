"""Text vaults: marking runs, integrity, resume, escrow, publication, inspection."""

from __future__ import annotations

import json

import pytest

from demo.seeded import SeededEntropy
from tests.owner.test_owner_text_fixtures import SENTENCES, FakeEmbedder, write_thesaurus
from tests.support.keys import KEY
from twinaudit.owner.text.config import TextMarkingConfig
from twinaudit.owner.text.marking import mark_texts
from twinaudit.owner.text.publication import PUBLISHED_TEXTS, publish_texts, read_published_texts
from twinaudit.owner.text.report import inspect_text_vault
from twinaudit.owner.text.sources import open_text_source
from twinaudit.owner.text.thesaurus import Thesaurus
from twinaudit.owner.vault import (
    Vault,
    VaultWriter,
)
from twinaudit.protocol.commitment import PairOpening
from twinaudit.protocol.errors import InputError, ParameterError, StateError, VaultIntegrityError
from twinaudit.protocol.escrow_messages import EscrowRequest, open_receipt
from twinaudit.protocol.items import TextItem, decode_pair
from twinaudit.verifier.escrow.sqlite_store import SqliteEscrowStore

SECRET = bytes(range(32))
CONFIG = TextMarkingConfig(min_similarity=0.8, batch_size=4, max_candidates=3)


@pytest.fixture
def thesaurus(tmp_path):
    folder = tmp_path / "thesaurus"
    folder.mkdir()
    return Thesaurus(write_thesaurus(folder))


@pytest.fixture
def reviews(tmp_path):
    path = tmp_path / "reviews.jsonl"
    path.write_text("".join(json.dumps({"text": s}) + "\n" for s in SENTENCES), encoding="utf-8")
    return path


def _mark(source_path, vault_path, thesaurus, config=CONFIG, **options):
    return mark_texts(
        open_text_source(source_path),
        vault_path,
        config,
        secret=SECRET,
        thesaurus=thesaurus,
        embedder=options.pop("embedder", FakeEmbedder()),
        show_progress=False,
        **options,
    )


def _files(path):
    return {
        str(p.relative_to(path)): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()
    }


def test_unmarkable_texts_are_refused_by_name_and_nothing_is_written(tmp_path, reviews, thesaurus):
    with pytest.raises(InputError, match=r"reviews\.jsonl:8 \(no replaceable word") as caught:
        _mark(reviews, tmp_path / "vault", thesaurus)
    assert "--drop-unmarkable" in str(caught.value)
    assert not (tmp_path / "vault").exists()


def test_text_vault_round_trip(tmp_path, reviews, thesaurus):
    config = TextMarkingConfig(
        min_similarity=0.8, batch_size=4, max_candidates=3, drop_unmarkable=True
    )
    result = _mark(reviews, tmp_path / "vault", thesaurus, config)
    vault = Vault.open(tmp_path / "vault")
    dropped = result.dropped
    assert "reviews.jsonl:8" in dropped  # "Unrelentingly stupid."
    assert vault.source["dropped"] == dropped
    assert vault.item_kind == "text" and vault.n_pairs == len(SENTENCES) - len(dropped)
    assert vault.config["thesaurus_sha256"] == thesaurus.describe()["sha256"]
    names = vault.names()
    assert names == [
        f"reviews.jsonl:{k + 1}"
        for k in range(len(SENTENCES))
        if f"reviews.jsonl:{k + 1}" not in dropped
    ]
    kept = [s for k, s in enumerate(SENTENCES) if f"reviews.jsonl:{k + 1}" not in dropped]
    originals = [text for _, chunk, _ in vault.texts() for text in chunk.originals]
    assert originals == kept
    assert sorted(p.name for p in (tmp_path / "vault" / "chunks").iterdir())[0] == "000000.msgpack"
    for index in range(vault.n_pairs):
        first, second = vault.pair(index)
        assert isinstance(first, TextItem) and first.text != second.text
        opening = vault.pair_opening(index)
        assert isinstance(opening, PairOpening)
        decode_pair(opening.version0, opening.version1, "text")
    # marking the same input again returns the finished vault; another config is refused
    again = _mark(reviews, tmp_path / "vault", thesaurus, config)
    assert again.marked_now == 0 and again.vault.root == vault.root
    with pytest.raises(ParameterError, match="another config"):
        _mark(reviews, tmp_path / "vault", thesaurus, TextMarkingConfig(drop_unmarkable=True))


def test_text_vault_is_deterministic_given_the_secret(tmp_path, reviews, thesaurus):
    config = TextMarkingConfig(min_similarity=0.8, drop_unmarkable=True)
    _mark(reviews, tmp_path / "a", thesaurus, config)
    _mark(reviews, tmp_path / "b", thesaurus, config)
    assert _files(tmp_path / "a") == _files(tmp_path / "b")


def test_modified_text_chunk_is_named(tmp_path, reviews, thesaurus):
    config = TextMarkingConfig(min_similarity=0.8, batch_size=4, drop_unmarkable=True)
    _mark(reviews, tmp_path / "vault", thesaurus, config)
    chunk = tmp_path / "vault" / "chunks" / "000001.msgpack"
    data = bytearray(chunk.read_bytes())
    data[-3] ^= 0x20
    chunk.write_bytes(bytes(data))
    with pytest.raises(VaultIntegrityError, match=r"chunks/000001\.msgpack: was modified"):
        Vault.open(tmp_path / "vault")


def test_interrupted_text_run_resumes_to_the_same_vault(tmp_path, reviews, thesaurus, monkeypatch):
    config = TextMarkingConfig(min_similarity=0.8, batch_size=4, drop_unmarkable=True)
    _mark(reviews, tmp_path / "whole", thesaurus, config)
    real = VaultWriter.append_texts
    calls = []

    def failing(self, *args):
        calls.append(1)
        if len(calls) == 3:
            raise OSError(28, "No space left on device")
        real(self, *args)

    monkeypatch.setattr(VaultWriter, "append_texts", failing)
    with pytest.raises(OSError, match="No space"):
        _mark(reviews, tmp_path / "cut", thesaurus, config)
    monkeypatch.setattr(VaultWriter, "append_texts", real)
    embedder = FakeEmbedder()
    result = _mark(reviews, tmp_path / "cut", thesaurus, config, embedder=embedder)
    assert result.resumed_from == 8
    assert _files(tmp_path / "cut") == _files(tmp_path / "whole")


def test_text_writer_refuses_identical_versions_and_pixels(tmp_path):
    with VaultWriter.create_or_resume(
        tmp_path / "v", item_kind="text", source={}, config={}, n_items=2, secret=SECRET
    ) as writer:
        with pytest.raises(InputError, match="'b': its two versions are identical"):
            writer.append_texts(["x", "y"], ["x0", "same"], ["x1", "same"], ["a", "b"])
        with pytest.raises(InputError, match="text must have 1"):
            writer.append_texts([""], ["a"], ["b"], ["a"])
        with pytest.raises(StateError, match="append_texts"):
            writer.append(None, None, [], [])  # type: ignore[arg-type]
        assert writer.completed == 0
        writer.append_texts(["x", "y"], ["x0", "y0"], ["x1", "y1"], ["a", "b"])
        vault = writer.finish()
    assert [vault.pair(1)[0], vault.pair(1)[1]] == [TextItem("y0"), TextItem("y1")]


class _Arbiter:
    def __init__(self, path):
        self.store = SqliteEscrowStore(path, KEY, entropy=SeededEntropy(b"text"))

    def escrow(self, vault):
        envelope = self.store.commit(EscrowRequest(vault.root, vault.n_pairs, "text", "owner"))
        position = open_receipt(envelope, self.store.public_key)
        proof = self.store.inclusion_proof(position.entry.index, position.log_size)
        return vault.store_receipt(envelope, KEY.public_key(), proof, expected_owner="owner")


def test_escrow_publish_and_inspect_a_text_vault(tmp_path, reviews, thesaurus):
    config = TextMarkingConfig(min_similarity=0.8, batch_size=4, drop_unmarkable=True)
    vault = _mark(reviews, tmp_path / "vault", thesaurus, config).vault
    with pytest.raises(StateError, match="no escrow receipt"):
        publish_texts(vault, tmp_path / "early", show_progress=False)
    assert not (tmp_path / "early").exists()
    before = inspect_text_vault(vault, embedder=FakeEmbedder())
    assert before.labels == ("version 0", "version 1")

    arbiter = _Arbiter(tmp_path / "escrow.db")
    try:
        receipt = arbiter.escrow(vault)
    finally:
        arbiter.store.close()
    assert receipt.entry.item_kind == "text"
    vault = Vault.open(tmp_path / "vault")
    files = publish_texts(vault, tmp_path / "published", show_progress=False)
    assert files == [tmp_path / "published" / PUBLISHED_TEXTS]
    published = read_published_texts(files[0])
    bits = vault.publication_bits()
    assert [name for name, _ in published] == vault.names()
    for index, (_, text) in enumerate(published):
        assert TextItem(text) == vault.pair(index)[int(bits[index])]
    hidden = {vault.pair(i)[1 - int(bits[i])].text for i in range(vault.n_pairs)}
    content = files[0].read_text(encoding="utf-8")
    assert not any(text in content for text in hidden)  # no hidden version leaks
    assert list((tmp_path / "published").iterdir()) == files
    with pytest.raises(InputError, match="already exists"):
        publish_texts(vault, tmp_path / "published", show_progress=False)

    report = inspect_text_vault(vault, embedder=FakeEmbedder())
    assert report.labels == ("published", "hidden")
    assert report.measured == vault.n_pairs and report.holds
    assert report.similarity_first is not None and report.similarity_first.minimum >= 0.8 - 1e-9
    assert report.distance is not None and report.distance.minimum >= 1
    assert len(report.samples) == 10
    text = report.to_text()
    assert "word edit distance between versions: min/q1/median/q3/max" in text
    assert "reviews.jsonl:8" in text  # the dropped text is reported
    value = report.to_value()
    assert value["similarity"]["published"]["count"] == vault.n_pairs  # type: ignore[index]
    assert inspect_text_vault(vault, pairs=0, embedder=FakeEmbedder()).measured == 0
    assert inspect_text_vault(vault, pairs=5, embedder=FakeEmbedder()).measured == 5


def test_texts_longer_than_the_embedder_reads_are_refused(tmp_path, thesaurus):
    path = tmp_path / "long.txt"
    path.write_text("A good film.\n" + "good film " * 150 + "\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"long\.txt:2 \(302 tokens\)"):
        _mark(path, tmp_path / "vault", thesaurus)
    assert not (tmp_path / "vault").exists()


class _WholeTextEmbedder(FakeEmbedder):
    """Embeds each text as one hashed token: any change makes it orthogonal to the original."""

    def embed(self, texts):
        return super().embed(["".join(ch for ch in text if ch.isalnum()) for text in texts])


def test_inspect_flags_versions_below_the_bound(tmp_path, reviews, thesaurus):
    config = TextMarkingConfig(min_similarity=0.8, drop_unmarkable=True)
    vault = _mark(reviews, tmp_path / "vault", thesaurus, config).vault
    report = inspect_text_vault(vault, embedder=_WholeTextEmbedder())
    assert not report.holds
    assert 0 < report.below_bound <= 2 * vault.n_pairs
    assert "FAILS for" in report.to_text()


def test_a_publication_keeps_the_other_fields_of_the_jsonl_records(tmp_path, thesaurus):
    source = tmp_path / "reviews.jsonl"
    rows = [{"id": f"r{n}", "text": text, "stars": n % 5} for n, text in enumerate(SENTENCES)]
    source.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    config = TextMarkingConfig(min_similarity=0.8, batch_size=4, drop_unmarkable=True)
    vault = _mark(source, tmp_path / "vault", thesaurus, config).vault
    arbiter = _Arbiter(tmp_path / "escrow.db")
    try:
        arbiter.escrow(vault)
    finally:
        arbiter.store.close()
    vault = Vault.open(tmp_path / "vault")
    files = publish_texts(vault, tmp_path / "kept", original=source, show_progress=False)
    assert files == [tmp_path / "kept" / "reviews.jsonl"]
    kept = [json.loads(line) for line in files[0].read_text(encoding="utf-8").splitlines()]
    plain = read_published_texts(publish_texts(vault, tmp_path / "plain", show_progress=False)[0])
    assert [record["text"] for record in kept] == [text for _, text in plain]
    for record, (name, _) in zip(kept, plain, strict=True):
        original = rows[int(name.rsplit(":", 1)[1]) - 1]
        assert list(record) == ["id", "text", "stars"]  # the input's keys, in its order
        assert (record["id"], record["stars"]) == (original["id"], original["stars"])
    changed = tmp_path / "other" / "reviews.jsonl"
    changed.parent.mkdir()
    changed.write_text(source.read_text(encoding="utf-8") + "\n", encoding="utf-8")
    with pytest.raises(InputError, match="not the file"):
        publish_texts(vault, tmp_path / "refused", original=changed, show_progress=False)
    assert not (tmp_path / "refused").exists()
