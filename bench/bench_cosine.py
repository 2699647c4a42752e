"""Encoder-score benchmark: the exactly rounded pairwise cosine sum of K = 64 embeddings.

Run with ``python -m bench.bench_cosine`` (or ``python -m bench cosine``). Scores
``VERSIONS`` versions, each K = 64 embeddings of dimension 512 from a fixed-seed
generator, three ways, and checks that all three give the same bits:

- ``fsum``: the spec's definition term by term (one :func:`math.fsum` per dot
  product), the implementation the verifier had before;
- ``binary32``: :func:`~twinaudit.verifier.scoring.cosine.pairwise_cosine_sum` on binary32
  values (what a float32 model answers): exact limb matrix products;
- ``binary64``: the same on values that are not binary32: certified error-free sums.

The ratios are each way's time against ``fsum``'s, measured in this run.
"""

from __future__ import annotations

import time

import numpy as np

from twinaudit.verifier.scoring.cosine import pairwise_cosine_sum, pairwise_cosine_sum_by_definition

K = 64
DIM = 512
VERSIONS = 60
SEED = 1402


def main() -> None:
    rng = np.random.default_rng(SEED)
    doubles = [rng.standard_normal((K, DIM)) for _ in range(VERSIONS)]
    singles = [d.astype(np.float32).astype(np.float64) for d in doubles]
    timings: dict[str, float] = {}
    scores: dict[str, list[float]] = {}
    for name, function, data in (
        ("fsum (binary32 values)", pairwise_cosine_sum_by_definition, singles),
        ("binary32", pairwise_cosine_sum, singles),
        ("fsum (binary64 values)", pairwise_cosine_sum_by_definition, doubles),
        ("binary64", pairwise_cosine_sum, doubles),
    ):
        start = time.perf_counter()
        scores[name] = [function(rows) for rows in data]
        timings[name] = time.perf_counter() - start
    assert scores["binary32"] == scores["fsum (binary32 values)"], "binary32 path differs"
    assert scores["binary64"] == scores["fsum (binary64 values)"], "binary64 path differs"
    print(f"{VERSIONS} versions of K = {K} embeddings, dimension {DIM}; same bits on every path")
    for name, seconds in timings.items():
        print(f"  {name:<24} {1000 * seconds / VERSIONS:8.2f} ms a version")
    for fast, slow in (
        ("binary32", "fsum (binary32 values)"),
        ("binary64", "fsum (binary64 values)"),
    ):
        print(f"  {fast}: {timings[slow] / timings[fast]:.1f}× faster than fsum")


if __name__ == "__main__":
    main()
