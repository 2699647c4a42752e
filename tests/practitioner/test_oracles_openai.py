"""The OpenAI-compatible completions oracle against a local fake server (no network)."""

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest

from twinaudit.practitioner.openai_lm import OpenAICompletionsOracle, parse_completions
from twinaudit.protocol.errors import InputError, OracleError, ParameterError
from twinaudit.verifier.scoring.language import score


def _choice(index, prompt, values, tokens=None):
    tokens = tokens if tokens is not None else [f"t{i}" for i in range(len(values))]
    return {
        "index": index,
        "text": prompt,
        "logprobs": {"tokens": tokens, "token_logprobs": values, "top_logprobs": None},
        "finish_reason": "length",
    }


def _good(prompts):
    return {
        "object": "text_completion",
        "choices": [
            _choice(i, p, [None] + [-0.25 * (k + 1) for k in range(len(p.split()))])
            for i, p in enumerate(prompts)
        ],
    }


class _Server:
    """A fake /v1/completions server; ``reply(body) -> (status, bytes)`` decides the answer."""

    def __init__(self, reply):
        self.requests = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                length = int(self.headers["Content-Length"])
                body = json.loads(self.rfile.read(length))
                outer.requests.append((self.path, dict(self.headers), body))
                status, data = reply(body)
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        class Quiet(ThreadingHTTPServer):
            def handle_error(self, request, client_address):
                pass  # a client that timed out closed the connection; nothing to report

        self.httpd = Quiet(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, args=(0.02,), daemon=True)
        self.thread.start()
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server():
    started = []

    def start(reply):
        s = _Server(reply)
        started.append(s)
        return s

    yield start
    for s in started:
        s.close()


def _json(payload, status=200):
    return lambda body: (status, json.dumps(payload(body["prompt"])).encode())


def test_logprobs_after_the_first_token(server):
    fake = server(_json(_good))
    oracle = OpenAICompletionsOracle(fake.url, "tiny-llama", api_key="k", max_batch=2)
    answer = oracle.token_logprobs(["one two three", "four", "five six", "seven"])
    assert [v.tolist() for v in answer.logprobs] == [
        [-0.25, -0.5, -0.75],
        [-0.25],
        [-0.25, -0.5],
        [-0.25],
    ]
    assert score(answer.logprobs[0]) == -0.5
    assert len(fake.requests) == 2
    path, headers, body = fake.requests[0]
    assert path == "/v1/completions"
    assert headers["Authorization"] == "Bearer k"
    assert body == {
        "model": "tiny-llama",
        "prompt": ["one two three", "four"],
        "max_tokens": 0,
        "echo": True,
        "logprobs": 0,
        "temperature": 0,
    }
    info = oracle.info
    assert info.capabilities == ("token-logprobs",) and info.model_name == "tiny-llama"


def test_choices_may_come_in_any_order(server):
    def shuffled(prompts):
        reply = _good(prompts)
        reply["choices"].reverse()
        return reply

    oracle = OpenAICompletionsOracle(server(_json(shuffled)).url, "m")
    answer = oracle.token_logprobs(["a b c", "d"])
    assert [len(v) for v in answer.logprobs] == [3, 1]


def _mutate(change):
    def payload(prompts):
        reply = _good(prompts)
        change(reply)
        return reply

    return payload


BROKEN = {
    "missing logprobs": _mutate(lambda r: r["choices"][0].pop("logprobs")),
    "null logprobs": _mutate(lambda r: r["choices"][0].update(logprobs=None)),
    "missing value after the first": _mutate(
        lambda r: r["choices"][1]["logprobs"]["token_logprobs"].__setitem__(1, None)
    ),
    "truncated echo": _mutate(lambda r: r["choices"][0].update(text="one two")),
    "generated text": _mutate(lambda r: r["choices"][0].update(text="one two three four")),
    "fewer values than tokens": _mutate(
        lambda r: r["choices"][0]["logprobs"]["token_logprobs"].pop()
    ),
    "no tokens": _mutate(
        lambda r: r["choices"][0].update(logprobs={"tokens": [], "token_logprobs": []})
    ),
    "positive value": _mutate(
        lambda r: r["choices"][0]["logprobs"]["token_logprobs"].__setitem__(1, 0.5)
    ),
    "string value": _mutate(
        lambda r: r["choices"][0]["logprobs"]["token_logprobs"].__setitem__(1, "-1")
    ),
    "a choice missing": _mutate(lambda r: r["choices"].pop()),
    "repeated index": _mutate(lambda r: r["choices"][1].update(index=0)),
    "no choices": lambda prompts: {"error": "nope"},
}


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_broken_replies_are_invalid_answers(server, case):
    oracle = OpenAICompletionsOracle(server(_json(BROKEN[case])).url, "m")
    with pytest.raises(OracleError) as info:
        oracle.token_logprobs(["one two three", "four five"])
    assert info.value.reason == "invalid-answer"


def test_http_errors_and_garbage(server):
    for reply in (
        lambda body: (500, b"{}"),
        lambda body: (200, b"not json"),
        lambda body: (200, b'"a string"'),
    ):
        oracle = OpenAICompletionsOracle(server(reply).url, "m")
        with pytest.raises(OracleError) as info:
            oracle.token_logprobs(["a"])
        assert info.value.reason == "invalid-answer"


def test_unreachable_and_slow_endpoints(server):
    fake = server(_json(_good))
    url = fake.url
    fake.close()
    with pytest.raises(OracleError) as info:
        OpenAICompletionsOracle(url, "m", timeout_s=2).token_logprobs(["a"])
    assert info.value.reason == "unreachable"
    slow = threading.Event()

    def hang(body):
        slow.wait(3)
        return 200, json.dumps(_good(body["prompt"])).encode()

    with pytest.raises(OracleError) as info:
        OpenAICompletionsOracle(server(hang).url, "m", timeout_s=0.3).token_logprobs(["a"])
    slow.set()
    assert info.value.reason == "deadline"


def test_parameters_and_inputs():
    with pytest.raises(ParameterError):
        OpenAICompletionsOracle("ftp://host/v1", "m")
    with pytest.raises(ParameterError):
        OpenAICompletionsOracle("http://host/v1", "m", timeout_s=0)
    with pytest.raises(ParameterError):
        OpenAICompletionsOracle("http://host/v1", "", max_batch=2)
    with pytest.raises(InputError):
        OpenAICompletionsOracle("http://127.0.0.1:9/v1", "m").token_logprobs([""])


def test_parse_completions_keeps_only_what_follows_the_first_token():
    body = json.dumps(
        {"choices": [_choice(0, "hi there", [None, -1.5, -0.5], ["<s>", "hi", " there"])]}
    )
    (values,) = parse_completions(body.encode(), ["hi there"]).logprobs
    assert values.tolist() == [-1.5, -0.5]
    assert values.dtype == np.float64
