"""Claims against a model on a real Open Inference Protocol server (issue #23 item 4).

MLServer (installed from PyPI, the ``oip`` extra) serves memorisers of the owner's
published versions and of other data (:mod:`tests.support.oip_runtime`) on 127.0.0.1,
over REST and gRPC, in a process of its own. The arbiter reaches them by their
``oip+http://`` and ``oip+grpc://`` oracle addresses: the model trained on the
publication is DETECTED, the other one is NOT DETECTED, both verdicts check and
replay, and their model section records the address and what the server's metadata
says. The same server answers the oracle's every tensor mapping (probabilities,
logits, labels, embeddings; NHWC, NCHW, flat), and a model that fails twice is
answered on the third try.
"""

from __future__ import annotations

import importlib.util

import grpc
import numpy as np
import pytest

if importlib.util.find_spec("mlserver") is None:  # not imported: see oip_runtime
    pytest.skip("MLServer is not installed (the oip extra)", allow_module_level=True)

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from demo.seeded import fixed_salts
from tests.support.arbiter import sqlite_arbiter
from tests.support.claims import claim_params
from tests.support.data import synthetic_pairs
from tests.support.oip_server import OipModel, memoriser_logits, mlserver_process
from tests.support.pairset import PairSet
from twinaudit.cli.results import verdict_figures
from twinaudit.owner.claim_client import run_claim
from twinaudit.protocol.claim.verdict import check_verdict
from twinaudit.protocol.errors import OracleError
from twinaudit.protocol.items import encode_item
from twinaudit.protocol.seeds import publication_bits
from twinaudit.verifier.oracles.dial import dial_oracle
from twinaudit.verifier.replay import replay
from twinaudit.wire.transport import make_channel
from twinaudit.wire.verifier.v1 import verifier_pb2 as pb
from twinaudit.wire.verifier.v1 import verifier_pb2_grpc as pb_grpc

pytestmark = pytest.mark.slow

N_PAIRS = 48
EPSILON = 32
FRAMEWORK = "mlserver 1.7.0, numpy-memoriser"


@pytest.fixture(scope="module")
def dispute(tmp_path_factory):
    """An escrowed pair set, its publication, and MLServer serving models of it."""
    tmp = tmp_path_factory.mktemp("oip")
    key = Ed25519PrivateKey.from_private_bytes(bytes(range(32)))
    pairs = synthetic_pairs(N_PAIRS, seed=11, epsilon=EPSILON)
    versions = [tuple(encode_item(item) for item in pairs.items(i)) for i in range(N_PAIRS)]
    owner = PairSet("image", versions, fixed_salts(N_PAIRS))
    other = synthetic_pairs(N_PAIRS, seed=12, epsilon=EPSILON)
    with sqlite_arbiter(tmp, key) as address:
        channel = make_channel(address)
        receipt = owner.escrow(channel, key.public_key(), "oip owner")
        bits = np.array(publication_bits(owner.root, receipt.rho, N_PAIRS), dtype=int)
        published = pairs.version(bits)
        models = [
            OipModel("used", published, pairs.labels),
            OipModel("clean", other.version0, other.labels, answers="logits", dtype="float32"),
            OipModel("labels", published, pairs.labels, answers="labels"),
            OipModel("nchw", published, pairs.labels, layout="nchw", dtype="float32"),
            OipModel("flat", published, pairs.labels, layout="flat", answers="embedding"),
            OipModel("flaky", published, pairs.labels, fail_first=2),
            OipModel("broken", published, pairs.labels, fail_first=1000),
        ]
        with mlserver_process(tmp / "models", models) as server:
            yield {
                "key": key,
                "channel": channel,
                "owner": owner,
                "receipt": receipt,
                "server": server,
                "published": published,
                "pairs": pairs,
            }
        channel.close()


def _claim(dispute, endpoint, **overrides):
    score = {"perturbation": "none", "knowledge": "C1", **overrides}
    request = claim_params(
        dispute["receipt"].entry.index,
        dispute["owner"].root,
        endpoint,
        "deployed",
        **score,
    )
    return run_claim(
        dispute["channel"],
        request,
        dispute["owner"].opening,
        claim_key=dispute["owner"].claim_key,
        timeout_s=300,
    )


def _verdict_and_replay(dispute, outcome):
    verdict = check_verdict(outcome.verdict, dispute["key"].public_key())
    stored = pb_grpc.VerifierStub(dispute["channel"]).GetVerdict(
        pb.GetVerdictRequest(claim_id=outcome.claim_id), timeout=10
    )
    result = replay(verdict, stored.transcript)
    assert result.decision == verdict.decision
    assert result.indicators == verdict.indicators
    return verdict


def test_a_model_trained_on_the_publication_is_detected_over_rest(dispute):
    endpoint = dispute["server"].rest("used")
    verdict = _verdict_and_replay(dispute, _claim(dispute, endpoint))
    assert verdict.decision == "detected"
    claim = verdict.claim
    assert claim.endpoint == endpoint and claim.model_name == "deployed"
    assert claim.oracle == {
        "model_name": "used",
        "model_digest": "unverified: remote OIP endpoint",
        "capabilities": ["classify"],
        "classify_output": "probabilities",
        "n_classes": 10,
        "max_batch": 64,
        "framework": FRAMEWORK,
        "input_shape": [28, 28, 1],
    }
    assert verdict_figures(verdict)["oracle"] == claim.oracle


def test_a_clean_model_is_not_detected_over_grpc_with_logits(dispute):
    endpoint = dispute["server"].grpc_address("clean", "outputs=logits&max-batch=5")
    verdict = _verdict_and_replay(dispute, _claim(dispute, endpoint))
    assert verdict.decision == "not-detected"
    oracle = verdict.claim.oracle
    assert oracle["max_batch"] == 5 and oracle["classify_output"] == "probabilities"


def test_a_label_only_deployment_reaches_a_verdict(dispute):
    endpoint = dispute["server"].rest("labels", "classes=10&digest=sha256:feed")
    verdict = _verdict_and_replay(dispute, _claim(dispute, endpoint, knowledge="labelled"))
    oracle = verdict.claim.oracle
    assert oracle["classify_output"] == "label" and oracle["model_digest"] == "sha256:feed"
    assert verdict.claim.score.knowledge == "C3"


def test_an_address_the_metadata_cannot_serve_is_refused_in_one_line(dispute):
    # Logits read as probabilities never pass: the first answers fail the claim.
    with pytest.raises(grpc.RpcError) as info:
        _claim(dispute, dispute["server"].rest("clean"), max_pairs=4)
    assert info.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert "outputs=logits" in info.value.details()
    assert "\n" not in info.value.details() and "Traceback" not in info.value.details()
    # A label output says no class count: refused when the claim starts.
    with pytest.raises(grpc.RpcError) as info:
        _claim(dispute, dispute["server"].grpc_address("labels"))
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "classes=N" in info.value.details()
    # A model that is not there.
    with pytest.raises(grpc.RpcError) as info:
        _claim(dispute, dispute["server"].rest("absent"))
    assert info.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert "404" in info.value.details()


def _images(dispute, n=7):
    return (dispute["published"][:n] / 255.0).astype(np.float32)


def _expected_logits(dispute, images):
    train = dispute["published"].reshape(N_PAIRS, -1).astype(np.float64) / 255.0
    x = images.reshape(images.shape[0], -1).astype(np.float64)
    return memoriser_logits(x, train, dispute["pairs"].labels, 20.0)


@pytest.mark.parametrize("transport", ["rest", "grpc"])
def test_every_tensor_mapping_answers_what_the_model_computes(dispute, transport):
    server = dispute["server"]
    address = server.rest if transport == "rest" else server.grpc_address
    images = _images(dispute)
    logits = _expected_logits(dispute, images)
    shifted = np.exp(logits - logits.max(1, keepdims=True))
    probabilities = shifted / shifted.sum(1, keepdims=True)

    used = dial_oracle(address("used", "max-batch=3"), timeout_s=10)
    np.testing.assert_allclose(used.classify(images).probabilities, probabilities, atol=1e-12)
    labels = dial_oracle(address("labels", "classes=10"), timeout_s=10).classify(images)
    assert labels.output == "label"
    np.testing.assert_array_equal(labels.labels, logits.argmax(1))
    nchw = dial_oracle(address("nchw"), timeout_s=10)
    assert nchw.info.input_shape == (28, 28, 1)
    np.testing.assert_allclose(nchw.classify(images).probabilities, probabilities, atol=1e-5)
    flat = dial_oracle(address("flat", "kind=encoder&shape=28,28,1"), timeout_s=10)
    assert flat.info.capabilities == ("embed-images",)
    np.testing.assert_allclose(flat.embed_images(images).embeddings, logits, rtol=1e-12)


def test_a_server_error_is_retried_a_bounded_number_of_times(dispute):
    server = dispute["server"]
    images = _images(dispute, 2)
    # The flaky model fails its first two requests: two retries reach its answer.
    flaky = dial_oracle(server.rest("flaky", "retries=2"), timeout_s=10)
    assert flaky.classify(images).probabilities.shape == (2, 10)
    # A model that always fails is given up after 1 + retries requests, in one line.
    broken = dial_oracle(server.grpc_address("broken", "retries=1"), timeout_s=10)
    with pytest.raises(OracleError) as info:
        broken.classify(images)
    assert info.value.reason == "invalid-answer" and "\n" not in str(info.value)
    broken_rest = dial_oracle(server.rest("broken", "retries=1"), timeout_s=10)
    with pytest.raises(OracleError) as info:
        broken_rest.classify(images)
    assert "HTTP 500" in str(info.value) and "tried 2 times" in str(info.value)
