"""The paper's detector: a PPRM confidence sequence against a Chernoff threshold.

Huang, Gong, Reiter (CCS 2024), §4.2 and algorithm 2: after each opened pair, compute
the PPRM interval C_t for the number N⁺ of ones (Waudby-Smith & Ramdas 2020, see
:mod:`.pprm`) at level α, and reject H0 ("the model never saw the published versions")
as soon as min C_t ≥ T, the Chernoff threshold of :mod:`.chernoff` for p − α.

Validity (theorem 1, appendix B): under H0, N⁺ ~ Binomial(N, 1/2). Either N⁺ ≥ T,
which has probability below the Chernoff bound ≤ p − α, or N⁺ < T and a lower bound
≥ T means the confidence sequence missed N⁺, which has probability ≤ α. So
P(detect | H0) < p.
"""

from __future__ import annotations

from fractions import Fraction
from typing import ClassVar

from ..encoding import Value
from ..errors import InputError, ParameterError
from .base import (
    Decision,
    Reported,
    SequentialTest,
    Step,
    check_probability,
    restore_counts,
    state_parameters,
)
from .chernoff import chernoff_threshold
from .pprm import min_successes_for_lower, pprm_interval

_PARAMETER_KEYS = frozenset({"n_pairs", "p", "alpha", "threshold"})


class PaperTest(SequentialTest):
    """PPRM lower bound ≥ Chernoff threshold T, the test of the paper (algorithm 2).

    ``p`` bounds the false-detection rate; ``alpha`` (default p/2, as in the paper's
    code) is the PPRM level, with 0 < α < p < 1. The threshold is computed once, for
    the exact budget p − α.
    """

    name: ClassVar[str] = "pprm-chernoff"
    reports: ClassVar[Reported] = "interval"

    def __init__(self, n_pairs: int, p: float = 0.05, alpha: float | None = None) -> None:
        """Set up the test over ``n_pairs`` pairs.

        Raises :class:`ParameterError` for parameters outside their domain or when no
        threshold exists for so few pairs, and :class:`LimitExceededError` when
        ``n_pairs`` exceeds ``limits.MAX_PAIRS``.
        """
        super().__init__(n_pairs)
        self.p = check_probability("p", p)
        self.alpha = check_probability("alpha", self.p / 2 if alpha is None else alpha)
        if not self.alpha < self.p:
            raise ParameterError(f"alpha must be below p, got alpha={alpha!r}, p={p!r}")
        self.threshold = chernoff_threshold(n_pairs, Fraction(self.p) - Fraction(self.alpha))

    def _evaluate(self) -> Step:
        interval = pprm_interval(self.n_pairs, self.draws, self.successes, self.alpha)
        if interval[0] >= self.threshold:
            decision = Decision.DETECTED
        elif self.draws == self.n_pairs:
            decision = Decision.EXHAUSTED
        else:
            decision = Decision.CONTINUE
        return Step(self.draws, self.successes, decision, interval, None)

    def parameters(self) -> dict[str, Value]:
        """Return ``{"n_pairs", "p", "alpha", "threshold"}``."""
        return {
            "n_pairs": self.n_pairs,
            "p": self.p,
            "alpha": self.alpha,
            "threshold": self.threshold,
        }

    @classmethod
    def from_state(cls, state: dict[str, Value]) -> PaperTest:
        """Rebuild a test from :meth:`state`, recomputing (never trusting) T and the decision.

        Raises :class:`InputError` for a malformed state or counts that disagree with
        the recorded decision or a recorded threshold that differs from the one
        recomputed from the parameters (spec §7.4), and :class:`ParameterError` for
        parameters outside their domain.
        """
        params, n_pairs = state_parameters(state, cls.name, _PARAMETER_KEYS)
        p, alpha, threshold = (params[k] for k in ("p", "alpha", "threshold"))
        if not (isinstance(p, float) and isinstance(alpha, float)):
            raise InputError("p and alpha must be recorded as floats")
        if isinstance(threshold, bool) or not isinstance(threshold, int):
            raise InputError(f"threshold must be an integer, got {threshold!r}")
        test = cls(n_pairs, p, alpha)
        if test.threshold != threshold:
            raise InputError(
                f"recorded threshold {threshold} differs from the recomputed {test.threshold}"
            )
        restore_counts(test, state)
        return test


def detection_boundary(
    n_pairs: int, p: float = 0.05, alpha: float | None = None, max_draws: int | None = None
) -> list[int]:
    """Return b with b[t] the fewest ones among t draws at which :class:`PaperTest` detects.

    Index t runs over 0 … ``max_draws`` (default ``n_pairs``); b[t] = t + 1 where no
    count detects. Since the PPRM lower bound is nondecreasing in the number of ones
    (see :func:`.pprm.min_successes_for_lower`), the test detects at draw t exactly when
    S_t ≥ b[t], which lets simulations run vectorised over a cumulative sum. It does
    not model stopping: a run ends at the first t with S_t ≥ b[t].
    """
    test = PaperTest(n_pairs, p, alpha)
    draws = n_pairs if max_draws is None else max_draws
    return min_successes_for_lower(n_pairs, test.alpha, test.threshold, draws)
