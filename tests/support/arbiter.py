"""An in-process arbiter on SQLite for owner-side tests, with seeded randomness."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from demo.seeded import SeededEntropy
from twinaudit.protocol.keys import public_key_pem
from twinaudit.verifier.escrow.sqlite_store import SqliteEscrowStore
from twinaudit.verifier.server import serve_arbiter


@contextmanager
def sqlite_arbiter(directory: Path, key: Ed25519PrivateKey) -> Iterator[str]:
    """Serve an arbiter with ``key`` on 127.0.0.1; yield its address.

    Its store is ``directory/escrow.db`` (ρ and challenges from fixed seeds) and its
    public key is written to ``directory/arbiter.key.pub``.
    """
    store = SqliteEscrowStore(directory / "escrow.db", key, entropy=SeededEntropy(b"rho"))
    server, port = serve_arbiter(store, key, "127.0.0.1:0", entropy=SeededEntropy(b"c"))
    (directory / "arbiter.key.pub").write_bytes(public_key_pem(key.public_key()))
    try:
        yield f"127.0.0.1:{port}"
    finally:
        server.stop(None)
        store.close()
