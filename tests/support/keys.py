"""The suite's fixed signing keys (Ed25519, from fixed seeds: never a real arbiter's).

``KEY`` is the arbiter's key in most tests and ``OTHER`` a second, unrelated key (a
wrong arbiter, a forged signature). Tests that need a key of their own, apart from
every other test's, draw one with ``Ed25519PrivateKey.generate()``.
"""

from __future__ import annotations

from typing import Final

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

#: The arbiter's key of most tests: the seed 00 01 … 1f.
KEY: Final = Ed25519PrivateKey.from_private_bytes(bytes(range(32)))
#: A second key: the seed 01 02 … 20.
OTHER: Final = Ed25519PrivateKey.from_private_bytes(bytes(range(1, 33)))
