"""How much a mixture prior tuned for low q could add: exact power, not a simulation.

Issue #19 lists "a prior of the mixture test tuned for the small N and q near
0.55–0.65 that owners actually have" among the levers. This prints, for N = 200 (rung
a's vaults) and N = 1,000 (rung b's), the detection probability and expected pairs of
``mixture-e`` under each registered prior (``grid15-v1``, the default when this was
written, and ``grid16-v1``, the default since issue #39), under a prior that puts its
weight at θ = 9/16 … 11/16 (``low-q``, the six consistency atoms kept), and under a
point prior at θ = 0.578 (``point``, the best any prior can do when q is exactly the
rung-(a) C1 q̂ of 0.576, and a prior no owner could choose in advance), with the
paper's test beside them. Figures are the exact forward recursion of
:func:`twinaudit.protocol.stats.power.plan` (iid indicators, no ties).

The two extra priors are not registered: they are not protocol priors, and no claim
can name them.

Run: ``python -m evaluation.prior_ceiling``.
"""

from __future__ import annotations

from twinaudit.protocol.stats.mixture import detection_boundary
from twinaudit.protocol.stats.mixture_prior import CONSISTENCY_ATOMS, PRIORS, GridPrior
from twinaudit.protocol.stats.power import Power, iid_survival, plan

#: θ = 1/2 + 2^-k, k = 10 … 5 at 0.5% each, as in the registered priors (consistency).
CONSISTENCY = CONSISTENCY_ATOMS
CANDIDATES = (
    GridPrior(
        "low-q",
        2048,
        (*CONSISTENCY, (1152, 400), (1280, 300), (1408, 150), (1536, 60), (1792, 40), (2048, 15)),
    ),
    GridPrior("point", 2048, (*CONSISTENCY, (1184, 1000), (2048, 1))),
)
RATES = (0.55, 0.576, 0.6, 0.65, 0.7, 0.8, 0.9, 0.99)


def table() -> list[str]:
    """Return the Markdown table: P(detect) / E[pairs] per prior, N and q."""
    lines = [
        "| N | test (prior) | " + " | ".join(f"q = {q}" for q in RATES) + " |",
        "|---|---|" + "---|" * len(RATES),
    ]
    for n in (200, 1000):
        for prior in (*PRIORS.values(), *CANDIDATES):
            boundary = detection_boundary(0.05, n, prior)
            cells = [Power.from_survival(iid_survival(boundary, n, q)) for q in RATES]
            lines.append(
                f"| {n} | mixture-e ({prior.name}) | "
                + " | ".join(
                    f"{c.detection_probability:.2f} / {c.expected_pairs:.0f}" for c in cells
                )
                + " |"
            )
        cells = [plan("pprm-chernoff", n, q, 0.05, alpha=0.025) for q in RATES]
        lines.append(
            f"| {n} | pprm-chernoff | "
            + " | ".join(f"{c.detection_probability:.2f} / {c.expected_pairs:.0f}" for c in cells)
            + " |"
        )
    return lines


if __name__ == "__main__":
    print("\n".join(table()))
