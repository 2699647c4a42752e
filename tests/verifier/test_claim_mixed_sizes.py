"""Claims on a vault of images of several sizes, grey and colour (one request per shape)."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

from demo.seeded import SeededEntropy, fixed_salts
from tests.support.claims import claim_params
from tests.support.keys import KEY
from tests.support.pairset import PairSet
from twinaudit.owner.claim_client import run_claim
from twinaudit.practitioner.grpc_server import serve_oracle
from twinaudit.protocol.claim.requests import request_runs
from twinaudit.protocol.claim.verdict import check_verdict
from twinaudit.protocol.errors import OracleError
from twinaudit.protocol.items import ImageItem, encode_item
from twinaudit.protocol.oracles.base import (
    ClassifierOracle,
    ClassifyAnswer,
    OracleInfo,
    check_images,
)
from twinaudit.protocol.seeds import publication_bits
from twinaudit.verifier.escrow.sqlite_store import SqliteEscrowStore
from twinaudit.verifier.replay import replay
from twinaudit.verifier.server import serve_arbiter
from twinaudit.verifier.windows.base import by_shape, in_sent_order
from twinaudit.wire.transport import make_channel
from twinaudit.wire.verifier.v1 import verifier_pb2 as pb
from twinaudit.wire.verifier.v1 import verifier_pb2_grpc as pb_grpc

N_PAIRS = 48
EPSILON = 16
#: Three sizes, grey and colour, one after another through the record.
SHAPES = ((12, 12, 1), (16, 20, 3), (9, 14, 3))


def _key(image: np.ndarray) -> bytes:
    pixels = np.rint(np.asarray(image, dtype=np.float64) * 255.0).astype(np.uint8)
    return hashlib.sha256(repr(pixels.shape).encode() + pixels.tobytes()).digest()


class MemoryOracle(ClassifierOracle):
    """Certain of the label of every image it was trained on; a hashed guess otherwise.

    Records the shapes of each request it gets: one shape per request is the rule.
    """

    def __init__(self, memory: dict[bytes, int]):
        self._memory = memory
        self._info = OracleInfo("memory", "test", ("classify",), "probabilities", 4, 512)
        self.request_shapes: list[tuple[int, ...]] = []

    @property
    def info(self) -> OracleInfo:
        return self._info

    def classify(self, images):
        images = check_images(images)
        self.request_shapes.append(tuple(images.shape[1:]))
        rows = []
        for image in images:
            key = _key(image)
            if key in self._memory:
                row = np.full(4, 0.01 / 3)
                row[self._memory[key]] = 0.99
            else:
                row = np.random.default_rng(int.from_bytes(key[:8], "big")).dirichlet(np.ones(4))
            rows.append(row)
        return ClassifyAnswer(probabilities=np.array(rows, dtype=np.float64))


def _pairs(seed: int) -> tuple[list[tuple[ImageItem, ImageItem]], list[int]]:
    rng = np.random.default_rng(seed)
    pairs, labels = [], []
    for index in range(N_PAIRS):
        shape = SHAPES[index % len(SHAPES)]
        base = rng.integers(EPSILON, 256 - EPSILON, shape)
        delta = EPSILON * np.where(rng.random(shape) < 0.5, -1, 1)
        label = int(rng.integers(0, 4))
        pairs.append(
            (
                ImageItem((base + delta).astype(np.uint8), label),
                ImageItem((base - delta).astype(np.uint8), label),
            )
        )
        labels.append(label)
    return pairs, labels


@pytest.fixture(scope="module")
def mixed(tmp_path_factory):
    """An arbiter, a mixed-size record, a model that memorised its publication, one that did not."""
    tmp = tmp_path_factory.mktemp("mixed")
    key = KEY
    entropy = SeededEntropy(b"mixed sizes")
    store = SqliteEscrowStore(tmp / "escrow.db", key, entropy=entropy)
    arbiter, port = serve_arbiter(store, key, "127.0.0.1:0", entropy=entropy)
    channel = make_channel(f"127.0.0.1:{port}")
    pairs, labels = _pairs(1)
    versions = [(encode_item(a), encode_item(b)) for a, b in pairs]
    owner_set = PairSet("image", versions, fixed_salts(N_PAIRS))
    receipt = owner_set.escrow(channel, key.public_key(), "mixed owner")
    bits = publication_bits(owner_set.root, receipt.rho, N_PAIRS)
    published = {_key(pairs[i][int(bit)].pixels / 255.0): labels[i] for i, bit in enumerate(bits)}
    others, other_labels = _pairs(2)
    pairs_labels = zip(others, other_labels, strict=True)
    unrelated = {_key(a.pixels / 255.0): label for (a, _), label in pairs_labels}
    oracles = {"used": MemoryOracle(published), "clean": MemoryOracle(unrelated)}
    servers, endpoints = [], {}
    for name, oracle in oracles.items():
        server, oracle_port = serve_oracle(oracle, "127.0.0.1:0")
        servers.append(server)
        endpoints[name] = f"127.0.0.1:{oracle_port}"
    yield {
        "key": key,
        "channel": channel,
        "pairs": owner_set,
        "receipt": receipt,
        "endpoints": endpoints,
        "oracles": oracles,
    }
    for server in [*servers, arbiter]:
        server.stop(None)
    channel.close()
    store.close()


@pytest.mark.parametrize(("model", "decision"), [("used", "detected"), ("clean", "not-detected")])
def test_a_mixed_size_record_is_audited_one_shape_per_request(mixed, model, decision):
    request = claim_params(
        mixed["receipt"].entry.index,
        mixed["pairs"].root,
        mixed["endpoints"][model],
        model,
        k=1,
        perturbation="none",
        knowledge="C1",
    )
    outcome = run_claim(
        mixed["channel"],
        request,
        mixed["pairs"].opening,
        claim_key=mixed["pairs"].claim_key,
        timeout_s=120,
    )
    verdict = check_verdict(outcome.verdict, mixed["key"].public_key())
    assert verdict.decision == decision
    stub = pb_grpc.VerifierStub(mixed["channel"])
    stored = stub.GetVerdict(pb.GetVerdictRequest(claim_id=outcome.claim_id), timeout=10)
    result = replay(verdict, stored.transcript)
    assert result.decision == verdict.decision
    assert result.indicators == verdict.indicators
    seen = set(mixed["oracles"][model].request_shapes)
    assert seen == set(SHAPES)  # every shape asked, each request of one shape


def test_queries_of_one_shape_stay_one_array():
    queries = [np.full((2, 3, 1), float(n), np.float32) for n in range(4)]
    sent = in_sent_order(queries, [2, 0, 3, 1])
    assert isinstance(sent, np.ndarray)
    assert [float(q[0, 0, 0]) for q in sent] == [2.0, 0.0, 3.0, 1.0]


def test_mixed_queries_go_per_shape_and_come_back_in_sent_order():
    small, large = (np.zeros((2, 2, 1), np.float32), np.zeros((3, 3, 3), np.float32))
    sent = [small + 1, large + 2, small + 3, large + 4, small + 5]
    assert request_runs([tuple(q.shape) for q in sent], lambda shape: 8) == [[0, 2, 4], [1, 3]]
    assert request_runs([tuple(q.shape) for q in sent], lambda shape: 2) == [[0, 2], [4], [1, 3]]
    requests = []

    def ask(batch):
        requests.append(batch.shape)
        return ClassifyAnswer(labels=batch.reshape(len(batch), -1)[:, 0].astype(np.int64))

    answer = by_shape(
        sent,
        ask,
        ClassifyAnswer.concatenate,
        lambda a, index: ClassifyAnswer(labels=a.labels[index]),
        lambda shape: 2,
    )
    assert requests == [(2, 2, 2, 1), (1, 2, 2, 1), (2, 3, 3, 3)]
    assert answer.labels.tolist() == [1, 2, 3, 4, 5]


def test_a_request_answered_with_the_wrong_number_of_rows_is_invalid():
    sent = [np.zeros((2, 2, 1), np.float32), np.zeros((3, 3, 1), np.float32)]
    with pytest.raises(OracleError, match="rows for a request"):
        by_shape(
            sent,
            lambda batch: ClassifyAnswer(labels=np.zeros(len(batch) + 1, np.int64)),
            ClassifyAnswer.concatenate,
            lambda a, index: a,
            lambda shape: 8,
        )
