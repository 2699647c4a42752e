"""Signed envelopes: PAE bytes, signatures, strict parsing, key files."""

import json
import stat
import time
import tracemalloc

import pytest

from tests.support.keys import KEY, OTHER
from twinaudit.protocol.encoding import encode
from twinaudit.protocol.envelope import (
    Envelope,
    open_envelope,
    pae,
    payload_type,
    sign_envelope,
    verify_envelope,
)
from twinaudit.protocol.errors import EncodingError, InputError, LimitExceededError, SignatureError
from twinaudit.protocol.hashing import tagged_hash
from twinaudit.protocol.keys import (
    key_id,
    load_private_key,
    load_public_key,
    raw_public_key,
    write_keypair,
)

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


def _with_signatures(inner: bytes) -> bytes:
    """A signed envelope's text with ``inner`` put first in its signature list."""
    text = sign_envelope(b"\x01", TYPE, KEY).to_json()
    at = text.index(b'"signatures":[') + len(b'"signatures":[')
    return text[:at] + inner + text[at:]


# Issue #22 D3 and the envelope's share of D2: text that nests deeper, or holds more
# values, than the one accepted form (spec §8.2) is refused before the JSON parser
# builds anything, in time and memory far below the input's size.
@pytest.mark.parametrize(
    ("name", "build", "error", "match"),
    [
        ("2 KB of nesting", lambda: b'{"a":' * 400 + b"1" + b"}" * 400, EncodingError, "nested"),
        ("200 KB of nesting", lambda: b"[" * 100_000 + b"]" * 100_000, EncodingError, "nested"),
        (
            "nesting in signatures",
            lambda: _with_signatures(b"[" * 1000 + b"]" * 1000 + b","),
            EncodingError,
            "nested",
        ),
        (
            "3 M empty arrays",
            lambda: _with_signatures(b"[]," * 3_000_000),
            LimitExceededError,
            "arrays",
        ),
        (
            "3 M short strings",
            lambda: _with_signatures(b'"ab",' * 3_000_000),
            LimitExceededError,
            "strings",
        ),
        ("5 M numbers", lambda: _with_signatures(b"1.5," * 5_000_000), EncodingError, "number"),
        ("a literal", lambda: _with_signatures(b"null,"), EncodingError, "literal"),
        (
            "5 M escapes",
            lambda: b'{"payload":"' + b"\\\\" * 5_000_000 + b'"}',
            EncodingError,
            "escape",
        ),
        ("20 M closers", lambda: b"]" * 20_000_000, EncodingError, "never opened"),
        (
            "unterminated",
            lambda: b'{"payload":"' + b"A" * 20_000_000,
            EncodingError,
            "unterminated",
        ),
    ],
    ids=lambda v: v if isinstance(v, str) else "",
)
def test_hostile_json_is_refused_before_parsing(monkeypatch, name, build, error, match):
    def no_parse(*args, **kwargs):
        raise AssertionError(f"{name}: reached the JSON parser")

    text = build()
    monkeypatch.setattr("twinaudit.protocol.envelope.json.loads", no_parse)
    tracemalloc.start()
    # CPU time, not wall time: the bound is on the work done, which a loaded machine does
    # not change (wall time took 2.1 s for 0.08 s of CPU beside three test runs).
    started = time.process_time()
    try:
        with pytest.raises(error, match=match):
            Envelope.from_json(text)
        elapsed = time.process_time() - started
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert elapsed < 1.0
    assert peak < 1024 * 1024 + len(text) // 10


def test_brackets_and_separators_inside_strings_are_text():
    """Only brackets outside strings count: ids and types may hold ``[{,:`` freely."""
    env = sign_envelope(b"\x01", "application/vnd.x[{,:}]", KEY)
    tricky = Envelope(
        env.payload_type,
        env.payload,
        (type(env.signatures[0])("[{[{:,", env.signatures[0].sig),) * 16,
    )
    assert Envelope.from_json(tricky.to_json()) == tricky


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
