"""Claims on a vault of 12-megapixel photos (issue #39 part 1), end to end over gRPC.

A pair of 12-MP colour photos is 72 MB of openings, above the 64 MiB message cap: on
main 30eb2ba the owner's single Openings message failed with "Sent message larger than
max", and a model with a fixed 32x32 input got the photos at their own size ("mat1 and
mat2 shapes cannot be multiplied"). Here the openings go in messages and parts under
the cap (spec §10.2 step 4), the arbiter fits every query to the model's declared input
(rule ``area``, §10.2 step 5), and the claims run to verdicts that check, replay, and
replay with the openings.

A model that declares no input shape gets each photo at its own size: a float32 query of
a 12-MP colour photo is 144 MB, so it goes alone in a request of its own.

The photos are made here (never committed): small textured images blown up to 4000x3000
(or 3000x4000, or grey) with a fine grain, marked with a pattern that the fitting keeps.
"""

from __future__ import annotations

import importlib.util
from typing import Any

import numpy as np
import pytest
import torch
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from torch import nn

from demo.seeded import fixed_salts
from tests.support.arbiter import sqlite_arbiter
from tests.support.claims import claim_params
from tests.support.pairset import PairSet
from twinaudit.owner.claim_client import run_claim
from twinaudit.practitioner.formats import load_model
from twinaudit.practitioner.grpc_server import serve_oracle
from twinaudit.practitioner.torch_oracle import TorchClassifierOracle
from twinaudit.protocol.claim.openings import OpenedPair, encode_openings
from twinaudit.protocol.claim.verdict import check_verdict
from twinaudit.protocol.commitment import PairOpening
from twinaudit.protocol.items import ImageItem, encode_item
from twinaudit.protocol.oracles.base import ClassifierOracle, ClassifyAnswer, OracleInfo
from twinaudit.protocol.seeds import publication_bits
from twinaudit.verifier.reexecute import check_openings
from twinaudit.verifier.replay import replay
from twinaudit.verifier.scoring.fit import fit_image
from twinaudit.wire.transport import make_channel
from twinaudit.wire.verifier.v1 import verifier_pb2 as pb
from twinaudit.wire.verifier.v1 import verifier_pb2_grpc as pb_grpc

pytestmark = pytest.mark.slow

#: The model's input: what the fixed-input model and the OIP model declare.
INPUT = (32, 32, 3)
#: 12-megapixel photos: landscape and portrait colour, and grey.
PHOTO_SHAPES = ((3000, 4000, 3), (4000, 3000, 3), (3000, 4000, 1))
EPSILON = 24
KEY = Ed25519PrivateKey.from_private_bytes(bytes(range(32)))


def _blow_up(small: np.ndarray[Any, Any], height: int, width: int) -> np.ndarray[Any, Any]:
    """Repeat each pixel of ``small`` over a block, the blocks covering height x width."""
    rows = np.diff(np.rint(np.linspace(0, height, small.shape[0] + 1)).astype(int))
    cols = np.diff(np.rint(np.linspace(0, width, small.shape[1] + 1)).astype(int))
    return np.repeat(np.repeat(small, rows, axis=0), cols, axis=1)


def _photos(count: int, seed: int) -> tuple[list[tuple[ImageItem, ImageItem]], list[int]]:
    """``count`` pairs of 12-MP photos whose two versions differ by a ±EPSILON block mark."""
    rng = np.random.default_rng(seed)
    grain = {}
    for height, width, _ in PHOTO_SHAPES:
        grain[(height, width)] = rng.integers(-3, 4, (height, width, 1), dtype=np.int16)
    pairs, labels = [], []
    for index in range(count):
        height, width, channels = PHOTO_SHAPES[index % len(PHOTO_SHAPES)]
        small = rng.integers(2 * EPSILON, 256 - 2 * EPSILON, (32, 32, channels), dtype=np.int16)
        mark = EPSILON * np.where(rng.random((32, 32, channels)) < 0.5, -1, 1).astype(np.int16)
        label = int(rng.integers(0, 10))
        versions = []
        for sign in (1, -1):
            photo = _blow_up(small + sign * mark, height, width) + grain[(height, width)]
            versions.append(ImageItem(np.clip(photo, 0, 255).astype(np.uint8), label))
        pairs.append((versions[0], versions[1]))
        labels.append(label)
    return pairs, labels


class FixedInput(nn.Module):
    """A classifier that takes (N, 3, 32, 32) only: conv, then a dense layer on its map."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.fc = nn.Linear(4 * 32 * 32, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(torch.relu(self.conv(x)).flatten(1))


class Recording(ClassifierOracle):
    """Forwards to ``inner`` and keeps the shape of every request it gets."""

    def __init__(self, inner: ClassifierOracle) -> None:
        self.inner = inner
        self.shapes: set[tuple[int, ...]] = set()

    @property
    def info(self) -> OracleInfo:
        return self.inner.info

    def classify(self, images: Any) -> ClassifyAnswer:
        self.shapes.add(tuple(images.shape[1:]))
        return self.inner.classify(images)


def _vault(tmp, count: int, seed: int):
    pairs, labels = _photos(count, seed)
    versions = [(encode_item(a), encode_item(b)) for a, b in pairs]
    return pairs, labels, PairSet("image", versions, fixed_salts(count))


def _claim(channel, owner, receipt, endpoint, **score):
    request = claim_params(
        receipt.entry.index, owner.root, endpoint, "photos", test_name="mixture-e", **score
    )
    return run_claim(channel, request, owner.opening, claim_key=owner.claim_key, timeout_s=600)


def _checked(channel, outcome, owner):
    """Check the verdict, replay it, and replay it with the openings of its pairs."""
    verdict = check_verdict(outcome.verdict, KEY.public_key())
    stored = pb_grpc.VerifierStub(channel).GetVerdict(
        pb.GetVerdictRequest(claim_id=outcome.claim_id), timeout=60
    )
    result = replay(verdict, stored.transcript)
    assert (result.decision, result.indicators) == (verdict.decision, verdict.indicators)
    openings = [owner.opening(i) for i in verdict.opened]
    opened = [
        OpenedPair(o.index, PairOpening(o.salt, o.version0, o.version1), o.proof) for o in openings
    ]
    if len(opened) <= 3:  # an openings file holds at most 256 MiB (spec §12.1)
        assert check_openings(verdict, stored.transcript, encode_openings(owner.root, opened)) == (
            len(opened)
        )
    return verdict


def _served_claim(tmp_path, owner, oracle, **score):
    """Escrow ``owner``'s pairs, serve ``oracle`` over gRPC, claim; return the checked verdict."""
    server, port = serve_oracle(oracle, "127.0.0.1:0")
    try:
        with sqlite_arbiter(tmp_path, KEY) as address:
            channel = make_channel(address)
            receipt = owner.escrow(channel, KEY.public_key(), "photos owner")
            outcome = _claim(channel, owner, receipt, f"127.0.0.1:{port}", **score)
            verdict = _checked(channel, outcome, owner)
            channel.close()
    finally:
        server.stop(None)
    return verdict


def test_a_fixed_input_model_answers_a_claim_on_12_mp_photos(tmp_path):
    _, _, owner = _vault(tmp_path, 3, seed=39)
    module = torch.jit.script(FixedInput().eval())
    torch.jit.save(module, tmp_path / "fixed.pt")
    model = TorchClassifierOracle(
        load_model(tmp_path / "fixed.pt"), probe_shape=INPUT, model_name="fixed"
    )
    oracle = Recording(model)
    verdict = _served_claim(
        tmp_path,
        owner,
        oracle,
        k=2,
        perturbation="pad-shift-flip-dither",
        knowledge="C2",
        window=2,
        window_max=2,
    )
    assert verdict.decision in ("detected", "not-detected")
    assert sorted(verdict.opened) == [0, 1, 2]
    claim = verdict.claim
    assert claim.input_fit == "area" and claim.oracle_info.input_shape == INPUT
    assert oracle.shapes == {INPUT}  # every query fitted, whatever the photo's shape


class AnySize(ClassifierOracle):
    """A model of any input size: the softmax of each image's mean per channel, scaled.

    It declares no input shape, so it gets every photo at its own size; it records the
    shape and count of every request.
    """

    def __init__(self) -> None:
        self._info = OracleInfo("any-size", "test", ("classify",), "probabilities", 10, 64)
        self.requests: list[tuple[int, ...]] = []

    @property
    def info(self) -> OracleInfo:
        return self._info

    def classify(self, images: Any) -> ClassifyAnswer:
        self.requests.append(tuple(images.shape))
        means = images.astype(np.float64).mean(axis=(1, 2))
        logits = np.concatenate([means, -means, means**2, -(means**2)], axis=1)[:, :10]
        logits = np.pad(logits, ((0, 0), (0, 10 - logits.shape[1]))) * 50.0
        rows = np.exp(logits - logits.max(axis=1, keepdims=True))
        return ClassifyAnswer(probabilities=rows / rows.sum(axis=1, keepdims=True))


def test_a_model_of_any_size_gets_each_12_mp_photo_at_its_own_size(tmp_path):
    _, _, owner = _vault(tmp_path, 2, seed=41)
    oracle = AnySize()
    verdict = _served_claim(tmp_path, owner, oracle, k=1, perturbation="dither", knowledge="C2")
    assert verdict.claim.input_fit == "" and "input_fit" not in verdict.payload["claim"]
    # A float32 query of a 12-MP colour photo is 144 MB: each went alone, at its size.
    assert sorted(oracle.requests) == [(1, 3000, 4000, 3)] * 2 + [(1, 4000, 3000, 3)] * 2


@pytest.mark.skipif(
    importlib.util.find_spec("mlserver") is None, reason="MLServer is not installed (oip extra)"
)
def test_a_model_on_an_oip_server_detects_its_12_mp_training_photos_over_rest_and_grpc(tmp_path):
    from tests.support.oip_server import OipModel, mlserver_process

    pairs, labels, owner = _vault(tmp_path, 6, seed=40)
    with sqlite_arbiter(tmp_path, KEY) as address:
        channel = make_channel(address)
        receipt = owner.escrow(channel, KEY.public_key(), "photos owner")
        bits = publication_bits(owner.root, receipt.rho, len(pairs))
        # The model was trained on the published photos at its input size.
        seen = np.stack([fit_image(pairs[i][b].pixels, INPUT) for i, b in enumerate(bits)])
        models = [OipModel("photos", seen, np.array(labels), dtype="float32")]
        verdicts = []
        with mlserver_process(tmp_path / "models", models) as server:
            for endpoint in (server.rest("photos"), server.grpc_address("photos")):
                outcome = _claim(
                    channel, owner, receipt, endpoint, k=1, perturbation="none", knowledge="C1"
                )
                verdicts.append(_checked(channel, outcome, owner))
        channel.close()
    for verdict in verdicts:  # over REST, then over gRPC
        assert verdict.decision == "detected"
        claim = verdict.claim
        assert claim.input_fit == "area"
        assert claim.oracle_info.input_shape == INPUT
