"""Ed25519 signing keys: generation, PEM files, key ids (spec §8.3).

A key id is ``hex(tagged_hash("key-id", raw_public_key))`` — a *hint* that helps a
verifier pick a key, never a reason to trust one. Private keys are written as
PKCS#8 PEM with owner-only permissions (0600), atomically: a crash leaves either no
file or the complete file, never a partial key.
"""

from __future__ import annotations

from pathlib import Path

from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from .atomic_file import write_atomically
from .errors import InputError, LimitExceededError
from .hashing import tagged_hash

#: Largest key file accepted.
MAX_KEY_FILE_BYTES = 16 * 1024


def generate_private_key() -> Ed25519PrivateKey:
    """Return a new Ed25519 private key from the OS CSPRNG."""
    return Ed25519PrivateKey.generate()


def raw_public_key(key: Ed25519PublicKey) -> bytes:
    """Return the 32-byte raw encoding of a public key."""
    return key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def key_id(key: Ed25519PublicKey) -> str:
    """Return the key id (64 lowercase hex characters) of a public key."""
    return tagged_hash("key-id", raw_public_key(key)).hex()


def public_key_from_raw(raw: bytes) -> Ed25519PublicKey:
    """Parse a 32-byte raw Ed25519 public key."""
    if not isinstance(raw, bytes) or len(raw) != 32:
        raise InputError("a raw Ed25519 public key is exactly 32 bytes")
    return Ed25519PublicKey.from_public_bytes(raw)


def private_key_pem(key: Ed25519PrivateKey) -> bytes:
    """Return the PKCS#8 PEM (unencrypted) of a private key."""
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def public_key_pem(key: Ed25519PublicKey) -> bytes:
    """Return the SubjectPublicKeyInfo PEM of a public key."""
    return key.public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )


def _write_new_key_file(path: Path, data: bytes, mode: int) -> None:
    """Write the key file ``path`` atomically; it must not exist, even at the last moment."""
    if path.exists():
        raise InputError(f"{path} already exists; refusing to overwrite a key file")
    try:
        write_atomically(path, data, mode=mode, exclusive=True)
    except FileExistsError:
        raise InputError(f"{path} appeared meanwhile; refusing to overwrite a key file") from None


def write_keypair(private_path: Path) -> Ed25519PrivateKey:
    """Generate a key pair; write ``private_path`` (0600) and ``<private_path>.pub`` (0644)."""
    key = generate_private_key()
    public_path = private_path.with_name(private_path.name + ".pub")
    if public_path.exists():
        raise InputError(f"{public_path} already exists; refusing to overwrite a key file")
    _write_new_key_file(private_path, private_key_pem(key), 0o600)
    _write_new_key_file(public_path, public_key_pem(key.public_key()), 0o644)
    return key


def _read_bounded(path: Path) -> bytes:
    try:
        with path.open("rb") as handle:
            data = handle.read(MAX_KEY_FILE_BYTES + 1)
    except OSError as exc:
        raise InputError(f"cannot read key file {path}: {exc.strerror}") from None
    if len(data) > MAX_KEY_FILE_BYTES:
        raise InputError(f"key file {path} is larger than {MAX_KEY_FILE_BYTES} bytes")
    return data


def require_owner_only(path: Path, what: str = "private key") -> None:
    """Refuse a secret file that other users can access (spec §8.3: mode 0600).

    Any permission bit for the group or others is refused with an
    :class:`~twinaudit.protocol.errors.InputError` naming the file and its mode. A missing file
    passes: reading it then fails with its own error. Used for the arbiter's signing
    key, a server's TLS key and an owner's vault secret alike.
    """
    try:
        mode = path.stat().st_mode
    except OSError:
        return
    if mode & 0o077:
        raise InputError(
            f"{what} {path} is accessible by other users (mode {mode & 0o777:o}); chmod 600 it"
        )


def load_private_key(path: Path) -> Ed25519PrivateKey:
    """Load an Ed25519 private key from a PKCS#8 PEM file; refuse group/world-readable files."""
    require_owner_only(path)
    try:
        key = serialization.load_pem_private_key(_read_bounded(path), password=None)
    except (ValueError, TypeError, UnsupportedAlgorithm) as exc:
        raise InputError(f"{path} is not an unencrypted PEM private key: {exc}") from None
    if not isinstance(key, Ed25519PrivateKey):
        raise InputError(f"{path} holds a {type(key).__name__}, not an Ed25519 key")
    return key


def load_public_key(path: Path) -> Ed25519PublicKey:
    """Load an Ed25519 public key from a SubjectPublicKeyInfo PEM file."""
    return load_public_key_pem(_read_bounded(path), str(path))


def load_public_key_pem(data: bytes, what: str = "the key") -> Ed25519PublicKey:
    """Parse an Ed25519 public key from SubjectPublicKeyInfo PEM bytes (at most 16 KiB)."""
    if len(data) > MAX_KEY_FILE_BYTES:
        raise LimitExceededError(f"size of {what}", len(data), MAX_KEY_FILE_BYTES)
    try:
        key = serialization.load_pem_public_key(data)
    except (ValueError, UnsupportedAlgorithm) as exc:
        raise InputError(f"{what} is not a PEM public key: {exc}") from None
    if not isinstance(key, Ed25519PublicKey):
        raise InputError(f"{what} holds a {type(key).__name__}, not an Ed25519 key")
    return key
