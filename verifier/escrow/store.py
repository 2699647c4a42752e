"""The arbiter's escrow store: the interfaces every backend implements (spec draft §9, §10).

Two interfaces, one per role, and the records they return:

- an :class:`EscrowLog` holds the arbiter's append-only escrow log (one entry per
  escrowed root, §9.2), the secret ``rho`` of each entry (:class:`StoredEntry`) and the
  signed checkpoints it has issued (§9.4, :class:`SignedCheckpoint`);
- a :class:`ClaimStore` holds the claims filed against the log's records (§10): their
  state (:class:`StoredClaim`), transcripts, verdicts (:class:`StoredVerdict`), and the
  lease that lets one verifier process at a time run each claim (:class:`ClaimLease`).

An :class:`EscrowStore` is both, on one database; the arbiter's services use only
these interfaces. :mod:`twinaudit.verifier.escrow.sqlite_store` and
:mod:`twinaudit.verifier.escrow.postgres_store` implement them on one shared SQL core
(:mod:`.sql`, :mod:`.escrow_log`, :mod:`.claim_store`).

Guarantees every implementation gives:

- :meth:`EscrowLog.commit` makes the new entry durable before it signs and returns
  the receipt (§9.3); a receipt that was returned survives a crash.
- Log indices are assigned without gaps or duplicates, even with several threads or
  several arbiter processes on one database.
- A claim's lease is held by at most one holder at a time, across every process on
  the database; a write that names a lease it no longer holds changes nothing.
- :meth:`ClaimStore.create_claim` with ``earlier`` files a claim only if the claims
  filed on its record are exactly those, as one atomic step across every process on
  the database.
- A bad argument raises a typed error from :mod:`twinaudit.protocol.errors` and changes nothing.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Final, Self

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from twinaudit.protocol.errors import InputError, LimitExceededError, ParameterError
from twinaudit.protocol.escrow_messages import Checkpoint, EscrowRequest, LogEntry

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

#: Longest lease holder name, in bytes (ASCII).
MAX_LEASE_HOLDER_BYTES: Final = 128
#: Longest a lease may run without renewal, in seconds (one day).
MAX_LEASE_SECONDS: Final = 86_400.0

_CLAIM_ID_RE: Final = re.compile(r"\A[A-Za-z0-9][A-Za-z0-9._-]*\Z")
_STATUS_RE: Final = re.compile(r"\A[a-z][a-z0-9-]*\Z")


#: Per-owner limits (spec §10.7): how many claims a record may have open at once, and
#: how many of its claims filed in the last :data:`FAILED_WINDOW_S` seconds may have
#: failed, before a new claim on it is refused (``limit-exceeded``, nothing filed).
DEFAULT_MAX_OPEN_CLAIMS: Final = 8
DEFAULT_MAX_FAILED_CLAIMS: Final = 32
FAILED_WINDOW_S: Final = 86_400.0


@dataclass(frozen=True, slots=True)
class ClaimLoad:
    """How many claims on a record are open, and how many failed lately (per-owner limits)."""

    open: int
    failed_recently: int


@dataclass(frozen=True, slots=True)
class StoredEntry:
    """One log entry and its secret ``rho``, as :meth:`EscrowLog.entry` returns them."""

    entry: LogEntry
    rho: bytes


@dataclass(frozen=True, slots=True)
class SignedCheckpoint:
    """A checkpoint of the log and its signed envelope (DSSE JSON, ``log-checkpoint``)."""

    checkpoint: Checkpoint
    envelope: bytes


@dataclass(frozen=True, slots=True)
class StoredClaim:
    """A claim's saved state, as :meth:`ClaimStore.load_claim` returns it."""

    record_index: int
    status: str
    state: bytes
    finished: bool = False


@dataclass(frozen=True, slots=True)
class StoredVerdict:
    """A finished claim's signed verdict and its transcript (§11, §12)."""

    verdict: bytes
    transcript: bytes


@dataclass(frozen=True, slots=True)
class ClaimLease:
    """The right to run one claim: who holds it, and how long each renewal lasts.

    ``holder`` names one run of a claim (one process, one stream) and is unique to it;
    the store keeps the lease until the holder releases it or ``duration_s`` seconds
    after its last renewal, measured by the database's clock (so replicas on several
    hosts need not agree on the time).
    """

    holder: str
    duration_s: float

    def __post_init__(self) -> None:
        """Check the holder's name and the duration."""
        if not isinstance(self.holder, str) or not 1 <= len(self.holder) <= MAX_LEASE_HOLDER_BYTES:
            raise InputError(f"a lease holder is 1 to {MAX_LEASE_HOLDER_BYTES} characters")
        if not self.holder.isascii() or not self.holder.isprintable():
            raise InputError("a lease holder is printable ASCII")
        duration = self.duration_s
        if isinstance(duration, bool) or not isinstance(duration, int | float):
            raise InputError("a lease duration is a number of seconds")
        if not 0 < duration <= MAX_LEASE_SECONDS:
            raise ParameterError(f"a lease lasts more than 0 and at most {MAX_LEASE_SECONDS:g} s")


@dataclass(frozen=True, slots=True)
class ClaimStartFields:
    """What a claim's claim-start entry states besides its index and time (spec §9.6).

    ``claim_map`` is the digest of the claim map (``tagged_hash("claim-map", …)``),
    ``claim_key`` the record's claim key (None on a keyless record).
    """

    claim_map: bytes
    claim_key: bytes | None = None


@dataclass(frozen=True, slots=True)
class VerdictFields:
    """What a claim's verdict entry states besides its claim (spec §9.6)."""

    verdict: bytes
    decision: str


@dataclass(frozen=True, slots=True)
class ClaimPosition:
    """Where a claim's claim-start entry is in the log, and what it was counted after.

    ``index`` is the entry's log index, ``log_root`` the log's root once it was
    appended (the log of ``index + 1`` entries), and ``earlier`` the claim-start
    entries on the same record before it: what anyone recounts from the log (§9.6).
    """

    index: int
    log_root: bytes
    earlier: int


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
    :class:`~twinaudit.protocol.errors.InputError` (gRPC ``INVALID_ARGUMENT``), the length
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


class EscrowLog(ABC):
    """The arbiter's durable escrow log, its records' secrets, and its checkpoints.

    Implementations are thread-safe.
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
    def entry(self, index: int) -> StoredEntry:
        """Return log entry ``index`` and its secret ``rho`` (for the verifier only).

        Raises :class:`UnknownRecordError` unless ``0 <= index < size()``.
        """

    @abstractmethod
    def size(self) -> int:
        """Return the number of entries in the log."""

    @abstractmethod
    def latest_checkpoint(self) -> SignedCheckpoint:
        """Return a signed checkpoint of the log at its current size.

        The store signs at most one checkpoint per log size and returns that one for
        every later call at the same size.
        """

    def checkpoint(self) -> bytes:
        """Return the signed checkpoint (DSSE JSON, ``log-checkpoint``) of the current log."""
        return self.latest_checkpoint().envelope

    def checkpoint_note(self, checkpoint: SignedCheckpoint) -> bytes | None:
        """Return ``checkpoint`` (one of this log's) as a signed checkpoint note (§9.5.4).

        None where the store's signer signs no note texts; the arbiter then serves the
        envelope alone, as before §9.5.
        """
        del checkpoint
        return None

    @abstractmethod
    def leaves(self, start: int, count: int) -> list[bytes]:
        """Return the leaf data of entries ``start`` to ``start + count`` (fewer at the end).

        Escrow entries (§9.2), claim-start and verdict entries (§9.6) alike, never a
        ``rho``. Raises :class:`UnknownRecordError` when ``start`` is not below
        ``size()`` and :class:`~twinaudit.protocol.errors.InputError` for a negative
        argument.
        """

    @abstractmethod
    def inclusion_proof(self, index: int, size: int) -> list[bytes]:
        """Return the proof that entry ``index`` is in the log of ``size`` entries (§6.2.2).

        Raises :class:`UnknownRecordError` when ``size > size()`` and
        :class:`~twinaudit.protocol.errors.ParameterError` unless ``0 <= index < size``.
        """

    @abstractmethod
    def consistency_proof(self, old_size: int, new_size: int) -> list[bytes]:
        """Return the proof that the log of ``old_size`` entries is a prefix of ``new_size``.

        Raises :class:`UnknownRecordError` when ``new_size > size()`` and
        :class:`~twinaudit.protocol.errors.ParameterError` unless ``0 <= old_size <= new_size``.
        """


class ClaimStore(ABC):
    """The claims filed against the log's records: state, transcript, verdict, lease.

    Every write may name the :class:`ClaimLease` its caller runs the claim under. A
    write that names a lease checks, in its transaction, that the lease is still the
    caller's and renews it; one that names none is refused while another holder's
    lease runs. Either way a refused write raises :class:`ClaimBusyError` and changes
    nothing. Implementations are thread-safe.
    """

    @abstractmethod
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
        """Create or update an unfinished claim on record ``record_index``.

        ``transcript_part`` (the transcript records made since the last save) is
        appended to the claim's saved transcript in the same transaction as the state,
        so state and transcript never disagree and no save rewrites what is stored
        (the total is capped at :data:`MAX_TRANSCRIPT_BYTES`). A new claim saved with a
        ``lease`` is created held by it; an existing one must be held by it.

        Raises :class:`UnknownRecordError` for a record not in the log,
        :class:`~twinaudit.protocol.errors.StateError` when the claim is finished or was saved
        against another record, and :class:`ClaimBusyError` when another holder has it.
        """

    @abstractmethod
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
        """Create a new claim on record ``record_index``, held by ``lease``.

        With ``log``, the claim's claim-start entry (spec §9.6) is appended to the log
        in the same transaction (O(log n) rows), so a claim is filed if and only if
        it is logged; :meth:`claim_position` then says where.

        As :meth:`save_claim` does for a claim it creates, but a claim id already saved
        is refused. The claim's filing is recorded with it: the time (the database's
        clock) and ``authorization``, the signed claim request that filed it (§10.7;
        empty on a record that binds no claim key). With ``earlier`` (claim ids, oldest first, as
        :meth:`claims_for_record` lists them) the claim is created only if the claims
        filed on the record are exactly those, checked in the transaction that files
        it, so what the caller computed from them (the pairs a claim on fresh pairs
        excludes, spec §10.2 step 2) covers every claim filed before the new one, by
        any process on the database, and none of those is ``open`` (a failed claim run
        again meanwhile, :meth:`restart_claim`, would open pairs after the exclusions
        were fixed).

        Raises :class:`ClaimsChangedError` when another claim was filed on the record
        meanwhile or one of ``earlier`` is open again, :class:`UnknownRecordError` for a
        record not in the log and :class:`~twinaudit.protocol.errors.StateError` when the claim id
        is taken; each changes nothing.
        """

    @abstractmethod
    def restart_claim(self, claim_id: str, *, lease: ClaimLease) -> None:
        """Set a failed claim held by ``lease`` open again, to run it again (spec §10.7).

        Only while the claim's status is ``failed`` and no claim was filed on its record
        after it, checked in the transaction that changes the status, so no claim can be
        filed in between. The caller has checked, with the claim held, that it computed
        no outcome. Raises :class:`~twinaudit.protocol.errors.StateError` (``invalid-state``) when
        the claim is not failed or a later claim exists, :class:`UnknownClaimError` for
        a claim never saved and :class:`ClaimBusyError` when ``lease`` does not hold it;
        each changes nothing.
        """

    @abstractmethod
    def load_claim(self, claim_id: str) -> StoredClaim | None:
        """Return a claim's record index, status and state, or None if never saved."""

    @abstractmethod
    def load_transcript(self, claim_id: str) -> bytes | None:
        """Return the transcript saved so far for an unfinished claim, or None if never saved.

        A finished claim's transcript is returned by :meth:`get_verdict`.
        """

    @abstractmethod
    def load_transcript_start(self, claim_id: str) -> bytes | None:
        """Return the first transcript part saved for an unfinished claim, or None.

        The part saved with the claim's first state: its header record (spec §12),
        which names the claim map, read without the rest of the transcript.
        """

    @abstractmethod
    def acquire_claim(self, claim_id: str, lease: ClaimLease) -> StoredClaim | None:
        """Take ``lease`` on an unfinished claim and return the claim; None if never saved.

        The lease is taken when no one holds the claim, when its last holder's lease
        has expired (a holder that died), or when ``lease`` holds it already (a
        renewal). A finished claim is returned without a lease. Raises
        :class:`ClaimBusyError` while another holder's lease runs.
        """

    @abstractmethod
    def renew_lease(self, claim_id: str, lease: ClaimLease) -> bool:
        """Extend ``lease`` by its duration from now; False if it is no longer held."""

    @abstractmethod
    def release_claim(self, claim_id: str, lease: ClaimLease) -> None:
        """Give up ``lease`` (nothing happens when it is no longer held)."""

    @abstractmethod
    def finish_claim(
        self,
        claim_id: str,
        verdict: bytes,
        transcript: bytes,
        *,
        lease: ClaimLease | None = None,
        log: VerdictFields | None = None,
    ) -> None:
        """Store a claim's verdict and transcript and set its status to ``finished``.

        With ``log``, and where the claim has a claim-start entry, its verdict entry
        (spec §9.6) is appended to the log in the same transaction.

        All three change in one transaction, and the claim's lease ends with it.
        Raises :class:`UnknownClaimError` for a claim never saved,
        :class:`~twinaudit.protocol.errors.StateError` when it is already finished, and
        :class:`ClaimBusyError` when another holder has it.
        """

    @abstractmethod
    def get_verdict(self, claim_id: str) -> StoredVerdict | None:
        """Return the verdict and transcript of a finished claim, or None."""

    @abstractmethod
    def claims_for_record(self, record_index: int) -> list[ClaimSummary]:
        """Return every claim saved against ``record_index``, oldest first."""

    @abstractmethod
    def use_claim_nonce(self, record_index: int, nonce: bytes) -> None:
        """Record a claim request's nonce as used on ``record_index`` (spec §10.7).

        Raises :class:`ReplayedRequestError`, changing nothing, when it was used before
        (by any process on the database).
        """

    @abstractmethod
    def claim_authorization(self, claim_id: str) -> bytes | None:
        """Return the signed claim request that filed a claim (b"" if none was signed).

        None when the claim has no filing row (never saved, or filed before schema 4).
        """

    @abstractmethod
    def claim_position(self, claim_id: str) -> ClaimPosition | None:
        """Return where a claim's claim-start entry is in the log (spec §9.6).

        None for a claim filed without one (before schema 6, or without ``log``).
        """

    @abstractmethod
    def claim_load(self, record_index: int, window_s: float) -> ClaimLoad:
        """Count a record's open claims, and its failed ones filed in the last ``window_s``.

        The window is measured by the database's clock, in seconds.
        """


class EscrowStore(EscrowLog, ClaimStore):
    """An escrow log and the claims against its records, on one database.

    Use as a context manager, or call :meth:`close`.
    """

    @abstractmethod
    def close(self) -> None:
        """Release the store's resources; later calls raise StateError."""

    def __enter__(self) -> Self:
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
