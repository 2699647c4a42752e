"""Power and expected cost of a sequential test, by dynamic programming (no simulation).

Both registered tests detect at draw t exactly when the count of ones S_t reaches a
boundary b[t] (``detection_boundary`` of :mod:`.mixture` and :mod:`.paper_test`), so
the distribution of the stopping time follows from a forward recursion over
(t, S_t) restricted to the undetected region S_t < b[t]:

- **iid** indicators, Bernoulli(q): S_{t+1} = S_t + 1 with probability q;
- **population** draws without replacement from N pairs holding K ones:
  S_{t+1} = S_t + 1 with probability (K − S_t)/(N − t) (hypergeometric).

The result is P(no detection after t draws) for t = 0 … N, from which the detection
probability within N pairs and the expected number of pairs opened, E[min(τ, N)],
follow. The recursion is exact; it runs in binary64, so results carry rounding of
order 1e-12 relative. One step costs O(b[t]) vectorised work, O(N²) in all (well
under a second for N = 10⁴).

Ties (spec §7.1) are modelled for iid draws: each pair ties with probability
``tie_fraction``, independently; non-tied pairs have success rate q. Under ``coin``
the test sees Bernoulli((1 − τ)q + τ/2) on every pair; under ``skip`` it sees
Bernoulli(q) on the non-tied pairs only, while every opened pair still counts.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from ..errors import ParameterError
from .base import TiePolicy, check_probability
from .mixture import MixtureTest
from .mixture import detection_boundary as mixture_boundary
from .mixture_prior import DEFAULT_PRIOR, get_prior
from .oracle import oracle_boundary
from .paper_test import PaperTest
from .paper_test import detection_boundary as paper_boundary

FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True)
class Power:
    """Detection probability and expected cost of one test against one alternative."""

    #: P(the test detects within the N pairs).
    detection_probability: float
    #: E[pairs opened], counting every opened pair (tied pairs too under ``skip``).
    expected_pairs: float

    @classmethod
    def from_survival(cls, survival: FloatArray) -> Power:
        """Summarise P(no detection after n pairs), n = 0 … N."""
        return cls(float(1.0 - survival[-1]), float(survival[:-1].sum()))


def _check_rate(q: float) -> float:
    q = float(q)
    if not 0.0 <= q <= 1.0:
        raise ParameterError(f"q must lie in [0, 1], got {q!r}")
    return q


def _check_boundary(boundary: Sequence[int], n_pairs: int) -> None:
    if isinstance(n_pairs, bool) or not isinstance(n_pairs, int) or n_pairs < 1:
        raise ParameterError(f"n_pairs must be a positive integer, got {n_pairs!r}")
    if len(boundary) < n_pairs + 1:
        raise ParameterError(f"boundary covers {len(boundary) - 1} draws, need {n_pairs}")


def _survival(
    boundary: Sequence[int], n_pairs: int, rate: Callable[[int, int], FloatArray | float]
) -> FloatArray:
    """Run the forward recursion; ``rate(t, w)`` is P(next = 1) at counts 0 … w − 1."""
    _check_boundary(boundary, n_pairs)
    survival = np.zeros(n_pairs + 1)
    survival[0] = 1.0
    mass = np.ones(1)  # P(S_t = s, not detected), s = 0 … width − 1
    for t in range(1, n_pairs + 1):
        rise = mass * rate(t - 1, mass.size)
        nxt = np.append(mass - rise, 0.0)
        nxt[1:] += rise
        mass = nxt[: max(0, min(int(boundary[t]), nxt.size))]
        survival[t] = total = float(mass.sum())
        if total == 0.0:
            break
    return survival


def iid_survival(boundary: Sequence[int], n_pairs: int, q: float) -> FloatArray:
    """Return P(no detection after t draws), t = 0 … N, for iid Bernoulli(q) indicators."""
    q = _check_rate(q)
    return _survival(boundary, n_pairs, lambda t, width: q)


def population_survival(boundary: Sequence[int], n_pairs: int, ones: int) -> FloatArray:
    """Return P(no detection after t draws) for WoR draws from N pairs holding ``ones`` ones."""
    if isinstance(ones, bool) or not isinstance(ones, int) or not 0 <= ones <= n_pairs:
        raise ParameterError(f"ones must be an integer in [0, {n_pairs}], got {ones!r}")

    def rate(t: int, width: int) -> FloatArray:
        left = ones - np.arange(width, dtype=np.float64)
        return np.clip(left / (n_pairs - t), 0.0, 1.0)

    return _survival(boundary, n_pairs, rate)


def thinned_survival(test_survival: FloatArray, n_pairs: int, kept: float) -> FloatArray:
    """Return P(no detection after n opened pairs) when each pair feeds the test w.p. ``kept``.

    ``test_survival[k]`` is P(no detection after k indicators); the number of indicators
    among n opened pairs is Binomial(n, kept), independent of their values.
    """
    if not 0.0 < kept <= 1.0:
        raise ParameterError(f"kept must lie in (0, 1], got {kept!r}")
    survival = np.zeros(n_pairs + 1)
    survival[0] = 1.0
    pmf = np.zeros(n_pairs + 1)
    pmf[0] = 1.0
    for n in range(1, n_pairs + 1):
        pmf[1 : n + 1] = pmf[1 : n + 1] * (1.0 - kept) + pmf[:n] * kept
        pmf[0] *= 1.0 - kept
        survival[n] = float(pmf[: n + 1] @ test_survival[: n + 1])
    return survival


def boundary_for(
    test: str,
    n_pairs: int,
    p: float = 0.05,
    *,
    alpha: float | None = None,
    prior: str | None = None,
) -> list[int]:
    """Return the detection boundary b[0 … N] of the registered ``test`` at level ``p``."""
    if test == MixtureTest.name:
        if alpha is not None:
            raise ParameterError("the mixture test has no alpha")
        chosen = DEFAULT_PRIOR if prior is None else get_prior(prior)
        return mixture_boundary(p, n_pairs, chosen)
    if test == PaperTest.name:
        if prior is not None:
            raise ParameterError("the paper's test has no prior")
        return paper_boundary(n_pairs, p, alpha)
    raise ParameterError(f"unknown test {test!r}")


def _rates(q: float, tie_fraction: float, tie_rule: TiePolicy) -> tuple[float, float]:
    """Return (success rate of the indicators fed, fraction of opened pairs that feed one)."""
    if tie_rule is TiePolicy.COIN or not tie_fraction:
        return (1.0 - tie_fraction) * q + tie_fraction / 2, 1.0
    return q, 1.0 - tie_fraction


def _checked(p: float, q: float, draws: str, tie_fraction: float) -> float:
    check_probability("p", p)
    q = _check_rate(q)
    if not (0.0 <= tie_fraction < 1.0 and math.isfinite(tie_fraction)):
        raise ParameterError(f"tie_fraction must lie in [0, 1), got {tie_fraction!r}")
    if draws not in ("iid", "population"):
        raise ParameterError(f"draws must be 'iid' or 'population', got {draws!r}")
    if draws == "population" and tie_fraction:
        raise ParameterError("ties are modelled for iid draws only")
    return q


def _power(
    boundary: Sequence[int], n_pairs: int, q: float, draws: str, rates: tuple[float, float]
) -> Power:
    """Return the figures of a boundary test (arguments checked by :func:`_checked`)."""
    if draws == "population":
        return Power.from_survival(population_survival(boundary, n_pairs, round(q * n_pairs)))
    fed, kept = rates
    survival = iid_survival(boundary, n_pairs, fed)
    if kept < 1.0:
        survival = thinned_survival(survival, n_pairs, kept)
    return Power.from_survival(survival)


def plan(
    test: str,
    n_pairs: int,
    q: float,
    p: float = 0.05,
    *,
    draws: str = "iid",
    tie_fraction: float = 0.0,
    tie_rule: TiePolicy = TiePolicy.COIN,
    alpha: float | None = None,
    prior: str | None = None,
) -> Power:
    """Return the detection probability and expected pairs opened for one scenario.

    ``draws="iid"``: indicators are Bernoulli(q) on non-tied pairs, with ties as in the
    module docstring. ``draws="population"``: the N pairs hold round(q·N) ones and are
    opened in a uniformly random order (ties are not modelled: ``tie_fraction`` must be 0).
    """
    q = _checked(p, q, draws, tie_fraction)
    boundary = boundary_for(test, n_pairs, p, alpha=alpha, prior=prior)
    return _power(boundary, n_pairs, q, draws, _rates(q, tie_fraction, tie_rule))


def oracle_plan(
    n_pairs: int,
    q: float,
    p: float = 0.05,
    *,
    tie_fraction: float = 0.0,
    tie_rule: TiePolicy = TiePolicy.COIN,
) -> Power | None:
    """Return :func:`plan`'s iid figures for the SPRT that knows the rate (:mod:`.oracle`).

    The oracle is the SPRT for the success rate of the indicators it is fed: q under
    ``skip`` or without ties, (1 − τ)q + τ/2 under ``coin``. None when that rate is at
    most 1/2, where no such test exists. Not a protocol test: a yardstick.
    """
    q = _checked(p, q, "iid", tie_fraction)
    rates = _rates(q, tie_fraction, tie_rule)
    if rates[0] <= 0.5:
        return None
    if isinstance(n_pairs, bool) or not isinstance(n_pairs, int) or n_pairs < 1:
        raise ParameterError(f"n_pairs must be a positive integer, got {n_pairs!r}")
    return _power(oracle_boundary(rates[0], p, n_pairs), n_pairs, q, "iid", rates)
