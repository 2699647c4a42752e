"""The mixture test (twinaudit.protocol.stats.mixture), its priors and the power calculator."""

from __future__ import annotations

import decimal
import itertools
import math
import random
from fractions import Fraction

import numpy as np
import pytest

from twinaudit.protocol import limits
from twinaudit.protocol.encoding import decode, encode
from twinaudit.protocol.errors import InputError, LimitExceededError, ParameterError, StateError
from twinaudit.protocol.stats import mixture, power
from twinaudit.protocol.stats.base import Decision, TiePolicy, log_statistics_agree
from twinaudit.protocol.stats.mixture import (
    MixtureTest,
    detection_boundary,
    e_value,
    log_e_value,
    reaches,
)
from twinaudit.protocol.stats.mixture_prior import DEFAULT_PRIOR, PRIORS, GridPrior, get_prior

#: θ = 3/4 with weight 4 and θ = 1 with weight 1: M_1(1) = (4·3 + 1·4)/(5·2) = 8/5,
#: so p = 5/8 (a binary64 number) makes p·M_1 = 1 exactly.
TIE_PRIOR = GridPrior("tie-check", 4, ((3, 4), (4, 1)))


def brute_e_value(prior: GridPrior, t: int, s: int) -> Fraction:
    """M_t from its definition, term by term in Fractions."""
    total = Fraction(0)
    weight = sum(w for _, w in prior.atoms)
    for a, w in prior.atoms:
        theta = Fraction(a, prior.resolution)
        total += Fraction(w, weight) * (2 * theta) ** s * (2 * (1 - theta)) ** (t - s)
    return total


# --- priors ----------------------------------------------------------------------------


def test_default_prior_is_registered_and_valid() -> None:
    assert get_prior(DEFAULT_PRIOR.name) is DEFAULT_PRIOR
    assert DEFAULT_PRIOR.name == "grid16-v1"
    assert set(PRIORS) == {"grid15-v1", "grid16-v1"}
    for prior in PRIORS.values():
        thetas = [theta for theta, _ in prior.table()]
        assert all(0.5 < theta <= 1 for theta in thetas)
        assert math.isclose(sum(w for _, w in prior.table()), 1.0)
        assert prior.total_weight == 1000


def test_the_two_priors_share_atoms_and_detect_first_at_six_ones() -> None:
    """grid16-v1 is grid15-v1's atoms plus θ = 35/64 (spec §7.3.8); both detect 6 of 6."""
    old, new = get_prior("grid15-v1"), get_prior("grid16-v1")
    assert {a for a, _ in new.atoms} == {a for a, _ in old.atoms} | {1120}
    for prior in (old, new):
        boundary = detection_boundary(0.05, 13, prior)
        assert boundary[5] == 6 and boundary[6] == 6  # not at 5 ones, at 6 of 6
        assert detection_boundary(0.001, 13, prior)[12:] == [13, 13]


def test_a_test_restored_from_state_keeps_its_prior() -> None:
    """A verdict made under grid15-v1 replays under grid15-v1, whatever the default is."""
    old = MixtureTest(500, 0.05, "grid15-v1")
    new = MixtureTest(500, 0.05)
    bits = "1001101010" * 6  # 30 ones in 60: no detection
    run(old, bits)
    run(new, bits)
    assert old.state()["params"]["prior"] == "grid15-v1"  # type: ignore[index]
    back = MixtureTest.from_state(old.state())
    assert back.prior is get_prior("grid15-v1")
    assert back.state() == old.state()
    # The two priors give different statistics on the same bits.
    assert old.update(1).log_statistic != new.update(1).log_statistic


@pytest.mark.parametrize(
    ("resolution", "atoms"),
    [
        (3, ((3, 1),)),  # not a power of two
        (1, ((1, 1),)),
        (64, ()),
        (64, ((32, 1),)),  # θ = 1/2 is not allowed
        (64, ((65, 1),)),
        (64, ((40, 1), (40, 1))),  # not strictly increasing
        (64, ((44, 1), (40, 1))),
        (64, ((40, 0),)),
        (64, ((40, 1.0),)),
        (64, ((64, 1),)),  # θ = 1 alone would make M_t = 0 after any zero
    ],
)
def test_invalid_priors_are_rejected(resolution: int, atoms: tuple[tuple[int, int], ...]) -> None:
    with pytest.raises(ParameterError):
        GridPrior("bad", resolution, atoms)


def test_unknown_prior_name() -> None:
    with pytest.raises(ParameterError):
        get_prior("uniform")
    with pytest.raises(ParameterError):
        MixtureTest(100, 0.05, "uniform")


# --- exact statistic and decision ------------------------------------------------------


@pytest.mark.parametrize("prior", [*PRIORS.values(), TIE_PRIOR])
def test_e_value_matches_definition(prior: GridPrior) -> None:
    for t in range(40):
        for s in range(t + 1):
            exact = brute_e_value(prior, t, s)
            assert e_value(t, s, prior) == exact
            if t:
                assert math.isclose(log_e_value(t, s, prior), math.log(exact), abs_tol=1e-12)


def test_e_value_at_most_one_without_a_majority_of_ones() -> None:
    for t in range(80):
        for s in range(t // 2 + 1):
            assert e_value(t, s) <= 1
    rng = random.Random(7)
    for _ in range(200):
        t = rng.randrange(100, 100_000)
        assert log_e_value(t, rng.randrange(t // 2 + 1)) <= 1e-9


def test_martingale_under_h0_exactly() -> None:
    """E[M_{t+1} | t, S] = M_t when X ~ Bernoulli(1/2): a martingale, not just super."""
    for prior in (*PRIORS.values(), TIE_PRIOR):
        for t in range(30):
            for s in range(t + 1):
                step = (e_value(t + 1, s + 1, prior) + e_value(t + 1, s, prior)) / 2
                assert step == e_value(t, s, prior)


def test_e_value_monotone_in_successes_and_draws() -> None:
    for t in range(1, 60):
        for s in range(t):
            assert e_value(t, s + 1) > e_value(t, s)
            assert e_value(t + 1, s) <= e_value(t, s) <= e_value(t + 1, s + 1)


def exact_decision(prior: GridPrior, t: int, s: int, p: float) -> bool:
    return brute_e_value(prior, t, s) * Fraction(p) >= 1


@pytest.mark.slow
def test_decision_matches_fractions_on_many_points() -> None:
    rng = random.Random(2024)
    ps = [0.05, 0.01, 0.001, 0.1, 1 / 3, 0.5, 1e-6, 0.999]
    points = [(t, s) for t in range(1, 70) for s in range(t + 1)]
    points += [(t, rng.randrange(t // 2, t + 1)) for t in rng.sample(range(70, 400), 60)]
    for t, s in points:
        for p in [*ps, rng.uniform(1e-4, 0.2)]:
            assert reaches(t, s, p) == exact_decision(DEFAULT_PRIOR, t, s, p), (t, s, p)


def test_near_ties_follow_the_exact_rule() -> None:
    # At points where the e-value crosses 1/p, take p = the binary64 value nearest 1/M_t
    # and its neighbours: the decision must follow the rational comparison.
    boundary = detection_boundary(0.05, 300)
    checked = 0
    for t in (5, 6, 10, 37, 120, 300):
        s = boundary[t]
        if s > t:
            continue
        m = e_value(t, s)
        nearest = float(1 / m)
        for p in (math.nextafter(nearest, 0), nearest, math.nextafter(nearest, 1)):
            assert reaches(t, s, p) == (m * Fraction(p) >= 1)
            checked += 1
    assert checked >= 12


def test_exact_tie_detects() -> None:
    assert e_value(1, 1, TIE_PRIOR) == Fraction(8, 5)
    assert reaches(1, 1, 0.625, TIE_PRIOR)  # p·M = 1 exactly: ≥ holds
    assert not reaches(1, 1, math.nextafter(0.625, 0), TIE_PRIOR)
    assert mixture._reaches_exact(TIE_PRIOR, 1, 1, 0.625)


def test_decision_at_scale_is_fast_and_consistent() -> None:
    t = limits.MAX_PAIRS
    assert not reaches(t, t // 2, 0.05)
    assert reaches(t, t // 2 + 20 * math.isqrt(t), 0.05)
    assert log_e_value(t, t // 2 + 20 * math.isqrt(t)) > math.log(20)


@pytest.mark.parametrize(
    ("args", "error"),
    [
        ((10, 11, 0.05), ParameterError),
        ((-1, 0, 0.05), ParameterError),
        ((10, 5, 0.0), ParameterError),
        ((10, 5, 1.0), ParameterError),
        ((10, 5, math.nan), ParameterError),
        ((10, True, 0.05), ParameterError),
        ((limits.MAX_PAIRS + 1, 5, 0.05), LimitExceededError),
    ],
)
def test_decision_rejects_bad_arguments(args: tuple[int, int, float], error: type) -> None:
    with pytest.raises(error):
        reaches(*args)


# --- boundary --------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("p", [0.05, 0.001, 0.3])
def test_boundary_matches_brute_force(p: float) -> None:
    boundary = detection_boundary(p, 150)
    for t in range(151):
        least = next((s for s in range(t + 1) if exact_decision(DEFAULT_PRIOR, t, s, p)), t + 1)
        if t == 0:
            least = 1
        assert boundary[t] == least, t
    steps = np.diff(detection_boundary(p, 5000))
    assert set(steps.tolist()) <= {0, 1}


def test_boundary_does_not_depend_on_n() -> None:
    long = detection_boundary(0.05, 2000)
    assert detection_boundary(0.05, 500) == long[:501]


# --- the test object -------------------------------------------------------------------


def run(test: MixtureTest, bits: str) -> list[Decision]:
    decisions = []
    for bit in bits:
        decisions.append(test.update(int(bit)).decision)
        if decisions[-1] is not Decision.CONTINUE:
            break
    return decisions


def test_detects_on_the_boundary() -> None:
    boundary = detection_boundary(0.05, 100)
    first = next(t for t in range(101) if boundary[t] <= t)
    test = MixtureTest(100)
    decisions = run(test, "1" * 100)
    assert len(decisions) == first
    assert decisions[-1] is Decision.DETECTED
    assert test.draws == test.successes == first


def test_exhausts_without_signal() -> None:
    test = MixtureTest(40)
    decisions = run(test, "10" * 20)
    assert decisions[-1] is Decision.EXHAUSTED and len(decisions) == 40
    with pytest.raises(StateError):
        test.update(1)


def test_step_reports_log_statistic() -> None:
    test = MixtureTest(50)
    for bit in "1101":
        step = test.update(int(bit))
    assert step.interval is None
    assert step.log_statistic is not None
    assert math.isclose(step.log_statistic, math.log(e_value(4, 3)), abs_tol=1e-12)


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"n_pairs": 0}, ParameterError),
        ({"n_pairs": limits.MAX_PAIRS + 1}, LimitExceededError),
        ({"n_pairs": 10, "p": 0.0}, ParameterError),
        ({"n_pairs": 10, "p": 1.0}, ParameterError),
        ({"n_pairs": 10, "p": "0.05"}, ParameterError),
        ({"n_pairs": 10, "prior": "nope"}, ParameterError),
    ],
)
def test_constructor_validates(kwargs: dict[str, object], error: type) -> None:
    with pytest.raises(error):
        MixtureTest(**kwargs)  # type: ignore[arg-type]


def test_state_round_trip() -> None:
    test = MixtureTest(300, 0.01)
    for bit in "1011011101" * 3:
        test.update(int(bit))
    state = decode(encode(test.state()))
    assert isinstance(state, dict)
    back = MixtureTest.from_state(state)
    assert back.state() == test.state()
    assert back.update(1) == test.update(1)
    done = MixtureTest(100)
    run(done, "1" * 100)
    assert MixtureTest.from_state(done.state()).decision is Decision.DETECTED


def tampered_states() -> list[dict[str, object]]:
    test = MixtureTest(300)
    run(test, "1" * 4)  # not yet detected
    good = test.state()
    params = dict(good["params"])  # type: ignore[call-overload]
    return [
        {**good, "decision": "detected"},
        {**good, "successes": 5},
        {**good, "draws": 301},
        {**good, "test": "pprm-chernoff"},
        {**good, "params": {**params, "p": 0.5}},  # p = 0.5 would have detected
        {**good, "params": {**params, "p": 1}},
        {**good, "params": {**params, "prior": "uniform"}},
        {**good, "params": {**params, "extra": 1}},
        {**good, "params": {**params, "n_pairs": 3}},
        {**good, "params": [1, 2]},
        {**good, "extra": 1},
        {k: v for k, v in good.items() if k != "decision"},
    ]


@pytest.mark.parametrize("state", tampered_states())
def test_tampered_state_rejected(state: dict[str, object]) -> None:
    with pytest.raises(InputError):
        MixtureTest.from_state(state)  # type: ignore[arg-type]


# --- false detection under H0 ----------------------------------------------------------


def exact_null_fdr(p: float, n_pairs: int) -> Fraction:
    """P(detect within n_pairs | H0) by the forward recursion in Fractions."""
    boundary = detection_boundary(p, n_pairs)
    mass = {0: Fraction(1)}
    detected = Fraction(0)
    for t in range(1, n_pairs + 1):
        nxt: dict[int, Fraction] = {}
        for s, m in mass.items():
            for s2 in (s, s + 1):
                nxt[s2] = nxt.get(s2, Fraction(0)) + m / 2
        detected += sum(m for s, m in nxt.items() if s >= boundary[t])
        mass = {s: m for s, m in nxt.items() if s < boundary[t]}
    return detected


@pytest.mark.parametrize("p", [0.05, 0.01, 0.2])
def test_false_detection_exact_small(p: float) -> None:
    fdr = exact_null_fdr(p, 120)
    assert fdr <= Fraction(p)
    boundary = detection_boundary(p, 120)
    floated = power.Power.from_survival(power.iid_survival(boundary, 120, 0.5))
    assert math.isclose(floated.detection_probability, float(fdr), rel_tol=1e-9)


@pytest.mark.parametrize("p", [0.05, 0.001])
def test_false_detection_dp_large(p: float) -> None:
    boundary = detection_boundary(p, 10_000)
    fdr = power.Power.from_survival(power.iid_survival(boundary, 10_000, 0.5))
    assert fdr.detection_probability <= p


def test_false_detection_simulated() -> None:
    rng = np.random.default_rng(20240)
    runs, n, p = 20_000, 1000, 0.05
    boundary = np.asarray(detection_boundary(p, n)[1:])
    hits = 0
    for _ in range(runs // 5000):
        sums = np.cumsum(rng.integers(0, 2, size=(5000, n), dtype=np.int16), axis=1)
        hits += int((sums >= boundary).any(axis=1).sum())
    rate = hits / runs
    assert rate <= p + 3 * math.sqrt(p * (1 - p) / runs)


# --- power calculator ------------------------------------------------------------------


def brute_iid(boundary: list[int], n: int, q: float) -> tuple[float, float]:
    detect = pairs = 0.0
    for bits in itertools.product((0, 1), repeat=n):
        prob = math.prod(q if b else 1 - q for b in bits)
        s = 0
        for t, b in enumerate(bits, 1):
            s += b
            if s >= boundary[t]:
                detect += prob
                pairs += prob * t
                break
        else:
            pairs += prob * n
    return detect, pairs


def brute_population(boundary: list[int], n: int, ones: int) -> tuple[float, float]:
    detect = pairs = 0.0
    arrangements = list(itertools.combinations(range(n), ones))
    for where in arrangements:
        bits = [1 if i in where else 0 for i in range(n)]
        s, stop = 0, n
        for t, b in enumerate(bits, 1):
            s += b
            if s >= boundary[t]:
                detect += 1
                stop = t
                break
        pairs += stop
    return detect / len(arrangements), pairs / len(arrangements)


@pytest.mark.parametrize("q", [0.5, 0.7, 0.95])
def test_iid_power_matches_enumeration(q: float) -> None:
    n = 14
    boundary = detection_boundary(0.2, n)
    got = power.Power.from_survival(power.iid_survival(boundary, n, q))
    detect, pairs = brute_iid(boundary, n, q)
    assert math.isclose(got.detection_probability, detect, rel_tol=1e-12)
    assert math.isclose(got.expected_pairs, pairs, rel_tol=1e-12)


@pytest.mark.parametrize("ones", [7, 10, 14])
def test_population_power_matches_enumeration(ones: int) -> None:
    n = 14
    boundary = detection_boundary(0.2, n)
    got = power.Power.from_survival(power.population_survival(boundary, n, ones))
    detect, pairs = brute_population(boundary, n, ones)
    assert math.isclose(got.detection_probability, detect, rel_tol=1e-12, abs_tol=1e-15)
    assert math.isclose(got.expected_pairs, pairs, rel_tol=1e-12)


def test_skip_ties_matches_enumeration() -> None:
    n, q, tie = 10, 0.9, 0.5
    boundary = detection_boundary(0.2, n)
    got = power.plan("mixture-e", n, q, 0.2, tie_fraction=tie, tie_rule=TiePolicy.SKIP)
    detect = pairs = 0.0
    # each pair: tie (prob tie), one (prob (1-tie)q), zero (prob (1-tie)(1-q))
    for outcome in itertools.product((None, 1, 0), repeat=n):
        prob = math.prod(tie if o is None else (1 - tie) * (q if o else 1 - q) for o in outcome)
        t = s = 0
        stop = n
        for opened, o in enumerate(outcome, 1):
            if o is None:
                continue
            t, s = t + 1, s + o
            if s >= boundary[t]:
                detect += prob
                stop = opened
                break
        pairs += prob * stop
    assert math.isclose(got.detection_probability, detect, rel_tol=1e-9)
    assert math.isclose(got.expected_pairs, pairs, rel_tol=1e-9)


def test_coin_ties_dilute_the_rate() -> None:
    coin = power.plan("mixture-e", 500, 0.8, tie_fraction=0.5)
    direct = power.plan("mixture-e", 500, 0.65)
    assert coin == direct


def test_plan_validates() -> None:
    with pytest.raises(ParameterError):
        power.plan("nope", 100, 0.7)
    with pytest.raises(ParameterError):
        power.plan("mixture-e", 100, 1.5)
    with pytest.raises(ParameterError):
        power.plan("mixture-e", 100, 0.7, draws="population", tie_fraction=0.5)
    with pytest.raises(ParameterError):
        power.plan("mixture-e", 100, 0.7, draws="bootstrap")
    with pytest.raises(ParameterError):
        power.plan("mixture-e", 100, 0.7, alpha=0.01)
    with pytest.raises(ParameterError):
        power.plan("mixture-e", 100, 0.7, tie_fraction=1.0)
    with pytest.raises(ParameterError):
        power.iid_survival([1, 2], 5, 0.5)


def _exact_log_e_value(draws: int, successes: int, prior: GridPrior) -> float:
    """ln M_t from the exact terms, in 60-digit decimal arithmetic (correctly rounded ln)."""
    context = decimal.Context(prec=60)
    ln = context.ln
    failures = draws - successes
    terms = [
        ln(w) + successes * ln(a) + (failures * ln(prior.resolution - a) if failures else 0)
        for a, w in prior.atoms
        if not (failures and a == prior.resolution)
    ]
    top = max(terms)
    total = sum(context.exp(x - top) for x in terms)
    scale = ln(prior.total_weight) + draws * ln(prior.half_resolution)
    return float(top + ln(total) - scale)


def test_log_statistics_agree_by_the_draws() -> None:
    """Spec §7.3.3: a million draws near M_t = 1 need the slack that grows with t."""
    prior = get_prior("grid16-v1")
    exact = _exact_log_e_value(1_000_000, 501_595, prior)
    reference = log_e_value(1_000_000, 501_595, prior)
    assert abs(exact) < 0.01 and abs(reference - exact) > 1e-10  # cancellation at work
    assert not math.isclose(reference, exact, rel_tol=1e-9, abs_tol=1e-12)  # the old rule
    assert log_statistics_agree(reference, exact, 1_000_000)
    assert not log_statistics_agree(reference, exact, 0)


def test_log_statistics_agree_refuses() -> None:
    value = log_e_value(64, 40)
    assert log_statistics_agree(value, _exact_log_e_value(64, 40, get_prior("grid16-v1")), 64)
    assert not log_statistics_agree(value, value * (1 + 1e-6), 64)
    assert not log_statistics_agree(value, math.inf, 64)
    assert not log_statistics_agree(math.nan, math.nan, 64)
    assert log_statistics_agree(0.0, 1e-12, 0) and not log_statistics_agree(0.0, 3e-12, 1)
