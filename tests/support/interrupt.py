"""Stopping a marking run part-way, as Ctrl-C would, for the resume tests."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from twinaudit.owner.vault import VaultWriter


def stop_at_append(monkeypatch: pytest.MonkeyPatch, call: int) -> Callable[..., Any]:
    """Make ``VaultWriter.append`` raise KeyboardInterrupt at its ``call``-th call (from 1).

    The batches before it are written and durable. Returns the real ``append``, which a
    test sets back to resume the run.
    """
    real = VaultWriter.append
    calls = 0

    def append_then_stop(self: VaultWriter, *args: Any, **kwargs: Any) -> None:
        nonlocal calls
        calls += 1
        if calls == call:
            raise KeyboardInterrupt
        real(self, *args, **kwargs)

    monkeypatch.setattr(VaultWriter, "append", append_then_stop)
    return real
