"""An :class:`~.store.EscrowStore` on SQL: one database, its escrow log and its claims.

:class:`SqlEscrowStore` opens a :class:`~.sql.SqlDatabase` (the backends,
:mod:`.sqlite_store` and :mod:`.postgres_store`, supply it) and serves the log
(:class:`~.escrow_log.SqlEscrowLog`) and the claims
(:class:`~.claim_store.SqlClaimStore`) from it, through one connection. The log and
the claims are also reachable on their own, as :attr:`SqlEscrowStore.log` and
:attr:`SqlEscrowStore.claims`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from twinaudit.protocol.escrow_messages import EscrowRequest
from twinaudit.protocol.signer import Signer

from ..signing import as_signer
from .claim_store import SqlClaimStore
from .escrow_log import SqlEscrowLog
from .sql import SqlDatabase
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


class SqlEscrowStore(EscrowStore):
    """The escrow log and the claim store of one SQL database, behind one object."""

    def __init__(
        self,
        db: SqlDatabase,
        signing_key: Signer | Ed25519PrivateKey,
        *,
        clock: Callable[[], datetime] | None = None,
        entropy: Callable[[int], bytes] | None = None,
    ) -> None:
        """Open ``db`` (creating or upgrading its schema), then rebuild and check the log.

        ``clock`` dates the log's entries and checkpoints; ``entropy(n)`` draws each
        record's ``rho`` (the OS CSPRNG unless a test injects a seeded source).
        """
        signer = as_signer(signing_key)  # a private key is signed with in this process
        db.open(signer.key_id)
        try:
            self.log = SqlEscrowLog(db, signer, clock=clock, entropy=entropy)
        except BaseException:
            db.close()
            raise
        self.claims = SqlClaimStore(db)
        self.db = db

    # --- The log -------------------------------------------------------------------------

    @property
    def public_key(self) -> Ed25519PublicKey:
        """The arbiter's public key."""
        return self.log.public_key

    def commit(self, request: EscrowRequest) -> bytes:
        """Escrow ``request``; return the signed receipt once its entry is durable."""
        return self.log.commit(request)

    def entry(self, index: int) -> StoredEntry:
        """Return log entry ``index`` and its secret ``rho``."""
        return self.log.entry(index)

    def size(self) -> int:
        """Return the number of entries in the log."""
        return self.log.size()

    def latest_checkpoint(self) -> SignedCheckpoint:
        """Return the signed checkpoint of the current log (one per size, reused)."""
        return self.log.latest_checkpoint()

    def checkpoint_note(self, checkpoint: SignedCheckpoint) -> bytes | None:
        """Return ``checkpoint`` as the arbiter's signed checkpoint note (spec §9.5.4)."""
        return self.log.checkpoint_note(checkpoint)

    def leaves(self, start: int, count: int) -> list[bytes]:
        """Return the leaf data of up to ``count`` entries from ``start``."""
        return self.log.leaves(start, count)

    def inclusion_proof(self, index: int, size: int) -> list[bytes]:
        """Return the inclusion proof of entry ``index`` in the log of ``size`` entries."""
        return self.log.inclusion_proof(index, size)

    def consistency_proof(self, old_size: int, new_size: int) -> list[bytes]:
        """Return the consistency proof between two sizes of the log."""
        return self.log.consistency_proof(old_size, new_size)

    # --- Claims --------------------------------------------------------------------------

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
        """Create or update an unfinished claim, appending ``transcript_part`` to its transcript."""
        self.claims.save_claim(claim_id, record_index, status, state, transcript_part, lease=lease)

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
        """File a new claim held by ``lease``; with ``earlier``, only after exactly those."""
        self.claims.create_claim(
            claim_id,
            record_index,
            status,
            state,
            transcript_part,
            lease=lease,
            earlier=earlier,
            authorization=authorization,
            log=log,
        )

    def restart_claim(self, claim_id: str, *, lease: ClaimLease) -> None:
        """Set a failed claim open again, if no claim followed it on its record."""
        self.claims.restart_claim(claim_id, lease=lease)

    def load_claim(self, claim_id: str) -> StoredClaim | None:
        """Return a claim's record index, status and state, or None."""
        return self.claims.load_claim(claim_id)

    def load_transcript(self, claim_id: str) -> bytes | None:
        """Return the transcript saved for an unfinished claim; None if unknown."""
        return self.claims.load_transcript(claim_id)

    def load_transcript_start(self, claim_id: str) -> bytes | None:
        """Return the first transcript part saved for an unfinished claim, or None."""
        return self.claims.load_transcript_start(claim_id)

    def acquire_claim(self, claim_id: str, lease: ClaimLease) -> StoredClaim | None:
        """Take ``lease`` on an unfinished claim and return it; None if never saved."""
        return self.claims.acquire_claim(claim_id, lease)

    def renew_lease(self, claim_id: str, lease: ClaimLease) -> bool:
        """Extend ``lease`` by its duration from now; False if it is no longer held."""
        return self.claims.renew_lease(claim_id, lease)

    def release_claim(self, claim_id: str, lease: ClaimLease) -> None:
        """Give up ``lease`` (nothing happens when it is no longer held)."""
        self.claims.release_claim(claim_id, lease)

    def finish_claim(
        self,
        claim_id: str,
        verdict: bytes,
        transcript: bytes,
        *,
        lease: ClaimLease | None = None,
        log: VerdictFields | None = None,
    ) -> None:
        """Store the verdict and transcript and mark the claim finished, atomically."""
        self.claims.finish_claim(claim_id, verdict, transcript, lease=lease, log=log)

    def claim_position(self, claim_id: str) -> ClaimPosition | None:
        """Return where a claim's claim-start entry is in the log, or None."""
        return self.claims.claim_position(claim_id)

    def get_verdict(self, claim_id: str) -> StoredVerdict | None:
        """Return a finished claim's verdict and transcript, or None."""
        return self.claims.get_verdict(claim_id)

    def claims_for_record(self, record_index: int) -> list[ClaimSummary]:
        """Return the claims against a record, oldest first."""
        return self.claims.claims_for_record(record_index)

    def use_claim_nonce(self, record_index: int, nonce: bytes) -> None:
        """Record a claim request nonce as used on a record; refuse a replayed one."""
        self.claims.use_claim_nonce(record_index, nonce)

    def claim_authorization(self, claim_id: str) -> bytes | None:
        """Return the signed request that filed a claim (b"" unsigned), None without a filing."""
        return self.claims.claim_authorization(claim_id)

    def claim_load(self, record_index: int, window_s: float) -> ClaimLoad:
        """Return the record's open claims and its recently failed ones."""
        return self.claims.claim_load(record_index, window_s)

    def close(self) -> None:
        """Close the connection; later calls raise StateError."""
        self.db.close()
