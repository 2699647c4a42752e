"""Fixtures every test package shares, and the ``slow`` marker's command-line switch.

``make test-fast`` runs ``pytest -m "not slow"``: the everyday subset, every test that
takes more than a few seconds left out. CI (``.ci/run`` → ``make test``) runs them all.
"""

from __future__ import annotations

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from tests.support.keys import KEY, OTHER


@pytest.fixture
def arbiter_key() -> Ed25519PrivateKey:
    """The arbiter's fixed signing key (:data:`tests.support.keys.KEY`)."""
    return KEY


@pytest.fixture
def other_key() -> Ed25519PrivateKey:
    """A second fixed key, unrelated to the arbiter's (:data:`tests.support.keys.OTHER`)."""
    return OTHER
