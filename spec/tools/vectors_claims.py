"""Build spec/vectors/claims.json: the window schedule of a claim (spec §10.1, §10.2).

Run ``python -m spec.tools.vectors_claims`` to rewrite the file; the conformance test
fails if the file differs from what :func:`build` returns.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from protocol import SPEC_VERSION
from verifier.schedule import WindowSchedule

from .vectors_core import case, render

VECTOR_FILE = Path(__file__).resolve().parent.parent / "vectors" / "claims.json"

#: (name, window, window_max, limit, per_pair, budget)
_SCHEDULES: list[tuple[str, int, int, int, int, int]] = [
    ("defaults (8 to 16), 200 pairs, K=32", 8, 16, 200, 64, 0),
    ("8 growing to 64, 200 pairs, K=32", 8, 64, 200, 64, 0),
    ("8 growing to 64, 1000 pairs", 8, 64, 1000, 64, 0),
    ("constant windows of 8", 8, 8, 30, 64, 0),
    ("first window larger than the record", 16, 64, 10, 2, 0),
    ("one pair at a time", 1, 1, 5, 2, 0),
    ("doubling from 1 to the largest", 1, 256, 1000, 2, 0),
    ("query budget cuts the third request", 8, 64, 200, 64, 64 * 30),
    ("query budget below one pair", 8, 64, 200, 64, 63),
    ("budget exactly two requests", 4, 64, 100, 32, 32 * 12),
    ("language model, 2 queries a pair", 8, 64, 100, 2, 0),
    ("empty limit (max_pairs reached)", 8, 64, 0, 64, 0),
    ("window 0", 0, 64, 100, 64, 0),
    ("window above 256", 257, 257, 1000, 64, 0),
    ("window_max below window", 16, 8, 100, 64, 0),
    ("window_max above 256", 8, 512, 100, 64, 0),
]


def _schedule(row: tuple[str, int, int, int, int, int]) -> Any:
    name, first, largest, limit, per_pair, budget = row
    inp = {
        "window": first,
        "window_max": largest,
        "limit": limit,
        "queries_per_pair": per_pair,
        "query_budget": budget,
    }

    def compute() -> dict[str, Any]:
        return {"sizes": WindowSchedule(first, largest, limit, per_pair, budget).sizes()}

    return case(name, "schedule", inp, compute)


def build() -> dict[str, Any]:
    """Return the whole vector document."""
    return {
        "spec_version": SPEC_VERSION,
        "topic": "claims",
        "description": (
            "The window schedule of a claim (spec §10.1, §10.2 step 3). 'limit' is "
            "min(max_pairs, n) (n when max_pairs is 0), 'queries_per_pair' is 2K, "
            "'query_budget' 0 means unlimited. 'sizes' lists the number of pairs of "
            "every request, in order, until the schedule stops (a claim that decides "
            "early makes only a prefix of them). Invalid cases name the error code."
        ),
        "cases": [_schedule(row) for row in _SCHEDULES],
    }


def main() -> None:
    """Rewrite spec/vectors/claims.json."""
    VECTOR_FILE.write_text(render(build()), encoding="utf-8")


if __name__ == "__main__":
    main()
