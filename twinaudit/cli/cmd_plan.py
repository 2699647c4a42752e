"""``twinaudit plan``: how many pairs to mark, and what an audit will cost.

For a number of pairs N and a false-detection bound p, prints the paper's threshold T
and, for each registered test, the detection probability and the expected number of
pairs opened at several success rates q. The figures are exact (dynamic programming
over the test's detection boundary, iid indicators with success rate q), not
simulated. Beside them, the same figures for the SPRT that knows q
(:mod:`twinaudit.protocol.stats.oracle`): the yardstick, not a test a claim can use.
"""

from __future__ import annotations

import argparse
import textwrap
from fractions import Fraction
from typing import Any

from twinaudit.protocol.stats.base import TiePolicy
from twinaudit.protocol.stats.chernoff import chernoff_threshold
from twinaudit.protocol.stats.mixture_prior import DEFAULT_PRIOR, PRIORS
from twinaudit.protocol.stats.power import Power, oracle_plan, plan
from twinaudit.protocol.stats.registry import TESTS as REGISTERED

from .helptext import paragraphs
from .results import print_json

#: The tests plan computes: a graded test's power depends on how far apart the scores are
#: (spec §7.5), which no rate q says; with every gap in its top grade it is `mixture-e`.
TESTS = tuple(name for name, test in REGISTERED.items() if not test.graded)

#: ``owner claim``'s default test, and the computed test it decides as when every untied
#: pair is in its top grade (a score without a tie margin) and no tie is a coin's half bet.
CLAIM_DEFAULT = "mixture-graded"
CLAIM_DEFAULT_AS = "mixture-e"

#: Success rates reported unless the user asks for others.
DEFAULT_RATES = (0.6, 0.7, 0.8, 0.9, 0.99)


PLAN_HELP = paragraphs(
    "How many pairs to mark, and what an audit will cost. For N pairs and a "
    "false-detection bound p, prints the paper's threshold T and, for each test, the "
    "detection probability and the expected number of pairs opened at several "
    "success rates q: exact figures (dynamic programming over the test's detection "
    "boundary, iid indicators with success rate q), not simulated. The oracle column is "
    "the SPRT that knows q (its likelihood ratio against 1/p): no test valid for every "
    "q can match it at every q, and it is the yardstick the tests are judged by.",
    "example: twinaudit plan --pairs 1000 --false-detection 0.05 --rates 0.6 0.7 --ties 0.9",
)


def register(commands: Any) -> None:
    """Add the ``plan`` command."""
    parser = commands.add_parser(
        "plan",
        help="expected audit cost for N pairs (exact, both tests)",
        description=PLAN_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=paragraphs(
            "exit status: 0 the figures were computed; 2 bad usage (N, p, a rate or the "
            "tie fraction out of range)"
        ),
    )
    parser.add_argument("--pairs", type=int, required=True, help="number of marked pairs N")
    parser.add_argument(
        "--false-detection",
        "--p",
        "--fdr",
        dest="fdr",
        metavar="P",
        type=float,
        default=0.05,
        help="false-detection bound p, owner claim's --false-detection (default "
        "%(default)s; --p is the short name, --fdr the older one)",
    )
    parser.add_argument(
        "--alpha", type=float, default=None, help="PPRM level of the paper's test (default p/2)"
    )
    parser.add_argument(
        "--rates",
        type=float,
        nargs="+",
        default=list(DEFAULT_RATES),
        help=f"success rates q to report (default {' '.join(map(str, DEFAULT_RATES))})",
    )
    parser.add_argument(
        "--ties",
        type=float,
        default=0.0,
        help="fraction of pairs that tie (default %(default)s; label-only outputs: about 2/3)",
    )
    parser.add_argument(
        "--tie-rule",
        choices=["skip", "coin"],
        default="skip",
        help="how the claim treats ties (default skip)",
    )
    parser.add_argument(
        "--prior",
        choices=sorted(PRIORS),
        default=DEFAULT_PRIOR.name,
        help="prior of the mixture test (default %(default)s)",
    )
    parser.add_argument(
        "--json",
        action="store_true",
        help="print one JSON object on stdout (the threshold, and per rate q each test's "
        "detection probability and expected pairs, and the oracle SPRT's) instead of the table",
    )
    parser.set_defaults(handler=_plan)


def _figures_of(power: Power | None) -> dict[str, float] | None:
    if power is None:
        return None
    return {
        "detection_probability": power.detection_probability,
        "expected_pairs": power.expected_pairs,
    }


def _figures(args: argparse.Namespace, alpha: float) -> list[dict[str, Any]]:
    """Return, per rate q, each test's detection probability and expected pairs opened."""
    rows = []
    tie_rule = TiePolicy(args.tie_rule)
    for q in args.rates:
        tests = {}
        for name in TESTS:
            power = plan(
                name,
                args.pairs,
                q,
                args.fdr,
                tie_fraction=args.ties,
                tie_rule=tie_rule,
                alpha=alpha if name == "pprm-chernoff" else None,
                prior=args.prior if name == "mixture-e" else None,
            )
            tests[name] = _figures_of(power)
        oracle = oracle_plan(args.pairs, q, args.fdr, tie_fraction=args.ties, tie_rule=tie_rule)
        rows.append({"q": q, "tests": tests, "oracle_sprt": _figures_of(oracle)})
    return rows


def _default_as(args: argparse.Namespace) -> str | None:
    """Return the computed test whose figures the claim's default has here, or None."""
    return CLAIM_DEFAULT_AS if args.tie_rule == "skip" or not args.ties else None


def _default_line(args: argparse.Namespace) -> str:
    """Say how to read the table for owner claim's default test, mixture-graded."""
    reading = (
        f"without a tie margin its figures are the {CLAIM_DEFAULT_AS} columns' (every untied "
        "pair is in its top grade); with one they depend on the model's score gaps"
        if _default_as(args)
        else "with coin-decided ties (half bets) its figures are not computed here"
    )
    return textwrap.fill(
        f"owner claim's default test, {CLAIM_DEFAULT}, sizes each bet by the gap between "
        f"a pair's two scores (spec 7.5), which no rate q gives: {reading}.",
        width=88,
    )


def _plan(args: argparse.Namespace) -> int:
    n, p = args.pairs, args.fdr
    alpha = args.alpha if args.alpha is not None else p / 2
    threshold = chernoff_threshold(n, Fraction(p) - Fraction(alpha))
    if args.json:
        print_json(
            {
                "pairs": n,
                "p": p,
                "alpha": alpha,
                "threshold": threshold,
                "threshold_fraction": threshold / n,
                "ties": args.ties,
                "tie_rule": args.tie_rule,
                "prior": args.prior,
                "default_test": CLAIM_DEFAULT,
                "default_test_as": _default_as(args),
                "rates": _figures(args, alpha),
            }
        )
        return 0
    print(f"N = {n} pairs, false-detection bound p = {p}, mixture prior {args.prior}")
    print(
        f"paper's test (pprm-chernoff, alpha = {alpha}): threshold T = {threshold} "
        f"(never detects unless at least {threshold / n:.3f} of all pairs succeed)"
    )
    if args.ties:
        rule = "skipped" if args.tie_rule == "skip" else "decided by a fair coin"
        print(f"ties: {args.ties:.0%} of pairs tie and are {rule}; q is the non-tied rate")
    print(_default_line(args))
    print("exact figures for iid indicators with success rate q (dynamic programming):\n")
    header = f"{'q':>6}" + "".join(
        f"  {name + ' P(detect)':>24}  {'E[pairs]':>9}" for name in TESTS
    )
    print(header + f"  {'oracle SPRT E[pairs]':>20}")
    for figures in _figures(args, alpha):
        row = f"{figures['q']:>6.2f}"
        for name in TESTS:
            test = figures["tests"][name]
            row += f"  {test['detection_probability']:>24.3f}  {test['expected_pairs']:>9.1f}"
        oracle = figures["oracle_sprt"]
        print(row + (f"  {oracle['expected_pairs']:>20.1f}" if oracle else f"  {'-':>20}"))
    print("\nE[pairs] counts every pair opened, including audits that end without detection.")
    print(
        "The oracle SPRT knows q (its likelihood ratio against 1/2 reaching 1/p): a yardstick,\n"
        "not a test a claim can name; no test valid for every q matches it at every q."
    )
    return 0
