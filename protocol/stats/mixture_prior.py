"""Discrete priors for the mixture test: exact rational atoms on (1/2, 1] (spec §7.3.1).

A prior is a finite list of atoms θ_k = a_k / R with R a power of two and
R/2 < a_k ≤ R, each with a positive integer weight w_k (normalised by W = Σ w_k).
Under it the mixture e-value after t indicators with S ones and F = t − S zeros is

    M_t = Σ_k (w_k / W) · (2θ_k)^S · (2(1 − θ_k))^F
        = Σ_k w_k · a_k^S · (R − a_k)^F / (W · (R/2)^t),

a ratio of integers, so every comparison with it can be made exactly.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import ParameterError


@dataclass(frozen=True)
class GridPrior:
    """A discrete prior on θ ∈ (1/2, 1] with atoms a_k / R and integer weights w_k.

    ``resolution`` is R (a power of two, at least 2); ``atoms`` lists (a_k, w_k) with
    strictly increasing R/2 < a_k ≤ R, not all equal to R, and w_k ≥ 1. Construction
    validates the table.
    """

    name: str
    resolution: int
    atoms: tuple[tuple[int, int], ...]

    def __post_init__(self) -> None:
        """Reject a table that is not a valid prior (ParameterError)."""
        r = self.resolution
        if isinstance(r, bool) or not isinstance(r, int) or r < 2 or r & (r - 1):
            raise ParameterError(f"prior resolution must be a power of two >= 2, got {r!r}")
        if not self.atoms:
            raise ParameterError("a prior needs at least one atom")
        previous = r // 2
        for atom in self.atoms:
            if len(atom) != 2 or not all(type(v) is int for v in atom):
                raise ParameterError(f"prior atom must be a pair of integers, got {atom!r}")
            a, w = atom
            if not previous < a <= r:
                raise ParameterError(
                    f"prior atoms must increase strictly within ({r // 2}, {r}], got {a}"
                )
            if w < 1:
                raise ParameterError(f"prior weights must be positive integers, got {w}")
            previous = a
        if self.atoms[0][0] == r:
            raise ParameterError("a prior needs an atom below θ = 1 (else M_t = 0 after a zero)")

    @property
    def total_weight(self) -> int:
        """Return W, the sum of the integer weights."""
        return sum(w for _, w in self.atoms)

    @property
    def half_resolution(self) -> int:
        """Return R/2, the common denominator of 2θ_k and 2(1 − θ_k)."""
        return self.resolution // 2

    def numerator(self, successes: int, failures: int) -> int:
        """Return Σ_k w_k · a_k^S · (R − a_k)^F, the integer numerator of M_t."""
        r = self.resolution
        return sum(w * a**successes * (r - a) ** failures for a, w in self.atoms)

    def denominator(self, draws: int) -> int:
        """Return W · (R/2)^t, the integer denominator of M_t."""
        return self.total_weight << ((self.half_resolution.bit_length() - 1) * draws)

    def table(self) -> list[tuple[float, float]]:
        """Return (θ_k, w_k / W) as floats, for display."""
        total = self.total_weight
        return [(a / self.resolution, w / total) for a, w in self.atoms]


#: θ = 1/2 + 2^-k, k = 10 … 5, at 0.5% each in both registered priors: they make the
#: test consistent for any q ≥ 0.5005 (spec §7.3.2).
CONSISTENCY_ATOMS = ((1026, 5), (1028, 5), (1032, 5), (1040, 5), (1056, 5), (1088, 5))

#: The first registered prior (spec §7.3.2), the default until grid16-v1: chosen by
#: exact dynamic programming of the stopping-time distribution against the paper's test
#: at p = 0.05 (spec §7.3.7). Nine atoms carry the power for q in [0.55, 1]. Claims and
#: verdicts that name it decide and replay with it.
GRID15_V1 = GridPrior(
    name="grid15-v1",
    resolution=2048,
    atoms=(
        *CONSISTENCY_ATOMS,
        (1152, 108),  # 9/16
        (1280, 56),  # 5/8
        (1408, 197),  # 11/16
        (1536, 5),  # 3/4
        (1664, 6),  # 13/16
        (1792, 562),  # 7/8
        (1920, 6),  # 15/16
        (1984, 18),  # 31/32
        (2048, 12),  # 1
    ),
)

#: The default prior of new claims (spec §7.3.1, §7.3.8): grid15-v1's atoms and one more,
#: θ = 35/64, with weights chosen against the SPRT that knows q (issue #39) — the worst
#: ratio of expected pairs to it over q in [0.55, 0.99] at p = 0.05 and 0.001, with no
#: rate costing more than 3% over grid15-v1. 9.1% of the weight sits at 35/64 and 6% at
#: θ = 1, which keeps the earliest detection at six straight ones for p = 0.05.
GRID16_V1 = GridPrior(
    name="grid16-v1",
    resolution=2048,
    atoms=(
        *CONSISTENCY_ATOMS,
        (1120, 91),  # 35/64
        (1152, 90),  # 9/16
        (1280, 55),  # 5/8
        (1408, 187),  # 11/16
        (1536, 5),  # 3/4
        (1664, 6),  # 13/16
        (1792, 454),  # 7/8
        (1920, 5),  # 15/16
        (1984, 17),  # 31/32
        (2048, 60),  # 1
    ),
)

#: The prior a claim gets unless it names another (spec §7.3.1).
DEFAULT_PRIOR = GRID16_V1

#: Registered priors by name; a claim names its prior and a verifier looks it up here.
PRIORS: dict[str, GridPrior] = {prior.name: prior for prior in (GRID15_V1, GRID16_V1)}


def get_prior(name: str) -> GridPrior:
    """Return the registered prior called ``name`` (ParameterError if unknown)."""
    if not isinstance(name, str) or name not in PRIORS:
        raise ParameterError(f"unknown mixture prior {name!r}; known: {sorted(PRIORS)}")
    return PRIORS[name]
