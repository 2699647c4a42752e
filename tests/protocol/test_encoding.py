"""Canonical MessagePack: round trips, exact bytes, and rejection of every non-canonical form."""

import contextlib
import math
import time
import tracemalloc

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from twinaudit.protocol import limits
from twinaudit.protocol.encoding import (
    VIEW_BYTES,
    array_header,
    bin_header,
    canonical,
    check,
    decode,
    encode,
    encode_pieces,
)
from twinaudit.protocol.errors import EncodingError, LimitExceededError, TwinauditError

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


# --- Bounded work per byte received (issue #22 D2, spec §2.3, §3.3) -------------------------


def _array_of(count: int, item: bytes) -> bytes:
    head = (
        b"\xdc" + count.to_bytes(2, "big")
        if count < 1 << 16
        else b"\xdd" + count.to_bytes(4, "big")
    )
    return head + item * count


def test_sized_values_cap_at_its_bound():
    """MAX_SIZED_VALUES(n) = 8192 + n // 64, the container itself counted (spec §3.3)."""
    fits = _array_of(8321, b"\x90")  # 8322 sized values in 8324 bytes: the cap is 8322
    assert limits.max_sized_values(len(fits)) == 8322
    assert decode(fits) == [[]] * 8321
    above = _array_of(8322, b"\x90")
    with pytest.raises(LimitExceededError, match="sized values"):
        decode(above)
    with pytest.raises(LimitExceededError):
        check(above)
    assert decode(above, limit_sized=False) == [[]] * 8322  # the owner's own files
    nils = _array_of(100_000, b"\xc0")  # values that are not sized do not count
    assert decode(nils) == [None] * 100_000


def test_check_builds_nothing_and_counts_values():
    assert check(encode({"a": [1, 2], "b": {}})) == 7  # the map, 2 keys, 2 values, 2 items
    assert check(_array_of(70_000, b"\xc0")) == 70_001
    with pytest.raises(EncodingError):
        check(bytes.fromhex("82a16201a16102"))


def test_a_span_is_decoded_in_place_and_alone():
    data = b"\xff" + encode([1, "two", b"3"]) + b"\xcd"
    assert decode(data, start=1, end=len(data) - 1) == [1, "two", b"3"]
    with pytest.raises(EncodingError, match="truncated"):  # the uint16 may not read past end
        decode(b"\x91\xcd\x01" + b"\x00", start=0, end=3)
    with pytest.raises(EncodingError):
        decode(data, start=3, end=2)


def _run(fn, data):
    with contextlib.suppress(TwinauditError):
        fn(data)


def _cost(fn, data):
    """Seconds (untraced) and peak traced bytes of ``fn(data)``, whether it raises or not."""
    start = time.perf_counter()
    _run(fn, data)
    seconds = time.perf_counter() - start
    tracemalloc.start()
    try:
        _run(fn, data)
        return seconds, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_d2_an_array_of_empty_maps_costs_little():
    """The issue's 3.8 MiB of empty maps: 24 s and +555 MiB before; now refused at once."""
    data = _array_of(4_000_000, b"\x80")
    seconds, peak = _cost(decode, data)
    assert seconds < 1.0
    # Refused at the 70,693rd map (8192 + 4,000,005 // 64 are allowed): about 1.3x.
    assert peak < 2 * len(data)
    with pytest.raises(LimitExceededError):
        decode(data)


@pytest.mark.parametrize(
    ("name", "item"),
    [
        ("nil", b"\xc0"),
        ("float64", b"\xcb\x3f\xf8" + bytes(6)),
        ("uint32", b"\xce\x00\x01\x00\x00"),
        ("an empty map per 64 bytes", b"\x80" + b"\xc0" * 63),
        # A new int per 3-byte element was 12x (issue #22 D2): they are shared now.
        ("uint16", b"\xcd\x01\x01"),
        ("int16", b"\xd1\xff\x00"),
        ("nil and uint16", b"\xc0\xcd\xff\xfe"),
        ("nil and int16", b"\xc0\xd1\x80\x00"),
    ],
)
def test_memory_is_a_small_multiple_of_the_input(name, item):
    data = _array_of((1 << 18) // len(item), item)
    _, peak = _cost(decode, data)
    assert peak < 10 * len(data), f"{name}: {peak / len(data):.1f}x"


def test_every_16_bit_integer_decodes_to_its_value():
    """Runs and single elements, in arrays and maps, against msgpack's own decoder."""
    values = list(range(-(1 << 15), -128)) + list(range(256, 1 << 16))
    data = encode(values)
    assert decode(data) == values == msgpack.unpackb(data)
    mixed = [v for pair in zip(values[::97], values[1::97], strict=False) for v in (*pair, None)]
    assert decode(encode(mixed)) == mixed
    keyed = {f"k{v}": v for v in values[::501]}
    assert decode(encode(keyed)) == keyed
    assert check(data) == len(values) + 1
    for bad in (b"\x92\xcd\x01\x00\xcd\x00\xff", b"\x92\xd1\x80\x00\xd1\xff\x80"):
        with pytest.raises(EncodingError, match=r"shortest|signed form"):
            decode(bad)


def test_a_header_that_the_input_cannot_hold_allocates_nothing():
    for head in (b"\xdd\x00\xff\xff\xff", b"\xdf\x00\x7f\xff\xff", b"\xc6\x01\xff\xff\xff"):
        data = head + b"\xc0" * 1000
        _, peak = _cost(decode, data)
        assert peak < 64 * 1024
        with pytest.raises(EncodingError, match="truncated"):
            decode(data)
    with pytest.raises(LimitExceededError, match="array length"):
        decode(b"\xdd\x01\x00\x00\x01" + b"\xc0" * 100)


def test_canonical_is_what_decoding_the_encoding_gives_back():
    value = {"perturbation": "dither", "k": (1, 2), "function": {"z": b"\x00", "a": None}}
    again = canonical(value)
    assert again == decode(encode(value))
    assert list(again) == ["function", "k", "perturbation"]  # sorted by UTF-8 bytes (§3.2)
    assert list(again["function"]) == ["a", "z"] and again["k"] == [1, 2]
    with pytest.raises(EncodingError):
        canonical({"x": float("nan")})


# --- encode_pieces: the same bytes, large byte strings as views -----------------------------

pieces_values = st.recursive(
    values.filter(lambda v: not isinstance(v, list | dict))
    | st.sampled_from(
        [b"\x07" * 300, b"\x08" * (VIEW_BYTES - 1), bytearray(VIEW_BYTES), b"\x09" * 70_000]
    ),
    lambda children: (
        st.lists(children, max_size=20)
        | st.tuples(children, children)
        | st.dictionaries(st.text(max_size=8), children, max_size=20)
    ),
    max_leaves=30,
)


@settings(max_examples=200, deadline=None)
@given(pieces_values)
def test_pieces_join_to_the_encoding(value):
    assert b"".join(encode_pieces(value)) == encode(value)


def test_a_large_byte_string_is_a_view_of_the_callers_buffer_and_headers_are_shortest():
    pixels = bytearray(b"\x01" * (VIEW_BYTES + 5))
    pieces = encode_pieces({"b": 1, "a": pixels, "z": [0] * 70_000})
    viewed = [p for p in pieces if isinstance(p, memoryview)]
    assert len(viewed) == 1 and viewed[0].readonly and viewed[0].obj is pixels
    assert b"".join(pieces) == encode({"b": 1, "a": bytes(pixels), "z": [0] * 70_000})
    # every header form: fix/16/32-bit arrays and byte strings
    for n in (0, 15, 16, 0xFFFF, 0x10000):
        assert array_header(n) + b"\xc0" * n == encode([None] * n)
    for n in (0, 0xFF, 0x100, 0xFFFF, 0x10000):
        assert bin_header(n) + b"\x00" * n == encode(bytes(n))
    with pytest.raises(LimitExceededError):
        bin_header(limits.MAX_BIN_BYTES + 1)


@pytest.mark.parametrize(
    "bad",
    [float("nan"), 1 << 64, {1: 2}, set(), [object()], {"k": float("inf")}, {"\ud800": 1}],
)
def test_pieces_refuse_what_encode_refuses(bad):
    with pytest.raises(EncodingError):
        encode(bad)
    with pytest.raises(EncodingError):
        encode_pieces(bad)


def test_pieces_refuse_too_deep_too_long_and_scattered_values():
    deep: list = [b"\x00" * VIEW_BYTES]
    for _ in range(limits.MAX_NESTING_DEPTH + 1):
        deep = [deep]
    with pytest.raises(LimitExceededError):
        encode_pieces(deep)
    with pytest.raises(LimitExceededError):
        encode_pieces([bytes(limits.MAX_BIN_BYTES + 1)])
    strided = memoryview(bytes(2 * VIEW_BYTES))[::2]
    with pytest.raises(EncodingError, match="C-contiguous"):
        encode_pieces([strided])
