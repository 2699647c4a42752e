"""PPRM interval benchmark: O(log N) search against an O(N) vectorised scan, N = 10**6.

Run with ``python -m bench.bench_pprm`` (or ``python -m bench pprm``). A fixed
Bernoulli(0.6) sequence of 10**4 indicators (numpy generator, fixed seed) gives the
counts (t, S_t); the benchmark times ``pprm_interval`` at every step, then computes the
same intervals by evaluating log M_t(n) for all n in [0, N] with numpy/scipy on an
evenly spaced subsample of the steps, extrapolates that to a per-step cost, checks
both agree, and prints the ratio. It also reports how often a membership test needed
the decimal (tier 2) or integer (tier 3) arithmetic.
"""

from __future__ import annotations

import math
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

import numpy as np
from scipy.special import gammaln

from twinaudit.protocol.stats import pprm
from twinaudit.protocol.stats.pprm import pprm_interval

N = 10**6
STEPS = 10**4
Q = 0.6
ALPHA = 0.025
SEED = 2020
SCAN_EVERY = 100  # the O(N) scan runs on every 100th step


def _scan_interval(n_pairs: int, t: int, s: int, alpha: float) -> tuple[int, int]:
    """C_t by brute force: log M_t(n) for every n at once (binary64, no exact fallback)."""
    f = t - s
    n = np.arange(s, n_pairs - f + 1, dtype=np.float64)
    fixed = gammaln(s + 1) + gammaln(f + 1) - gammaln(t + 2) + gammaln(n_pairs + 1)
    fixed -= gammaln(n_pairs - t + 1)
    log_m = fixed - (gammaln(n + 1) - gammaln(n - s + 1) + gammaln(n_pairs - n + 1))
    log_m += gammaln(n_pairs - n - f + 1)
    inside = np.flatnonzero(log_m < -math.log(alpha))
    return s + int(inside[0]), s + int(inside[-1])


def _tier_counts(counts: list[tuple[int, int]]) -> Counter[str]:
    """Re-run the intervals with the tier-2/3 functions wrapped, counting their calls."""
    tiers: Counter[str] = Counter()
    originals = {name: getattr(pprm, name) for name in ("_sign_decimal", "_member_exact")}

    def counting(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(*args: Any) -> Any:
            tiers[name] += 1
            return fn(*args)

        return wrapper

    try:
        for name, fn in originals.items():
            setattr(pprm, name, counting(name, fn))
        for t, s in counts:
            pprm_interval(N, t, s, ALPHA)
    finally:
        for name, fn in originals.items():
            setattr(pprm, name, fn)
    return tiers


def main() -> None:
    rng = np.random.default_rng(SEED)
    successes = np.cumsum(rng.random(STEPS) < Q).tolist()
    counts = [(t, s) for t, s in zip(range(1, STEPS + 1), successes, strict=True)]

    start = time.perf_counter()
    intervals = [pprm_interval(N, t, s, ALPHA) for t, s in counts]
    pprm_seconds = time.perf_counter() - start
    pprm_us = pprm_seconds / STEPS * 1e6

    sample = counts[SCAN_EVERY - 1 :: SCAN_EVERY]
    start = time.perf_counter()
    scanned = [_scan_interval(N, t, s, ALPHA) for t, s in sample]
    scan_seconds = time.perf_counter() - start
    scan_us = scan_seconds / len(sample) * 1e6
    mismatches = sum(got != intervals[t - 1] for (t, _), got in zip(sample, scanned, strict=True))

    tiers = _tier_counts(counts)
    print(f"N = {N:,}, {STEPS:,} steps of a fixed Bernoulli({Q}) sequence, alpha = {ALPHA}")
    print(f"final interval after {STEPS:,} draws ({successes[-1]:,} ones): {intervals[-1]}")
    print(
        f"PPRM binary search (pprm_interval): {pprm_us:8.1f} µs/step "
        f"({pprm_seconds:.2f} s for all {STEPS:,} steps)"
    )
    print(
        f"O(N) numpy/scipy scan over all n:   {scan_us:8.1f} µs/step "
        f"(measured on {len(sample)} of the {STEPS:,} steps, every {SCAN_EVERY}th, "
        f"{scan_seconds:.2f} s; per-step cost extrapolated)"
    )
    print(f"speed-up: {scan_us / pprm_us:.0f}x (target >= 100x)")
    print(f"scan and PPRM disagree on {mismatches} of {len(sample)} sampled steps")
    print(
        f"membership tests settled beyond binary64 over all {STEPS:,} steps: "
        f"decimal tier {tiers['_sign_decimal']}, integer tier {tiers['_member_exact']}"
    )


if __name__ == "__main__":
    main()
