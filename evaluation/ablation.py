"""The per-pair signal q̂ of each score variant, over every pair, on the same models.

A claim stops as soon as its test decides, so its q̂ is over the pairs it opened;
comparing score functions needs more: every variant scored on all N pairs of the
same vault against the same model, with the same audit seed. This module does that
(:func:`variant_outcomes`) with the claim's pieces — the perturbation draws and copies of
spec §10.3 (:func:`twinaudit.verifier.scoring.augment.draw_copies` from the streams
``augment/<i>/<v>``), the oracle the claims use
(:class:`~twinaudit.practitioner.torch_oracle.TorchClassifierOracle`), the score
(:func:`twinaudit.protocol.claim.scores.classifier.score`) and the outcome rule
(:func:`twinaudit.protocol.claim.outcome.compare`) — without the test, the window
schedule and the shuffling, which change neither a deterministic model's answers nor
the outcome of a pair, and with streams of its own where a variant asks for them. The
owner's estimate (``twinaudit owner estimate``) goes through a claim's window logic
itself; the ablation's records were measured this way, and keep it.

One variant is not in the protocol: ``shared`` draws both versions' copies from one
stream, ``augment/<i>``, so the twins of a pair are queried with the same crops and
flips (common random numbers). It is measured here to decide whether it is worth its
price (an oracle sees the same perturbation applied to two images that differ only
by the mark, §13 of the spec).

Results go to ``ablation.jsonl`` in the work directory, keyed by model, vault and
variant, so a rerun scores only what is missing.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Container, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import numpy as np
import numpy.typing as npt

from twinaudit.cli.estimate import tally
from twinaudit.practitioner.torch_oracle import TorchClassifierOracle
from twinaudit.protocol.claim.outcome import compare
from twinaudit.protocol.claim.scores.classifier import ScoreSpec, score
from twinaudit.protocol.oracles.base import ClassifierOracle, ClassifyAnswer
from twinaudit.protocol.prg import Prg
from twinaudit.protocol.seeds import audit_seed, publication_bits
from twinaudit.verifier.scoring.augment import draw_copies, stream_label

from .audit import AuditLog
from .build import Workspace, rho_of
from .specs import ModelSpec, Plan, VaultSpec

#: Copies handed to the oracle at a time (it runs them in batches of its own).
BATCH: Final = 2048


@dataclass(frozen=True)
class Variant:
    """One way of scoring a pair: knowledge, family, K, statistic, shared copies or not."""

    knowledge: str
    perturbation: str
    k: int
    statistic: str = "entropy"
    shared: bool = False
    margin: float = 0.0

    @property
    def name(self) -> str:
        """A compact identifier (the table's row label and the record key's last part)."""
        name = f"{self.knowledge} {self.perturbation} K={self.k} {self.statistic}"
        if self.margin:
            name += f" m={self.margin:g}"
        return name + " shared" if self.shared else name

    def spec(self) -> ScoreSpec:
        """Return the claim's score spec (``shared`` is not a claim parameter)."""
        return ScoreSpec(
            k=self.k,
            perturbation=self.perturbation,
            knowledge=self.knowledge,
            statistic=self.statistic,
            margin=self.margin,
        )


#: The variants of the ablation table, in its row order.
VARIANTS: tuple[Variant, ...] = (
    Variant("C1", "none", 1),
    Variant("C1", "dither", 1),
    Variant("C1", "dither", 1, "logit"),
    Variant("C1", "dither", 8, "logit"),
    Variant("C1", "pad-shift-flip", 32),
    Variant("C1", "pad-shift-flip", 32, "logit"),
    Variant("C1", "pad-shift-flip", 32, shared=True),
    Variant("C1", "pad-shift-flip", 32, "logit", shared=True),
    Variant("C1", "pad-shift-flip", 8, "logit"),
    Variant("C1", "random-resized-crop", 16),
    Variant("C1", "random-resized-crop", 16, "logit"),
    Variant("C1", "dither", 1, margin=0.01),
    Variant("C1", "dither", 1, margin=0.1),
    Variant("C1", "dither", 1, margin=0.3),
    Variant("C1", "pad-shift-flip", 32, margin=0.01),
    Variant("C1", "pad-shift-flip", 32, margin=0.1),
    Variant("C2", "dither", 1),
    Variant("C2", "dither", 1, "logit"),
    Variant("C2", "dither", 1, margin=0.01),
    Variant("C2", "dither", 1, margin=0.1),
    Variant("C2", "dither", 1, margin=0.3),
    Variant("C2", "pad-shift-flip", 32),
    Variant("C2", "pad-shift-flip", 32, margin=0.01),
    Variant("C2", "pad-shift-flip", 32, margin=0.1),
    Variant("C3", "dither", 1),
    Variant("C3", "pad-shift-flip", 32),
    Variant("C3", "pad-shift-flip", 32, shared=True),
    Variant("C3", "pad-shift-flip-dither", 32),
    Variant("C4", "pad-shift-flip", 32),
    Variant("C4", "pad-shift-flip-dither", 32),
    Variant("C3", "noise", 32),
    Variant("C4", "noise", 32),
)
#: The variants scored at rung (c), where a model answers 5,400 pairs: the K = 1 rows
#: (two queries a pair; at K = 32, 64 a pair would take longer than the lent accelerator's
#: time for the whole rung); the tie margins came after that rung ran.
SCALE_VARIANTS: tuple[Variant, ...] = tuple(v for v in VARIANTS if v.k == 1 and not v.margin)
#: The variants scored on rung (c)'s default marks: every K = 1 row, the tie margins too.
SCALE_OWN_VARIANTS: tuple[Variant, ...] = tuple(v for v in VARIANTS if v.k == 1)


def ablation_nonce(model: ModelSpec, vault: VaultSpec) -> bytes:
    """Return the claim nonce every variant of ``model`` × ``vault`` shares."""
    return hashlib.sha256(f"twinaudit ablation\x00{model.name}|{vault.name}".encode()).digest()


def versions_of(workspace: Workspace, vault: VaultSpec) -> tuple[npt.NDArray[np.uint8], list[int]]:
    """Return both versions of every pair, (N, 2, H, W, C), and the committed labels."""
    opened = workspace.vault(vault)
    pairs: list[npt.NDArray[np.uint8]] = []
    labels: list[int] = []
    for _, v0, v1, chunk_labels, _ in opened.chunks():
        pairs.append(np.stack([v0, v1], axis=1))
        labels.extend(int(y) if y is not None else -1 for y in chunk_labels)
    return np.concatenate(pairs), labels


def variant_outcomes(
    oracle: ClassifierOracle,
    variant: Variant,
    seed: bytes,
    pairs: tuple[npt.NDArray[np.uint8], Sequence[int], Sequence[int]],
    first: int = 0,
) -> npt.NDArray[np.int8]:
    """Return +1, −1 or 0 per pair: the published twin won, lost or tied (spec §7.1).

    ``pairs`` holds ``versions``, ``labels`` and ``bits``: ``versions[j]`` (both
    versions) with label ``labels[j]`` (read in C1 and C3) and publication bit
    ``bits[j]`` is the vault's pair ``i = first + j``. The oracle is asked as
    :func:`variant_answers` says and the answers scored by :func:`scored_outcomes`
    under the variant's score spec (the arithmetic every claim now names).
    """
    versions, labels, bits = pairs
    rows = variant_answers(oracle, variant, seed, versions, first)
    return scored_outcomes(variant.spec(), rows, labels, bits, oracle.info.n_classes)


def variant_answers(
    oracle: ClassifierOracle,
    variant: Variant,
    seed: bytes,
    versions: npt.NDArray[np.uint8],
    first: int = 0,
) -> npt.NDArray[np.float64]:
    """Return the oracle's probability vectors for every copy of every version, in order.

    Each version's K copies are drawn (spec §10.3) from ``Prg(seed, "augment/<i>/<v>")``,
    the claim's streams, or from ``"augment/<i>"`` for both versions of a ``shared``
    variant (``versions[j]`` is the vault's pair ``i = first + j``), and asked in
    batches of :data:`BATCH`, unshuffled. Row ``(2j + v)·K + k`` answers copy ``k`` of
    version ``v`` of pair ``j``.
    """
    spec = variant.spec()
    copies: list[npt.NDArray[np.float32]] = []
    for j in range(len(versions)):
        for v in (0, 1):
            label = f"augment/{first + j}" if variant.shared else stream_label(first + j, v)
            drawn = draw_copies(spec.perturbation, spec.k, versions[j, v], Prg(seed, label))
            copies.append(drawn[1])
    flat = np.concatenate(copies)
    parts = []
    for start in range(0, len(flat), BATCH):
        answer = oracle.classify(flat[start : start + BATCH])
        assert answer.probabilities is not None  # the oracles here answer probabilities
        parts.append(answer.probabilities)
    return np.concatenate(parts)


def scored_outcomes(
    spec: ScoreSpec,
    rows: npt.NDArray[np.float64],
    labels: Sequence[int],
    bits: Sequence[int],
    n_classes: int,
) -> npt.NDArray[np.int8]:
    """Score the answers ``rows`` of :func:`variant_answers` under ``spec``; return outcomes.

    +1, −1 or 0 per pair (the published twin, ``bits[j]``, won, lost or tied, spec
    §7.1, with ``spec``'s tie margin); ``labels[j]`` is read in C1 and C3. The same
    answers scored under two arithmetics differ only by the scoring.
    """
    out = np.zeros(len(bits), dtype=np.int8)
    for j, published in enumerate(bits):
        pair = []
        for v in (0, 1):
            start = (2 * j + v) * spec.k
            part = ClassifyAnswer(probabilities=rows[start : start + spec.k])
            label_read = int(labels[j]) if spec.uses_label else None
            pair.append(score(spec, part, n_classes=n_classes, label=label_read))
        out[j] = compare(pair[int(published)], pair[1 - int(published)], spec.margin)
    return out


def outcomes(
    oracle: TorchClassifierOracle,
    *,
    versions: npt.NDArray[np.uint8],
    labels: Sequence[int],
    bits: Sequence[int],
    seed: bytes,
    variant: Variant,
) -> dict[str, int]:
    """Score every pair under ``variant``; return wins, losses and ties of the published twin.

    The scoring is :func:`variant_outcomes`'.
    """
    counted = tally(variant_outcomes(oracle, variant, seed, (versions, labels, bits)))
    return {"wins": counted.wins, "losses": counted.losses, "ties": counted.ties}


def run_ablation(
    workspace: Workspace,
    plan: Plan,
    say: Callable[[str], None],
    variants: Sequence[Variant] = VARIANTS,
    device: str = "cpu",
) -> dict[str, dict[str, object]]:
    """Score every variant on every model of ``plan`` with its vault; return all records.

    The models answer on ``device``.
    """
    log = AuditLog(workspace.root / "ablation.jsonl")
    for model, vault, todo, inputs in to_score(workspace, plan, log.results, variants, device):
        for variant in todo:
            versions, labels, bits = inputs.pairs
            tally = outcomes(
                inputs.oracle,
                versions=versions,
                labels=labels,
                bits=bits,
                seed=inputs.seed,
                variant=variant,
            )
            log.add({"key": key(model, vault, variant), "model": model.name, **tally})
        say(f"  ablation: {model.name}: {len(todo)} variants")
    return log.results


@dataclass(frozen=True)
class Inputs:
    """What one model × vault is scored from: its oracle, the audit seed and the pairs.

    ``pairs`` is ``(versions, labels, bits)`` as :func:`variant_outcomes` takes it.
    """

    oracle: TorchClassifierOracle
    seed: bytes
    pairs: tuple[npt.NDArray[np.uint8], list[int], list[int]]


def to_score(
    workspace: Workspace,
    plan: Plan,
    done: Container[str],
    variants: Sequence[Variant],
    device: str = "cpu",
) -> Iterator[tuple[ModelSpec, VaultSpec, list[Variant], Inputs]]:
    """Yield each model × vault of ``plan`` with the variants whose key is not in ``done``.

    A model whose weights are not here, or with nothing left, is skipped; the others are
    loaded (answering on ``device``) with their vault's pairs, publication bits and the
    audit seed every variant shares (:func:`ablation_nonce`).
    """
    for model, vault in dict.fromkeys((job.model, job.vault) for job in plan.jobs):
        todo = [v for v in variants if key(model, vault, v) not in done]
        if not todo or not (workspace.model_dir(model) / "model.pt").exists():
            continue
        net = workspace.load_model(model)
        oracle = TorchClassifierOracle(net, n_classes=10, model_name=model.name, device=device)
        opened = workspace.vault(vault)
        versions, labels = versions_of(workspace, vault)
        bits = publication_bits(opened.root, rho_of(opened), len(opened))
        seed = audit_seed(opened.root, rho_of(opened), ablation_nonce(model, vault))
        yield model, vault, todo, Inputs(oracle, seed, (versions, labels, list(bits)))


def key(model: ModelSpec, vault: VaultSpec, variant: Variant) -> str:
    """Return the record key of one variant on one model and vault."""
    return f"{model.name}|{vault.name}|{variant.name}"


def load(path: Path) -> dict[str, dict[str, object]]:
    """Read the ablation records of a work directory (a torn last line is ignored)."""
    return AuditLog(path).results if path.exists() else {}


def q_hat(records: Sequence[dict[str, object]]) -> tuple[float, float] | None:
    """Pooled q̂ over untied pairs and the share of tied pairs, or None without records."""
    wins = sum(int(str(r["wins"])) for r in records)
    losses = sum(int(str(r["losses"])) for r in records)
    ties = sum(int(str(r["ties"])) for r in records)
    if wins + losses == 0:
        return None
    return wins / (wins + losses), ties / (wins + losses + ties)


def ablation_table(
    plan: Plan, records: dict[str, dict[str, object]], variants: Sequence[Variant] = VARIANTS
) -> list[str]:
    """Return Markdown: per kind of marks and variant, q̂ over all pairs, used and clean.

    q̂ is pooled over the plan's seeds; "per seed" lists each model's own q̂. Clean
    models are scored with the same vaults (the marks they never saw). A variant that
    no used model of a kind of marks was scored with (one added after the models'
    weights left the machine that trained them) has no row for those marks.
    """
    pairs = list(dict.fromkeys((job.model, job.vault) for job in plan.jobs))

    def cells(variant: Variant, clean: bool, marker: str) -> tuple[str, str, str]:
        mine = [
            records[k]
            for m, v in pairs
            if m.clean == clean and v.marker == marker and (k := key(m, v, variant)) in records
        ]
        pooled = q_hat(mine)
        if pooled is None:
            return "—", "—", "—"
        seeds = " ".join(f"{q[0]:.2f}" for r in mine if (q := q_hat([r])) is not None)
        return f"{pooled[0]:.3f}", seeds, f"{pooled[1]:.0%}"

    lines = [
        "| marks | score variant | q̂ used (all pairs) | per seed | tied | q̂ clean | per seed |",
        "|---|---|---|---|---|---|---|",
    ]
    for marker in dict.fromkeys(v.marker for m, v in pairs if not m.clean):
        for variant in variants:
            used, used_seeds, tied = cells(variant, False, marker)
            if used == "—":
                continue
            clean, clean_seeds, _ = cells(variant, True, marker)
            lines.append(
                f"| `{marker}` | {variant.name} | {used} | {used_seeds} | {tied} | {clean} "
                f"| {clean_seeds} |"
            )
    return lines
