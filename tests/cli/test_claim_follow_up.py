"""The note ``owner claim`` prints after a label claim that found nothing: C2 where the
oracle answers probabilities, ``noise`` copies where it answers labels only."""

from __future__ import annotations

from dataclasses import replace

import pytest

from tests.support.claims import make_pairset, run_session, signed_verdict
from tests.support.fake_oracle import LinearOracle
from tests.support.keys import KEY
from twinaudit.cli.results import label_only_follow_up
from twinaudit.protocol.claim.scores.classifier import ScoreSpec
from twinaudit.protocol.claim.verdict import check_verdict

# Salts, rho and claim nonce fixed, so that every claim here is the same on every run:
# the untrained oracle's claims end NOT-DETECTED with them (with fresh salts a claim
# detects with probability up to p, which failed CI once).
SALTS, RHO, NONCE = b"follow-up-a", bytes(range(32)), bytes(range(32, 64))


def _verdict(knowledge: str, *, label_only: bool = False, family: str | None = None):
    k, family = (4, family or "pad-shift-flip") if knowledge == "C4" else (1, family or "dither")
    score = ScoreSpec(k=k, perturbation=family, knowledge=knowledge)
    oracle = LinearOracle(label_only=label_only)
    session = run_session(
        make_pairset(salt_seed=SALTS), oracle, score=score, rho=RHO, claim_nonce=NONCE
    )
    return check_verdict(signed_verdict(session, KEY), KEY.public_key())


@pytest.mark.parametrize("knowledge", ["C3", "C4"])
def test_a_label_claim_that_found_nothing_on_probabilities_names_the_c2_claim(knowledge):
    verdict = _verdict(knowledge)
    assert verdict.decision == "not-detected"
    note = label_only_follow_up(verdict)
    assert note is not None and note.startswith(f"{knowledge} counts only pairs")
    assert "--knowledge C2 --perturbation dither" in note and "weighed at 2p" in note
    assert "noaug" in note


@pytest.mark.parametrize("knowledge", ["C3", "C4"])
def test_a_label_claim_that_found_nothing_on_labels_only_names_the_noise_claim(knowledge):
    verdict = _verdict(knowledge, label_only=True)
    assert verdict.decision == "not-detected"
    note = label_only_follow_up(verdict)
    assert note is not None and note.startswith(f"{knowledge} counts only pairs")
    assert f"--knowledge {knowledge} --perturbation noise --copies 32" in note
    assert "weighed at 2p" in note and "C2" not in note


@pytest.mark.parametrize(
    ("knowledge", "label_only", "family"),
    [("C4", True, "noise"), ("C1", False, None), ("C2", False, None)],
    ids=["noise-already", "C1", "C2"],
)
def test_no_note_where_nothing_else_helps_or_was_not_the_gap(knowledge, label_only, family):
    verdict = _verdict(knowledge, label_only=label_only, family=family)
    assert verdict.decision == "not-detected"
    assert label_only_follow_up(verdict) is None


def test_a_noise_claim_on_probabilities_still_names_c2():
    verdict = _verdict("C4", family="noise")
    assert verdict.decision == "not-detected"
    assert "--knowledge C2 --perturbation dither" in str(label_only_follow_up(verdict))


def test_no_note_after_a_detection_and_the_bound_counts_earlier_claims():
    verdict = _verdict("C3")
    detected = replace(verdict, decision="detected", stop="detected")
    assert label_only_follow_up(detected) is None
    assert "weighed at 4p" in str(label_only_follow_up(replace(verdict, earlier_claims=2)))
