"""The owner commands' progress line: counts, rate, and a time left only once it means something."""

from __future__ import annotations

import io

from twinaudit.owner.progress import ESTIMATE_AFTER_S, Progress, format_duration


class _Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_the_time_left_waits_for_the_start_up_to_pass():
    clock, stream = _Clock(), io.StringIO()
    progress = Progress("training the proxy", 3160, unit="epochs", stream=stream, clock=clock)
    clock.now += 1.1  # a slow first epoch (start-up) must not forecast an hour
    progress.update(1)
    assert progress.line().endswith("left ?")
    assert "1/3160 epochs" in progress.line() and "epochs/s" in progress.line()
    clock.now += ESTIMATE_AFTER_S
    progress.update(199)
    rate = 200 / (1.1 + ESTIMATE_AFTER_S)
    assert progress.line().endswith(f"left {format_duration(2960 / rate)}")
    progress.update(2960)
    assert progress.line().endswith("left 0:00")


def test_a_quick_job_ends_on_nothing_left():
    clock, stream = _Clock(), io.StringIO()
    progress = Progress("marking (pgd)", 14, stream=stream, clock=clock)
    clock.now += 0.5
    progress.update(14)
    progress.finish()
    assert (
        stream.getvalue()
        .splitlines()[-1]
        .endswith("14/14 items (100.0%)  28.0 items/s  elapsed 0:00  left 0:00")
    )


def test_a_resumed_run_counts_its_rate_from_what_it_did():
    clock, stream = _Clock(), io.StringIO()
    progress = Progress("marking (pgd)", 100, done=50, stream=stream, clock=clock)
    clock.now += 10.0
    progress.update(10)
    assert "60/100 items ( 60.0%)  1.0 items/s  elapsed 0:10  left 0:40" in progress.line()
