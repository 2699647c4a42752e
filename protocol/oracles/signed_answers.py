"""Answers the practitioner signs (spec §10.8): what an oracle with an answer key signs.

An oracle may name an Ed25519 public key in its Describe map (``answer_key``). It then
signs every reply (an *answer batch*: one ``Classify``, ``EmbedImages``,
``TokenLogprobs`` or ``EmbedImageText`` call) over

    tagged_hash("answer-batch", [claim_nonce, query_digests, answers])

where ``claim_nonce`` is the 32-byte nonce the verifier sends with every request of a
claim (the claim map's), ``query_digests`` the SHA-256 of each query of the request in
the order sent (an image's ``pixels_f32le`` bytes, a text's UTF-8 bytes; images before
texts) and ``answers`` one *answer row* per query in the same order, each exactly as a
transcript records that query's answer (:func:`classify_rows`, :func:`embedding_rows`,
:func:`logprob_rows`). The signature is pure Ed25519 (RFC 8032) over those 32 bytes.

The rows are a function of the values sent, so the verifier checks a signature from the
reply it decoded, and replay (spec §12) from the transcript alone: an answer changed
after the oracle signed it fails under the oracle's key, whoever signs the verdict.
This module is pure Python + numpy + cryptography (no gRPC).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Final, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from twinaudit.protocol.encoding import Value
from twinaudit.protocol.errors import OracleError
from twinaudit.protocol.hashing import tagged_hash
from twinaudit.protocol.limits import HASH_BYTES

from .base import ANSWER_KEY_BYTES, ClassifyAnswer
from .language import LogprobAnswer

__all__ = [
    "ANSWER_BATCH_TAG",
    "SIGNATURE_BYTES",
    "AnswerSigningClient",
    "SignedBatch",
    "answer_batch_message",
    "answer_signature_valid",
    "check_answer_batch",
    "classify_rows",
    "embedding_rows",
    "image_query_digest",
    "logprob_rows",
    "sign_answer_batch",
    "text_query_digest",
]

#: The tag of the signed message (spec §4.2, §10.8).
ANSWER_BATCH_TAG: Final = "answer-batch"
#: Bytes of an Ed25519 signature.
SIGNATURE_BYTES: Final = 64


def image_query_digest(pixels_f32le: bytes) -> bytes:
    """Return the SHA-256 of one image query as sent: its float32 little-endian pixels."""
    return hashlib.sha256(pixels_f32le).digest()


def text_query_digest(text: str) -> bytes:
    """Return the SHA-256 of one text query as sent: its UTF-8 bytes."""
    return hashlib.sha256(text.encode("utf-8")).digest()


def classify_rows(answer: ClassifyAnswer) -> list[Value]:
    """Return a classify answer's rows: a list of floats per image, or an integer label."""
    return answer.to_value()


def embedding_rows(matrix: npt.NDArray[np.float64]) -> list[Value]:
    """Return one byte string per embedding: its ``D`` binary64 values, little-endian."""
    little = np.ascontiguousarray(matrix, dtype="<f8")
    return [row.tobytes() for row in little]


def logprob_rows(answer: LogprobAnswer) -> list[Value]:
    """Return one list of floats per text: its token log-probabilities."""
    return answer.to_value()


def answer_batch_message(
    claim_nonce: bytes, query_digests: Sequence[bytes], answers: Sequence[Value]
) -> bytes:
    """Return the 32 bytes an oracle signs for one answer batch (spec §10.8)."""
    return tagged_hash(ANSWER_BATCH_TAG, [claim_nonce, list(query_digests), list(answers)])


def sign_answer_batch(
    key: Ed25519PrivateKey,
    claim_nonce: bytes,
    query_digests: Sequence[bytes],
    answers: Sequence[Value],
) -> bytes:
    """Return the oracle's signature of one answer batch."""
    return key.sign(answer_batch_message(claim_nonce, query_digests, answers))


def answer_signature_valid(
    answer_key: bytes,
    claim_nonce: bytes,
    query_digests: Sequence[bytes],
    answers: Sequence[Value],
    signature: bytes,
) -> bool:
    """Return whether ``signature`` signs the batch under the raw public ``answer_key``.

    A key or signature of the wrong length, or a key that is not a point of the curve,
    is not valid: the caller reports the failure with its own code.
    """
    if (
        len(answer_key) != ANSWER_KEY_BYTES
        or len(signature) != SIGNATURE_BYTES
        or len(claim_nonce) != HASH_BYTES
    ):
        return False
    try:
        key = Ed25519PublicKey.from_public_bytes(answer_key)
        key.verify(signature, answer_batch_message(claim_nonce, query_digests, answers))
    except (InvalidSignature, ValueError):
        return False
    return True


def check_answer_batch(
    answer_key: bytes,
    claim_nonce: bytes,
    query_digests: Sequence[bytes],
    answers: Sequence[Value],
    signature: bytes,
) -> None:
    """Check a reply's signature as a verifier receives it (spec §10.8).

    A missing signature (empty bytes) or one that does not verify under ``answer_key``
    over the claim's nonce, the digests of the queries sent and the answers received is
    the oracle's fault: ``oracle-failed`` (``OracleError("invalid-answer")``).
    """
    if not signature:
        raise OracleError("invalid-answer", "the oracle names an answer key but signed nothing")
    if not answer_signature_valid(answer_key, claim_nonce, query_digests, answers, signature):
        raise OracleError(
            "invalid-answer", "the answer's signature does not verify under the oracle's key"
        )


@dataclass(frozen=True)
class SignedBatch:
    """One answer batch as a verifier received it: what was sent, answered and signed.

    ``image_digests`` and ``text_digests`` are the digests of the request's image and
    text queries in the order sent, ``answers`` one row per query (images, then texts)
    and ``signature`` the oracle's, already checked under its answer key.
    """

    image_digests: tuple[bytes, ...]
    text_digests: tuple[bytes, ...]
    answers: tuple[Value, ...]
    signature: bytes

    @property
    def query_digests(self) -> list[bytes]:
        """The request's query digests as signed: images first, then texts."""
        return [*self.image_digests, *self.text_digests]


@runtime_checkable
class AnswerSigningClient(Protocol):
    """An oracle client that sends a claim's nonce and checks signed answers as they come.

    What a claim needs of an oracle whose Describe map names an ``answer_key``: inside
    ``signed_batches(claim_nonce)``, every request carries the nonce and every reply's
    signature is checked under the key as it arrives, the checked batches collected in
    the list yielded, in the order answered.
    """

    def signed_batches(self, claim_nonce: bytes) -> AbstractContextManager[list[SignedBatch]]:
        """Send ``claim_nonce`` with each request of the block; collect its signed batches."""
        ...
