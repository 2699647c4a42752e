"""Plots of a verdict's sequential test, recomputed from the verdict alone (hand-written SVG).

The indicator string of a checked verdict is fed, bit by bit, to the test its claim
names (:meth:`~twinaudit.protocol.claim.claim_map.ClaimMap.make_test`, over the pairs
the claim could open, exactly as ``verifier replay`` does), and the path must end in
the verdict's final state. For ``mixture-e`` the statistic is the log e-value against
log(1/p), and :func:`bound_trajectory` gives the lower end of the
confidence sequence for the success rate against ½; for ``pprm-chernoff`` it is the
PPRM confidence sequence for the population count of wins against the Chernoff
threshold T. ``mixture-graded`` (spec §7.5) needs each fed bit's grade, which only
the transcript holds (its scores): its path is the log e-value, and it has no bound
plot. Used by the demo's report and by the HTML verdict report
(:mod:`twinaudit.cli.report_html`); no plotting library is needed.
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from twinaudit.protocol.claim.verdict import Verdict
from twinaudit.protocol.stats.base import Decision
from twinaudit.protocol.stats.mixture import MixtureTest
from twinaudit.protocol.stats.mixture_prior import DEFAULT_PRIOR, GridPrior, get_prior
from twinaudit.protocol.stats.paper_test import PaperTest

#: Indicator characters fed to the test as a success / a failure (``s`` = skipped tie).
_SUCCESS, _FAILURE = frozenset("1h"), frozenset("0t")


class GradesNeededError(ValueError):
    """A graded test's path needs each fed bit's grade, which the verdict does not hold."""


@dataclass(frozen=True)
class Trajectory:
    """The test statistic after each processed pair, with the threshold it must reach.

    ``values[i]`` is the statistic after the first ``i + 1`` characters of the
    indicator string (a skipped tie repeats the previous value; before any fed bit
    the statistic is its starting value). ``detected_at`` is the 1-based pair at which
    the test detected, or None.
    """

    test: str
    label: str
    threshold_label: str
    values: list[float]
    threshold: float
    start: float
    detected_at: int | None
    final: dict[str, object]
    #: (draws, successes) after each indicator, for the mixture's confidence bound.
    counts: list[tuple[int, int]] = field(default_factory=list)
    #: The mixture's ``p`` and prior name (None for other tests).
    mixture: tuple[float, str] | None = None
    #: The upper end of the confidence sequence after each indicator, where the test
    #: has one (``pprm-chernoff``: the PPRM interval's upper end), with its start value.
    upper: list[float] = field(default_factory=list)
    upper_start: float = 0.0


def trajectory(verdict: Verdict, grades: Sequence[int] | None = None) -> Trajectory:
    """Recompute the test's path from ``verdict``'s indicators; raise if it disagrees.

    ``grades``: a graded test's grade of each fed bit, in order (from the transcript).
    Raises :class:`GradesNeededError` for a graded test without them, and
    :class:`ValueError` when the recomputed final draws, successes, interval, grades or
    decision differ from the verdict's (the log statistic must agree to 1e-9 relative).
    """
    claim = verdict.claim
    name, p = claim.test_name, verdict.p
    test = claim.make_test()
    if test.graded and grades is None:
        raise GradesNeededError("the graded test's path needs the transcript's scores")
    fed_grades = iter(grades or ())
    mixture = not isinstance(test, PaperTest)  # the mixtures: mixture-e and mixture-graded
    if isinstance(test, PaperTest):
        label, threshold_label = "PPRM lower bound", "threshold T"
        threshold, start = float(test.threshold), 0.0  # T (spec §7.2)
    else:
        label, threshold_label = "log e-value", "log(1/p)"
        threshold, start = math.log(1.0 / p), 0.0
    values: list[float] = []
    uppers: list[float] = []
    counts: list[tuple[int, int]] = []
    current, detected_at = start, None
    upper = upper_start = float(test.n_pairs)
    step = None
    for position, char in enumerate(verdict.indicators, start=1):
        if char in _SUCCESS or char in _FAILURE:
            grade = next(fed_grades, None) if test.graded else None
            if test.graded and grade is None:
                raise ValueError("fewer grades than fed bits")
            step = test.update(char in _SUCCESS, grade)
            if mixture:
                assert step.log_statistic is not None
                current = step.log_statistic
            else:
                assert step.interval is not None
                current, upper = float(step.interval[0]), float(step.interval[1])
            if step.decision is Decision.DETECTED:
                detected_at = position
        values.append(current)
        uppers.append(upper)
        counts.append((step.draws, step.successes) if step is not None else (0, 0))
    final = verdict.final.to_value()
    if step is None:
        recomputed: dict[str, object] = {"draws": 0, "successes": 0}
    else:
        recomputed = {
            "draws": step.draws,
            "successes": step.successes,
            "interval": list(step.interval) if step.interval is not None else None,
            "log_statistic": step.log_statistic,
        }
    if test.graded and step is not None:
        recomputed["grades"] = list(step.grades or ())
    for key in ("draws", "successes", "interval", "grades"):
        if key in recomputed and recomputed[key] != final.get(key):
            raise ValueError(f"recomputed {key} {recomputed[key]!r} != verdict's {final[key]!r}")
    mine, theirs = recomputed.get("log_statistic"), final.get("log_statistic")
    if isinstance(mine, float) and isinstance(theirs, float):
        if not math.isclose(mine, theirs, rel_tol=1e-9, abs_tol=1e-12):
            raise ValueError(f"recomputed log statistic {mine!r} != verdict's {theirs!r}")
    elif step is not None and mine != theirs:
        raise ValueError(f"recomputed log statistic {mine!r} != verdict's {theirs!r}")
    decision = "detected" if test.decision is Decision.DETECTED else "not-detected"
    if decision != verdict.decision:
        raise ValueError(f"recomputed decision {decision} != verdict's {verdict.decision}")
    plain = mixture and not test.graded  # the bound plot reads counts alone
    mixture_params = (p, test.prior.name) if isinstance(test, MixtureTest) and plain else None
    return Trajectory(
        name,
        label,
        threshold_label,
        values,
        threshold,
        start,
        detected_at,
        dict(recomputed),
        counts,
        mixture_params,
        [] if mixture else uppers,
        0.0 if mixture else upper_start,
    )


def bound_trajectory(path: Trajectory) -> Trajectory:
    """Return the mixture claim ``path``'s lower confidence bound on q against ½.

    See :func:`mixture_lower_bounds`; the bound reaches ½ exactly when the test detects.
    """
    if path.mixture is None:
        raise ValueError(f"test {path.test} has no mixture confidence bound")
    p, prior = path.mixture
    bounds = mixture_lower_bounds(path.counts, p, get_prior(prior))
    return replace(
        path,
        upper=[],
        label="lower confidence bound on q",
        threshold_label="½",
        values=bounds,
        threshold=0.5,
        start=0.0,
    )


#: Grid of null success rates the mixture's confidence bound is read off (step 1/1024).
_BOUND_GRID = 1024


def mixture_lower_bounds(
    counts: Sequence[tuple[int, int]], p: float, prior: GridPrior = DEFAULT_PRIOR
) -> list[float]:
    """Return the mixture's lower confidence bound on the success rate after each count.

    For a null rate q₀, ``M_t(q₀) = Σ_k w_k (θ_k/q₀)^S ((1−θ_k)/(1−q₀))^F / Σ_k w_k`` over
    the prior's atoms θ_k > q₀ is a nonnegative supermartingale when the true rate is
    at most q₀, so by Ville's inequality the q₀ with ``M_t(q₀) ≥ 1/p`` are rejected
    uniformly over time with error at most p; the bound is the largest grid point q₀
    such that every grid point up to it is rejected (0 if none is). At q₀ = ½ this is
    the claim's own test, so the bound reaches ½ exactly when the test detects.

    For display only (binary64, a 1/1024 grid); verdicts come from the test itself.
    ``counts`` holds (draws, successes) pairs.
    """
    r = prior.resolution
    theta = np.array([a / r for a, _ in prior.atoms])
    log_w = np.log(np.array([w for _, w in prior.atoms], dtype=float) / prior.total_weight)
    q0 = np.arange(_BOUND_GRID) / _BOUND_GRID  # 0, …, 1023/1024 (½ is on the grid)
    above = theta[None, :] > q0[:, None]
    with np.errstate(divide="ignore", invalid="ignore"):
        log_up = np.log(theta[None, :]) - np.log(np.maximum(q0[:, None], 1e-300))
        log_down = np.log(np.maximum(1.0 - theta[None, :], 0.0)) - np.log(1.0 - q0[:, None])
    threshold = math.log(1.0 / p)
    bounds, cache = [], {}
    for draws, successes in counts:
        key = (draws, successes)
        if key not in cache:
            failures = draws - successes
            with np.errstate(invalid="ignore"):
                exponent = log_w[None, :] + successes * log_up
                if failures:
                    exponent = exponent + failures * log_down
            exponent = np.where(above, exponent, -np.inf)
            top = exponent.max(axis=1)
            finite = np.isfinite(top)
            log_m = np.full(len(q0), -np.inf)
            log_m[finite] = top[finite] + np.log(
                np.exp(exponent[finite] - top[finite, None]).sum(axis=1)
            )
            rejected = log_m >= threshold
            kept = np.flatnonzero(~rejected)
            first_kept = int(kept[0]) if len(kept) else len(q0)
            cache[key] = float(q0[first_kept - 1]) if first_kept > 0 else 0.0
        bounds.append(cache[key])
    return bounds


def _ticks(low: float, high: float, count: int = 5) -> list[float]:
    """Return 'nice' tick values covering [low, high]."""
    span = high - low or 1.0
    raw = span / count
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= raw)
    first = math.ceil(low / step) * step
    ticks = []
    value = first
    while value <= high + 1e-9 * span:
        ticks.append(round(value, 10))
        value += step
    return ticks


def _fmt(value: float) -> str:
    return f"{value:g}"


def svg_plot(path: Trajectory, title: str, *, width: int = 640, height: int = 320) -> str:
    """Return an SVG line chart of ``path``: the statistic, the threshold, the decision.

    Where ``path`` has an upper end (the PPRM confidence sequence), the band between the
    two ends is shaded.
    """
    left, right, top, bottom = 64, 20, 36, 48
    plot_w, plot_h = width - left - right, height - top - bottom
    n = max(len(path.values), 1)
    ys = [path.start, path.threshold, *path.values]
    if path.upper:
        ys += [path.upper_start, *path.upper]
    y_low, y_high = min(ys), max(ys)
    pad = 0.08 * ((y_high - y_low) or 1.0)
    y_low, y_high = y_low - pad, y_high + pad

    def sx(x: float) -> float:
        return left + plot_w * x / n

    def sy(y: float) -> float:
        return top + plot_h * (1 - (y - y_low) / (y_high - y_low))

    points = [(0.0, path.start), *((i + 1.0, v) for i, v in enumerate(path.values))]
    line = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in points)
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="12">',
        f'<rect width="{width}" height="{height}" fill="white"/>',
        f'<text x="{width / 2}" y="20" text-anchor="middle" font-size="14">'
        f"{html.escape(title)}</text>",
    ]
    for tick in _ticks(y_low, y_high):
        y = sy(tick)
        out.append(
            f'<line x1="{left}" y1="{y:.1f}" x2="{left + plot_w}" y2="{y:.1f}" stroke="#eee"/>'
        )
        out.append(f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end">{_fmt(tick)}</text>')
    for tick in _ticks(0, n):
        x = sx(tick)
        out.append(
            f'<text x="{x:.1f}" y="{top + plot_h + 16}" text-anchor="middle">{_fmt(tick)}</text>'
        )
    out += [
        f'<rect x="{left}" y="{top}" width="{plot_w}" height="{plot_h}" fill="none" '
        'stroke="#444"/>',
        f'<text x="{left + plot_w / 2}" y="{height - 10}" text-anchor="middle">pairs opened</text>',
        f'<text x="14" y="{top + plot_h / 2}" text-anchor="middle" '
        f'transform="rotate(-90 14 {top + plot_h / 2})">{html.escape(path.label)}</text>',
        f'<line x1="{left}" y1="{sy(path.threshold):.1f}" x2="{left + plot_w}" '
        f'y2="{sy(path.threshold):.1f}" stroke="#c0392b" stroke-dasharray="6 4"/>',
        f'<text x="{left + plot_w - 4}" y="{sy(path.threshold) - 5:.1f}" text-anchor="end" '
        f'fill="#c0392b">{html.escape(path.threshold_label)} = {path.threshold:.3g}</text>',
    ]
    if path.upper:  # the confidence sequence: the band between its two ends
        uppers = [(0.0, path.upper_start), *((i + 1.0, v) for i, v in enumerate(path.upper))]
        band = [*points, *reversed(uppers)]
        out.append(
            '<polygon points="'
            + " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in band)
            + '" fill="#1f5fa8" fill-opacity="0.15" stroke="none"/>'
        )
    out.append(f'<polyline points="{line}" fill="none" stroke="#1f5fa8" stroke-width="1.8"/>')
    if path.detected_at is not None:
        x = sx(path.detected_at)
        out.append(
            f'<line x1="{x:.1f}" y1="{top}" x2="{x:.1f}" y2="{top + plot_h}" stroke="#27ae60" '
            'stroke-dasharray="3 3"/>'
        )
        # Low in the plot, beside the line on the side with room: clear of the threshold's
        # label (top right) and of a path that has climbed to its threshold.
        side = ("end", x - 4) if x > left + plot_w / 2 else ("start", x + 4)
        out.append(
            f'<text x="{side[1]:.1f}" y="{top + plot_h - 8}" text-anchor="{side[0]}" '
            f'fill="#27ae60">detected at pair {path.detected_at}</text>'
        )
    out.append("</svg>")
    return "\n".join(out) + "\n"
