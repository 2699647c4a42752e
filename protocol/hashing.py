"""Domain-separated SHA-256 (spec §4).

Every protocol hash other than the RFC 6962 Merkle hashes is a *tagged hash*:

    tagged_hash(name, value) = SHA-256( canonical([ "twinaudit/v0/" + name, value ]) )

The tag names the purpose and the hashing domain version; because the canonical
encoding is injective and the tag is part of the hashed array, two hashes with
different tags can never be confused, whatever their values.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any, Final

from .encoding import Piece, array_header, bin_header, encode
from .errors import EncodingError, InputError

#: Prefix of every tag; bumps only when hashing domains change incompatibly.
TAG_PREFIX: Final = "twinaudit/v0/"

#: The registered tag names (spec §4.2). A tag outside this set is a programming error.
TAGS: Final = frozenset(
    {
        "version-digest",
        "pair-commitment",
        "prg-key",
        "publication-seed",
        "audit-seed",
        "key-id",
        "transcript-link",
        "rho-digest",
        "claim-id",
        "claim-map",
        "verdict-payload",
        "answer-batch",
    }
)


def sha256(data: bytes) -> bytes:
    """Return the plain SHA-256 digest of ``data``."""
    return hashlib.sha256(data).digest()


def tagged_hash(name: str, value: Any) -> bytes:
    """Return ``SHA-256(canonical([TAG_PREFIX + name, value]))`` (32 bytes)."""
    if name not in TAGS:
        raise InputError(f"unregistered hash tag {name!r}")
    return hashlib.sha256(encode([TAG_PREFIX + name, value])).digest()


def tagged_hash_of_bytes(name: str, pieces: Sequence[Piece]) -> bytes:
    """Return ``tagged_hash(name, b"".join(pieces))`` without joining or copying the pieces.

    The same bytes are hashed, in order: the array's header, the tag, the byte string's
    header, then each piece (e.g. :func:`~twinaudit.protocol.encoding.encode_pieces`'
    of an item, whose pixels are a view).
    """
    if name not in TAGS:
        raise InputError(f"unregistered hash tag {name!r}")
    views = [memoryview(piece) for piece in pieces]
    if not all(view.c_contiguous for view in views):
        raise EncodingError("a piece of a byte string must be C-contiguous")
    views = [view.cast("B") for view in views]
    digest = hashlib.sha256(array_header(2) + encode(TAG_PREFIX + name))
    digest.update(bin_header(sum(view.nbytes for view in views)))
    for view in views:
        digest.update(view)
    return digest.digest()
