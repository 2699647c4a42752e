"""q̂ over all pairs under the score's two arithmetics, from one set of answers (issue #42).

Spec §10.3.1 changed how a score is computed: every claim started since names the
arithmetic ``basic-v1`` (the protocol's logarithms ``pln`` and ``pln1m``, and under C3
and C4 the terms added in a canonical order, so that versions whose label counts are
the same up to renaming the classes tie exactly); a claim map without the key is one of
the rule before (:data:`~twinaudit.protocol.claim.scores.classifier.LEGACY_ARITHMETIC`:
correctly rounded logarithms, terms in class order). The oracle's answers do not depend
on the arithmetic, so this module asks the model once per ablation variant, as
:mod:`evaluation.ablation` does (same copies, same audit seed, all N pairs), and scores
the same answers twice: before and after differ by the scoring alone.

Each model × vault × variant gets one record in ``arithmetic.jsonl`` of the work
directory, keyed as the ablation's (:func:`evaluation.ablation.key`), so a rerun scores
only what is missing: the published twin's wins, losses and ties under each rule, and
how many pairs' outcomes differ between them — a win or loss that became a tie
(``tied_after_only``), a tie that became a win or loss (``tied_before_only``) and a win
that became a loss or back (``flipped``).
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Final

import numpy as np
import numpy.typing as npt

from twinaudit.protocol.claim.scores.classifier import BASIC_ARITHMETIC, LEGACY_ARITHMETIC
from twinaudit.protocol.oracles.base import ClassifierOracle

from .ablation import VARIANTS, Variant, key, q_hat, scored_outcomes, to_score, variant_answers
from .audit import AuditLog
from .build import Workspace
from .specs import Plan

#: The records file in the work directory.
RECORDS: Final = "arithmetic.jsonl"
#: The two rules, as each record names them: the one before spec §10.3.1, and ``basic-v1``.
RULES: Final = (("before", LEGACY_ARITHMETIC), ("after", BASIC_ARITHMETIC))


def both_outcomes(
    oracle: ClassifierOracle,
    variant: Variant,
    seed: bytes,
    pairs: tuple[npt.NDArray[np.uint8], Sequence[int], Sequence[int]],
) -> dict[str, npt.NDArray[np.int8]]:
    """Ask ``oracle`` once for ``variant``'s copies; return each rule's outcomes per pair.

    ``pairs`` is ``(versions, labels, bits)`` as in
    :func:`evaluation.ablation.variant_outcomes`; the result maps ``"before"`` and
    ``"after"`` (:data:`RULES`) to +1, −1 or 0 per pair.
    """
    versions, labels, bits = pairs
    rows = variant_answers(oracle, variant, seed, versions)
    n_classes = oracle.info.n_classes
    return {
        name: scored_outcomes(
            dataclasses.replace(variant.spec(), arithmetic=rule), rows, labels, bits, n_classes
        )
        for name, rule in RULES
    }


def counts(outcomes: Mapping[str, npt.NDArray[np.int8]]) -> dict[str, object]:
    """Return a record's figures: each rule's wins, losses and ties, and the changed pairs."""
    before, after = outcomes["before"], outcomes["after"]
    record: dict[str, object] = {
        name: {
            "wins": int(np.sum(o == 1)),
            "losses": int(np.sum(o == -1)),
            "ties": int(np.sum(o == 0)),
        }
        for name, o in outcomes.items()
    }
    record["changed"] = int(np.sum(before != after))
    record["tied_after_only"] = int(np.sum((before != 0) & (after == 0)))
    record["tied_before_only"] = int(np.sum((before == 0) & (after != 0)))
    record["flipped"] = int(np.sum(before * after == -1))
    return record


def run_arithmetic(
    workspace: Workspace,
    plan: Plan,
    say: Callable[[str], None],
    *,
    variants: Sequence[Variant] = VARIANTS,
    device: str = "cpu",
) -> dict[str, dict[str, object]]:
    """Score every variant under both rules on every model of ``plan``; return all records.

    Models without weights here are left out; what ``arithmetic.jsonl`` already holds is
    not scored again. Each record carries the wall and CPU seconds of its variant (the
    queries and both scorings).
    """
    log = AuditLog(workspace.root / RECORDS)
    for model, vault, todo, inputs in to_score(workspace, plan, log.results, variants, device):
        for variant in todo:
            began, cpu = time.monotonic(), os.times()
            figures = counts(both_outcomes(inputs.oracle, variant, inputs.seed, inputs.pairs))
            spent = os.times()
            log.add(
                {
                    "key": key(model, vault, variant),
                    "model": model.name,
                    **figures,
                    "seconds": round(time.monotonic() - began, 2),
                    "cpu_seconds": round(spent.user + spent.system - cpu.user - cpu.system, 2),
                }
            )
        say(f"  arithmetic: {model.name}: {len(todo)} variants")
    return log.results


def arithmetic_table(
    plan: Plan, records: Mapping[str, Mapping[str, object]], variants: Sequence[Variant] = VARIANTS
) -> list[str]:
    """Return Markdown: per variant, q̂ over all pairs before and after, used and clean models.

    q̂ is pooled over the plan's seeds, with its range over the seeds' models; "tied" is
    the share of tied pairs; "changed" counts the pairs whose outcome differs between the
    rules (of them, how many tie only after and only before). A variant with no record
    on a used model has no row.
    """
    pairs = list(dict.fromkeys((job.model, job.vault) for job in plan.jobs))

    def mine(variant: Variant, clean: bool) -> list[Mapping[str, object]]:
        return [
            records[k]
            for m, v in pairs
            if m.clean == clean and (k := key(m, v, variant)) in records
        ]

    def cell(rows: Sequence[Mapping[str, object]], rule: str) -> str:
        tallies = [_tally(r, rule) for r in rows]
        pooled = q_hat(tallies)
        if pooled is None:
            return "—"
        each = [q[0] for t in tallies if (q := q_hat([t])) is not None]
        return f"{pooled[0]:.3f} ({min(each):.2f}–{max(each):.2f}), tied {pooled[1]:.0%}"

    def changed(rows: Sequence[Mapping[str, object]]) -> str:
        total = sum(_count(r, "changed") for r in rows)
        n = sum(
            sum(_count(_tally(r, "after"), f) for f in ("wins", "losses", "ties")) for r in rows
        )
        later = sum(_count(r, "tied_after_only") for r in rows)
        earlier = sum(_count(r, "tied_before_only") for r in rows)
        flipped = sum(_count(r, "flipped") for r in rows)
        text = f"{total} of {n:,}"
        if total:
            text += f" ({later} tie after, {earlier} before, {flipped} flip)"
        return text

    lines = [
        "| score variant | q̂ used before | q̂ used after | changed (used) "
        "| q̂ clean before | q̂ clean after | changed (clean) |",
        "|---|---|---|---|---|---|---|",
    ]
    for variant in variants:
        used, clean = mine(variant, False), mine(variant, True)
        if not used:
            continue
        lines.append(
            f"| {variant.name} | {cell(used, 'before')} | {cell(used, 'after')} "
            f"| {changed(used)} | {cell(clean, 'before')} | {cell(clean, 'after')} "
            f"| {changed(clean)} |"
        )
    return lines


def _tally(record: Mapping[str, object], rule: str) -> dict[str, object]:
    value = record[rule]
    assert isinstance(value, dict)
    return value


def _count(record: Mapping[str, object], field: str) -> int:
    return int(str(record[field]))
