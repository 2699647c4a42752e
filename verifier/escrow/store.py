"""The arbiter's escrow store: the interface every backend implements (spec draft §9, §10).

An :class:`EscrowStore` holds the arbiter's append-only escrow log (one entry per
escrowed root, §9.2), the secret ``rho`` of each entry, the signed checkpoints it has
issued (§9.4), and the state of the claims filed against its records (§10). The
arbiter's services use only this interface; :mod:`verifier.escrow.sqlite_store` and
:mod:`verifier.escrow.postgres_store` implement it on one shared SQL core.

Guarantees every implementation gives:

- :meth:`EscrowStore.commit` makes the new entry durable before it signs and returns
  the receipt (§9.3); a receipt that was returned survives a crash.
- Log indices are assigned without gaps or duplicates, even with several threads or
  several arbiter processes on one database.
- A bad argument raises a typed error from :mod:`protocol.errors` and changes nothing.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from dataclasses import dataclass
from types import TracebackType
from typing import Final

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from protocol.errors import (
    InputError,
    LimitExceededError,
    NotFoundError,
    ParameterError,
    StateError,
)
from protocol.escrow_messages import Checkpoint, EscrowRequest, LogEntry

#: Status a claim gets from :meth:`EscrowStore.finish_claim`; no other call may set it.
FINISHED_STATUS: Final = "finished"
#: Longest claim id, in bytes (ids are ASCII).
MAX_CLAIM_ID_BYTES: Final = 128
#: Longest claim status, in bytes (statuses are ASCII).
MAX_CLAIM_STATUS_BYTES: Final = 64
#: Largest saved claim state (a test state and the claim's progress).
MAX_CLAIM_STATE_BYTES: Final = 16 * 1024 * 1024
#: Largest stored verdict (a signed envelope, spec §11).
MAX_VERDICT_BYTES: Final = 32 * 1024 * 1024
#: Largest stored transcript (spec §12).
MAX_TRANSCRIPT_BYTES: Final = 256 * 1024 * 1024

_CLAIM_ID_RE: Final = re.compile(r"\A[A-Za-z0-9][A-Za-z0-9._-]*\Z")
_STATUS_RE: Final = re.compile(r"\A[a-z][a-z0-9-]*\Z")


class UnknownRecordError(NotFoundError):
    """A log index or log size the store does not (yet) have; gRPC ``NOT_FOUND``."""


class UnknownClaimError(NotFoundError):
    """A claim id the store has never saved; gRPC ``NOT_FOUND``."""


class RootAlreadyEscrowedError(StateError):
    """The request's root is already in the log (spec §9.1); gRPC ``FAILED_PRECONDITION``.

    ``index`` is the record that holds it. Its receipt and ``rho`` are never sent
    again: the log is public, so anyone could send a root copied from it.
    """

    def __init__(self, root: bytes, index: int) -> None:
        """Name the root and the record that already holds it."""
        super().__init__(
            f"root {root.hex()} is already escrowed as record {index}; a root is escrowed "
            "once (spec 9.1): commit to the pairs with fresh salts to escrow them again"
        )
        self.root = root
        self.index = index


@dataclass(frozen=True)
class ClaimSummary:
    """One claim filed against a record, as :meth:`EscrowStore.claims_for_record` lists it."""

    claim_id: str
    record_index: int
    status: str
    finished: bool


def check_claim_id(claim_id: object) -> str:
    """Return ``claim_id`` if it is 1..MAX_CLAIM_ID_BYTES of ``[A-Za-z0-9._-]``.

    Anything else (empty, longer, other characters) is not a claim id at all: an
    :class:`~protocol.errors.InputError` (gRPC ``INVALID_ARGUMENT``), the length
    checked first so that a long string is never scanned.
    """
    if not isinstance(claim_id, str) or not 1 <= len(claim_id) <= MAX_CLAIM_ID_BYTES:
        raise InputError(f"a claim id is 1 to {MAX_CLAIM_ID_BYTES} characters")
    if not _CLAIM_ID_RE.match(claim_id):
        raise InputError("claim id must be ASCII letters, digits, '.', '_' or '-'")
    return claim_id


def check_status(status: object) -> str:
    """Return ``status`` if it is a lowercase word (``[a-z][a-z0-9-]*``) other than finished."""
    if not isinstance(status, str) or not _STATUS_RE.match(status):
        raise InputError("claim status must match [a-z][a-z0-9-]*")
    if len(status) > MAX_CLAIM_STATUS_BYTES:
        raise LimitExceededError("claim status length", len(status), MAX_CLAIM_STATUS_BYTES)
    if status == FINISHED_STATUS:
        raise ParameterError(f"status {FINISHED_STATUS!r} is set by finish_claim only")
    return status


def check_blob(value: object, what: str, limit: int) -> bytes:
    """Return ``value`` as bytes if it is a byte string of at most ``limit`` bytes."""
    if not isinstance(value, bytes | bytearray | memoryview):
        raise InputError(f"{what} must be bytes, got {type(value).__name__}")
    data = bytes(value)
    if len(data) > limit:
        raise LimitExceededError(f"{what} size", len(data), limit)
    return data


def check_index(value: object, what: str) -> int:
    """Return ``value`` if it is a non-negative int (not a bool)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise InputError(f"{what} must be an integer, got {type(value).__name__}")
    if value < 0:
        raise InputError(f"{what} must not be negative, got {value}")
    return value


class EscrowStore(ABC):
    """The arbiter's durable escrow log, record secrets, checkpoints and claims.

    Implementations are thread-safe. Use as a context manager, or call :meth:`close`.
    """

    @property
    @abstractmethod
    def public_key(self) -> Ed25519PublicKey:
        """The arbiter's public key: receipts and checkpoints verify under it."""

    @abstractmethod
    def commit(self, request: EscrowRequest) -> bytes:
        """Escrow ``request`` and return its signed receipt (DSSE JSON, ``escrow-receipt``).

        Draws a fresh ``rho`` from the OS CSPRNG, reads the clock once, appends entry
        ``size()`` to the log and makes it durable, and only then signs the receipt
        (§9.3). A root already in the log is refused with
        :class:`RootAlreadyEscrowedError` and nothing is stored (§9.1): each escrow of
        a root would otherwise draw a new ``rho``, new publication bits to choose from.
        """

    @abstractmethod
    def entry(self, index: int) -> tuple[LogEntry, bytes]:
        """Return log entry ``index`` and its secret ``rho`` (for the verifier only).

        Raises :class:`UnknownRecordError` unless ``0 <= index < size()``.
        """

    @abstractmethod
    def size(self) -> int:
        """Return the number of entries in the log."""

    @abstractmethod
    def latest_checkpoint(self) -> tuple[Checkpoint, bytes]:
        """Return a signed checkpoint of the log at its current size, and its payload.

        The store signs at most one checkpoint per log size and returns that one for
        every later call at the same size.
        """

    def checkpoint(self) -> bytes:
        """Return the signed checkpoint (DSSE JSON, ``log-checkpoint``) of the current log."""
        return self.latest_checkpoint()[1]

    @abstractmethod
    def inclusion_proof(self, index: int, size: int) -> list[bytes]:
        """Return the proof that entry ``index`` is in the log of ``size`` entries (§6.2.2).

        Raises :class:`UnknownRecordError` when ``size > size()`` and
        :class:`~protocol.errors.ParameterError` unless ``0 <= index < size``.
        """

    @abstractmethod
    def consistency_proof(self, old_size: int, new_size: int) -> list[bytes]:
        """Return the proof that the log of ``old_size`` entries is a prefix of ``new_size``.

        Raises :class:`UnknownRecordError` when ``new_size > size()`` and
        :class:`~protocol.errors.ParameterError` unless ``0 <= old_size <= new_size``.
        """

    @abstractmethod
    def save_claim(
        self,
        claim_id: str,
        record_index: int,
        status: str,
        state: bytes,
        transcript_part: bytes = b"",
    ) -> None:
        """Create or update an unfinished claim on record ``record_index``.

        ``transcript_part`` (the transcript records made since the last save) is
        appended to the claim's saved transcript in the same transaction as the state,
        so state and transcript never disagree and no save rewrites what is stored
        (the total is capped at :data:`MAX_TRANSCRIPT_BYTES`).

        Raises :class:`UnknownRecordError` for a record not in the log, and
        :class:`~protocol.errors.StateError` when the claim is finished or was saved
        against another record.
        """

    @abstractmethod
    def load_claim(self, claim_id: str) -> tuple[int, str, bytes] | None:
        """Return ``(record_index, status, state)`` of a claim, or None if never saved."""

    @abstractmethod
    def load_transcript(self, claim_id: str) -> bytes | None:
        """Return the transcript saved so far for an unfinished claim, or None if never saved.

        A finished claim's transcript is returned by :meth:`get_verdict`.
        """

    @abstractmethod
    def finish_claim(self, claim_id: str, verdict: bytes, transcript: bytes) -> None:
        """Store a claim's verdict and transcript and set its status to ``finished``.

        All three change in one transaction. Raises :class:`UnknownClaimError` for a
        claim never saved and :class:`~protocol.errors.StateError` when it is
        already finished.
        """

    @abstractmethod
    def get_verdict(self, claim_id: str) -> tuple[bytes, bytes] | None:
        """Return ``(verdict, transcript)`` of a finished claim, or None."""

    @abstractmethod
    def claims_for_record(self, record_index: int) -> list[ClaimSummary]:
        """Return every claim saved against ``record_index``, oldest first."""

    @abstractmethod
    def close(self) -> None:
        """Release the store's resources; later calls raise StateError."""

    def __enter__(self) -> EscrowStore:
        """Return the store itself."""
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        """Close the store."""
        self.close()
