"""The spec PRG: ChaCha20 known answers, determinism, unbiasedness, permutations, bit streams."""

import collections

import pytest
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms

from twinaudit.protocol.errors import InputError, ParameterError
from twinaudit.protocol.prg import Prg, bit_stream, stream_key, without_replacement

SEED = bytes(range(32))


def test_chacha20_block_known_answer():
    # RFC 8439 §2.3.2: key 00..1f, nonce 000000090000004a00000000, block counter 1.
    iv = (1).to_bytes(4, "little") + bytes.fromhex("000000090000004a00000000")
    block = (
        Cipher(algorithms.ChaCha20(bytes(range(32)), iv), mode=None).encryptor().update(bytes(64))
    )
    assert block.hex().startswith(
        "10f1e7e4d13b5915500fdd1fa32071c4c7d1f4c733c068030422aa9ac3d46c4e"
    )


def test_stream_is_chacha20_under_derived_key():
    key = stream_key(SEED, "order")
    expected = Cipher(algorithms.ChaCha20(key, bytes(16)), mode=None).encryptor().update(bytes(100))
    prg = Prg(SEED, "order")
    assert prg.read(37) + prg.read(63) == expected


def test_labels_and_seeds_separate_streams():
    assert Prg(SEED, "a").read(32) != Prg(SEED, "b").read(32)
    assert Prg(SEED, "a").read(32) != Prg(bytes(32), "a").read(32)


def test_randbelow_rejection_rule():
    prg, ref = Prg(SEED, "r"), Prg(SEED, "r")
    n = 3 * (1 << 62)  # 2**64 mod n = 2**62, so a quarter of draws are rejected
    for _ in range(200):
        x = prg.randbelow(n)
        while True:
            raw = ref.u64()
            if raw < (1 << 64) - (1 << 62):
                break
        assert x == raw % n


def test_randbelow_is_uniform():
    prg = Prg(SEED, "u")
    counts = collections.Counter(prg.randbelow(6) for _ in range(60000))
    # chi-square with 5 degrees of freedom; 20.5 is the 0.999 quantile
    chi2 = sum((c - 10000) ** 2 / 10000 for c in counts.values())
    assert len(counts) == 6 and chi2 < 20.5


@pytest.mark.parametrize("bad", [0, -1, (1 << 64) + 1, 1.5, True])
def test_randbelow_rejects_bad_bounds(bad):
    with pytest.raises(ParameterError):
        Prg(SEED, "x").randbelow(bad)


def test_uniform_float_construction():
    prg, ref = Prg(SEED, "f"), Prg(SEED, "f")
    for _ in range(100):
        u = prg.uniform()
        assert 0.0 <= u < 1.0
        assert u == (ref.u64() >> 11) / 2**53


def test_without_replacement_is_a_permutation_and_prefix_stable():
    order = list(without_replacement(SEED, 500))
    assert sorted(order) == list(range(500))
    assert list(without_replacement(SEED, 500)) == order  # deterministic


def test_without_replacement_matches_eager_fisher_yates():
    prg = Prg(SEED, "order")
    items = list(range(300))
    for t in range(299):
        j = t + prg.randbelow(300 - t)
        items[t], items[j] = items[j], items[t]
    assert list(without_replacement(SEED, 300)) == items


def test_permutation_first_element_uniform():
    counts = collections.Counter(
        next(without_replacement(i.to_bytes(32, "big"), 4)) for i in range(8000)
    )
    assert all(1800 < counts[k] < 2200 for k in range(4))


def test_shuffle_matches_without_replacement():
    items = list(range(50))
    Prg(SEED, "order").shuffle(items)
    assert items == list(without_replacement(SEED, 50))


def test_bit_stream_random_access():
    full = bit_stream(SEED, "bits", 0, 5000)
    for start, count in [(0, 1), (7, 9), (511, 2), (4000, 1000), (1234, 0)]:
        assert bit_stream(SEED, "bits", start, count) == full[start : start + count]
    assert 2300 < sum(full) < 2700
    key_bytes = Prg(SEED, "bits").read(2)
    assert full[:16] == [bool((key_bytes[i // 8] >> (i % 8)) & 1) for i in range(16)]


@pytest.mark.parametrize(("seed", "label"), [(b"short", "x"), (SEED, 5), (SEED, "x" * 300)])
def test_bad_seed_or_label(seed, label):
    with pytest.raises(InputError):
        Prg(seed, label)
