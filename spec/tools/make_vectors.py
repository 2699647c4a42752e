"""Rewrite every file of spec/vectors from the reference implementation (``make vectors``).

Runs each topic's builder in turn; review the diff before committing it.
"""

from __future__ import annotations

from . import (
    vectors_answers,
    vectors_claims,
    vectors_core,
    vectors_filing,
    vectors_graded,
    vectors_log,
    vectors_merkle,
    vectors_mixture,
    vectors_notes,
    vectors_pln,
    vectors_pprm,
    vectors_scoring,
    vectors_verdicts,
    vectors_witness,
)


def main() -> None:
    """Run every builder."""
    for module in (
        vectors_core,
        vectors_merkle,
        vectors_pprm,
        vectors_mixture,
        vectors_graded,
        vectors_scoring,
        vectors_pln,
        vectors_claims,
        vectors_verdicts,
        vectors_filing,
        vectors_notes,
        vectors_log,
        vectors_witness,
        vectors_answers,
    ):
        module.main()


if __name__ == "__main__":
    main()
