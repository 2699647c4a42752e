"""The registered sequential tests, by name (spec §7): build one, or restore one from state."""

from __future__ import annotations

from typing import Final

from ..encoding import Value
from ..errors import InputError, ParameterError
from .base import SequentialTest
from .graded import GradedMixtureTest
from .mixture import MixtureTest
from .mixture_prior import DEFAULT_PRIOR
from .paper_test import PaperTest

#: Name of every registered test.
TESTS: Final[dict[str, type[SequentialTest]]] = {
    PaperTest.name: PaperTest,
    MixtureTest.name: MixtureTest,
    GradedMixtureTest.name: GradedMixtureTest,
}


def make_test(
    name: str,
    n_pairs: int,
    p: float,
    alpha: float | None = None,
    prior: str | None = None,
) -> SequentialTest:
    """Build the test ``name`` over ``n_pairs`` pairs at false-detection bound ``p``.

    ``alpha`` is the PPRM confidence of ``pprm-chernoff`` (default ``p/2``); the
    mixture tests have no such parameter and refuse one. ``prior`` names a registered
    prior of the mixture tests (default :data:`~.mixture_prior.DEFAULT_PRIOR`, spec
    §7.3.1); the paper's test has none and refuses one.
    """
    if name == PaperTest.name:
        if prior is not None:
            raise ParameterError(f"test {name!r} takes no prior")
        return PaperTest(n_pairs, p, alpha)
    if name in (MixtureTest.name, GradedMixtureTest.name):
        if alpha is not None:
            raise ParameterError(f"test {name!r} takes no alpha")
        chosen = DEFAULT_PRIOR.name if prior is None else prior
        if name == GradedMixtureTest.name:
            return GradedMixtureTest(n_pairs, p, chosen)
        return MixtureTest(n_pairs, p, chosen)
    raise ParameterError(f"unknown test {name!r}; known: {sorted(TESTS)}")


def test_from_state(state: Value) -> SequentialTest:
    """Restore a test from its state map (spec §7.4), recomputing its decision."""
    if not isinstance(state, dict) or not isinstance(state.get("test"), str):
        raise InputError("a test state is a map with a text 'test'")
    cls = TESTS.get(str(state["test"]))
    if cls is None:
        raise InputError(f"unknown test {state['test']!r}")
    restored: SequentialTest = cls.from_state(state)  # type: ignore[attr-defined]
    return restored
