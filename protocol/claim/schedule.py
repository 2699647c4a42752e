"""The window schedule of a claim (spec §10.2 step 3; its parameters §10.1).

A claim opens pairs in requests ("windows"). Request ``j`` (counting from 0) asks for
up to ``min(W · 2^j, W_max)`` pairs: small at first, so a claim that detects early
opens few pairs it did not need, and growing, so a long claim pays few round trips
to the owner and the oracle. ``W_max = W`` gives the constant windows of a fixed-size
schedule. The schedule depends only on the claim's parameters, never on the model's
answers, so replay can recompute which window every opened pair belonged to.
"""

from __future__ import annotations

from dataclasses import dataclass

from twinaudit.protocol.errors import ParameterError

#: Pairs of a claim's first request unless the claim says otherwise.
DEFAULT_WINDOW = 8
#: Largest request a claim may ask for.
MAX_WINDOW = 256


def default_window_max(window: int) -> int:
    """Return the cap on a request's size when the claim names none: ``2·W`` (≤ 256).

    Measured on the evaluation's 625 claims (README, "Window schedule"): requests of
    8 then 16 open 5% more pairs than constant requests of 8 before a detection, and
    make half as many round trips; growing to 64 would open 26% more.
    """
    return min(2 * window, MAX_WINDOW)


@dataclass(frozen=True)
class WindowSchedule:
    """Request sizes ``min(first · 2^j, largest)``; also bounds the remaining pairs.

    ``limit`` is how many pairs the claim may open at most (``max_pairs`` or the
    record's size), ``per_pair`` the queries a pair costs (``2K``) and ``budget`` the
    claim's query budget (0: unlimited).
    """

    first: int
    largest: int
    limit: int
    per_pair: int
    budget: int = 0

    def __post_init__(self) -> None:
        """Check the sizes (spec §10.1)."""
        if not 1 <= self.first <= MAX_WINDOW:
            raise ParameterError(f"window must be in 1..{MAX_WINDOW}")
        if not self.first <= self.largest <= MAX_WINDOW:
            raise ParameterError(f"window_max must be in window..{MAX_WINDOW}")

    def nominal(self, number: int) -> int:
        """Return request ``number``'s size before the pair and budget limits."""
        if number < 0:
            raise ValueError("request numbers start at 0")
        # first · 2^number reaches MAX_WINDOW by number 8; never build huge integers.
        return min(self.first << min(number, 9), self.largest)

    def size(self, number: int, opened: int) -> int:
        """Return how many pairs request ``number`` asks for after ``opened`` pairs.

        Spec §10.2 step 3: ``min(W_j, remaining, affordable)``, where ``affordable``
        counts the pairs the query budget still pays for (every opened pair was
        queried). 0 means the claim stops.
        """
        remaining = max(self.limit - opened, 0)
        affordable = remaining
        if self.budget:
            affordable = max(self.budget - opened * self.per_pair, 0) // self.per_pair
        return min(self.nominal(number), remaining, affordable)

    def sizes(self) -> list[int]:
        """Return the size of every request the schedule makes until the claim stops.

        A claim that decides early makes only a prefix of these requests.
        """
        sizes: list[int] = []
        opened = 0
        while (size := self.size(len(sizes), opened)) > 0:
            sizes.append(size)
            opened += size
        return sizes

    def windows_of(self, count: int) -> list[int]:
        """Return the request number of each of the first ``count`` opened pairs.

        A claim opens whole requests only, so ``count`` must end one; raises
        :class:`ValueError` when it does not, or when the schedule stops before.
        """
        numbers: list[int] = []
        number = 0
        while len(numbers) < count:
            size = self.size(number, len(numbers))
            if size == 0 or len(numbers) + size > count:
                raise ValueError(f"{count} opened pairs do not end a request of the schedule")
            numbers.extend([number] * size)
            number += 1
        return numbers
