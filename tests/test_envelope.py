"""Signed envelopes: PAE bytes, signatures, strict parsing, key files."""

import json
import stat

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from protocol.encoding import encode
from protocol.envelope import (
    Envelope,
    open_envelope,
    pae,
    payload_type,
    sign_envelope,
    verify_envelope,
)
from protocol.errors import EncodingError, InputError, LimitExceededError, SignatureError
from protocol.hashing import tagged_hash
from protocol.keys import key_id, load_private_key, load_public_key, raw_public_key, write_keypair

KEY = Ed25519PrivateKey.from_private_bytes(bytes(range(32)))
OTHER = Ed25519PrivateKey.from_private_bytes(bytes(range(1, 33)))
TYPE = payload_type("verdict")


def test_pae_counts_utf8_bytes():
    assert pae("http://example.com/HelloWorld", b"hello world") == (
        b"DSSEv1 29 http://example.com/HelloWorld 11 hello world"
    )
    # 'ü' is one character but two UTF-8 bytes: the length must be 3, not 2.
    assert pae("üx", b"\xff") == b"DSSEv1 3 \xc3\xbcx 1 \xff"


def test_payload_type_and_key_id():
    assert TYPE == "application/vnd.twinaudit.verdict.v1+msgpack"
    assert key_id(KEY.public_key()) == tagged_hash("key-id", raw_public_key(KEY.public_key())).hex()
    with pytest.raises(InputError):
        payload_type("Verdict!")


def test_sign_verify_round_trip_and_json():
    body = encode({"decision": "detected"})
    env = sign_envelope(body, TYPE, KEY)
    assert verify_envelope(env, KEY.public_key(), TYPE) == body
    again = Envelope.from_json(env.to_json())
    assert again == env
    assert open_envelope(again, [KEY.public_key()], "verdict") == {"decision": "detected"}


def test_non_ascii_payload_type_signs_over_byte_lengths():
    env = sign_envelope(b"\x80", "application/vnd.twinaudit.prüfung.v1+msgpack", KEY)
    KEY.public_key().verify(env.signatures[0].sig, pae(env.payload_type, b"\x80"))
    verify_envelope(env, KEY.public_key(), "application/vnd.twinaudit.prüfung.v1+msgpack")


def test_every_single_byte_change_fails():
    env = sign_envelope(encode({"a": 1}), TYPE, KEY)
    for i in range(len(env.payload)):
        mutated = bytearray(env.payload)
        mutated[i] ^= 0x01
        with pytest.raises(SignatureError):
            verify_envelope(Envelope(TYPE, bytes(mutated), env.signatures), KEY.public_key(), TYPE)
    sig = bytearray(env.signatures[0].sig)
    sig[5] ^= 0x80
    forged = Envelope(TYPE, env.payload, (type(env.signatures[0])("x", bytes(sig)),))
    with pytest.raises(SignatureError):
        verify_envelope(forged, KEY.public_key(), TYPE)


def test_wrong_key_wrong_type_and_thresholds():
    env = sign_envelope(b"\x01", TYPE, KEY)
    with pytest.raises(SignatureError):
        verify_envelope(env, OTHER.public_key(), TYPE)
    with pytest.raises(SignatureError):
        verify_envelope(env, KEY.public_key(), payload_type("receipt"))
    # A duplicated signature from the same key counts once.
    doubled = Envelope(TYPE, env.payload, env.signatures * 2)
    with pytest.raises(SignatureError):
        verify_envelope(doubled, [KEY.public_key(), OTHER.public_key()], TYPE, threshold=2)
    both = sign_envelope(b"\x01", TYPE, [KEY, OTHER])
    assert (
        verify_envelope(both, [KEY.public_key(), OTHER.public_key()], TYPE, threshold=2) == b"\x01"
    )
    # Key ids are hints: a wrong key id does not stop a valid signature from counting.
    relabelled = Envelope(
        TYPE, env.payload, (type(env.signatures[0])("bogus", env.signatures[0].sig),)
    )
    assert verify_envelope(relabelled, KEY.public_key(), TYPE) == b"\x01"


def _doc(env):
    return json.loads(env.to_json())


@pytest.mark.parametrize(
    "mutate",
    [
        lambda d: d.pop("payload"),
        lambda d: d.update(extra=1),
        lambda d: d.update(signatures=[]),
        lambda d: d.update(payload="not base64!"),
        lambda d: d.update(payload=d["payload"].rstrip("=")),
        lambda d: d["signatures"][0].update(sig=5),
        lambda d: d["signatures"][0].update(extra="x"),
        lambda d: d.update(payloadType=7),
    ],
)
def test_strict_json_parsing(mutate):
    doc = _doc(sign_envelope(b"\x01\x02", TYPE, KEY))
    mutate(doc)
    with pytest.raises(EncodingError):  # written in the one accepted form, refused for ``mutate``
        Envelope.from_json(json.dumps(doc, sort_keys=True, separators=(",", ":")).encode())


def test_json_size_and_signature_caps():
    doc = _doc(sign_envelope(b"\x01", TYPE, KEY))
    doc["signatures"] = doc["signatures"] * 17
    with pytest.raises(LimitExceededError):
        Envelope.from_json(json.dumps(doc).encode())
    with pytest.raises(EncodingError):
        Envelope.from_json(b"\xff\xfe")


def test_open_envelope_rejects_non_canonical_payload():
    env = sign_envelope(bytes.fromhex("cc05"), TYPE, KEY)  # uint8 form of 5
    with pytest.raises(EncodingError):
        open_envelope(env, KEY.public_key(), "verdict")


def test_key_files(tmp_path):
    path = tmp_path / "arbiter.key"
    key = write_keypair(path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert load_private_key(path).public_key() == key.public_key()
    assert load_public_key(tmp_path / "arbiter.key.pub") == key.public_key()
    with pytest.raises(InputError):
        write_keypair(path)  # never overwrites
    path.chmod(0o644)
    with pytest.raises(InputError):
        load_private_key(path)
    (tmp_path / "junk.pem").write_bytes(b"-----BEGIN PRIVATE KEY-----\nAAAA\n")
    (tmp_path / "junk.pem").chmod(0o600)
    with pytest.raises(InputError):
        load_private_key(tmp_path / "junk.pem")
    with pytest.raises(InputError):
        load_public_key(tmp_path / "missing.pub")
