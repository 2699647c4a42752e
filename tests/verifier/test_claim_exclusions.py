"""Claims that skip the pairs earlier claims opened (spec §10.1 ``excluded``, §10.2 step 2).

In process: the order is the seed's permutation without the excluded pairs, the test
runs over the pairs left, the claim map records them (and only when there are some),
replay recomputes the order from the verdict alone, a resumed claim keeps them, and
what an unfinished claim may have disclosed is its opened pairs and two requests more.
"""

import pytest

from tests.support.claims import make_pairset
from tests.support.fake_oracle import LinearOracle
from twinaudit.cli.verdict_plots import trajectory
from twinaudit.protocol.claim.claim_map import ClaimMap
from twinaudit.protocol.claim.order import claim_order
from twinaudit.protocol.claim.scores.classifier import ScoreSpec
from twinaudit.protocol.claim.verdict import parse_verdict
from twinaudit.protocol.encoding import encode
from twinaudit.protocol.errors import InputError, StateError, VerificationError
from twinaudit.protocol.prg import without_replacement
from twinaudit.verifier.claim import ClaimParams, ClaimRecord, ClaimSession, disclosed_pairs
from twinaudit.verifier.replay import replay

RHO = bytes(range(32))
SCORE = ScoreSpec(k=1, perturbation="none", knowledge="C1")
N = 40


@pytest.fixture(scope="module")
def pair_set():
    return make_pairset(N)


def _session(pair_set, nonce: int, excluded=(), **params):
    record = ClaimRecord(0, pair_set.root, len(pair_set), "image", RHO, "2026-11-21T20:00:00Z")
    claim = ClaimParams(
        0,
        pair_set.root,
        "in-process",
        "linear",
        SCORE,
        params.pop("test", "mixture-e"),
        0.05,
        **params,
    )
    return ClaimSession.start(
        f"claim-{nonce}", record, claim, LinearOracle(), bytes([nonce]) * 32, excluded=excluded
    )


def _run(session, pair_set):
    while indices := session.next_request():
        session.submit([(i, pair_set.pair_opening(i), pair_set.opening(i).proof) for i in indices])
    return session


def _payload(session, earlier=0):
    return session.verdict_payload(
        arbiter="k", time="2026-11-21T21:00:00Z", environment={}, earlier_claims=earlier
    )


def test_the_order_is_the_permutation_without_the_excluded_pairs():
    seed = bytes(range(32))
    excluded = [0, 3, 4, 17, 29]
    whole = list(without_replacement(seed, N))
    assert list(claim_order(seed, N, excluded)) == [i for i in whole if i not in excluded]
    assert list(claim_order(seed, N)) == whole


def test_a_second_claim_opens_none_of_the_first_claims_pairs_and_replays(pair_set):
    first = _run(_session(pair_set, 1, max_pairs=12), pair_set)
    excluded = sorted(first.opened)
    second = _run(_session(pair_set, 2, excluded=excluded), pair_set)
    assert not set(second.opened) & set(excluded)
    claim = second.claim_map
    assert claim["excluded"] == excluded
    # The test runs over the pairs left (spec §10.1).
    assert claim["test"]["params"]["n_pairs"] == N - len(excluded)  # type: ignore[index]
    assert second.claim.population == N - len(excluded)
    if second.stop == "exhausted" and second.test.decision.value != "exhausted":
        assert len(second.opened) == N - len(excluded)
    verdict = parse_verdict(_payload(second, earlier=1))
    assert replay(verdict, second.transcript.to_bytes()).indicators == verdict.indicators


def test_a_clean_run_over_the_pairs_left_stops_exhausted_after_all_of_them(pair_set):
    excluded = list(range(0, N, 3))
    session = _run(_session(pair_set, 3, excluded=excluded, test="mixture-e"), pair_set)
    if session.stop != "detected":
        assert session.stop == "exhausted"
    left = N - len(excluded)
    if session.stop == "exhausted" and len(session.opened) < left:
        assert session.test.decision.value == "exhausted"
    assert sorted(session.opened) == sorted(set(session.opened))
    assert len(session.opened) <= left


def test_no_exclusions_leaves_the_claim_map_as_it_was(pair_set):
    plain = _run(_session(pair_set, 4), pair_set)
    empty = _run(_session(pair_set, 4, excluded=[]), pair_set)
    assert "excluded" not in plain.claim_map
    assert encode(_payload(plain)) == encode(_payload(empty))


def test_a_claim_with_no_pair_left_is_refused(pair_set):
    with pytest.raises(StateError):
        _session(pair_set, 5, excluded=range(N))
    with pytest.raises(InputError):
        _session(pair_set, 5, excluded=[N])


def test_resume_keeps_the_exclusions(pair_set):
    excluded = [1, 2, 3, 5, 8, 13, 21, 34]
    whole = _run(_session(pair_set, 6, excluded=excluded, window=2), pair_set)
    part = _session(pair_set, 6, excluded=excluded, window=2)
    indices = part.next_request()
    part.submit([(i, pair_set.pair_opening(i), pair_set.opening(i).proof) for i in indices])
    if part.stop is None:
        state, _ = part.checkpoint()
        resumed = ClaimSession.resume(
            state, part.transcript.to_bytes(), part.record, part.params, LinearOracle()
        )
        _run(resumed, pair_set)
        assert encode(_payload(resumed)) == encode(_payload(whole))


def test_an_unfinished_claim_discloses_its_opened_pairs_and_two_requests_more(pair_set):
    session = _session(pair_set, 7, window=2, window_max=4)
    indices = session.next_request()
    session.submit([(i, pair_set.pair_opening(i), pair_set.opening(i).proof) for i in indices])
    assert session.stop is None
    state, _ = session.checkpoint()
    order = list(without_replacement(session.seed, N))
    # Opened: request 0 (2 pairs); then requests 1 and 2 (4 and 4) may have gone out.
    header = session.transcript.to_bytes()  # disclosed_pairs reads its first record only
    assert disclosed_pairs(state, session.record, header) == order[: 2 + 4 + 4]


def test_a_claim_map_read_back_checks_its_exclusions(pair_set):
    session = _run(_session(pair_set, 8, excluded=[2, 7, 9]), pair_set)
    claim = session.claim_map
    assert ClaimMap.from_value(claim).excluded == (2, 7, 9)
    for bad in ([7, 2, 9], [2, 2, 9], [], [2, 7, N], [True, 7, 9], list(range(N))):
        with pytest.raises(InputError):
            ClaimMap.from_value({**claim, "excluded": bad})
    # A test parameter map over all N pairs does not fit a claim that excludes three.
    whole = _session(pair_set, 8).claim_map["test"]
    with pytest.raises(InputError):
        ClaimMap.from_value({**claim, "test": whole})


def test_a_verdict_that_opened_an_excluded_pair_is_refused(pair_set):
    session = _run(_session(pair_set, 9, excluded=[4, 5]), pair_set)
    payload = _payload(session, earlier=1)
    claim = dict(payload["claim"])  # type: ignore[arg-type]
    claim["excluded"] = sorted([*claim["excluded"], payload["opened"][0]])  # type: ignore[list-item]
    with pytest.raises(InputError):
        parse_verdict({**payload, "claim": claim})
    # Replay of a verdict whose exclusions were dropped: the claim map no longer fits.
    dropped = {k: v for k, v in payload["claim"].items() if k != "excluded"}  # type: ignore[union-attr]
    with pytest.raises((InputError, VerificationError)):
        replay(parse_verdict({**payload, "claim": dropped}), session.transcript.to_bytes())


def test_the_plot_of_a_paper_test_claim_that_excludes_pairs_runs_over_the_pairs_left(pair_set):
    """The report's plot recomputes the test over the claim's pairs, as replay does (§10.1)."""
    excluded = list(range(0, N, 3))
    session = _run(_session(pair_set, 4, excluded=excluded, test="pprm-chernoff"), pair_set)
    verdict = parse_verdict(_payload(session, earlier=1))
    path = trajectory(verdict)  # over all N pairs, the interval disagreed with the verdict's
    assert verdict.final.interval is not None
    assert path.final["interval"] == list(verdict.final.interval)
    assert path.threshold == verdict.claim.test_params["threshold"]
    assert path.upper_start == N - len(excluded)
