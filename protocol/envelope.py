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
from typing import Any, Final

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

#: Deepest nesting of the accepted form: the object, its ``signatures``, each signature.
MAX_ENVELOPE_JSON_DEPTH: Final = 3
#: Most JSON objects and arrays in an envelope: the object, ``signatures``, each signature.
MAX_ENVELOPE_JSON_CONTAINERS: Final = 2 + limits.MAX_SIGNATURES
#: Most JSON strings, member names included: five in the object, four per signature.
MAX_ENVELOPE_JSON_STRINGS: Final = 5 + 4 * limits.MAX_SIGNATURES

#: The bytes that open or close a container or a string.
_STRUCTURE = re.compile(rb'[\[\]{}"]')
#: What JSON text may hold between two of those outside strings: whitespace and one
#: separator. Numbers, ``true``, ``false`` and ``null`` never occur in an envelope.
_GAP = re.compile(rb"[ \t\n\r]*+[,:]?+[ \t\n\r]*+")


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
        _check_json_shape(data)  # before the parser builds anything (spec §8.2)
        try:
            doc = json.loads(data.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise EncodingError(f"envelope is not valid UTF-8 JSON: {exc}") from None
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


def _check_json_shape(data: bytes) -> None:
    """Refuse JSON text that nests deeper, or holds more, than any accepted envelope.

    Spec §8.2: the accepted form nests :data:`MAX_ENVELOPE_JSON_DEPTH` deep, holds at
    most :data:`MAX_ENVELOPE_JSON_CONTAINERS` objects and arrays and
    :data:`MAX_ENVELOPE_JSON_STRINGS` strings, and has no escape sequence, number or
    literal. One pass, without recursion, stops at the first excess, so neither deep
    nesting nor many small values reach the JSON parser: its work and memory stay a
    small multiple of the input. The loop runs once per string or bracket, never once
    per byte, and at most as often as the caps allow.
    """
    if b"\\" in data:
        raise EncodingError("envelope JSON has an escape sequence; its accepted form has none")
    depth = containers = strings = 0
    position = 0
    while True:
        found = _STRUCTURE.search(data, position)
        gap_end = len(data) if found is None else found.start()
        if _GAP.fullmatch(data, position, gap_end) is None:
            raise EncodingError(
                "envelope JSON holds a number, a literal or stray text; "
                "its accepted form has only strings, objects and arrays"
            )
        if found is None:
            return
        char = data[gap_end]
        if char == ord('"'):
            close = data.find(b'"', gap_end + 1)
            if close < 0:
                raise EncodingError("envelope JSON has an unterminated string")
            strings += 1
            if strings > MAX_ENVELOPE_JSON_STRINGS:
                raise LimitExceededError(
                    "strings in envelope JSON", strings, MAX_ENVELOPE_JSON_STRINGS
                )
            position = close + 1
            continue
        position = gap_end + 1
        if char in b"]}":
            depth -= 1
            if depth < 0:
                raise EncodingError("envelope JSON closes a bracket it never opened")
            continue
        depth += 1
        containers += 1
        if depth > MAX_ENVELOPE_JSON_DEPTH:
            raise EncodingError(
                f"envelope JSON is nested too deeply (more than {MAX_ENVELOPE_JSON_DEPTH} levels)"
            )
        if containers > MAX_ENVELOPE_JSON_CONTAINERS:
            raise LimitExceededError(
                "objects and arrays in envelope JSON", containers, MAX_ENVELOPE_JSON_CONTAINERS
            )


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
        labels = ", ".join(sorted({sig.keyid for sig in envelope.signatures})) or "none"
        trusted_ids = ", ".join(sorted(key_id(key) for key in keys))
        raise SignatureError(
            f"{len(signed_by)} of the required {threshold} trusted keys signed this envelope "
            f"(its signatures are labelled with key ids {labels}; the trusted keys have key "
            f"ids {trusted_ids})"
        )
    return envelope.payload


def require_sole_signer(envelope: Envelope, key: Ed25519PublicKey, kind: str) -> None:
    """Require exactly one signature, labelled with ``key``'s id (spec §8.2, §9.3, §9.4, §11).

    Verdicts, receipts and checkpoints are signed by one arbiter key, so their files
    have one accepted form and every byte of it is significant: a second signature or
    another label is refused before any signature is checked. The label still decides
    nothing: :func:`verify_envelope` then verifies the signature under ``key``.

    Raises:
        SignatureError: the envelope has another number of signatures, or its one
            signature is labelled with another key id.

    """
    if len(envelope.signatures) != 1:
        raise SignatureError(
            f"the {kind} envelope must carry exactly one signature, labelled with the "
            f"arbiter's key id; it carries {len(envelope.signatures)}"
        )
    label, given = envelope.signatures[0].keyid, key_id(key)
    if label != given:
        raise SignatureError(
            f"the {kind} was signed by another key than the one given: its signature is "
            f"labelled with key id {label}, the key given has key id {given}"
        )


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
