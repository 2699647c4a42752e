"""An :class:`~.store.EscrowStore` that times every operation of another one.

The arbiter's server wraps its store in a :class:`MeteredStore` when metrics are on,
so the time of each operation (commit, claim saves, verdict reads, …) reaches the
``twinaudit_store_operation_seconds`` histogram, labelled by the operation's name.
The wrapper owns nothing: closing it closes the store it wraps.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import TypeVar

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from twinaudit.protocol.escrow_messages import EscrowRequest
from twinaudit.wire.observe import Metrics

from .store import (
    ClaimLease,
    ClaimLoad,
    ClaimPosition,
    ClaimStartFields,
    ClaimSummary,
    EscrowStore,
    SignedCheckpoint,
    StoredClaim,
    StoredEntry,
    StoredVerdict,
    VerdictFields,
)

T = TypeVar("T")


class MeteredStore(EscrowStore):
    """Delegate every operation to ``store``; report each one's time to ``metrics``."""

    def __init__(self, store: EscrowStore, metrics: Metrics) -> None:
        """Time the operations of ``store``."""
        self.inner = store
        self._metrics = metrics

    def _timed(self, operation: str, call: Callable[[], T]) -> T:
        start = time.monotonic()
        try:
            return call()
        finally:
            self._metrics.store_operation(operation, time.monotonic() - start)

    @property
    def public_key(self) -> Ed25519PublicKey:
        """The arbiter's public key."""
        return self.inner.public_key

    def commit(self, request: EscrowRequest) -> bytes:
        """Escrow ``request`` (timed as ``commit``)."""
        return self._timed("commit", lambda: self.inner.commit(request))

    def entry(self, index: int) -> StoredEntry:
        """Return entry ``index`` and its rho (timed as ``entry``)."""
        return self._timed("entry", lambda: self.inner.entry(index))

    def size(self) -> int:
        """Return the log size (timed as ``size``)."""
        return self._timed("size", self.inner.size)

    def latest_checkpoint(self) -> SignedCheckpoint:
        """Return the current signed checkpoint (timed as ``checkpoint``)."""
        return self._timed("checkpoint", self.inner.latest_checkpoint)

    def checkpoint(self) -> bytes:
        """Return the current signed checkpoint's envelope (timed as ``checkpoint``)."""
        return self._timed("checkpoint", self.inner.checkpoint)

    def checkpoint_note(self, checkpoint: SignedCheckpoint) -> bytes | None:
        """Return the checkpoint's signed note (timed as ``checkpoint``)."""
        return self._timed("checkpoint", lambda: self.inner.checkpoint_note(checkpoint))

    def leaves(self, start: int, count: int) -> list[bytes]:
        """Return log entries' leaf data (timed as ``leaves``)."""
        return self._timed("leaves", lambda: self.inner.leaves(start, count))

    def inclusion_proof(self, index: int, size: int) -> list[bytes]:
        """Return an inclusion proof (timed as ``inclusion_proof``)."""
        return self._timed("inclusion_proof", lambda: self.inner.inclusion_proof(index, size))

    def consistency_proof(self, old_size: int, new_size: int) -> list[bytes]:
        """Return a consistency proof (timed as ``consistency_proof``)."""
        return self._timed(
            "consistency_proof", lambda: self.inner.consistency_proof(old_size, new_size)
        )

    def save_claim(
        self,
        claim_id: str,
        record_index: int,
        status: str,
        state: bytes,
        transcript_part: bytes = b"",
        *,
        lease: ClaimLease | None = None,
    ) -> None:
        """Save an unfinished claim (timed as ``save_claim``)."""
        self._timed(
            "save_claim",
            lambda: self.inner.save_claim(
                claim_id, record_index, status, state, transcript_part, lease=lease
            ),
        )

    def create_claim(
        self,
        claim_id: str,
        record_index: int,
        status: str,
        state: bytes,
        transcript_part: bytes = b"",
        *,
        lease: ClaimLease,
        earlier: Sequence[str] | None = None,
        authorization: bytes = b"",
        log: ClaimStartFields | None = None,
    ) -> None:
        """File a new claim (timed as ``create_claim``)."""
        self._timed(
            "create_claim",
            lambda: self.inner.create_claim(
                claim_id,
                record_index,
                status,
                state,
                transcript_part,
                lease=lease,
                earlier=earlier,
                authorization=authorization,
                log=log,
            ),
        )

    def restart_claim(self, claim_id: str, *, lease: ClaimLease) -> None:
        """Set a failed claim open again (timed as ``save_claim``)."""
        self._timed("save_claim", lambda: self.inner.restart_claim(claim_id, lease=lease))

    def load_claim(self, claim_id: str) -> StoredClaim | None:
        """Load a claim (timed as ``load_claim``)."""
        return self._timed("load_claim", lambda: self.inner.load_claim(claim_id))

    def load_transcript(self, claim_id: str) -> bytes | None:
        """Load an unfinished claim's transcript (timed as ``load_transcript``)."""
        return self._timed("load_transcript", lambda: self.inner.load_transcript(claim_id))

    def load_transcript_start(self, claim_id: str) -> bytes | None:
        """Load an unfinished claim's first transcript part (timed as ``load_transcript``)."""
        return self._timed("load_transcript", lambda: self.inner.load_transcript_start(claim_id))

    def acquire_claim(self, claim_id: str, lease: ClaimLease) -> StoredClaim | None:
        """Take a claim's lease (timed as ``acquire_claim``)."""
        return self._timed("acquire_claim", lambda: self.inner.acquire_claim(claim_id, lease))

    def renew_lease(self, claim_id: str, lease: ClaimLease) -> bool:
        """Renew a claim's lease (timed as ``renew_lease``)."""
        return self._timed("renew_lease", lambda: self.inner.renew_lease(claim_id, lease))

    def release_claim(self, claim_id: str, lease: ClaimLease) -> None:
        """Give up a claim's lease (timed as ``release_claim``)."""
        self._timed("release_claim", lambda: self.inner.release_claim(claim_id, lease))

    def finish_claim(
        self,
        claim_id: str,
        verdict: bytes,
        transcript: bytes,
        *,
        lease: ClaimLease | None = None,
        log: VerdictFields | None = None,
    ) -> None:
        """Store a verdict and finish its claim (timed as ``finish_claim``)."""
        self._timed(
            "finish_claim",
            lambda: self.inner.finish_claim(claim_id, verdict, transcript, lease=lease, log=log),
        )

    def claim_position(self, claim_id: str) -> ClaimPosition | None:
        """Return where a claim's claim-start entry is (timed as ``load_claim``)."""
        return self._timed("load_claim", lambda: self.inner.claim_position(claim_id))

    def get_verdict(self, claim_id: str) -> StoredVerdict | None:
        """Return a finished claim's verdict (timed as ``get_verdict``)."""
        return self._timed("get_verdict", lambda: self.inner.get_verdict(claim_id))

    def claims_for_record(self, record_index: int) -> list[ClaimSummary]:
        """List a record's claims (timed as ``claims_for_record``)."""
        return self._timed("claims_for_record", lambda: self.inner.claims_for_record(record_index))

    def use_claim_nonce(self, record_index: int, nonce: bytes) -> None:
        """Record a claim request nonce (timed as ``use_claim_nonce``)."""
        self._timed("use_claim_nonce", lambda: self.inner.use_claim_nonce(record_index, nonce))

    def claim_authorization(self, claim_id: str) -> bytes | None:
        """Return the request that filed a claim (timed as ``claim_authorization``)."""
        return self._timed("claim_authorization", lambda: self.inner.claim_authorization(claim_id))

    def claim_load(self, record_index: int, window_s: float) -> ClaimLoad:
        """Count a record's open and recently failed claims (timed as ``claim_load``)."""
        return self._timed("claim_load", lambda: self.inner.claim_load(record_index, window_s))

    def close(self) -> None:
        """Close the wrapped store."""
        self.inner.close()
