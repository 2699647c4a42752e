"""Claims for encoders, language models and CLIP-style models through the arbiter's service.

Real gRPC on 127.0.0.1: the owner escrows an image, a text and a captioned-image
record; small models trained on the published versions (and untrained ones) are
served as oracles; claims naming each score function are filed with the owner's
claim client; verdicts verify offline and replay from the stored transcripts.
Claims whose score, item kind and oracle do not fit are refused before anything is
stored or signed.
"""

from __future__ import annotations

import grpc
import pytest
import torch

from demo.seeded import SeededEntropy
from tests.support import foundation as fm
from tests.support.claims import RawClaimStart, claim_params
from tests.support.keys import KEY
from twinaudit.owner.claim_client import run_claim
from twinaudit.owner.escrow_client import escrow_root
from twinaudit.practitioner.grpc_server import serve_oracle
from twinaudit.practitioner.tokenizer import ByteTokenizer
from twinaudit.practitioner.torch_encoder import TorchEncoderOracle, TorchImageTextOracle
from twinaudit.practitioner.torch_lm import TorchLanguageModelOracle
from twinaudit.protocol.claim.verdict import check_verdict
from twinaudit.protocol.seeds import publication_bits
from twinaudit.verifier.escrow.sqlite_store import SqliteEscrowStore
from twinaudit.verifier.replay import replay
from twinaudit.verifier.server import serve_arbiter
from twinaudit.wire.transport import make_channel
from twinaudit.wire.verifier.v1 import verifier_pb2 as pb
from twinaudit.wire.verifier.v1 import verifier_pb2_grpc as pb_grpc

# The module's arbiter trains and escrows a model of each kind first: seconds.
pytestmark = pytest.mark.slow

N = 24
KINDS = {
    "image-encoder": ("image", fm.marked_images),
    "language-model": ("text", fm.text_pairs),
    "image-text": ("captioned-image", fm.captioned_pairs),
}


def _oracle(function, published):
    if function == "image-encoder":
        trained = TorchEncoderOracle(fm.train_encoder(published), model_name="trained")
        untrained = TorchEncoderOracle(fm.train_encoder([], steps=0), model_name="untrained")
    elif function == "language-model":
        texts = [item.text for item in published]
        trained = TorchLanguageModelOracle(
            fm.train_lm(texts), ByteTokenizer(), model_name="trained"
        )
        untrained = TorchLanguageModelOracle(
            fm.train_lm([], steps=0), ByteTokenizer(), model_name="untrained"
        )
    else:
        tokenizer = ByteTokenizer(bos=False)
        trained = TorchImageTextOracle(fm.train_dual(published), tokenizer, model_name="trained")
        untrained = TorchImageTextOracle(
            fm.train_dual([], steps=0), tokenizer, model_name="untrained"
        )
    return {"trained": trained, "untrained": untrained}


@pytest.fixture(scope="module")
def arbiter(tmp_path_factory):
    torch.set_num_threads(1)
    tmp = tmp_path_factory.mktemp("arbiter")
    key = KEY
    entropy = SeededEntropy(b"new kinds")
    store = SqliteEscrowStore(tmp / "escrow.db", key, entropy=entropy)
    server, port = serve_arbiter(store, key, "127.0.0.1:0", entropy=entropy)
    channel = make_channel(f"127.0.0.1:{port}")
    records, servers = {}, []
    for function, (kind, make) in KINDS.items():
        pairs = make(N, seed=0)
        owner_set = fm.commit(kind, pairs)
        receipt = escrow_root(
            channel,
            root=owner_set.root,
            n_pairs=N,
            item_kind=kind,
            owner="owner",
            claim_key=owner_set.claim_public_key(),
            arbiter_public_key=key.public_key(),
        ).receipt
        bits = publication_bits(owner_set.root, receipt.rho, N)
        endpoints = {}
        for name, oracle in _oracle(function, fm.published(pairs, bits)).items():
            oracle_server, oracle_port = serve_oracle(oracle, "127.0.0.1:0")
            servers.append(oracle_server)
            endpoints[name] = f"127.0.0.1:{oracle_port}"
        records[function] = {"pairs": owner_set, "receipt": receipt, "endpoints": endpoints}
    yield {
        "key": key,
        "channel": channel,
        "records": records,
        "store": store,
        "entropy": entropy,
        "start": entropy._counter,
    }
    for s in [*servers, server]:
        s.stop(None)
    channel.close()
    store.close()


def _claim(arbiter, function, model, *, record=None, raw=False, **overrides):
    entry = arbiter["records"][record or function]
    where = (entry["receipt"].entry.index, entry["pairs"].root, entry["endpoints"][model], model)
    fields = {"k": 8} if function == "image-encoder" else {}
    fields.update(overrides)
    if raw:  # the unchecked field form: the verifier, not the client, refuses it
        fields = {"k": 0, "perturbation": "", "knowledge": "", **fields}
        request = RawClaimStart(*where, score_function=function, **fields).to_proto()
    else:
        request = claim_params(*where, function=function, **fields)
    return run_claim(
        arbiter["channel"],
        request,
        entry["pairs"].opening,
        claim_key=entry["pairs"].claim_key,
        timeout_s=120,
    )


#: The arbiter's entropy draws of one case of the test below: two claims, two draws each.
DRAWS_PER_CASE = 4


@pytest.mark.parametrize("function", sorted(KINDS))
def test_trained_detected_untrained_not_and_both_replay(arbiter, function):
    # The tiny models are detected with some draws of pairs and not others, and the draws
    # come from the shared arbiter's entropy: each case starts it where the file's order
    # would, so that a shuffled order draws the same pairs (started elsewhere, cases failed).
    entropy = arbiter["entropy"]
    entropy._counter = arbiter["start"] + DRAWS_PER_CASE * sorted(KINDS).index(function)
    start = entropy._counter
    stub = pb_grpc.VerifierStub(arbiter["channel"])
    decisions = {}
    for model in ("trained", "untrained"):
        outcome = _claim(arbiter, function, model)
        verdict = check_verdict(outcome.verdict, arbiter["key"].public_key())
        assert verdict.claim.score.function == function
        stored = stub.GetVerdict(pb.GetVerdictRequest(claim_id=outcome.claim_id), timeout=10)
        result = replay(verdict, stored.transcript)
        assert result.decision == verdict.decision
        decisions[model] = verdict.decision
    assert entropy._counter == start + DRAWS_PER_CASE, "the claims' draws changed"
    assert decisions == {"trained": "detected", "untrained": "not-detected"}


@pytest.mark.parametrize(
    ("function", "overrides", "record", "message"),
    [
        ("language-model", {"knowledge": "C2"}, None, "knowledge"),
        ("language-model", {"k": 4}, None, "no k"),
        ("image-text", {"perturbation": "none"}, None, "no k"),
        ("image-encoder", {"k": 1}, None, "k must be"),
        ("image-encoder", {}, "language-model", "reads 'image' items"),
        ("language-model", {}, "image-text", "reads 'text' items"),
        ("audio-model", {}, "language-model", "unknown score function"),
    ],
)
def test_mismatched_claims_are_refused(arbiter, function, overrides, record, message):
    index = arbiter["records"][record or function]["receipt"].entry.index
    before = len(arbiter["store"].claims_for_record(index))
    # Raw fields: the owner's client refuses most of these rows before sending
    # (a parameter the function does not take, K out of range, an unknown function).
    with pytest.raises(grpc.RpcError) as info:
        _claim(arbiter, function, "trained", record=record, raw=True, **overrides)
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert message in info.value.details()
    assert len(arbiter["store"].claims_for_record(index)) == before  # nothing stored


def test_an_oracle_without_the_capability_is_refused(arbiter):
    records = arbiter["records"]
    entry = records["language-model"]
    encoder_endpoint = records["image-encoder"]["endpoints"]["trained"]
    request = claim_params(
        entry["receipt"].entry.index,
        entry["pairs"].root,
        encoder_endpoint,
        "wrong",
        function="language-model",
    )
    with pytest.raises(grpc.RpcError) as info:
        run_claim(
            arbiter["channel"],
            request,
            entry["pairs"].opening,
            claim_key=entry["pairs"].claim_key,
            timeout_s=60,
        )
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "token-logprobs" in info.value.details()
