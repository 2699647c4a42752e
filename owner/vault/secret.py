"""The vault secret and what derives from it: per-pair salts, the marking seed, a check value.

Each is ``HMAC-SHA256(secret, message)`` where the message starts with its own ASCII
label under the ``twinaudit/vault/v1/`` prefix, so no two derivations can collide:

    salt_i        = HMAC-SHA256(secret, "twinaudit/vault/v1/pair-salt" ‖ 0x00 ‖ uint64be(i))
    marking seed  = HMAC-SHA256(secret, "twinaudit/vault/v1/marking-seed")
    check value   = HMAC-SHA256(secret, "twinaudit/vault/v1/secret-check")
    claim key     = the Ed25519 key whose 32-byte seed (RFC 8032) is
                    HMAC-SHA256(secret, "twinaudit/vault/v1/claim-key")
 HMAC-SHA256 is a
pseudo-random function: as long as the 32-byte secret stays secret, the salts are
indistinguishable from fresh random salts and the commitments stay hiding (spec §6.1);
the check value recorded in the journal reveals nothing about the secret.
"""

from __future__ import annotations

import hmac
from pathlib import Path
from typing import Final

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from twinaudit.protocol import limits
from twinaudit.protocol.errors import InputError, VaultIntegrityError

from . import files
from .layout import SECRET_BYTES, SECRET_FILE

_SALT: Final = b"twinaudit/vault/v1/pair-salt\x00"
_MARKING_SEED: Final = b"twinaudit/vault/v1/marking-seed"
_CHECK: Final = b"twinaudit/vault/v1/secret-check"
_CLAIM_KEY: Final = b"twinaudit/vault/v1/claim-key"


def check_secret(secret: object) -> bytes:
    """Return ``secret`` if it is exactly 32 bytes, else raise InputError."""
    if not isinstance(secret, bytes) or len(secret) != SECRET_BYTES:
        raise InputError(f"the vault secret must be exactly {SECRET_BYTES} bytes")
    return secret


def pair_salt(secret: bytes, index: int) -> bytes:
    """Return the 32-byte commitment salt of pair ``index``."""
    salt = hmac.digest(secret, _SALT + index.to_bytes(8, "big"), "sha256")
    assert len(salt) == limits.SALT_BYTES
    return salt


def marking_seed(secret: bytes) -> bytes:
    """Return the 32-byte seed of the marking run's randomness."""
    return hmac.digest(secret, _MARKING_SEED, "sha256")


def claim_key(secret: bytes) -> Ed25519PrivateKey:
    """Return the owner's claim key (spec §10.7), which signs her claims on the record.

    It derives from the secret, so every vault has one, an old vault too, and it is
    kept wherever the secret is: whoever holds the vault can file claims on its record.
    """
    return Ed25519PrivateKey.from_private_bytes(hmac.digest(secret, _CLAIM_KEY, "sha256"))


def secret_check(secret: bytes) -> bytes:
    """Return a 32-byte value that identifies the secret without revealing it."""
    return hmac.digest(secret, _CHECK, "sha256")


def read_secret(vault: Path) -> bytes:
    """Read the secret file of ``vault``; it must hold exactly 32 bytes."""
    try:
        secret = files.read_bounded(vault / SECRET_FILE, SECRET_BYTES)
    except OSError as exc:
        raise VaultIntegrityError(vault, SECRET_FILE, f"cannot be read: {exc.strerror}") from None
    if len(secret) != SECRET_BYTES:
        raise VaultIntegrityError(vault, SECRET_FILE, f"does not hold {SECRET_BYTES} bytes")
    return secret
