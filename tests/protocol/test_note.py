"""Signed notes (C2SP signed-note, spec §9.5.1) against the examples others published.

Known answers, byte for byte:

- the example of the C2SP ``signed-note`` text (a vkey and the note it verifies);
- golang.org/x/mod/sumdb/note's tests: the PeterNeumann private key, the note it signs
  (Ed25519 is deterministic, so the signature line is reproduced exactly) and the
  EnochRoot vkey and signature;
- transparency-dev/formats' tests: the vkey of the witness ``remora.n621.de``, a
  cosignature key (type 0x04), whose key id is recomputed here; its cosignature of a
  real checkpoint of the staging CT log ``arche2025h1.staging.ct.transparency.dev``
  (published in the tests of the Python package tlog-scales), verified here with the
  log's own Ed25519 line beside lines of four other witnesses and an RFC 6962 tree
  head signature (type 0x05), all ignored as unknown keys.
"""

from __future__ import annotations

import base64

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from spec.tools.vectors_notes import ARCHE_NOTE as ARCHE_NOTE_TEXT
from spec.tools.vectors_notes import ARCHE_VKEY, C2SP_VKEY, REMORA_VKEY
from spec.tools.vectors_notes import C2SP_NOTE as C2SP_NOTE_TEXT
from twinaudit.protocol import cosignature
from twinaudit.protocol.errors import (
    EncodingError,
    InputError,
    LimitExceededError,
    SignatureError,
)
from twinaudit.protocol.note import (
    COSIGNATURE_V1,
    ED25519,
    MAX_KEY_NAME_BYTES,
    MAX_NOTE_BYTES,
    MAX_NOTE_SIGNATURES,
    Note,
    NoteSignature,
    VerifierKey,
    check_key_name,
    cosign,
    key_id,
    known_keys,
    open_note,
    parse_note,
    parse_vkey,
    sign_ed25519,
)

PETER_SKEY = "PRIVATE+KEY+PeterNeumann+c74f20a3+AYEKFALVFGyNhPJEMzD1QIDr+Y7hfZx09iUvxdXHKDFz"
PETER_VKEY = "PeterNeumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW"
ENOCH_VKEY = "EnochRoot+af0cfe78+ATtqJ7zOtqQtYqOo0CpvDXNlMhV3HeJDpjrASKGLWdop"
GO_TEXT = (
    "If you think cryptography is the answer to your problem,\n"
    "then you don't know what your problem is.\n"
)
PETER_LINE = (
    "— PeterNeumann x08go/ZJkuBS9UG/SffcvIAQxVBtiFupLLr8pAcElZInNIuGUgYN1FFYC2pZSNXgKvqfqdngot"
    "pRZb6KE6RyyBwJnAM=\n"
)
ENOCH_LINE = (
    "— EnochRoot rwz+eBzmZa0SO3NbfRGzPCpDckykFXSdeX+MNtCOXm2/5n2tiOHp+vAF1aGrQ5ovTG01oOTGwnWLox"
    "33WWd1RvMc+QQ=\n"
)

ARCHE_NOTE = ARCHE_NOTE_TEXT.encode()
C2SP_NOTE = C2SP_NOTE_TEXT.encode()
ARCHE_TEXT = ARCHE_NOTE_TEXT.split("\n\n")[0] + "\n"


def _peter_key() -> Ed25519PrivateKey:
    seed = base64.b64decode(PETER_SKEY.split("+", 4)[4])
    assert seed[0] == ED25519
    return Ed25519PrivateKey.from_private_bytes(seed[1:])


def test_the_c2sp_example_note_verifies_under_its_vkey() -> None:
    key = parse_vkey(C2SP_VKEY)
    assert (key.name, key.sig_type, key.key_id) == ("example.com/foo", ED25519, 0x530D903A)
    assert key.vkey() == C2SP_VKEY
    opened = open_note(C2SP_NOTE, [key])
    assert opened.text == "This is an example message.\n"
    assert opened.signed_by(key) and opened.unknown == ()


def test_the_go_reference_signature_is_reproduced_byte_for_byte() -> None:
    key = _peter_key()
    line = sign_ed25519(GO_TEXT, "PeterNeumann", key)
    assert line.key_id == 0xC74F20A3
    assert Note(GO_TEXT, (line,)).encode() == (GO_TEXT + "\n" + PETER_LINE).encode()
    assert VerifierKey.of("PeterNeumann", ED25519, key.public_key()).vkey() == PETER_VKEY


def test_unknown_keys_are_ignored_and_known_ones_all_verify() -> None:
    peter, enoch = parse_vkey(PETER_VKEY), parse_vkey(ENOCH_VKEY)
    data = (GO_TEXT + "\n" + PETER_LINE + ENOCH_LINE).encode()
    only_peter = open_note(data, [peter])
    assert [k for k, _ in only_peter.verified] == [peter]
    assert [s.name for s in only_peter.unknown] == ["EnochRoot"]
    both = open_note(data, [peter, enoch])
    assert [k for k, _ in both.verified] == [peter, enoch]
    with pytest.raises(SignatureError, match="no known key"):
        open_note(data, [])
    # A line sharing the name but not the id (or the id but not the name) is unknown.
    renamed = data.replace(b"EnochRoot", b"PeterNeumann", 1)
    assert len(open_note(renamed, [peter]).unknown) == 1


def test_a_known_keys_bad_line_refuses_the_whole_note() -> None:
    peter = parse_vkey(PETER_VKEY)
    broken = PETER_LINE[:60] + "ABCD" + PETER_LINE[60:]
    with pytest.raises(SignatureError, match="does not verify"):
        open_note((GO_TEXT + "\n" + PETER_LINE + broken).encode(), [peter])
    with pytest.raises(SignatureError):
        open_note((GO_TEXT.replace("answer", "Answer") + "\n" + PETER_LINE).encode(), [peter])


def test_key_ids_of_both_signature_types_match_the_published_vkeys() -> None:
    remora = parse_vkey(REMORA_VKEY)
    assert (remora.sig_type, remora.key_id) == (COSIGNATURE_V1, 0xDA77ADE7)
    assert key_id(remora.name, COSIGNATURE_V1, remora.public) == 0xDA77ADE7
    # The same public key as a plain Ed25519 key has another id (the type byte differs).
    assert key_id(remora.name, ED25519, remora.public) != 0xDA77ADE7
    assert parse_vkey(ARCHE_VKEY).key_id == 0xBA2F06C0


def test_a_real_witness_cosignature_of_a_real_checkpoint_verifies() -> None:
    remora, arche = parse_vkey(REMORA_VKEY), parse_vkey(ARCHE_VKEY)
    opened = open_note(ARCHE_NOTE, [arche, remora])
    assert opened.text == ARCHE_TEXT
    assert [k.name for k, _ in opened.verified] == [arche.name, remora.name]
    (_, line) = opened.verified[1]
    assert cosignature.timestamp_of(line.signature) == 1779573024
    assert len(opened.unknown) == 4  # the type 0x05 tree head signature and 3 witnesses
    # The cosignature covers the checkpoint: another size does not verify.
    other = ARCHE_NOTE.replace(b"1432088532", b"1432088533")
    with pytest.raises(SignatureError):
        open_note(other, [remora])


def test_a_cosignature_signs_the_timestamped_message() -> None:
    key = Ed25519PrivateKey.from_private_bytes(bytes(range(32)))
    text = "example.com/behind-the-sofa\n20852163\nCsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=\n"
    assert cosignature.signed_message(text.encode(), 1679315147) == (
        b"cosignature/v1\ntime 1679315147\n" + text.encode()
    )
    line = cosign(text, "witness.example.com/w1", key, 1679315147)
    assert len(line.signature) == 72 and line.signature[:8] == (1679315147).to_bytes(8, "big")
    witness = VerifierKey.of("witness.example.com/w1", COSIGNATURE_V1, key.public_key())
    assert open_note(Note(text, (line,)).encode(), [witness]).signed_by(witness)
    # A plain Ed25519 key of the same name and public key does not read a cosignature.
    plain = VerifierKey.of("witness.example.com/w1", ED25519, key.public_key())
    with pytest.raises(SignatureError):
        open_note(Note(text, (line,)).encode(), [plain])
    with pytest.raises(InputError):
        cosignature.signed_message(text.encode(), 1 << 63)
    assert cosignature.timestamp_of(line.signature) == 1679315147
    assert not cosignature.verifies(text.encode(), b"\xff" * 72, key.public_key())


MALFORMED = [
    ("no blank line", GO_TEXT + PETER_LINE, InputError),
    ("no signature", GO_TEXT + "\n", InputError),
    ("blank line after the signatures", GO_TEXT + "\n" + PETER_LINE + "\n", InputError),
    ("no final newline", GO_TEXT + "\n" + PETER_LINE[:-1], InputError),
    ("a control character", "\x01" + GO_TEXT + "\n" + PETER_LINE, InputError),
    ("a carriage return", GO_TEXT.replace("\n", "\r\n", 1) + "\n" + PETER_LINE, InputError),
    ("a hyphen for the em dash", GO_TEXT + "\n" + PETER_LINE.replace("—", "-"), InputError),
    ("a space in the name", GO_TEXT + "\n" + PETER_LINE.replace("Peter", "Pe ter"), InputError),
    ("a plus in the name", GO_TEXT + "\n" + PETER_LINE.replace("Peter", "Pe+ter"), InputError),
    ("trailing data", GO_TEXT + "\n" + PETER_LINE + "Unexpected line.\n", InputError),
    ("unpadded base64", GO_TEXT + "\n" + PETER_LINE.replace("AM=\n", "AM\n"), EncodingError),
    (
        "non-zero trailing bits",
        GO_TEXT + "\n" + PETER_LINE.replace("AM=\n", "AN=\n"),
        EncodingError,
    ),
    ("a key id alone", GO_TEXT + "\n— PeterNeumann x08gow==\n", InputError),
    (
        "too many signatures",
        GO_TEXT + "\n" + PETER_LINE * (MAX_NOTE_SIGNATURES + 1),
        LimitExceededError,
    ),
]


@pytest.mark.parametrize(("text", "error"), [pytest.param(t, e, id=n) for n, t, e in MALFORMED])
def test_malformed_notes_are_refused_with_their_code(text: str, error: type[Exception]) -> None:
    with pytest.raises(error) as info:
        open_note(text.encode(), [parse_vkey(PETER_VKEY)])
    assert type(info.value) is error


def test_sizes_are_bounded() -> None:
    with pytest.raises(LimitExceededError):
        parse_note(b"a\n\n" + b"x" * MAX_NOTE_BYTES)
    with pytest.raises(LimitExceededError):
        check_key_name("n" * (MAX_KEY_NAME_BYTES + 1))
    assert check_key_name("n" * MAX_KEY_NAME_BYTES)
    with pytest.raises(InputError):
        parse_note(b"\xff\n\n" + PETER_LINE.encode())
    for bad_name in ("", "a\u00a0b", "a\u3000b", "a\tb"):
        with pytest.raises(InputError):
            check_key_name(bad_name)
    with pytest.raises(InputError):
        NoteSignature("n", 1 << 32, b"x")
    assert len(parse_note((GO_TEXT + "\n" + PETER_LINE * MAX_NOTE_SIGNATURES).encode()).signatures)


@pytest.mark.parametrize(
    "vkey",
    [
        PETER_VKEY.replace("c74f20a3", "c74f20a4"),  # another id
        PETER_VKEY.replace("c74f20a3", "C74F20A3"),  # upper-case hex
        PETER_VKEY.replace("+ARpc", "+ZRpc"),  # an unknown type
        PETER_VKEY[:-4],  # a short key
        "PeterNeumann+c74f20a3",  # no key
        PETER_VKEY.replace("Peter", "Pe ter"),  # a name with a space
    ],
)
def test_malformed_vkeys_are_refused(vkey: str) -> None:
    with pytest.raises(InputError):
        parse_vkey(vkey)


def test_two_known_keys_with_one_name_and_id_are_refused() -> None:
    peter = parse_vkey(PETER_VKEY)
    assert known_keys([peter, peter]) == {(peter.name, peter.key_id): peter}
    impostor = VerifierKey(peter.name, ED25519, parse_vkey(ENOCH_VKEY).public)
    assert impostor.key_id != peter.key_id
    # A key whose id collides with a known one on the same name is refused, not guessed.
    with pytest.raises(InputError):
        known_keys([peter, _with_id(impostor, peter.key_id)])


def _with_id(key: VerifierKey, ident: int) -> VerifierKey:
    """A key whose ``key_id`` is forced to ``ident``, as a colliding key would have."""

    class Colliding(VerifierKey):
        @property
        def key_id(self) -> int:
            return ident

    return Colliding(key.name, key.sig_type, key.public)
