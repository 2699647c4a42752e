"""Escrow messages (spec draft §9): round trips, strict parsing, receipt and checkpoint checks."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from tests.support.keys import KEY, OTHER
from twinaudit.protocol import limits
from twinaudit.protocol.encoding import encode
from twinaudit.protocol.envelope import payload_type, sign_envelope
from twinaudit.protocol.errors import (
    EncodingError,
    InputError,
    LimitExceededError,
    ParameterError,
    ProofError,
    RootMismatchError,
    SignatureError,
    VerificationError,
    VersionError,
)
from twinaudit.protocol.escrow_messages import (
    CHECKPOINT_KIND,
    MAX_OWNER_BYTES,
    RECEIPT_KIND,
    Checkpoint,
    EscrowRequest,
    LogEntry,
    Receipt,
    decode_checkpoint,
    decode_entry,
    decode_receipt,
    decode_request,
    format_time,
    make_entry,
    open_receipt,
    parse_time,
    rho_digest,
    sign_checkpoint,
    sign_receipt,
    verify_checkpoint,
    verify_log_extension,
    verify_receipt,
    verify_record,
)
from twinaudit.protocol.keys import key_id
from twinaudit.protocol.merkle import EMPTY_ROOT, MerkleTree

ARBITER = key_id(KEY.public_key())
ROOT = bytes(range(32))
RHO = bytes(range(100, 132))
WHEN = datetime(2026, 11, 21, 20, 40, 5, tzinfo=UTC)

REQUEST = EscrowRequest(root=ROOT, n_pairs=1000, item_kind="image", owner="alice")


def _log_with(entry_index: int) -> tuple[MerkleTree, LogEntry]:
    """A log of ``entry_index + 1`` entries whose last is REQUEST's entry."""
    tree = MerkleTree()
    for i in range(entry_index):
        other = make_entry(REQUEST, index=i, time=WHEN, rho=bytes([i]) * 32)
        tree.append(other.encode())
    entry = make_entry(REQUEST, index=entry_index, time=WHEN, rho=RHO)
    tree.append(entry.encode())
    return tree, entry


TREE, ENTRY = _log_with(5)
RECEIPT = Receipt(arbiter=ARBITER, entry=ENTRY, rho=RHO, log_size=6, log_root=TREE.root())
RECEIPT_JSON = sign_receipt(RECEIPT, KEY)
PROOF = TREE.inclusion_proof(5, 6)


def _verify(envelope: bytes = RECEIPT_JSON, **overrides: Any) -> Receipt:
    args: dict[str, Any] = {
        "expected_root": ROOT,
        "expected_n_pairs": 1000,
        "expected_item_kind": "image",
        "inclusion_proof": PROOF,
    }
    args.update(overrides)
    key = args.pop("key", KEY.public_key())
    return verify_receipt(envelope, key, **args)


# --- Times ------------------------------------------------------------------------------


def test_time_round_trip_and_truncation():
    assert format_time(WHEN) == "2026-11-21T20:40:05Z"
    assert parse_time("2026-11-21T20:40:05Z") == WHEN
    later = WHEN.replace(microsecond=999_999).astimezone(timezone(timedelta(hours=-5)))
    assert format_time(later) == "2026-11-21T20:40:05Z"


@pytest.mark.parametrize(
    "text",
    [
        "2026-11-21T20:40:05",
        "2026-11-21T20:40:05z",
        "2026-11-21 20:40:05Z",
        "2026-11-21T20:40:05.1Z",
        "2026-11-21T20:40:05+00:00",
        "2026-13-01T00:00:00Z",
        "2026-02-30T00:00:00Z",
        "2026-11-21T24:00:00Z",
        "2026-12-31T23:59:60Z",
        "0000-01-01T00:00:00Z",
        "２026-11-21T20:40:05Z",
        " 2026-11-21T20:40:05Z",
        "2026-11-21T20:40:05Z\n",
        "",
        20261121,
        None,
    ],
)
def test_bad_times_are_rejected(text):
    with pytest.raises(InputError):
        parse_time(text)


def test_naive_datetime_is_refused():
    with pytest.raises(InputError):
        format_time(datetime(2026, 1, 1))


# --- Round trips ------------------------------------------------------------------------


def test_round_trips():
    assert decode_request(REQUEST.encode()) == REQUEST
    assert decode_entry(ENTRY.encode()) == ENTRY
    assert decode_receipt(RECEIPT.encode()) == RECEIPT
    checkpoint = Checkpoint(arbiter=ARBITER, size=6, root=TREE.root(), time="2026-11-21T20:40:05Z")
    assert decode_checkpoint(checkpoint.encode()) == checkpoint
    assert ENTRY.rho_digest == rho_digest(RHO)
    assert ENTRY.timestamp == WHEN
    assert set(ENTRY.to_value()) == {
        "spec", "index", "root", "n_pairs", "item_kind", "owner", "time", "rho_digest",
    }  # fmt: skip


def test_verify_receipt_accepts_the_real_thing():
    receipt = _verify()
    assert receipt == RECEIPT
    assert _verify(expected_owner="alice") == RECEIPT
    assert open_receipt(RECEIPT_JSON, KEY.public_key()) == RECEIPT


def test_first_entry_of_a_log_needs_an_empty_proof():
    tree, entry = _log_with(0)
    receipt = Receipt(arbiter=ARBITER, entry=entry, rho=RHO, log_size=1, log_root=tree.root())
    assert _verify(sign_receipt(receipt, KEY), inclusion_proof=[]) == receipt


def test_max_owner_label_and_unicode():
    owner = "é" * (MAX_OWNER_BYTES // 2)
    request = EscrowRequest(root=ROOT, n_pairs=limits.MAX_PAIRS, item_kind="text", owner=owner)
    assert decode_request(request.encode()) == request
    with pytest.raises(LimitExceededError):
        EscrowRequest(root=ROOT, n_pairs=1, item_kind="text", owner=owner + "x")


# --- Malformed requests -----------------------------------------------------------------


def _request_map(**changes: Any) -> dict[str, Any]:
    value: dict[str, Any] = dict(REQUEST.to_value())
    for key, new in changes.items():
        if new is _DROP:
            del value[key]
        else:
            value[key] = new
    return value


_DROP = object()

REQUEST_CASES: list[tuple[str, dict[str, Any], type[Exception]]] = [
    ("missing root", {"root": _DROP}, InputError),
    ("missing spec", {"spec": _DROP}, InputError),
    ("extra key", {"extra": 1}, InputError),
    ("root too short", {"root": ROOT[:31]}, InputError),
    ("root too long", {"root": ROOT + b"\x00"}, InputError),
    ("root as text", {"root": ROOT.hex()}, InputError),
    ("n_pairs zero", {"n_pairs": 0}, ParameterError),
    ("n_pairs negative", {"n_pairs": -1}, ParameterError),
    ("n_pairs above MAX_PAIRS", {"n_pairs": limits.MAX_PAIRS + 1}, LimitExceededError),
    ("n_pairs as float", {"n_pairs": 10.0}, ParameterError),
    ("n_pairs as bool", {"n_pairs": True}, ParameterError),
    ("unknown item kind", {"item_kind": "audio"}, ParameterError),
    ("item kind as bytes", {"item_kind": b"image"}, ParameterError),
    ("owner as bytes", {"owner": b"alice"}, InputError),
    ("owner too long", {"owner": "a" * (MAX_OWNER_BYTES + 1)}, LimitExceededError),
    ("wrong spec version", {"spec": "0.1"}, VersionError),
    ("spec version as number", {"spec": 0.1}, VersionError),
    ("wrong version wins over bad keys", {"spec": "9", "extra": 1}, VersionError),
]


@pytest.mark.parametrize(
    ("value", "error"), [c[1:] for c in REQUEST_CASES], ids=[c[0] for c in REQUEST_CASES]
)
def test_malformed_requests(value, error):
    data = encode(_request_map(**value))
    with pytest.raises(error) as info:
        decode_request(data)
    assert type(info.value) is error


@pytest.mark.parametrize(
    ("data", "error"),
    [
        (b"", EncodingError),
        (b"\x90", InputError),  # an array, not a map
        (REQUEST.encode() + b"\x00", EncodingError),
        (b"\x85" + REQUEST.encode()[1:-1], EncodingError),  # truncated
        (b"\xc0" * 2000, LimitExceededError),
    ],
    ids=["empty", "not a map", "trailing byte", "truncated", "oversized"],
)
def test_request_bytes_that_are_not_canonical_maps(data, error):
    with pytest.raises(error) as info:
        decode_request(data)
    assert type(info.value) is error


def test_non_canonical_request_encoding_is_rejected():
    # Same map with n_pairs as uint32 instead of uint16: decodes, but is not canonical.
    value = REQUEST.to_value()
    canonical = encode(value)
    non_canonical = canonical.replace(b"\xcd\x03\xe8", b"\xce\x00\x00\x03\xe8")
    assert non_canonical != canonical
    with pytest.raises(EncodingError):
        decode_request(non_canonical)


# --- Malformed entries ------------------------------------------------------------------


def _entry_map(**changes: Any) -> dict[str, Any]:
    value: dict[str, Any] = dict(ENTRY.to_value())
    for key, new in changes.items():
        if new is _DROP:
            del value[key]
        else:
            value[key] = new
    return value


ENTRY_CASES: list[tuple[str, dict[str, Any], type[Exception]]] = [
    ("missing time", {"time": _DROP}, InputError),
    ("missing rho_digest", {"rho_digest": _DROP}, InputError),
    ("extra rho", {"rho": RHO}, InputError),
    ("negative index", {"index": -1}, InputError),
    ("index above 2**64-2", {"index": (1 << 64) - 1}, InputError),
    ("index as text", {"index": "5"}, InputError),
    ("rho_digest short", {"rho_digest": bytes(31)}, InputError),
    ("time with offset", {"time": "2026-11-21T20:40:05+00:00"}, InputError),
    ("time as int", {"time": 1_700_000_000}, InputError),
    ("time not a date", {"time": "2026-02-29T00:00:00Z"}, InputError),
    ("wrong spec version", {"spec": "1.0"}, VersionError),
    ("n_pairs zero", {"n_pairs": 0}, ParameterError),
    ("owner too long", {"owner": "x" * 257}, LimitExceededError),
]


@pytest.mark.parametrize(
    ("value", "error"), [c[1:] for c in ENTRY_CASES], ids=[c[0] for c in ENTRY_CASES]
)
def test_malformed_entries(value, error):
    with pytest.raises(error) as info:
        decode_entry(encode(_entry_map(**value)))
    assert type(info.value) is error


# --- Malformed receipts (signed, so only the payload is wrong) ---------------------------


def _signed(value: Any, kind: str = RECEIPT_KIND, key: Ed25519PrivateKey = KEY) -> bytes:
    return sign_envelope(encode(value), payload_type(kind), key).to_json()


def _receipt_map(**changes: Any) -> dict[str, Any]:
    value: dict[str, Any] = dict(RECEIPT.to_value())
    for key, new in changes.items():
        if new is _DROP:
            del value[key]
        else:
            value[key] = new
    return value


RECEIPT_PAYLOAD_CASES: list[tuple[str, dict[str, Any], type[Exception]]] = [
    ("missing rho", {"rho": _DROP}, InputError),
    ("missing log_root", {"log_root": _DROP}, InputError),
    ("extra key", {"note": "hi"}, InputError),
    ("rho short", {"rho": RHO[:16]}, InputError),
    ("rho as text", {"rho": RHO.hex()}, InputError),
    ("log_size not index+1", {"log_size": 7}, InputError),
    ("log_size zero", {"log_size": 0}, InputError),
    ("arbiter not a key id", {"arbiter": "arbiter"}, InputError),
    ("arbiter uppercase hex", {"arbiter": ARBITER.upper()}, InputError),
    ("arbiter of another key", {"arbiter": key_id(OTHER.public_key())}, VerificationError),
    ("entry not a map", {"entry": ENTRY.encode()}, InputError),
    ("entry missing a key", {"entry": _entry_map(owner=_DROP)}, InputError),
    ("entry with bad time", {"entry": _entry_map(time="yesterday")}, InputError),
    ("receipt spec version", {"spec": "0.1"}, VersionError),
    ("entry spec version", {"entry": _entry_map(spec="0.1")}, VersionError),
    (
        "rho_digest does not commit to rho",
        {"entry": _entry_map(rho_digest=rho_digest(bytes(32)))},
        VerificationError,
    ),
    ("another root escrowed", {"entry": _entry_map(root=bytes(32))}, VerificationError),
    ("another n_pairs escrowed", {"entry": _entry_map(n_pairs=999)}, VerificationError),
    ("another item kind", {"entry": _entry_map(item_kind="text")}, VerificationError),
    ("log_root of another log", {"log_root": EMPTY_ROOT}, RootMismatchError),
    ("index moved (proof shape)", {"entry": _entry_map(index=4), "log_size": 5}, ProofError),
]


@pytest.mark.parametrize(
    ("value", "error"),
    [c[1:] for c in RECEIPT_PAYLOAD_CASES],
    ids=[c[0] for c in RECEIPT_PAYLOAD_CASES],
)
def test_malformed_or_wrong_receipts(value, error):
    with pytest.raises(error) as info:
        _verify(_signed(_receipt_map(**value)))
    assert type(info.value) is error


def _tamper_payload(envelope: bytes) -> bytes:
    doc = json.loads(envelope)
    payload = bytearray(base64.b64decode(doc["payload"]))
    payload[len(payload) // 2] ^= 0x01
    doc["payload"] = base64.b64encode(bytes(payload)).decode()
    return json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()


def _tamper_sig(envelope: bytes) -> bytes:
    doc = json.loads(envelope)
    sig = bytearray(base64.b64decode(doc["signatures"][0]["sig"]))
    sig[0] ^= 0x80
    doc["signatures"][0]["sig"] = base64.b64encode(bytes(sig)).decode()
    return json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()


def _bad_proof_element(proof: list[bytes]) -> list[bytes]:
    return [bytes(32), *proof[1:]]


ENVELOPE_CASES: list[tuple[str, Callable[[], Receipt], type[Exception]]] = [
    ("tampered payload byte", lambda: _verify(_tamper_payload(RECEIPT_JSON)), SignatureError),
    ("tampered signature byte", lambda: _verify(_tamper_sig(RECEIPT_JSON)), SignatureError),
    ("wrong arbiter key", lambda: _verify(key=OTHER.public_key()), SignatureError),
    ("signed by another key", lambda: _verify(sign_receipt_as_other()), SignatureError),
    (
        "checkpoint kind instead of receipt",
        lambda: _verify(_signed(RECEIPT.to_value(), kind=CHECKPOINT_KIND)),
        SignatureError,
    ),
    ("not JSON", lambda: _verify(b"\xff{"), EncodingError),
    ("oversized envelope", lambda: _verify(b" " * 9000), LimitExceededError),
    ("envelope as text", lambda: _verify("{}"), InputError),  # type: ignore[arg-type]
    ("wrong proof element", lambda: _verify(inclusion_proof=_bad_proof_element(PROOF)),
     RootMismatchError),
    ("proof too short", lambda: _verify(inclusion_proof=PROOF[:-1]), ProofError),
    ("proof too long", lambda: _verify(inclusion_proof=[*PROOF, bytes(32)]), ProofError),
    ("proof element of 31 bytes", lambda: _verify(inclusion_proof=[PROOF[0][:31], *PROOF[1:]]),
     ProofError),
    ("proof of another leaf", lambda: _verify(inclusion_proof=TREE.inclusion_proof(4, 6)),
     RootMismatchError),
    ("expected root differs", lambda: _verify(expected_root=bytes(32)), VerificationError),
    ("expected root malformed", lambda: _verify(expected_root=b"x"), InputError),
    ("expected owner differs", lambda: _verify(expected_owner="bob"), VerificationError),
]  # fmt: skip


def sign_receipt_as_other() -> bytes:
    return _signed(RECEIPT.to_value(), key=OTHER)


@pytest.mark.parametrize(
    ("call", "error"), [c[1:] for c in ENVELOPE_CASES], ids=[c[0] for c in ENVELOPE_CASES]
)
def test_receipt_envelope_and_proof_failures(call, error):
    with pytest.raises(error) as info:
        call()
    assert type(info.value) is error


def test_every_single_byte_change_of_the_receipt_fails():
    # Every byte of the envelope file counts, its key id too (spec §8.2, §9.3).
    for position in range(len(RECEIPT_JSON)):
        changed = bytearray(RECEIPT_JSON)
        changed[position] ^= 0x01
        with pytest.raises((InputError, VerificationError)):
            _verify(bytes(changed))


def _keyid_edits(envelope: bytes) -> list[bytes]:
    """Every one-character edit of the envelope's key id that keeps it a key id's form."""
    start = envelope.index(b'"keyid":"') + len(b'"keyid":"')
    edits = []
    for position in range(start, start + 64):
        changed = bytearray(envelope)
        changed[position] = ord("0") if changed[position] != ord("0") else ord("f")
        edits.append(bytes(changed))
    return edits


def _second_signature(envelope: bytes, key: Ed25519PrivateKey) -> bytes:
    """The envelope with a second, valid signature of ``key`` over the same payload."""
    doc = json.loads(envelope)
    extra = json.loads(
        sign_envelope(base64.b64decode(doc["payload"]), doc["payloadType"], key).to_json()
    )
    doc["signatures"] += extra["signatures"]
    return json.dumps(doc, separators=(",", ":")).encode()


def test_issue_40_n6_a_receipt_binds_its_key_id():
    # Issue #40 N6: all 64 one-character edits of the key id verified on main.
    for changed in _keyid_edits(RECEIPT_JSON):
        with pytest.raises(SignatureError):
            _verify(changed)
    for key in (KEY, OTHER):
        with pytest.raises(SignatureError):
            _verify(_second_signature(RECEIPT_JSON, key))


def test_issue_40_n6_a_checkpoint_binds_its_key_id():
    signed = sign_checkpoint(_checkpoint(6), KEY)
    for changed in _keyid_edits(signed):
        with pytest.raises(SignatureError):
            verify_checkpoint(changed, KEY.public_key())
    for key in (KEY, OTHER):
        with pytest.raises(SignatureError):
            verify_checkpoint(_second_signature(signed, key), KEY.public_key())
    for position in range(len(signed)):
        changed = bytearray(signed)
        changed[position] ^= 0x01
        with pytest.raises((InputError, VerificationError)):
            verify_checkpoint(bytes(changed), KEY.public_key())


def test_signing_requires_the_named_key():
    with pytest.raises(InputError):
        sign_receipt(RECEIPT, OTHER)
    checkpoint = Checkpoint(arbiter=ARBITER, size=0, root=EMPTY_ROOT, time=format_time(WHEN))
    with pytest.raises(InputError):
        sign_checkpoint(checkpoint, OTHER)


# --- Checkpoints ------------------------------------------------------------------------


def _checkpoint(size: int, tree: MerkleTree = TREE) -> Checkpoint:
    return Checkpoint(arbiter=ARBITER, size=size, root=tree.root(size), time=format_time(WHEN))


def test_checkpoint_sign_verify_and_extension():
    old, new = _checkpoint(2), _checkpoint(6)
    assert verify_checkpoint(sign_checkpoint(old, KEY), KEY.public_key()) == old
    verify_log_extension(old, new, TREE.consistency_proof(2, 6))
    verify_log_extension(new, new, [])
    empty = _checkpoint(0)
    assert verify_checkpoint(sign_checkpoint(empty, KEY), KEY.public_key()) == empty
    verify_log_extension(empty, new, [])


def _checkpoint_map(**changes: Any) -> dict[str, Any]:
    value: dict[str, Any] = dict(_checkpoint(6).to_value())
    for key, new in changes.items():
        if new is _DROP:
            del value[key]
        else:
            value[key] = new
    return value


CHECKPOINT_CASES: list[tuple[str, dict[str, Any], type[Exception]]] = [
    ("missing time", {"time": _DROP}, InputError),
    ("extra key", {"log_size": 6}, InputError),
    ("negative size", {"size": -1}, InputError),
    ("size above 2**64-1", {"size": 1 << 64}, EncodingError),
    ("root short", {"root": bytes(31)}, InputError),
    ("bad time", {"time": "2026-11-21"}, InputError),
    ("wrong spec", {"spec": "0.0"}, VersionError),
    ("another arbiter named", {"arbiter": key_id(OTHER.public_key())}, VerificationError),
    ("empty log with a non-empty root", {"size": 0}, RootMismatchError),
]


@pytest.mark.parametrize(
    ("value", "error"), [c[1:] for c in CHECKPOINT_CASES], ids=[c[0] for c in CHECKPOINT_CASES]
)
def test_malformed_checkpoints(value, error):
    with pytest.raises(error) as info:
        verify_checkpoint(_signed(_checkpoint_map(**value), CHECKPOINT_KIND), KEY.public_key())
    assert type(info.value) is error


def test_checkpoint_signature_and_kind():
    signed = sign_checkpoint(_checkpoint(6), KEY)
    with pytest.raises(SignatureError):
        verify_checkpoint(signed, OTHER.public_key())
    with pytest.raises(SignatureError):
        verify_checkpoint(_tamper_payload(signed), KEY.public_key())
    with pytest.raises(SignatureError):  # a receipt is not a checkpoint
        verify_checkpoint(RECEIPT_JSON, KEY.public_key())


def test_log_extension_failures():
    old, new = _checkpoint(2), _checkpoint(6)
    with pytest.raises(VerificationError) as info:
        verify_log_extension(new, old, [])
    assert type(info.value) is VerificationError
    with pytest.raises(ProofError):
        verify_log_extension(old, new, [])
    with pytest.raises(RootMismatchError):
        verify_log_extension(old, new, [bytes(32), *TREE.consistency_proof(2, 6)[1:]])
    forked = MerkleTree([b"fork"] * 6)
    with pytest.raises(RootMismatchError):
        verify_log_extension(old, _checkpoint(6, forked), TREE.consistency_proof(2, 6))
    other = Checkpoint(arbiter=key_id(OTHER.public_key()), size=6, root=TREE.root(), time=new.time)
    with pytest.raises(VerificationError):
        verify_log_extension(old, other, TREE.consistency_proof(2, 6))


def test_verify_record():
    signed = sign_checkpoint(_checkpoint(6), KEY)
    entry, checkpoint = verify_record(ENTRY.encode(), 6, PROOF, signed, KEY.public_key())
    assert entry == ENTRY
    assert checkpoint.size == 6
    with pytest.raises(VerificationError):
        verify_record(ENTRY.encode(), 5, PROOF, signed, KEY.public_key())
    with pytest.raises(RootMismatchError):
        verify_record(ENTRY.encode(), 6, TREE.inclusion_proof(4, 6), signed, KEY.public_key())
    with pytest.raises(EncodingError):
        verify_record(ENTRY.encode() + b"\x00", 6, PROOF, signed, KEY.public_key())
