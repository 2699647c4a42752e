"""The demo's report: verdict summaries, check and replay outcomes, timings, and plots.

The plot of each claim is recomputed from the verdict alone
(:func:`twinaudit.cli.verdict_plots.trajectory`): its indicator string is fed, bit by bit,
to the test the claim names, and the trajectory must end in the verdict's final state.
For ``mixture-e`` the plot shows the log e-value against log(1/p); for
``pprm-chernoff`` the PPRM lower confidence bound against the Chernoff threshold T.
Plots are hand-written SVG (no plotting library needed).
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from twinaudit.cli.verdict_plots import bound_trajectory, svg_plot, trajectory
from twinaudit.protocol.claim.verdict import Verdict
from twinaudit.protocol.encoding import canonical


@dataclass
class ClaimOutcome:
    """One claim of the demo: who it was against, its verdict and what the checks said."""

    practitioner: str
    verdict: Verdict
    #: Whether ``twinaudit verify`` (check and replay) said VERIFIED.
    verified: bool
    verify_output: str
    training_set_size: int
    expected: str
    model: dict[str, object] = field(default_factory=dict)


def summary(outcome: ClaimOutcome) -> dict[str, object]:
    """Return the verdict's headline numbers (decision, pairs, Q/M, Q/N, queries, test)."""
    verdict = outcome.verdict
    claim = verdict.claim
    opened = len(verdict.opened)
    n_pairs = claim.n_pairs
    draws, successes = verdict.final.draws, verdict.final.successes
    return {
        "decision": "DETECTED" if verdict.detected else "NOT-DETECTED",
        "stop": verdict.stop,
        "pairs_opened": opened,
        "published_pairs": n_pairs,
        "q_over_m": opened / outcome.training_set_size,
        "q_over_n": opened / n_pairs,
        "draws": draws,
        "successes": successes,
        "success_rate": successes / draws if draws else float("nan"),
        "ties_skipped": verdict.indicators.count("s"),
        "queries": verdict.queries,
        "test": claim.test_name,
        "p": verdict.p,
        "score": canonical(claim.score.to_value()),
    }


def summary_line(outcome: ClaimOutcome) -> str:
    """Return a one-line summary of a claim for the terminal."""
    s = summary(outcome)
    return (
        f"{outcome.practitioner:>5}: {s['decision']:<12} pairs opened {s['pairs_opened']}"
        f"/{s['published_pairs']} (Q/M {s['q_over_m']:.4f}), successes {s['successes']}"
        f"/{s['draws']} ({s['success_rate']:.3f}), queries {s['queries']}, "
        f"test {s['test']} p={s['p']}; verify {'OK' if outcome.verified else 'FAILED'}"
    )


def _table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return lines


def write_report(
    run_dir: Path,
    *,
    settings: Mapping[str, object],
    outcomes: Sequence[ClaimOutcome],
    timings: Sequence[tuple[str, float]],
    problems: Sequence[str],
    decisions_checked: bool = True,
    meaning: Sequence[str] = (),
) -> Path:
    """Write ``run_dir/report.md`` and one SVG plot per claim; return the report's path.

    ``decisions_checked`` False (the quick run) says so in the outcome line, and every
    decision that differs from the expected one is marked unmet instead of passing as met.
    ``meaning`` (paragraphs) says what the bound p means for the verdicts, after them.
    """
    lines = ["# twinaudit demo: a data-use dispute on Fashion-MNIST", ""]
    unmet = [o for o in outcomes if summary(o)["decision"] != o.expected]
    if problems:
        verdict_line = "PROBLEMS: " + "; ".join(problems)
    elif decisions_checked:
        verdict_line = "all expectations met"
    else:
        verdict_line = (
            "every verdict checked and replayed; the decisions are NOT checked at this size "
            f"(quick run: the models are far too small), and {len(unmet)} of {len(outcomes)} "
            "differ from the expected one"
        )
    lines += [f"**Outcome:** {verdict_line}.", ""]
    lines += ["## Set-up", ""]
    lines += _table(["setting", "value"], [(k, v) for k, v in settings.items()])
    lines += ["", "## Verdicts", ""]
    lines += [
        "Q is the number of pairs the arbiter opened, M the size of the practitioner's "
        "training set and N the number of published (escrowed) pairs, as in the paper "
        "(§7, where M = |D| and N is the owner's published items). Queries = 2·K per "
        "processed pair.",
        "",
    ]
    rows = []
    for outcome in outcomes:
        s = summary(outcome)
        rows.append(
            (
                outcome.practitioner,
                outcome.expected + (" (unmet)" if outcome in unmet else ""),
                f"**{s['decision']}** ({s['stop']})",
                f"{s['pairs_opened']} / {s['published_pairs']}",
                f"{s['q_over_m']:.4f}",
                f"{s['q_over_n']:.3f}",
                f"{s['successes']} / {s['draws']} ({s['success_rate']:.3f})",
                s["ties_skipped"],
                s["queries"],
                f"{s['test']} (p = {s['p']})",
                "verified" if outcome.verified else "**FAILED**",
            )
        )
    lines += _table(
        [
            "practitioner",
            "expected",
            "decision",
            "pairs opened Q / N",
            "Q/M",
            "Q/N",
            "successes / fed",
            "ties skipped",
            "queries",
            "test",
            "twinaudit verify",
        ],
        rows,
    )
    for outcome in outcomes:
        name = outcome.practitioner
        lines += ["", f"### Claim against the {name} model", ""]
        if outcome.model:
            lines += [", ".join(f"{k}: {v}" for k, v in outcome.model.items()), ""]
        path = trajectory(outcome.verdict)
        plots = [(path, run_dir / f"plot-{name}.svg")]
        if path.mixture is not None:
            plots = [
                (bound_trajectory(path), run_dir / f"plot-{name}.svg"),
                (path, run_dir / f"plot-{name}-evalue.svg"),
            ]
        for shown, svg in plots:
            title = f"{name} model: {shown.label} vs {shown.threshold_label} ({shown.test})"
            svg.write_text(svg_plot(shown, title))
            lines += [f"![{html.escape(title)}]({svg.name})", ""]
        if path.mixture is not None:
            lines += [
                "The first plot is the lower end of the confidence sequence for the "
                "success rate q that the mixture defines (display only, on a 1/1024 "
                "grid): it reaches ½ exactly when the test detects. The second is the "
                "test statistic itself, log M_t against log(1/p).",
                "",
            ]
        lines += [
            f"Recomputed from the verdict's {len(path.values)} indicators with "
            f"`make_test({path.test!r}, …)`: final {path.final}.",
            "",
            "`twinaudit verify`:",
            "",
            "```",
            outcome.verify_output.strip(),
            "```",
        ]
    if meaning:
        lines += ["", "## What p means for these verdicts", ""]
        for paragraph in meaning:
            lines += [paragraph, ""]
        lines.pop()
    lines += ["", "## Timings", ""]
    total = sum(t for _, t in timings)
    lines += _table(
        ["stage", "seconds"], [*((n, f"{t:.1f}") for n, t in timings), ("total", f"{total:.1f}")]
    )
    lines += ["", "## Artefacts", ""]
    lines += [
        f"- `{p.relative_to(run_dir)}`"
        for p in sorted(run_dir.rglob("*"))
        if p.is_file() and "vault" not in p.parts and "data" not in p.parts[len(run_dir.parts) :]
    ]
    lines += [
        "",
        "(`owner/vault/` holds the owner's secrets and both versions of every pair; "
        "`data/` the image sets.)",
        "",
    ]
    report = run_dir / "report.md"
    report.write_text("\n".join(lines))
    return report
