"""How close to the oracle SPRT any test can come: a lower bound by backward induction.

A test here opens pairs one at a time and stops only when it detects or when the N
pairs run out, like every registered test; its false-detection rate within N pairs
is at most p. For success rates q_j with weights w_j ≥ 0 and a price c ≥ 0, every
such test τ satisfies

    Σ_j λ_j E_{q_j}[min(τ, N)] + c · P_{1/2}(τ ≤ N)  ≥  V(λ, c),     λ_j = w_j / E_j,

where E_j is the oracle SPRT's expected pairs at q_j (:mod:`.oracle`) and V is the
least value of the left side over all stopping rules, randomised or not. Since
P_{1/2}(τ ≤ N) ≤ p, the test's worst ratio to the oracle over the q_j is at least

    max_j E_{q_j}[min(τ, N)] / E_j  ≥  (V(λ, c) − c·p) / Σ_j w_j.

That is the bound this module computes: any (w, c) gives a valid one, and the best
(w, c) give the least worst ratio any test can reach over those rates (linear
programming duality). A test valid for every q > 1/2 and at every t, such as the
mixture test, is one such test, so the bound holds for every prior.

V is a Bayes optimal stopping problem whose state is (t, S): with a path's
probability under q written q^S (1 − q)^F, the cost of a path prefix scaled by 2^t is

    W(t, S) = min(c, Σ_j λ_j (2q_j)^S (2(1 − q_j))^F + (W(t+1, S+1) + W(t+1, S)) / 2),

W(N, S) = 0, and V = W(0, 0): stop (detect) and pay c times the path's null
probability, or open one more pair and pay its probability under each q_j. The
continuation cost grows with S, so the optimal rule detects exactly when S ≥ b[t], a
boundary test like the registered ones. The recursion runs in binary64 over the
(N + 1)(N + 2)/2 states, O(N² · number of rates): seconds for N = 5,000 and a few
rates. Rounding is of order 1e-12 relative, far below the digits reported.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from ..errors import ParameterError
from .base import check_probability
from .oracle import oracle_boundary
from .power import Power, iid_survival

#: exp() of anything above this is clipped: the cost is then far above any price c.
_CLIP = 700.0


@dataclass(frozen=True)
class BayesRule:
    """The stopping rule that minimises Σ_j λ_j E_j[min(τ, N)] + c·P_{1/2}(τ ≤ N)."""

    #: The minimum, V(λ, c).
    value: float
    #: b[t], t = 0 … N: the rule detects after t draws when the count of ones reaches b[t].
    boundary: list[int]


def _check(rates: Sequence[float], costs: Sequence[float], n_pairs: int) -> None:
    if isinstance(n_pairs, bool) or not isinstance(n_pairs, int) or n_pairs < 1:
        raise ParameterError(f"n_pairs must be a positive integer, got {n_pairs!r}")
    if not rates or len(rates) != len(costs):
        raise ParameterError("need one cost per rate, and at least one rate")
    for q in rates:
        if not (math.isfinite(q) and 0.5 < q < 1.0):
            raise ParameterError(f"rates must lie in (1/2, 1), got {q!r}")
    for value in costs:
        if not (math.isfinite(value) and value >= 0.0):
            raise ParameterError(f"costs must be finite and nonnegative, got {value!r}")


def bayes_rule(
    rates: Sequence[float], costs: Sequence[float], price: float, n_pairs: int
) -> BayesRule:
    """Return the least Σ_j costs_j E_{rates_j}[min(τ, N)] + price·P_{1/2}(τ ≤ N), and its rule.

    ``rates`` lie in (1/2, 1), ``costs`` (λ_j) and ``price`` (c) are nonnegative.
    """
    _check(rates, costs, n_pairs)
    if not (math.isfinite(price) and price >= 0.0):
        raise ParameterError(f"price must be finite and nonnegative, got {price!r}")
    q = np.asarray(rates, dtype=np.float64)[:, None]
    lam = np.asarray(costs, dtype=np.float64)[:, None]
    keep = lam[:, 0] > 0
    q, lam = q[keep], lam[keep]
    up, down, scale = np.log(2 * q), np.log(2 * (1 - q)), np.log(lam)
    later = np.zeros(n_pairs + 1)  # W(N, S) = 0
    boundary = [0] * (n_pairs + 1)
    boundary[n_pairs] = n_pairs + 1
    for t in range(n_pairs - 1, -1, -1):
        ones = np.arange(t + 1, dtype=np.float64)[None, :]
        step = np.exp(np.minimum(scale + ones * up + (t - ones) * down, _CLIP)).sum(axis=0)
        cont = step + 0.5 * (later[1 : t + 2] + later[: t + 1])
        stop = cont >= price
        later = np.where(stop, price, cont)
        boundary[t] = int(np.argmax(stop)) if stop.any() else t + 1
    return BayesRule(float(later[0]), boundary)


def oracle_pairs(q: float, p: float, n_pairs: int) -> float:
    """Return the oracle SPRT's expected pairs E[min(τ, N)] at q (iid Bernoulli(q) draws)."""
    survival = iid_survival(oracle_boundary(q, p, n_pairs), n_pairs, q)
    return Power.from_survival(survival).expected_pairs


def ratio_lower_bound(
    weights: Mapping[float, float], price: float, p: float, n_pairs: int
) -> float:
    """Return a lower bound on max_j E_{q_j}[min(τ, N)] / (the oracle's) over level-p tests.

    ``weights`` maps each rate q_j in (1/2, 1) to w_j ≥ 0 (not all 0); ``price`` is c.
    Every test that stops only to detect, or when its N pairs run out, and detects
    within N pairs with probability at most p under H0, has a worst ratio at least
    this (module docstring). Any weights and price give a valid bound.
    """
    p = check_probability("p", p)
    rates = sorted(weights)
    total = sum(weights[q] for q in rates)
    if not total > 0:
        raise ParameterError("the weights must not all be zero")
    costs = [weights[q] / oracle_pairs(q, p, n_pairs) if weights[q] else 0.0 for q in rates]
    rule = bayes_rule(rates, costs, price, n_pairs)
    return (rule.value - price * p) / total
