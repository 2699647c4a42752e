"""The claim engine in-process: determinism, resume, budgets, tie rules, bad input, shuffling."""

import dataclasses
import os

import numpy as np
import pytest

from tests.support.claims import make_pairset, run_session
from tests.support.fake_oracle import LinearOracle
from twinaudit.protocol.claim.scores.classifier import ScoreSpec
from twinaudit.protocol.claim.transcript import TranscriptWriter, iter_records
from twinaudit.protocol.claim.verdict import parse_verdict
from twinaudit.protocol.commitment import PairOpening
from twinaudit.protocol.encoding import decode, encode
from twinaudit.protocol.errors import (
    InputError,
    OracleError,
    ParameterError,
    ProofError,
    RootMismatchError,
    StateError,
    VerificationError,
)
from twinaudit.protocol.oracles.base import ClassifyAnswer
from twinaudit.protocol.prg import without_replacement
from twinaudit.protocol.stats.base import TiePolicy
from twinaudit.verifier.claim import ClaimParams, ClaimRecord, ClaimSession, disclosed_pairs
from twinaudit.verifier.replay import replay

RHO = bytes(range(32))
NONCE = bytes(range(32, 64))
SCORE = ScoreSpec(k=2, perturbation="pad-shift-flip", knowledge="C1")


@pytest.fixture(scope="module")
def pair_set():
    return make_pairset(40)


def _session(pair_set, oracle=None, **params):
    record = ClaimRecord(0, pair_set.root, len(pair_set), "image", RHO, "2026-11-21T20:00:00Z")
    claim = ClaimParams(
        0,
        pair_set.root,
        "in-process",
        "linear",
        params.pop("score", SCORE),
        params.pop("test", "pprm-chernoff"),
        0.05,
        **params,
    )
    return ClaimSession.start("claim-1", record, claim, oracle or LinearOracle(), NONCE)


def _answer(session, pair_set, indices=None):
    indices = indices if indices is not None else session.next_request()
    return session.submit(
        [(i, pair_set.pair_opening(i), pair_set.opening(i).proof) for i in indices]
    )


def _openings(pair_set, indices):
    return [(i, pair_set.pair_opening(i), pair_set.opening(i).proof) for i in indices]


def _run(session, pair_set):
    while session.next_request():
        _answer(session, pair_set)
    return session


def _payload(session):
    return session.verdict_payload(arbiter="k", time="2026-11-21T21:00:00Z", environment={})


def test_same_inputs_same_verdict_payload(pair_set):
    first = _payload(_run(_session(pair_set), pair_set))
    second = _payload(_run(_session(pair_set), pair_set))
    assert encode(first) == encode(second)
    assert (
        first["opened"]
        == list(without_replacement(first["audit_seed"], 40))[: len(first["opened"])]
    )


def test_replay_of_every_configuration(pair_set):
    for test in ("pprm-chernoff", "mixture-e"):
        for tie_rule in TiePolicy:
            for score in (
                SCORE,
                ScoreSpec(k=2, perturbation="none", knowledge="C4"),
                ScoreSpec(k=3, perturbation="random-resized-crop", knowledge="C2"),
            ):
                oracle = LinearOracle(label_only=score.label_only)
                session = _run(
                    _session(pair_set, oracle, test=test, tie_rule=tie_rule, score=score), pair_set
                )
                verdict = parse_verdict(_payload(session))
                result = replay(verdict, session.transcript.to_bytes())
                assert result.indicators == verdict.indicators
                if tie_rule is TiePolicy.SKIP:
                    assert set(verdict.indicators) <= set("01s")
                else:
                    assert set(verdict.indicators) <= set("01ht")


def test_label_only_none_perturbation_ties_are_coins(pair_set):
    oracle = LinearOracle(label_only=True)
    score = ScoreSpec(k=2, perturbation="none", knowledge="C4")
    coin = _run(_session(pair_set, oracle, score=score, tie_rule=TiePolicy.COIN), pair_set)
    assert coin.indicators.count("h") + coin.indicators.count("t") > len(coin.indicators) // 2
    skip = _run(_session(pair_set, oracle, score=score, tie_rule=TiePolicy.SKIP), pair_set)
    assert skip.indicators.count("s") > len(skip.indicators) // 2
    assert skip.test.draws == len(skip.indicators) - skip.indicators.count("s")


def test_resume_equals_uninterrupted(pair_set):
    whole = _run(_session(pair_set, window=4), pair_set)
    part = _session(pair_set, window=4)
    _answer(part, pair_set)
    _answer(part, pair_set)
    state, transcript = part.checkpoint()
    resumed = ClaimSession.resume(state, transcript, part.record, part.params, LinearOracle())
    _run(resumed, pair_set)
    assert encode(_payload(resumed)) == encode(_payload(whole))


def test_a_claim_resumes_with_the_prior_it_started_with(pair_set):
    """A claim left open under grid15-v1 resumes under it after the default became grid16-v1.

    Its resume (a ClaimStart, which names no prior) gives the default; the claim keeps
    the prior its stored claim map names (spec §7.3.1), and ends as it would have.
    """
    whole = _run(_session(pair_set, window=4, test="mixture-e", prior="grid15-v1"), pair_set)
    part = _session(pair_set, window=4, test="mixture-e", prior="grid15-v1")
    _answer(part, pair_set)
    state, transcript = part.checkpoint()
    default = dataclasses.replace(part.params, prior=None)
    resumed = ClaimSession.resume(state, transcript, part.record, default, LinearOracle())
    assert resumed.claim.test_params["prior"] == "grid15-v1"
    _run(resumed, pair_set)
    assert encode(_payload(resumed)) == encode(_payload(whole))


def test_resume_from_checkpoints_joins_the_saved_parts(pair_set):
    whole = _run(_session(pair_set, window=4), pair_set)
    part = _session(pair_set, window=4)
    saved = b""
    for _ in range(3):
        _answer(part, pair_set)
        state, new = part.checkpoint()
        saved += new
    assert saved == part.transcript.to_bytes()
    assert part.checkpoint()[1] == b""  # nothing new since the last checkpoint
    resumed = ClaimSession.resume(state, saved, part.record, part.params, LinearOracle())
    _run(resumed, pair_set)
    assert encode(_payload(resumed)) == encode(_payload(whole))


def test_resume_refuses_a_transcript_that_is_not_the_snapshots(pair_set):
    part = _session(pair_set, window=4)
    _answer(part, pair_set)
    _answer(part, pair_set)
    state, transcript = part.checkpoint()
    records = list(iter_records(transcript))[:-1]
    shorter = TranscriptWriter()
    for record in records:
        shorter.append(record)
    with pytest.raises(InputError, match="transcript does not match"):
        ClaimSession.resume(state, shorter.to_bytes(), part.record, part.params, LinearOracle())


def test_lookahead_window_gives_the_same_verdict_and_is_dropped_at_a_stop(pair_set):
    """Preparing the next window while the current one is queried changes nothing."""
    serial = _run(_session(pair_set, window=3), pair_set)
    ahead = _session(pair_set, window=3)
    prepared = ahead.prepare(_openings(pair_set, ahead.next_request()))
    while True:
        answer = ahead.query(prepared)
        following = None
        if indices := ahead.request_ahead():
            assert ahead.request_ahead() == []  # at most one window ahead
            following = ahead.prepare(_openings(pair_set, indices))
        ahead.feed(prepared, answer)
        if ahead.stop is not None:
            break
        prepared = (
            following
            if following is not None
            else ahead.prepare(_openings(pair_set, ahead.next_request()))
        )
    assert encode(_payload(ahead)) == encode(_payload(serial))
    assert ahead.pending == [] and ahead.next_request() == []


def test_windows_are_fed_in_request_order(pair_set):
    session = _session(pair_set, window=2)
    first = session.prepare(_openings(pair_set, session.next_request()))
    second = session.prepare(_openings(pair_set, session.request_ahead()))
    with pytest.raises(StateError):
        session.feed(second, session.query(second))
    session.feed(first, session.query(first))
    session.feed(second, session.query(second))
    assert len(session.opened) == 2 + 4  # the second request is twice the first


def test_resume_refuses_a_different_model(pair_set):
    part = _session(pair_set)
    _answer(part, pair_set)
    with pytest.raises(InputError):
        ClaimSession.resume(*part.checkpoint(), part.record, part.params, LinearOracle(seed=9))


def test_query_budget_and_max_pairs(pair_set):
    budget = _run(_session(pair_set, query_budget=2 * 2 * 10, window=4), pair_set)
    assert budget.stop == "budget" and budget.queries <= 40 and len(budget.opened) == 10
    capped = _run(_session(pair_set, max_pairs=6, window=4), pair_set)
    assert len(capped.opened) == 6 and capped.stop in ("budget", "detected")


def test_no_verdict_before_the_claim_stops(pair_set):
    session = _session(pair_set)
    with pytest.raises(StateError):
        _payload(session)
    with pytest.raises(StateError):
        session.submit([])


def _mutations(pair_set, index):
    o = pair_set.opening(index)
    good = PairOpening(o.salt, o.version0, o.version1)
    return [
        # The arbiter holds only the root: a wrong salt or swapped versions give a
        # commitment that is not in the escrowed tree.
        (RootMismatchError, index, PairOpening(bytes(32), o.version0, o.version1), o.proof),
        (RootMismatchError, index, PairOpening(o.salt, o.version1, o.version0), o.proof),
        (ProofError, index, good, [*o.proof, bytes(32)]),
        (RootMismatchError, index, good, [bytes(32), *o.proof[1:]]),
    ]


def test_bad_openings_leave_the_session_unchanged(pair_set):
    session = _session(pair_set)
    indices = session.next_request()
    before = session.snapshot()
    first = indices[0]
    for error, index, opening, proof in _mutations(pair_set, first):
        rest = [(i, pair_set.pair_opening(i), pair_set.opening(i).proof) for i in indices[1:]]
        with pytest.raises(error):
            session.submit([(index, opening, proof), *rest])
        assert session.snapshot() == before
    with pytest.raises(InputError):  # out of order
        _answer(session, pair_set, list(reversed(indices)))
    with pytest.raises(InputError):  # repeated
        _answer(session, pair_set, [indices[0], *indices[:-1]])
    assert session.snapshot() == before
    _answer(session, pair_set, indices)  # the right openings still work
    assert session.opened == indices


def test_wrong_root_or_record():
    pair_set = make_pairset(8)
    record = ClaimRecord(0, pair_set.root, 8, "image", RHO, "2026-11-21T20:00:00Z")
    for index, root, error in [(0, bytes(32), RootMismatchError), (1, pair_set.root, InputError)]:
        claim = ClaimParams(index, root, "x", "m", SCORE, "mixture-e", 0.05)
        with pytest.raises(error):
            ClaimSession.start("c", record, claim, LinearOracle(), NONCE)


class RecordingOracle(LinearOracle):
    def __init__(self):
        super().__init__()
        self.batches = []

    def classify(self, images):
        self.batches.append(images.copy())
        return super().classify(images)


def test_queries_of_a_window_are_interleaved(pair_set):
    oracle = RecordingOracle()
    session = _session(pair_set, oracle, window=8)
    indices = session.next_request()
    _answer(session, pair_set, indices)
    (batch,) = oracle.batches
    assert batch.shape[0] == 8 * 2 * 2
    # The natural order would put each pair's four queries next to each other.
    natural = []
    for i in indices:
        o = pair_set.opening(i)
        natural += [o.version0, o.version0, o.version1, o.version1]
    sums = batch.reshape(batch.shape[0], -1).sum(axis=1)
    assert not np.all(np.diff(sums) == 0)
    assert len(set(np.round(sums, 3))) > 8


class BrokenOracle(LinearOracle):
    def __init__(self, fault):
        super().__init__()
        self.fault = fault

    def classify(self, images):
        answer = super().classify(images)
        probs = answer.probabilities.copy()
        if self.fault == "nan":
            probs[0, 0] = np.nan
        elif self.fault == "shape":
            probs = probs[:-1]
        elif self.fault == "sum":
            probs[0] *= 2
        return ClassifyAnswer(probabilities=probs)


@pytest.mark.parametrize("fault", ["nan", "shape", "sum"])
def test_malformed_oracle_answers_fail_the_window(pair_set, fault):
    session = _session(pair_set, BrokenOracle(fault))
    before = session.snapshot()
    with pytest.raises(OracleError) as info:
        _answer(session, pair_set)
    assert info.value.reason == "invalid-answer"
    assert session.snapshot() == before


def test_run_session_helper_detects_nothing_on_an_unrelated_model():
    session = run_session(make_pairset(60, seed=5), rho=os.urandom(32))
    assert session.stop in ("exhausted", "detected")


@pytest.mark.parametrize(("window", "window_max"), [(2, 0), (2, 2), (3, 8), (40, 40)])
def test_requests_follow_the_window_schedule(pair_set, window, window_max):
    """Request j asks for min(W·2^j, Wm) pairs (spec §10.2 step 3); 0 means 2W."""
    session = _session(pair_set, LinearOracle(), window=window, window_max=window_max)
    expected = session.schedule.sizes()
    sizes = []
    while indices := session.next_request():
        sizes.append(len(indices))
        _answer(session, pair_set, indices)
    assert sizes == expected[: len(sizes)]
    assert session.claim_map["window_max"] == (window_max or min(2 * window, 256))
    records = list(iter_records(session.transcript.to_bytes()))[1:]
    assert [r["window"] for r in records] == session.schedule.windows_of(len(records))


@pytest.mark.parametrize(("window", "window_max"), [(0, 0), (4, 2), (8, 257)])
def test_window_parameters_out_of_range(pair_set, window, window_max):
    with pytest.raises(ParameterError):
        _session(pair_set, window=window, window_max=window_max)


def test_replay_refuses_windows_that_do_not_follow_the_schedule(pair_set):
    """A transcript made with constant requests does not replay under a growing schedule."""
    session = _run(_session(pair_set, window=2, window_max=2, max_pairs=12), pair_set)
    payload = _payload(session)
    records = list(iter_records(session.transcript.to_bytes()))
    claim = dict(payload["claim"], window_max=4)  # says growing, the records are constant
    forged = TranscriptWriter()
    forged.append({**records[0], "claim": claim})
    for record in records[1:]:
        forged.append(record)
    payload = dict(
        payload,
        claim=claim,
        transcript={"hash": forged.head, "records": forged.count},
    )
    with pytest.raises(VerificationError, match="window schedule"):
        replay(parse_verdict(payload), forged.to_bytes())


def test_without_perturbation_k_copies_decide_as_one(pair_set):
    """`none` makes K identical copies: a deterministic model answers them alike."""
    for knowledge in ("C1", "C3"):
        runs = [
            _run(
                _session(
                    pair_set,
                    LinearOracle(label_only=knowledge == "C3"),
                    score=ScoreSpec(k=k, perturbation="none", knowledge=knowledge),
                    test="mixture-e",
                ),
                pair_set,
            )
            for k in (1, 4)
        ]
        assert runs[0].indicators == runs[1].indicators
        assert runs[0].opened == runs[1].opened and runs[0].stop == runs[1].stop
        assert runs[1].queries == 4 * runs[0].queries


def test_a_tie_margin_skips_the_pairs_whose_scores_are_close_and_replays(pair_set):
    """Spec §7.1: pairs within the margin tie (skipped); the replay applies the same margin."""
    plain_score = ScoreSpec(k=1, perturbation="none", knowledge="C2")
    plain = _run(_session(pair_set, score=plain_score, tie_rule=TiePolicy.SKIP), pair_set)
    plain_pairs = [r for r in iter_records(plain.transcript.to_bytes()) if "scores" in r]
    gaps = sorted(abs(r["scores"][0] - r["scores"][1]) for r in plain_pairs)
    margin = gaps[len(gaps) // 2]  # about half of the pairs fall within it
    score = ScoreSpec(k=1, perturbation="none", knowledge="C2", margin=margin)
    session = _run(_session(pair_set, score=score, tie_rule=TiePolicy.SKIP), pair_set)
    verdict = parse_verdict(_payload(session))
    assert verdict.claim.score.margin == margin
    pairs = [r for r in iter_records(session.transcript.to_bytes()) if "scores" in r]
    for record in pairs:
        close = abs(record["scores"][0] - record["scores"][1]) <= margin
        assert (record["outcome"] == "s") == close or record["outcome"] == ""
    assert 0 < verdict.indicators.count("s") < len(pairs)
    assert replay(verdict, session.transcript.to_bytes()).indicators == verdict.indicators
    # The same transcript claimed without its margin does not replay: the outcomes differ.
    payload = _payload(session)
    records = list(iter_records(session.transcript.to_bytes()))
    claim = dict(payload["claim"], score=plain_score.to_value())
    forged = TranscriptWriter()
    forged.append({**records[0], "claim": claim})
    for record in records[1:]:
        forged.append(record)
    payload = dict(payload, claim=claim, transcript={"hash": forged.head, "records": forged.count})
    with pytest.raises(VerificationError, match="outcome"):
        replay(parse_verdict(payload), forged.to_bytes())


@pytest.mark.parametrize("knowledge", ["C3", "C4"])
def test_label_only_claims_with_noise_copies_replay(pair_set, knowledge):
    score = ScoreSpec(k=4, perturbation="noise", knowledge=knowledge)
    oracle = LinearOracle(label_only=True)
    session = _run(_session(pair_set, oracle, test="mixture-e", score=score), pair_set)
    verdict = parse_verdict(_payload(session))
    assert verdict.claim.score.perturbation == "noise"
    result = replay(verdict, session.transcript.to_bytes())
    assert result.indicators == verdict.indicators
    # Noise copies rarely agree on a label near a linear model's boundary: not every pair ties.
    assert set(verdict.indicators) - {"s"}


# --- The saved state: the same size at every window; earlier states still resume --------
#
# The state holds counts, the test's state and the transcript's chain head (spec §10.2
# step 8); the opened pairs follow from the audit order and the indicators from the
# transcript. A state saved in the earlier layout (claim map, every opened pair and the
# indicators in it) must still resume and say what it disclosed: an arbiter upgraded in
# the middle of a claim carries on. LinearOracle(seed=5) is not the marks' model: its
# claims run long.


def _old_layout(session: ClaimSession) -> bytes:
    """The state as the arbiter saved it before the count replaced the opened pairs."""
    state = decode(session.snapshot())
    del state["format"]  # the earlier layout had none, and these three fields besides
    state.update(claim=session.claim_map, opened=session.opened, indicators=session.indicators)
    return encode(state)


def test_the_state_saved_after_every_window_does_not_grow(pair_set):
    session = _session(pair_set, LinearOracle(seed=5), window=2, window_max=2)
    sizes = []
    while session.stop is None and session.next_request():
        _answer(session, pair_set)
        state, _ = session.checkpoint()
        assert decode(state)["opened"] == len(session.opened)
        if session.stop is None:  # the last state also names the decision and the stop
            sizes.append(len(state))
    assert len(sizes) >= 10
    # Only the counts' encodings can lengthen (a byte or two as they pass 127, 255).
    assert max(sizes) - min(sizes) <= 8, sizes


def test_a_state_in_the_earlier_layout_resumes_to_the_same_verdict(pair_set):
    whole = _run(_session(pair_set, LinearOracle(seed=5), window=4), pair_set)
    part = _session(pair_set, LinearOracle(seed=5), window=4)
    _answer(part, pair_set)
    _answer(part, pair_set)
    _, transcript = part.checkpoint()
    old = _old_layout(part)
    resumed = ClaimSession.resume(old, transcript, part.record, part.params, LinearOracle(seed=5))
    assert resumed.opened == part.opened and resumed.indicators == part.indicators
    _run(resumed, pair_set)
    assert encode(_payload(resumed)) == encode(_payload(whole))
    header = transcript  # disclosed_pairs reads its first record, and not for the old layout
    new, _ = part.checkpoint()
    assert disclosed_pairs(old, part.record) == disclosed_pairs(new, part.record, header)


def test_a_resumed_claim_takes_its_pairs_and_indicators_from_the_transcript(pair_set):
    part = _session(pair_set, LinearOracle(seed=5), window=4)
    _answer(part, pair_set)
    _answer(part, pair_set)
    state, transcript = part.checkpoint()
    resumed = ClaimSession.resume(state, transcript, part.record, part.params, LinearOracle(seed=5))
    assert (resumed.opened, resumed.indicators) == (part.opened, part.indicators)
    assert decode(resumed.snapshot()) == decode(state)


def _with(state: bytes, **fields: object) -> bytes:
    value = decode(state)
    value.update(fields)
    return encode(value)


def test_a_state_that_does_not_fit_its_transcript_is_refused(pair_set):
    part = _session(pair_set, LinearOracle(seed=5), window=4)
    _answer(part, pair_set)
    _answer(part, pair_set)
    state, transcript = part.checkpoint()
    records = list(iter_records(transcript))
    no_header = TranscriptWriter()
    for record in records[1:]:
        no_header.append(record)
    cases = [
        (_with(state, opened=4), transcript, "its pairs are not"),
        (_with(state, opened=-1), transcript, "malformed"),
        (_with(state, opened=10_000), transcript, "more than it may open"),
        (_with(state, format=3), transcript, "format 3"),
        (_with(state, format=1), transcript, "format 1"),
        (_with(state, format=True), transcript, "format True"),
        (state, no_header.to_bytes(), "header"),
    ]
    for bad, saved, message in cases:
        with pytest.raises(InputError, match=message):
            ClaimSession.resume(bad, saved, part.record, part.params, LinearOracle(seed=5))
    with pytest.raises(InputError, match="header"):
        disclosed_pairs(state, part.record, b"")
