"""Timestamped Ed25519 checkpoint cosignatures, C2SP ``tlog-cosignature`` v1 (spec §9.5.3).

A cosigner (a witness) states that, at a time it names, the checkpoint it signs is
the largest consistent tree head it has seen for the log named by the checkpoint's
origin line. It signs, with Ed25519, the message

    cosignature/v1 LF
    time <seconds since the Unix epoch, ASCII decimal, no leading zero> LF
    <the checkpoint's note text, its final LF included>

and its note signature (signature type 0x04 of ``signed-note``) is the 8-byte
big-endian timestamp followed by the 64 signature bytes. This module builds and checks
those bytes; :mod:`twinaudit.protocol.note` puts them into signature lines and
:mod:`twinaudit.protocol.checkpoint_note` applies a witness policy.

Pure: no clock. The caller passes the time a cosignature claims.
"""

from __future__ import annotations

from typing import Final

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from .errors import InputError

#: Signature type byte of a timestamped Ed25519 cosignature (C2SP signed-note).
COSIGNATURE_V1: Final = 0x04
#: The header line that separates a cosignature's message from every other signed text.
HEADER: Final = b"cosignature/v1\n"
#: The latest time a cosignature may carry: 2^63 - 1 seconds (tlog-cosignature).
MAX_TIMESTAMP: Final = (1 << 63) - 1
#: Bytes of a cosignature after the key id: the timestamp (8) and the signature (64).
COSIGNATURE_BYTES: Final = 8 + 64


def _check_timestamp(timestamp: int) -> int:
    if isinstance(timestamp, bool) or not isinstance(timestamp, int):
        raise InputError(f"a cosignature time must be an integer, got {type(timestamp).__name__}")
    if not 0 <= timestamp <= MAX_TIMESTAMP:
        raise InputError(f"a cosignature time must be in [0, 2^63 - 1], got {timestamp}")
    return timestamp


def signed_message(text: bytes, timestamp: int) -> bytes:
    """Return the bytes a cosigner signs for note ``text`` at ``timestamp`` (seconds)."""
    _check_timestamp(timestamp)
    if not isinstance(text, bytes) or not text.endswith(b"\n"):
        raise InputError("a cosigned note text is bytes that end in a newline")
    return HEADER + b"time " + str(timestamp).encode("ascii") + b"\n" + text


def sign(text: bytes, timestamp: int, key: Ed25519PrivateKey) -> bytes:
    """Return the 72 bytes of a cosignature of ``text`` at ``timestamp`` (no key id)."""
    signature = key.sign(signed_message(text, timestamp))
    return timestamp.to_bytes(8, "big") + signature


def timestamp_of(cosignature: bytes) -> int:
    """Return the time a cosignature claims (its first 8 bytes, big-endian).

    Raises:
        InputError: the bytes are not 72 long, or the time is above 2^63 - 1.

    """
    if not isinstance(cosignature, bytes) or len(cosignature) != COSIGNATURE_BYTES:
        raise InputError(f"an Ed25519 cosignature is {COSIGNATURE_BYTES} bytes after its key id")
    return _check_timestamp(int.from_bytes(cosignature[:8], "big"))


def verifies(text: bytes, cosignature: bytes, public: Ed25519PublicKey) -> bool:
    """Say whether ``cosignature`` (72 bytes) is ``public``'s cosignature of ``text``.

    A cosignature of the wrong length or with a time above 2^63 - 1 does not verify.
    """
    try:
        message = signed_message(text, timestamp_of(cosignature))
        public.verify(cosignature[8:], message)
    except (InputError, InvalidSignature):
        return False
    return True


__all__ = [
    "COSIGNATURE_BYTES",
    "COSIGNATURE_V1",
    "HEADER",
    "MAX_TIMESTAMP",
    "sign",
    "signed_message",
    "timestamp_of",
    "verifies",
]
