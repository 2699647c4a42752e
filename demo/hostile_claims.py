"""Claims whose oracle is hostile, filed against a running arbiter (issue #40 N2).

:func:`file_hostile_claims` escrows one record and files claims on it, all naming the
same oracle address (a dripping server of :mod:`demo.hostile_http`, say), and returns
the claim streams without reading them: each claim's thread on the arbiter is then
held by its oracle for as long as the oracle makes it wait. Used by
tests/verifier/test_outbound_limits.py and ``python -m bench outbound``.
"""

from __future__ import annotations

from typing import Any

import grpc
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from twinaudit.owner.claim_client import sign_start
from twinaudit.owner.escrow_client import escrow_root
from twinaudit.protocol.claim.functions import score_request_from_fields
from twinaudit.protocol.keys import key_id, raw_public_key
from twinaudit.verifier.claim import ClaimParams
from twinaudit.wire.claim_start import to_claim_start
from twinaudit.wire.verifier.v1 import verifier_pb2 as vpb

#: The escrowed root the claims are filed on (8 image pairs).
ROOT = bytes([7]) * 32
FILE_CLAIM = "/twinaudit.verifier.v1.Verifier/FileClaim"
#: The owner's claim key the record binds; it signs each claim (spec §10.7).
CLAIM_KEY = Ed25519PrivateKey.from_private_bytes(bytes(range(7, 39)))


def file_hostile_claims(
    channel: grpc.Channel, arbiter_key: Ed25519PublicKey, oracle: str, count: int
) -> list[Any]:
    """Escrow :data:`ROOT` and file ``count`` claims on it naming ``oracle``; return the calls.

    Cancel each call when done; each has a deadline of two minutes.
    """
    escrow_root(
        channel,
        root=ROOT,
        n_pairs=8,
        item_kind="image",
        owner="o",
        claim_key=raw_public_key(CLAIM_KEY.public_key()),
        arbiter_public_key=arbiter_key,
    )
    score = score_request_from_fields("image-classifier", 1, "none", "C1")
    params = ClaimParams(0, ROOT, oracle, "m", score, "mixture-graded", 0.05)
    file_claim = channel.stream_stream(
        FILE_CLAIM,
        request_serializer=vpb.ClaimMessage.SerializeToString,
        response_deserializer=vpb.VerifierMessage.FromString,
    )

    def signed() -> vpb.ClaimMessage:
        start = to_claim_start(params)
        sign_start(start, CLAIM_KEY, key_id(arbiter_key))  # a fresh nonce for each claim
        return vpb.ClaimMessage(start=start)

    return [file_claim(iter([signed()]), timeout=120) for _ in range(count)]
