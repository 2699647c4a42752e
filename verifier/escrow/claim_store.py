"""The claim store on SQL (spec §10.2 step 8, §11, §12): state, transcript, verdict, lease.

:class:`SqlClaimStore` runs on the :class:`~.sql.SqlDatabase` of an escrow log (a
claim names one of the log's records); the tables are described in :mod:`.sql`.

**Writes.** Every write transaction locks the log's head row first, as the log's
appends do, so the writes of every process on the database are serialised: a claim
is created once, its transcript parts are numbered once, and a lease is checked and
changed by one writer at a time.

**Claim starts.** :meth:`SqlClaimStore.create_claim` can file a claim only if the
record's claims are still those its caller read: the check and the insert are one
write transaction, serialised with every other, so a claim on fresh pairs (spec §10.2
step 2) never misses a claim that another replica filed while it computed what to
exclude.

**Leases.** Several verifier processes (replicas) may share one database; a claim is
run by one of them at a time. The one that runs it holds its lease, a row of
``escrow_claim_leases`` naming the holder and the time it expires by the database's
clock (so the replicas' clocks need not agree). The holder renews it while it works
and releases it when it stops; a holder that dies stops renewing, and once the lease
has expired another process may take the claim over and resume it from its last
save. A write that names a lease checks in its transaction that the lease is still
the caller's, so a process that lost its claim (it stalled past the lease and another
took over) can store nothing more for it.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

from twinaudit.protocol.errors import (
    ClaimBusyError,
    ClaimsChangedError,
    InputError,
    LimitExceededError,
    ReplayedRequestError,
    StateError,
    UnknownClaimError,
    UnknownRecordError,
)
from twinaudit.protocol.escrow_messages import format_time
from twinaudit.protocol.log_entries import ClaimStartEntry, VerdictEntry, claim_digest

from .cursor import Cursor
from .log_tables import append_leaf
from .sql import SqlDatabase
from .store import (
    FINISHED_STATUS,
    MAX_CLAIM_STATE_BYTES,
    MAX_TRANSCRIPT_BYTES,
    MAX_VERDICT_BYTES,
    ClaimLease,
    ClaimLoad,
    ClaimPosition,
    ClaimStartFields,
    ClaimStore,
    ClaimSummary,
    StoredClaim,
    StoredVerdict,
    VerdictFields,
    check_blob,
    check_claim_id,
    check_index,
    check_status,
)

#: Largest stored claim request envelope (the protocol caps one at 8 KiB).
MAX_AUTHORIZATION_BYTES = 16 * 1024
#: Length of a claim request nonce.
NONCE_BYTES = 32


class SqlClaimStore(ClaimStore):
    """A :class:`~.store.ClaimStore` in a SQL database (see the module's notes)."""

    def __init__(self, db: SqlDatabase) -> None:
        """Store claims in ``db`` (open, its schema made)."""
        self._db = db

    # --- Leases --------------------------------------------------------------------------

    def _check_lease(self, cur: Cursor, claim_id: str, lease: ClaimLease | None) -> None:
        """Refuse a write to a claim that another holder runs; renew ``lease`` if it is ours.

        With ``lease`` the claim must be held by it (expired or not: no one took it
        over). Without, the claim must not be held under a lease that still runs.
        """
        now = self._db.now(cur)
        cur.execute(
            "SELECT holder, expires FROM escrow_claim_leases WHERE claim_id = ?", (claim_id,)
        )
        row = cur.fetchone()
        if lease is None:
            if row is not None and float(row[1]) > now:
                raise _busy(claim_id, float(row[1]) - now)
            return
        if row is None or str(row[0]) != lease.holder:
            raise ClaimBusyError(
                f"claim {claim_id} is no longer held by this verifier process: its lease"
                " lapsed and another process took the claim over; this run stops"
            )
        self._put_lease(cur, claim_id, lease, now)

    @staticmethod
    def _put_lease(cur: Cursor, claim_id: str, lease: ClaimLease, now: float) -> None:
        cur.execute(
            "INSERT INTO escrow_claim_leases (claim_id, holder, expires) VALUES (?, ?, ?)"
            " ON CONFLICT (claim_id) DO UPDATE SET holder = excluded.holder,"
            " expires = excluded.expires",
            (claim_id, lease.holder, now + float(lease.duration_s)),
        )

    def acquire_claim(self, claim_id: str, lease: ClaimLease) -> StoredClaim | None:
        """Take ``lease`` on an unfinished claim and return it (see :class:`ClaimStore`)."""
        claim_id = check_claim_id(claim_id)
        _check_lease_type(lease)
        with self._db.lock, self._db.transaction(write=True) as cur:
            self._db.head(cur, lock=True)  # serialise with every other write
            claim = self._select_claim(cur, claim_id)
            if claim is None or claim.finished:
                return claim
            now = self._db.now(cur)
            cur.execute(
                "SELECT holder, expires FROM escrow_claim_leases WHERE claim_id = ?", (claim_id,)
            )
            row = cur.fetchone()
            if row is not None and str(row[0]) != lease.holder and float(row[1]) > now:
                raise _busy(claim_id, float(row[1]) - now)
            self._put_lease(cur, claim_id, lease, now)
            return claim

    def renew_lease(self, claim_id: str, lease: ClaimLease) -> bool:
        """Extend ``lease`` by its duration from now; False if it is no longer held."""
        claim_id = check_claim_id(claim_id)
        _check_lease_type(lease)
        with self._db.lock, self._db.transaction(write=True) as cur:
            self._db.head(cur, lock=True)
            cur.execute("SELECT holder FROM escrow_claim_leases WHERE claim_id = ?", (claim_id,))
            row = cur.fetchone()
            if row is None or str(row[0]) != lease.holder:
                return False
            self._put_lease(cur, claim_id, lease, self._db.now(cur))
            return True

    def release_claim(self, claim_id: str, lease: ClaimLease) -> None:
        """Give up ``lease`` (nothing happens when it is no longer held)."""
        claim_id = check_claim_id(claim_id)
        _check_lease_type(lease)
        with self._db.lock, self._db.transaction(write=True) as cur:
            cur.execute(
                "DELETE FROM escrow_claim_leases WHERE claim_id = ? AND holder = ?",
                (claim_id, lease.holder),
            )

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
        claim_id, record_index, status, state, part = _checked_claim(
            claim_id, record_index, status, state, transcript_part
        )
        if lease is not None:
            _check_lease_type(lease)
        with self._db.lock, self._db.transaction(write=True) as cur:
            size, _ = self._db.head(cur, lock=True)
            if record_index >= size:
                raise UnknownRecordError(f"the log has no record {record_index}")
            cur.execute(
                "SELECT record_index, finished FROM escrow_claims WHERE claim_id = ?",
                (claim_id,),
            )
            row = cur.fetchone()
            if row is None:
                self._insert_claim(
                    cur, claim_id, record_index, status=status, state=state, lease=lease
                )
            else:
                if int(row[1]):
                    raise StateError(f"claim {claim_id} is finished")
                if int(row[0]) != record_index:
                    raise StateError(f"claim {claim_id} is against record {row[0]}")
                self._check_lease(cur, claim_id, lease)
                cur.execute(
                    "UPDATE escrow_claims SET status = ?, state = ? WHERE claim_id = ?",
                    (status, state, claim_id),
                )
            if part:
                self._append_part(cur, claim_id, part)

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
        """File a new claim held by ``lease``; with ``earlier``, only after exactly those.

        With ``log``, its claim-start entry is appended to the log in this transaction.
        """
        claim_id, record_index, status, state, part = _checked_claim(
            claim_id, record_index, status, state, transcript_part
        )
        authorization = check_blob(authorization, "claim authorization", MAX_AUTHORIZATION_BYTES)
        _check_lease_type(lease)
        if isinstance(earlier, str):
            raise InputError("earlier claims are a sequence of claim ids, not one string")
        expected = None if earlier is None else [check_claim_id(c) for c in earlier]
        with self._db.lock, self._db.transaction(write=True) as cur:
            # The head row's lock serialises this with every other write on the
            # database: no claim can be filed between the check below and the insert.
            size, _ = self._db.head(cur, lock=True)
            if record_index >= size:
                raise UnknownRecordError(f"the log has no record {record_index}")
            cur.execute("SELECT 1 FROM escrow_claims WHERE claim_id = ?", (claim_id,))
            if cur.fetchone() is not None:
                raise StateError(f"claim {claim_id} already exists")
            if expected is not None:
                filed = self._filed(cur, record_index)
                if [summary.claim_id for summary in filed] != expected:
                    raise ClaimsChangedError(
                        f"another claim was filed on record {record_index} while this one"
                        f" started ({len(filed)} filed, not {len(expected)}); start it again"
                    )
                if any(summary.status == "open" for summary in filed):
                    raise ClaimsChangedError(
                        f"an earlier claim on record {record_index} was run again while this"
                        " one started; start it again"
                    )
            self._insert_claim(cur, claim_id, record_index, status=status, state=state, lease=lease)
            cur.execute(
                "INSERT INTO escrow_claim_filings (claim_id, record_index, filed_at, request)"
                " VALUES (?, ?, ?, ?)",
                (claim_id, record_index, self._db.now(cur), authorization),
            )
            if log is not None:
                self._log_claim_start(cur, claim_id, record_index, log)
            if part:
                self._append_part(cur, claim_id, part)

    def _log_time(self, cur: Cursor) -> str:
        """Return the database's clock as a protocol time (a log entry's ``time``)."""
        return format_time(datetime.fromtimestamp(self._db.now(cur), UTC))

    def _log_claim_start(
        self, cur: Cursor, claim_id: str, record_index: int, log: ClaimStartFields
    ) -> None:
        """Append the claim's claim-start entry (spec §9.6) and note where it is."""
        time = self._log_time(cur)

        def make(index: int) -> bytes:
            return ClaimStartEntry(
                index=index,
                record=record_index,
                claim=claim_digest(claim_id),
                claim_map=log.claim_map,
                time=time,
                claim_key=log.claim_key,
            ).encode()

        index, log_root = append_leaf(cur, make)
        cur.execute(
            "INSERT INTO escrow_claim_entries (claim_id, record_index, idx, log_root)"
            " VALUES (?, ?, ?, ?)",
            (claim_id, record_index, index, log_root),
        )

    def claim_position(self, claim_id: str) -> ClaimPosition | None:
        """Return where a claim's claim-start entry is, and the logged claims before it."""
        claim_id = check_claim_id(claim_id)
        with self._db.lock, self._db.transaction(write=False) as cur:
            return self._position(cur, claim_id)

    @staticmethod
    def _position(cur: Cursor, claim_id: str) -> ClaimPosition | None:
        cur.execute(
            "SELECT record_index, idx, log_root FROM escrow_claim_entries WHERE claim_id = ?",
            (claim_id,),
        )
        row = cur.fetchone()
        if row is None:
            return None
        record_index, index = int(row[0]), int(row[1])
        cur.execute(
            "SELECT COUNT(*) FROM escrow_claim_entries WHERE record_index = ? AND idx < ?",
            (record_index, index),
        )
        return ClaimPosition(index=index, log_root=bytes(row[2]), earlier=int(cur.fetchone()[0]))

    def restart_claim(self, claim_id: str, *, lease: ClaimLease) -> None:
        """Set a failed claim open again, if no claim followed it (see :class:`ClaimStore`)."""
        claim_id = check_claim_id(claim_id)
        _check_lease_type(lease)
        with self._db.lock, self._db.transaction(write=True) as cur:
            # The head row's lock serialises this with every filing: no claim can be
            # filed on the record between the check below and the update.
            self._db.head(cur, lock=True)
            cur.execute(
                "SELECT seq, record_index, status, finished FROM escrow_claims WHERE claim_id = ?",
                (claim_id,),
            )
            row = cur.fetchone()
            if row is None:
                raise UnknownClaimError(f"no claim {claim_id}")
            seq, record_index, status = int(row[0]), int(row[1]), str(row[2])
            if int(row[3]) or status != "failed":
                raise StateError(f"claim {claim_id} is {status}; it cannot run again")
            cur.execute(
                "SELECT COUNT(*) FROM escrow_claims WHERE record_index = ? AND seq > ?",
                (record_index, seq),
            )
            later = int(cur.fetchone()[0])
            if later:
                raise StateError(
                    f"claim {claim_id} failed and {later} claim(s) were filed on record"
                    f" {record_index} after it; it cannot run again (spec 10.7)"
                )
            self._check_lease(cur, claim_id, lease)
            cur.execute("UPDATE escrow_claims SET status = 'open' WHERE claim_id = ?", (claim_id,))

    def _insert_claim(
        self,
        cur: Cursor,
        claim_id: str,
        record_index: int,
        *,
        status: str,
        state: bytes,
        lease: ClaimLease | None,
    ) -> None:
        cur.execute(
            "INSERT INTO escrow_claims (claim_id, record_index, status, state) VALUES (?, ?, ?, ?)",
            (claim_id, record_index, status, state),
        )
        if lease is not None:  # a new claim is created held
            self._put_lease(cur, claim_id, lease, self._db.now(cur))

    def _append_part(self, cur: Cursor, claim_id: str, part: bytes) -> None:
        cur.execute(
            "SELECT COUNT(*), COALESCE(SUM(LENGTH(data)), 0) FROM escrow_claim_parts"
            " WHERE claim_id = ?",
            (claim_id,),
        )
        row = cur.fetchone()
        assert row is not None  # an aggregate always returns one row
        parts, total = int(row[0]), int(row[1])
        if total + len(part) > MAX_TRANSCRIPT_BYTES:
            raise LimitExceededError("transcript size", total + len(part), MAX_TRANSCRIPT_BYTES)
        cur.execute(
            "INSERT INTO escrow_claim_parts (claim_id, part, data) VALUES (?, ?, ?)",
            (claim_id, parts, part),
        )

    def load_transcript(self, claim_id: str) -> bytes | None:
        """Return the transcript parts saved for an unfinished claim, joined; None if unknown."""
        claim_id = check_claim_id(claim_id)
        with self._db.lock, self._db.transaction(write=False) as cur:
            cur.execute("SELECT 1 FROM escrow_claims WHERE claim_id = ?", (claim_id,))
            if cur.fetchone() is None:
                return None
            cur.execute(
                "SELECT data FROM escrow_claim_parts WHERE claim_id = ? ORDER BY part",
                (claim_id,),
            )
            rows = cur.fetchall()
        return b"".join(bytes(row[0]) for row in rows)

    def load_transcript_start(self, claim_id: str) -> bytes | None:
        """Return the first transcript part saved for an unfinished claim; None if there is none."""
        claim_id = check_claim_id(claim_id)
        with self._db.lock, self._db.transaction(write=False) as cur:
            cur.execute(
                "SELECT data FROM escrow_claim_parts WHERE claim_id = ? AND part = 0", (claim_id,)
            )
            row = cur.fetchone()
        return None if row is None else bytes(row[0])

    def load_claim(self, claim_id: str) -> StoredClaim | None:
        """Return a claim's record index, status and state, or None."""
        claim_id = check_claim_id(claim_id)
        with self._db.lock, self._db.transaction(write=False) as cur:
            return self._select_claim(cur, claim_id)

    @staticmethod
    def _select_claim(cur: Cursor, claim_id: str) -> StoredClaim | None:
        cur.execute(
            "SELECT record_index, status, state, finished FROM escrow_claims WHERE claim_id = ?",
            (claim_id,),
        )
        row = cur.fetchone()
        if row is None:
            return None
        return StoredClaim(int(row[0]), str(row[1]), bytes(row[2]), bool(int(row[3])))

    def finish_claim(
        self,
        claim_id: str,
        verdict: bytes,
        transcript: bytes,
        *,
        lease: ClaimLease | None = None,
        log: VerdictFields | None = None,
    ) -> None:
        """Store the verdict and transcript and mark the claim finished, atomically.

        With ``log``, the claim's verdict entry is appended to the log in this
        transaction, where the claim has a claim-start entry.
        """
        claim_id = check_claim_id(claim_id)
        verdict = check_blob(verdict, "verdict", MAX_VERDICT_BYTES)
        transcript = check_blob(transcript, "transcript", MAX_TRANSCRIPT_BYTES)
        if lease is not None:
            _check_lease_type(lease)
        with self._db.lock, self._db.transaction(write=True) as cur:
            self._db.head(cur, lock=True)  # serialise with every other write
            cur.execute("SELECT finished FROM escrow_claims WHERE claim_id = ?", (claim_id,))
            row = cur.fetchone()
            if row is None:
                raise UnknownClaimError(f"no claim {claim_id}")
            if int(row[0]):
                raise StateError(f"claim {claim_id} is already finished")
            self._check_lease(cur, claim_id, lease)
            cur.execute(
                "UPDATE escrow_claims SET status = ?, finished = 1, verdict = ?,"
                " transcript = ? WHERE claim_id = ?",
                (FINISHED_STATUS, verdict, transcript, claim_id),
            )
            cur.execute("DELETE FROM escrow_claim_parts WHERE claim_id = ?", (claim_id,))
            cur.execute("DELETE FROM escrow_claim_leases WHERE claim_id = ?", (claim_id,))
            position = self._position(cur, claim_id) if log is not None else None
            if log is not None and position is not None:
                self._log_verdict(cur, claim_id, position.index, log)

    def _log_verdict(
        self, cur: Cursor, claim_id: str, claim_entry: int, log: VerdictFields
    ) -> None:
        """Append a claim's verdict entry (spec §9.6) after its claim-start entry."""
        cur.execute("SELECT record_index FROM escrow_claims WHERE claim_id = ?", (claim_id,))
        record_index = int(cur.fetchone()[0])
        time = self._log_time(cur)

        def make(index: int) -> bytes:
            return VerdictEntry(
                index=index,
                record=record_index,
                claim=claim_digest(claim_id),
                claim_entry=claim_entry,
                verdict=log.verdict,
                decision=log.decision,
                time=time,
            ).encode()

        append_leaf(cur, make)

    def get_verdict(self, claim_id: str) -> StoredVerdict | None:
        """Return a finished claim's verdict and transcript, or None."""
        claim_id = check_claim_id(claim_id)
        with self._db.lock, self._db.transaction(write=False) as cur:
            cur.execute(
                "SELECT verdict, transcript FROM escrow_claims WHERE claim_id = ? AND finished = 1",
                (claim_id,),
            )
            row = cur.fetchone()
        return None if row is None else StoredVerdict(bytes(row[0]), bytes(row[1]))

    def claims_for_record(self, record_index: int) -> list[ClaimSummary]:
        """Return the claims against a record, oldest first."""
        record_index = check_index(record_index, "record index")
        with self._db.lock, self._db.transaction(write=False) as cur:
            return self._filed(cur, record_index)

    @staticmethod
    def _filed(cur: Cursor, record_index: int) -> list[ClaimSummary]:
        """Return the claims filed on ``record_index``, in the order they were filed."""
        cur.execute(
            "SELECT claim_id, status, finished FROM escrow_claims"
            " WHERE record_index = ? ORDER BY seq",
            (record_index,),
        )
        return [
            ClaimSummary(str(claim_id), record_index, str(status), bool(finished))
            for claim_id, status, finished in cur.fetchall()
        ]

    # --- Filings (spec §10.7) -------------------------------------------------------------

    def use_claim_nonce(self, record_index: int, nonce: bytes) -> None:
        """Record a claim request nonce as used; refuse one used before on the record."""
        record_index = check_index(record_index, "record index")
        nonce = check_blob(nonce, "claim request nonce", NONCE_BYTES)
        if len(nonce) != NONCE_BYTES:
            raise InputError(f"a claim request nonce is {NONCE_BYTES} bytes")
        with self._db.lock, self._db.transaction(write=True) as cur:
            self._db.head(cur, lock=True)  # serialise with every other write
            cur.execute(
                "SELECT 1 FROM escrow_claim_nonces WHERE record_index = ? AND nonce = ?",
                (record_index, nonce),
            )
            if cur.fetchone() is not None:
                raise ReplayedRequestError(
                    f"this claim request was already received for record {record_index}: a "
                    "signed request is good once (spec 10.7); sign a new one"
                )
            cur.execute(
                "INSERT INTO escrow_claim_nonces (record_index, nonce) VALUES (?, ?)",
                (record_index, nonce),
            )

    def claim_authorization(self, claim_id: str) -> bytes | None:
        """Return the signed request that filed a claim (b"" unsigned), None without a filing."""
        claim_id = check_claim_id(claim_id)
        with self._db.lock, self._db.transaction(write=False) as cur:
            cur.execute("SELECT request FROM escrow_claim_filings WHERE claim_id = ?", (claim_id,))
            row = cur.fetchone()
        return None if row is None else bytes(row[0])

    def claim_load(self, record_index: int, window_s: float) -> ClaimLoad:
        """Count the record's open claims, and its failed ones filed in the last ``window_s``."""
        record_index = check_index(record_index, "record index")
        with self._db.lock, self._db.transaction(write=False) as cur:
            since = self._db.now(cur) - float(window_s)
            cur.execute(
                "SELECT COUNT(*) FROM escrow_claims WHERE record_index = ? AND status = 'open'",
                (record_index,),
            )
            open_claims = int(cur.fetchone()[0])
            cur.execute(
                "SELECT COUNT(*) FROM escrow_claims AS c JOIN escrow_claim_filings AS f"
                " ON f.claim_id = c.claim_id"
                " WHERE c.record_index = ? AND c.status = 'failed' AND f.filed_at >= ?",
                (record_index, since),
            )
            failed = int(cur.fetchone()[0])
        return ClaimLoad(open=open_claims, failed_recently=failed)


def _busy(claim_id: str, remaining_s: float) -> ClaimBusyError:
    remaining_s = max(0.0, remaining_s)
    return ClaimBusyError(
        f"claim {claim_id} is being run by another verifier process (its lease runs"
        f" {remaining_s:.1f} s more unless renewed); resume it once that run has stopped",
        retry_after_s=remaining_s,
    )


def _check_lease_type(lease: object) -> None:
    if not isinstance(lease, ClaimLease):
        raise InputError(f"expected a ClaimLease, got {type(lease).__name__}")


def _checked_claim(
    claim_id: str, record_index: int, status: str, state: bytes, transcript_part: bytes
) -> tuple[str, int, str, bytes, bytes]:
    """Return a claim write's fields, each checked (type, form, size)."""
    return (
        check_claim_id(claim_id),
        check_index(record_index, "record index"),
        check_status(status),
        check_blob(state, "claim state", MAX_CLAIM_STATE_BYTES),
        check_blob(transcript_part, "transcript part", MAX_TRANSCRIPT_BYTES),
    )
