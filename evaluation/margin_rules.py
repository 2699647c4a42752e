"""Tie-margin rules compared offline on rung (a)'s models: fixed margins against scale-free ones.

``python -m evaluation.margin_rules --work runs/ladder --marker pgdown`` scores every
pair of rung (a)'s vault ``marker`` (seeds 0–4) with C1 ``dither`` K = 1 on its used
model (the vault's own publication bits) and on its clean ``-t1`` model (the vault's
bits and three fresh draws), keeps the signed gap ``s_pub − s_hid`` of each pair, and
replays the mixture test (p = 0.05) over each list in four shuffled orders under each
margin rule: fixed margins, and margins set from the |gaps| of the pairs opened
before (a quantile times a factor, after a warm-up whose pairs are skipped or kept
at margin 0). A rule that reads only earlier |gaps| keeps the test valid (the gaps do
not depend on which twin is published). Not a claim option: a measurement of whether
one should be (``evaluation/notes.md``).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from protocol.prg import Prg
from protocol.seeds import audit_seed, publication_bits
from protocol.stats.base import Decision
from protocol.stats.mixture import MixtureTest
from verifier.oracles.base import ClassifyAnswer
from verifier.oracles.torch_oracle import TorchClassifierOracle
from verifier.scoring.augment import draw_copies, stream_label
from verifier.scoring.classifier import ScoreSpec, score

from .ablation import ablation_nonce, versions_of
from .build import Workspace, rho_of
from .specs import CLI_EPSILON, N_TRAIN, ModelSpec, VaultSpec

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
#: Shuffled claim orders per list of gaps, and fresh draws of the bits per clean model.
ORDERS = 4
CLEAN_DRAWS = (0, 1, 2, 3)


@dataclass(frozen=True)
class Gaps:
    """The signed gaps of one model against one vault under one draw of the bits."""

    used: bool
    name: str
    gaps: list[float]


def signed_gaps(workspace: Workspace, marker: str, seeds: Sequence[int]) -> list[Gaps]:
    """Return the C1 ``dither`` K = 1 gaps of rung (a)'s used and clean models."""
    spec = ScoreSpec(k=1, perturbation="dither", knowledge="C1")
    out = []
    for seed in seeds:
        vault_spec = VaultSpec(seed, N_TRAIN, CLI_EPSILON, marker)
        opened = workspace.vault(vault_spec)
        versions, labels = versions_of(workspace, vault_spec)
        models = (
            (True, ModelSpec(seed, epsilon=CLI_EPSILON, marker=marker), (0,)),
            (False, ModelSpec(seed, fraction=0.0, training=1), CLEAN_DRAWS),
        )
        for used, model, draws in models:
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
                rows = oracle.classify(np.concatenate(copies)).probabilities
                assert rows is not None
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


def detects(gaps: Sequence[float], rule: Rule, order: Sequence[int], p: float = 0.05) -> bool:
    """Return whether the mixture test detects over ``gaps`` fed in ``order`` under ``rule``."""
    test = MixtureTest(len(gaps), p=p)
    seen: list[float] = []
    for index in order:
        gap = gaps[index]
        margin = rule(seen)
        seen.append(abs(gap))
        if margin is None or abs(gap) <= margin:
            continue
        if test.update(int(gap > 0)).decision is not Decision.CONTINUE:
            return test.decision is Decision.DETECTED
    return False


def compare(lists: Sequence[Gaps]) -> list[tuple[str, int, int, int, int]]:
    """Return per rule: detections and runs on used models, then on clean ones."""
    table = []
    for name, rule in RULES.items():
        counts = {True: [0, 0], False: [0, 0]}
        for entry in lists:
            for order_seed in range(ORDERS):
                order = np.random.default_rng([order_seed, len(entry.gaps)]).permutation(
                    len(entry.gaps)
                )
                counts[entry.used][0] += detects(entry.gaps, rule, [int(i) for i in order])
                counts[entry.used][1] += 1
        (used, used_runs), (clean, clean_runs) = counts[True], counts[False]
        table.append((name, used, used_runs, clean, clean_runs))
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
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    lists = signed_gaps(Workspace(args.work, args.data), args.marker, args.seeds)
    print(f"marks {args.marker}, C1 dither K = 1, mixture-e p = 0.05, {ORDERS} orders a list")
    print("| rule | used detected | clean detected |\n|---|---|---|")
    for name, used, used_runs, clean, clean_runs in compare(lists):
        print(f"| {name} | {used}/{used_runs} | {clean}/{clean_runs} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
