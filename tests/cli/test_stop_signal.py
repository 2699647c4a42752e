"""The serving commands' stop: SIGINT/SIGTERM or another thread, with no lock in the handler."""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest

from twinaudit.cli.stop_signal import StopSignal


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_before_the_wait_is_not_lost(sig):
    with StopSignal() as stop:
        os.kill(os.getpid(), sig)
        stop.wait()  # returns: the handler's byte waits in the pipe


def test_another_thread_stops_the_wait():
    with StopSignal() as stop:
        threading.Timer(0.05, stop.stop).start()
        started = time.monotonic()
        stop.wait()
    assert time.monotonic() - started < 10


def test_the_handler_runs_while_the_main_thread_holds_the_stop_s_lock():
    # What hung `oracle serve`: a handler that set a threading.Event ran while the main
    # thread was inside Event.wait() holding the event's lock, and waited for it. The
    # handler here must not take StopSignal's own lock (which stop() and leaving hold),
    # or this test hangs.
    with StopSignal() as stop:
        with stop._closing:
            os.kill(os.getpid(), signal.SIGTERM)
        stop.wait()


def test_leaving_restores_the_handlers_and_a_late_stop_does_nothing():
    before = signal.getsignal(signal.SIGTERM)
    with StopSignal() as stop:
        assert signal.getsignal(signal.SIGTERM) != before
    assert signal.getsignal(signal.SIGTERM) == before
    stop.stop()  # a thread that stops after the server has gone: no write, no error


def test_a_signal_taken_by_another_thread_ends_the_wait():
    # The kernel may hand a process's SIGTERM to any thread not blocking it (a server has
    # gRPC's and torch's); Python runs the handler only when the main thread executes
    # bytecode, which a thread blocked reading the pipe does not. The wakeup fd wakes it.
    # Without it this wait ends only when the guard stops it, after 10 s.
    with StopSignal() as stop:
        guard = threading.Timer(10, stop.stop)
        guard.start()

        def take() -> None:
            time.sleep(0.3)  # the main thread is reading the pipe by then
            signal.pthread_kill(threading.get_ident(), signal.SIGTERM)

        taker = threading.Thread(target=take)
        started = time.monotonic()
        taker.start()
        stop.wait()
        elapsed = time.monotonic() - started
        guard.cancel()
        taker.join()
    assert elapsed < 5


def test_another_signal_with_a_handler_does_not_end_the_wait():
    previous = signal.signal(signal.SIGUSR1, lambda signum, frame: None)
    try:
        with StopSignal() as stop:
            os.kill(os.getpid(), signal.SIGUSR1)  # its number reaches the pipe: passed over
            threading.Timer(0.3, stop.stop).start()
            started = time.monotonic()
            stop.wait()
        assert time.monotonic() - started >= 0.2
    finally:
        signal.signal(signal.SIGUSR1, previous)


def test_leaving_restores_the_wakeup_fd():
    assert signal.set_wakeup_fd(-1) == -1
    with StopSignal():
        pass
    assert signal.set_wakeup_fd(-1) == -1
