"""Who signs for the arbiter: the :class:`Signer` interface and the in-process :class:`KeySigner`.

The arbiter signs three kinds of payload (spec §8): escrow receipts, log checkpoints
and verdicts, and, as a :class:`NoteSigner`, its checkpoints' note texts (§9.5.4). Code
that signs them takes a :class:`Signer`, never a private key, so
that a deployed arbiter can keep its key in a separate process
(:mod:`twinaudit.verifier.signer_process`) while tests and libraries sign in process with a
:class:`KeySigner`. A signer signs only the kinds it is made for, and may check each
payload before signing it (``check``): it is not a signing oracle for other kinds.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import Protocol, runtime_checkable

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from .checkpoint_note import require_arbiter_text
from .envelope import Envelope, Signature, pae, payload_type, sign_envelope
from .errors import InputError, SignatureError
from .keys import key_id

#: A check run on each payload before it is signed: ``check(payload, kind, key_id)``
#: raises (an :class:`~twinaudit.protocol.errors.InputError`) for a payload it must not sign.
PayloadCheck = Callable[[bytes, str, str], None]


@runtime_checkable
class Signer(Protocol):
    """Signs the arbiter's payloads with one Ed25519 key it may keep to itself."""

    @property
    def public_key(self) -> Ed25519PublicKey:
        """The public key signatures verify under."""

    @property
    def key_id(self) -> str:
        """The key id of :attr:`public_key` (spec §8.3)."""

    def sign(self, payload: bytes, kind: str) -> Envelope:
        """Return ``payload`` (canonical bytes) signed as an envelope of message ``kind``."""


@runtime_checkable
class NoteSigner(Protocol):
    """Signs the arbiter's checkpoint note texts (spec §9.5.4) with its key."""

    @property
    def public_key(self) -> Ed25519PublicKey:
        """The public key signatures verify under."""

    def sign_note(self, text: bytes) -> bytes:
        """Return the 64-byte Ed25519 signature of ``text``, an arbiter checkpoint text.

        Any other text is refused (an :class:`~twinaudit.protocol.errors.InputError`).
        """


class PublicKeyHolder:
    """The public half of a :class:`Signer`: its public key and key id."""

    def __init__(self, public: Ed25519PublicKey) -> None:
        """Hold ``public`` and its key id."""
        self._public = public
        self._key_id = key_id(public)

    @property
    def public_key(self) -> Ed25519PublicKey:
        """The public key signatures verify under."""
        return self._public

    @property
    def key_id(self) -> str:
        """The key id of :attr:`public_key` (spec §8.3)."""
        return self._key_id


class KeySigner(PublicKeyHolder):
    """A :class:`Signer` holding its private key in this process (libraries and tests).

    ``kinds`` are the message kinds it signs (None: any); ``check`` is run on every
    payload before it is signed.
    """

    def __init__(
        self,
        key: Ed25519PrivateKey,
        *,
        kinds: Collection[str] | None = None,
        check: PayloadCheck | None = None,
    ) -> None:
        """Sign with ``key``, only ``kinds``, each payload passing ``check``."""
        if not isinstance(key, Ed25519PrivateKey):
            raise InputError("a signing key must be an Ed25519PrivateKey")
        super().__init__(key.public_key())
        self._key = key
        self._kinds = None if kinds is None else frozenset(kinds)
        self._check = check

    def sign(self, payload: bytes, kind: str) -> Envelope:
        """Check ``kind`` and the payload, then sign it in this process."""
        if self._kinds is not None and kind not in self._kinds:
            raise InputError(f"this signer does not sign {kind!r} payloads")
        if self._check is not None:
            self._check(payload, kind, self._key_id)
        return sign_envelope(payload, payload_type(kind), self._key)

    def sign_note(self, text: bytes) -> bytes:
        """Sign ``text`` if it is this arbiter's checkpoint note text (spec §9.5.4)."""
        require_arbiter_text(text, self._public)
        return self._key.sign(text)

    def signature(self, payload: bytes, kind: str) -> bytes:
        """Return only the 64 signature bytes of :meth:`sign` (a signer process's answer)."""
        envelope = self.sign(payload, kind)
        return envelope.signatures[0].sig


def signed_envelope(
    payload: bytes, kind: str, signature: bytes, public: Ed25519PublicKey
) -> Envelope:
    """Return the envelope of a signature made elsewhere, once it verifies under ``public``.

    A signer in another process answers with signature bytes; the envelope is built
    here, and a signature over anything but this payload and kind is refused.
    """
    type_ = payload_type(kind)
    try:
        public.verify(signature, pae(type_, payload))
    except InvalidSignature:
        raise SignatureError("the signer's signature does not verify") from None
    return Envelope(type_, payload, (Signature(key_id(public), signature),))


__all__ = [
    "KeySigner",
    "NoteSigner",
    "PayloadCheck",
    "PublicKeyHolder",
    "Signer",
    "signed_envelope",
]
