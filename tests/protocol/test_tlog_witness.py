"""The add-checkpoint bodies (C2SP tlog-witness, spec §9.7.1) and witness policy files.

Byte-exact against the C2SP texts' examples: the tlog-witness example request (old size,
four proof lines, a checkpoint with two log signatures) and response (three
cosignature lines) read and write back to the same bytes; the tlog-cosignature
example's cosignature line names the time of its signed-message example.
"""

from __future__ import annotations

import base64

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from tests.support.keys import KEY
from twinaudit.protocol import cosignature
from twinaudit.protocol.checkpoint_note import arbiter_key
from twinaudit.protocol.errors import (
    EncodingError,
    InputError,
    LimitExceededError,
    ParameterError,
)
from twinaudit.protocol.note import COSIGNATURE_V1, VerifierKey, parse_note
from twinaudit.protocol.tlog_witness import (
    MAX_PROOF_LINES,
    MAX_REQUEST_BYTES,
    AddCheckpoint,
    encode_cosignatures,
    encode_size,
    parse_add_checkpoint,
    parse_cosignatures,
    parse_size,
)
from twinaudit.protocol.witness_policy import parse_policy

#: The example request body of C2SP tlog-witness, add-checkpoint.
C2SP_REQUEST = (
    "old 20852014\n"
    "PlRNCrwHpqhGrupue0L7gxbjbMiKA9temvuZZDDpkaw=\n"
    "jrJZDmY8Y7SyJE0MWLpLozkIVMSMZcD5kvuKxPC3swk=\n"
    "5+pKlUdi2LeF/BcMHBn+Ku6yhPGNCswZZD1X/6QgPd8=\n"
    "/6WVhPs2CwSsb5rYBH5cjHV/wSmA79abXAwhXw3Kj/0=\n"
    "\n"
    "example.com/behind-the-sofa\n"
    "20852163\n"
    "CsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=\n"
    "\n"
    "— example.com/behind-the-sofa Az3grlgtzPICa5OS8npVmf1Myq/5IZniMp+ZJurmRDeOoRDe4URYN7u5/"
    "Zhcyv2q1gGzGku9nTo+zyWE+xeMcTOAYQ8=\n"
    "— example.com/behind-the-sofa opLqBQsREYCgu6xQkYQwJr9fo45a62DN9EdmHXnZdXNqlcVGlCum2Wks+"
    "49/V6267UEjw6QUXTS5Rovnzv++qbSzm9Q=\n"
).encode()
#: The example response body of C2SP tlog-witness, add-checkpoint.
C2SP_RESPONSE = (
    "— witness.example/w1 CMp+6LWBU0anHGH5aNDTJkH/gj79sG+T6+iP2ThYN5krrDJbR1HDnucjL39QsZTSvVjyQ"
    "Lrdk3DXDqI5G2HgLatVs0pWh6Up69HVOw==\n"
    "— witness.example/w1 I7rEps0pvK2UqkS2gSpVUDhrhVtQV9lgF6pRrWAvjJHjyWpW7VcE3SiOlVlbQNt64vWhO"
    "+DlkL0+UfzuOBMh9ChdMkP1vi/lCAsmlw==\n"
    "— witness.example/w2 AWui8Sk55XjYLOijihBjhqEH6nS1ndDymE0a+6idX7pLcnoB+dhnz0854aLZgrrKbYKA7"
    "nC3HNJhm/kWl7oJlqU3rXXvpysAdyP3wQ==\n"
).encode()
#: The cosignature line of C2SP tlog-cosignature's example, and its message's time.
C2SP_COSIGNATURE = (
    "— witness.example.com/w1 jWbPPwAAAABkGFDLEZMHwSRaJNiIDoe9DYn/zXcrtPHeolMI5OWXEhZCB9dlrDJsX"
    "3b2oyin1nPZqhf5nNo0xUe+mbIUBkBIfZ+qnA==\n"
).encode()
C2SP_TIME = 1679315147


def test_the_c2sp_request_example_reads_and_writes_back_byte_exact() -> None:
    request = parse_add_checkpoint(C2SP_REQUEST)
    assert request.old_size == 20852014
    assert len(request.proof) == 4 and all(len(h) == 32 for h in request.proof)
    assert request.proof[0] == base64.b64decode("PlRNCrwHpqhGrupue0L7gxbjbMiKA9temvuZZDDpkaw=")
    note = parse_note(request.note)
    assert note.text.startswith("example.com/behind-the-sofa\n20852163\n")
    assert len(note.signatures) == 2
    assert request.encode() == C2SP_REQUEST


def test_the_c2sp_response_example_reads_and_writes_back_byte_exact() -> None:
    lines = parse_cosignatures(C2SP_RESPONSE)
    assert [line.name for line in lines] == ["witness.example/w1"] * 2 + ["witness.example/w2"]
    assert encode_cosignatures(lines) == C2SP_RESPONSE


def test_the_c2sp_cosignature_example_states_the_time_of_its_message() -> None:
    (line,) = parse_cosignatures(C2SP_COSIGNATURE)
    assert line.name == "witness.example.com/w1"
    assert len(line.signature) == cosignature.COSIGNATURE_BYTES
    assert cosignature.timestamp_of(line.signature) == C2SP_TIME
    assert encode_cosignatures([line]) == C2SP_COSIGNATURE


def test_sizes_of_a_409_answer() -> None:
    assert encode_size(20852014) == b"20852014\n"
    assert parse_size(b"0\n") == 0
    for bad in (b"12", b"012\n", b"-1\n", b"1 \n", b"x\n", b"1" * 30 + b"\n"):
        with pytest.raises(InputError):
            parse_size(bad)


@pytest.mark.parametrize(
    ("body", "error"),
    [
        (b"old 1\nnote", InputError),  # no empty line
        (b"old  1\n\nx\n\n", InputError),
        (b"old 01\n\n", EncodingError),
        (b"old -1\n\n", InputError),
        (b"old 18446744073709551616\n\n", InputError),  # above 2^64 - 1
        (b"old 1\nAAAA\n\n", InputError),  # a 3-byte hash
        (b"old 1\nAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA\n\n", EncodingError),
        (b"old 1\n\xff\n\n", InputError),
        (b"x" * (MAX_REQUEST_BYTES + 1), LimitExceededError),
        (b"old 0\n" + (b"A" * 43 + b"=\n") * (MAX_PROOF_LINES + 1) + b"\n", LimitExceededError),
    ],
)
def test_malformed_requests_are_refused(body: bytes, error: type[Exception]) -> None:
    with pytest.raises(error):
        parse_add_checkpoint(body + (b"t\n\n\xe2\x80\x94 k AAAAAAA=\n" if b"\n\n" in body else b""))


def test_a_request_is_built_only_from_valid_parts() -> None:
    with pytest.raises(InputError):
        AddCheckpoint(0, (b"short",), b"n")
    with pytest.raises(InputError):
        AddCheckpoint(-1, (), b"n")
    with pytest.raises(LimitExceededError):
        AddCheckpoint(0, (b"\x00" * 32,) * 64, b"n")


WITNESS = VerifierKey.of(
    "w1.example", COSIGNATURE_V1, Ed25519PrivateKey.from_private_bytes(b"\x05" * 32).public_key()
)
OTHER = VerifierKey.of(
    "w2.example", COSIGNATURE_V1, Ed25519PrivateKey.from_private_bytes(b"\x06" * 32).public_key()
)


def test_a_c2sp_policy_file_gives_k_of_n() -> None:
    text = (
        "# two witnesses, both required\n"
        f"log {arbiter_key(KEY.public_key()).vkey()}\n"
        f"witness A {WITNESS.vkey()} https://w1.example/\n"
        f"\twitness B   {OTHER.vkey()}\n"
        "group both all A B\n"
        "quorum both\n"
    ).encode()
    parsed = parse_policy(text)
    assert parsed.policy.threshold == 2 and parsed.policy.witnesses == (WITNESS, OTHER)
    parsed.require_log(KEY.public_key())
    with pytest.raises(ParameterError, match="log lines"):
        parsed.require_log(Ed25519PrivateKey.generate().public_key())
    any_of = parse_policy(f"witness A {WITNESS.vkey()}\ngroup g any A\nquorum g\n".encode())
    assert any_of.policy.threshold == 1
    single = parse_policy(f"witness A {WITNESS.vkey()}\nquorum A\n".encode())
    assert single.policy.threshold == 1
    assert parse_policy(b"quorum none\n").policy.threshold == 0


@pytest.mark.parametrize(
    "text",
    [
        "",  # no quorum
        "quorum none\nquorum none\n",
        "quorum A\n",  # not defined
        f"quorum A\nwitness A {WITNESS.vkey()}\n",  # defined after use
        f"witness A {WITNESS.vkey()}\nwitness A {OTHER.vkey()}\nquorum A\n",
        f"witness A {WITNESS.vkey()}\nwitness B {WITNESS.vkey()}\nquorum A\n",
        f"witness A {WITNESS.vkey()}\ngroup g 2 A\nquorum g\n",  # k above n
        f"witness A {WITNESS.vkey()}\ngroup g 0 A\nquorum g\n",
        f"witness A {WITNESS.vkey()}\ngroup g 1 A A\nquorum g\n",
        f"witness A {WITNESS.vkey()}\ngroup g 1 A\ngroup h 1 g\nquorum h\n",  # nested
        f"witness none {WITNESS.vkey()}\nquorum none\n",
        f"witness A {arbiter_key(KEY.public_key()).vkey()}\nquorum A\n",  # a log key
        f"log {WITNESS.vkey()}\nquorum none\n",  # a cosignature key as a log
        "witness A not-a-vkey\nquorum A\n",
        "frobnicate\nquorum none\n",
        "quorum none\x01\n",
    ],
)
def test_bad_policies_are_refused(text: str) -> None:
    with pytest.raises(ParameterError):
        parse_policy(text.encode())
