"""The Hugging Face adapter, without transformers installed: fakes with its interface."""

import itertools
import sys
import types

import numpy as np
import pytest
import torch

from protocol.errors import InputError, ParameterError
from verifier.oracles.hf_lm import HfTokenizer, LogitsOnly, load_hf_language_model
from verifier.oracles.torch_lm import TorchLanguageModelOracle

torch.set_num_threads(1)


class FakeTokenizer:
    bos_token_id = 5

    def __call__(self, text, add_special_tokens=True):
        assert add_special_tokens is False
        return {"input_ids": [ord(c) % 7 for c in text]}


class FakeCausalLm(torch.nn.Module):
    def __init__(self):
        super().__init__()
        generator = torch.Generator().manual_seed(1)
        self.table = torch.nn.Parameter(torch.randn(7, 7, generator=generator))
        self.config = types.SimpleNamespace(max_position_embeddings=6)

    def forward(self, input_ids):
        return types.SimpleNamespace(logits=self.table[input_ids])


def test_adapter_scores_every_token_after_bos():
    model = FakeCausalLm()
    oracle = TorchLanguageModelOracle(LogitsOnly(model), HfTokenizer(FakeTokenizer()))
    (values,) = oracle.token_logprobs(["abc"]).logprobs
    ids = [5] + [ord(c) % 7 for c in "abc"]
    logp = torch.log_softmax(model.table.detach().double(), dim=1)
    assert values.tolist() == pytest.approx([float(logp[a, b]) for a, b in itertools.pairwise(ids)])
    assert HfTokenizer(object()).bos_id is None


def test_loader_without_transformers_is_a_parameter_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "transformers", None)
    with pytest.raises(ParameterError, match="transformers"):
        load_hf_language_model("some/model")


def test_loader_uses_local_files_and_the_context_length(monkeypatch):
    calls = []

    class Auto:
        @staticmethod
        def from_pretrained(path, **kwargs):
            calls.append((path, kwargs))
            return FakeTokenizer() if len(calls) == 1 else FakeCausalLm()

    fake = types.SimpleNamespace(AutoTokenizer=Auto, AutoModelForCausalLM=Auto)
    monkeypatch.setitem(sys.modules, "transformers", fake)
    oracle = load_hf_language_model("/models/tiny-lm")
    assert all(kwargs["local_files_only"] for _, kwargs in calls)
    assert oracle.info.model_name == "tiny-lm"
    assert np.all(oracle.token_logprobs(["abcde"]).logprobs[0] <= 0)
    with pytest.raises(InputError, match=r"more than the model's 6"):
        oracle.token_logprobs(["abcdef"])
