"""The language-model score (spec §10.5), its answers, and the in-process torch LM oracle."""

import itertools
from fractions import Fraction

import numpy as np
import pytest
import torch

from twinaudit.practitioner.tokenizer import ByteTokenizer
from twinaudit.practitioner.torch_lm import TorchLanguageModelOracle
from twinaudit.practitioner.torch_oracle import state_dict_digest
from twinaudit.protocol.claim.functions import score_spec_from_fields, score_spec_from_value
from twinaudit.protocol.errors import InputError, LimitExceededError, OracleError, ParameterError
from twinaudit.protocol.items import MAX_TEXT_BYTES, TextItem
from twinaudit.protocol.oracles.base import OracleInfo
from twinaudit.protocol.oracles.language import MAX_TOKENS, LogprobAnswer, check_texts
from twinaudit.verifier.scoring.language import LanguageSpec, score

torch.set_num_threads(1)


def test_spec():
    spec = LanguageSpec()
    assert spec.to_value() == {"function": "language-model"}
    assert score_spec_from_value({"function": "language-model"}) == spec
    assert score_spec_from_fields("language-model", 0, "", "") == spec
    assert spec.queries_per_version == 1 and spec.item_kind == "text"
    for bad in ({"function": "language-model", "k": 1}, {"function": "lm"}):
        with pytest.raises(ParameterError):
            score_spec_from_value(bad)
    spec.check_oracle(OracleInfo("m", "d", ("token-logprobs",), "", 0, 8))
    with pytest.raises(ParameterError):
        spec.check_oracle(OracleInfo("m", "d", ("embed-images",), "", 0, 8))
    assert spec.check_item(TextItem("hi")) == TextItem("hi")
    with pytest.raises(ParameterError):
        spec.check_item(b"hi")


def test_score_is_the_exactly_rounded_mean():
    values = np.array([-1e16, -1.0, -1.0])
    exact = sum(Fraction(v) for v in values.tolist())
    assert score(values) == float(exact) / 3
    naive = 0.0
    for v in values.tolist():
        naive += v
    assert naive / 3 != score(values)
    assert score(np.array([-0.5, -1.5])) == -1.0
    assert score(np.zeros(0)) == 0.0


@pytest.mark.parametrize(
    "vectors",
    [
        (np.array([-1.0]),),
        (np.array([-1.0]), np.array([-1.0]), np.array([-1.0])),
        (np.array([-1.0, np.nan]), np.array([-1.0])),
        (np.array([-1.0, -np.inf]), np.array([-1.0])),
        (np.array([-1.0, 1e-9]), np.array([-1.0])),
        (np.full(MAX_TOKENS + 1, -1.0), np.array([-1.0])),
    ],
)
def test_invalid_logprob_answers(vectors):
    with pytest.raises(OracleError) as info:
        LogprobAnswer(vectors).validate(2)
    assert info.value.reason == "invalid-answer"


def test_answers_must_be_float64_vectors():
    for bad in ([np.zeros(2)], (np.zeros((2, 2)),), (np.zeros(2, dtype=np.float32),)):
        with pytest.raises(OracleError):
            LogprobAnswer(bad)


def test_recorded_answers_round_trip():
    answer = LogprobAnswer((np.array([-0.25, -3.5]), np.zeros(0)))
    value = answer.to_value()
    assert value == [[-0.25, -3.5], []]
    again = LogprobAnswer.from_value(value, 2)
    assert [v.tolist() for v in again.logprobs] == [[-0.25, -3.5], []]
    for bad in ([[-1]], [["x"]], "no", [[-1.0], [0.5]]):
        with pytest.raises(OracleError):
            LogprobAnswer.from_value(bad, len(bad) if isinstance(bad, list) else 1)


def test_check_texts():
    assert check_texts(["a", "b"]) == ["a", "b"]
    with pytest.raises(InputError):
        check_texts([])
    with pytest.raises(InputError):
        check_texts([""])
    with pytest.raises(InputError):
        check_texts(["x" * (MAX_TEXT_BYTES + 1)])
    with pytest.raises(InputError):
        check_texts("not a list")
    with pytest.raises(InputError):
        check_texts(["\ud800"])
    with pytest.raises(LimitExceededError):
        check_texts(["a"] * 5000)


class Bigram(torch.nn.Module):
    """Logits depend on the current token only: an exact reference is easy to compute."""

    def __init__(self, vocabulary=257):
        super().__init__()
        generator = torch.Generator().manual_seed(0)
        self.table = torch.nn.Parameter(torch.randn(vocabulary, vocabulary, generator=generator))

    def forward(self, ids):
        return self.table[ids]


def _reference(model, ids):
    logp = torch.log_softmax(model.table.detach().double(), dim=1)
    return [float(logp[a, b]) for a, b in itertools.pairwise(ids)]


@pytest.mark.parametrize("bos", [True, False])
def test_torch_lm_logprobs_are_every_token_after_the_first(bos):
    model = Bigram()
    oracle = TorchLanguageModelOracle(model, ByteTokenizer(bos=bos), model_name="bigram")
    answer = oracle.token_logprobs(["héllo", "a"])
    ids = ([256] if bos else []) + list("héllo".encode())
    assert answer.logprobs[0].tolist() == pytest.approx(_reference(model, ids), abs=1e-12)
    assert len(answer.logprobs[0]) == len("héllo".encode()) - (0 if bos else 1)
    assert answer.logprobs[1].shape == ((1,) if bos else (0,))
    info = oracle.info
    assert info.capabilities == ("token-logprobs",)
    assert (info.classify_output, info.n_classes) == ("", 0)
    assert info.model_digest == state_dict_digest(model)


def test_torch_lm_refuses_long_texts_instead_of_truncating():
    oracle = TorchLanguageModelOracle(Bigram(), ByteTokenizer(), max_tokens=4)
    assert oracle.token_logprobs(["abc"]).logprobs[0].shape == (3,)
    with pytest.raises(InputError):
        oracle.token_logprobs(["abcd"])


class _Broken(torch.nn.Module):
    def __init__(self, output):
        super().__init__()
        self.output = output
        self.weight = torch.nn.Parameter(torch.zeros(1))

    def forward(self, ids):
        t = ids.shape[1]
        if self.output == "shape":
            return torch.zeros(t, 257)
        if self.output == "small-vocabulary":
            return torch.zeros(1, t, 10)
        if self.output == "nan":
            return torch.full((1, t, 257), float("nan"))
        return "logits"


@pytest.mark.parametrize("output", ["shape", "small-vocabulary", "nan", "type"])
def test_torch_lm_rejects_malformed_model_output(output):
    oracle = TorchLanguageModelOracle(_Broken(output), ByteTokenizer())
    with pytest.raises(OracleError) as info:
        oracle.token_logprobs(["hello"])
    assert info.value.reason == "invalid-answer"


def test_torch_lm_parameters():
    with pytest.raises(ParameterError):
        TorchLanguageModelOracle("model", ByteTokenizer())
    with pytest.raises(ParameterError):
        TorchLanguageModelOracle(Bigram(), object())
    with pytest.raises(ParameterError):
        TorchLanguageModelOracle(Bigram(), ByteTokenizer(), max_tokens=1)
    with pytest.raises(ParameterError):
        TorchLanguageModelOracle(Bigram(), ByteTokenizer(), max_batch=0)

    class Junk(ByteTokenizer):
        def encode(self, text):
            return ["a"]

    with pytest.raises(OracleError):
        TorchLanguageModelOracle(Bigram(), Junk()).token_logprobs(["x"])
