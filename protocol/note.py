"""Signed notes, C2SP ``signed-note`` v1.0.0 (spec §9.5.1): text signed by named keys.

A note is UTF-8 text ending in a newline, a blank line, and one or more signature
lines ``— <key name> <base64(key id ‖ signature)>`` (an em dash, U+2014, and a space
first). The text is everything before the *last* blank line. A key is named by its key
name and a 4-byte key id, ``SHA-256(name ‖ 0x0A ‖ type ‖ public key)[:4]``, where the
type byte says how it signs: ``0x01`` plain Ed25519 over the text, ``0x04`` a
timestamped cosignature (:mod:`twinaudit.protocol.cosignature`). A verifier key
("vkey") is written ``<name>+<hex key id>+<base64(type ‖ public key)>``.

:func:`parse_note` reads the structure only; :func:`open_note` verifies a note against
the keys a client knows. Lines of keys it does not know (name and key id both) are
ignored, as the C2SP text requires; a known key's line that fails refuses the whole
note; a note with no verified line is refused. Every input is bounded
(:data:`MAX_NOTE_BYTES`, :data:`MAX_NOTE_SIGNATURES`, :data:`MAX_KEY_NAME_BYTES`) and
every failure is typed (spec §2.2): ``limit-exceeded`` above a cap,
``non-canonical-encoding`` for base64 that is not standard padded base64 with zero
trailing bits, ``invalid-input`` for any other malformed note or key, and
``invalid-signature`` for a note that does not verify.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Final

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from . import cosignature
from .errors import EncodingError, InputError, LimitExceededError, SignatureError
from .keys import raw_public_key
from .limits import utf8_length

#: Signature type byte of a plain Ed25519 note signature over the note text.
ED25519: Final = 0x01
#: Signature type byte of a timestamped Ed25519 cosignature (tlog-cosignature v1).
COSIGNATURE_V1: Final = cosignature.COSIGNATURE_V1
#: The signature types this implementation verifies.
SIGNATURE_TYPES: Final = frozenset({ED25519, COSIGNATURE_V1})

#: Largest note accepted, in bytes: 16 lines of post-quantum signatures of nearly 5 kB
#: each, as the C2SP text asks a verifier to allow for, with room for the text.
MAX_NOTE_BYTES: Final = 128 * 1024
#: Most signature lines a note may carry (the C2SP text requires at least 16).
MAX_NOTE_SIGNATURES: Final = 16
#: Longest key name, in UTF-8 bytes.
MAX_KEY_NAME_BYTES: Final = 255
#: Longest vkey text, in characters; no vkey of the types verified here reaches it.
MAX_VKEY_CHARS: Final = 512
#: Bytes of a key id.
KEY_ID_BYTES: Final = 4

#: The start of every signature line: an em dash (U+2014) and a space.
SIGNATURE_PREFIX: Final = "\u2014 "
#: Characters of Unicode's White_Space property, which a key name never holds.
_WHITE_SPACE: Final = frozenset(
    "\t\n\v\f\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008"
    "\u2009\u200a\u2028\u2029\u202f\u205f\u3000"
)
#: A control character other than the newline: never in a note.
_CONTROL: Final = re.compile(r"[\x00-\x09\x0b-\x1f]")
_HEX8: Final = re.compile(r"\A[0-9a-f]{8}\Z")


def check_key_name(name: object) -> str:
    """Return ``name`` if it is a valid key name: non-empty, no white space, no ``+``.

    Raises:
        InputError: it is empty, not text, or holds white space, ``+`` or a control.
        LimitExceededError: it is longer than :data:`MAX_KEY_NAME_BYTES` UTF-8 bytes.

    """
    if not isinstance(name, str) or not name:
        raise InputError("a key name is non-empty text")
    utf8_length(name, "key name", MAX_KEY_NAME_BYTES)
    if "+" in name or _CONTROL.search(name) or any(c in _WHITE_SPACE for c in name):
        raise InputError(f"key name {name!r} holds white space, a control character or '+'")
    return name


def key_id(name: str, sig_type: int, public: bytes) -> int:
    """Return the key id of a key: ``SHA-256(name ‖ 0x0A ‖ sig_type ‖ public)[:4]``."""
    check_key_name(name)
    if not 0 <= sig_type <= 0xFF:
        raise InputError(f"a signature type is one byte, got {sig_type}")
    digest = hashlib.sha256(name.encode("utf-8") + b"\n" + bytes([sig_type]) + public).digest()
    return int.from_bytes(digest[:KEY_ID_BYTES], "big")


def decode_base64(text: str, what: str) -> bytes:
    """Decode standard padded base64 with zero trailing bits, the only form accepted.

    Raises:
        EncodingError: ``text`` is not in that form.

    """
    try:
        raw = base64.b64decode(text.encode("ascii"), validate=True)
    except (UnicodeEncodeError, binascii.Error, ValueError):
        raise EncodingError(f"{what} is not standard base64") from None
    if base64.b64encode(raw).decode("ascii") != text:
        raise EncodingError(f"{what} is not canonical base64 (padding or trailing bits)")
    return raw


def encode_base64(raw: bytes) -> str:
    """Return ``raw`` in standard padded base64."""
    return base64.b64encode(raw).decode("ascii")


@dataclass(frozen=True)
class NoteSignature:
    """One signature line: the key's name and id and the signature bytes after the id."""

    name: str
    key_id: int
    signature: bytes

    def __post_init__(self) -> None:
        """Validate the name, the id's range and that some signature bytes follow it."""
        check_key_name(self.name)
        if isinstance(self.key_id, bool) or not isinstance(self.key_id, int):
            raise InputError("a key id is an integer")
        if not 0 <= self.key_id < 1 << 32:
            raise InputError(f"a key id is a 32-bit unsigned integer, got {self.key_id}")
        if not isinstance(self.signature, bytes) or not self.signature:
            raise InputError("a note signature holds at least one byte after its key id")

    def line(self) -> str:
        """Return the signature line, its final newline included."""
        blob = self.key_id.to_bytes(KEY_ID_BYTES, "big") + self.signature
        return f"{SIGNATURE_PREFIX}{self.name} {encode_base64(blob)}\n"


def _check_text(text: object) -> str:
    if not isinstance(text, str) or not text.endswith("\n"):
        raise InputError("a note text is text that ends in a newline")
    if _CONTROL.search(text):
        raise InputError("a note holds no control character but the newline")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise InputError("a note text is valid Unicode text") from None
    return text


@dataclass(frozen=True)
class Note:
    """A signed note: its text (final newline included) and its signature lines."""

    text: str
    signatures: tuple[NoteSignature, ...]

    def __post_init__(self) -> None:
        """Validate the text and the number of signature lines."""
        _check_text(self.text)
        if not self.signatures:
            raise InputError("a signed note has at least one signature line")
        if len(self.signatures) > MAX_NOTE_SIGNATURES:
            raise LimitExceededError(
                "signature lines of a note", len(self.signatures), MAX_NOTE_SIGNATURES
            )

    def encode(self) -> bytes:
        """Return the note's bytes: the text, a blank line, the signature lines."""
        lines = "".join(signature.line() for signature in self.signatures)
        return (self.text + "\n" + lines).encode("utf-8")


def _parse_line(line: str) -> NoteSignature:
    if not line.startswith(SIGNATURE_PREFIX):
        raise InputError("a signature line starts with an em dash (U+2014) and a space")
    name, space, b64 = line[len(SIGNATURE_PREFIX) :].partition(" ")
    if not space or " " in b64:
        raise InputError("a signature line is '— <key name> <base64>', one space between")
    check_key_name(name)
    blob = decode_base64(b64, f"the signature of key {name!r}")
    if len(blob) <= KEY_ID_BYTES:
        raise InputError(f"the signature of key {name!r} holds no bytes after its key id")
    return NoteSignature(name, int.from_bytes(blob[:KEY_ID_BYTES], "big"), blob[KEY_ID_BYTES:])


def parse_note(data: bytes) -> Note:
    """Read a signed note's structure strictly; no signature is checked.

    Raises:
        LimitExceededError: above :data:`MAX_NOTE_BYTES` or :data:`MAX_NOTE_SIGNATURES`.
        EncodingError: a signature is not canonical standard base64.
        InputError: any other malformation (not UTF-8, a control character, no blank
            line before the signatures, no final newline, a malformed line or name).

    """
    if not isinstance(data, bytes | bytearray):
        raise InputError(f"a note is bytes, got {type(data).__name__}")
    if len(data) > MAX_NOTE_BYTES:
        raise LimitExceededError("note size in bytes", len(data), MAX_NOTE_BYTES)
    try:
        whole = bytes(data).decode("utf-8")
    except UnicodeDecodeError:
        raise InputError("a note is valid UTF-8") from None
    if _CONTROL.search(whole):
        raise InputError("a note holds no control character but the newline")
    split = whole.rfind("\n\n")
    if split < 0:
        raise InputError("a note has a blank line between its text and its signatures")
    text, block = whole[: split + 1], whole[split + 2 :]
    if not block.endswith("\n"):
        raise InputError("a note's signature lines end in a newline")
    lines = block[:-1].split("\n")
    if len(lines) > MAX_NOTE_SIGNATURES:
        raise LimitExceededError("signature lines of a note", len(lines), MAX_NOTE_SIGNATURES)
    return Note(text, tuple(_parse_line(line) for line in lines))


@dataclass(frozen=True)
class VerifierKey:
    """A key a client knows: its name, signature type and 32-byte Ed25519 public key."""

    name: str
    sig_type: int
    public: bytes

    def __post_init__(self) -> None:
        """Validate the name, the type (one this code verifies) and the public key."""
        check_key_name(self.name)
        if self.sig_type not in SIGNATURE_TYPES:
            raise InputError(f"signature type {self.sig_type!r} is not one verified here")
        if not isinstance(self.public, bytes) or len(self.public) != 32:
            raise InputError("an Ed25519 public key is 32 bytes")
        try:
            Ed25519PublicKey.from_public_bytes(self.public)
        except ValueError:
            raise InputError("the public key is not an Ed25519 public key") from None

    @classmethod
    def of(cls, name: str, sig_type: int, public: Ed25519PublicKey) -> VerifierKey:
        """Return the verifier key of ``public`` named ``name`` for ``sig_type``."""
        return cls(name, sig_type, raw_public_key(public))

    @property
    def key_id(self) -> int:
        """The key id of this key (32 bits)."""
        return key_id(self.name, self.sig_type, self.public)

    def verifies(self, text: bytes, signature: bytes) -> bool:
        """Say whether ``signature`` (the bytes after the key id) verifies over ``text``."""
        public = Ed25519PublicKey.from_public_bytes(self.public)
        if self.sig_type == COSIGNATURE_V1:
            return cosignature.verifies(text, signature, public)
        try:
            public.verify(signature, text)
        except InvalidSignature:
            return False
        return True

    def vkey(self) -> str:
        """Return the key as a vkey, ``<name>+<hex key id>+<base64(type ‖ key)>``."""
        blob = encode_base64(bytes([self.sig_type]) + self.public)
        return f"{self.name}+{self.key_id:08x}+{blob}"


def parse_vkey(text: object) -> VerifierKey:
    """Read a vkey strictly: its key id must be the one its name, type and key give.

    Raises:
        EncodingError: the key is not canonical standard base64.
        InputError: it is malformed, of a type not verified here, or its id is wrong.

    """
    if not isinstance(text, str):
        raise InputError("a vkey is text")
    if len(text) > MAX_VKEY_CHARS:
        raise LimitExceededError("vkey length in characters", len(text), MAX_VKEY_CHARS)
    name, _, rest = text.partition("+")
    hex_id, plus, b64 = rest.partition("+")
    if not plus or not _HEX8.match(hex_id):
        raise InputError("a vkey is '<name>+<8 lowercase hex digits>+<base64>'")
    blob = decode_base64(b64, "the vkey's key")
    if not blob:
        raise InputError("a vkey names a signature type and a key")
    key = VerifierKey(check_key_name(name), blob[0], blob[1:])
    if key.key_id != int(hex_id, 16):
        raise InputError(f"vkey of {name!r}: key id {hex_id} is not {key.key_id:08x}")
    return key


def sign_ed25519(text: str, name: str, key: Ed25519PrivateKey) -> NoteSignature:
    """Return ``key``'s plain Ed25519 signature line (type 0x01) of note ``text``."""
    _check_text(text)
    ident = key_id(name, ED25519, raw_public_key(key.public_key()))
    return NoteSignature(name, ident, key.sign(text.encode("utf-8")))


def cosign(text: str, name: str, key: Ed25519PrivateKey, timestamp: int) -> NoteSignature:
    """Return ``key``'s cosignature line (type 0x04) of note ``text`` at ``timestamp``."""
    _check_text(text)
    ident = key_id(name, COSIGNATURE_V1, raw_public_key(key.public_key()))
    return NoteSignature(name, ident, cosignature.sign(text.encode("utf-8"), timestamp, key))


@dataclass(frozen=True)
class OpenedNote:
    """A note that verified: its text, the lines known keys verified, and the others."""

    text: str
    verified: tuple[tuple[VerifierKey, NoteSignature], ...]
    unknown: tuple[NoteSignature, ...]

    def signed_by(self, key: VerifierKey) -> bool:
        """Say whether ``key`` verified a line of the note."""
        return any(known == key for known, _ in self.verified)


def known_keys(keys: Iterable[VerifierKey]) -> dict[tuple[str, int], VerifierKey]:
    """Index ``keys`` by name and key id; two keys with both the same are refused."""
    index: dict[tuple[str, int], VerifierKey] = {}
    for key in keys:
        if not isinstance(key, VerifierKey):
            raise InputError("known keys are VerifierKeys")
        slot = (key.name, key.key_id)
        if slot in index and index[slot] != key:
            raise InputError(f"two known keys share name {key.name!r} and id {key.key_id:08x}")
        index[slot] = key
    return index


def open_note(data: bytes, keys: Sequence[VerifierKey]) -> OpenedNote:
    """Verify a signed note against the keys a client knows and return it.

    1. The note is read strictly (:func:`parse_note`).
    2. A line whose key name and key id do not both match a known key is ignored.
    3. Every line of a known key must verify over the text, or the note is refused.
    4. At least one line must have verified.

    Raises:
        InputError: the note is malformed (the subclasses of :func:`parse_note`), or two
            known keys share a name and key id.
        SignatureError: a known key's line does not verify, or no known key signed.

    """
    note = parse_note(data)
    index = known_keys(keys)
    text = note.text.encode("utf-8")
    verified: list[tuple[VerifierKey, NoteSignature]] = []
    unknown: list[NoteSignature] = []
    for signature in note.signatures:
        key = index.get((signature.name, signature.key_id))
        if key is None:
            unknown.append(signature)
        elif key.verifies(text, signature.signature):
            verified.append((key, signature))
        else:
            raise SignatureError(
                f"the signature of known key {key.name}+{key.key_id:08x} does not verify"
            )
    if not verified:
        raise SignatureError("no known key signed the note")
    return OpenedNote(note.text, tuple(verified), tuple(unknown))


__all__ = [
    "COSIGNATURE_V1",
    "ED25519",
    "MAX_KEY_NAME_BYTES",
    "MAX_NOTE_BYTES",
    "MAX_NOTE_SIGNATURES",
    "MAX_VKEY_CHARS",
    "Note",
    "NoteSignature",
    "OpenedNote",
    "VerifierKey",
    "check_key_name",
    "cosign",
    "decode_base64",
    "encode_base64",
    "key_id",
    "known_keys",
    "open_note",
    "parse_note",
    "parse_vkey",
    "sign_ed25519",
]
