"""Reach the oracle an address names: ``HOST:PORT`` or an Open Inference Protocol model.

The arbiter dials the oracle address a claim gives (``owner claim --oracle``):

- ``HOST:PORT`` — a ``twinaudit.oracle.v1`` oracle (``oracle serve``), over gRPC
  (:class:`~twinaudit.verifier.oracles.grpc_client.GrpcOracle`);
- ``oip+http://HOST:PORT/v2/models/NAME…``, ``oip+https://…`` or
  ``oip+grpc://HOST:PORT/NAME…`` — a model on an Open Inference Protocol server
  (:class:`~twinaudit.verifier.oracles.oip_oracle.OipOracle`, :mod:`.oip_address`);
- ``held:sha256:<hex>`` — a model artefact the arbiter holds (``verifier model add``),
  run in a child process the verifier starts for the claim and stops after it
  (:class:`~twinaudit.verifier.oracles.held.HeldOracle`, :mod:`.held`).

A malformed address is the claimant's error (:class:`~twinaudit.protocol.errors.InputError`,
one line), found before anything is contacted.
"""

from __future__ import annotations

from pathlib import Path

from twinaudit.protocol.oracles.base import Oracle
from twinaudit.wire import transport

from .grpc_client import GrpcOracle
from .held import dial_held, is_held_address
from .oip_address import is_oip_address
from .oip_oracle import dial_oip


def dial_oracle(
    endpoint: str,
    *,
    tls: transport.TlsFiles | None = None,
    timeout_s: float,
    held_models: Path | None = None,
) -> Oracle:
    """Return the oracle ``endpoint`` names; ``timeout_s`` is a ``HOST:PORT`` oracle's deadline.

    An OIP address carries its own deadline (``timeout=``). ``tls`` are the arbiter's
    oracle TLS files (``verifier serve --oracle-ca``). ``held_models`` is the arbiter's
    artefact store (``verifier serve --models``; None: it holds none). A held model's
    oracle has a ``close()`` that stops its child process: call it when the claim ends.
    """
    if is_held_address(endpoint):
        return dial_held(endpoint, held_models)
    if is_oip_address(endpoint):
        return dial_oip(endpoint, tls=tls)
    # A malformed endpoint is the claimant's error (INVALID_ARGUMENT), never a
    # failed lookup of whatever text she sent.
    transport.parse_address(endpoint, what="the oracle endpoint")
    channel = transport.make_channel(
        endpoint, tls=tls, max_send_bytes=transport.MAX_QUERY_MESSAGE_BYTES
    )
    return GrpcOracle(channel, timeout_s, max_query_bytes=transport.MAX_QUERY_MESSAGE_BYTES)
