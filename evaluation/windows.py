"""How the claim's window schedule (spec §10.2 step 3) changes the pairs a claim opens.

The audit order does not depend on the model's answers, and a claim's indicator
string records every pair the test took until it decided. So the pairs a detecting
claim would have opened under another schedule — the whole request in which the
decision fell — and the number of requests any claim makes follow from the recorded
audits alone, with no model and no new query. The results document's
"Window schedule" section is this replay over every recorded classifier claim.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence

from twinaudit.protocol.claim.schedule import WindowSchedule

from .tables import Result

#: (window, window_max) rows of the section: one pair at a time, constant 8 (what the
#: tables used), the protocol default, and larger caps.
SCHEDULES: Sequence[tuple[int, int]] = ((1, 1), (8, 8), (8, 16), (8, 32), (8, 64), (32, 32))


def requests_until(schedule: WindowSchedule, needed: int) -> tuple[int, int]:
    """Return (pairs opened, requests made) until ``needed`` pairs have been opened."""
    opened = requests = 0
    for size in schedule.sizes():
        if opened >= needed:
            break
        opened += size
        requests += 1
    return opened, requests


def _needed(result: Result) -> tuple[int, int, bool]:
    """Return (record size, pairs the claim needed, whether it detected)."""
    n_pairs = int(str(result["n_pairs"]))
    detected = result["decision"] == "detected"
    # The indicator string has one character per pair fed to the test, ties included.
    return n_pairs, len(str(result["indicators"])) if detected else n_pairs, detected


def window_section(results: Mapping[str, Result], k_of: Mapping[str, int]) -> list[str]:
    """Return the results document's lines on window schedules (empty without audits).

    ``k_of`` maps an audit's name to its K (queries per version), which sets the
    schedule's query cost per pair; no claim here has a query budget, so it does not
    change the sizes.
    """
    rows = list(results.values())
    if not rows:
        return []
    found = [r for r in rows if _needed(r)[2]]
    lines = [
        "## Window schedule (replayed over the recorded claims)",
        "",
        f"`python -m evaluation report`, from the {len(rows)} classifier claims above "
        f"({len(found)} detecting): the pairs each claim needed (its indicator string) "
        "put back into other request schedules. A claim opens and queries the whole "
        "request in which its test decides; every request is a round trip to the owner "
        "and to the model.",
        "",
        "| window → window_max | mean Q, detecting claims | vs constant 8 | requests a claim |",
        "|---|---|---|---|",
    ]

    def replayed(first: int, largest: int) -> tuple[float, float]:
        opened, requests = [], []
        for result in rows:
            n_pairs, needed, detected = _needed(result)
            per_pair = 2 * k_of.get(str(result["audit"]), 1)
            got = requests_until(WindowSchedule(first, largest, n_pairs, per_pair), needed)
            requests.append(got[1])
            if detected:
                opened.append(got[0])
        return (statistics.fmean(opened) if opened else 0.0), statistics.fmean(requests)

    baseline = replayed(8, 8)[0]
    for first, largest in SCHEDULES:
        mean_q, mean_requests = replayed(first, largest)
        change = f"{100 * (mean_q / baseline - 1):+.0f}%" if baseline else "—"
        lines.append(f"| {first} → {largest} | {mean_q:.1f} | {change} | {mean_requests:.1f} |")
    lines += [
        "",
        "8 → 16 is the protocol's default (`twinaudit owner claim --window 8`, "
        "`--window-max` twice that); the tables above use constant requests of 8.",
        "",
    ]
    return lines
