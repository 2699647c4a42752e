"""The claim's window schedule (spec §10.2 step 3) and what replay checks of it."""

from __future__ import annotations

import pytest

from twinaudit.protocol.claim.schedule import MAX_WINDOW, WindowSchedule
from twinaudit.protocol.errors import ParameterError


def test_requests_double_up_to_the_cap() -> None:
    schedule = WindowSchedule(8, 64, limit=10_000, per_pair=64)
    assert [schedule.nominal(j) for j in range(7)] == [8, 16, 32, 64, 64, 64, 64]
    assert schedule.nominal(10**6) == 64  # no huge shifts


def test_window_max_equal_to_window_gives_constant_requests() -> None:
    assert WindowSchedule(8, 8, limit=20, per_pair=2).sizes() == [8, 8, 4]


def test_the_budget_is_counted_over_every_opened_pair() -> None:
    # 30 pairs' worth of queries: 8 + 16, then only 6 more are affordable.
    assert WindowSchedule(8, 64, limit=200, per_pair=64, budget=64 * 30).sizes() == [8, 16, 6]
    assert WindowSchedule(8, 64, limit=200, per_pair=64, budget=63).sizes() == []


def test_windows_of_names_each_pairs_request() -> None:
    schedule = WindowSchedule(2, 4, limit=20, per_pair=2)
    assert schedule.sizes() == [2, 4, 4, 4, 4, 2]
    assert schedule.windows_of(14) == [0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3]
    assert schedule.windows_of(0) == []


@pytest.mark.parametrize("count", [1, 5, 7, 21])
def test_windows_of_refuses_a_count_that_does_not_end_a_request(count: int) -> None:
    with pytest.raises(ValueError, match="do not end a request"):
        WindowSchedule(2, 4, limit=20, per_pair=2).windows_of(count)


@pytest.mark.parametrize(
    ("first", "largest"), [(0, 8), (9, 8), (8, MAX_WINDOW + 1), (MAX_WINDOW + 1, MAX_WINDOW + 1)]
)
def test_bad_sizes_are_parameter_errors(first: int, largest: int) -> None:
    with pytest.raises(ParameterError):
        WindowSchedule(first, largest, limit=10, per_pair=2)
