"""Salted commitments to pairs of versions (spec §6).

For pair ``i`` with versions ``v0`` and ``v1`` (their canonical item bytes) and a
32-byte salt drawn from a cryptographically secure source:

    d_k        = tagged_hash("version-digest", v_k)
    commitment = tagged_hash("pair-commitment", [salt, d_0, d_1])

The commitment is hiding (the salt is secret and uniformly random) and binding
(SHA-256 collision resistance). Commitments are the leaves of the escrow record's
Merkle tree (spec §6.2); an opening reveals the salt and both versions.
"""

from __future__ import annotations

import hmac
import secrets
from collections.abc import Sequence
from dataclasses import dataclass

from . import limits
from .encoding import Piece
from .errors import CommitmentError, InputError
from .hashing import tagged_hash, tagged_hash_of_bytes


def version_digest(content: bytes) -> bytes:
    """Return the digest of one version's canonical item bytes (hashed without a copy)."""
    if not isinstance(content, bytes):
        raise InputError("version content must be bytes")
    return tagged_hash_of_bytes("version-digest", [content])


def version_digest_of_pieces(pieces: Sequence[Piece]) -> bytes:
    """Return :func:`version_digest` of the canonical item bytes given in ``pieces``.

    For :func:`~twinaudit.protocol.items.encode_item_pieces`: a large image's pixels are
    hashed where they lie, never copied into one byte string.
    """
    return tagged_hash_of_bytes("version-digest", pieces)


def _check_salt(salt: bytes) -> bytes:
    if not isinstance(salt, bytes) or len(salt) != limits.SALT_BYTES:
        raise InputError(f"salt must be exactly {limits.SALT_BYTES} bytes")
    return salt


def _check_digest(digest: bytes, what: str) -> bytes:
    if not isinstance(digest, bytes) or len(digest) != limits.HASH_BYTES:
        raise InputError(f"{what} must be a {limits.HASH_BYTES}-byte digest")
    return digest


def new_salt() -> bytes:
    """Return a fresh salt from the operating system's CSPRNG (never from the spec PRG)."""
    return secrets.token_bytes(limits.SALT_BYTES)


def pair_commitment(salt: bytes, digest0: bytes, digest1: bytes) -> bytes:
    """Return the commitment to a pair given its salt and the two version digests."""
    return tagged_hash(
        "pair-commitment",
        [_check_salt(salt), _check_digest(digest0, "digest0"), _check_digest(digest1, "digest1")],
    )


@dataclass(frozen=True)
class PairOpening:
    """What an owner reveals to open one committed pair."""

    salt: bytes
    version0: bytes
    version1: bytes

    def digests(self) -> tuple[bytes, bytes]:
        """Return the two version digests."""
        return version_digest(self.version0), version_digest(self.version1)

    def commitment(self) -> bytes:
        """Recompute the commitment this opening opens."""
        d0, d1 = self.digests()
        return pair_commitment(self.salt, d0, d1)


def commit_pair(version0: bytes, version1: bytes, salt: bytes | None = None) -> tuple[bytes, bytes]:
    """Commit to a pair; return ``(commitment, salt)``. A fresh salt is drawn if none is given."""
    salt = new_salt() if salt is None else _check_salt(salt)
    return PairOpening(salt, version0, version1).commitment(), salt


def verify_opening(commitment: bytes, opening: PairOpening) -> None:
    """Raise :class:`CommitmentError` unless ``opening`` opens ``commitment``."""
    _check_digest(commitment, "commitment")
    recomputed = opening.commitment()
    if not hmac.compare_digest(recomputed, commitment):
        raise CommitmentError(
            f"opening does not match commitment {commitment.hex()} (recomputed {recomputed.hex()})"
        )
