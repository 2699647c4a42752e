"""The arbiter's ``twinaudit.verifier.v1.Verifier`` gRPC service (spec §10, §11).

``FileClaim`` runs one :class:`~twinaudit.verifier.claim.ClaimSession` over a bidirectional
stream. The claim's state is persisted in the escrow store after every window. A claim
whose stream is interrupted (the owner disconnects, the verifier restarts) stays
open and is resumed by its id (``resume_claim_id``), on this verifier process or on
any other one that shares its database; a claim that fails a check is marked failed
and is never signed, unless it failed before any pair's outcome was computed and its
owner runs it again, as the same claim, by a resume of its id while no other claim
was filed on the record after it (spec §10.7, *Running a failed claim again*). The
verdict is signed only once the claim has stopped, over the payload of spec §11, and
stored with its transcript.

Each run of a claim holds the claim's lease in the store (:mod:`twinaudit.verifier.escrow.leases`),
so no two runs, on one process or several, ever process one claim at once: a resume
of a claim that another run holds is refused with ``ABORTED`` (``claim-busy``,
spec §10.2 step 8), and once that run stops, or its process dies and its lease
lapses, the claim can be resumed.
"""

from __future__ import annotations

import contextlib
import platform
import secrets
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

import grpc
import numpy as np
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from twinaudit.protocol import SPEC_VERSION
from twinaudit.protocol.claim.filing import ClaimRequest, Filing, verify_claim_request
from twinaudit.protocol.claim.restart import restart_refusal
from twinaudit.protocol.claim.verdict import VERDICT_KIND, ClaimEntryRef
from twinaudit.protocol.commitment import PairOpening
from twinaudit.protocol.encoding import Value, decode, encode
from twinaudit.protocol.envelope import Envelope
from twinaudit.protocol.errors import (
    ClaimBusyError,
    ClaimsChangedError,
    InputError,
    LimitExceededError,
    NotFoundError,
    SignatureError,
    StateError,
    TwinauditError,
)
from twinaudit.protocol.escrow_messages import LogEntry, format_time
from twinaudit.protocol.keys import public_key_from_raw, public_key_pem
from twinaudit.protocol.log_entries import claim_map_digest, verdict_digest
from twinaudit.protocol.oracles.base import ClassifierOracle, Oracle
from twinaudit.protocol.oracles.embedding import EncoderOracle
from twinaudit.protocol.oracles.image_text import ImageTextOracle
from twinaudit.protocol.signer import Signer
from twinaudit.protocol.stats.registry import make_test
from twinaudit.verifier.escrow.leases import DEFAULT_LEASE_S, LeaseKeeper
from twinaudit.verifier.escrow.store import (
    DEFAULT_MAX_FAILED_CLAIMS,
    DEFAULT_MAX_OPEN_CLAIMS,
    FAILED_WINDOW_S,
    ClaimLease,
    ClaimStartFields,
    EscrowStore,
    StoredClaim,
    VerdictFields,
    check_claim_id,
)
from twinaudit.verifier.oracles.dial import dial_oracle
from twinaudit.wire import transport
from twinaudit.wire.claim_start import params_from_claim_start as params_from_proto
from twinaudit.wire.claim_start import start_map
from twinaudit.wire.observe import NO_METRICS, Metrics, annotate
from twinaudit.wire.openings import ReceivedPair, collect_openings
from twinaudit.wire.verifier.v1 import verifier_pb2 as pb
from twinaudit.wire.verifier.v1 import verifier_pb2_grpc as pb_grpc

from .claim import (
    ClaimParams,
    ClaimRecord,
    ClaimSession,
    PreparedWindow,
    Progress,
    disclosed_pairs,
    outcome_computed,
)
from .claim_slots import DEFAULT_MAX_CLAIMS, ClaimSlots
from .signing import as_signer

#: Name of this service for the health service.
SERVICE_NAME = "twinaudit.verifier.v1.Verifier"
#: Status of a claim left open and then superseded by a claim with exclusions (§10.2).
ABANDONED_STATUS = "abandoned"
#: Deadline of each oracle call made on behalf of a claim.
ORACLE_DEADLINE_S = 60.0
#: How many times a claim on fresh pairs computes its exclusions and tries to file
#: itself when other claims keep being filed on its record meanwhile; then claim-busy.
FRESH_START_ATTEMPTS: Final = 3

OracleFactory = Callable[[str], Oracle]


def grpc_oracle_factory(
    tls: transport.TlsFiles | None = None, held_models: Path | None = None
) -> OracleFactory:
    """Return a factory that reaches ``host:port`` oracles over gRPC (TLS if given).

    It also reaches models on Open Inference Protocol servers (``oip+http://``,
    ``oip+https://``, ``oip+grpc://``) and the artefacts of ``held_models``
    (``held:sha256:<hex>``, run in a child process; :mod:`twinaudit.verifier.oracles.dial`).
    """

    def connect(endpoint: str) -> Oracle:
        # HOST:PORT, an Open Inference Protocol model (oip+http://…, oip+grpc://…), or
        # an arbiter-held artefact (held:sha256:…).
        return dial_oracle(endpoint, tls=tls, timeout_s=ORACLE_DEADLINE_S, held_models=held_models)

    return connect


def environment() -> dict[str, Value]:
    """Return the environment fingerprint recorded in every verdict."""
    return {
        "twinaudit_spec": SPEC_VERSION,
        "python": platform.python_version(),
        "numpy": np.__version__,
        "platform": platform.platform(),
    }


def _progress(progress: Progress) -> pb.Progress:
    step = progress.step
    lo, hi = step.interval if step.interval is not None else (0, 0)
    return pb.Progress(
        pairs_opened=progress.pairs_opened,
        draws=step.draws,
        successes=step.successes,
        has_interval=step.interval is not None,
        interval_low=lo,
        interval_high=hi,
        log_statistic=step.log_statistic or 0.0,
        # The claim's stop once it stopped (a last window can exhaust the pairs while
        # the test alone would continue), else the test's decision.
        decision=progress.stop or step.decision.value,
        queries=progress.queries,
    )


def _openings(pairs: list[ReceivedPair]) -> list[tuple[int, PairOpening, list[bytes]]]:
    return [(p.index, PairOpening(p.salt, p.version0, p.version1), p.proof) for p in pairs]


class VerifierService(pb_grpc.VerifierServicer):
    """Runs claims against the escrow store and signs verdicts."""

    def __init__(
        self,
        store: EscrowStore,
        signing_key: Signer | Ed25519PrivateKey,
        oracle_factory: OracleFactory,
        clock: Callable[[], datetime] | None = None,
        entropy: Callable[[int], bytes] | None = None,
        *,
        metrics: Metrics = NO_METRICS,
        lease_s: float = DEFAULT_LEASE_S,
        max_claims: int = DEFAULT_MAX_CLAIMS,
        max_open_claims: int = DEFAULT_MAX_OPEN_CLAIMS,
        max_failed_claims: int = DEFAULT_MAX_FAILED_CLAIMS,
    ) -> None:
        """Serve claims on ``store``, signing with ``signing_key``, ``max_claims`` at once.

        A record may have at most ``max_open_claims`` claims open and
        ``max_failed_claims`` failed among those filed in the last day before a new claim
        on it is refused (spec §10.7's per-owner limits; one record, one claim key).

        ``signing_key`` is a :class:`~twinaudit.protocol.signer.Signer` (``verifier serve``'s
        keeps the key in its own process), or a private key signed with in this one.

        ``entropy(n)`` supplies claim ids and claim nonces: the OS CSPRNG unless a test
        injects a seeded source to make a run reproducible. Claims running, claims
        ended (by decision) and the oracle's time per window are reported to ``metrics``.
        Each claim runs under a lease of ``lease_s`` seconds, renewed while it runs.
        """
        self._metrics = metrics
        self._leases = LeaseKeeper(store, lease_s)
        self._store = store
        self._signer = as_signer(signing_key)
        self._key_id = self._signer.key_id
        self._oracles = oracle_factory
        self._clock = clock or (lambda: datetime.now(UTC))
        self._entropy = entropy or secrets.token_bytes
        self._fresh_lock = threading.Lock()
        self._claim_slots = ClaimSlots(max_claims)
        if max_open_claims < 1 or max_failed_claims < 1:
            raise InputError("the per-record claim limits must be at least 1")
        self._max_open = max_open_claims
        self._max_failed = max_failed_claims

    # -- FileClaim -------------------------------------------------------------------

    def FileClaim(  # noqa: N802 - gRPC method name
        self, request_iterator: Iterator[pb.ClaimMessage], context: grpc.ServicerContext
    ) -> Iterator[pb.VerifierMessage]:
        """Run a claim, if fewer than ``max_claims`` run; else refuse it at once.

        The refusal is ``limit-exceeded`` (``RESOURCE_EXHAUSTED``) and stores nothing
        (:mod:`twinaudit.verifier.claim_slots`).
        """
        try:
            self._claim_slots.take()
        except TwinauditError as exc:
            transport.abort_with_error(context, exc, **_counted("", None))
        try:
            yield from self._file_claim(request_iterator, context)
        finally:
            self._claim_slots.give_back()

    def _file_claim(
        self, request_iterator: Iterator[pb.ClaimMessage], context: grpc.ServicerContext
    ) -> Iterator[pb.VerifierMessage]:
        """Run a claim: accept, then request openings and report progress until a verdict."""
        claim_id = ""
        session: ClaimSession | None = None
        lease = self._leases.new_lease()  # this run's, whether it starts or resumes the claim
        # Given up as soon as the call ends, however it ends: a cancelled call (the owner
        # gone, the server stopping) frees the claim at once, even while this thread still
        # waits on the oracle; a later save of this run is then refused.
        context.add_callback(lambda: self._leases.release(lease))
        self._metrics.claim_started()
        try:
            first = next(request_iterator, None)
            if first is None or first.WhichOneof("kind") != "start":
                raise InputError("a claim stream starts with a ClaimStart message")
            if first.start.dry_run:
                yield self._dry_run(first.start)
                return
            session = self._open(first.start, lease)
            claim_id = session.claim_id
            annotate(claim=claim_id, record=session.record.index)
            yield pb.VerifierMessage(
                accepted=pb.ClaimAccepted(
                    claim_id=claim_id,
                    n_pairs=session.record.n_pairs,
                    resumed_pairs=len(session.opened),
                )
            )
            yield from self._run_windows(session, request_iterator, context, lease)
            verdict, logged = self._sign(session)
            self._store.finish_claim(
                claim_id, verdict, session.transcript.to_bytes(), lease=lease, log=logged
            )
            decision = "detected" if session.stop == "detected" else "not-detected"
            annotate(decision=decision)
            self._metrics.claim_finished(decision)
            yield pb.VerifierMessage(
                verdict=pb.VerdictReady(
                    claim_id=claim_id, verdict=verdict, transcript_hash=session.transcript.head
                )
            )
        except ClaimBusyError as exc:
            # Another run has the claim (or took it over from this one): it stays open.
            transport.abort_with_error(context, exc, **_counted(claim_id, session))  # ABORTED
        except TwinauditError as exc:
            # A protocol violation or failed check ends the claim for good; nothing is signed.
            self._mark_failed(claim_id, lease)
            self._metrics.claim_finished("failed")
            restart = bool(claim_id) and self._may_restart(claim_id)
            transport.abort_with_error(context, exc, **_counted(claim_id, session, restart))
        finally:
            self._leases.release(lease)
            self._metrics.claim_ended()
            # An arbiter-held model's child process lives as long as the claim's run.
            close = getattr(session.oracle, "close", None) if session is not None else None
            if callable(close):
                close()

    def _run_windows(
        self,
        session: ClaimSession,
        request_iterator: Iterator[pb.ClaimMessage],
        context: grpc.ServicerContext,
        lease: ClaimLease,
    ) -> Iterator[pb.VerifierMessage]:
        """Request, check, score and persist windows until the claim stops.

        While the oracle answers one window (in a worker thread), the next window is
        requested from the owner and its openings checked (spec §10.2, lookahead), so
        the owner's round trip and the checks overlap the model's work. The claim's
        state is saved after every window fed to the test, while the oracle already
        answers the next one: a claim resumed after a crash repeats the same queries,
        so sending them before the save changes nothing but the wall time.
        """

        def next_message() -> pb.ClaimMessage:
            message = next(request_iterator, None)
            if message is None:
                # An interrupted stream (the owner went away, or this server is shutting
                # down) is not a protocol violation: the claim stays open and can be
                # resumed by its id.
                context.abort(
                    grpc.StatusCode.ABORTED,
                    f"the stream ended before the claim finished; resume claim {session.claim_id}",
                )
                raise AssertionError("unreachable: abort raises")
            return message

        def receive(count: int) -> PreparedWindow:
            # One request's openings, in one message or several (spec §10.2 step 4).
            return session.prepare(_openings(collect_openings(None, next_message, count)))

        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="oracle") as worker:
            prepared: PreparedWindow | None = None
            answer: Future[object] | None = None
            while True:
                if prepared is None:
                    indices = session.next_request()
                    if not indices:
                        return
                    yield pb.VerifierMessage(request=pb.OpeningRequest(indices=indices))
                    prepared = receive(len(indices))
                if answer is None:
                    answer = worker.submit(self._query, session, prepared)
                ahead: PreparedWindow | None = None
                if indices := session.request_ahead():
                    yield pb.VerifierMessage(request=pb.OpeningRequest(indices=indices))
                    ahead = receive(len(indices))
                progress = session.feed(prepared, answer.result())
                prepared = ahead if session.stop is None else None
                # The next window's queries go out before this window's state is saved.
                answer = worker.submit(self._query, session, prepared) if prepared else None
                self._save(session, lease)
                yield pb.VerifierMessage(progress=_progress(progress))

    def _query(self, session: ClaimSession, prepared: PreparedWindow) -> object:
        """Send one window's queries to the oracle; report how long it took to answer."""
        start = time.monotonic()
        outcome = "error"
        try:
            answer = session.query(prepared)
            outcome = "ok"
            return answer
        finally:
            self._metrics.oracle_query(time.monotonic() - start, outcome)

    def _open(self, start: pb.ClaimStart, lease: ClaimLease) -> ClaimSession:
        """Start a new claim, or resume one, held by ``lease`` (renewed until released)."""
        params = params_from_proto(start)
        stored_entry = self._store.entry(params.record_index)
        entry = stored_entry.entry
        _check_test(params, entry.n_pairs)
        record = ClaimRecord(
            entry.index, entry.root, entry.n_pairs, entry.item_kind, stored_entry.rho, entry.time
        )
        if start.probes:
            raise InputError("probe shapes belong to a dry run (ClaimStart.dry_run) only")
        # Who asks, before anything is stored, counted or dialled (spec §10.7).
        authorization = self._authorize(start, entry)
        if not start.resume_claim_id:
            self._check_load(entry.index)
        oracle = self._oracles(params.endpoint)
        if start.resume_claim_id:
            resumed = start.resume_claim_id
            # Taken before its state is read: no other run can save it while this one runs.
            stored = self._store.acquire_claim(check_claim_id(resumed), lease)
            if stored is None:
                raise InputError(f"no claim {resumed!r} to resume")
            if not stored.finished:
                self._leases.hold(resumed, lease)  # released when this run ends, however
            restart = stored.status != "open" or stored.record_index != record.index
            if restart:
                # A failed claim that computed no outcome runs again as itself (§10.7).
                refusal = self._restart_refusal(resumed, stored, record.index)
                if refusal is not None:
                    raise StateError(refusal)
                self._check_load(record.index, restart=True)
            transcript = self._store.load_transcript(resumed) or b""
            session = ClaimSession.resume(stored.state, transcript, record, params, oracle)
            if restart:  # only once every check held: a refusal changes nothing
                self._store.restart_claim(resumed, lease=lease)
            return session
        claim_id, claim_nonce = self._entropy(16).hex(), self._entropy(32)
        if not params.fresh_pairs:
            session = ClaimSession.start(claim_id, record, params, oracle, claim_nonce)
            self._create(session, lease, authorization=authorization)
        else:
            # The in-process lock only spares this process's own streams the retries
            # below; across replicas the store's check does the work.
            with self._fresh_lock:
                session = self._start_fresh(
                    record,
                    params,
                    oracle,
                    lease,
                    claim_id=claim_id,
                    claim_nonce=claim_nonce,
                    authorization=authorization,
                )
        self._leases.hold(session.claim_id, lease)
        return session

    def _restart_refusal(self, claim_id: str, stored: StoredClaim, record: int) -> str | None:
        """Return why failed claim ``claim_id`` cannot run again, or None (spec §10.7)."""
        filed = [c.claim_id for c in self._store.claims_for_record(stored.record_index)]
        return restart_refusal(
            claim_id,
            status=stored.status,
            outcome_computed=outcome_computed(stored.state),
            claim_record=stored.record_index,
            record=record,
            filed_on_record=filed,
        )

    def _may_restart(self, claim_id: str) -> bool:
        """Whether a claim that just failed may run again as itself (spec §10.7)."""
        stored = self._store.load_claim(claim_id)
        if stored is None:
            return False
        return self._restart_refusal(claim_id, stored, stored.record_index) is None

    def _start_fresh(
        self,
        record: ClaimRecord,
        params: ClaimParams,
        oracle: Oracle,
        lease: ClaimLease,
        *,
        claim_id: str,
        claim_nonce: bytes,
        authorization: bytes,
    ) -> ClaimSession:
        """Start a claim on fresh pairs and file it, held by ``lease`` (spec §10.2 step 2).

        Invariant: the claims its exclusions are computed from are exactly the claims
        filed on the record before it, those its verdict's ``earlier_claims`` counts,
        and each of them has finished, failed or been abandoned (here or by an earlier
        claim on fresh pairs), so none opens a pair after ``excluded`` is fixed. A
        claim filed after this one is not earlier and needs nothing: an ordinary one
        may reopen its pairs (§13), one on fresh pairs excludes them. What would break
        the invariant is a claim filed by another run (on another replica of the
        database, say) between reading the record's claims and filing this one, on
        fresh pairs or not: it would count as earlier without being excluded or
        abandoned. So the store files this claim only if the record's claims are still
        those read, in one write transaction serialised with every other write
        (:meth:`~twinaudit.verifier.escrow.store.ClaimStore.create_claim`). If one came in
        between, the exclusions are computed again with it, as if the owner had asked
        a moment later: it is excluded if it has stopped, and makes this claim
        ``claim-busy`` if it is being run, like any earlier claim being run.
        """
        for attempt in range(1, FRESH_START_ATTEMPTS + 1):
            earlier, excluded = self._excluded_pairs(record, lease)
            session = ClaimSession.start(
                claim_id, record, params, oracle, claim_nonce, excluded=excluded
            )
            try:
                self._create(session, lease, earlier=earlier, authorization=authorization)
            except ClaimsChangedError:
                if attempt == FRESH_START_ATTEMPTS:
                    raise  # claim-busy: the owner may start it again
                continue
            return session
        raise AssertionError("unreachable: the last attempt returns or raises")

    def _excluded_pairs(
        self, record: ClaimRecord, lease: ClaimLease
    ) -> tuple[list[str], list[int]]:
        """Return the claims filed on ``record`` and the pairs they disclosed (§10.2 step 2).

        Every claim filed on the record counts, whatever became of it: a finished
        claim's opened pairs (its verdict's ``opened``); for one that failed or was left
        open, what its last saved state may have disclosed
        (:func:`~twinaudit.verifier.claim.disclosed_pairs`). A claim left open is abandoned here,
        so that it can never resume and open pairs the new claim opens; one that
        another run is processing makes the new claim ``claim-busy``. The claim ids
        come first, oldest first: the new claim is filed only after exactly those.
        """
        pairs: set[int] = set()
        filed = self._store.claims_for_record(record.index)
        for earlier in filed:
            if earlier.finished:
                pairs.update(self._verdict_opened(earlier.claim_id))
                continue
            stored = self._store.acquire_claim(earlier.claim_id, lease)  # claim-busy if run
            if stored is None:
                continue
            try:
                if stored.finished:
                    pairs.update(self._verdict_opened(earlier.claim_id))
                    continue
                if stored.status == "open":
                    self._store.save_claim(
                        earlier.claim_id, record.index, ABANDONED_STATUS, stored.state, lease=lease
                    )
                header = self._store.load_transcript_start(earlier.claim_id) or b""
                pairs.update(disclosed_pairs(stored.state, record, header))
            finally:
                self._store.release_claim(earlier.claim_id, lease)
        return [claim.claim_id for claim in filed], sorted(pairs)

    def _verdict_opened(self, claim_id: str) -> list[int]:
        """Return the opened pairs of a finished claim's stored verdict."""
        found = self._store.get_verdict(claim_id)
        if found is None:
            return []
        payload = decode(Envelope.from_json(found.verdict).payload)
        opened = payload.get("opened") if isinstance(payload, dict) else None
        return [i for i in opened if isinstance(i, int)] if isinstance(opened, list) else []

    def _create(
        self,
        session: ClaimSession,
        lease: ClaimLease,
        earlier: list[str] | None = None,
        *,
        authorization: bytes,
    ) -> None:
        """File the new claim with its first state, held by ``lease`` (see ``create_claim``).

        ``authorization`` is the signed request that filed it (b"" on a record that binds
        no claim key): its verdict carries it as ``filing`` (spec §11).
        """
        state, part = session.checkpoint()
        claim_key = self._store.entry(session.record.index).entry.claim_key
        self._store.create_claim(
            session.claim_id,
            session.record.index,
            "open",
            state,
            part,
            lease=lease,
            earlier=earlier,
            authorization=authorization,
            log=ClaimStartFields(claim_map_digest(session.claim.to_value()), claim_key),
        )

    def _save(self, session: ClaimSession, lease: ClaimLease) -> None:
        """Persist the claim's state with the transcript records made since the last save."""
        state, part = session.checkpoint()
        self._store.save_claim(
            session.claim_id, session.record.index, "open", state, part, lease=lease
        )

    def _sign(self, session: ClaimSession) -> tuple[bytes, VerdictFields]:
        """Sign the claim's verdict; return it and what its verdict entry states (§9.6)."""
        filed = [c.claim_id for c in self._store.claims_for_record(session.record.index)]
        earlier = filed.index(session.claim_id)
        payload = session.verdict_payload(
            earlier_claims=earlier,
            arbiter=self._key_id,
            time=format_time(self._clock()),
            environment=environment(),
            filing=self._filing(session),
            claim_entry=self._claim_entry(session.claim_id, earlier),
        )
        data = encode(payload)
        logged = VerdictFields(verdict=verdict_digest(data), decision=str(payload["decision"]))
        return self._signer.sign(data, VERDICT_KIND).to_json(), logged

    def _claim_entry(self, claim_id: str, earlier: int) -> ClaimEntryRef | None:
        """Return where the claim was filed in the log, for its verdict (spec §9.6, §11).

        None where it has no claim-start entry (filed before claims were logged), and
        where the claims logged on its record before it are not all the claims filed
        before it (some were filed before claims were logged): a verdict binds a
        position only where the count anyone recomputes from the log is its
        ``earlier_claims``, never a smaller one.
        """
        position = self._store.claim_position(claim_id)
        if position is None or position.earlier != earlier:
            return None
        return ClaimEntryRef(position.index, position.log_root)

    def _filing(self, session: ClaimSession) -> Filing | None:
        """Return the signed request that filed the claim, for its verdict (spec §11)."""
        envelope = self._store.claim_authorization(session.claim_id)
        if not envelope:  # a record that binds no claim key (or a claim filed before keys)
            return None
        claim_key = self._store.entry(session.record.index).entry.claim_key
        if claim_key is None:
            raise StateError("a claim request is stored for a record that binds no claim key")
        return Filing.from_envelope(envelope, public_key_from_raw(claim_key))

    def _authorize(self, start: pb.ClaimStart, entry: LogEntry) -> bytes:
        """Check who asks for this claim (spec §10.7); return the request envelope to keep.

        On a record that binds a claim key, the start must carry a claim request signed
        by it, for this arbiter and exactly these fields, with a nonce never used on the
        record (recorded here, so a copy of the request files nothing). On a record
        escrowed before claim keys, claims carry none: anyone may file them (§11 says
        what that does to ``earlier_claims``). Returns b"" for such a record.
        """
        envelope = bytes(start.authorization)
        if entry.claim_key is None:
            if envelope:
                raise InputError(
                    f"record {entry.index} binds no claim key (escrowed before claim keys): "
                    "a claim on it carries no claim request"
                )
            return b""
        if not envelope:
            raise SignatureError(
                f"record {entry.index} binds its owner's claim key: a claim on it must carry "
                "a claim request signed by that key (spec 10.7); only the record's owner, "
                "with her vault, can file one"
            )
        request: ClaimRequest = verify_claim_request(
            envelope,
            public_key_from_raw(entry.claim_key),
            arbiter=self._key_id,
            start=start_map(start),
        )
        self._store.use_claim_nonce(entry.index, request.nonce)
        return envelope

    def _check_load(self, record_index: int, *, restart: bool = False) -> None:
        """Refuse a new claim on a record with too many open or recently failed claims.

        A failed claim run again (``restart``) files nothing and leaves the failed count
        one lower: only the open claims bound it.
        """
        load = self._store.claim_load(record_index, FAILED_WINDOW_S)
        if load.open >= self._max_open:
            raise LimitExceededError(
                f"open claims on record {record_index} (resume or finish one first)",
                load.open + 1,
                self._max_open,
            )
        if not restart and load.failed_recently >= self._max_failed:
            raise LimitExceededError(
                f"failed claims on record {record_index} in the last day",
                load.failed_recently + 1,
                self._max_failed,
            )

    def _dry_run(self, start: pb.ClaimStart) -> pb.VerifierMessage:
        """Check a claim without filing it (spec §10.7) and report what it would be.

        The record, the claim request, the parameters and the oracle are checked as for a
        claim; then the oracle answers one probe query of a mid-grey image of each shape
        the owner names (images only). Nothing is stored but the request's nonce, and
        nothing is counted.
        """
        if len(start.probes) > MAX_PROBES:
            raise LimitExceededError("probe shapes of a dry run", len(start.probes), MAX_PROBES)
        params = params_from_proto(start)
        stored_entry = self._store.entry(params.record_index)
        entry = stored_entry.entry
        _check_test(params, entry.n_pairs)
        self._authorize(start, entry)
        if start.resume_claim_id:
            raise InputError("a dry run checks a new claim; it cannot resume one")
        record = ClaimRecord(
            entry.index, entry.root, entry.n_pairs, entry.item_kind, stored_entry.rho, entry.time
        )
        oracle = self._oracles(params.endpoint)
        try:
            session = ClaimSession.start("dry-run", record, params, oracle, bytes(32))
            claim = session.claim
            probes = [
                _probe(oracle, claim.score.function, shape, claim.fit_shape)
                for shape in start.probes
            ]
        finally:
            close = getattr(oracle, "close", None)
            if callable(close):
                close()
        earlier = len(self._store.claims_for_record(entry.index))
        return pb.VerifierMessage(
            dry_run=pb.DryRunReport(
                oracle=encode(session.claim.oracle),
                score=encode(session.claim.score.to_value()),
                n_pairs=entry.n_pairs,
                earlier_claims=earlier,
                probes=probes,
            )
        )

    def _mark_failed(self, claim_id: str, lease: ClaimLease) -> None:
        if not claim_id:
            return
        stored = self._store.load_claim(claim_id)
        if stored is not None and stored.status == "open":
            with contextlib.suppress(ClaimBusyError):  # another run has it: not ours to fail
                self._store.save_claim(
                    claim_id, stored.record_index, "failed", stored.state, lease=lease
                )

    # -- unary calls -----------------------------------------------------------------

    def GetVerdict(  # noqa: N802 - gRPC method name
        self, request: pb.GetVerdictRequest, context: grpc.ServicerContext
    ) -> pb.GetVerdictResponse:
        """Return a finished claim's signed verdict and its transcript.

        A malformed claim id is ``INVALID_ARGUMENT``; a well-formed id of no finished
        claim is ``NOT_FOUND``.
        """

        def find() -> pb.GetVerdictResponse:
            claim_id = check_claim_id(request.claim_id)
            annotate(claim=claim_id)  # only once it is known to be a well-formed id
            found = self._store.get_verdict(claim_id)
            if found is None:
                raise NotFoundError(f"no verdict for claim {claim_id!r}")
            return pb.GetVerdictResponse(verdict=found.verdict, transcript=found.transcript)

        return transport.abort_on_error(context, find)

    def GetPublicKey(  # noqa: N802 - gRPC method name
        self, request: pb.GetPublicKeyRequest, context: grpc.ServicerContext
    ) -> pb.GetPublicKeyResponse:
        """Return the arbiter's verdict-signing public key."""
        public = self._signer.public_key
        return pb.GetPublicKeyResponse(public_key_pem=public_key_pem(public), key_id=self._key_id)


def _counted(claim_id: str, session: ClaimSession | None, restart: bool = False) -> dict[str, Any]:
    """Say in a failed claim's status whether it counts, and may run again (spec §10.7)."""
    if not claim_id:
        return {
            "metadata": {"counted": "false"},
            "note": "nothing was filed: this attempt does not count on the record",
        }
    record = session.record.index if session is not None else "its record"
    note = (
        f"claim {claim_id} was filed on record {record}: it counts among the record's "
        "claims (earlier_claims of every later verdict on it)"
    )
    if restart:
        note += (
            f"; it failed before any pair's outcome was computed, so resuming claim "
            f"{claim_id} runs it again as the same claim, counted once, as long as no "
            f"other claim is filed on record {record} first"
        )
    return {
        "metadata": {"counted": "true", "claim": claim_id, "restart": str(restart).lower()},
        "note": note,
    }


#: Most probe shapes a dry run takes, and the largest side of a probe image.
MAX_PROBES: Final = 8
MAX_PROBE_SIDE: Final = 4096


def _check_test(params: ClaimParams, n_pairs: int) -> None:
    """Refuse a test its parameters do not make (spec §10.7 step 1), before any dial.

    The test, its ``p``, the paper's test's ``alpha`` and the mixture tests' ``prior``
    parse as §7 requires over the record's pairs (``invalid-parameter``), before the
    claim request is checked and before anything is stored, counted or dialled; the
    claim builds its test again once it knows the pairs it may open.
    """
    make_test(params.test_name, n_pairs, params.p, params.alpha, params.prior)


def _probe(
    oracle: Oracle, function: str, shape: pb.ImageShape, fit: tuple[int, int, int] | None
) -> pb.ProbeResult:
    """Ask ``oracle`` about one mid-grey image of ``shape``; report whether it answered.

    Where the claim fits its queries to the model's input (``fit``), the probe is sent
    at that shape, as the claim's queries of an image of ``shape`` would be.
    """
    height, width, channels = int(shape.height), int(shape.width), int(shape.channels)
    result = pb.ProbeResult(shape=shape, ok=False)
    if not (1 <= height <= MAX_PROBE_SIDE and 1 <= width <= MAX_PROBE_SIDE and channels in (1, 3)):
        raise InputError(f"a probe shape is 1..{MAX_PROBE_SIDE} x 1..{MAX_PROBE_SIDE} x 1 or 3")
    if fit is not None:
        height, width, channels = fit
    image = np.full((1, height, width, channels), 0.5, dtype=np.float32)
    try:
        if function == "image-classifier" and isinstance(oracle, ClassifierOracle):
            oracle.classify(image).validate(1, oracle.info.n_classes)
        elif function == "image-encoder" and isinstance(oracle, EncoderOracle):
            oracle.embed_images(image).validate(1)
        elif function == "image-text" and isinstance(oracle, ImageTextOracle):
            oracle.embed_image_text(image, ["twinaudit dry run"]).validate(1, 1)
        else:
            result.error = f"the {function} score sends no images: nothing to probe"
            return result
    except TwinauditError as exc:
        result.error = exc.diagnostics()
        return result
    result.ok = True
    return result


def add_verifier_service(server: Any, service: VerifierService) -> None:
    """Register ``service`` on a gRPC server."""
    pb_grpc.add_VerifierServicer_to_server(service, server)  # type: ignore[no-untyped-call]
