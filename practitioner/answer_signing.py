"""The practitioner's side of signed answers (spec §10.8): sign every reply of the oracle.

An :class:`AnswerSigner` holds the oracle's answer key (an Ed25519 private key that only
``twinaudit oracle serve`` loads, never the arbiter). For every query RPC it digests the
request's queries as received, takes the reply's answer rows (what a transcript records
of each query's answer) and signs them over the request's ``claim_nonce``
(:mod:`twinaudit.protocol.oracles.signed_answers`); the servicer sets the signature on
the reply before it is sent.
"""

from __future__ import annotations

from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from twinaudit.protocol.encoding import Value
from twinaudit.protocol.errors import InputError
from twinaudit.protocol.keys import raw_public_key
from twinaudit.protocol.limits import HASH_BYTES
from twinaudit.protocol.oracles.signed_answers import (
    image_query_digest,
    sign_answer_batch,
    text_query_digest,
)


class AnswerSigner:
    """Sign answer batches with the oracle's answer key."""

    def __init__(self, key: Ed25519PrivateKey) -> None:
        """Sign with ``key``; its public half goes into the Describe map."""
        self._key = key
        #: The raw public key the Describe map names (``answer_key``).
        self.public_key = raw_public_key(key.public_key())

    def sign(self, request: Any, answers: list[Value]) -> bytes:
        """Return the signature of ``answers`` (one row per query) to ``request``.

        ``request`` is a query RPC's request message: its ``images`` (if any) and then its
        ``texts`` (if any) are the queries, in that order, and ``claim_nonce`` the claim's
        nonce. A nonce that is neither empty nor 32 bytes is ``invalid-input``: a signature
        over an empty nonce binds no claim, and no verifier accepts it.
        """
        nonce = bytes(request.claim_nonce)
        if len(nonce) not in (0, HASH_BYTES):
            raise InputError(f"claim_nonce must be empty or {HASH_BYTES} bytes")
        digests = [
            image_query_digest(image.pixels_f32le) for image in getattr(request, "images", [])
        ]
        digests += [text_query_digest(text) for text in getattr(request, "texts", [])]
        return sign_answer_batch(self._key, nonce, digests, answers)
