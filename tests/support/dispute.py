"""An arbiter, one owner's escrowed twin pairs, and two tiny classifiers served over gRPC.

The end-to-end tests (a claim, and claims again after unlearning) share this set-up: a
real arbiter on 127.0.0.1 with a SQLite store, 200 synthetic pairs marked at ε = 32
escrowed by the owner, a width-16 CNN trained on the published versions (it memorises
them) and the same CNN trained on other items of the distribution (it never saw hers),
each behind its own oracle server.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import torch

from demo.pairset import PairSet
from demo.seeded import SeededEntropy, fixed_salts
from demo.synthetic import synthetic_pairs
from demo.tiny_cnn import train_classifier
from tests.support.keys import KEY
from twinaudit.practitioner.grpc_server import serve_oracle
from twinaudit.practitioner.torch_oracle import TorchClassifierOracle
from twinaudit.protocol.items import encode_item
from twinaudit.protocol.seeds import publication_bits
from twinaudit.verifier.escrow.sqlite_store import SqliteEscrowStore
from twinaudit.verifier.server import serve_arbiter
from twinaudit.wire.transport import make_channel

#: The owner's pairs.
N_PAIRS = 200
#: ε = 32 on 0-255, a width-16 CNN and C1 give q ≈ 0.76-0.79 (measured over three data
#: seeds), where both tests detect with probability ≥ 0.997 at N = 200 (twinaudit plan).
EPSILON = 32


@contextmanager
def served_dispute(tmp: Path, label: str, names: tuple[str, str]) -> Iterator[dict[str, Any]]:
    """Yield the set-up; ``names`` name the used model and the one that never saw her items.

    ``label`` seeds the arbiter's randomness and names the owner in the log. The map
    holds ``key`` (the arbiter's), ``channel`` (to the arbiter), ``pairs`` (the owner's
    :class:`PairSet`), ``receipt``, ``endpoints`` (name → ``HOST:PORT``) and ``store``.
    """
    torch.set_num_threads(2)
    key = KEY
    entropy = SeededEntropy(f"{label} arbiter".encode())
    store = SqliteEscrowStore(tmp / "escrow.db", key, entropy=entropy)
    arbiter, port = serve_arbiter(store, key, "127.0.0.1:0", entropy=entropy)
    channel = make_channel(f"127.0.0.1:{port}")
    pairs = synthetic_pairs(N_PAIRS, seed=11, epsilon=EPSILON)
    versions = [tuple(encode_item(item) for item in pairs.items(i)) for i in range(N_PAIRS)]
    owner_set = PairSet("image", versions, fixed_salts(N_PAIRS))
    receipt = owner_set.escrow(channel, key.public_key(), f"{label} owner")
    bits = np.array(publication_bits(owner_set.root, receipt.rho, N_PAIRS), dtype=int)
    other = synthetic_pairs(N_PAIRS, seed=12, epsilon=EPSILON)
    models = {
        names[0]: train_classifier(pairs.version(bits), pairs.labels, epochs=40, seed=0, width=16),
        names[1]: train_classifier(other.version0, other.labels, epochs=40, seed=0, width=16),
    }
    servers, endpoints = [], {}
    for name, model in models.items():
        server, oracle_port = serve_oracle(
            TorchClassifierOracle(model, n_classes=10, model_name=name), "127.0.0.1:0"
        )
        servers.append(server)
        endpoints[name] = f"127.0.0.1:{oracle_port}"
    try:
        yield {
            "key": key,
            "channel": channel,
            "pairs": owner_set,
            "receipt": receipt,
            "endpoints": endpoints,
            "store": store,
        }
    finally:
        for server in [*servers, arbiter]:
            server.stop(None)
        channel.close()
        store.close()
