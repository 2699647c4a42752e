"""A fixture holding torch to one thread: training and inference figures depend on the count."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import torch


@pytest.fixture
def one_thread() -> Iterator[None]:
    """Run the test with ``torch.set_num_threads(1)``; restore the count after it."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
