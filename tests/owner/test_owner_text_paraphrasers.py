"""Pluggable paraphrasers: the chat endpoint (a local fake server), seq2seq (a fake model)."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from tests.owner.test_owner_text_fixtures import FakeEmbedder
from twinaudit.owner.text.config import TextMarkingConfig
from twinaudit.owner.text.marking import mark_texts
from twinaudit.owner.text.paraphrasers import (
    ChatParaphraser,
    Seq2SeqParaphraser,
)
from twinaudit.owner.text.sources import open_text_source
from twinaudit.owner.vault import Vault
from twinaudit.protocol.errors import InputError, NotFoundError, ParaphraserError

SECRET = bytes(range(32))


class _ChatHandler(BaseHTTPRequestHandler):
    answer = "paraphrases"  # what the fake model does
    requests: list[dict[str, object]] = []  # noqa: RUF012 - shared on purpose

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).requests.append(
            {"path": self.path, "auth": self.headers.get("Authorization"), **body}
        )
        text = body["messages"][-1]["content"]
        if self.answer == "status-500":
            self.send_response(500)
            self.end_headers()
            return
        if self.answer == "paraphrases":
            content = json.dumps(
                {"a": text.replace("film", "movie"), "b": text.replace("good", "fine")}
            )
        elif self.answer == "fenced":
            content = (
                "```json\n" + json.dumps({"a": text + " Indeed.", "b": "Truly, " + text}) + "\n```"
            )
        elif self.answer == "identical":
            content = json.dumps({"a": text, "b": text})
        else:
            content = "Sure! Here are two paraphrases."
        data = json.dumps({"choices": [{"message": {"role": "assistant", "content": content}}]})
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(data.encode())

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def chat_server():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _ChatHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    _ChatHandler.requests = []
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()
    server.server_close()


def test_chat_paraphraser_asks_the_endpoint(chat_server, monkeypatch):
    monkeypatch.setenv("TEST_KEY", "sk-test")
    _ChatHandler.answer = "paraphrases"
    paraphraser = ChatParaphraser(chat_server, "fake-model", api_key_env="TEST_KEY")
    assert paraphraser.paraphrase(["A good film."]) == [("A good movie.", "A fine film.")]
    request = _ChatHandler.requests[0]
    assert request["path"] == "/v1/chat/completions"
    assert request["auth"] == "Bearer sk-test"
    assert request["model"] == "fake-model" and request["temperature"] == 0
    _ChatHandler.answer = "fenced"
    assert paraphraser.paraphrase(["Ok."]) == [("Ok. Indeed.", "Truly, Ok.")]


@pytest.mark.parametrize(
    ("answer", "reason"), [("prose", "invalid-answer"), ("status-500", "unreachable")]
)
def test_chat_paraphraser_failures(chat_server, answer, reason):
    _ChatHandler.answer = answer
    with pytest.raises(ParaphraserError) as caught:
        ChatParaphraser(chat_server, "m").paraphrase(["A good film."])
    assert caught.value.reason == reason


def test_chat_paraphraser_unreachable():
    with pytest.raises(ParaphraserError, match="unreachable"):
        ChatParaphraser("http://127.0.0.1:9/v1", "m", timeout_s=2).paraphrase(["x"])
    with pytest.raises(NotFoundError, match="http"):
        ChatParaphraser("ftp://host/v1", "m")


def _chat_config(endpoint: str, **options: object) -> TextMarkingConfig:
    return TextMarkingConfig(
        marker="chat", model="fake-model", endpoint=endpoint, min_similarity=0.5, **options
    )


def test_mark_with_the_chat_paraphraser(tmp_path, chat_server):
    _ChatHandler.answer = "paraphrases"
    path = tmp_path / "t.txt"
    path.write_text("A good film about a good family.\nThe film is good.\n", encoding="utf-8")
    config = _chat_config(chat_server)
    result = mark_texts(
        open_text_source(path),
        tmp_path / "vault",
        config,
        secret=SECRET,
        embedder=FakeEmbedder(),
        paraphraser=ChatParaphraser(chat_server, "fake-model"),
        show_progress=False,
    )
    vault = Vault.open(tmp_path / "vault")
    assert result.vault.root == vault.root and vault.config == config.to_value()
    first, second = vault.pair(1)
    assert (first.text, second.text) == ("The movie is good.", "The film is fine.")  # type: ignore[union-attr]


def test_identical_paraphrases_are_an_error_and_nothing_is_written(tmp_path, chat_server):
    _ChatHandler.answer = "identical"
    path = tmp_path / "t.txt"
    path.write_text("A good film.\n", encoding="utf-8")
    with pytest.raises(ParaphraserError, match=r"identical-versions.*t\.txt:1"):
        mark_texts(
            open_text_source(path),
            tmp_path / "vault",
            _chat_config(chat_server),
            embedder=FakeEmbedder(),
            paraphraser=ChatParaphraser(chat_server, "fake-model"),
            show_progress=False,
        )
    assert not (tmp_path / "vault").exists()


def test_paraphrases_below_the_bound_are_unmarkable(tmp_path, chat_server):
    _ChatHandler.answer = "paraphrases"
    path = tmp_path / "t.txt"
    path.write_text("good film\nA good film about a good family.\n", encoding="utf-8")
    options = {
        "embedder": FakeEmbedder(),
        "paraphraser": ChatParaphraser(chat_server, "fake-model"),
        "show_progress": False,
    }
    config = TextMarkingConfig(marker="chat", model="m", endpoint=chat_server, min_similarity=0.6)
    with pytest.raises(InputError, match=r"t\.txt:1 \(a paraphrase has similarity 0\.500 < 0\.6\)"):
        mark_texts(open_text_source(path), tmp_path / "vault", config, **options)  # type: ignore[arg-type]
    assert not (tmp_path / "vault").exists()
    dropping = TextMarkingConfig(
        marker="chat", model="m", endpoint=chat_server, min_similarity=0.6, drop_unmarkable=True
    )
    result = mark_texts(open_text_source(path), tmp_path / "vault", dropping, **options)  # type: ignore[arg-type]
    assert result.dropped == ["t.txt:1"] and result.vault.n_pairs == 1


class _FakeTokenizer:
    def __call__(self, text, return_tensors, truncation):
        import torch

        assert return_tensors == "pt" and truncation
        self.last = text
        return {"input_ids": torch.tensor([[1, 2, 3]])}

    def batch_decode(self, outputs, skip_special_tokens):
        return [f" {self.last.removeprefix('paraphrase: ')} ({k}) " for k in range(len(outputs))]


class _FakeSeq2Seq:
    def __init__(self, sequences: int = 2) -> None:
        self.sequences = sequences
        self.calls: list[dict[str, object]] = []

    def generate(self, **options):
        self.calls.append(options)
        return [[0]] * self.sequences


def test_seq2seq_paraphraser_interface():
    model = _FakeSeq2Seq()
    paraphraser = Seq2SeqParaphraser("fake-t5", _FakeTokenizer(), model)
    assert paraphraser.paraphrase(["A good film."]) == [("A good film. (0)", "A good film. (1)")]
    options = model.calls[0]
    assert options["num_return_sequences"] == 2 and options["do_sample"] is False
    with pytest.raises(ParaphraserError, match="3 sequences"):
        Seq2SeqParaphraser("bad", _FakeTokenizer(), _FakeSeq2Seq(3)).paraphrase(["x"])


def test_seq2seq_paraphraser_needs_a_local_model(tmp_path):
    with pytest.raises(NotFoundError, match="not downloaded"):
        Seq2SeqParaphraser.load(str(tmp_path / "t5-paraphraser"))
