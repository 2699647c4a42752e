"""Wait for SIGINT or SIGTERM in a serving command, with no lock taken in the handler.

The serving commands (``oracle serve``, ``verifier serve``, ``witness serve``) run until
SIGINT or SIGTERM. A handler that sets a :class:`threading.Event` the main thread waits
on can hang the process for good: Python runs the handler in the main thread between
two bytecodes, and where those are the few that :meth:`threading.Event.wait` executes
while holding the event's lock, before it blocks, ``set()`` waits for that lock, which
the same thread holds. On a loaded machine a signal sent right after the server starts
lands there; a shuffled test run saw servers ignore SIGTERM for over a minute.

Here the handler only writes a byte to a pipe, which is safe at any point, and the main
thread reads it. :meth:`StopSignal.stop` does the same from any other thread.

That handler alone is not enough either: the kernel may deliver a process's signal to any
of its threads that does not block it (gRPC's, torch's), and Python then runs the handler
only when the main thread next executes bytecode, which it never does while it is blocked
reading the pipe. A clean-clone CI run saw ``oracle serve`` outlive SIGTERM by 90 s so.
The pipe is therefore also the process's wakeup fd (:func:`signal.set_wakeup_fd`): the C
handler writes the signal's number to it from whichever thread takes the signal, and the
main thread wakes.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Iterable
from types import FrameType, TracebackType
from typing import Any, Final

#: The signals a serving command stops on.
STOP_SIGNALS: Final = (signal.SIGINT, signal.SIGTERM)


class StopSignal:
    """A stop request by signal or by :meth:`stop`, awaited by :meth:`wait` (a context manager).

    Entering installs the handlers, leaving restores the previous ones; both must happen
    in the main thread (as :func:`signal.signal` requires). A signal that arrives before
    :meth:`wait` is called is not lost: its byte waits in the pipe.
    """

    def __init__(self, signals: Iterable[signal.Signals] = STOP_SIGNALS) -> None:
        self._signals = tuple(signals)
        self._previous: dict[signal.Signals, Any] = {}
        self._read, self._write = os.pipe()
        os.set_blocking(self._write, False)
        self._closing = threading.Lock()
        self._previous_wakeup = -1

    def __enter__(self) -> StopSignal:
        """Install the handlers and make the pipe the wakeup fd."""
        for sig in self._signals:
            self._previous[sig] = signal.signal(sig, self._on_signal)
        self._previous_wakeup = signal.set_wakeup_fd(self._write, warn_on_full_buffer=False)
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        """Restore the previous handlers and wakeup fd, then close the pipe."""
        signal.set_wakeup_fd(self._previous_wakeup)
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        with self._closing:
            write, self._write = self._write, -1
            os.close(write)
        os.close(self._read)

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        # In the main thread, between bytecodes: no lock, only a write (the wakeup fd has
        # the signal's number already, unless another wakeup fd replaced this one since).
        self._poke(self._write)

    def stop(self) -> None:
        """Ask :meth:`wait` to return (from any thread; nothing once the context has closed)."""
        with self._closing:
            self._poke(self._write)

    def wait(self) -> None:
        """Block until a stop signal arrives or :meth:`stop` is called.

        The wakeup fd carries the number of every signal with a Python handler; a byte
        that is neither a stop signal's nor a poke's (0) is passed over.
        """
        stops = {0, *(int(sig) for sig in self._signals)}
        while True:
            byte = os.read(self._read, 1)
            if not byte or byte[0] in stops:
                return

    @staticmethod
    def _poke(write: int) -> None:
        if write < 0:
            return
        with contextlib.suppress(BlockingIOError):  # a full pipe: a stop already waits
            os.write(write, b"\0")
