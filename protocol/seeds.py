"""Seeds derived from the escrow record: publication bits and the audit seed (spec §5.5).

The owner commits to every pair (the Merkle root) *before* the arbiter's randomness
``rho`` exists; the arbiter returns ``rho`` in the signed escrow receipt. Which
version of pair ``i`` is published is then

    b_i = bit i of the stream (publication_seed(root, rho), "publication-bits")
    publication_seed(root, rho) = tagged_hash("publication-seed", [root, rho])

so the owner can neither choose nor grind ``b_i``. Everything the verifier draws
during one claim comes from streams of the audit seed

    audit_seed(root, rho, claim_nonce) = tagged_hash("audit-seed", [root, rho, claim_nonce])

where ``claim_nonce`` is fresh arbiter randomness issued when the claim is filed.
"""

from __future__ import annotations

from . import limits
from .errors import InputError, LimitExceededError
from .hashing import tagged_hash
from .prg import bit_stream

#: Label of the publication-bit stream.
PUBLICATION_LABEL = "publication-bits"


def _check(value: bytes, size: int, what: str) -> bytes:
    if not isinstance(value, bytes) or len(value) != size:
        raise InputError(f"{what} must be exactly {size} bytes")
    return value


def publication_seed(root: bytes, rho: bytes) -> bytes:
    """Return the seed of the publication-bit stream of an escrow record."""
    return tagged_hash(
        "publication-seed",
        [_check(root, limits.HASH_BYTES, "root"), _check(rho, limits.RHO_BYTES, "rho")],
    )


def publication_bits(root: bytes, rho: bytes, n_pairs: int, start: int = 0) -> list[bool]:
    """Return ``b_start .. b_{n_pairs-1}``: True means version 1 is published."""
    if not 0 <= start <= n_pairs:
        raise InputError(f"start {start} outside [0, {n_pairs}]")
    if n_pairs > limits.MAX_PAIRS:
        raise LimitExceededError("number of pairs", n_pairs, limits.MAX_PAIRS)
    return bit_stream(publication_seed(root, rho), PUBLICATION_LABEL, start, n_pairs - start)


def audit_seed(root: bytes, rho: bytes, claim_nonce: bytes) -> bytes:
    """Return the seed of every stream the verifier draws from during one claim."""
    return tagged_hash(
        "audit-seed",
        [
            _check(root, limits.HASH_BYTES, "root"),
            _check(rho, limits.RHO_BYTES, "rho"),
            _check(claim_nonce, limits.HASH_BYTES, "claim nonce"),
        ],
    )
