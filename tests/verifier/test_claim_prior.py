"""A claim's mixture prior (spec §7.3.1): new claims get the default, old ones keep theirs.

In process: a claim started without a prior records ``grid16-v1``; one made under
``grid15-v1`` (the default before, issue #39) records it, its claim map reads back, its
verdict replays under it; a claim map naming an unknown prior, or a prior on the paper's
test, is refused.
"""

import pytest

from tests.support.claims import make_pairset
from tests.support.fake_oracle import LinearOracle
from twinaudit.protocol.claim.claim_map import ClaimMap
from twinaudit.protocol.claim.scores.classifier import ScoreSpec
from twinaudit.protocol.claim.verdict import parse_verdict
from twinaudit.protocol.errors import InputError, ParameterError
from twinaudit.verifier.claim import ClaimParams, ClaimRecord, ClaimSession
from twinaudit.verifier.replay import replay

RHO = bytes(range(32))
SCORE = ScoreSpec(k=1, perturbation="none", knowledge="C1")


@pytest.fixture(scope="module")
def pair_set():
    return make_pairset(40)


def _claim(pair_set, nonce: int, test: str = "mixture-e", prior: str | None = None):
    record = ClaimRecord(0, pair_set.root, len(pair_set), "image", RHO, "2026-11-21T20:00:00Z")
    params = ClaimParams(0, pair_set.root, "in-process", "linear", SCORE, test, 0.05, prior=prior)
    session = ClaimSession.start(
        f"claim-{nonce}", record, params, LinearOracle(), bytes([nonce]) * 32
    )
    while indices := session.next_request():
        session.submit([(i, pair_set.pair_opening(i), pair_set.opening(i).proof) for i in indices])
    return session


def _verdict(session):
    return session.verdict_payload(
        arbiter="k", time="2026-11-21T21:00:00Z", environment={}, earlier_claims=0
    )


@pytest.mark.parametrize("test", ["mixture-e", "mixture-graded"])
def test_a_new_claim_gets_the_default_prior_and_an_old_one_keeps_its_own(pair_set, test):
    new = _claim(pair_set, 1, test)
    old = _claim(pair_set, 1, test, prior="grid15-v1")
    assert new.claim_map["test"]["params"]["prior"] == "grid16-v1"
    assert old.claim_map["test"]["params"]["prior"] == "grid15-v1"
    for session in (new, old):
        claim = ClaimMap.from_value(session.claim_map)
        assert claim.make_test().parameters() == session.claim_map["test"]["params"]
        verdict = parse_verdict(_verdict(session))
        replay(verdict, session.transcript.to_bytes())  # raises if it does not replay


def test_a_claim_map_naming_an_unknown_prior_is_refused(pair_set):
    claim = _claim(pair_set, 2, prior="grid15-v1").claim_map
    test = claim["test"]
    for bad in ("uniform", "", 3):
        params = {**test["params"], "prior": bad}
        with pytest.raises(InputError):
            ClaimMap.from_value({**claim, "test": {**test, "params": params}})
    paper = _claim(pair_set, 3, "pprm-chernoff").claim_map
    params = {**paper["test"]["params"], "prior": "grid15-v1"}
    with pytest.raises(InputError):
        ClaimMap.from_value({**paper, "test": {**paper["test"], "params": params}})
    with pytest.raises(ParameterError):
        _claim(pair_set, 4, "pprm-chernoff", prior="grid15-v1")
