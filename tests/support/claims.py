"""Build real claims in-process (no gRPC) for tests of verdicts, replay and the CLI."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from demo.pairset import PairSet
from demo.seeded import fixed_salts
from demo.synthetic import synthetic_pairs
from tests.support.fake_oracle import LinearOracle
from twinaudit.owner.claim_client import FAMILY_K, UNLABELLED_FAMILY
from twinaudit.protocol import SPEC_VERSION
from twinaudit.protocol.claim.functions import (
    SCORE_FUNCTIONS,
    ScoreRequest,
    score_request_from_fields,
)
from twinaudit.protocol.claim.scores.classifier import BASIC_ARITHMETIC, ScoreSpec
from twinaudit.protocol.encoding import encode
from twinaudit.protocol.envelope import payload_type, sign_envelope
from twinaudit.protocol.items import encode_item
from twinaudit.protocol.keys import key_id
from twinaudit.protocol.stats.base import TiePolicy
from twinaudit.verifier.claim import ClaimParams, ClaimRecord, ClaimSession
from twinaudit.wire.verifier.v1 import verifier_pb2 as pb

#: The fields of a claim's score (the ``ScoreSpec`` message), unset as the message leaves them.
SCORE_FIELDS = {"k": 0, "perturbation": "", "knowledge": "", "statistic": "", "margin": 0.0}


def score_request(function: str = "image-classifier", **fields: Any) -> ScoreRequest:
    """The score ``function`` asks for: its table defaults but for ``fields``, checked.

    The defaults are :data:`~twinaudit.protocol.claim.functions.SCORE_FUNCTIONS`' (the
    image-classifier's K = 1, ``dither``, the entropy, no margin), not
    :func:`~twinaudit.owner.claim_client.choose_score`'s choices, except the image-classifier's
    knowledge: C2, the probabilities without labels, which one ``dither`` copy serves
    (the table's word ``unlabelled`` resolves to C4, which needs copies that differ).
    A knowledge word stays a word, for the verifier to resolve against the oracle's
    description; a field the function does not take stays unset.
    """
    defaults = SCORE_FUNCTIONS[function].defaults()
    if "knowledge" in defaults:
        defaults["knowledge"] = "C2"
    values: dict[str, Any] = {**SCORE_FIELDS, **defaults, **fields}
    return score_request_from_fields(
        function,
        values["k"],
        values["perturbation"],
        values["knowledge"],
        values["statistic"],
        margin=values["margin"],
    )


def claim_params(
    record_index: int,
    record_root: bytes,
    endpoint: str,
    model_name: str,
    *,
    function: str = "image-classifier",
    test_name: str = "mixture-graded",
    p: float = 0.05,
    tie_rule: TiePolicy = TiePolicy.SKIP,
    **fields: Any,
) -> ClaimParams:
    """A claim's typed parameters, the form ``twinaudit owner claim`` files, checked here.

    ``fields`` holds the score's fields (:data:`SCORE_FIELDS`, for :func:`score_request`)
    and any other of :class:`ClaimParams` (``max_pairs``, ``window``, ...); the test and
    p default to ``RawClaimStart``'s (mixture-graded at 0.05).
    """
    score = {name: fields.pop(name) for name in SCORE_FIELDS if name in fields}
    return ClaimParams(
        record_index=record_index,
        record_root=record_root,
        endpoint=endpoint,
        model_name=model_name,
        score=score_request(function, **score),
        test_name=test_name,
        p=p,
        tie_rule=tie_rule,
        **fields,
    )


def linear_claim(
    record_index: int, record_root: bytes, endpoint: str, **fields: Any
) -> ClaimParams:
    """A small claim on a :class:`~tests.support.fake_oracle.LinearOracle` (named ``linear``).

    The image classifier with one dithered copy a query, knowing C1, at most 8 pairs in
    windows of 4, unless ``fields`` say otherwise (as for :func:`claim_params`).
    """
    return claim_params(
        record_index,
        record_root,
        endpoint,
        "linear",
        k=1,
        perturbation="dither",
        knowledge="C1",
        **{"max_pairs": 8, "window": 4, **fields},
    )


def make_pairset(n=40, seed=3, epsilon=16, *, salt_seed=None):
    """Commit ``n`` synthetic pairs: fresh salts, or salts hashed from ``salt_seed`` so
    that the root, and with it every choice a claim draws, is the same on every run."""
    pairs = synthetic_pairs(n, seed=seed, epsilon=epsilon)
    versions = [tuple(encode_item(item) for item in pairs.items(i)) for i in range(n)]
    if salt_seed is None:
        return PairSet.commit("image", versions)
    return PairSet("image", versions, fixed_salts(n, salt_seed))


def run_session(
    pair_set,
    oracle=None,
    *,
    test="mixture-e",
    score=None,
    rho=None,
    claim_nonce=None,
    arithmetic=BASIC_ARITHMETIC,
    **params,
):
    """Run a whole claim against ``oracle`` (a LinearOracle by default); return the session.

    ``rho`` and ``claim_nonce`` are fresh unless given; with both given and a pair set
    from ``make_pairset(salt_seed=...)`` the claim is the same on every run.
    ``arithmetic`` "" runs a claim of the rule before ``basic-v1`` (spec §1.2)."""
    rho = rho or os.urandom(32)
    record = ClaimRecord(0, pair_set.root, len(pair_set), "image", rho, "2026-11-21T20:00:00Z")
    score = score or ScoreSpec(k=2, perturbation="pad-shift-flip", knowledge="C1")
    claim = ClaimParams(0, pair_set.root, "in-process", "linear", score, test, 0.05, **params)
    session = ClaimSession.start(
        "claim-1",
        record,
        claim,
        oracle or LinearOracle(),
        claim_nonce or os.urandom(32),
        arithmetic=arithmetic,
    )
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


@dataclass(frozen=True)
class RawClaimStart:
    """A ``ClaimStart``'s raw fields, unchecked, with the defaults of a claim without labels.

    Those are what ``owner claim`` files for an image vault without committed labels:
    the image-classifier, the word ``unlabelled`` (C4), ``pad-shift-flip-dither`` at
    ``FAMILY_K`` copies, the graded test at p = 0.05. The owner's client files checked
    :class:`ClaimParams`; this field form is for tests that must also send what the
    verifier refuses: :func:`~twinaudit.owner.claim_client.run_claim` takes its message.
    """

    record_index: int
    record_root: bytes
    oracle_endpoint: str
    model_name: str
    score_function: str = "image-classifier"
    k: int = FAMILY_K
    perturbation: str = UNLABELLED_FAMILY
    #: The classifier's statistic: "" (the paper's entropy) or ``logit`` (spec §10.3).
    statistic: str = ""
    #: The classifier's tie margin (spec §7.1, §10.3): 0 ties equal scores only.
    margin: float = 0.0
    #: C1–C4, or a word the verifier resolves from the oracle's description (§10.1).
    knowledge: str = "unlabelled"
    test: str = "mixture-graded"
    p: float = 0.05
    alpha: float = 0.0
    tie_rule: str = "skip"
    max_pairs: int = 0
    query_budget: int = 0
    window: int = 0
    window_max: int = 0
    fresh_pairs: bool = False

    def to_proto(self) -> pb.ClaimStart:
        """Return the ClaimStart message."""
        return pb.ClaimStart(
            spec_version=SPEC_VERSION,
            record_index=self.record_index,
            record_root=self.record_root,
            model=pb.ModelRef(oracle_endpoint=self.oracle_endpoint, name=self.model_name),
            score=pb.ScoreSpec(
                function=self.score_function,
                k=self.k,
                perturbation=self.perturbation,
                knowledge=self.knowledge,
                statistic=self.statistic,
                margin=self.margin,
            ),
            test=pb.TestSpec(name=self.test, p=self.p, alpha=self.alpha),
            tie_rule=self.tie_rule,
            max_pairs=self.max_pairs,
            query_budget=self.query_budget,
            window=self.window,
            window_max=self.window_max,
            fresh_pairs=self.fresh_pairs,
        )
