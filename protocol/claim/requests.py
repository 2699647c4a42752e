"""How a window's image queries are cut into requests to the oracle (spec §10.2 step 5).

The queries of a window are sent in their permuted (sent) order. They are grouped by
shape, the groups in the order in which each shape first occurs, and each group is
cut into consecutive runs of at most ``m(shape)`` queries: the oracle's ``max_batch``
and what one request of its protocol can carry (:func:`queries_per_request`). How
queries are split changes no score, record or verdict; it is fixed so that the same
claim sends the model the same batches, on the arbiter's run and on a re-execution
(§12.1).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from protocol.errors import InputError, LimitExceededError

#: An image query's shape: (height, width, channels).
Shape = tuple[int, int, int]


def queries_per_request(
    max_batch: int, max_bytes: int, query_bytes: int, single_bytes: int = 0
) -> int:
    """Return ``m = min(max_batch, ⌊max_bytes / query_bytes⌋)``, or 1 for a query alone.

    ``query_bytes`` is what one query of a shape takes in a request of the oracle's
    protocol and ``max_bytes`` that protocol's cap on a request. A query above
    ``max_bytes`` goes alone (``m = 1``) where it is within ``single_bytes``, the cap on
    a request of one query (0: none); otherwise ``limit-exceeded``.
    """
    if max_batch < 1 or query_bytes < 1 or max_bytes < 1 or single_bytes < 0:
        raise InputError("max_batch, the request caps and a query's bytes must be positive")
    fits = max_bytes // query_bytes
    if fits < 1:
        if query_bytes <= single_bytes:
            return 1
        raise LimitExceededError(
            "bytes of one image query", query_bytes, max(max_bytes, single_bytes)
        )
    return min(max_batch, fits)


def request_runs(shapes: Sequence[Shape], per_request: Callable[[Shape], int]) -> list[list[int]]:
    """Return the requests of a window: lists of positions in the sent order.

    ``shapes[n]`` is the shape of the query sent n-th; ``per_request(shape)`` the most
    queries of that shape one request holds (at least 1).
    """
    groups: dict[Shape, list[int]] = {}
    for position, shape in enumerate(shapes):
        groups.setdefault(shape, []).append(position)
    runs: list[list[int]] = []
    for shape, positions in groups.items():
        size = per_request(shape)
        if size < 1:
            raise InputError(f"a request holds at least one query, not {size}")
        runs += [positions[start : start + size] for start in range(0, len(positions), size)]
    return runs
