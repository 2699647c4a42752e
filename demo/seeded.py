"""Reproducible stand-ins for the randomness of the arbiter and the owner.

The arbiter draws ρ, claim ids and nonces from an entropy source (the OS CSPRNG by
default), and an owner salts each commitment with :func:`twinaudit.protocol.commitment.new_salt`.
Benchmarks and tests that must make the same claim twice (the same queries, the same
transcript) pass these seeded versions instead. They are predictable by design: never
use them for a real escrow record or claim.
"""

from __future__ import annotations

import hashlib

__all__ = ["SeededEntropy", "fixed_salts"]


class SeededEntropy:
    """An entropy source (``n`` -> ``n`` bytes) from a seed: SHAKE-256 of seed and counter.

    A stand-in for the arbiter's CSPRNG (the ``entropy`` argument of
    :class:`twinaudit.verifier.escrow.sqlite_store.SqliteEscrowStore` and
    :func:`twinaudit.verifier.server.serve_arbiter`): two sources with the same seed return the
    same bytes for the same sequence of calls.
    """

    def __init__(self, seed: bytes) -> None:
        self._seed = seed
        self._counter = 0

    def __call__(self, n: int) -> bytes:
        """Return the next ``n`` bytes."""
        self._counter += 1
        return hashlib.shake_256(self._seed + self._counter.to_bytes(8, "big")).digest(n)


def fixed_salts(n: int, seed: bytes = b"salts") -> list[bytes]:
    """Return ``n`` reproducible 32-byte salts from ``seed`` (owners use ``new_salt``)."""
    return [hashlib.sha256(seed + i.to_bytes(8, "big")).digest() for i in range(n)]
