"""A progress line for long owner commands: count, rate and estimated time left.

Written to a text stream (standard error by default), at most a few times a second.
On a terminal the line is redrawn in place; elsewhere (logs, CI) a plain line is
printed every few seconds, so output stays readable when redirected.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import TextIO

#: Seconds between redraws on a terminal, and between lines elsewhere.
TTY_INTERVAL_S = 0.2
LOG_INTERVAL_S = 5.0
#: Seconds of work before the time left is estimated: the first units carry the
#: start-up (imports, the first batch), and a forecast from them alone is far too long.
ESTIMATE_AFTER_S = 3.0


def format_duration(seconds: float) -> str:
    """Return ``seconds`` as ``h:mm:ss`` or ``m:ss``."""
    whole = max(0, round(seconds))
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


class Progress:
    """Reports ``done`` of ``total`` units of work with the rate since the start.

    The time left is ``?`` until :data:`ESTIMATE_AFTER_S` seconds have passed, and 0
    once everything is done.
    """

    def __init__(
        self,
        label: str,
        total: int,
        *,
        done: int = 0,
        unit: str = "items",
        stream: TextIO | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """Start reporting; ``done`` counts work finished before (a resumed run)."""
        self.label, self.total, self.unit = label, total, unit
        self.done = done
        self._resumed_at = done
        self._stream = stream if stream is not None else sys.stderr
        self._tty = bool(getattr(self._stream, "isatty", lambda: False)())
        self._clock = clock
        self._start = clock()
        self._last_draw = float("-inf")

    def update(self, count: int) -> None:
        """Record ``count`` more units done and redraw if it is time."""
        self.done += count
        now = self._clock()
        if now - self._last_draw >= (TTY_INTERVAL_S if self._tty else LOG_INTERVAL_S):
            self._draw(now)

    def line(self, now: float | None = None) -> str:
        """Return the current progress line (without a newline)."""
        now = self._clock() if now is None else now
        elapsed = now - self._start
        fresh = self.done - self._resumed_at
        rate = fresh / elapsed if elapsed > 0 else 0.0
        percent = 100.0 * self.done / self.total if self.total else 100.0
        if self.done >= self.total:
            eta = format_duration(0)
        elif rate > 0 and elapsed >= ESTIMATE_AFTER_S:
            eta = format_duration((self.total - self.done) / rate)
        else:
            eta = "?"
        return (
            f"{self.label}: {self.done}/{self.total} {self.unit} ({percent:5.1f}%)"
            f"  {rate:.1f} {self.unit}/s  elapsed {format_duration(elapsed)}  left {eta}"
        )

    def finish(self) -> None:
        """Draw the final line and end it."""
        self._draw(self._clock())
        if self._tty:
            self._stream.write("\n")
            self._stream.flush()

    def _draw(self, now: float) -> None:
        self._last_draw = now
        if self._tty:
            self._stream.write("\r" + self.line(now) + "\x1b[K")
        else:
            self._stream.write(self.line(now) + "\n")
        self._stream.flush()
