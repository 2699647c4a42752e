"""Knowledge words (spec §10.1, §10.2 step 1): the verifier picks the strongest condition.

A claim may name ``labelled`` or ``unlabelled`` instead of C1–C4; the verifier resolves
the word from the oracle's Describe answer when the claim starts and records only the
resolved condition. The owner's client sends ``labelled`` for a vault whose items all
carry committed labels and ``unlabelled`` otherwise.
"""

from __future__ import annotations

import grpc
import pytest

from demo.seeded import SeededEntropy
from tests.support.claims import RawClaimStart, claim_params, make_pairset
from tests.support.data import synthetic_pairs
from tests.support.fake_oracle import LinearOracle
from tests.support.keys import KEY
from tests.support.pairset import PairSet
from twinaudit.owner.claim_client import (
    DEFAULT_MARGIN,
    ScoreChoice,
    choose_score,
    run_claim,
)
from twinaudit.owner.escrow_client import escrow_root
from twinaudit.protocol.claim.functions import resolve_score, score_request_from_fields
from twinaudit.protocol.claim.scores.classifier import ScoreSpec
from twinaudit.protocol.claim.scores.knowledge import PendingScoreSpec, resolve_knowledge
from twinaudit.protocol.claim.verdict import check_verdict, parse_verdict
from twinaudit.protocol.encoding import encode
from twinaudit.protocol.errors import InputError, ParameterError
from twinaudit.protocol.items import ImageItem, encode_item
from twinaudit.protocol.oracles.base import OracleInfo
from twinaudit.verifier.claim import ClaimParams, ClaimRecord, ClaimSession
from twinaudit.verifier.escrow.sqlite_store import SqliteEscrowStore
from twinaudit.verifier.replay import replay
from twinaudit.verifier.server import serve_arbiter
from twinaudit.verifier.service import params_from_proto
from twinaudit.wire.transport import ErrorDetails, error_details, make_channel

PROBABILITIES = OracleInfo("m", "d", ("classify",), "probabilities", 10, 8)
LABELS = OracleInfo("m", "d", ("classify",), "label", 10, 8)
RHO = bytes(range(32))
NONCE = bytes(range(32, 64))


# --- the resolution table ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("word", "info", "condition"),
    [
        ("labelled", PROBABILITIES, "C3"),
        ("labelled", LABELS, "C3"),
        ("unlabelled", PROBABILITIES, "C4"),
        ("unlabelled", LABELS, "C4"),
    ],
)
def test_words_resolve_to_the_strongest_condition(word, info, condition):
    assert resolve_knowledge(word, info) == condition
    request = score_request_from_fields("image-classifier", 4, "pad-shift-flip", word)
    assert isinstance(request, PendingScoreSpec)
    assert request.item_kind == "image" and request.function == "image-classifier"
    assert resolve_score(request, info) == ScoreSpec(
        k=4, perturbation="pad-shift-flip", knowledge=condition
    )


def test_conditions_pass_through_and_anything_else_is_invalid():
    for condition in ("C1", "C2", "C3", "C4"):
        assert resolve_knowledge(condition, LABELS) == condition
        request = score_request_from_fields("image-classifier", 2, "dither", condition)
        assert resolve_score(request, LABELS) == request  # resolution leaves it alone
    for bad in ("C5", "Labelled", "", "probabilities"):
        with pytest.raises(ParameterError, match="unknown knowledge condition") as info:
            score_request_from_fields("image-classifier", 1, "none", bad)
        assert info.value.code == "invalid-parameter"
        with pytest.raises(ParameterError):
            resolve_knowledge(bad, PROBABILITIES)
    with pytest.raises(ParameterError, match="k must be"):  # the other fields still checked
        score_request_from_fields("image-classifier", 0, "none", "labelled")
    with pytest.raises(ParameterError, match="takes no knowledge"):
        score_request_from_fields("image-encoder", 8, "pad-shift-flip", "labelled")
    with pytest.raises(ParameterError, match="does not offer 'classify'"):
        resolve_knowledge("labelled", OracleInfo("m", "d", ("embed-images",), "", 0, 8))


def test_score_spec_stays_strict():
    with pytest.raises(ParameterError, match="unknown knowledge condition"):
        ScoreSpec(k=1, perturbation="none", knowledge="labelled")
    with pytest.raises(ParameterError):
        ScoreSpec.from_value(
            {
                "function": "image-classifier",
                "k": 1,
                "perturbation": "none",
                "knowledge": "labelled",
            }
        )


# --- claims in-process ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def pair_set():
    return make_pairset(24)


def _session(pair_set, oracle, knowledge, **params):
    record = ClaimRecord(0, pair_set.root, len(pair_set), "image", RHO, "2026-11-21T20:00:00Z")
    score = score_request_from_fields("image-classifier", 2, "pad-shift-flip", knowledge)
    claim = ClaimParams(
        0, pair_set.root, "in-process", "linear", score, "mixture-e", 0.05, **params
    )
    return ClaimSession.start("claim-1", record, claim, oracle, NONCE)


def _run(session, pair_set):
    while indices := session.next_request():
        session.submit([(i, pair_set.pair_opening(i), pair_set.opening(i).proof) for i in indices])
    return session


@pytest.mark.parametrize(
    ("word", "label_only", "condition"),
    [("labelled", True, "C3"), ("labelled", False, "C3"), ("unlabelled", False, "C4")],
)
def test_claim_records_the_resolved_condition_and_replays(pair_set, word, label_only, condition):
    session = _run(_session(pair_set, LinearOracle(label_only=label_only), word), pair_set)
    assert session.claim_map["score"]["knowledge"] == condition
    assert session.score.knowledge == condition
    payload = session.verdict_payload(arbiter="k", time="2026-11-21T21:00:00Z", environment={})
    assert word.encode() not in encode(payload) + session.transcript.to_bytes()
    verdict = parse_verdict(payload)
    assert replay(verdict, session.transcript.to_bytes()).indicators == verdict.indicators
    # The same claim naming the condition itself gives the same verdict, byte for byte.
    explicit = _run(_session(pair_set, LinearOracle(label_only=label_only), condition), pair_set)
    assert encode(
        explicit.verdict_payload(arbiter="k", time="2026-11-21T21:00:00Z", environment={})
    ) == encode(payload)


def test_a_claim_with_a_word_resumes(pair_set):
    whole = _run(_session(pair_set, LinearOracle(label_only=True), "labelled", window=4), pair_set)
    part = _session(pair_set, LinearOracle(label_only=True), "labelled", window=4)
    part.submit(
        [(i, pair_set.pair_opening(i), pair_set.opening(i).proof) for i in part.next_request()]
    )
    state, transcript = part.checkpoint()
    resumed = ClaimSession.resume(
        state, transcript, part.record, part.params, LinearOracle(label_only=True)
    )
    _run(resumed, pair_set)
    assert resumed.claim_map == whole.claim_map
    assert resumed.indicators == whole.indicators


def test_explicit_probability_condition_on_a_label_only_oracle_is_refused(pair_set):
    for condition in ("C1", "C2"):
        with pytest.raises(ParameterError, match=f"{condition} needs probability vectors"):
            _session(pair_set, LinearOracle(label_only=True), condition)


def test_labelled_on_unlabelled_items_is_refused_at_the_opening():
    pairs = synthetic_pairs(8, seed=1, epsilon=16)
    unlabelled = PairSet.commit(
        "image",
        [
            tuple(encode_item(ImageItem(item.pixels, None)) for item in pairs.items(i))
            for i in range(8)
        ],
    )
    session = _session(unlabelled, LinearOracle(), "labelled")
    with pytest.raises(ParameterError, match="needs committed labels"):
        _run(session, unlabelled)


# --- through the service, with the owner's client ------------------------------------------


@pytest.fixture(scope="module")
def arbiter(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("arbiter")
    key = KEY
    store = SqliteEscrowStore(tmp / "escrow.db", key, entropy=SeededEntropy(b"rho"))
    oracles = {"probabilities": LinearOracle(), "labels": LinearOracle(label_only=True)}
    server, port = serve_arbiter(
        store, key, "127.0.0.1:0", oracle_factory=oracles.__getitem__, entropy=SeededEntropy(b"c")
    )
    channel = make_channel(f"127.0.0.1:{port}")
    pairs = make_pairset(16, seed=5)
    receipt = escrow_root(
        channel,
        root=pairs.root,
        n_pairs=len(pairs),
        item_kind="image",
        owner="owner",
        claim_key=pairs.claim_public_key(),
        arbiter_public_key=key.public_key(),
    ).receipt
    yield {"key": key, "channel": channel, "pairs": pairs, "index": receipt.entry.index}
    channel.close()
    server.stop(None)
    store.close()


def _claim(arbiter, oracle, *, raw=False, **score):
    fields = {"max_pairs": 8, **score}
    where = (arbiter["index"], arbiter["pairs"].root, oracle, oracle)
    # ``raw``: the unchecked field form, for a claim the owner's client refuses to build
    # (an unknown knowledge word), so that the verifier's refusal is what is tested.
    request = RawClaimStart(*where, **fields).to_proto() if raw else claim_params(*where, **fields)
    outcome = run_claim(
        arbiter["channel"],
        request,
        arbiter["pairs"].opening,
        claim_key=arbiter["pairs"].claim_key,
        timeout_s=60,
    )
    return check_verdict(outcome.verdict, arbiter["key"].public_key())


@pytest.mark.parametrize(
    ("has_labels", "oracle", "condition"),
    [
        (True, "labels", "C3"),
        (True, "probabilities", "C3"),
        (False, "labels", "C4"),
        (False, "probabilities", "C4"),
    ],
)
def test_default_knowledge_through_the_service(arbiter, has_labels, oracle, condition):
    choice = choose_score("image", has_labels=has_labels)
    assert choice.knowledge == ("labelled" if has_labels else "unlabelled")
    # Without labels the default asks for copies that differ: under C4 one label per
    # version scores every version alike (K = 4 here, to keep the test short).
    family = ("dither", 1) if has_labels else ("pad-shift-flip-dither", 32)
    assert (choice.perturbation, choice.k) == family
    score = {"knowledge": choice.knowledge, "k": 4, "perturbation": choice.perturbation}
    verdict = _claim(arbiter, oracle, **score)
    assert verdict.claim.score.knowledge == condition


def test_c4_asks_for_copies_that_differ_and_the_owner_is_told_before_filing_one_copy():
    for knowledge in ("C4", "unlabelled"):
        choice = choose_score("image", knowledge=knowledge)
        assert (choice.perturbation, choice.k, choice.margin) == ("pad-shift-flip-dither", 32, 0.0)
        with pytest.raises(ParameterError, match="every pair would tie") as info:
            choose_score("image", knowledge=knowledge, perturbation="dither")
        assert info.value.rule == "c4-one-copy"
        # Asked by the word, the refusal says what the word means and what else to ask.
        assert ("--knowledge C2" in str(info.value)) == (knowledge == "unlabelled")
    assert choose_score("image", knowledge="C4", k=8, perturbation="pad-shift-flip").k == 8


def test_c4_with_one_copy_is_refused_with_the_reason(arbiter):
    with pytest.raises(grpc.RpcError) as info:
        _claim(arbiter, "labels", raw=True, knowledge="unlabelled", k=1, perturbation="dither")
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "every pair would tie" in info.value.details()
    # The machine-readable part (spec §2.2): the code and the rule, in an ErrorInfo.
    assert error_details(info.value) == ErrorDetails(
        "invalid-parameter", "c4-one-copy", counted=False
    )
    # The owner's client refuses the same before contacting the arbiter.
    with pytest.raises(ParameterError, match="every pair would tie"):
        choose_score("image", knowledge="unlabelled", perturbation="dither")


def test_other_refusals_name_their_code_and_no_rule(arbiter):
    with pytest.raises(grpc.RpcError) as info:
        _claim(arbiter, "labels", knowledge="C2")
    assert error_details(info.value) == ErrorDetails("invalid-parameter", None, counted=False)


def test_client_default_is_unlabelled_and_explicit_c2_on_labels_is_refused(arbiter):
    # The raw field form's own default (no claim is sent): the word reaches the verifier,
    # with the copies C4 needs.
    assert RawClaimStart(0, bytes(32), "o", "m").knowledge == "unlabelled"
    start = RawClaimStart(0, bytes(32), "o", "m").to_proto()
    pending = params_from_proto(start).score
    assert isinstance(pending, PendingScoreSpec)
    assert resolve_score(pending, PROBABILITIES) == ScoreSpec(
        k=32, perturbation="pad-shift-flip-dither", knowledge="C4"
    )
    with pytest.raises(grpc.RpcError) as info:
        _claim(arbiter, "labels", knowledge="C2")
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "knowledge condition C2 needs probability vectors" in info.value.details()
    with pytest.raises(grpc.RpcError) as info:
        _claim(arbiter, "labels", knowledge="somewhat", raw=True)
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "unknown knowledge condition" in info.value.details()


# --- the owner's choice ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        ({"has_labels": True}, "labelled"),
        ({}, "unlabelled"),
        ({"has_labels": True, "knowledge": "C2"}, "C2"),
        ({"has_labels": True, "knowledge": "unlabelled"}, "unlabelled"),
        ({"has_labels": False, "knowledge": "C2"}, "C2"),
    ],
)
def test_choose_score_knowledge(options, expected):
    margin = DEFAULT_MARGIN if expected in ("C1", "C2") else 0.0
    # C4 (the word unlabelled) takes the training family at K = 32; the rest one dither copy.
    k, family = (32, "pad-shift-flip-dither") if expected == "unlabelled" else (1, "dither")
    expected_choice = ScoreChoice("image-classifier", k, family, expected, margin=margin)
    assert choose_score("image", **options) == expected_choice


@pytest.mark.parametrize("knowledge", ["C1", "C3", "labelled"])
def test_choose_score_refuses_labels_the_vault_does_not_have(knowledge):
    with pytest.raises(InputError, match="not every item of this vault carries one"):
        choose_score("image", knowledge=knowledge, has_labels=False)


def test_choose_score_refuses_an_unknown_word():
    with pytest.raises(ParameterError, match="unknown knowledge condition"):
        choose_score("image", knowledge="probabilities", has_labels=True)


def test_a_word_takes_no_margin_since_both_resolve_to_a_label_condition():
    for word in ("labelled", "unlabelled"):  # C3 and C4, whatever the oracle answers
        with pytest.raises(ParameterError, match="probability vectors"):
            score_request_from_fields("image-classifier", 2, "pad-shift-flip", word, margin=0.1)
    with pytest.raises(ParameterError, match="takes no tie margin"):
        score_request_from_fields("image-encoder", 8, "pad-shift-flip", "", margin=0.1)
    # The owner's side: a margin without --knowledge asks for a probability condition.
    assert choose_score("image", margin=0.1, has_labels=True).knowledge == "C1"
    assert choose_score("image", margin=0.1, has_labels=False).knowledge == "C2"
    # The verifier's reading of raw message fields (not the typed form read back).
    start = RawClaimStart(
        0, b"r" * 32, "o", "m", k=1, perturbation="dither", knowledge="C1", margin=0.1
    ).to_proto()
    assert params_from_proto(start).score == ScoreSpec(
        k=1, perturbation="dither", knowledge="C1", margin=0.1
    )
    with pytest.raises(InputError, match="--margin does not apply"):
        choose_score("text", margin=0.1)


def test_the_owner_asks_for_the_measured_margin_where_the_condition_reads_probabilities():
    assert choose_score("image", knowledge="C1", has_labels=True).margin == DEFAULT_MARGIN
    assert choose_score("image", knowledge="C2").margin == DEFAULT_MARGIN
    assert choose_score("image", has_labels=False).margin == 0.0  # unlabelled: C4
    assert choose_score("image", has_labels=True).margin == 0.0  # labelled: C3
    assert choose_score("image", knowledge="C4", k=2).margin == 0.0
    assert choose_score("image", knowledge="C2", statistic="logit").margin == 0.0
    assert choose_score("image", knowledge="C2", margin=0.0).margin == 0.0
    assert choose_score("image", knowledge="C2", margin=0.5).margin == 0.5
