"""The mixture test's expected pairs against the SPRT that knows q (issue #39), exactly.

Run ``python -m bench oracle`` (a minute or two on two cores). For N = 5,000 pairs and
p ∈ {0.05, 0.001}, with iid Bernoulli(q) indicators and no ties:

1. per q in {0.55, 0.6, 0.65, 0.7, 0.8, 0.9, 0.99}, the expected pairs opened by the
   oracle SPRT (:mod:`twinaudit.protocol.stats.oracle`) and by ``mixture-e`` under each
   registered prior, and their ratios: the figures ``twinaudit plan --json`` prints
   (the same functions of :mod:`twinaudit.protocol.stats.power`, the exact forward recursion);
2. each prior's worst ratio over q = 0.55, 0.56, …, 0.99, and where it falls;
3. the lower bound on that worst ratio for *any* test that stops only to detect and
   detects within N pairs with probability at most p under H0
   (:mod:`twinaudit.protocol.stats.minimax`), at the weights and price stored in ``CERTIFICATES``.
   Any weights give a valid bound; these were found by ``--search``, column generation
   over the grid (a linear program over the Bayes rules of :func:`bayes_rule`; minutes),
   which also prints the least worst ratio a randomised mixture of those rules reaches,
   so the two enclose the best any test can do over the grid;
4. the archived claims of ``docs/results-data/audits.jsonl`` (``mixture-e``; their
   indicator strings hold each opened pair's outcome, ``s`` for a skipped tie) replayed
   under each prior: how many detect, on models that saw the owner's data and on clean
   ones, and how the pairs compare where both detect. A claim that stopped on detection
   carries only the pairs up to it, so where the other prior had not detected by then its
   decision is unknown. Nothing in the archive is written;
5. each prior's exact false-detection rate within N = 1,000, 5,000 and 10,000 pairs.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from pathlib import Path

import numpy as np
from scipy.optimize import linprog

from twinaudit.protocol.stats import power
from twinaudit.protocol.stats.minimax import bayes_rule, oracle_pairs, ratio_lower_bound
from twinaudit.protocol.stats.mixture import detection_boundary
from twinaudit.protocol.stats.mixture_prior import DEFAULT_PRIOR, PRIORS, get_prior
from twinaudit.protocol.stats.oracle import oracle_boundary

N = 5000
PS = (0.05, 0.001)
RATES = (0.55, 0.6, 0.65, 0.7, 0.8, 0.9, 0.99)
GRID = tuple(round(0.55 + 0.01 * k, 2) for k in range(45))

#: (price c, {q: weight}) per p: the dual solution the search ended with (module docstring).
CERTIFICATES: dict[float, tuple[float, dict[float, float]]] = {
    0.05: (
        7.901137554070876,
        {
            0.55: 0.3755883724009051,
            0.62: 0.15526683699885524,
            0.68: 0.05871878804688535,
            0.74: 0.05895685019331509,
            0.92: 0.35146915236007414,
        },
    ),
    0.001: (
        145.48633945512228,
        {
            0.55: 0.29879089008780063,
            0.61: 0.1682111326865423,
            0.64: 0.04831596760600343,
            0.74: 0.16347730862368115,
            0.79: 0.037185336369056056,
            0.95: 0.25500068584639574,
            0.99: 0.029018678780548736,
        },
    ),
}


def expected_pairs(boundary: list[int], q: float) -> float:
    """E[min(τ, N)] of a boundary test for iid Bernoulli(q) indicators."""
    return power.Power.from_survival(power.iid_survival(boundary, N, q)).expected_pairs


def table(p: float) -> None:
    """Print part 1 at ``p``."""
    names = sorted(PRIORS)
    print(f"\np = {p}, N = {N}: E[pairs] (exact), and the ratio to the oracle SPRT")
    print(f"{'q':>5} {'oracle':>9} " + " ".join(f"{n:>10} {'ratio':>6}" for n in names))
    for q in RATES:
        oracle = power.oracle_plan(N, q, p)
        assert oracle is not None
        row = f"{q:>5} {oracle.expected_pairs:9.2f} "
        for name in names:
            pairs = power.plan("mixture-e", N, q, p, prior=name).expected_pairs
            row += f"{pairs:10.2f} {pairs / oracle.expected_pairs:6.3f} "
        print(row, flush=True)


def worst(p: float) -> None:
    """Print part 2 at ``p``."""
    oracle = np.array([oracle_pairs(q, p, N) for q in GRID])
    for name in sorted(PRIORS):
        boundary = detection_boundary(p, N, get_prior(name))
        ratios = np.array([expected_pairs(boundary, q) for q in GRID]) / oracle
        k = int(ratios.argmax())
        default = " (default)" if name == DEFAULT_PRIOR.name else ""
        print(
            f"p = {p}: {name}{default} worst ratio over q = 0.55 … 0.99: "
            f"{ratios[k]:.4f} at q = {GRID[k]}; at q >= 0.7: {ratios[GRID.index(0.7) :].max():.4f}",
            flush=True,
        )


def search(p: float, rounds: int) -> None:
    """Column generation over GRID at ``p``: print the bounds as they close in."""
    oracle = np.array([oracle_pairs(q, p, N) for q in GRID])

    def column(boundary: list[int]) -> tuple[np.ndarray, float]:
        ratios = np.array([expected_pairs(boundary, q) for q in GRID]) / oracle
        null = power.Power.from_survival(power.iid_survival(boundary, N, 0.5))
        return ratios, null.detection_probability

    columns = [column(oracle_boundary(q, p, N)) for q in (0.55, 0.7, 0.9, 0.99)]
    columns.append(column(detection_boundary(p, N)))
    best = 0.0
    for step in range(rounds):
        ratios = np.array([c[0] for c in columns]).T
        nulls = np.array([c[1] for c in columns])
        k = len(columns)
        result = linprog(
            np.r_[np.zeros(k), 1.0],
            A_ub=np.vstack([np.c_[ratios, -np.ones(len(GRID))], np.r_[nulls, 0.0][None, :]]),
            b_ub=np.r_[np.zeros(len(GRID)), p],
            A_eq=np.r_[np.ones(k), 0.0][None, :],
            b_eq=[1.0],
            bounds=[(0, None)] * k + [(None, None)],
            method="highs",
        )
        duals = -result.ineqlin.marginals
        weights, price = duals[: len(GRID)], float(duals[len(GRID)])
        used = weights > 1e-6
        rule = bayes_rule(
            [q for q, u in zip(GRID, used, strict=True) if u],
            list(weights[used] / oracle[used]),
            price,
            N,
        )
        bound = (rule.value - price * p) / float(weights[used].sum())
        if bound > best:
            best = bound
            chosen = {q: round(float(w), 6) for q, w in zip(GRID, weights, strict=True) if w > 1e-6}
            print(f"  certificate: price {price!r}, weights {chosen}")
        columns.append(column(rule.boundary))
        print(
            f"p = {p} round {step}: a mixture of Bayes rules reaches {result.fun:.4f}; "
            f"no test does better than {best:.4f}",
            flush=True,
        )
        if result.fun - best < 1e-3:
            break


ARCHIVE = Path(__file__).resolve().parent.parent / "docs" / "results-data" / "audits.jsonl"


def _clean(model: str) -> bool:
    """Whether an archived model was trained without the owner's data (evaluation.specs)."""
    name = model.rsplit("-t", 1)[0] if model.rsplit("-t", 1)[-1].isdigit() else model
    return name.endswith("-clean")


def _first_detection(bits: str, boundary: list[int]) -> int | None:
    """Return the pairs opened when a boundary test detects on ``bits`` ('s': skipped tie)."""
    ones = draws = 0
    for opened, bit in enumerate(bits, start=1):
        if bit == "s":
            continue  # a tie, skipped: it feeds no bit
        draws += 1
        ones += bit == "1"
        if ones >= boundary[draws]:
            return opened
    return None


def replay_archive(path: Path = ARCHIVE) -> None:
    """Print part 4: the archived mixture-e claims' decisions under each prior."""
    boundaries: dict[tuple[str, float], list[int]] = {}
    tally: dict[tuple[bool, str], int] = {}
    pairs_saved = mismatches = 0
    for line in path.read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        found = re.search(r"mixture-e-p([0-9.]+)", record["audit"])
        if found is None:
            continue
        p = float(found.group(1).rstrip("."))
        first = {}
        for name in ("grid15-v1", "grid16-v1"):
            if (name, p) not in boundaries:
                boundaries[name, p] = detection_boundary(p, 10_000, get_prior(name))
            first[name] = _first_detection(record["indicators"], boundaries[name, p])
        old, new = first["grid15-v1"], first["grid16-v1"]
        mismatches += (old is not None) != (record["decision"] == "detected")
        if old is None:
            outcome = "neither detects" if new is None else "only grid16-v1 detects"
        elif new is None:
            outcome = "grid15-v1 detects, grid16-v1 not by then (later or never: bits end)"
        elif new < old:
            outcome, pairs_saved = "both, grid16-v1 earlier", pairs_saved + old - new
        else:
            outcome = "both, at the same pair"
        key = (_clean(record["model"]), outcome)
        tally[key] = tally.get(key, 0) + 1
    print(f"\nArchived mixture-e claims ({path.name}) replayed under both priors; grid15-v1")
    print(f"disagrees with the archived decision in {mismatches} (they were made under it).")
    for clean in (False, True):
        label = "clean models (detections are false)" if clean else "models that saw the data"
        total = sum(v for (c, _), v in tally.items() if c is clean)
        print(f"  {label}, {total} claims:")
        for (c, outcome), count in sorted(tally.items()):
            if c is clean:
                print(f"    {outcome}: {count}")
    print(f"  pairs saved where grid16-v1 detects earlier: {pairs_saved}")


def false_detection() -> None:
    """Print part 5: each prior's exact false detection within N pairs under H0."""
    print("\nFalse detection within N pairs under H0, exact (forward recursion, binary64):")
    for name in sorted(PRIORS):
        for p in PS:
            cells = []
            for n in (1000, 5000, 10_000):
                boundary = detection_boundary(p, n, get_prior(name))
                rate = power.Power.from_survival(power.iid_survival(boundary, n, 0.5))
                cells.append(f"N={n}: {rate.detection_probability:.5f}")
            print(f"  {name} p = {p}: " + ", ".join(cells), flush=True)


def main(argv: list[str] | None = None) -> None:
    """Print the tables (``argv``: command-line options, none by default)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--search", type=int, default=0, metavar="ROUNDS", help="run the column generation"
    )
    args = parser.parse_args([] if argv is None else argv)
    started = time.perf_counter()
    for p in PS:
        table(p)
    print()
    for p in PS:
        worst(p)
    print("\nLower bound on the worst ratio over the grid for any level-p test (exact DP):")
    for p, (price, weights) in CERTIFICATES.items():
        bound = ratio_lower_bound(weights, price, p, N)
        print(f"p = {p}: every test's worst ratio over q = 0.55 … 0.99 is at least {bound:.4f}")
    replay_archive()
    false_detection()
    for p in PS if args.search else ():
        search(p, args.search)
    print(f"\ntotal {time.perf_counter() - started:.1f} s")


if __name__ == "__main__":
    main(sys.argv[1:])
