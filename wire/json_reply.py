"""Reading JSON replies event by event, keeping only what a client needs (issue #40 N3).

``json.loads`` turns a reply into Python objects before anything can be checked: a
float costs 32 bytes, a nested empty list 64, so a 63 MiB reply of nested lists took
2.8 GB and minutes. The readers here take the reply's parse events from ijson's C
backend (yajl2) instead, and build nothing that the reply alone decides the size of:

- :func:`load_small` builds a small document (a model's metadata, an error message)
  and refuses one of more than ``max_values`` parse events;
- :class:`Numbers` collects a (nested) JSON array of numbers into one float64 buffer,
  8 bytes a number, refusing more than a given count as it goes;
- :func:`keys` and :func:`skip` walk an object and pass over the values no reader
  wants, building nothing.

Anything that is not JSON (``NaN``, trailing bytes, invalid UTF-8, a number beyond the
range of a 64-bit integer or a double) is ``OracleError("invalid-answer")`` naming what.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterator
from typing import Any, Final

import ijson
import numpy as np
import numpy.typing as npt

from twinaudit.protocol.errors import OracleError

#: Most values :func:`load_small` builds by default.
SMALL_VALUES: Final = 8192
#: The ijson backend: the C one (yajl2); the pure-Python one is ten times slower.
_BACKEND: Final = ijson.get_backend("yajl2_c")
#: Bytes parsed at a time: ijson hands over a batch's events at once, up to one per byte.
_BATCH_BYTES: Final = 8192
#: Integers JSON carries exactly into a double: |n| ≤ 2^53.
EXACT_INTEGER: Final = 1 << 53

Event = tuple[str, Any]


def invalid(what: str, message: str) -> OracleError:
    """Return ``OracleError("invalid-answer")`` for ``what`` (a reply) and ``message``."""
    return OracleError("invalid-answer", f"{what}: {message}")


def events(body: bytes, what: str) -> Iterator[Event]:
    """Yield the parse events of ``body``; a body that is not JSON is an invalid answer."""
    try:
        yield from _BACKEND.basic_parse(body, use_float=True, buf_size=_BATCH_BYTES)
    except ijson.JSONError as exc:
        text = str(exc).splitlines()
        detail = text[0].removeprefix("parse error: ").removeprefix("lexical error: ")
        raise invalid(what, f"the reply is not JSON ({detail[:80]})") from None


def skip(stream: Iterator[Event], first: str) -> None:
    """Pass over the value whose first event was ``first`` (just read), building nothing."""
    if first not in ("start_map", "start_array"):
        return
    depth = 1
    for event, _ in stream:
        if event in ("start_map", "start_array"):
            depth += 1
        elif event in ("end_map", "end_array"):
            depth -= 1
            if depth == 0:
                return


def keys(
    stream: Iterator[Event], what: str, wanted: tuple[str, ...]
) -> Iterator[tuple[str, Event]]:
    """Walk the object just opened: yield each wanted key and its value's first event.

    The caller reads the rest of that value from ``stream`` before asking for the next
    key; any other key's value is skipped here. A wanted key given twice is refused.
    """
    seen: set[str] = set()
    for event, value in stream:
        if event == "end_map":
            return
        first = next(stream)
        if value not in wanted:
            skip(stream, first[0])
            continue
        if value in seen:
            raise invalid(what, f"the key {value!r} appears twice")
        seen.add(value)
        yield value, first
    raise invalid(what, "the reply ends inside an object")  # ijson raises first


def expect(event: str, wanted: str, what: str, message: str) -> None:
    """Refuse the reply unless ``event`` is ``wanted``."""
    if event != wanted:
        raise invalid(what, message)


def load_small(body: bytes, what: str, max_values: int = SMALL_VALUES) -> Any:
    """Return the JSON value of ``body`` as Python objects, if it holds few enough values.

    Every parse event counts — each number, string, ``true``/``false``/``null``, object
    key, and each start and end of an object or array — and more than ``max_values`` of
    them is an invalid answer, refused while parsing. A key given twice keeps its last
    value.
    """
    stack: list[Any] = []
    names: list[str] = []
    root: Any = None
    count = 0
    for event, value in events(body, what):
        count += 1
        if count > max_values:
            raise invalid(what, f"the reply holds more than {max_values} JSON values")
        if event == "map_key":
            names[-1] = value
            continue
        if event in ("start_map", "start_array"):
            stack.append({} if event == "start_map" else [])
            names.append("")
            continue
        node = value
        if event in ("end_map", "end_array"):
            node = stack.pop()
            names.pop()
        if not stack:
            root = node
        elif isinstance(stack[-1], list):
            stack[-1].append(node)
        else:
            stack[-1][names[-1]] = node
    return root


class Numbers:
    """A JSON value of numbers (or ``true``/``false``), nested arrays of even depth allowed.

    :meth:`read` collects the numbers into a float64 buffer, in order, and counts what
    else was there, so that the caller can check them against a datatype it may learn
    only later in the same object.
    """

    def __init__(self) -> None:
        """Start empty."""
        self.values: array[float] = array("d")
        #: How many were integers, floats, booleans, and anything else (null, strings, maps).
        self.integers = 0
        self.floats = 0
        self.booleans = 0
        self.others = 0
        #: Whether an integer beyond ±2^53 was read (a double does not hold it exactly).
        self.inexact = False
        #: The depth of the values' arrays (0: a single value), or -1 when uneven.
        self.depth: int | None = None

    def read(
        self, stream: Iterator[Event], first: Event, what: str, *, max_depth: int, max_count: int
    ) -> None:
        """Read the value that begins with ``first`` (just read) from ``stream``."""
        values, append = self.values, self.values.append
        depth = 0
        event, value = first
        while True:
            if event == "start_array":
                depth += 1
                if depth > max_depth:
                    raise invalid(what, f"data nested deeper than {max_depth}")
            elif event == "end_array":
                depth -= 1
            else:
                if self.depth is None:
                    self.depth = depth
                elif self.depth != depth:
                    raise invalid(what, "nested data of uneven depth")
                if event == "number":
                    if isinstance(value, int):
                        self.integers += 1
                        self.inexact |= not -EXACT_INTEGER <= value <= EXACT_INTEGER
                    else:
                        self.floats += 1
                    append(value)
                elif event == "boolean":
                    self.booleans += 1
                    append(1.0 if value else 0.0)
                else:
                    self.others += 1
                    append(0.0)
                    skip(stream, event)
                if len(values) > max_count:
                    raise invalid(what, f"the reply holds more than {max_count} values")
            if depth == 0:
                return
            event, value = next(stream)

    def array(self) -> npt.NDArray[np.float64]:
        """Return the numbers as a float64 array (a view of the buffer)."""
        return np.frombuffer(self.values, dtype=np.float64)
