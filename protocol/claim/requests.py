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

from twinaudit.protocol.errors import InputError, LimitExceededError

#: An image query's shape: (height, width, channels).
Shape = tuple[int, int, int]


def queries_per_request(
    max_batch: int,
    max_bytes: int,
    query_bytes: int,
    single_bytes: int = 0,
    *,
    answer_bytes: int = 0,
    fixed_batch: int = 0,
) -> int:
    """Return the most queries of one shape in a request (spec §10.2 step 5).

    That is ``m = min(max_batch, ⌊max_bytes / query_bytes⌋, ⌊max_bytes / answer_bytes⌋)``:
    ``query_bytes`` is what one query of a shape takes in a request of the oracle's
    protocol, ``max_bytes`` that protocol's cap on a request (and on a reply), and
    ``answer_bytes`` the most bytes one query's answer may take (0: no bound on
    replies). A query above ``max_bytes`` goes alone (``m = 1``, the answer bound
    still applying) where it is within ``single_bytes``, the cap on a request of one
    query (0: none); otherwise ``limit-exceeded``. A model with a fixed batch size
    (``fixed_batch`` > 0, over the Open Inference Protocol) gets runs of exactly that
    size whatever the byte caps say, once one query fits a request.
    """
    if max_batch < 1 or query_bytes < 1 or max_bytes < 1 or single_bytes < 0:
        raise InputError("max_batch, the request caps and a query's bytes must be positive")
    if answer_bytes < 0 or fixed_batch < 0:
        raise InputError("an answer's bytes and a fixed batch size cannot be negative")
    fits = max_bytes // query_bytes
    if fits < 1:
        if query_bytes > single_bytes:
            raise LimitExceededError(
                "bytes of one image query", query_bytes, max(max_bytes, single_bytes)
            )
        fits = 1
    if fixed_batch:
        return fixed_batch
    if answer_bytes:
        fits = min(fits, max(1, max_bytes // answer_bytes))
    return min(max_batch, fits)


def padding(runs: Sequence[Sequence[int]], fixed_batch: int) -> list[int]:
    """Return the blank images that pad each request to a fixed batch (0 without one)."""
    return [max(fixed_batch - len(run), 0) if fixed_batch else 0 for run in runs]


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
