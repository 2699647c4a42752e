"""What the arbiter signs, checked before it is signed: receipts, checkpoints, verdicts.

Every signature the arbiter makes goes through a :class:`~twinaudit.protocol.signer.Signer` that
runs :func:`check_signable` first: the kind must be one of :data:`SIGNED_KINDS`, the
payload must decode strictly as that kind (canonical encoding, the schema of spec §9.3,
§9.4 or §11) and must name this signer's key id as its ``arbiter``. A process that can
ask for signatures (the verifier, whose claims run beside model children) thus gets
signatures on those three kinds of well-formed payload only, never on arbitrary bytes
or another kind (a receipt made to look like a verdict is refused by its schema).
"""

from __future__ import annotations

from typing import Final

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from twinaudit.protocol.claim.verdict import VERDICT_KIND, parse_verdict
from twinaudit.protocol.encoding import decode
from twinaudit.protocol.errors import InputError
from twinaudit.protocol.escrow_messages import (
    CHECKPOINT_KIND,
    RECEIPT_KIND,
    decode_checkpoint,
    decode_receipt,
)
from twinaudit.protocol.limits import MAX_ENVELOPE_PAYLOAD_BYTES
from twinaudit.protocol.signer import KeySigner, Signer

#: The kinds of payload an arbiter signs (spec §9.3, §9.4, §11).
SIGNED_KINDS: Final = (RECEIPT_KIND, CHECKPOINT_KIND, VERDICT_KIND)


def check_signable(payload: bytes, kind: str, key_id: str) -> None:
    """Refuse (``InputError``) a payload the arbiter must not sign as ``kind`` with ``key_id``."""
    if kind not in SIGNED_KINDS:
        raise InputError(f"the arbiter signs {', '.join(SIGNED_KINDS)} payloads, not {kind!r}")
    if not isinstance(payload, bytes) or len(payload) > MAX_ENVELOPE_PAYLOAD_BYTES:
        raise InputError(f"a payload to sign is at most {MAX_ENVELOPE_PAYLOAD_BYTES} bytes")
    if kind == RECEIPT_KIND:
        arbiter = decode_receipt(payload).arbiter
    elif kind == CHECKPOINT_KIND:
        arbiter = decode_checkpoint(payload).arbiter
    else:
        arbiter = parse_verdict(decode(payload)).arbiter
    if arbiter != key_id:
        raise InputError(f"a {kind} payload names arbiter {arbiter!r}, not this signer's key")


def arbiter_signer(key: Ed25519PrivateKey) -> KeySigner:
    """Return an in-process signer of the arbiter's three kinds, each payload checked."""
    return KeySigner(key, kinds=SIGNED_KINDS, check=check_signable)


def as_signer(key: Signer | Ed25519PrivateKey) -> Signer:
    """Return ``key`` if it is a :class:`Signer`, else an :func:`arbiter_signer` of the key."""
    if isinstance(key, Signer):
        return key
    if isinstance(key, Ed25519PrivateKey):
        return arbiter_signer(key)
    raise InputError("the arbiter's signing key must be a Signer or an Ed25519PrivateKey")


__all__ = ["SIGNED_KINDS", "arbiter_signer", "as_signer", "check_signable"]
