"""The owner's estimate of q before publishing, set against the q̂ the audited models show.

``twinaudit owner estimate`` (:mod:`twinaudit.cli.estimate`) trains a proxy practitioner on
public images plus most of the owner's published twins and scores every pair. Here it
runs on each marked vault of a ladder plan with what the evaluation's owner holds:
the 10,000 Fashion-MNIST test images (the public data her marking proxy learnt too),
the command's defaults otherwise. The report sets its q̂ (and its control, the pairs
it held out) beside the q̂ over all pairs that the ablation measured on the models
that really trained on the vault (same score: ``dither`` K = 1, C1 and C3).

Records go to ``estimates.jsonl`` in the work directory, keyed by vault and settings,
so a rerun estimates only what is missing.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import replace

import numpy as np

from twinaudit.cli.estimate import estimate
from twinaudit.cli.estimate_config import STEPS, EstimateConfig
from twinaudit.owner.marking.config import PROXY_EPOCHS

from . import ablation
from .audit import AuditLog
from .build import Workspace
from .specs import Plan, VaultSpec

#: The claim scored (the CLI's default score, in C1 and C3) and its ablation row.
CONDITIONS = ("C1", "C3")
#: The ablation variant each condition's estimate is compared with.
MEASURED = {c: ablation.Variant(c, "dither", 1) for c in CONDITIONS}


def config_for(workspace: Workspace) -> EstimateConfig:
    """Return the estimate's settings: the command's defaults (fewer steps in smoke runs).

    A smoke run trains its proxy fewer than :data:`~twinaudit.owner.marking.config.PROXY_EPOCHS`
    epochs; its practitioner takes as many fewer steps.
    """
    steps = max(1, round(STEPS * workspace.proxy_epochs / PROXY_EPOCHS))
    return replace(EstimateConfig(conditions=CONDITIONS), steps=steps)


def key(vault: VaultSpec, config: EstimateConfig) -> str:
    """Return the record key of one vault's estimate under ``config``."""
    return f"{vault.name}|estimate steps{config.steps} share{config.share} s{config.seed}"


def run_estimates(
    workspace: Workspace, plan: Plan, say: Callable[[str], None]
) -> dict[str, dict[str, object]]:
    """Estimate every marked vault of ``plan`` not yet estimated; return all records."""
    log = AuditLog(workspace.root / "estimates.jsonl")
    config = config_for(workspace)
    data = workspace.fashion_mnist()
    public = data.test_images[..., None] if data.test_images.ndim == 3 else data.test_images
    labels = np.asarray(data.test_labels, dtype=np.int64)
    for vault in dict.fromkeys(job.vault for job in plan.jobs if not job.model.clean):
        if key(vault, config) in log.results:
            continue
        began = time.monotonic()
        result = estimate(workspace.vault(vault), public, labels, config)
        log.add(
            {
                "key": key(vault, config),
                "vault": vault.name,
                "seconds": round(time.monotonic() - began, 1),
                **result.to_json(),
            }
        )
        say(f"  estimate: {vault.name}")
    return log.results


def estimate_table(
    plan: Plan,
    estimates: Mapping[str, dict[str, object]],
    measured: Mapping[str, dict[str, object]],
) -> list[str]:
    """Return Markdown: per marks and condition, the estimate's q̂ against the measured one.

    ``estimates`` are :func:`run_estimates`' records (one per vault is read), ``measured``
    the ablation's, read on the same vaults. No lines when no vault of ``plan`` has an
    estimate.
    """
    by_vault = {str(r["vault"]): r for r in estimates.values()}
    vaults = list(dict.fromkeys(job.vault for job in plan.jobs if not job.model.clean))
    used = [(m, v) for m, v in dict.fromkeys((j.model, j.vault) for j in plan.jobs) if not m.clean]
    lines = [
        "| marks | condition | estimate q̂ (per seed) | tied | control q̂ | P(detect) at q̂ "
        "| measured q̂, used models (per seed) | tied |",
        "|---|---|---|---|---|---|---|---|",
    ]
    if not any(v.name in by_vault for v in vaults):
        return []
    for marker in dict.fromkeys(v.marker for v in vaults):
        mine = [by_vault[v.name] for v in vaults if v.marker == marker and v.name in by_vault]
        if not mine:
            continue
        for condition in CONDITIONS:
            entries = [_condition(r, condition) for r in mine]
            est = _pooled([e["used"] for e in entries])
            ctl = _pooled([e["control"] for e in entries])
            powers = " ".join(_detection(e.get("power")) for e in entries)
            rows = [  # the same vaults as the estimates: the seeds they ran on
                measured[k]
                for m, v in used
                if v.marker == marker and v.name in by_vault
                if (k := ablation.key(m, v, MEASURED[condition])) in measured
            ]
            truth = ablation.q_hat(rows)
            truth_seeds = " ".join(f"{q[0]:.2f}" for r in rows if (q := ablation.q_hat([r])))
            lines.append(
                f"| `{marker}` | {condition} | {_rate(est)} ({_seeds(entries, 'used')}) "
                f"| {_tied(est)} | {_rate(ctl)} | {powers} "
                f"| {_rate(truth)} ({truth_seeds or '—'}) | {_tied(truth)} |"
            )
    return lines


def _condition(record: dict[str, object], condition: str) -> dict[str, object]:
    """Return one condition's entry of an estimate record."""
    entries = record["conditions"]
    assert isinstance(entries, list)
    return next(e for e in entries if e["knowledge"] == condition)


def _pooled(tallies: list[object]) -> tuple[float, float] | None:
    """Pool tallies ({wins, losses, ties}) into q̂ over untied pairs and the tied share."""
    return ablation.q_hat([t for t in tallies if isinstance(t, dict)])


def _seeds(entries: list[dict[str, object]], part: str) -> str:
    """Return each seed's q̂ of ``part`` (used or control), or — when every pair tied."""
    values = []
    for entry in entries:
        q = ablation.q_hat([entry[part]])  # type: ignore[list-item]
        values.append("—" if q is None else f"{q[0]:.2f}")
    return " ".join(values)


def _detection(power: object) -> str:
    """Return a power entry's detection probability, or — when every pair tied."""
    return f"{float(power['detection_probability']):.2f}" if isinstance(power, dict) else "—"


def _rate(pooled: tuple[float, float] | None) -> str:
    return "—" if pooled is None else f"{pooled[0]:.3f}"


def _tied(pooled: tuple[float, float] | None) -> str:
    return "—" if pooled is None else f"{pooled[1]:.0%}"
