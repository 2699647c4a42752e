"""Fixtures every test package shares, and the ``slow`` marker's command-line switch.

``make test-fast`` runs ``pytest -m "not slow"``: the everyday subset, every test that
takes more than a few seconds left out. CI (``.ci/run`` → ``make test``) runs them all.
Every run names the unmarked tests that took more than 10 s
(:mod:`tests.support.slow_report`), so that the marker stays true.
"""

from __future__ import annotations

import sys

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from tests.support.keys import KEY, OTHER

pytest_plugins = ["tests.support.slow_report"]


@pytest.fixture
def arbiter_key() -> Ed25519PrivateKey:
    """The arbiter's fixed signing key (:data:`tests.support.keys.KEY`)."""
    return KEY


@pytest.fixture
def other_key() -> Ed25519PrivateKey:
    """A second fixed key, unrelated to the arbiter's (:data:`tests.support.keys.OTHER`)."""
    return OTHER


#: The repository's top-level folders, which are importable from its root by their bare
#: names too; the project imports them only through the installed root ``twinaudit``.
BARE_NAMES = frozenset({"protocol", "wire", "owner", "verifier", "practitioner", "witness"})


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Fail the run if any code imported a role's folder by its bare name (a second copy).

    The ``one-root`` import contract finds such imports in the source; this finds those
    made at run time (``importlib.import_module``, ``monkeypatch.setattr`` targets).
    """
    bare = sorted(name for name in sys.modules if name.split(".")[0] in BARE_NAMES)
    if bare:
        sys.stderr.write(f"\nimported by a bare name, not through twinaudit: {bare[:10]}\n")
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
