"""Canonical MessagePack: round trips, exact bytes, and rejection of every non-canonical form."""

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protocol import limits
from protocol.encoding import decode, encode
from protocol.errors import EncodingError, LimitExceededError

values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(1 << 63), max_value=(1 << 64) - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=40)
    | st.binary(max_size=40),
    lambda children: (
        st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=8), children, max_size=5)
    ),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(values)
def test_round_trip_and_uniqueness(value):
    data = encode(value)
    back = decode(data)
    assert encode(back) == data
    if isinstance(value, float) and not math.isnan(value):
        assert back == value


@pytest.mark.parametrize(
    ("value", "hex_bytes"),
    [
        (0, "00"),
        (127, "7f"),
        (128, "cc80"),
        (256, "cd0100"),
        (1 << 32, "cf0000000100000000"),
        (-1, "ff"),
        (-32, "e0"),
        (-33, "d0df"),
        (-129, "d1ff7f"),
        (1.5, "cb3ff8000000000000"),
        ("", "a0"),
        ("a" * 32, "d920" + "61" * 32),
        (b"", "c400"),
        ([], "90"),
        ({}, "80"),
        ({"b": 1, "a": 2}, "82a16102a16201"),
        ({"é": 1, "z": 2}, "82a17a02a2c3a901"),  # sorted by UTF-8 bytes: 'z' < 0xC3
        (None, "c0"),
        (True, "c3"),
    ],
)
def test_exact_encodings(value, hex_bytes):
    assert encode(value).hex() == hex_bytes
    assert decode(bytes.fromhex(hex_bytes)) == value


@pytest.mark.parametrize(
    ("name", "hex_bytes"),
    [
        ("uint8 for a fixint", "cc05"),
        ("uint16 for a uint8", "cd0080"),
        ("int8 for a non-negative", "d005"),
        ("int16 for a negative fixint", "d1ffff"),
        ("float32", "ca3fc00000"),
        ("str8 for a fixstr", "d90161"),
        ("bin16 for a short bin", "c5000161"),
        ("array16 for a fixarray", "dc000101"),
        ("map16 for a fixmap", "de0001a16101"),
        ("unsorted keys", "82a16201a16102"),
        ("duplicate keys", "82a16101a16101"),
        ("integer map key", "810101"),
        ("binary map key", "81c4016101"),
        ("ext type", "d40100"),
        ("NaN", "cb7ff8000000000000"),
        ("infinity", "cb7ff0000000000000"),
        ("invalid UTF-8", "a2fffe"),
        ("trailing bytes", "0102"),
        ("truncated", "9201"),
        ("reserved byte 0xc1", "c1"),
        ("empty input", ""),
    ],
)
def test_rejects_non_canonical(name, hex_bytes):
    with pytest.raises(EncodingError):
        decode(bytes.fromhex(hex_bytes))


def test_size_caps():
    with pytest.raises(LimitExceededError):
        decode(encode(b"x" * 100), max_bytes=50)
    deep: list = []
    for _ in range(limits.MAX_NESTING_DEPTH + 2):
        deep = [deep]
    with pytest.raises(LimitExceededError):
        encode(deep)
    with pytest.raises(LimitExceededError):
        decode(b"\x91" * (limits.MAX_NESTING_DEPTH + 2) + b"\x90")


@pytest.mark.parametrize(
    "bad", [float("nan"), float("inf"), 1 << 64, -(1 << 63) - 1, {1: 2}, set(), object()]
)
def test_encode_rejects_outside_data_model(bad):
    with pytest.raises(EncodingError):
        encode(bad)


def test_tuple_and_bytearray_normalise():
    assert encode((1, 2)) == encode([1, 2])
    assert encode(bytearray(b"ab")) == encode(b"ab")
    assert encode("ab") != encode(b"ab")
