"""Escrow messages (spec draft §9): the request, log entries, receipts and checkpoints.

An owner escrows the Merkle root of her pair commitments with the arbiter
(:class:`EscrowRequest`, §9.1). The arbiter appends a :class:`LogEntry` (§9.2) to its
append-only Merkle log; the entry carries only ``tagged_hash("rho-digest", rho)``,
never ``rho`` itself, which decides the publication bits and stays secret until a
claim. The owner gets ``rho`` in a signed :class:`Receipt` (kind ``escrow-receipt``,
§9.3) and checks it with :func:`verify_receipt` before publishing anything. The log's
state is published as signed :class:`Checkpoint` s (kind ``log-checkpoint``, §9.4);
:func:`verify_checkpoint` and :func:`verify_log_extension` check them.

Every message is a canonical map (§3) with an exact key set. The dataclasses validate
their fields when constructed, so an instance is always well formed; the ``decode_*``
functions parse canonical bytes strictly and the ``parse_*`` functions already-decoded
values. Failures are typed (§2.2): :class:`~twinaudit.protocol.errors.VersionError` for a spec
version this code does not speak, :class:`~twinaudit.protocol.errors.LimitExceededError` for a
value above a named cap, :class:`~twinaudit.protocol.errors.ParameterError` for a count or kind
outside its domain, :class:`~twinaudit.protocol.errors.InputError` for any other malformed field,
and the :class:`~twinaudit.protocol.errors.VerificationError` family for well-formed messages that
fail a check.

This module is pure: no I/O, no clock. Callers pass the time in.
"""

from __future__ import annotations

import hmac
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Final

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from . import SPEC_VERSION, limits
from .encoding import Value, check, decode, encode
from .envelope import (
    Envelope,
    payload_type,
    require_sole_signer,
    sign_envelope,
    verify_envelope,
)
from .errors import (
    InputError,
    LimitExceededError,
    ParameterError,
    RootMismatchError,
    VerificationError,
)
from .hashing import tagged_hash
from .items import ITEM_KINDS
from .keys import key_id
from .merkle import EMPTY_ROOT, MAX_TREE_SIZE, verify_consistency, verify_inclusion
from .signer import Signer
from .versioning import require_supported

#: Message kind (spec §8.1) of a signed escrow receipt.
RECEIPT_KIND: Final = "escrow-receipt"
#: Message kind (spec §8.1) of a signed log checkpoint.
CHECKPOINT_KIND: Final = "log-checkpoint"

#: Longest owner label, in UTF-8 bytes (§9.1).
MAX_OWNER_BYTES: Final = 256
#: Largest log index: the log of size ``index + 1`` must still have a uint64 size (§6.2.1).
MAX_LOG_INDEX: Final = MAX_TREE_SIZE - 1
#: Length of an owner's claim key: a raw Ed25519 public key (§9.1).
CLAIM_KEY_BYTES: Final = 32
#: Largest canonical escrow request (the longest valid one is about 450 bytes).
MAX_REQUEST_BYTES: Final = 1024
#: Largest canonical log entry (the longest valid one is about 500 bytes).
MAX_ENTRY_BYTES: Final = 1024
#: Largest canonical receipt payload (the longest valid one is about 650 bytes).
MAX_RECEIPT_PAYLOAD_BYTES: Final = 2048
#: Largest canonical checkpoint payload (a valid one is about 180 bytes).
MAX_CHECKPOINT_PAYLOAD_BYTES: Final = 512
#: Largest receipt envelope JSON accepted (checked before parsing any of it).
MAX_RECEIPT_ENVELOPE_BYTES: Final = 8192
#: Largest checkpoint envelope JSON accepted (checked before parsing any of it).
MAX_CHECKPOINT_ENVELOPE_BYTES: Final = 4096
#: Most values (map keys included) a §9 message holds: a receipt has 31 (its map, 6
#: keys and 6 values, the entry's map, 9 keys and 9 values).
MAX_MESSAGE_VALUES: Final = 34

#: RFC 3339 UTC time with second precision and a literal "Z" (ASCII digits only).
_TIME_RE: Final = re.compile(r"\A[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z\Z")
_TIME_FORMAT: Final = "%Y-%m-%dT%H:%M:%SZ"
#: A key id (spec §8.3): 64 lowercase hex digits.
_KEY_ID_RE: Final = re.compile(r"\A[0-9a-f]{64}\Z")

_REQUEST_KEYS: Final = frozenset({"spec", "root", "n_pairs", "item_kind", "owner"})
_ENTRY_KEYS: Final = _REQUEST_KEYS | {"index", "time", "rho_digest"}
#: The key of the owner's claim key in a request and its entry (§9.1, §9.2). A request
#: or entry made before claim keys has none; one made since has it.
CLAIM_KEY: Final = "claim_key"
_RECEIPT_KEYS: Final = frozenset({"spec", "arbiter", "entry", "rho", "log_size", "log_root"})
_CHECKPOINT_KEYS: Final = frozenset({"spec", "arbiter", "size", "root", "time"})


# --- Field checks ------------------------------------------------------------------------


def format_time(moment: datetime) -> str:
    """Return ``moment`` as ``YYYY-MM-DDTHH:MM:SSZ`` in UTC, truncated to the second.

    ``moment`` must be timezone-aware; a naive datetime is ambiguous and refused.
    """
    if not isinstance(moment, datetime) or moment.tzinfo is None:
        raise InputError("a protocol time must be a timezone-aware datetime")
    utc = moment.astimezone(UTC)
    return f"{utc.year:04d}-{utc.month:02d}-{utc.day:02d}T{utc:%H:%M:%S}Z"


def parse_time(text: object, what: str = "time") -> datetime:
    """Parse a protocol time string strictly and return it as an aware UTC datetime.

    Only ``YYYY-MM-DDTHH:MM:SSZ`` with a real calendar date and time is accepted: no
    fractions, offsets, lowercase letters, leap seconds or non-ASCII digits.
    """
    if not isinstance(text, str) or not _TIME_RE.match(text):
        raise InputError(f"{what} must be an RFC 3339 UTC time 'YYYY-MM-DDTHH:MM:SSZ'")
    try:
        return datetime.strptime(text, _TIME_FORMAT).replace(tzinfo=UTC)
    except ValueError:
        raise InputError(f"{what} {text!r} is not a valid calendar time") from None


def _check_hash(value: object, what: str) -> bytes:
    if not isinstance(value, bytes) or len(value) != limits.HASH_BYTES:
        raise InputError(f"{what} must be a {limits.HASH_BYTES}-byte byte string")
    return value


def _check_int(value: object, what: str, lo: int, hi: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InputError(f"{what} must be an integer, got {type(value).__name__}")
    if not lo <= value <= hi:
        raise InputError(f"{what} {value} is outside [{lo}, {hi}]")
    return value


def _check_n_pairs(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ParameterError(f"n_pairs must be an integer, got {type(value).__name__}")
    if value > limits.MAX_PAIRS:
        raise LimitExceededError("n_pairs", value, limits.MAX_PAIRS)
    if value < 1:
        raise ParameterError(f"n_pairs must be at least 1, got {value}")
    return value


def _check_item_kind(value: object) -> str:
    if not isinstance(value, str) or value not in ITEM_KINDS:
        raise ParameterError(f"item_kind {value!r} is not one of {sorted(ITEM_KINDS)}")
    return value


def _check_owner(value: object) -> str:
    if not isinstance(value, str):
        raise InputError(f"owner must be a text string, got {type(value).__name__}")
    limits.utf8_length(value, "owner label", MAX_OWNER_BYTES)
    return value


def _check_claim_key(value: object) -> bytes | None:
    """Return a raw Ed25519 public key of 32 bytes that decodes as one, or None."""
    if value is None:
        return None
    if not isinstance(value, bytes) or len(value) != CLAIM_KEY_BYTES:
        raise InputError(f"claim_key must be a raw Ed25519 public key of {CLAIM_KEY_BYTES} bytes")
    try:
        Ed25519PublicKey.from_public_bytes(value)
    except ValueError:
        raise InputError("claim_key is not an Ed25519 public key") from None
    return value


def _check_key_id(value: object) -> str:
    if not isinstance(value, str) or not _KEY_ID_RE.match(value):
        raise InputError("arbiter must be a key id (64 lowercase hex digits)")
    return value


def _fields(
    value: Value, keys: frozenset[str], what: str, optional: frozenset[str] = frozenset()
) -> Mapping[str, Value]:
    """Return ``value`` as a map with exactly ``keys`` (and any of ``optional``).

    The spec version is checked first, before the key set: a message from a later spec
    version may have other keys, and must be refused as ``unsupported-version`` (§1.2).
    """
    if not isinstance(value, dict):
        raise InputError(f"{what} must be a map, got {type(value).__name__}")
    if "spec" in value:
        require_supported(value["spec"], what)
    keys = keys | (optional & value.keys())
    missing, extra = keys - value.keys(), value.keys() - keys
    if missing or extra:
        raise InputError(f"{what} keys: missing {sorted(missing)}, unexpected {sorted(extra)}")
    return value


def check_hash(value: object, what: str) -> bytes:
    """Return ``value`` if it is a 32-byte byte string (``invalid-input`` otherwise)."""
    return _check_hash(value, what)


def check_log_index(value: object, what: str) -> int:
    """Return ``value`` if it is an integer log index in ``0..MAX_LOG_INDEX``."""
    return _check_int(value, what, 0, MAX_LOG_INDEX)


def check_claim_key(value: object) -> bytes | None:
    """Return a raw 32-byte Ed25519 public key, or None for None (``invalid-input`` else)."""
    return _check_claim_key(value)


def entry_fields(
    value: Value, keys: frozenset[str], what: str, optional: frozenset[str] = frozenset()
) -> Mapping[str, Value]:
    """Return ``value`` as a map of exactly ``keys`` (and any of ``optional``), spec first."""
    return _fields(value, keys, what, optional)


def rho_digest(rho: bytes) -> bytes:
    """Return ``tagged_hash("rho-digest", rho)``, the log's commitment to ``rho`` (§9.2)."""
    if not isinstance(rho, bytes) or len(rho) != limits.RHO_BYTES:
        raise InputError(f"rho must be exactly {limits.RHO_BYTES} bytes")
    return tagged_hash("rho-digest", rho)


# --- Messages ----------------------------------------------------------------------------


@dataclass(frozen=True)
class EscrowRequest:
    """An owner's escrow request (§9.1): a root over ``n_pairs`` commitments of one kind.

    ``claim_key`` is the raw Ed25519 public key with which the owner will sign her
    claims on the record (§10.7); None only in a request made before claim keys,
    which an arbiter of this revision refuses.
    """

    root: bytes
    n_pairs: int
    item_kind: str
    owner: str
    claim_key: bytes | None = None
    spec: str = SPEC_VERSION

    def __post_init__(self) -> None:
        """Validate every field (spec version, sizes, ranges, kind)."""
        require_supported(self.spec, "escrow request")
        _check_hash(self.root, "root")
        _check_n_pairs(self.n_pairs)
        _check_item_kind(self.item_kind)
        _check_owner(self.owner)
        _check_claim_key(self.claim_key)

    def to_value(self) -> dict[str, Value]:
        """Return the request map of §9.1 (``claim_key`` where the request has one)."""
        value: dict[str, Value] = {
            "spec": self.spec,
            "root": self.root,
            "n_pairs": self.n_pairs,
            "item_kind": self.item_kind,
            "owner": self.owner,
        }
        if self.claim_key is not None:
            value[CLAIM_KEY] = self.claim_key
        return value

    def encode(self) -> bytes:
        """Return the canonical encoding of the request."""
        return encode(self.to_value())


@dataclass(frozen=True)
class LogEntry:
    """Entry ``index`` of the arbiter's escrow log (§9.2); its encoding is the leaf data.

    ``claim_key`` is the owner's claim key (§10.7), None in an entry made before claim
    keys: the claims on such a record are not authenticated.
    """

    index: int
    root: bytes
    n_pairs: int
    item_kind: str
    owner: str
    time: str
    rho_digest: bytes
    claim_key: bytes | None = None
    spec: str = SPEC_VERSION

    def __post_init__(self) -> None:
        """Validate every field."""
        require_supported(self.spec, "log entry")
        _check_int(self.index, "index", 0, MAX_LOG_INDEX)
        _check_hash(self.root, "root")
        _check_n_pairs(self.n_pairs)
        _check_item_kind(self.item_kind)
        _check_owner(self.owner)
        parse_time(self.time, "entry time")
        _check_hash(self.rho_digest, "rho_digest")
        _check_claim_key(self.claim_key)

    @property
    def timestamp(self) -> datetime:
        """The entry's time as an aware UTC datetime."""
        return parse_time(self.time)

    def to_value(self) -> dict[str, Value]:
        """Return the entry map of §9.2 (``claim_key`` where the entry has one)."""
        value: dict[str, Value] = {
            "spec": self.spec,
            "index": self.index,
            "root": self.root,
            "n_pairs": self.n_pairs,
            "item_kind": self.item_kind,
            "owner": self.owner,
            "time": self.time,
            "rho_digest": self.rho_digest,
        }
        if self.claim_key is not None:
            value[CLAIM_KEY] = self.claim_key
        return value

    def encode(self) -> bytes:
        """Return the canonical encoding of the entry: leaf ``index`` of the log (§9.2)."""
        return encode(self.to_value())


@dataclass(frozen=True)
class Receipt:
    """An escrow receipt's payload (§9.3): the entry, ``rho`` and the log it is part of."""

    arbiter: str
    entry: LogEntry
    rho: bytes
    log_size: int
    log_root: bytes
    spec: str = SPEC_VERSION

    def __post_init__(self) -> None:
        """Validate every field, including ``log_size == entry.index + 1``."""
        require_supported(self.spec, "escrow receipt")
        _check_key_id(self.arbiter)
        if not isinstance(self.entry, LogEntry):
            raise InputError("receipt entry must be a LogEntry")
        if self.entry.spec != self.spec:
            raise InputError(f"receipt spec {self.spec!r} differs from its entry's")
        if not isinstance(self.rho, bytes) or len(self.rho) != limits.RHO_BYTES:
            raise InputError(f"rho must be exactly {limits.RHO_BYTES} bytes")
        _check_int(self.log_size, "log_size", 1, MAX_TREE_SIZE)
        if self.log_size != self.entry.index + 1:
            raise InputError(f"log_size {self.log_size} is not entry index {self.entry.index} + 1")
        _check_hash(self.log_root, "log_root")

    def to_value(self) -> dict[str, Value]:
        """Return the receipt payload map of §9.3."""
        return {
            "spec": self.spec,
            "arbiter": self.arbiter,
            "entry": self.entry.to_value(),
            "rho": self.rho,
            "log_size": self.log_size,
            "log_root": self.log_root,
        }

    def encode(self) -> bytes:
        """Return the canonical encoding of the payload."""
        return encode(self.to_value())


@dataclass(frozen=True)
class Checkpoint:
    """A log checkpoint's payload (§9.4): the log's size and root at a time."""

    arbiter: str
    size: int
    root: bytes
    time: str
    spec: str = SPEC_VERSION

    def __post_init__(self) -> None:
        """Validate every field."""
        require_supported(self.spec, "log checkpoint")
        _check_key_id(self.arbiter)
        _check_int(self.size, "size", 0, MAX_TREE_SIZE)
        _check_hash(self.root, "root")
        parse_time(self.time, "checkpoint time")

    @property
    def timestamp(self) -> datetime:
        """The checkpoint's time as an aware UTC datetime."""
        return parse_time(self.time)

    def to_value(self) -> dict[str, Value]:
        """Return the checkpoint payload map of §9.4."""
        return {
            "spec": self.spec,
            "arbiter": self.arbiter,
            "size": self.size,
            "root": self.root,
            "time": self.time,
        }

    def encode(self) -> bytes:
        """Return the canonical encoding of the payload."""
        return encode(self.to_value())


def make_entry(request: EscrowRequest, *, index: int, time: datetime, rho: bytes) -> LogEntry:
    """Return log entry ``index`` for ``request``, escrowed at ``time`` with randomness ``rho``."""
    return LogEntry(
        spec=request.spec,
        index=index,
        root=request.root,
        n_pairs=request.n_pairs,
        item_kind=request.item_kind,
        owner=request.owner,
        time=format_time(time),
        rho_digest=rho_digest(rho),
        claim_key=request.claim_key,
    )


# --- Parsing -----------------------------------------------------------------------------


def parse_request(value: Value) -> EscrowRequest:
    """Return the request held by a decoded §9.1 map."""
    fields = _fields(value, _REQUEST_KEYS, "escrow request", frozenset({CLAIM_KEY}))
    return EscrowRequest(
        spec=_str(fields["spec"]),
        root=_check_hash(fields["root"], "root"),
        n_pairs=_check_n_pairs(fields["n_pairs"]),
        item_kind=_check_item_kind(fields["item_kind"]),
        owner=_check_owner(fields["owner"]),
        claim_key=_present_claim_key(fields),
    )


def parse_entry(value: Value) -> LogEntry:
    """Return the log entry held by a decoded §9.2 map."""
    fields = _fields(value, _ENTRY_KEYS, "log entry", frozenset({CLAIM_KEY}))
    return LogEntry(
        spec=_str(fields["spec"]),
        index=_check_int(fields["index"], "index", 0, MAX_LOG_INDEX),
        root=_check_hash(fields["root"], "root"),
        n_pairs=_check_n_pairs(fields["n_pairs"]),
        item_kind=_check_item_kind(fields["item_kind"]),
        owner=_check_owner(fields["owner"]),
        time=_str(fields["time"], "entry time"),
        rho_digest=_check_hash(fields["rho_digest"], "rho_digest"),
        claim_key=_present_claim_key(fields),
    )


def _present_claim_key(fields: Mapping[str, Value]) -> bytes | None:
    """Return the ``claim_key`` of a parsed map; a key present with nil is refused."""
    if CLAIM_KEY not in fields:
        return None
    key = _check_claim_key(fields[CLAIM_KEY])
    if key is None:
        raise InputError("claim_key, where present, is a raw Ed25519 public key, never nil")
    return key


def parse_receipt(value: Value) -> Receipt:
    """Return the receipt held by a decoded §9.3 payload map (no signature, no checks)."""
    fields = _fields(value, _RECEIPT_KEYS, "escrow receipt")
    return Receipt(
        spec=_str(fields["spec"]),
        arbiter=_check_key_id(fields["arbiter"]),
        entry=parse_entry(fields["entry"]),
        rho=_bytes(fields["rho"], "rho"),
        log_size=_check_int(fields["log_size"], "log_size", 1, MAX_TREE_SIZE),
        log_root=_check_hash(fields["log_root"], "log_root"),
    )


def parse_checkpoint(value: Value) -> Checkpoint:
    """Return the checkpoint held by a decoded §9.4 payload map (no signature checked)."""
    fields = _fields(value, _CHECKPOINT_KEYS, "log checkpoint")
    return Checkpoint(
        spec=_str(fields["spec"]),
        arbiter=_check_key_id(fields["arbiter"]),
        size=_check_int(fields["size"], "size", 0, MAX_TREE_SIZE),
        root=_check_hash(fields["root"], "root"),
        time=_str(fields["time"], "checkpoint time"),
    )


def _decode(data: bytes, max_bytes: int, what: str) -> Value:
    """Decode a §9 message: checked first, building nothing, then built if it can be one.

    A §9 map has exactly its keys, so a canonical encoding of more values than any of
    them holds is refused as ``invalid-input`` before a value is made of it: a payload
    of a few KiB never becomes thousands of objects.
    """
    if check(data, max_bytes=max_bytes) > MAX_MESSAGE_VALUES:
        raise InputError(
            f"{what} holds more than the {MAX_MESSAGE_VALUES} values (map keys included) "
            "of any escrow message"
        )
    return decode(data, max_bytes=max_bytes)


def decode_request(data: bytes) -> EscrowRequest:
    """Decode a canonical escrow request strictly (§3.3, §9.1)."""
    return parse_request(_decode(data, MAX_REQUEST_BYTES, "escrow request"))


def decode_entry(data: bytes) -> LogEntry:
    """Decode a canonical log entry strictly (§3.3, §9.2)."""
    return parse_entry(_decode(data, MAX_ENTRY_BYTES, "log entry"))


def decode_receipt(data: bytes) -> Receipt:
    """Decode a canonical receipt payload strictly (§3.3, §9.3); no signature is checked."""
    return parse_receipt(_decode(data, MAX_RECEIPT_PAYLOAD_BYTES, "escrow receipt"))


def decode_checkpoint(data: bytes) -> Checkpoint:
    """Decode a canonical checkpoint payload strictly (§3.3, §9.4); no signature is checked."""
    return parse_checkpoint(_decode(data, MAX_CHECKPOINT_PAYLOAD_BYTES, "log checkpoint"))


def _str(value: Value, what: str = "spec") -> str:
    if not isinstance(value, str):
        raise InputError(f"{what} must be a text string, got {type(value).__name__}")
    return value


def _bytes(value: Value, what: str) -> bytes:
    if not isinstance(value, bytes):
        raise InputError(f"{what} must be a byte string, got {type(value).__name__}")
    return value


# --- Signing (arbiter side) --------------------------------------------------------------


def _require_signer(arbiter: str, key: Ed25519PrivateKey | Signer, what: str) -> None:
    signer_id = key.key_id if isinstance(key, Signer) else key_id(key.public_key())
    if arbiter != signer_id:
        raise InputError(f"{what} names arbiter {arbiter}, not the signing key's id")


def _sign(payload: bytes, kind: str, key: Ed25519PrivateKey | Signer) -> bytes:
    if isinstance(key, Signer):
        return key.sign(payload, kind).to_json()
    return sign_envelope(payload, payload_type(kind), key).to_json()


def sign_receipt(receipt: Receipt, key: Ed25519PrivateKey | Signer) -> bytes:
    """Sign ``receipt`` as an ``escrow-receipt`` envelope and return its DSSE JSON.

    The receipt's ``arbiter`` must be the key id of ``key`` (a private key, or a
    :class:`~twinaudit.protocol.signer.Signer` that keeps it).
    """
    _require_signer(receipt.arbiter, key, "receipt")
    return _sign(receipt.encode(), RECEIPT_KIND, key)


def sign_checkpoint(checkpoint: Checkpoint, key: Ed25519PrivateKey | Signer) -> bytes:
    """Sign ``checkpoint`` as a ``log-checkpoint`` envelope and return its DSSE JSON.

    The checkpoint's ``arbiter`` must be the key id of ``key`` (a private key, or a
    :class:`~twinaudit.protocol.signer.Signer`).
    """
    _require_signer(checkpoint.arbiter, key, "checkpoint")
    return _sign(checkpoint.encode(), CHECKPOINT_KIND, key)


# --- Verification (owner and verifier side) ----------------------------------------------


def _open_signed(envelope_json: bytes, key: Ed25519PublicKey, kind: str, max_json: int) -> bytes:
    """Parse a DSSE envelope under a size cap and return its payload, signature verified."""
    if not isinstance(envelope_json, bytes | bytearray):
        raise InputError(f"{kind} envelope must be bytes, got {type(envelope_json).__name__}")
    if len(envelope_json) > max_json:
        raise LimitExceededError(f"{kind} envelope size", len(envelope_json), max_json)
    envelope = Envelope.from_json(bytes(envelope_json))
    # One signature labelled with the key's id, so that every byte counts (§8.2, §9.3).
    require_sole_signer(envelope, key, kind)
    return verify_envelope(envelope, key, payload_type(kind))


def _require_arbiter(arbiter: str, key: Ed25519PublicKey, what: str) -> None:
    if arbiter != key_id(key):
        raise VerificationError(
            f"{what} names arbiter {arbiter}, but was verified under key {key_id(key)}"
        )


def open_receipt(envelope_json: bytes, arbiter_public_key: Ed25519PublicKey) -> Receipt:
    """Verify a receipt's signature and parse its payload, without the owner's checks.

    This is steps 1-3 of :func:`verify_receipt`. An owner uses it only to learn which
    inclusion proof to ask for; she MUST call :func:`verify_receipt` before relying on
    the receipt.
    """
    # 1. Signature under the arbiter's key over the exact payload (§8.2, §9.3).
    payload = _open_signed(
        envelope_json, arbiter_public_key, RECEIPT_KIND, MAX_RECEIPT_ENVELOPE_BYTES
    )
    # 2. Strict decoding and every field's type and range (§3.3, §9.2, §9.3).
    receipt = decode_receipt(payload)
    # 3. The payload names the key it was verified under.
    _require_arbiter(receipt.arbiter, arbiter_public_key, "receipt")
    return receipt


def verify_receipt(
    envelope_json: bytes,
    arbiter_public_key: Ed25519PublicKey,
    *,
    expected_root: bytes,
    expected_n_pairs: int,
    expected_item_kind: str,
    inclusion_proof: Sequence[bytes],
    expected_owner: str | None = None,
    expected_claim_key: bytes | None = None,
) -> Receipt:
    """Perform every owner check of §9.3 on a signed receipt and return the receipt.

    ``inclusion_proof`` is the arbiter's proof that the entry is leaf ``entry.index``
    of the log of size ``log_size`` (both from the signed payload, §6.2.5). When
    ``expected_owner`` is given, the entry's owner label must equal it too, and when
    ``expected_claim_key`` is given, the entry must bind that claim key.

    Raises:
        InputError: the envelope or payload is malformed (its subclasses name how:
            ``EncodingError``, ``LimitExceededError``, ``VersionError``, ...).
        SignatureError: the envelope is not signed by ``arbiter_public_key``.
        VerificationError: a field differs from the request, or ``rho_digest`` does not
            commit to ``rho``.
        ProofError: the inclusion proof is malformed or has the wrong length.
        RootMismatchError: the entry is not leaf ``index`` of the log under ``log_root``.

    """
    # Steps 1-3: signature, strict parse of every field, arbiter key id (open_receipt).
    receipt = open_receipt(envelope_json, arbiter_public_key)
    entry = receipt.entry
    # 4. The entry escrows what the owner sent (§9.3).
    if not hmac.compare_digest(entry.root, _check_hash(expected_root, "expected root")):
        raise VerificationError(f"receipt escrows root {entry.root.hex()}, not the one sent")
    if entry.n_pairs != expected_n_pairs:
        raise VerificationError(f"receipt escrows {entry.n_pairs} pairs, not {expected_n_pairs}")
    if entry.item_kind != expected_item_kind:
        raise VerificationError(
            f"receipt escrows item kind {entry.item_kind!r}, not {expected_item_kind!r}"
        )
    if expected_owner is not None and entry.owner != expected_owner:
        raise VerificationError(f"receipt names owner {entry.owner!r}, not {expected_owner!r}")
    if expected_claim_key is not None and (
        entry.claim_key is None or not hmac.compare_digest(entry.claim_key, expected_claim_key)
    ):
        raise VerificationError("receipt's entry does not bind the claim key the owner sent")
    # 5. The public log commits to the secret rho (§9.2, §9.3).
    if not hmac.compare_digest(entry.rho_digest, rho_digest(receipt.rho)):
        raise VerificationError("rho_digest in the entry is not tagged_hash('rho-digest', rho)")
    # 6. The entry is leaf `index` of the log of size index + 1 under log_root (§6.2.2);
    #    size and root come from the signed payload, never from the proof's sender.
    verify_inclusion(
        leaf_data=entry.encode(),
        index=entry.index,
        size=receipt.log_size,
        proof=list(inclusion_proof),
        root=receipt.log_root,
    )
    return receipt


def verify_checkpoint(envelope_json: bytes, arbiter_public_key: Ed25519PublicKey) -> Checkpoint:
    """Verify a signed log checkpoint (§9.4) and return it.

    Raises:
        InputError: the envelope or payload is malformed.
        SignatureError: it is not signed by ``arbiter_public_key``.
        VerificationError: it names another arbiter.
        RootMismatchError: it claims an empty log with a root other than ``H()``.

    """
    # 1. Signature under the arbiter's key (§8.2).
    payload = _open_signed(
        envelope_json, arbiter_public_key, CHECKPOINT_KIND, MAX_CHECKPOINT_ENVELOPE_BYTES
    )
    # 2. Strict decoding and every field's type and range (§3.3, §9.4).
    checkpoint = decode_checkpoint(payload)
    # 3. The payload names the key it was verified under.
    _require_arbiter(checkpoint.arbiter, arbiter_public_key, "checkpoint")
    # 4. The empty log has exactly one root (§6.2.1).
    if checkpoint.size == 0 and checkpoint.root != EMPTY_ROOT:
        raise RootMismatchError(EMPTY_ROOT, checkpoint.root, what="root of the empty log")
    return checkpoint


def verify_log_extension(old: Checkpoint, new: Checkpoint, proof: Sequence[bytes]) -> None:
    """Check that the log of checkpoint ``new`` extends the log of ``old`` (§9.4, §6.2.3).

    Both checkpoints must already be verified (:func:`verify_checkpoint`). A newer
    checkpoint with a smaller size is a rolled-back or forked log.

    Raises:
        VerificationError: the checkpoints are of different arbiters, or ``new`` is
            smaller than ``old``.
        ProofError: the consistency proof is malformed or has the wrong length.
        RootMismatchError: the proof does not connect the two roots.

    """
    if old.arbiter != new.arbiter:
        raise VerificationError("checkpoints of different arbiters cannot be compared")
    if new.size < old.size:
        raise VerificationError(f"log shrank from {old.size} to {new.size} entries")
    verify_consistency(
        old_size=old.size,
        new_size=new.size,
        old_root=old.root,
        new_root=new.root,
        proof=list(proof),
    )


def verify_record(
    entry_bytes: bytes,
    log_size: int,
    inclusion_proof: Sequence[bytes],
    checkpoint_json: bytes,
    arbiter_public_key: Ed25519PublicKey,
) -> tuple[LogEntry, Checkpoint]:
    """Verify a published log entry against a signed checkpoint; return both.

    This checks a ``GetRecord`` answer: the checkpoint verifies (:func:`verify_checkpoint`),
    its size is ``log_size``, and the entry is leaf ``entry.index`` of that log.
    """
    # 1. The checkpoint is the arbiter's, and it fixes both size and root (§6.2.5).
    checkpoint = verify_checkpoint(checkpoint_json, arbiter_public_key)
    if checkpoint.size != log_size:
        raise VerificationError(
            f"proof is for a log of {log_size} entries; the checkpoint has {checkpoint.size}"
        )
    # 2. The entry is canonical and well formed (§9.2).
    if not isinstance(entry_bytes, bytes):
        raise InputError("entry must be bytes")
    entry = decode_entry(entry_bytes)
    # 3. It is leaf `index` of that log (§6.2.2).
    verify_inclusion(
        leaf_data=entry_bytes,
        index=entry.index,
        size=checkpoint.size,
        proof=list(inclusion_proof),
        root=checkpoint.root,
    )
    return entry, checkpoint
