"""Replay a verdict from its transcript, without the model and without the owner's data.

Anyone holding a verdict and its transcript can recompute, bit for bit, everything
the decision rests on: the audit order, every augmentation parameter, every score
(float64, from the recorded answers), every tie coin, the indicator string and the
sequential test's final state and decision (spec §12). The rules are the claim
protocol's (:mod:`twinaudit.protocol.claim`: the claim map, the window schedule, the pair
records, :func:`~twinaudit.protocol.claim.outcome.outcome`, the stop); the scores are
recomputed by each function's window logic (:mod:`twinaudit.verifier.windows`).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from twinaudit.protocol import SPEC_VERSION
from twinaudit.protocol.claim.answer_records import check_window_answers
from twinaudit.protocol.claim.claim_map import ClaimMap
from twinaudit.protocol.claim.outcome import feed, outcome
from twinaudit.protocol.claim.transcript import (
    HEADER_KEYS,
    chain_head,
    check_pair_record,
    iter_records,
)
from twinaudit.protocol.claim.verdict import FinalState, Verdict, stop_reason
from twinaudit.protocol.encoding import Value, encode
from twinaudit.protocol.errors import InputError, OracleError, ParameterError, VerificationError
from twinaudit.protocol.oracles.base import OracleInfo
from twinaudit.protocol.stats.base import Decision, log_statistics_agree
from twinaudit.verifier.windows import AgreedScores, AnyWindowScorer, scorer_for


@dataclass(frozen=True)
class ScoreAgreement:
    """How a replay's recorded scores agreed with the scores it recomputed (spec §1.2, §12).

    Every recorded score of a claim whose score map names the arithmetic ``basic-v1``,
    and of every score function but the image-classifier, equals the recomputed one bit
    for bit, or replay fails. An image-classifier claim of the rule before (no
    ``arithmetic`` key) replays within the tolerance of §1.2: ``within_tolerance``
    counts its recorded scores that are not bit-identical to the recomputed ones, with
    the largest relative difference ``|s − s'| / max(|s|, |s'|)`` and the largest share
    of its tolerance ``|s − s'| / (S·2^−40 + 2^−1000)`` among them (0.0 when none).
    """

    #: The arithmetic the claim's score map names; None where it names none.
    arithmetic: str | None
    #: Scores recomputed: two per opened pair.
    recomputed: int
    #: Whether the recorded scores were checked within the tolerance of §1.2.
    tolerance_rule: bool = False
    within_tolerance: int = 0
    largest_relative_difference: float = 0.0
    largest_share_of_tolerance: float = 0.0

    @property
    def bit_identical(self) -> bool:
        """Whether every recorded score is the recomputed one, bit for bit."""
        return self.within_tolerance == 0

    def add(self, agreed: AgreedScores) -> ScoreAgreement:
        """Return the agreement with one more pair's scores counted."""
        counted = replace(self, recomputed=self.recomputed + len(agreed.recomputed))
        if agreed.tolerances is None:
            return counted
        counted = replace(counted, tolerance_rule=True)
        for mine, theirs, tolerance in zip(
            agreed.recomputed, agreed.scores, agreed.tolerances, strict=True
        ):
            if mine.hex() == theirs.hex():
                continue
            gap, scale = abs(mine - theirs), max(abs(mine), abs(theirs))
            counted = replace(
                counted,
                within_tolerance=counted.within_tolerance + 1,
                largest_relative_difference=max(
                    counted.largest_relative_difference, gap / scale if scale else 0.0
                ),
                largest_share_of_tolerance=max(counted.largest_share_of_tolerance, gap / tolerance),
            )
        return counted


@dataclass(frozen=True)
class ReplayResult:
    """What the replay recomputed; equal to the verdict's fields when it succeeds."""

    indicators: str
    final: FinalState
    decision: str
    pairs: int
    #: Whether the oracle signed its answers and every signature verified (spec §10.8);
    #: False for an oracle whose Describe names no answer key ("answers unsigned").
    answers_signed: bool = False
    #: How the recorded scores agreed with the recomputed ones (spec §1.2, §12).
    agreement: ScoreAgreement = field(default_factory=lambda: ScoreAgreement(None, 0))


def _fail(message: str) -> VerificationError:
    return VerificationError(f"replay: {message}")


def replay(verdict: Verdict, transcript: bytes) -> ReplayResult:
    """Recompute the verdict's decision from ``transcript``; raise on any difference.

    Steps: (1) the transcript's chain head and record count equal the verdict's; (2)
    its header carries the verdict's claim; (3) its pairs are the verdict's opened
    pairs, in the audit order of the verdict's seed (without the pairs the claim map
    excludes), in the claim's windows; (4) per
    pair, the augmentation parameters are the PRG's, the scores follow from the
    recorded answers, and the outcome from the scores (and the tie coin); (5) the test
    fed these outcomes ends in the verdict's final state and decision; (6) the stop
    reason and the query count are the ones those pairs and that test give; (7)
    where the claim's Describe map names an answer key, every window's answers records
    cover its queries once and their signatures verify under that key (spec §10.8).
    The verdict's claim map was checked once, when the verdict was parsed.
    """
    head, count = chain_head(transcript)
    if head != verdict.transcript.hash or count != verdict.transcript.records:
        raise _fail("the transcript's hash chain is not the one the verdict signs")
    records = list(iter_records(transcript))
    if not records:
        raise _fail("the transcript has no header record")
    header = records[0]
    claim = verdict.claim
    answer_key = claim.oracle_info.answer_key
    pairs, batches = _split_records(records[1:], signed=bool(answer_key))
    if (
        set(header) != HEADER_KEYS
        or header["type"] != "header"
        or header["spec"] != SPEC_VERSION
        or encode(header["claim"]) != encode(claim.to_value())
    ):
        raise _fail("the transcript header does not carry the verdict's claim")
    seed = verdict.audit_seed
    opened = list(verdict.opened)
    # The order of §5.3 without the pairs the claim map excludes (§10.2 step 2).
    order = claim.order(seed)
    if [next(order, None) for _ in opened] != opened:
        raise _fail("the opened pairs do not follow the audit seed's order")
    if [p.get("index") for p in pairs] != opened:
        raise _fail("the transcript's pairs are not the opened pairs")
    for record in pairs:
        problem = check_pair_record(record, claim.score.function)
        if problem is not None:
            raise _fail(problem)
    if [p.get("window") for p in pairs] != _windows(claim, len(pairs)):
        raise _fail("the transcript's windows do not follow the claim's window schedule")
    scorer = scorer_for(claim.score, claim.fit_shape)
    info = claim.oracle_info
    test = claim.make_test()
    indicators = ""
    last = test.initial_step()
    score_map = claim.score.to_value()
    arithmetic = score_map.get("arithmetic") if isinstance(score_map, dict) else None
    agreement = ScoreAgreement(arithmetic if isinstance(arithmetic, str) else None, 0)
    for record in pairs:
        pair = _replay_pair(record, seed, scorer, info, claim)
        agreement = agreement.add(pair.agreed)
        fed = test.decision is Decision.CONTINUE
        if record.get("outcome") != (pair.char if fed else ""):
            raise _fail(f"pair {pair.index!r}: recorded outcome disagrees with the scores")
        if fed:
            indicators += pair.char
            step = feed(test, pair.char, pair.scores, pair.published, claim.score.tie_margin)
            if step is not None:
                last = step
    final = FinalState.from_step(last)
    decision = "detected" if test.decision is Decision.DETECTED else "not-detected"
    if indicators != verdict.indicators:
        raise _fail("the indicator string differs from the verdict's")
    if not _same_final(final, verdict.final) or decision != verdict.decision:
        raise _fail("the test's final state or decision differs from the verdict's")
    stop = stop_reason(
        test.decision is Decision.DETECTED,
        test.decision is Decision.EXHAUSTED,
        len(pairs),
        claim.population,
    )
    if verdict.stop != stop:
        raise _fail("the verdict's stop reason is not the one its pairs and test give")
    if verdict.queries != claim.queries_per_pair * len(pairs):
        raise _fail("the verdict's query count is not its opened pairs' (spec §12)")
    for window, window_batches in batches.items():
        check_window_answers(
            function=claim.score.function,
            k=claim.score.queries_per_version,
            answer_key=answer_key,
            claim_nonce=claim.claim_nonce,
            window=window,
            pairs=[p for p in pairs if p.get("window") == window],
            batches=window_batches,
        )
    return ReplayResult(indicators, final, decision, len(pairs), bool(answer_key), agreement)


def _split_records(
    records: list[dict[str, Value]], *, signed: bool
) -> tuple[list[dict[str, Value]], dict[int, list[dict[str, Value]]]]:
    """Return the pair records, and each window's answers records (spec §10.8, §12).

    Without an answer key every record after the header is a pair record. With one,
    each window's pair records are followed by its answers records, at least one, before
    the next window's pairs; the first record after the header is a pair record.
    """
    if not signed:
        return records, {}
    pairs: list[dict[str, Value]] = []
    batches: dict[int, list[dict[str, Value]]] = {}
    for record in records:
        if record.get("type") == "answers":
            if not pairs:
                raise _fail("an answers record comes before any pair record")
            last = pairs[-1].get("window")
            batches.setdefault(last if isinstance(last, int) else -1, []).append(record)
        else:
            window = record.get("window")
            if isinstance(window, int) and window in batches:
                raise _fail(f"a pair record of window {window} follows its answers records")
            previous = pairs[-1].get("window") if pairs else window
            if previous != window and previous not in batches:
                raise _fail(f"window {previous!r} has no signed answer batch")
            pairs.append(record)
    if pairs and pairs[-1].get("window") not in batches:
        raise _fail(f"window {pairs[-1].get('window')!r} has no signed answer batch")
    return pairs, batches


def _windows(claim: ClaimMap, count: int) -> list[int]:
    """Return the request number of each opened pair under the claim's schedule (§10.2)."""
    try:
        return claim.schedule.windows_of(count)
    except (ParameterError, ValueError) as exc:
        raise _fail(f"the claim's window schedule does not fit the transcript: {exc}") from exc


def _same_final(replayed: FinalState, recorded: FinalState) -> bool:
    """Compare final states: counts, interval and grades exactly, the log statistic loosely.

    The log e-value is informative only (the decision is made exactly, spec §7.3); it
    is not specified to the bit, so it must agree under the rule of §7.3.3
    (:func:`~twinaudit.protocol.stats.base.log_statistics_agree`), not bit for bit.
    """
    exact = ("draws", "successes", "interval", "grades")
    if [getattr(replayed, k) for k in exact] != [getattr(recorded, k) for k in exact]:
        return False
    mine, theirs = replayed.log_statistic, recorded.log_statistic
    if mine is None or theirs is None:
        return mine is theirs
    return log_statistics_agree(mine, theirs, replayed.draws)


@dataclass(frozen=True, slots=True)
class _ReplayedPair:
    """One pair's index, published version, scores (and how they agreed) and outcome."""

    index: int
    published: int
    scores: list[float]
    char: str
    agreed: AgreedScores


def _replay_pair(
    record: dict[str, Value],
    seed: bytes,
    scorer: AnyWindowScorer,
    info: OracleInfo,
    claim: ClaimMap,
) -> _ReplayedPair:
    """Recompute one pair's scores from its record and return them with its outcome."""
    index, published, recorded = record["index"], record["published"], record["scores"]
    # check_pair_record has checked the types.
    assert isinstance(index, int)
    assert isinstance(published, int)
    assert isinstance(recorded, list)
    try:
        agreed = scorer.agreed_scores(info, seed, record)
    except (OracleError, ParameterError, InputError) as exc:
        raise _fail(f"pair {index!r}: the recorded answers do not replay: {exc}") from None
    scores = agreed.scores
    char = outcome(
        scores,
        published,
        margin=claim.score.tie_margin,
        tie_rule=claim.tie_rule,
        seed=seed,
        index=index,
    )
    return _ReplayedPair(index, published, scores, char, agreed)
