"""Pair commitments, publication bits and audit seeds."""

import pytest

from twinaudit.protocol.commitment import (
    PairOpening,
    commit_pair,
    pair_commitment,
    verify_opening,
    version_digest,
)
from twinaudit.protocol.errors import CommitmentError, EncodingError, InputError
from twinaudit.protocol.hashing import tagged_hash, tagged_hash_of_bytes
from twinaudit.protocol.prg import bit_stream
from twinaudit.protocol.seeds import audit_seed, publication_bits, publication_seed

SALT = bytes(range(32))


def test_commitment_definition():
    c, salt = commit_pair(b"v0", b"v1", SALT)
    assert salt == SALT
    d0 = tagged_hash("version-digest", b"v0")
    d1 = tagged_hash("version-digest", b"v1")
    assert version_digest(b"v0") == d0
    assert c == tagged_hash("pair-commitment", [SALT, d0, d1]) == pair_commitment(SALT, d0, d1)


def test_opening_verifies_and_every_change_fails():
    c, salt = commit_pair(b"published-ish", b"hidden-ish")
    verify_opening(c, PairOpening(salt, b"published-ish", b"hidden-ish"))
    bad = [
        PairOpening(bytes(32), b"published-ish", b"hidden-ish"),
        PairOpening(salt, b"hidden-ish", b"published-ish"),  # swapped versions
        PairOpening(salt, b"published-ish", b"hidden-isH"),
    ]
    for opening in bad:
        with pytest.raises(CommitmentError):
            verify_opening(c, opening)
    flipped = bytes([c[0] ^ 1]) + c[1:]
    with pytest.raises(CommitmentError):
        verify_opening(flipped, PairOpening(salt, b"published-ish", b"hidden-ish"))


def test_fresh_salts_hide_equal_pairs():
    assert commit_pair(b"a", b"b")[0] != commit_pair(b"a", b"b")[0]


@pytest.mark.parametrize("salt", [b"", bytes(31), bytes(33)])
def test_bad_salt_length(salt):
    with pytest.raises(InputError):
        commit_pair(b"a", b"b", salt)


def test_publication_bits_follow_the_spec_stream():
    root, rho = bytes(32), bytes([7]) * 32
    bits = publication_bits(root, rho, 1000)
    assert bits == bit_stream(publication_seed(root, rho), "publication-bits", 0, 1000)
    assert publication_bits(root, rho, 1000, start=600) == bits[600:]
    assert 430 < sum(bits) < 570
    other = publication_bits(root, bytes([8]) * 32, 1000)
    assert bits != other  # fresh arbiter randomness changes the bits


def test_audit_seed_binds_all_inputs():
    root, rho, nonce = bytes(32), bytes(32), bytes(32)
    base = audit_seed(root, rho, nonce)
    assert audit_seed(b"\x01" + root[1:], rho, nonce) != base
    assert audit_seed(root, b"\x01" + rho[1:], nonce) != base
    assert audit_seed(root, rho, b"\x01" + nonce[1:]) != base
    with pytest.raises(InputError):
        audit_seed(root[:31], rho, nonce)


def test_a_tagged_hash_of_bytes_in_pieces_is_the_tagged_hash_of_the_joined_bytes():
    for pieces in ([], [b""], [b"ab", memoryview(b"cd"), bytearray(b"e")], [bytes(70_000)] * 3):
        joined = b"".join(pieces)
        assert tagged_hash_of_bytes("version-digest", pieces) == tagged_hash(
            "version-digest", joined
        )
    assert version_digest(b"\x01" * 300) == tagged_hash("version-digest", b"\x01" * 300)
    with pytest.raises(InputError, match="unregistered"):
        tagged_hash_of_bytes("no-such-tag", [b""])
    with pytest.raises(EncodingError, match="C-contiguous"):
        tagged_hash_of_bytes("version-digest", [memoryview(b"abcd")[::2]])
