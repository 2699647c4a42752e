"""Tie-margin rules and the graded test compared offline on the ladder's models.

``python -m evaluation.margin_rules --work runs/ladder --marker pgdown`` scores every
pair of rung (a)'s vault ``marker`` (seeds 0–4) with C1 ``dither`` K = 1 on its used
model (the vault's own publication bits) and on its clean ``-t1`` model (the vault's
bits and three fresh draws), keeps the signed gap ``s_pub − s_hid`` of each pair, and
replays the mixture test (p = 0.05) over each list in four shuffled orders under each
margin rule: fixed margins, and margins set from the |gaps| of the pairs opened
before (a quantile times a factor, after a warm-up whose pairs are skipped or kept
at margin 0). A rule that reads only earlier |gaps| keeps the test valid (the gaps do
not depend on which twin is published). Those rules are not claim options: a
measurement of whether one should be (``evaluation/notes.md``). The same lists also
replay the graded test ``mixture-graded`` (spec §7.5), which is one, at fixed margins.

``--rung b`` does the same on rung (b)'s ResNets (``--epochs 80`` or ``200``), every
seed whose used model is in the work directory, with the clean models there.
"""

from __future__ import annotations

import argparse
import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from twinaudit.practitioner.torch_oracle import TorchClassifierOracle
from twinaudit.protocol.claim.scores.classifier import ScoreSpec, score
from twinaudit.protocol.oracles.base import ClassifyAnswer
from twinaudit.protocol.prg import Prg
from twinaudit.protocol.seeds import audit_seed, publication_bits
from twinaudit.protocol.stats.base import Decision
from twinaudit.protocol.stats.graded import GradedMixtureTest, grade_of
from twinaudit.protocol.stats.mixture import MixtureTest
from twinaudit.verifier.scoring.augment import draw_copies, stream_label

from .ablation import ablation_nonce, versions_of
from .build import Workspace, rho_of
from .specs import (
    CLI_EPSILON,
    N_TRAIN,
    STANDARD_N_TRAIN,
    STANDARD_TRAINER,
    ModelSpec,
    VaultSpec,
)

#: A rule: the margin for the next pair from the |gaps| of the pairs opened before it
#: (``None``: skip the pair).
Rule = Callable[[Sequence[float]], float | None]


def fixed(margin: float) -> Rule:
    """Return the rule of one margin for every pair."""
    return lambda _: margin


def scaled(factor: float, percentile: float = 50.0, warm_up: int = 8, skip: bool = True) -> Rule:
    """Return ``factor`` × the ``percentile`` of the earlier |gaps|, after ``warm_up`` pairs."""

    def rule(seen: Sequence[float]) -> float | None:
        if len(seen) < warm_up:
            return None if skip else 0.0
        return factor * float(np.percentile(seen, percentile))

    return rule


RULES: dict[str, Rule] = {
    "fixed 0": fixed(0.0),
    "fixed 0.01": fixed(0.01),
    "fixed 0.03": fixed(0.03),
    "fixed 0.1": fixed(0.1),
    "0.25 x median": scaled(0.25),
    "0.5 x median": scaled(0.5),
    "1 x median": scaled(1.0),
    "0.5 x median, kept": scaled(0.5, skip=False),
    "0.5 x median, after 16": scaled(0.5, warm_up=16),
    "25th percentile": scaled(1.0, 25.0),
    "75th percentile": scaled(1.0, 75.0),
}
#: The graded test (spec §7.5) at these fixed margins.
GRADED_MARGINS: dict[str, float] = {"graded, margin 0.01": 0.01, "graded, margin 0.1": 0.1}
#: Shuffled claim orders per list of gaps, and fresh draws of the bits per clean model.
ORDERS = 4
CLEAN_DRAWS = (0, 1, 2, 3)


@dataclass(frozen=True)
class Gaps:
    """The signed gaps of one model against one vault under one draw of the bits."""

    used: bool
    name: str
    gaps: list[float]


def rung_models(
    rung: str, marker: str, seed: int, epochs: int
) -> tuple[VaultSpec, tuple[tuple[bool, ModelSpec, tuple[int, ...]], ...]]:
    """Return the vault and the (used?, model, draws of the bits) of one seed of a rung."""
    if rung == "a":
        return VaultSpec(seed, N_TRAIN, CLI_EPSILON, marker), (
            (True, ModelSpec(seed, epsilon=CLI_EPSILON, marker=marker), (0,)),
            (False, ModelSpec(seed, fraction=0.0, training=1), CLEAN_DRAWS),
        )
    sizes = ModelSpec(
        seed,
        epsilon=CLI_EPSILON,
        marker=marker,
        n_train=STANDARD_N_TRAIN,
        epochs=epochs,
        trainer=STANDARD_TRAINER,
    )
    return VaultSpec(seed, STANDARD_N_TRAIN, CLI_EPSILON, marker), (
        (True, sizes, (0,)),
        (
            False,
            ModelSpec(
                seed,
                fraction=0.0,
                n_train=STANDARD_N_TRAIN,
                epochs=epochs,
                trainer=STANDARD_TRAINER,
            ),
            CLEAN_DRAWS,
        ),
    )


def signed_gaps(
    workspace: Workspace, marker: str, seeds: Sequence[int], rung: str = "a", epochs: int = 80
) -> list[Gaps]:
    """Return the C1 ``dither`` K = 1 gaps of a rung's used and clean models.

    Models whose weights the work directory lacks are left out.
    """
    spec = ScoreSpec(k=1, perturbation="dither", knowledge="C1")
    out = []
    for seed in seeds:
        vault_spec, models = rung_models(rung, marker, seed, epochs)
        if not (workspace.model_dir(models[0][1]) / "model.pt").exists():
            continue
        opened = workspace.vault(vault_spec)
        versions, labels = versions_of(workspace, vault_spec)
        for used, model, draws in models:
            if not (workspace.model_dir(model) / "model.pt").exists():
                continue
            oracle = TorchClassifierOracle(
                workspace.load_model(model), n_classes=10, model_name=model.name
            )
            for draw in draws:
                rho = rho_of(opened, draw)
                bits = publication_bits(opened.root, rho, len(opened))
                seed_bytes = audit_seed(opened.root, rho, ablation_nonce(model, vault_spec))
                copies = [
                    draw_copies("dither", 1, versions[i, v], Prg(seed_bytes, stream_label(i, v)))[1]
                    for i in range(len(versions))
                    for v in (0, 1)
                ]
                batches: list[np.ndarray] = []
                for start in range(0, len(copies), 512):
                    answer = oracle.classify(np.concatenate(copies[start : start + 512]))
                    assert answer.probabilities is not None
                    batches.append(answer.probabilities)
                rows = np.concatenate(batches)
                gaps = []
                for i, bit in enumerate(bits):
                    scores = [
                        score(
                            spec,
                            ClassifyAnswer(probabilities=rows[2 * i + v : 2 * i + v + 1]),
                            n_classes=10,
                            label=labels[i],
                        )
                        for v in (0, 1)
                    ]
                    gaps.append(scores[int(bit)] - scores[1 - int(bit)])
                out.append(Gaps(used, f"{model.name} draw {draw}", gaps))
    return out


def graded_opened(
    gaps: Sequence[float], margin: float, order: Sequence[int], p: float = 0.05
) -> int | None:
    """Return the pairs ``mixture-graded`` opens to detect over ``gaps`` in ``order``.

    None when it does not detect; ties (``|gap| <= margin``) are skipped.
    """
    test = GradedMixtureTest(len(gaps), p=p)
    for opened, index in enumerate(order, start=1):
        grade = grade_of(gaps[index], margin)
        if grade == 0:
            continue
        if test.update(int(gaps[index] > 0), grade).decision is not Decision.CONTINUE:
            return opened if test.decision is Decision.DETECTED else None
    return None


def mixture_opened(
    gaps: Sequence[float], rule: Rule, order: Sequence[int], p: float = 0.05
) -> int | None:
    """Return the pairs the mixture test opens to detect under ``rule`` (None: no detection)."""
    test = MixtureTest(len(gaps), p=p)
    seen: list[float] = []
    for opened, index in enumerate(order, start=1):
        gap = gaps[index]
        margin = rule(seen)
        seen.append(abs(gap))
        if margin is None or abs(gap) <= margin:
            continue
        if test.update(int(gap > 0)).decision is not Decision.CONTINUE:
            return opened if test.decision is Decision.DETECTED else None
    return None


@dataclass(frozen=True)
class RuleRow:
    """One rule's figures: detections and runs on used and clean models, pairs opened."""

    name: str
    used: int
    used_runs: int
    clean: int
    clean_runs: int
    #: Mean pairs opened on the used models, a run that does not detect counting all N.
    mean_opened: float


def _run_rule(rule: Rule, gaps: Sequence[float], order: Sequence[int]) -> int | None:
    return mixture_opened(gaps, rule, order)


def _run_graded(margin: float, gaps: Sequence[float], order: Sequence[int]) -> int | None:
    return graded_opened(gaps, margin, order)


def compare(lists: Sequence[Gaps]) -> list[RuleRow]:
    """Return per rule (the margin rules, then the graded test): its :class:`RuleRow`."""
    runners: dict[str, Callable[[Sequence[float], Sequence[int]], int | None]] = {}
    for name, rule in RULES.items():
        runners[name] = functools.partial(_run_rule, rule)
    for name, margin in GRADED_MARGINS.items():
        runners[name] = functools.partial(_run_graded, margin)
    table = []
    for name, run in runners.items():
        counts = {True: [0, 0], False: [0, 0]}
        opened: list[int] = []
        for entry in lists:
            for order_seed in range(ORDERS):
                order = np.random.default_rng([order_seed, len(entry.gaps)]).permutation(
                    len(entry.gaps)
                )
                result = run(entry.gaps, [int(i) for i in order])
                counts[entry.used][0] += result is not None
                counts[entry.used][1] += 1
                if entry.used:
                    opened.append(len(entry.gaps) if result is None else result)
        (used, used_runs), (clean, clean_runs) = counts[True], counts[False]
        mean = float(np.mean(opened)) if opened else float("nan")
        table.append(RuleRow(name, used, used_runs, clean, clean_runs, mean))
    return table


def main(argv: list[str] | None = None) -> int:
    """Score the gaps and print the comparison table."""
    parser = argparse.ArgumentParser(prog="python -m evaluation.margin_rules", description=__doc__)
    parser.add_argument("--work", type=Path, default=Path("runs/ladder"))
    parser.add_argument("--data", type=Path, default=Path("/usr/share/datasets/fashion-mnist"))
    parser.add_argument(
        "--marker", default="pgdown", help="rung (a)'s marks: pgd, pgdproxy or pgdown"
    )
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    parser.add_argument(
        "--rung", choices=("a", "b"), default="a", help="a: the demo regime; b: the ResNets"
    )
    parser.add_argument("--epochs", type=int, default=80, help="rung b's epochs (80 or 200)")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    lists = signed_gaps(
        Workspace(args.work, args.data), args.marker, args.seeds, args.rung, args.epochs
    )
    models = sorted({entry.name.rsplit(" draw ", 1)[0] for entry in lists if entry.used})
    print(
        f"rung {args.rung}, marks {args.marker}, C1 dither K = 1, p = 0.05, {ORDERS} orders "
        f"a list; used models: {', '.join(models)}"
    )
    print("| rule | used detected | mean pairs opened (used) | clean detected |\n|---|---|---|---|")
    for row in compare(lists):
        print(
            f"| {row.name} | {row.used}/{row.used_runs} | {row.mean_opened:.0f} | "
            f"{row.clean}/{row.clean_runs} |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
