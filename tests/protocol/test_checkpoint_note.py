"""The arbiter's checkpoint as a tlog-checkpoint signed note, and witness policies (§9.5)."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from tests.support.keys import KEY, OTHER
from twinaudit.protocol.checkpoint_note import (
    ORIGIN_PREFIX,
    CheckpointText,
    WitnessPolicy,
    add_signatures,
    arbiter_key,
    arbiter_origin,
    arbiter_text,
    checkpoint_note_from_signature,
    parse_checkpoint_text,
    sign_checkpoint_note,
    verify_checkpoint_note,
)
from twinaudit.protocol.errors import (
    EncodingError,
    InputError,
    LimitExceededError,
    ParameterError,
    RootMismatchError,
    SignatureError,
    VerificationError,
)
from twinaudit.protocol.escrow_messages import Checkpoint, format_time
from twinaudit.protocol.keys import key_id
from twinaudit.protocol.merkle import EMPTY_ROOT, MAX_TREE_SIZE
from twinaudit.protocol.note import (
    COSIGNATURE_V1,
    ED25519,
    Note,
    NoteSignature,
    VerifierKey,
    cosign,
    parse_note,
)

ROOT = hashlib.sha256(b"a log root").digest()
NOW = 1_800_000_000
W1 = Ed25519PrivateKey.from_private_bytes(hashlib.sha256(b"witness 1").digest())
W2 = Ed25519PrivateKey.from_private_bytes(hashlib.sha256(b"witness 2").digest())
W3 = Ed25519PrivateKey.from_private_bytes(hashlib.sha256(b"witness 3").digest())


def _witness(name: str, key: Ed25519PrivateKey) -> VerifierKey:
    return VerifierKey.of(name, COSIGNATURE_V1, key.public_key())


def _cosigned(note: bytes, *cosigners: tuple[str, Ed25519PrivateKey, int]) -> bytes:
    text = parse_note(note).text
    return add_signatures(note, [cosign(text, n, k, t) for n, k, t in cosigners])


def _policy(k: int, max_age: int | None = None) -> WitnessPolicy:
    return WitnessPolicy((_witness("w1.example/w", W1), _witness("w2.example/w", W2)), k, max_age)


def test_the_arbiters_note_is_three_lines_signed_under_its_origin() -> None:
    note = sign_checkpoint_note(5, ROOT, KEY)
    origin = ORIGIN_PREFIX + key_id(KEY.public_key())
    assert arbiter_origin(KEY.public_key()) == origin
    text, signatures = note.decode().split("\n\n")
    assert text.split("\n") == [origin, "5", CheckpointText(origin, 5, ROOT).text().split()[2]]
    assert signatures.startswith(f"— {origin} ")
    key = arbiter_key(KEY.public_key())
    assert key.sig_type == ED25519 and key.name == origin
    got = verify_checkpoint_note(note, KEY.public_key())
    assert (got.origin, got.size, got.root, got.counted) == (origin, 5, ROOT, ())


def test_the_empty_log_has_the_empty_root() -> None:
    assert (
        verify_checkpoint_note(sign_checkpoint_note(0, EMPTY_ROOT, KEY), KEY.public_key()).size == 0
    )
    with pytest.raises(RootMismatchError):
        sign_checkpoint_note(0, ROOT, KEY)


def test_a_signature_made_elsewhere_is_checked_before_it_is_used() -> None:
    text = arbiter_text(7, ROOT, KEY.public_key()).encode()
    note = checkpoint_note_from_signature(7, ROOT, KEY.public_key(), KEY.sign(text))
    assert note == sign_checkpoint_note(7, ROOT, KEY)
    with pytest.raises(SignatureError):
        checkpoint_note_from_signature(8, ROOT, KEY.public_key(), KEY.sign(text))


def test_another_arbiters_note_or_origin_is_refused() -> None:
    with pytest.raises(SignatureError):
        verify_checkpoint_note(sign_checkpoint_note(5, ROOT, OTHER), KEY.public_key())
    # The arbiter's key over a text whose origin is not its own.
    name = arbiter_key(KEY.public_key())
    text = CheckpointText("example.com/log", 5, ROOT).text()
    forged = Note(text, (NoteSignature(name.name, name.key_id, KEY.sign(text.encode())),))
    with pytest.raises(VerificationError, match="origin"):
        verify_checkpoint_note(forged.encode(), KEY.public_key())
    # Its key over its own text with an extension line.
    text = CheckpointText(name.name, 5, ROOT, ("time 1",)).text()
    extended = Note(text, (NoteSignature(name.name, name.key_id, KEY.sign(text.encode())),))
    with pytest.raises(InputError, match="extension"):
        verify_checkpoint_note(extended.encode(), KEY.public_key())


def test_two_of_two_witnesses_must_cosign() -> None:
    note = sign_checkpoint_note(5, ROOT, KEY)
    both = _cosigned(note, ("w1.example/w", W1, NOW - 10), ("w2.example/w", W2, NOW - 5))
    got = verify_checkpoint_note(both, KEY.public_key(), _policy(2), now=NOW)
    assert [(c.name, c.timestamp) for c in got.counted] == [
        ("w1.example/w", NOW - 10),
        ("w2.example/w", NOW - 5),
    ]
    one = _cosigned(note, ("w1.example/w", W1, NOW))
    assert len(verify_checkpoint_note(one, KEY.public_key(), _policy(1), now=NOW).counted) == 1
    with pytest.raises(VerificationError, match="1 of the 2"):
        verify_checkpoint_note(one, KEY.public_key(), _policy(2), now=NOW)
    # An unknown witness's line does not count and is not refused.
    stranger = _cosigned(one, ("w3.example/w", W3, NOW))
    with pytest.raises(VerificationError, match="1 of the 2"):
        verify_checkpoint_note(stranger, KEY.public_key(), _policy(2), now=NOW)
    # One witness cosigning twice counts once.
    twice = _cosigned(one, ("w1.example/w", W1, NOW - 1))
    with pytest.raises(VerificationError, match="1 of the 2"):
        verify_checkpoint_note(twice, KEY.public_key(), _policy(2), now=NOW)


def test_stale_and_future_cosignatures() -> None:
    note = sign_checkpoint_note(5, ROOT, KEY)
    old = _cosigned(note, ("w1.example/w", W1, NOW - 3600), ("w2.example/w", W2, NOW))
    assert len(verify_checkpoint_note(old, KEY.public_key(), _policy(2), now=NOW).counted) == 2
    with pytest.raises(VerificationError, match=r"stale: w1\.example/w"):
        verify_checkpoint_note(old, KEY.public_key(), _policy(2, max_age=600), now=NOW)
    # Needed from a time after the old cosignature (less the skew): stale as well.
    with pytest.raises(VerificationError, match=r"stale: w1\.example/w"):
        verify_checkpoint_note(old, KEY.public_key(), _policy(2), now=NOW, not_before=NOW - 10)
    got = verify_checkpoint_note(old, KEY.public_key(), _policy(2), now=NOW, not_before=NOW - 3900)
    assert len(got.counted) == 2  # the old one is within the skew of the time needed
    got = verify_checkpoint_note(old, KEY.public_key(), _policy(1, max_age=600), now=NOW)
    assert [c.name for c in got.stale] == ["w1.example/w"]
    future = _cosigned(note, ("w1.example/w", W1, NOW + 301), ("w2.example/w", W2, NOW))
    with pytest.raises(VerificationError, match="after now"):
        verify_checkpoint_note(future, KEY.public_key(), _policy(1), now=NOW)
    skewed = _cosigned(note, ("w1.example/w", W1, NOW + 300))
    assert verify_checkpoint_note(skewed, KEY.public_key(), _policy(1), now=NOW).counted


def test_a_known_witness_whose_cosignature_fails_refuses_the_note() -> None:
    note = sign_checkpoint_note(5, ROOT, KEY)
    other_text = CheckpointText(arbiter_origin(KEY.public_key()), 6, ROOT).text()
    wrong = cosign(other_text, "w1.example/w", W1, NOW)
    with pytest.raises(SignatureError, match="does not verify"):
        verify_checkpoint_note(add_signatures(note, [wrong]), KEY.public_key(), _policy(0), now=NOW)
    # A witness's line whose time is above 2^63 - 1 does not verify either.
    good = cosign(parse_note(note).text, "w1.example/w", W1, NOW)
    huge = NoteSignature(good.name, good.key_id, (1 << 63).to_bytes(8, "big") + good.signature[8:])
    with pytest.raises(SignatureError):
        verify_checkpoint_note(add_signatures(note, [huge]), KEY.public_key(), _policy(0), now=NOW)


def test_policies_that_could_count_a_key_twice_are_refused() -> None:
    w1 = _witness("w1.example/w", W1)
    with pytest.raises(ParameterError):
        WitnessPolicy((w1, _witness("alias.example/w", W1)), 2)
    with pytest.raises(ParameterError):
        WitnessPolicy((w1,), 2)
    with pytest.raises(ParameterError):
        WitnessPolicy((VerifierKey.of("w1.example/w", ED25519, W1.public_key()),), 1)
    with pytest.raises(ParameterError):
        WitnessPolicy((w1,), 1, max_age=-1)
    note = sign_checkpoint_note(5, ROOT, KEY)
    with pytest.raises(ParameterError, match="now"):
        verify_checkpoint_note(note, KEY.public_key(), _policy(1))
    arbiter_as_witness = WitnessPolicy((_witness("self.example/w", KEY),), 1)
    with pytest.raises(ParameterError):
        verify_checkpoint_note(note, KEY.public_key(), arbiter_as_witness, now=NOW)


def test_the_note_and_the_envelope_checkpoint_must_name_one_tree() -> None:
    got = verify_checkpoint_note(sign_checkpoint_note(5, ROOT, KEY), KEY.public_key())
    when = format_time(datetime(2026, 11, 28, tzinfo=UTC))
    arbiter = key_id(KEY.public_key())
    got.require_same_tree(Checkpoint(arbiter=arbiter, size=5, root=ROOT, time=when))
    with pytest.raises(VerificationError):
        got.require_same_tree(Checkpoint(arbiter=arbiter, size=6, root=ROOT, time=when))
    with pytest.raises(VerificationError):
        got.require_same_tree(Checkpoint(arbiter=arbiter, size=5, root=EMPTY_ROOT, time=when))


B64_ROOT = CheckpointText("o", 1, ROOT).text().split("\n")[2]

TEXTS = [
    ("o\n1\n" + B64_ROOT + "\n", None),
    ("o\n0\n" + B64_ROOT + "\n", None),
    ("o\n1\n" + B64_ROOT + "\next\n", None),
    (f"o\n{MAX_TREE_SIZE}\n{B64_ROOT}\n", None),
    (f"o\n{MAX_TREE_SIZE + 1}\n{B64_ROOT}\n", InputError),
    ("o\n01\n" + B64_ROOT + "\n", EncodingError),
    ("o\n+1\n" + B64_ROOT + "\n", InputError),
    ("o\n\uff11\n" + B64_ROOT + "\n", InputError),  # a full-width digit
    ("o\n1\n" + B64_ROOT.rstrip("=") + "\n", EncodingError),
    ("o\n1\nAAAA\n", InputError),
    ("o\n1\n", InputError),
    ("\n1\n" + B64_ROOT + "\n", InputError),
    ("o\n1\n" + B64_ROOT + "\n\next\n", InputError),
    ("o\n1\n" + B64_ROOT + "\n" + "e\n" * 17, LimitExceededError),
]


@pytest.mark.parametrize(("text", "error"), TEXTS)
def test_checkpoint_texts(text: str, error: type[Exception] | None) -> None:
    if error is None:
        parsed = parse_checkpoint_text(text)
        assert parsed.text() == text
        return
    with pytest.raises(error) as info:
        parse_checkpoint_text(text)
    assert type(info.value) is error
