"""The fuzz suite's Hypothesis profiles, mutation strategies and seeds (issue #22 item 8).

Every fuzz target (``tests/fuzz/test_fuzz_*.py``) takes its settings from :func:`fuzz`: in
the normal test run a few dozen examples each, derandomized (the same examples on
every run, so the suite cannot flake) and with a deadline per example, which a hang
fails; with ``TWINAUDIT_FUZZ=long`` in the environment, fifty times as many random
examples, a longer deadline and Hypothesis's example database (``.hypothesis/``), so
that a failure found once is replayed first next time.

Inputs are real artefacts mutated: byte-level (:func:`mutated`: bit flips, bytes set to
the MessagePack and JSON bytes that matter, insertions, deletions, truncations,
duplicated and swapped slices) and value-level (:func:`mutated_value`: a node of a
decoded message replaced, removed or added), since a byte flip mostly breaks the
canonical form and stops at the first check, while a changed value, re-encoded (and
re-signed), reaches the schema checks behind it.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from datetime import timedelta
from typing import Any, TypeVar

from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st

T = TypeVar("T")

#: ``TWINAUDIT_FUZZ=long`` selects the long profile.
LONG = os.environ.get("TWINAUDIT_FUZZ", "").strip().lower() == "long"
#: How many times more examples the long profile runs.
LONG_FACTOR = 50

_HEALTH = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much]
settings.register_profile(
    "twinaudit-fuzz",
    derandomize=True,
    database=None,
    deadline=timedelta(seconds=5),
    print_blob=True,
    suppress_health_check=_HEALTH,
)
settings.register_profile(
    "twinaudit-fuzz-long",
    derandomize=False,
    deadline=timedelta(seconds=30),
    print_blob=True,
    suppress_health_check=_HEALTH,
)
PROFILE = "twinaudit-fuzz-long" if LONG else "twinaudit-fuzz"


def fuzz(examples: int) -> settings:
    """Settings of one target: ``examples`` in the normal run, 50 times as many when long."""
    return settings(
        settings.get_profile(PROFILE),
        max_examples=examples * (LONG_FACTOR if LONG else 1),
    )


#: Bytes that mean something to a MessagePack or JSON parser: headers at the edges of
#: their ranges, forbidden and reserved bytes, brackets, quotes and escapes.
INTERESTING = (
    b"\x00\x01\x7f\x80\x8f\x90\x9f\xa0\xbf\xc0\xc1\xc2\xc3\xc4\xc5\xc6\xc7\xca\xcb"
    b"\xcc\xcd\xce\xcf\xd0\xd3\xd4\xd9\xda\xdb\xdc\xdd\xde\xdf\xe0\xff"
    b'[]{}",:\\ \n'
)
#: Multi-byte runs that make lengths and counts large or odd.
RUNS = (b"\xff\xff\xff\xff", b"\x00\x00\x00\x00", b"\x7f\xff\xff\xff", b"\x80" * 16, b"\x91" * 40)


#: One byte-level edit: an operation, a position (taken modulo the data's length), and
#: its operands. Edits are drawn without seeing the data, so a plan can be drawn before
#: the bytes it will change exist (a claim's openings, asked for as the server goes).
Edit = tuple[int, int, int, bytes]


def edits(most: int = 4) -> st.SearchStrategy[list[Edit]]:
    """Up to ``most`` edits (sometimes none), for :func:`apply_edits`."""
    edit = st.tuples(
        st.integers(0, 8),
        st.integers(0, 1 << 20),
        st.integers(0, 1 << 20),
        st.sampled_from(RUNS)
        | st.binary(min_size=1, max_size=8)
        | st.sampled_from([bytes([b]) for b in INTERESTING]),
    )
    return st.lists(edit, max_size=most)


def apply_edits(seed: bytes, plan: Sequence[Edit]) -> bytes:
    """Return ``seed`` with the edits of ``plan`` made in turn.

    The operations: flip a bit, set a byte to one that matters to a parser, insert
    bytes, delete a run, truncate, repeat a slice, insert a run that makes a length
    large, swap two slices, add to a byte.
    """
    data = bytearray(seed)
    for operation, where, amount, blob in plan:
        size = len(data)
        at = where % size if size else 0
        if operation == 0 and size:
            data[at] ^= 1 << (amount % 8)
        elif operation == 1 and size:
            data[at] = INTERESTING[amount % len(INTERESTING)]
        elif operation == 2:
            data[at:at] = blob
        elif operation == 3 and size:
            del data[at : at + 1 + amount % 16]
        elif operation == 4:
            del data[amount % (size + 1) :]
        elif operation == 5 and size:  # a slice repeated
            end = min(size, at + 1 + amount % 64)
            data[at:at] = data[at:end] * (1 + amount % 8)
        elif operation == 6:
            data[at:at] = RUNS[amount % len(RUNS)]
        elif operation == 7 and size > 1:  # two slices swapped
            a, b = sorted((at, amount % size))
            width = min(1 + amount % 32, b - a)
            data[a : a + width], data[b : b + width] = data[b : b + width], data[a : a + width]
        elif operation == 8 and size:
            data[at] = (data[at] + (1, 255, 16, 240, 128)[amount % 5]) % 256
    return bytes(data)


@st.composite
def mutated(draw: st.DrawFn, seeds: Sequence[bytes], most: int = 4) -> bytes:
    """One of ``seeds`` with up to ``most`` byte-level edits (sometimes none)."""
    return apply_edits(draw(st.sampled_from(seeds)), draw(edits(most)))


#: Small canonical values of every type, to put in place of a message's own.
def small_values() -> st.SearchStrategy[Any]:
    """Small canonical values, nested a little."""
    scalars = (
        st.none()
        | st.booleans()
        | st.integers(-(1 << 63), (1 << 64) - 1)
        | st.sampled_from([0, 1, -1, 2, 255, 256, 4096, 4097, 65535, 65536, 1 << 24, -(1 << 31)])
        | st.floats(allow_nan=False, allow_infinity=False)
        | st.text(max_size=12)
        | st.binary(max_size=40)
        | st.sampled_from(["", "image", "text", "pair", "header", "0.2", "C1", "detected"])
    )
    return st.recursive(
        scalars,
        lambda inner: (
            st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
        ),
        max_leaves=8,
    )


@st.composite
def mutated_value(draw: st.DrawFn, value: Any, most: int = 3) -> Any:
    """``value`` (a decoded message) with up to ``most`` nodes replaced, removed or added."""
    for _ in range(draw(st.integers(1, most))):
        value = _mutate_node(draw, value)
    return value


def _mutate_node(draw: st.DrawFn, value: Any) -> Any:
    """Walk down from ``value`` to a random node and change it; return the new value."""
    if isinstance(value, dict) and value and draw(st.integers(0, 3)):
        key = draw(st.sampled_from(sorted(value)))
        changed = dict(value)
        action = draw(st.integers(0, 5))
        if action == 0:
            del changed[key]
        elif action == 1:
            changed[draw(st.text(max_size=10))] = draw(small_values())
        elif action == 2:
            changed[key] = draw(small_values())
        else:
            changed[key] = _mutate_node(draw, value[key])
        return changed
    if isinstance(value, list) and value and draw(st.integers(0, 3)):
        at = draw(st.integers(0, len(value) - 1))
        changed_list = list(value)
        action = draw(st.integers(0, 5))
        if action == 0:
            del changed_list[at]
        elif action == 1:
            changed_list.insert(at, draw(small_values()))
        elif action == 2:
            changed_list[at] = draw(small_values())
        else:
            changed_list[at] = _mutate_node(draw, value[at])
        return changed_list
    return draw(small_values())


def attempt(
    fn: Callable[..., T], *args: Any, refusals: tuple[type[BaseException], ...]
) -> T | None:
    """Return ``fn(*args)``, or None if it raised one of ``refusals``; any other error fails.

    Each outcome is a Hypothesis event (``pytest --hypothesis-show-statistics`` lists
    them), so a run shows how deep its inputs got: accepted, or which error code.
    """
    try:
        result = fn(*args)
    except refusals as refused:
        event(f"refused: {getattr(refused, 'code', type(refused).__name__)}")
        return None
    event("accepted")
    return result
