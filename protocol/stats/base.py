"""What every sequential test shares: decisions, the step record, indicators, tie rules.

A sequential test consumes one indicator bit per opened pair (1 when the published
version scored higher than the hidden one) and after each bit says whether it has
DETECTED data use, must CONTINUE, or is EXHAUSTED (the population is used up).
Its state is a small canonical map, so a claim can be persisted and resumed, and the
verdict records it (spec §7).
"""

from __future__ import annotations

import abc
import enum
import math
from dataclasses import dataclass
from typing import ClassVar, Literal

from ..encoding import Value
from ..errors import InputError, ParameterError, StateError


class Decision(enum.Enum):
    """Outcome of a sequential test after one more observation."""

    CONTINUE = "continue"
    DETECTED = "detected"
    EXHAUSTED = "exhausted"


class TiePolicy(enum.Enum):
    """What a pair whose two versions score equally contributes (spec §7.1).

    ``COIN``: a fair coin from the spec's PRG decides the indicator, so under H0
    every indicator is exactly Bernoulli(1/2) (the paper's rule). ``SKIP``: the pair
    is not fed to the test; whether a pair ties does not depend on the publication
    bit, so the guarantee is kept, but the pair still costs its queries.
    """

    COIN = "coin"
    SKIP = "skip"


def check_probability(name: str, value: float, *, low: float = 0.0, high: float = 1.0) -> float:
    """Return ``value`` as float if ``low < value < high``, else raise ParameterError."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ParameterError(f"{name} must be a number, got {type(value).__name__}")
    v = float(value)
    if not (math.isfinite(v) and low < v < high):
        raise ParameterError(f"{name} must lie strictly between {low} and {high}, got {value!r}")
    return v


#: Relative and per-draw absolute slack of :func:`log_statistics_agree` (spec §7.3.3).
LOG_STATISTIC_RELATIVE = 1e-9
LOG_STATISTIC_PER_DRAW = 1e-12


def log_statistics_agree(x: float, y: float, draws: int) -> bool:
    """Return whether two log statistics of a test after ``draws`` bits agree (spec §7.3.3).

    The log statistic is informative and not specified to the bit: two values agree
    when ``|x − y| ≤ 1e-9·max(|x|, |y|) + 1e-12·(1 + draws)``. The term in ``draws``
    covers a binary64 log-sum-exp, whose terms grow with the draws and cancel where the
    e-value is near 1 (measured: 1.06e-9 from the exact value at a million draws).
    """
    if not (math.isfinite(x) and math.isfinite(y)) or draws < 0:
        return False
    slack = LOG_STATISTIC_RELATIVE * max(abs(x), abs(y)) + LOG_STATISTIC_PER_DRAW * (1 + draws)
    return abs(x - y) <= slack


#: The field of a verdict's ``final`` that a test sets once it has drawn (spec §11).
Reported = Literal["interval", "log_statistic"]


@dataclass(frozen=True)
class Step:
    """What a test reports after an observation (streamed to clients, kept in verdicts)."""

    draws: int
    successes: int
    decision: Decision
    #: Confidence interval for the population count of ones, where the test has one.
    interval: tuple[int, int] | None
    #: The test statistic in natural-log units (log of the e-value), where it has one.
    log_statistic: float | None
    #: A graded test's per-grade counts ``[S_1, F_1, S_2, F_2, S_3, F_3]`` (spec §7.5.4).
    grades: tuple[int, ...] | None = None


class SequentialTest(abc.ABC):
    """Base class of the sequential tests; subclasses register under ``name``."""

    #: Registered name, recorded in claims and verdicts (e.g. ``"pprm-chernoff"``).
    name: ClassVar[str]
    #: Whether :meth:`update` also takes each bit's grade (spec §7.5).
    graded: ClassVar[bool] = False
    #: What the test reports after its first draw (spec §11): a confidence interval,
    #: or a log statistic. Before any draw it reports neither.
    reports: ClassVar[Reported]

    def __init__(self, n_pairs: int) -> None:
        """Start a test over a population of ``n_pairs`` pairs."""
        if isinstance(n_pairs, bool) or not isinstance(n_pairs, int) or n_pairs < 1:
            raise ParameterError(f"n_pairs must be a positive integer, got {n_pairs!r}")
        self.n_pairs = n_pairs
        self.draws = 0
        self.successes = 0
        self.decision = Decision.CONTINUE

    def update(self, bit: bool | int, grade: int | None = None) -> Step:
        """Consume one indicator bit and return the new step record.

        ``grade`` is for graded tests (spec §7.5) only; the others refuse one.
        """
        if grade is not None and not self.graded:
            raise InputError(f"test {self.name} takes no grades")
        if self.decision is not Decision.CONTINUE:
            raise StateError(f"test already ended with {self.decision.value}")
        if bit not in (0, 1) or isinstance(bit, float):
            raise InputError(f"indicator must be 0 or 1, got {bit!r}")
        self.draws += 1
        self.successes += int(bit)
        step = self._evaluate()
        self.decision = step.decision
        return step

    def initial_step(self) -> Step:
        """Return the step before any observation: no draws, no statistic yet (spec §11)."""
        return Step(0, 0, Decision.CONTINUE, None, None)

    @abc.abstractmethod
    def _evaluate(self) -> Step:
        """Decide after ``self.draws`` observations with ``self.successes`` ones."""

    @abc.abstractmethod
    def parameters(self) -> dict[str, Value]:
        """Return the test's parameters as a canonical map (without counts)."""

    def state(self) -> dict[str, Value]:
        """Return the full serialisable state: name, parameters and counts."""
        return {
            "test": self.name,
            "params": self.parameters(),
            "draws": self.draws,
            "successes": self.successes,
            "decision": self.decision.value,
        }


#: The keys of every test state (spec §7.4).
STATE_KEYS = frozenset({"test", "params", "draws", "successes", "decision"})


def state_parameters(
    state: object, name: str, parameter_keys: frozenset[str]
) -> tuple[dict[str, Value], int]:
    """Check a state's envelope for test ``name``; return its parameter map and ``n_pairs``.

    The state must have exactly :data:`STATE_KEYS`, name this test, and carry a
    parameter map with exactly ``parameter_keys``, including an integer ``n_pairs``;
    otherwise :class:`InputError`. Each test checks its own parameters' types.
    """
    if not isinstance(state, dict) or set(state) != STATE_KEYS:
        raise InputError(f"test state must have exactly the keys {sorted(STATE_KEYS)}")
    if state["test"] != name:
        raise InputError(f"state is for test {state['test']!r}, not {name!r}")
    params = state["params"]
    if not isinstance(params, dict) or set(params) != parameter_keys:
        raise InputError(f"test parameters need exactly the keys {sorted(parameter_keys)}")
    n_pairs = params["n_pairs"]
    if isinstance(n_pairs, bool) or not isinstance(n_pairs, int):
        raise InputError(f"n_pairs must be an integer, got {n_pairs!r}")
    return params, n_pairs


def restore_counts(test: SequentialTest, state: dict[str, Value]) -> SequentialTest:
    """Load ``draws``/``successes`` from ``state`` into a freshly built ``test``.

    The decision is recomputed, not trusted: a state whose recorded decision differs
    from the recomputed one is rejected.
    """
    draws, successes, decision = state.get("draws"), state.get("successes"), state.get("decision")
    if not (isinstance(draws, int) and isinstance(successes, int) and isinstance(decision, str)):
        raise InputError("test state needs integer draws/successes and a decision string")
    if not 0 <= successes <= draws <= test.n_pairs:
        raise InputError(f"impossible counts: {successes} of {draws} draws, N={test.n_pairs}")
    test.draws, test.successes = draws, successes
    if draws > 0:
        test.decision = test._evaluate().decision
    if test.decision.value != decision:
        raise InputError(
            f"recorded decision {decision!r} disagrees with the recomputed {test.decision.value!r}"
        )
    return test
