"""The ``twinaudit.escrow.v1.Escrow`` gRPC service over an :class:`~.store.EscrowLog`.

Every request field is validated before the store is touched, with the spec's error
families mapped by :func:`twinaudit.wire.transport.status_for`: a malformed field is
``INVALID_ARGUMENT``, ``n_pairs`` above ``MAX_PAIRS`` is ``RESOURCE_EXHAUSTED``
(``limit-exceeded``), as is a commit past the client's rate limit
(:mod:`.rate_limit`); an unsupported spec version is ``FAILED_PRECONDITION``. A log
index or size the log has not reached is ``NOT_FOUND``. A rejected request stores and
signs nothing.
"""

from __future__ import annotations

import base64
import json
import logging
from collections.abc import Callable
from typing import Any, Final, TypeVar

import grpc
import msgpack

from twinaudit.protocol.errors import InputError, TwinauditError
from twinaudit.protocol.escrow_messages import EscrowRequest
from twinaudit.protocol.log_entries import MAX_ENTRIES_BYTES, MAX_ENTRIES_PER_CALL
from twinaudit.wire.escrow.v1 import escrow_pb2, escrow_pb2_grpc
from twinaudit.wire.observe import NO_METRICS, Metrics, annotate
from twinaudit.wire.transport import TlsFiles, abort_with_error, make_server

from .cosigning import CheckpointCosigning
from .rate_limit import DEFAULT_RATE_LIMIT, CommitLimiter, RateLimit, client_identity
from .store import EscrowLog

#: Full name of the service, as the health service reports it.
SERVICE_NAME: Final = "twinaudit.escrow.v1.Escrow"

_log = logging.getLogger(__name__)
T = TypeVar("T")


def request_from_proto(message: escrow_pb2.CommitRequest) -> EscrowRequest:
    """Return the validated §9.1 request carried by a ``CommitRequest``.

    A request must bind the owner's claim key (§9.1): a record without one could be
    claimed on by anyone who reads the public log, and every such claim would count
    against the owner's false-detection bound (§10.7, §11).
    """
    if not message.claim_key:
        raise InputError(
            "an escrow request must carry the owner's claim key (spec 9.1): claims on a record "
            "without one are not authenticated; update the owner's tool"
        )
    return EscrowRequest(
        spec=message.spec_version,
        root=message.root,
        n_pairs=message.n_pairs,
        item_kind=message.item_kind,
        owner=message.owner,
        claim_key=bytes(message.claim_key),
    )


class EscrowService(escrow_pb2_grpc.EscrowServicer):
    """Serves one :class:`EscrowLog`: commits, records, checkpoints and proofs."""

    def __init__(
        self,
        store: EscrowLog,
        *,
        rate_limit: RateLimit | None = DEFAULT_RATE_LIMIT,
        metrics: Metrics = NO_METRICS,
        cosigning: CheckpointCosigning | None = None,
    ) -> None:
        """Serve ``store`` (the caller keeps ownership and closes it).

        ``rate_limit`` bounds each client's commits (:mod:`.rate_limit`); None: no limit.
        Commits are counted in ``metrics`` (committed or refused). With ``cosigning``,
        checkpoint notes carry the witnesses' cosignatures (:mod:`.cosigning`).
        """
        self._store = store
        self._cosigning = cosigning
        self._limiter = CommitLimiter(rate_limit) if rate_limit is not None else None
        self._metrics = metrics

    def Commit(  # noqa: N802
        self, request: escrow_pb2.CommitRequest, context: Any
    ) -> escrow_pb2.CommitResponse:
        """Validate and escrow a root; answer with the signed receipt (§9.3)."""

        def run() -> escrow_pb2.CommitResponse:
            escrow_request = request_from_proto(request)  # validated before anything is stored
            if self._limiter is not None:
                self._limiter.take(client_identity(context))
            receipt = self._store.commit(escrow_request)
            # The log event names the new record (the receipt is ours: no check needed).
            annotate(record=_receipt_index(receipt))
            if self._cosigning is not None:
                self._cosigning.publish_soon()  # the log grew: witnesses cosign it
            return escrow_pb2.CommitResponse(receipt=receipt)

        try:
            response = _serve(context, run)
        except BaseException:
            self._metrics.escrow_commit("refused")
            raise
        self._metrics.escrow_commit("committed")
        return response

    def GetRecord(  # noqa: N802
        self, request: escrow_pb2.GetRecordRequest, context: Any
    ) -> escrow_pb2.GetRecordResponse:
        """Return a public log entry (no rho) with its inclusion proof and a checkpoint."""

        def run() -> escrow_pb2.GetRecordResponse:
            annotate(record=request.index)
            entry = self._store.entry(request.index).entry  # never its rho
            latest = self._store.latest_checkpoint()
            size = latest.checkpoint.size
            proof = self._store.inclusion_proof(entry.index, size)
            return escrow_pb2.GetRecordResponse(
                entry=entry.encode(),
                log_size=size,
                inclusion_proof=proof,
                checkpoint=latest.envelope,
            )

        return _serve(context, run)

    def GetCheckpoint(  # noqa: N802
        self, request: escrow_pb2.GetCheckpointRequest, context: Any
    ) -> escrow_pb2.GetCheckpointResponse:
        """Return the signed checkpoint of the current log (§9.4) and its note (§9.5.4)."""

        def run() -> escrow_pb2.GetCheckpointResponse:
            latest = self._store.latest_checkpoint()
            note = self._store.checkpoint_note(latest)
            if note is not None and self._cosigning is not None:
                note = self._cosigning.cosigned_note(latest, note)
            return escrow_pb2.GetCheckpointResponse(
                checkpoint=latest.envelope, checkpoint_note=note or b""
            )

        return _serve(context, run)

    def GetInclusionProof(  # noqa: N802
        self, request: escrow_pb2.GetInclusionProofRequest, context: Any
    ) -> escrow_pb2.GetInclusionProofResponse:
        """Return the inclusion proof of entry ``index`` in the log of ``size`` entries."""
        annotate(record=request.index)
        return _serve(
            context,
            lambda: escrow_pb2.GetInclusionProofResponse(
                proof=self._store.inclusion_proof(request.index, request.size)
            ),
        )

    def GetConsistencyProof(  # noqa: N802
        self, request: escrow_pb2.GetConsistencyProofRequest, context: Any
    ) -> escrow_pb2.GetConsistencyProofResponse:
        """Return the consistency proof between two log sizes."""
        return _serve(
            context,
            lambda: escrow_pb2.GetConsistencyProofResponse(
                proof=self._store.consistency_proof(request.old_size, request.new_size)
            ),
        )

    def GetEntries(  # noqa: N802
        self, request: escrow_pb2.GetEntriesRequest, context: Any
    ) -> escrow_pb2.GetEntriesResponse:
        """Return log entries from ``start``: at most MAX_ENTRIES_PER_CALL and MAX_ENTRIES_BYTES.

        A ``count`` of 0 is ``INVALID_ARGUMENT``; a larger one than the cap is served
        in part, as is a range past the log's end; a ``start`` the log has not reached
        is ``NOT_FOUND``.
        """

        def run() -> escrow_pb2.GetEntriesResponse:
            if request.count == 0:
                raise InputError("GetEntries asks for at least one entry")
            size = self._store.size()
            leaves = self._store.leaves(request.start, min(request.count, MAX_ENTRIES_PER_CALL))
            sent: list[bytes] = []
            total = 0
            for leaf in leaves:
                total += len(leaf)
                if total > MAX_ENTRIES_BYTES:
                    break
                sent.append(leaf)
            return escrow_pb2.GetEntriesResponse(
                entries=sent, log_size=max(size, request.start + len(sent))
            )

        return _serve(context, run)


def _receipt_index(receipt: bytes) -> int | None:
    """Return the log index a receipt this arbiter just signed names, for its log event.

    A light read (JSON, base64, msgpack: some 15 µs, where the strict parse of a
    receipt costs 40 times that): the receipt is ours, and the index only labels a log
    line. None where it cannot be read, which never happens for a receipt of the store.
    """
    try:
        payload = base64.b64decode(json.loads(receipt)["payload"], validate=True)
        index = msgpack.unpackb(payload, raw=False)["entry"]["index"]
    except Exception:  # a label, never worth failing a durable commit over
        return None
    return index if isinstance(index, int) else None


def _serve(context: Any, fn: Callable[[], T]) -> T:
    """Run ``fn`` for one call, turning its failures into statuses with a human message.

    A protocol error gets the status of its family (:func:`twinaudit.wire.transport.status_for`;
    an index or size the log has not reached is NOT_FOUND); anything else is logged here
    and answered INTERNAL without details.
    """
    try:
        return fn()
    except TwinauditError as exc:
        abort_with_error(context, exc)
    except Exception:
        _log.exception("escrow call failed")
        context.abort(grpc.StatusCode.INTERNAL, "internal error in the escrow service")
        raise  # unreachable: abort raises


def add_escrow_service(
    server: grpc.Server,
    store: EscrowLog,
    *,
    rate_limit: RateLimit | None = DEFAULT_RATE_LIMIT,
    metrics: Metrics = NO_METRICS,
    cosigning: CheckpointCosigning | None = None,
) -> EscrowService:
    """Register an :class:`EscrowService` for ``store`` on ``server`` and return it."""
    service = EscrowService(store, rate_limit=rate_limit, metrics=metrics, cosigning=cosigning)
    escrow_pb2_grpc.add_EscrowServicer_to_server(service, server)  # type: ignore[no-untyped-call]
    return service


def serve_escrow(
    store: EscrowLog,
    listen: str,
    *,
    tls: TlsFiles | None = None,
    max_workers: int = 8,
    rate_limit: RateLimit | None = DEFAULT_RATE_LIMIT,
) -> tuple[grpc.Server, int]:
    """Start a gRPC server for ``store`` on ``listen``; return it and its bound port.

    The server also runs the health service, reporting ``SERVING`` for ``""`` and
    :data:`SERVICE_NAME`. With ``tls`` it serves TLS, and mTLS when ``tls.ca`` is set.
    """

    def register(server: grpc.Server) -> None:
        add_escrow_service(server, store, rate_limit=rate_limit)

    return make_server(
        listen,
        register,
        tls=tls,
        max_workers=max_workers,
        service_names=(SERVICE_NAME,),
    )
