"""The sequential probability ratio test that knows q: the yardstick for the tests' cost.

An owner does not know the success rate q of her pairs' indicators, so no registered
test can be tuned to it. The test that does know it, Wald's one-sided SPRT of
H0: Bernoulli(1/2) against H1: Bernoulli(q), is the reference its cost is judged
against (issue #39): after t indicators with S ones and F = t − S zeros its statistic
is the likelihood ratio

    Λ_t = (2q)^S · (2(1 − q))^F,

a nonnegative martingale with Λ_0 = 1 under H0, and it detects as soon as Λ_t ≥ 1/p,
which keeps P(false detection) ≤ p at every stopping time by Ville's inequality, as
the mixture test does (a mixture test is an average of such ratios over a prior on q).
At that one q no test of level p opens many fewer pairs in expectation: any test that
detects with probability β under q opens at least kl(β, p)/KL(q ‖ 1/2) pairs on
average (Wald's identity and the data-processing inequality), about ln(1/p)/KL(q ‖ 1/2),
which is what the SPRT needs up to its overshoot. A test valid for every q > 1/2
cannot match it at every q at once.

It is not a protocol test: no claim can name it. :func:`oracle_boundary` gives its
detection boundary, decided exactly like the mixture test's (binary64 where a margin
separates the sides, integers otherwise), for :mod:`.power` to compute its expected
pairs by the same recursion as the registered tests'.
"""

from __future__ import annotations

import math
import sys

from ..errors import ParameterError
from .base import check_probability
from .mixture import stepwise_boundary

#: Relative error allowed for each binary64 term, as in :mod:`.mixture`.
_FLOAT_MARGIN = 64 * sys.float_info.epsilon
_TINY = 2.0**-40


def _reaches(q: float, p: float, draws: int, successes: int) -> bool:
    """Return whether (2q)^S (2(1 − q))^F ≥ 1/p, decided exactly."""
    failures = draws - successes
    if failures and q == 1.0:
        return False  # Λ_t = 0 after any zero
    log_up = successes * math.log(2 * q)
    log_down = failures * math.log(2 * (1 - q)) if failures else 0.0
    gap = log_up + log_down + math.log(p)
    error = _FLOAT_MARGIN * (abs(log_up) + abs(log_down) + abs(math.log(p)) + 1.0) + _TINY
    if abs(gap) > error:
        return gap > 0
    # q = u/d and p = P/Q exactly (binary64, d and Q powers of two): compare
    # P·(2u)^S·(2(d − u))^F with Q·d^t.
    u, d = q.as_integer_ratio()
    num, den = p.as_integer_ratio()
    lhs: int = num * pow(2 * u, successes) * pow(2 * (d - u), failures)
    rhs: int = den * pow(d, draws)
    return lhs >= rhs


def oracle_boundary(q: float, p: float = 0.05, max_draws: int = 10_000) -> list[int]:
    """Return b with b[t] the fewest ones among t draws at which the SPRT for q detects.

    ``q`` must lie in (1/2, 1]. Index t runs over 0 … ``max_draws``; b[t] = t + 1 where
    no count detects. Since 2q ≥ 1 ≥ 2(1 − q), b[t + 1] is b[t] or b[t] + 1, so one
    exact decision per t suffices (as for the mixture test's boundary).
    """
    q = float(q)
    if not (math.isfinite(q) and 0.5 < q <= 1.0):
        raise ParameterError(f"the oracle's q must lie in (1/2, 1], got {q!r}")
    p = check_probability("p", p)
    return stepwise_boundary(lambda t, s: _reaches(q, p, t, s), max_draws)
