"""The proxy of the owner's own items, made short for tests."""

from __future__ import annotations

import pytest

from twinaudit.owner.marking import proxy as proxy_module


def short_own_proxy(monkeypatch: pytest.MonkeyPatch, steps: int) -> None:
    """Make the proxy ``owner mark`` trains on her own items train ``steps`` steps.

    Its schedule is whole epochs of at least ``OWN_STEPS`` steps and at least
    ``OWN_EPOCHS`` epochs: the epochs go to one, so that their floor does not lengthen it.
    """
    monkeypatch.setattr(proxy_module, "OWN_STEPS", steps)
    monkeypatch.setattr(proxy_module, "OWN_EPOCHS", 1)
