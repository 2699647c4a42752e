"""The paper's detector (protocol.stats.paper_test) and its threshold (protocol.stats.chernoff)."""

from __future__ import annotations

import decimal
import math
from fractions import Fraction

import numpy as np
import pytest

from twinaudit.protocol import limits
from twinaudit.protocol.encoding import decode, encode
from twinaudit.protocol.errors import InputError, LimitExceededError, ParameterError, StateError
from twinaudit.protocol.stats import chernoff
from twinaudit.protocol.stats.base import Decision
from twinaudit.protocol.stats.chernoff import chernoff_threshold, pairs_needed
from twinaudit.protocol.stats.paper_test import PaperTest, detection_boundary
from twinaudit.protocol.stats.pprm import pprm_interval

# --- threshold -------------------------------------------------------------------------

REFERENCE = [
    (0.05, 0.025, {100: 71, 1000: 562, 2500: 1348, 5000: 2638, 10000: 5194}),
    (0.001, 0.0005, {1000: 590, 5000: 2698, 10000: 5279}),
]


@pytest.mark.parametrize(("p", "alpha", "expected"), REFERENCE)
def test_threshold_reference_values(p: float, alpha: float, expected: dict[int, int]) -> None:
    for n, threshold in expected.items():
        assert chernoff_threshold(n, p - alpha) == threshold
        assert PaperTest(n, p, alpha).threshold == threshold


def linear_scan(N: int, log_budget: float) -> int | None:
    """First T in [ceil(N/2), N] with g(T) <= ln(budget), scanning every T in binary64."""
    T = np.arange((N + 1) // 2, N + 1, dtype=np.float64)
    g = T - N / 2 - T * np.log(2 * T / N)
    ok = np.flatnonzero(g <= log_budget)
    if ok.size:
        assert abs(g[ok[0]] - log_budget) > 1e-9  # far from a near-tie: floats suffice
    return int(T[ok[0]]) if ok.size else None


@pytest.mark.parametrize("budget", [0.025, 0.0005, 0.049, 0.3, 1e-12])
def test_threshold_search_agrees_with_linear_scan(budget: float) -> None:
    for N in [*range(1, 400), *range(400, 30_000, 997), limits.MAX_PAIRS]:
        expected = linear_scan(N, math.log(budget))
        if expected is None:
            with pytest.raises(ParameterError):
                chernoff_threshold(N, budget)
        else:
            assert chernoff_threshold(N, budget) == expected


def test_too_few_pairs_says_how_many_are_needed() -> None:
    assert pairs_needed(0.025) == 20
    assert chernoff_threshold(20, 0.025) == 20
    with pytest.raises(ParameterError, match="at least 20 pairs"):
        chernoff_threshold(19, 0.025)
    with pytest.raises(ParameterError, match="at least 40 pairs"):
        PaperTest(39, 0.001, 0.0005)
    assert PaperTest(40, 0.001, 0.0005).threshold == 40


def test_threshold_near_tie_is_decided_in_decimal(monkeypatch: pytest.MonkeyPatch) -> None:
    # A budget that is the binary64 number nearest the Chernoff bound at T = 700 of N = 1200:
    # whether T = 700 qualifies is then invisible to binary64 and must be settled exactly.
    N, T = 1200, 700
    budget = math.exp(T - N / 2 - T * math.log(2 * T / N))
    calls: list[int] = []
    original = chernoff._sign_decimal

    def spy(n: int, t: int, b: Fraction, digits: int) -> int:
        calls.append(t)
        return original(n, t, b, digits)

    monkeypatch.setattr(chernoff, "_sign_decimal", spy)
    got = chernoff_threshold(N, budget)
    assert T in calls
    # Independent check at 100 digits: does T satisfy g(T) <= ln(budget)?
    with decimal.localcontext(decimal.Context(prec=100)):
        g = T - decimal.Decimal(N) / 2 - T * (decimal.Decimal(2 * T) / N).ln()
        meets = g <= decimal.Decimal(budget).ln()
    assert got == (T if meets else T + 1)


@pytest.mark.parametrize(
    ("n", "budget", "error"),
    [
        (0, 0.025, ParameterError),
        (True, 0.025, ParameterError),
        (100, 0.0, ParameterError),
        (100, 1.0, ParameterError),
        (100, -0.1, ParameterError),
        (100, math.inf, ParameterError),
        (100, "0.025", ParameterError),
        (limits.MAX_PAIRS + 1, 0.025, LimitExceededError),
    ],
)
def test_threshold_rejects_bad_parameters(n: int, budget: float, error: type[Exception]) -> None:
    with pytest.raises(error):
        chernoff_threshold(n, budget)


# --- the detector ----------------------------------------------------------------------


def test_parameters_and_defaults() -> None:
    test = PaperTest(1000)
    assert test.name == "pprm-chernoff"
    assert test.parameters() == {"n_pairs": 1000, "p": 0.05, "alpha": 0.025, "threshold": 562}
    assert PaperTest(1000, 0.05, 0.01).threshold == chernoff_threshold(
        1000, Fraction(0.05) - Fraction(0.01)
    )


@pytest.mark.parametrize(
    ("args", "error"),
    [
        ((100, 0.05, 0.05), ParameterError),  # alpha = p
        ((100, 0.05, 0.06), ParameterError),  # alpha > p
        ((100, 0.05, 0.0), ParameterError),
        ((100, 1.0, None), ParameterError),
        ((100, 0.0, None), ParameterError),
        ((0, 0.05, None), ParameterError),
        ((10, 0.05, None), ParameterError),  # too few pairs for any threshold
        ((limits.MAX_PAIRS + 1, 0.05, None), LimitExceededError),
    ],
)
def test_constructor_rejects_bad_parameters(
    args: tuple[int, float, float | None], error: type[Exception]
) -> None:
    with pytest.raises(error):
        PaperTest(*args)


def run(test: PaperTest, bits: list[int]) -> list[Decision]:
    decisions = []
    for bit in bits:
        decisions.append(test.update(bit).decision)
        if decisions[-1] is not Decision.CONTINUE:
            break
    return decisions


def test_steps_report_the_interval_and_decide_on_the_lower_bound() -> None:
    test = PaperTest(200)
    rng = np.random.default_rng(1)
    S = 0
    for t, bit in enumerate((rng.random(200) < 0.8).astype(int).tolist(), start=1):
        step = test.update(bit)
        S += bit
        assert (step.draws, step.successes, step.log_statistic) == (t, S, None)
        assert step.interval == pprm_interval(200, t, S, 0.025)
        if step.decision is Decision.DETECTED:
            assert step.interval[0] >= test.threshold
            break
        assert step.interval[0] < test.threshold
    assert test.decision is Decision.DETECTED
    with pytest.raises(StateError):
        test.update(1)


def test_exhausts_when_no_detection() -> None:
    test = PaperTest(40, 0.05)
    decisions = run(test, [1, 0] * 20)
    assert decisions[-1] is Decision.EXHAUSTED
    assert len(decisions) == 40
    with pytest.raises(StateError):
        test.update(0)


@pytest.mark.parametrize("bit", [2, -1, 0.5, 1.0, "1", None])
def test_invalid_bits_are_rejected(bit: object) -> None:
    test = PaperTest(100)
    with pytest.raises(InputError):
        test.update(bit)  # type: ignore[arg-type]
    assert test.draws == 0


def test_state_round_trip_keeps_future_decisions() -> None:
    rng = np.random.default_rng(5)
    bits = (rng.random(600) < 0.62).astype(int).tolist()
    reference = PaperTest(600)
    expected = run(reference, bits)
    for cut in (0, 1, 37, len(expected) - 1):
        test = PaperTest(600)
        run(test, bits[:cut])
        restored = PaperTest.from_state(decode(encode(test.state())))  # type: ignore[arg-type]
        assert restored.state() == test.state()
        assert run(restored, bits[cut:]) == expected[cut:]


def test_finished_state_restores_finished() -> None:
    test = PaperTest(40)
    run(test, [1, 0] * 20)
    restored = PaperTest.from_state(test.state())
    assert restored.decision is Decision.EXHAUSTED
    with pytest.raises(StateError):
        restored.update(1)


def tampered(change: dict[str, object], params: dict[str, object] | None = None) -> dict:
    test = PaperTest(200)
    run(test, [1, 1, 0, 1, 0, 1, 1, 1])
    state = test.state()
    state.update(change)  # type: ignore[arg-type]
    if params is not None:
        state["params"] = {**state["params"], **params}  # type: ignore[dict-item]
    return state


@pytest.mark.parametrize(
    ("state", "code"),
    [
        (tampered({"decision": "detected"}), "invalid-input"),  # counts disagree with decision
        (tampered({"draws": 200}), "invalid-input"),  # exhausted counts recorded as continue
        (tampered({"successes": 9}), "invalid-input"),  # more ones than draws
        (tampered({"draws": 20, "successes": 20}), "invalid-input"),  # would have detected
        (tampered({"test": "mixture"}), "invalid-input"),
        (tampered({"extra": 1}), "invalid-input"),
        (tampered({}, {"threshold": 130}), "invalid-input"),  # wrong threshold (spec §7.4)
        (tampered({}, {"threshold": 129.0}), "invalid-input"),
        (tampered({}, {"alpha": 0.05}), "invalid-parameter"),  # alpha = p
        (tampered({}, {"p": 1}), "invalid-input"),
        (tampered({}, {"n_pairs": 10**9}), "limit-exceeded"),
        (tampered({}, {"extra": 1}), "invalid-input"),
        ({"test": "pprm-chernoff"}, "invalid-input"),
    ],
)
def test_tampered_states_are_rejected(state: dict, code: str) -> None:
    with pytest.raises(InputError) as info:
        PaperTest.from_state(state)
    assert info.value.code == code, info.value.diagnostics()


# --- detection boundary and false detection under H0 -----------------------------------


def test_detection_boundary_reproduces_the_detector() -> None:
    N = 300
    boundary = detection_boundary(N, 0.05, None, N)
    T = PaperTest(N).threshold
    for t, b in enumerate(boundary):
        assert t + 1 >= b >= 0
        if b <= t:
            assert pprm_interval(N, t, b, 0.025)[0] >= T
        if 1 <= b <= t + 1:
            assert pprm_interval(N, t, b - 1, 0.025)[0] < T
    rng = np.random.default_rng(11)
    for q in (0.5, 0.65, 0.8):
        for _ in range(10):
            bits = (rng.random(N) < q).astype(int)
            counts = np.cumsum(bits)
            hits = np.flatnonzero(counts >= np.array(boundary[1:]))
            decisions = run(PaperTest(N), bits.tolist())
            if hits.size:
                assert decisions[-1] is Decision.DETECTED
                assert len(decisions) == hits[0] + 1
            else:
                assert decisions[-1] is Decision.EXHAUSTED


def exact_false_detection(N: int, p: float) -> float:
    """P(detect) for iid Bernoulli(1/2) indicators, by dynamic programming over (t, S)."""
    boundary = detection_boundary(N, p, None, N)
    prob = np.zeros(N + 2)
    prob[0] = 1.0
    detected = 0.0
    for t in range(1, N + 1):
        nxt = 0.5 * prob
        nxt[1:] += 0.5 * prob[:-1]
        b = boundary[t]
        detected += nxt[b:].sum()
        nxt[b:] = 0.0
        prob = nxt
    return float(detected)


def simulated_false_detection(N: int, p: float, runs: int, seed: int) -> float:
    boundary = np.array(detection_boundary(N, p, None, N)[1:])
    rng = np.random.default_rng(seed)
    hits = 0
    for chunk in range(0, runs, 5000):
        bits = rng.integers(0, 2, size=(min(5000, runs - chunk), N), dtype=np.int16)
        hits += int((np.cumsum(bits, axis=1) >= boundary).any(axis=1).sum())
    return hits / runs


@pytest.mark.parametrize(("N", "runs"), [(200, 20_000), (1000, 10_000)])
def test_false_detection_under_h0(N: int, runs: int) -> None:
    p = 0.05
    exact = exact_false_detection(N, p)
    measured = simulated_false_detection(N, p, runs, seed=N)
    print(f"N={N}: exact P(detect | H0) = {exact:.3g}, simulated {measured:.3g} ({runs} runs)")
    assert exact <= p
    assert measured <= p
    assert abs(measured - exact) < 5 * math.sqrt(exact / runs) + 1e-3


def test_detects_under_strong_use() -> None:
    # Power sanity check: with q = 0.75 the detector nearly always fires well before N.
    N = 1000
    boundary = np.array(detection_boundary(N, 0.05, None, N)[1:])
    rng = np.random.default_rng(3)
    counts = np.cumsum(rng.random((500, N)) < 0.75, axis=1)
    hit = counts >= boundary
    assert hit.any(axis=1).mean() > 0.99
    assert np.median(hit.argmax(axis=1)) < N / 2
