"""Build real claims in-process (no gRPC) for tests of verdicts, replay and the CLI."""

from __future__ import annotations

import os

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from protocol.claim.scores.classifier import ScoreSpec
from protocol.encoding import encode
from protocol.envelope import payload_type, sign_envelope
from protocol.items import encode_item
from protocol.keys import key_id
from tests.support.data import synthetic_pairs
from tests.support.fake_oracle import LinearOracle
from tests.support.pairset import PairSet
from verifier.claim import ClaimParams, ClaimRecord, ClaimSession


def make_pairset(n=40, seed=3, epsilon=16):
    pairs = synthetic_pairs(n, seed=seed, epsilon=epsilon)
    versions = [tuple(encode_item(item) for item in pairs.items(i)) for i in range(n)]
    return PairSet.commit("image", versions)


def run_session(pair_set, oracle=None, *, test="mixture-e", score=None, rho=None, **params):
    """Run a whole claim against ``oracle`` (a LinearOracle by default); return the session."""
    rho = rho or os.urandom(32)
    record = ClaimRecord(0, pair_set.root, len(pair_set), "image", rho, "2026-11-21T20:00:00Z")
    score = score or ScoreSpec(k=2, perturbation="pad-shift-flip", knowledge="C1")
    claim = ClaimParams(0, pair_set.root, "in-process", "linear", score, test, 0.05, **params)
    session = ClaimSession.start("claim-1", record, claim, oracle or LinearOracle(), os.urandom(32))
    while indices := session.next_request():
        session.submit([(i, pair_set.pair_opening(i), pair_set.opening(i).proof) for i in indices])
    return session


def signed_verdict(session, key: Ed25519PrivateKey):
    payload = session.verdict_payload(
        arbiter=key_id(key.public_key()),
        time="2026-11-21T21:00:00Z",
        environment={"python": "3.11"},
    )
    return sign_envelope(encode(payload), payload_type("verdict"), key).to_json()


class SeededEntropy:
    """A reproducible stand-in for the arbiter's CSPRNG (tests only): SHAKE-256 of a counter."""

    def __init__(self, seed: bytes) -> None:
        self._seed = seed
        self._counter = 0

    def __call__(self, n: int) -> bytes:
        import hashlib

        self._counter += 1
        return hashlib.shake_256(self._seed + self._counter.to_bytes(8, "big")).digest(n)


def fixed_salts(n: int, seed: bytes = b"salts") -> list[bytes]:
    """Reproducible salts for tests (real owners use protocol.commitment.new_salt)."""
    import hashlib

    return [hashlib.sha256(seed + i.to_bytes(8, "big")).digest() for i in range(n)]
