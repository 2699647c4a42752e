"""Real servers on 127.0.0.1 for claim tests: an arbiter on SQLite, a model oracle, one record."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from demo.seeded import SeededEntropy
from tests.support.claims import make_pairset
from tests.support.fake_oracle import LinearOracle
from tests.support.keys import KEY
from twinaudit.practitioner.grpc_server import serve_oracle
from twinaudit.verifier.escrow.sqlite_store import SqliteEscrowStore
from twinaudit.verifier.server import serve_arbiter
from twinaudit.wire.transport import make_channel


@contextmanager
def keyed_record_world(
    directory: Path,
    *,
    seed: int,
    salt_seed: bytes,
    answer_key: Ed25519PrivateKey | None = None,
    **arbiter_options: Any,
) -> Iterator[dict[str, Any]]:
    """Serve an arbiter and a linear oracle; escrow 24 pairs keyed with the owner's claim key.

    Yields the store, a channel to the arbiter, the pairs, the record's index and the
    oracle's address; ``arbiter_options`` go to :func:`serve_arbiter`, and the oracle
    signs its answers with ``answer_key`` where one is given (spec §10.8).
    """
    store = SqliteEscrowStore(directory / "escrow.db", KEY, entropy=SeededEntropy(b"rho"))
    server, port = serve_arbiter(
        store, KEY, "127.0.0.1:0", entropy=SeededEntropy(b"c"), **arbiter_options
    )
    oracle, oracle_port = serve_oracle(LinearOracle(), "127.0.0.1:0", answer_key=answer_key)
    channel = make_channel(f"127.0.0.1:{port}")
    pairs = make_pairset(24, seed=seed, salt_seed=salt_seed)
    receipt = pairs.escrow(channel, KEY.public_key(), "alice")
    try:
        yield {
            "store": store,
            "channel": channel,
            "address": f"127.0.0.1:{port}",
            "pairs": pairs,
            "record": receipt.entry.index,
            "oracle": f"127.0.0.1:{oracle_port}",
        }
    finally:
        channel.close()
        server.stop(None)
        oracle.stop(None)
        store.close()
