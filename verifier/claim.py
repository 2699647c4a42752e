"""Claim processing: the verifier's side of spec §10, independent of any transport.

A :class:`ClaimSession` holds one claim against one escrow record and one model
oracle. It asks for pairs in the order the audit seed fixes, checks every opening
against the escrowed root before using it, builds the score function's queries from
the spec PRG, shuffles the queries of a whole window of pairs together, scores in
float64, feeds the sequential test, and appends everything to a hash-chained
transcript. Its state can be snapshotted after every window and resumed, and once it
has stopped it produces the verdict payload (never before).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from twinaudit.protocol import SPEC_VERSION, limits
from twinaudit.protocol.claim.claim_map import (
    INPUT_FIT_KEY,
    ClaimMap,
    check_input_fit,
    default_fit_shape,
)
from twinaudit.protocol.claim.filing import Filing
from twinaudit.protocol.claim.functions import AnyScoreSpec, resolve_score
from twinaudit.protocol.claim.outcome import feed, outcome
from twinaudit.protocol.claim.params import ClaimParams
from twinaudit.protocol.claim.schedule import WindowSchedule
from twinaudit.protocol.claim.scores.classifier import BASIC_ARITHMETIC, ScoreSpec
from twinaudit.protocol.claim.transcript import TranscriptWriter, iter_records
from twinaudit.protocol.claim.verdict import ClaimEntryRef, stop_reason, verdict_payload
from twinaudit.protocol.commitment import PairOpening, version_digest
from twinaudit.protocol.encoding import Value, decode, encode
from twinaudit.protocol.errors import (
    InputError,
    OracleError,
    ParameterError,
    RootMismatchError,
    StateError,
    TwinauditError,
)
from twinaudit.protocol.items import Item, decode_pair
from twinaudit.protocol.merkle import verify_inclusion
from twinaudit.protocol.oracles.base import Oracle
from twinaudit.protocol.oracles.signed_answers import AnswerSigningClient, SignedBatch
from twinaudit.protocol.prg import bit_stream
from twinaudit.protocol.seeds import PUBLICATION_LABEL, audit_seed, publication_seed
from twinaudit.protocol.stats.base import Decision, SequentialTest, Step
from twinaudit.protocol.stats.registry import make_test, test_from_state
from twinaudit.verifier.answer_slots import answers_records
from twinaudit.verifier.scoring.fit import AREA
from twinaudit.verifier.windows import AnyWindowScorer, QueryBatch, scorer_for

__all__ = [
    "ClaimParams",
    "ClaimRecord",
    "ClaimSession",
    "PreparedWindow",
    "Progress",
    "disclosed_pairs",
    "outcome_computed",
]


@dataclass(frozen=True)
class ClaimRecord:
    """What the verifier needs from the escrow record (spec §9.2) for one claim."""

    index: int
    root: bytes
    n_pairs: int
    item_kind: str
    rho: bytes
    time: str


@dataclass
class Progress:
    """What the verifier reports after each window."""

    pairs_opened: int
    step: Step
    queries: int
    stop: str | None


@dataclass
class _PairResult:
    index: int
    published: int
    record: dict[str, Value]
    scores: tuple[float, float]


@dataclass(frozen=True)
class _SignedAnswer:
    """An oracle's answer to a window with the batches it signed (spec §10.8)."""

    answer: object
    batches: list[SignedBatch]


@dataclass(frozen=True)
class PreparedWindow:
    """A window whose openings passed every check, with its shuffled query batch.

    Made by :meth:`ClaimSession.prepare`; nothing about it is recorded until
    :meth:`ClaimSession.feed` takes it with the oracle's answer.
    """

    number: int
    indices: list[int]
    items: list[tuple[Item, Item]]
    openings: list[PairOpening]
    batch: QueryBatch


@dataclass
class ClaimSession:
    """One claim in progress. Build with :meth:`start` or :meth:`resume`."""

    claim_id: str
    record: ClaimRecord
    params: ClaimParams
    oracle: Oracle
    claim_nonce: bytes
    test: SequentialTest
    #: The claim map (spec §10.1): the parameters, knowledge resolved, as recorded.
    claim: ClaimMap
    opened: list[int] = field(default_factory=list)
    indicators: str = ""
    queries: int = 0
    windows: int = 0
    stop: str | None = None
    last_step: Step | None = None
    transcript: TranscriptWriter = field(default_factory=TranscriptWriter)
    #: Windows requested and not yet fed to the test, oldest first (at most two: the
    #: current window and one requested ahead, spec §10.2).
    _requested: list[list[int]] = field(default_factory=list, repr=False)
    #: How many of ``_requested`` have been prepared (their openings checked).
    _prepared: int = field(default=0, repr=False)
    #: Transcript records already handed to the store by :meth:`checkpoint`.
    _saved_records: int = field(default=0, repr=False)
    #: The audit order (spec §5.3), positioned after the pairs already opened.
    _order: Iterator[int] | None = field(default=None, repr=False)
    #: The score function's window logic (:mod:`twinaudit.verifier.windows`).
    _scorer: AnyWindowScorer | None = field(default=None, repr=False)

    # -- construction ----------------------------------------------------------------

    @classmethod
    def start(
        cls,
        claim_id: str,
        record: ClaimRecord,
        params: ClaimParams,
        oracle: Oracle,
        claim_nonce: bytes,
        *,
        excluded: Iterable[int] = (),
        input_fit: str | None = None,
        arithmetic: str = BASIC_ARITHMETIC,
    ) -> ClaimSession:
        """Open a claim: check it against the record and the oracle, write the header.

        The score function must read the record's item kind (``image-classifier`` and
        ``image-encoder`` images, ``language-model`` texts, ``image-text`` captioned
        images) and the oracle must offer the queries it needs. A knowledge word of the
        image-classifier score is resolved here, from the oracle's description (spec
        §10.2 step 1); the claim map records the resolved condition.

        ``excluded`` are pairs the claim must not open (those earlier claims on the
        record opened, spec §10.2 step 2): the claim map records them, the order skips
        them and the test runs over the pairs left. A claim that would have no pair
        left is ``invalid-state``.

        ``arithmetic`` is the image-classifier score's (§10.3.1): ``basic-v1`` for every
        claim started now; a resumed claim passes its stored map's (``""`` for a claim
        started before it, §1.2), as do the tools that make the vectors of such claims.

        ``input_fit`` is the claim map's rule for fitting image queries to the oracle's
        declared input (§10.2 step 5): None chooses it as a claim started now does
        (``"area"`` when the oracle declares an ``input_shape`` and the score sends
        images, else none); a resumed claim passes its stored map's (``""`` for a claim
        that queried its items at their own shapes).
        """
        if params.record_index != record.index:
            raise InputError(f"claim names record {params.record_index}, not {record.index}")
        if params.record_root != record.root:
            raise RootMismatchError(record.root, params.record_root, "escrowed root")
        if len(claim_nonce) != limits.HASH_BYTES:
            raise InputError("claim nonce must be 32 bytes")
        if record.item_kind != params.score.item_kind:
            raise ParameterError(
                f"the {params.score.function!r} score reads {params.score.item_kind!r} items; "
                f"the record holds {record.item_kind!r}"
            )
        info = oracle.info
        if info.answer_key and not isinstance(oracle, AnswerSigningClient):
            raise OracleError(
                "invalid-answer",
                "the oracle names an answer key, but this client cannot check its signatures",
            )
        score = resolve_score(params.score, info)
        if isinstance(score, ScoreSpec):
            score = dataclasses.replace(score, arithmetic=arithmetic)
        score.check_oracle(info)
        scorer = scorer_for(score)
        scorer.check_oracle(oracle, info)
        skipped = tuple(sorted(set(excluded)))
        if skipped and not 0 <= skipped[0] <= skipped[-1] < record.n_pairs:
            raise InputError(f"excluded pairs must be indices of the record's {record.n_pairs}")
        if len(skipped) >= record.n_pairs:
            raise StateError(
                f"earlier claims opened every one of record {record.index}'s {record.n_pairs}"
                " pairs: no fresh pair is left for this claim; escrow a new record"
            )
        test = make_test(
            params.test_name, record.n_pairs - len(skipped), params.p, params.alpha, params.prior
        )
        if input_fit is None:
            input_fit = AREA if default_fit_shape(info, score.item_kind) else ""
        elif input_fit:
            check_input_fit(input_fit, oracle.describe(), score.item_kind)
        claim = ClaimMap(
            record_index=record.index,
            record_root=record.root,
            n_pairs=record.n_pairs,
            endpoint=params.endpoint,
            model_name=params.model_name,
            oracle=oracle.describe(),
            score=score,
            test_name=test.name,
            test_params=test.parameters(),
            tie_rule=params.tie_rule,
            max_pairs=params.max_pairs,
            query_budget=params.query_budget,
            window=params.window,
            window_max=params.window_max,
            claim_nonce=claim_nonce,
            excluded=skipped,
            input_fit=input_fit,
        )
        session = cls(claim_id, record, params, oracle, claim_nonce, test, claim)
        session._scorer = scorer_for(score, claim.fit_shape)
        session.transcript.append(
            {"type": "header", "spec": SPEC_VERSION, "claim": claim.to_value()}
        )
        return session

    # -- derived values --------------------------------------------------------------

    @property
    def score(self) -> AnyScoreSpec:
        """The score function's parameters, knowledge resolved (what the claim map records)."""
        return self.claim.score

    @property
    def claim_map(self) -> dict[str, Value]:
        """The claim map as the transcript's header and the verdict carry it."""
        return self.claim.to_value()

    @property
    def seed(self) -> bytes:
        """The audit seed of this claim (spec §5.5)."""
        return audit_seed(self.record.root, self.record.rho, self.claim_nonce)

    @property
    def scorer(self) -> AnyWindowScorer:
        """The score function's window logic."""
        if self._scorer is None:
            self._scorer = scorer_for(self.score, self.claim.fit_shape)
        return self._scorer

    @property
    def queries_per_pair(self) -> int:
        """Oracle queries per pair: both versions' copies (2K, or 2)."""
        return self.claim.queries_per_pair

    @property
    def limit(self) -> int:
        """How many pairs this claim may open at most."""
        return self.claim.limit

    def _next_in_order(self, count: int) -> list[int]:
        """Return the next ``count`` pairs of the audit order (one lazy pass per claim)."""
        if self._order is None:
            self._order = self.claim.order(self.seed)
            for _ in self.opened:
                next(self._order)
        return [next(self._order) for _ in range(count)]

    # -- the claim loop --------------------------------------------------------------
    #
    # A window goes through three steps: ``prepare`` (check the openings, build and
    # shuffle the queries), ``query`` (ask the oracle; touches no session state, so it
    # may run in another thread) and ``feed`` (score, test, record). A transport may
    # request and prepare the next window while the oracle answers the current one
    # (spec §10.2, lookahead); ``submit`` does all three steps for one window.

    @property
    def pending(self) -> list[int]:
        """The window being processed (requested and not yet fed), or an empty list."""
        return list(self._requested[0]) if self._requested else []

    @property
    def schedule(self) -> WindowSchedule:
        """The claim's window schedule (spec §10.2 step 3)."""
        return self.claim.schedule

    def _plan_window(self, number: int, opened: int) -> list[int]:
        """Return window ``number``, which follows ``opened`` pairs (may be empty)."""
        size = self.schedule.size(number, opened)
        return self._next_in_order(size) if size > 0 else []

    def next_request(self) -> list[int]:
        """Return the pairs to open next, in order; an empty list once the claim stopped."""
        if self.stop is not None:
            return []
        if not self._requested:
            window = self._plan_window(self.windows, len(self.opened))
            if not window:
                exhausted = len(self.opened) >= self.limit and self.limit == self.claim.population
                self.stop = "exhausted" if exhausted else "budget"
                return []
            self._requested.append(window)
        return list(self._requested[0])

    def request_ahead(self) -> list[int]:
        """Return the window after the current one, requested before the current is fed.

        Empty when the claim has stopped, when no window is in progress, when one is
        already requested ahead, or when the current window is the claim's last. The
        window is the one that would follow if the test does not stop on the current
        window; if it does stop, the window is discarded (spec §10.2).
        """
        if self.stop is not None or len(self._requested) != 1:
            return []
        current = self._requested[0]
        window = self._plan_window(self.windows + 1, len(self.opened) + len(current))
        if window:
            self._requested.append(window)
        return list(window)

    def submit(self, openings: list[tuple[int, PairOpening, list[bytes]]]) -> Progress:
        """Check, query, score and test the current window's pairs; return the progress.

        ``openings`` are ``(index, opening, inclusion proof)`` in the requested order.
        Every opening is verified before the oracle sees any query: on any error the
        session is unchanged and nothing about the window is recorded.
        """
        prepared = self.prepare(openings)
        return self.feed(prepared, self.query(prepared))

    def prepare(self, openings: list[tuple[int, PairOpening, list[bytes]]]) -> PreparedWindow:
        """Check the openings of the next requested window and build its query batch.

        Raises a typed error (and changes nothing) if the openings are not those of the
        oldest requested window not yet prepared, in order, or if any fails a check.
        """
        if self._prepared >= len(self._requested):
            raise StateError("no openings were requested")
        expected = self._requested[self._prepared]
        indices = [index for index, _, _ in openings]
        if indices != expected:
            raise InputError(f"openings for pairs {indices}, requested {expected} in that order")
        items = [self._check_opening(i, o, proof) for i, o, proof in openings]
        prepared = self._build_queries(
            self.windows + self._prepared, expected, items, [o for _, o, _ in openings]
        )
        self._prepared += 1
        return prepared

    def query(self, prepared: PreparedWindow) -> object:
        """Ask the oracle for the window's shuffled batch and validate the answer.

        Reads no mutable session state, so it may run in another thread while the next
        window is prepared. The answer of an oracle that signs its answers (spec §10.8)
        comes with its signed batches, each checked as it arrived.
        """
        oracle = self.oracle
        if not oracle.info.answer_key:
            return self.scorer.ask(oracle, oracle.info, prepared.batch)
        assert isinstance(oracle, AnswerSigningClient)  # checked by start
        with oracle.signed_batches(self.claim_nonce) as batches:
            answer = self.scorer.ask(oracle, oracle.info, prepared.batch)
        return _SignedAnswer(answer, list(batches))

    def feed(self, prepared: PreparedWindow, answer: object) -> Progress:
        """Score the window from the oracle's answer, feed the test, record; return progress."""
        if not self._requested or prepared.indices != self._requested[0] or not self._prepared:
            raise StateError("windows must be fed in the order they were requested")
        signed = answer.batches if isinstance(answer, _SignedAnswer) else None
        if isinstance(answer, _SignedAnswer):
            answer = answer.answer
        results = self._score_window(prepared, answer)
        answers: list[dict[str, Value]] = []
        if self.oracle.info.answer_key:
            if signed is None:
                raise OracleError("invalid-answer", "the window's answers are not signed")
            answers = answers_records(
                function=self.score.function,
                k=self.score.queries_per_version,
                answer_key=self.oracle.info.answer_key,
                claim_nonce=self.claim_nonce,
                window=prepared.number,
                batch=prepared.batch,
                indices=prepared.indices,
                pair_records=[r.record for r in results],
                signed=signed,
            )
        self._feed(results, answers)
        return Progress(len(self.opened), self._current_step(), self.queries, self.stop)

    def _check_opening(
        self, index: int, opening: PairOpening, proof: list[bytes]
    ) -> tuple[Item, Item]:
        """Check one opening (spec §10.2 step 3).

        The commitment recomputed from the opening must be leaf ``index`` under the
        escrowed root (a wrong salt or version shows as a root mismatch: the arbiter
        holds only the root); then both versions must decode as matching items.
        """
        commitment = opening.commitment()
        verify_inclusion(
            leaf_data=commitment,
            index=index,
            size=self.record.n_pairs,
            proof=proof,
            root=self.record.root,
        )
        first, second = decode_pair(opening.version0, opening.version1, self.record.item_kind)
        self.scorer.check_item(first)
        self.scorer.check_item(second)
        return first, second

    def _build_queries(
        self,
        number: int,
        indices: list[int],
        items: list[tuple[Item, Item]],
        openings: list[PairOpening],
    ) -> PreparedWindow:
        """Spec §10.2 step 5: every version's queries, shuffled across the window."""
        batch = self.scorer.build(self.seed, number, indices, items)
        return PreparedWindow(number, list(indices), items, openings, batch)

    def _score_window(self, prepared: PreparedWindow, answer: object) -> list[_PairResult]:
        """Unshuffle the oracle's answer and score both versions of every pair (§10.3–10.6)."""
        pub_seed = publication_seed(self.record.root, self.record.rho)
        scored = self.scorer.score(self.oracle.info, prepared.batch, answer, prepared.items)
        results = []
        for j, (index, pair) in enumerate(zip(prepared.indices, scored, strict=True)):
            bit = int(bit_stream(pub_seed, PUBLICATION_LABEL, index, 1)[0])
            opening = prepared.openings[j]
            record: dict[str, Value] = {
                "type": "pair",
                "window": prepared.number,
                "index": index,
                "published": bit,
                "digests": [version_digest(opening.version0), version_digest(opening.version1)],
                **pair.fields,
            }
            results.append(_PairResult(index, bit, record, pair.scores))
        return results

    def _feed(self, results: list[_PairResult], answers: list[dict[str, Value]]) -> None:
        """Feed the window's pairs to the test in order, stopping at a decision.

        The window's pair records are recorded, then its ``answers`` records (the
        batches its oracle signed, spec §10.8; none from an oracle without a key).
        """
        for result in results:
            char = ""
            if self.test.decision is Decision.CONTINUE:
                char = outcome(
                    result.scores,
                    result.published,
                    margin=self.score.tie_margin,
                    tie_rule=self.claim.tie_rule,
                    seed=self.seed,
                    index=result.index,
                )
                step = feed(self.test, char, result.scores, result.published, self.score.tie_margin)
                if step is not None:
                    self.last_step = step
                self.indicators += char
            result.record["outcome"] = char
            self.transcript.append(result.record)
        for record in answers:
            self.transcript.append(record)
        self.queries += self.queries_per_pair * len(results)
        self.opened += self._requested.pop(0)
        self._prepared -= 1
        self.windows += 1
        decision = self.test.decision
        opened = len(self.opened)
        if (
            decision is not Decision.CONTINUE
            or opened == self.claim.population
            or opened >= self.limit
        ):
            self.stop = stop_reason(
                decision is Decision.DETECTED,
                decision is Decision.EXHAUSTED,
                opened,
                self.claim.population,
            )
        if self.stop is not None:
            # A window requested ahead of a stop is discarded unscored (spec §10.2).
            self._requested.clear()
            self._prepared = 0

    def _current_step(self) -> Step:
        if self.last_step is not None:
            return self.last_step
        return self.test.initial_step()

    # -- results ---------------------------------------------------------------------

    def verdict_payload(
        self,
        *,
        arbiter: str,
        time: str,
        environment: dict[str, Value],
        earlier_claims: int = 0,
        filing: Filing | None = None,
        claim_entry: ClaimEntryRef | None = None,
    ) -> dict[str, Value]:
        """Return the verdict payload of spec §11; only for a claim that has stopped.

        ``earlier_claims`` is how many claims were filed against the same record before
        this one, whatever became of them: each spends false-detection budget.
        ``filing`` is the signed request that filed the claim (a record that binds a
        claim key, §10.7); None on a record that binds none.
        """
        if self.stop is None:
            raise StateError("the claim has not stopped; no verdict can be made")
        if earlier_claims < 0:
            raise InputError("earlier_claims cannot be negative")
        return verdict_payload(
            arbiter=arbiter,
            claim_id=self.claim_id,
            time=time,
            claim=self.claim,
            audit_seed=self.seed,
            receipt_time=self.record.time,
            earlier_claims=earlier_claims,
            opened=self.opened,
            indicators=self.indicators,
            final=self._current_step(),
            stop=self.stop,
            queries=self.queries,
            transcript=(self.transcript.head, self.transcript.count),
            filing=filing,
            claim_entry=claim_entry,
            environment=environment,
        )

    # -- persistence -----------------------------------------------------------------

    def checkpoint(self) -> tuple[bytes, bytes]:
        """Return ``(snapshot, transcript records made since the last checkpoint)``.

        What a store saves after every window: the small state, and only the new part
        of the transcript (the store appends it), so no save rewrites earlier windows.
        """
        part = self.transcript.since(self._saved_records)
        self._saved_records = self.transcript.count
        return self.snapshot(), part

    def snapshot(self) -> bytes:
        """Return the session's state as canonical bytes, the same size at every window.

        The state (:data:`SNAPSHOT_FORMAT`) holds the counts that change (pairs opened,
        queries, windows), the test's state and the transcript's chain head and count;
        nothing that grows with the pairs opened. The rest is derived on :meth:`resume`:
        the claim map from the transcript's header, the opened pairs from the audit
        order (spec §5.3) and their count, the indicators from the pair records.
        """
        return encode(
            {
                "format": SNAPSHOT_FORMAT,
                "claim_id": self.claim_id,
                "test_state": self.test.state(),
                "opened": len(self.opened),
                "queries": self.queries,
                "windows": self.windows,
                "stop": self.stop,
                "transcript": {"head": self.transcript.head, "records": self.transcript.count},
            }
        )

    @classmethod
    def resume(
        cls,
        snapshot: bytes,
        transcript: bytes,
        record: ClaimRecord,
        params: ClaimParams,
        oracle: Oracle,
    ) -> ClaimSession:
        """Rebuild a session from :meth:`snapshot` and the transcript saved with it.

        The oracle must describe itself as it did when the claim started, and the
        transcript's chain head and record count must be those the snapshot names. A
        state saved before :data:`SNAPSHOT_FORMAT` (with the claim map, the opened
        pairs and the indicators in it) resumes too.
        """
        state = _state_map(snapshot)
        records = list(iter_records(transcript))
        claim = _claim_value(state, records[0] if records else None)
        nonce, excluded = claim["claim_nonce"], claim.get("excluded", [])
        input_fit = claim.get(INPUT_FIT_KEY, "")
        stored_score = claim.get("score")
        arithmetic = stored_score.get("arithmetic", "") if isinstance(stored_score, dict) else ""
        if not isinstance(arithmetic, str):
            raise InputError("claim snapshot's arithmetic must be text")
        # The claim keeps the prior it started with, whatever the default is since (§7.3.1).
        stored_test = claim.get("test")
        stored_params = stored_test.get("params") if isinstance(stored_test, dict) else None
        prior = stored_params.get("prior") if isinstance(stored_params, dict) else None
        if isinstance(prior, str) and prior != params.prior:
            params = dataclasses.replace(params, prior=prior)
        assert isinstance(nonce, bytes)
        if not isinstance(input_fit, str):
            raise InputError("claim snapshot's input_fit must be text")
        if not isinstance(excluded, list) or not all(isinstance(i, int) for i in excluded):
            raise InputError("the stored claim map's excluded pairs must be a list of indices")
        session = cls.start(
            str(state["claim_id"]),
            record,
            params,
            oracle,
            nonce,
            excluded=[i for i in excluded if isinstance(i, int)],
            input_fit=input_fit,
            arithmetic=arithmetic,
        )
        if encode(session.claim_map) != encode(claim):
            raise InputError("the resumed claim differs from the stored one (model or parameters)")
        session.test = test_from_state(state["test_state"])
        queries, windows, stop = state["queries"], state["windows"], state["stop"]
        chain = state["transcript"]
        if not (isinstance(queries, int) and isinstance(windows, int) and isinstance(chain, dict)):
            raise InputError("malformed claim snapshot")
        opened, indicators = _opened_and_indicators(session, state, records)
        session.opened = opened
        session.indicators, session.queries, session.windows = indicators, queries, windows
        session.stop = stop if isinstance(stop, str) else None
        session.transcript = TranscriptWriter.from_bytes(transcript)
        if (session.transcript.head, session.transcript.count) != (
            chain.get("head"),
            chain.get("records"),
        ):
            raise InputError("the saved transcript does not match the claim snapshot")
        session._saved_records = session.transcript.count
        if session.test.draws:
            session.last_step = session.test._evaluate()
        return session


#: The layout of :meth:`ClaimSession.snapshot`; a state without ``format`` is the
#: earlier one, which held the claim map, every opened pair and the indicators.
SNAPSHOT_FORMAT = 2


def _state_map(snapshot: bytes) -> dict[str, Value]:
    """Decode a stored state: :data:`SNAPSHOT_FORMAT`'s, or the earlier one (no ``format``)."""
    state = decode(snapshot)
    if not isinstance(state, dict):
        raise InputError("claim snapshot must be a map")
    if "format" in state and (
        type(state["format"]) is not int or state["format"] != SNAPSHOT_FORMAT
    ):
        raise InputError(f"claim snapshot format {state['format']!r} is not known")
    return state


def _claim_value(state: dict[str, Value], header: dict[str, Value] | None) -> dict[str, Value]:
    """Return the claim map of a stored claim: the earlier state's, or its header's."""
    if "format" in state:
        if header is None or header.get("type") != "header":
            raise InputError("the saved transcript does not start with the claim's header")
        claim = header.get("claim")
    else:
        claim = state.get("claim")
    if not isinstance(claim, dict) or not isinstance(claim.get("claim_nonce"), bytes):
        raise InputError("the stored claim has no claim map")
    return claim


def _opened_and_indicators(
    session: ClaimSession, state: dict[str, Value], records: list[dict[str, Value]]
) -> tuple[list[int], str]:
    """Return the pairs a stored claim opened and their indicators, checked.

    The opened pairs must be the first of the audit order. The earlier state lists them
    and the indicators; the current one counts them, and the indicators are the
    outcomes of the transcript's pair records, which must be those pairs in order.
    """
    opened, indicators = state["opened"], state.get("indicators")
    if "format" not in state:
        if not isinstance(opened, list) or not isinstance(indicators, str):
            raise InputError("malformed claim snapshot")
        if session._next_in_order(len(opened)) != opened:
            raise InputError("claim snapshot's opened pairs do not follow the audit order")
        return [i for i in opened if isinstance(i, int)], indicators  # all are, checked above
    if isinstance(opened, bool) or not isinstance(opened, int) or opened < 0:
        raise InputError("malformed claim snapshot")
    if opened > session.claim.population:
        raise InputError(f"claim snapshot counts {opened} opened pairs, more than it may open")
    pairs = [r for r in records if r.get("type") == "pair"]
    order = session._next_in_order(opened)
    if [r.get("index") for r in pairs] != order:
        raise InputError(
            "the saved transcript does not match the claim snapshot: its pairs are not the"
            " claim's opened pairs"
        )
    outcomes = [r.get("outcome") for r in pairs]
    if not all(isinstance(char, str) for char in outcomes):
        raise InputError("a saved pair record has no outcome")
    return order, "".join(char for char in outcomes if isinstance(char, str))


def disclosed_pairs(snapshot: bytes, record: ClaimRecord, header: bytes = b"") -> list[int]:
    """Return the pairs an unfinished claim may have disclosed (spec §10.2 step 2).

    ``snapshot`` is the claim's last saved state (:meth:`ClaimSession.snapshot`) and
    ``header`` the transcript part saved with its first state (its header record; not
    read for a state saved before :data:`SNAPSHOT_FORMAT`, which holds the claim map):
    the pairs it records as opened and those of the two requests that follow in its
    order and schedule, the most that can have reached the oracle, or the verifier,
    before a save (§10.2 steps 8 and 9). A claim that has stopped discloses its opened
    pairs only: a window requested ahead of a stop is never queried.
    """
    state = _state_map(snapshot)
    first = None
    if "format" in state:
        first = next(iter_records(header), None)
    claim = ClaimMap.from_value(_claim_value(state, first))
    opened, windows = state.get("opened"), state.get("windows")
    count = len(opened) if isinstance(opened, list) else opened
    if isinstance(count, bool) or not isinstance(count, int) or count < 0:
        raise InputError("malformed claim snapshot")
    if not isinstance(windows, int) or windows < 0:
        raise InputError("malformed claim snapshot")
    if state.get("stop") is None:
        first_size = claim.schedule.size(windows, count)
        count += first_size + claim.schedule.size(windows + 1, count + first_size)
    order = claim.order(audit_seed(record.root, record.rho, claim.claim_nonce))
    return [next(order) for _ in range(min(count, claim.population))]


def outcome_computed(snapshot: bytes) -> bool:
    """Return whether a claim's saved state records any pair's outcome (spec §10.7).

    True once a window was fed to the test: a pair opened and scored (``opened`` > 0),
    or the test has drawn. A claim that failed with neither may be run again as the
    same claim (:func:`twinaudit.protocol.claim.restart.restart_refusal`). A state that cannot
    be read counts as one that computed an outcome, so it is never restarted.
    """
    try:
        state = _state_map(snapshot)
        opened, test_state = state.get("opened"), test_from_state(state.get("test_state"))
    except TwinauditError:
        return True
    count = len(opened) if isinstance(opened, list) else opened
    if isinstance(count, bool) or not isinstance(count, int):
        return True
    return count > 0 or test_state.draws > 0
