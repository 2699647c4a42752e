"""One arbiter process: the escrow and verifier services on one gRPC server."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import grpc
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from twinaudit.protocol.signer import Signer
from twinaudit.verifier.escrow.cosigning import CheckpointCosigning
from twinaudit.verifier.escrow.leases import DEFAULT_LEASE_S
from twinaudit.verifier.escrow.metered_store import MeteredStore
from twinaudit.verifier.escrow.rate_limit import DEFAULT_RATE_LIMIT, RateLimit
from twinaudit.verifier.escrow.service import SERVICE_NAME as ESCROW_SERVICE
from twinaudit.verifier.escrow.service import add_escrow_service
from twinaudit.verifier.escrow.store import EscrowStore
from twinaudit.wire.observe import NO_METRICS, Metrics
from twinaudit.wire.transport import TlsFiles, make_server

from .claim_slots import DEFAULT_MAX_CLAIMS
from .escrow.store import DEFAULT_MAX_FAILED_CLAIMS, DEFAULT_MAX_OPEN_CLAIMS
from .service import SERVICE_NAME as VERIFIER_SERVICE
from .service import (
    OracleFactory,
    VerifierService,
    add_verifier_service,
    grpc_oracle_factory,
)


def serve_arbiter(
    store: EscrowStore,
    signing_key: Signer | Ed25519PrivateKey,
    listen: str,
    *,
    tls: TlsFiles | None = None,
    oracle_factory: OracleFactory | None = None,
    oracle_tls: TlsFiles | None = None,
    max_workers: int = 16,
    max_claims: int = DEFAULT_MAX_CLAIMS,
    entropy: Callable[[int], bytes] | None = None,
    escrow_rate_limit: RateLimit | None = DEFAULT_RATE_LIMIT,
    metrics: Metrics = NO_METRICS,
    reflection: bool = False,
    claim_lease_s: float = DEFAULT_LEASE_S,
    held_models: Path | None = None,
    max_open_claims: int = DEFAULT_MAX_OPEN_CLAIMS,
    max_failed_claims: int = DEFAULT_MAX_FAILED_CLAIMS,
    cosigning: CheckpointCosigning | None = None,
) -> tuple[grpc.Server, int]:
    """Start the arbiter's services on ``listen``; return the server and its bound port.

    Receipts, checkpoints and verdicts are signed by ``signing_key``: a
    :class:`~twinaudit.protocol.signer.Signer` (``verifier serve`` passes one whose key stays in
    a separate process, :mod:`twinaudit.verifier.signer_process`), or a private key.

    ``entropy`` is for reproducible tests only (claim ids and nonces; default: the OS
    CSPRNG). ``escrow_rate_limit`` bounds each client's escrow commits (None: no limit).
    Claims reach model oracles through ``oracle_factory`` (by default gRPC clients,
    over TLS when ``oracle_tls`` is given), and run the model artefacts of the store
    ``held_models`` (``held:sha256:<hex>``, :mod:`twinaudit.verifier.oracles.held`) in child
    processes. Concurrent claims run on separate threads: at most ``max_claims`` at once
    (one more is refused with ``RESOURCE_EXHAUSTED``), on threads of their own, so that
    the other calls always have ``max_workers`` threads, however many claims are
    filed and however slowly their oracles answer.

    Every RPC is logged (:mod:`twinaudit.wire.observe`); RPCs, claims, escrow commits,
    oracle and store times are counted in ``metrics``. The health service answers
    ``NOT_SERVING`` while the store does not answer a query (its size). ``reflection``
    serves gRPC reflection.

    Each claim runs under a lease in the store of ``claim_lease_s`` seconds, renewed
    while it runs: several arbiter processes may serve one database (replicas), and
    a claim is run by one of them at a time. A record may have ``max_open_claims`` claims
    open and ``max_failed_claims`` failed in the last day before a new claim on it is
    refused (spec §10.7's per-owner limits).
    """
    factory = oracle_factory or grpc_oracle_factory(oracle_tls, held_models)
    if metrics is not NO_METRICS:
        store = MeteredStore(store, metrics)  # the caller still closes the store it gave

    def register(server: grpc.Server) -> None:
        add_escrow_service(
            server, store, rate_limit=escrow_rate_limit, metrics=metrics, cosigning=cosigning
        )
        add_verifier_service(
            server,
            VerifierService(
                store,
                signing_key,
                factory,
                entropy=entropy,
                metrics=metrics,
                lease_s=claim_lease_s,
                max_claims=max_claims,
                max_open_claims=max_open_claims,
                max_failed_claims=max_failed_claims,
            ),
        )

    return make_server(
        listen,
        register,
        tls=tls,
        max_workers=max_workers + max_claims,
        service_names=(ESCROW_SERVICE, VERIFIER_SERVICE),
        metrics=metrics,
        health_probe=_health_probe(store, signing_key),
        reflection=reflection,
    )


def _health_probe(store: EscrowStore, signer: object) -> Callable[[], object]:
    """Return the health probe: the store answers a query and the signer is alive.

    A signer that can say whether it is alive (a signer process) is asked: one that died
    leaves nothing signed, so the health service answers ``NOT_SERVING``.
    """
    check_alive = getattr(signer, "check_alive", None)

    def probe() -> object:
        size = store.size()
        if callable(check_alive):
            check_alive()
        return size

    return probe
