"""The attacks table: the paper's countermeasures against the audit, measured at rung (a).

``python -m evaluation attacks`` (:func:`evaluation.specs.plan_attacks`) trains, per
seed, one model per training-time attack (:mod:`evaluation.attack_training`, early
stopping and training without augmentation) on the ladder's regime with the CLI's
default marks with labels (``pgdown``, ε = 10), and audits the ladder's unattacked
model through each output defence a host can serve (:mod:`twinaudit.practitioner.defences`).
This module writes its table: per attack, test accuracy, DSR and Q/M in C1–C4 (the
CLI's default claim in C1–C3, the training family at K = 32 in C4) and with that
family in C1 and C3 too,
the false detections of the same claims against models trained without the owner's
data, and the paper's CIFAR-100 figures alongside (:data:`evaluation.paper.ROBUSTNESS_CIFAR100`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Final

from . import paper
from .specs import (
    ATTACK_AUDITS,
    EPOCHS,
    NOISE_AUDITS,
    RECIPE,
    AuditSpec,
    Job,
    ModelSpec,
    Plan,
)
from .tables import Cell, Result, _acc, _table, accuracy_summary, cell

#: The table's rows in order: (row key, what it is, the paper's row key or "").
ROWS: Final = (
    ("none", "no adaptive attack", "none"),
    ("topk:3", "output: top-3 probabilities", "top5"),
    ("topk:1", "output: top-1 probability", "top1"),
    ("memguard", "output: MemGuard-style perturbation (budget 0.5)", "memguard"),
    ("dp0.1", "training: DP-SGD σ = 0.1 (C = 1)", "dp0.001"),
    ("dp0.3", "training: DP-SGD σ = 0.3", "dp0.002"),
    ("dp1", "training: DP-SGD σ = 1", "dp0.003"),
    ("es375", "training: early stopping, 375 of 500 epochs", "es60"),
    ("es250", "training: early stopping, 250 of 500 epochs", "es40"),
    ("es125", "training: early stopping, 125 of 500 epochs", "es20"),
    ("advreg", "training: adversarial regularisation (λ = 1)", "advreg"),
    ("pairdetect", "output: PairDetect (pixels, L∞ ≤ 2ε + 2)", "pairdetect"),
    ("pairdetect-features", "output: PairDetect on features (shift, flip undone)", ""),
    ("noaug", "training: no augmentation", "noaug"),
    ("gauss10", "training: Gaussian noise σ = 10 on the images", "gauss10"),
    ("gauss20", "training: Gaussian noise σ = 20", "gauss20"),
    ("gauss30", "training: Gaussian noise σ = 30", "gauss30"),
    ("markperturb", "training: MarkPerturb (her own ε = 10 marks)", "markperturb"),
)
#: The claims (:data:`evaluation.specs.ATTACK_AUDITS`, then the ``noaug`` row's
#: :data:`~evaluation.specs.NOISE_AUDITS`), one column each.
COLUMNS: Final = (*ATTACK_AUDITS, *NOISE_AUDITS)


def row_of(job: Job, epochs: int = EPOCHS) -> str:
    """Return the row key of ``job``: its output defence, its training attack, or ``none``.

    ``epochs`` is the unattacked models' (fewer in smoke runs, which scale them all).
    """
    if job.audit.defence:
        return job.audit.defence
    return model_row(job.model, epochs)


def model_row(model: ModelSpec, epochs: int = EPOCHS) -> str:
    """Return the row key of a model: its attack, ``es<epochs>``, ``noaug``, or ``none``.

    Early stopping is named by the epochs it would have at the full ``EPOCHS`` (a smoke
    run's 1 of 4 is ``es125``).
    """
    if model.attack:
        return model.attack
    if model.epochs != epochs:
        return f"es{round(model.epochs * EPOCHS / epochs)}"
    if model.recipe != RECIPE:
        return "noaug"
    return "none"


def noaug_plan(plan: Plan) -> Plan:
    """Return the jobs of ``plan`` (the attacks table's) on the ``noaug`` row's used models.

    The evasion of the ``noise`` claims is measured on them
    (:data:`evaluation.evasion.NOISE_DESIGNS`).
    """
    epochs = plan.models[0].epochs if plan.models else EPOCHS
    kept = Plan(plan.table, plan.title)
    kept.jobs = [
        j for j in plan.jobs if not j.model.clean and model_row(j.model, epochs) == "noaug"
    ]
    kept.models = list(dict.fromkeys(j.model for j in kept.jobs))
    return kept


def _paper(key: str) -> str:
    if not key:
        return "—"
    acc, *cells = paper.ROBUSTNESS_CIFAR100[key]
    shown = "; ".join(f"{c[0]} {c[1]}" if c else "-" for c in cells)
    return f"{acc}%: {shown}"


def attacks_table(
    plan: Plan,
    results: Mapping[str, Result],
    infos: Mapping[str, Mapping[str, object]],
    r: int,
) -> list[str]:
    """Return Markdown: per attack, accuracy, DSR (Q/M) per claim, false detections, paper."""
    m, epochs = plan.models[0].n_train, plan.models[0].epochs
    rows = []
    for key, label, theirs in ROWS:
        jobs = [j for j in plan.jobs if row_of(j, epochs) == key]
        if not jobs:
            continue
        used = list(dict.fromkeys(j.model.name for j in jobs if not j.model.clean))
        row: list[object] = [f"`{key}`", label, accuracy_summary(_acc(infos, used))]
        for audit in COLUMNS:

            def pick(job: Job, a: AuditSpec = audit, k: str = key) -> bool:
                return (
                    not job.model.clean and row_of(job) == k and replace(job.audit, defence="") == a
                )

            wanted = sum(pick(j) for j in plan.jobs)
            if not wanted:
                row.append("—")
                continue
            found = cell(plan, results, r, pick)
            row.append(_dsr_qm(found, m))

        def clean(job: Job, k: str = key) -> bool:
            return job.model.clean and row_of(job, epochs) == k

        row.append(_false_detections(plan, results, clean))
        row.append(_paper(theirs))
        rows.append(row)
    header = [
        "attack",
        "what",
        "accuracy",
        *(_column_name(a) for a in COLUMNS),
        "false detections (clean)",
        "paper CIFAR-100: acc; C1–C4 DSR Q/M",
    ]
    return _table(header, rows)


def _column_name(audit: AuditSpec) -> str:
    return f"{audit.knowledge} `{audit.perturbation}` K={audit.k}"


def _dsr_qm(found: Cell, m: int) -> str:
    if not found.results:
        return found.dsr()
    return f"{found.dsr()} ({found.q_over_m(m)}, q̂ {found.q_hat()})"


def _false_detections(
    plan: Plan, results: Mapping[str, Result], where: Callable[[Job], bool]
) -> str:
    jobs = [j for j in plan.jobs if where(j)]
    if not jobs:
        return "—"
    done = [results[j.key] for j in jobs if j.key in results]
    detected = sum(r["decision"] == "detected" for r in done)
    models = len({j.model.name for j in jobs})
    so_far = "" if len(done) == len(jobs) else f" ({len(jobs)} asked)"
    return f"{detected}/{len(done)} claims, {models} model(s){so_far}"


#: What this module's table shows, above it in the results (what :func:`attacks_table` reads).
INTRO: Final = (
    "Rung (a) — the demo's regime (M = 2,000, the 1.62M-weight CNN, 500 epochs of Adam, "
    "pad-crop-flip) — with the marks `twinaudit owner mark` makes by default with labels "
    "(`pgdown`, ε = 10), against the paper's countermeasures (its table "
    "`classifier:robustness`, CIFAR-100, R = 20, alongside: its top-5 row beside our "
    "top-3 of ten classes; its DP σ are noise levels of its code, ours noise multipliers; "
    "its early stopping is 20/40/60 of 80 epochs, ours 125/250/375 of 500). Output "
    "defences are hosts around the unattacked models (`twinaudit oracle serve --defence "
    "…`, `twinaudit.practitioner.defences`; the probability maskings leave labels unchanged, so "
    "they are audited in C1 and C2 only); training-time attacks are models of their own "
    "(`evaluation.attack_training`). Claims: the CLI's default in C1–C3 (K = 1 "
    "`dither`, tie margin 0.01 with probabilities) and the training family "
    "`pad-shift-flip` at K = 32 in C4 (K = 1 label-only ties every pair), C1 and C3; "
    "on the row `noaug` also C3 and C4 with `noise` copies at K = 32 (spec §10.3: each "
    "intensity moved by up to 31 levels, for models that fit their training images "
    "exactly; its false detections include the clean model's claims under 50 fresh "
    "draws of the publication bits); "
    "each cell is DSR (Q/M over detecting experiments, q̂ over "
    "untied pairs). False detections: the same claims against models trained without the "
    "owner's data — the ladder's clean models (`-t1`) through the same host for the "
    "output defences, and for the training-time attacks the same attack without her data "
    "(seed 0 only)."
)
