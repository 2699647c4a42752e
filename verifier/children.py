"""Stopping a child process that serves over its stdin (a signer, a held model)."""

from __future__ import annotations

import contextlib
import signal
import subprocess
from typing import Any


def stop_child(process: subprocess.Popen[Any], timeout_s: float) -> None:
    """Close the child's stdin (it stops at EOF), then SIGTERM, then SIGKILL; wait for it.

    Each step waits ``timeout_s`` seconds; the child's stdout is closed at the end.
    """
    if process.stdin is not None:
        with contextlib.suppress(OSError):
            process.stdin.close()
    for step in (None, signal.SIGTERM, signal.SIGKILL):
        if step is not None:
            process.send_signal(step)
        try:
            process.wait(timeout=timeout_s)
            break
        except subprocess.TimeoutExpired:
            continue
    if process.stdout is not None:
        process.stdout.close()
