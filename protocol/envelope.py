"""Signed envelopes: DSSE-style pre-authentication encoding with Ed25519 (spec §8).

The signature covers

    PAE(type, body) = "DSSEv1" SP LEN(type) SP type SP LEN(body) SP body

where LEN is the ASCII decimal count of *UTF-8 bytes* (not characters) and SP is
one space (0x20). ``type`` is ``application/vnd.twinaudit.<kind>.v1+msgpack`` and
``body`` is a canonical encoding (spec §3). The envelope travels as DSSE JSON
(``payload`` and ``sig`` in standard base64), so generic DSSE tools can read it.

Verification (:func:`verify_envelope`) returns the verified payload bytes; callers
decode those bytes and never re-parse the envelope.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from dataclasses import dataclass
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from . import limits
from .encoding import Value, decode
from .errors import EncodingError, InputError, LimitExceededError, SignatureError
from .keys import key_id

#: Payload types are built from a kind name matching this pattern.
_KIND = re.compile(r"^[a-z][a-z0-9-]{0,62}$")

#: Largest serialized envelope accepted (payload in base64 plus signatures).
MAX_ENVELOPE_JSON_BYTES = (limits.MAX_ENVELOPE_PAYLOAD_BYTES * 4) // 3 + 64 * 1024


def payload_type(kind: str) -> str:
    """Return the payload type of a message kind.

    For example ``verdict`` gives ``application/vnd.twinaudit.verdict.v1+msgpack``.
    """
    if not _KIND.match(kind):
        raise InputError(f"invalid message kind {kind!r}")
    return f"application/vnd.twinaudit.{kind}.v1+msgpack"


def pae(type_: str, body: bytes) -> bytes:
    """Return the DSSE v1 pre-authentication encoding of ``type_`` and ``body``."""
    type_bytes = type_.encode("utf-8")
    return b"DSSEv1 %d %b %d %b" % (len(type_bytes), type_bytes, len(body), body)


@dataclass(frozen=True)
class Signature:
    """One signature: the signer's key id (a hint only) and 64 signature bytes."""

    keyid: str
    sig: bytes


@dataclass(frozen=True)
class Envelope:
    """A payload, its type and its signatures."""

    payload_type: str
    payload: bytes
    signatures: tuple[Signature, ...]

    def to_json(self) -> bytes:
        """Serialise as DSSE JSON (UTF-8, keys sorted, no insignificant whitespace)."""
        doc = {
            "payload": base64.b64encode(self.payload).decode("ascii"),
            "payloadType": self.payload_type,
            "signatures": [
                {"keyid": s.keyid, "sig": base64.b64encode(s.sig).decode("ascii")}
                for s in self.signatures
            ],
        }
        return json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()

    @classmethod
    def from_json(cls, data: bytes) -> Envelope:
        """Parse DSSE JSON strictly: exact keys, standard base64, every size capped.

        The text must be the one form :meth:`to_json` writes (spec §8.2), so that every
        byte of an envelope file is significant.
        """
        if len(data) > MAX_ENVELOPE_JSON_BYTES:
            raise LimitExceededError("envelope size", len(data), MAX_ENVELOPE_JSON_BYTES)
        try:
            doc = json.loads(data.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise EncodingError(f"envelope is not valid UTF-8 JSON: {exc}") from None
        except RecursionError:
            raise EncodingError("envelope JSON is nested too deeply") from None
        if not isinstance(doc, dict) or set(doc) != {"payload", "payloadType", "signatures"}:
            raise EncodingError("envelope must have exactly payload, payloadType, signatures")
        ptype, sigs = doc["payloadType"], doc["signatures"]
        if not isinstance(ptype, str):
            raise EncodingError("payloadType must be a string")
        if not isinstance(sigs, list) or not sigs:
            raise EncodingError("signatures must be a non-empty list")
        if len(sigs) > limits.MAX_SIGNATURES:
            raise LimitExceededError("signature count", len(sigs), limits.MAX_SIGNATURES)
        parsed = []
        for entry in sigs:
            if not isinstance(entry, dict) or set(entry) != {"keyid", "sig"}:
                raise EncodingError("each signature must have exactly keyid and sig")
            if not isinstance(entry["keyid"], str) or len(entry["keyid"]) > 128:
                raise EncodingError("keyid must be a string of at most 128 characters")
            parsed.append(Signature(_plain(entry["keyid"], "keyid"), _b64(entry["sig"], "sig")))
        envelope = cls(_check_type(ptype), _b64(doc["payload"], "payload"), tuple(parsed))
        if data != envelope.to_json():
            raise EncodingError(
                "envelope JSON is not in its one accepted form (members sorted, no whitespace, "
                "no escapes, nothing after the object)"
            )
        return envelope


def _plain(text: str, what: str) -> str:
    """Return ``text`` if JSON writes it without escapes: no quote, backslash or control."""
    if any(c in '"\\' or ord(c) < 0x20 for c in text):
        raise EncodingError(f"{what} must not contain quotes, backslashes or control characters")
    return text


def _b64(value: Any, what: str) -> bytes:
    if not isinstance(value, str):
        raise EncodingError(f"{what} must be a base64 string")
    try:
        raw = base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise EncodingError(f"{what} is not standard base64") from None
    if base64.b64encode(raw).decode("ascii") != value:
        raise EncodingError(f"{what} is not canonical base64 (padding or trailing bits)")
    return raw


def _check_type(type_: str) -> str:
    _plain(type_, "payloadType")
    size = len(type_.encode("utf-8"))
    if size > limits.MAX_PAYLOAD_TYPE_BYTES:
        raise LimitExceededError("payload type length", size, limits.MAX_PAYLOAD_TYPE_BYTES)
    return type_


def sign_envelope(
    payload: bytes, type_: str, keys: list[Ed25519PrivateKey] | Ed25519PrivateKey
) -> Envelope:
    """Sign ``payload`` (already canonical) under ``type_`` with one or more keys."""
    if len(payload) > limits.MAX_ENVELOPE_PAYLOAD_BYTES:
        raise LimitExceededError("payload size", len(payload), limits.MAX_ENVELOPE_PAYLOAD_BYTES)
    signers = keys if isinstance(keys, list) else [keys]
    message = pae(_check_type(type_), payload)
    sigs = tuple(Signature(key_id(k.public_key()), k.sign(message)) for k in signers)
    return Envelope(type_, payload, sigs)


def verify_envelope(
    envelope: Envelope,
    trusted: list[Ed25519PublicKey] | Ed25519PublicKey,
    expected_type: str,
    threshold: int = 1,
) -> bytes:
    """Verify ``envelope`` and return its payload bytes.

    Steps (spec §8.2): (1) the payload type must equal ``expected_type`` exactly;
    (2) the payload must respect the size cap; (3) each trusted key counts once if
    *any* signature verifies under it — key ids are only hints and are not used to
    decide; (4) at least ``threshold`` distinct trusted keys must have signed.
    """
    keys = trusted if isinstance(trusted, list) else [trusted]
    if threshold < 1 or threshold > len(keys):
        raise InputError(f"threshold {threshold} impossible with {len(keys)} trusted keys")
    if envelope.payload_type != expected_type:
        raise SignatureError(
            f"payload type {envelope.payload_type!r} is not the expected {expected_type!r}"
        )
    if len(envelope.payload) > limits.MAX_ENVELOPE_PAYLOAD_BYTES:
        raise LimitExceededError(
            "payload size", len(envelope.payload), limits.MAX_ENVELOPE_PAYLOAD_BYTES
        )
    message = pae(envelope.payload_type, envelope.payload)
    signed_by: set[str] = set()
    for key in keys:
        kid = key_id(key)
        for sig in envelope.signatures:
            try:
                key.verify(sig.sig, message)
            except InvalidSignature:
                continue
            signed_by.add(kid)
            break
    if len(signed_by) < threshold:
        raise SignatureError(
            f"{len(signed_by)} of the required {threshold} trusted keys signed this envelope"
        )
    return envelope.payload


def open_envelope(
    envelope: Envelope,
    trusted: list[Ed25519PublicKey] | Ed25519PublicKey,
    kind: str,
    threshold: int = 1,
) -> Value:
    """Verify an envelope of message ``kind`` and return its canonically decoded payload."""
    return decode(
        verify_envelope(envelope, trusted, payload_type(kind), threshold),
        max_bytes=limits.MAX_ENVELOPE_PAYLOAD_BYTES,
    )
