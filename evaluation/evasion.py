"""Evading oracles: a practitioner who reads the audit's queries and answers to escape it.

The practitioner holds what the owner published (it trained on it) and sees every
query of a claim. Three ways to use that, each a wrapper around the honest oracle
(:class:`~twinaudit.practitioner.torch_oracle.TorchClassifierOracle`):

``exact``
    The red team's oracle of issue #19: a query that is bit for bit a published file,
    or one of its 162 ``pad-shift-flip`` placements (pad 4, cut at any offset, flip or
    not), is the published twin of a pair; it is answered as a model that never saw
    it would at worst (below).
``near``
    The same with tolerance: a query within two levels (of 255) of a published file,
    in its own placement, is taken for the published twin. This finds ``dither``
    copies; copies that moved (shifts, crops) escape it.
``pairdetect``
    The paper's PairDetect, made stronger: within each batch of queries (a claim's
    window, which holds both twins of its pairs), a query within ``2ε + 2`` levels of
    an earlier one in L∞ is answered with that query's answer. (The paper compares
    with a history of queries and a strict ``< 2ε``; the ``+ 2`` also catches twins
    whose copies were dithered.) Twins so caught tie, and ties are skipped. This is
    :class:`twinaudit.practitioner.defences.PairDetectOracle` with no memory across
    requests (the host ``oracle serve --defence pairdetect`` runs remembers them).

A query taken for a published twin gets the answer that lowers its score the most
without knowing the hidden twin: the uniform probability vector, or, label-only, the
label after the model's own (mod C). The published twin then loses its pair, so an
oracle that recognises every published query drives q̂ to 0: what matters is how
many it recognises. No real practitioner's host would answer so visibly (an arbiter
who looks at the answers sees it); the point is the bound — what a query design lets
an oracle know about the publication bits.
"""

from __future__ import annotations

import hashlib
import statistics
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt

from twinaudit.practitioner.defences import (
    PAIR_SLACK,
    FeaturePairDetectOracle,
    PairDetectOracle,
    levels,
)
from twinaudit.practitioner.torch_oracle import TorchClassifierOracle
from twinaudit.protocol.claim.scores.classifier import ScoreSpec
from twinaudit.protocol.oracles.base import ClassifierOracle, ClassifyAnswer, F32Images, OracleInfo
from twinaudit.verifier.scoring.augment import PAD

from .audit import AuditLog, run_claim
from .build import Workspace
from .specs import TEST, ModelSpec, P, Plan, VaultSpec

#: The evading strategies, by name (the evasion table's columns, after ``honest``).
STRATEGIES = ("exact", "near", "pairdetect")
#: The strategies the ``noise`` claims meet: also PairDetect on shift- and flip-undone
#: pooled features (:class:`twinaudit.practitioner.defences.FeaturePairDetectOracle`, within a
#: request), which averages per-pixel noise away.
NOISE_STRATEGIES = (*STRATEGIES, "pairdetect-features")
#: ``near``: the largest per-pixel difference, in levels, still taken for the same image.
NEAR_LEVELS = 2
#: What this module offers (``levels`` and ``PAIR_SLACK`` are the defences module's).
__all__ = ["PAIR_SLACK", "STRATEGIES", "EvadingOracle", "levels", "placements"]


def placements(image: npt.NDArray[np.uint8]) -> list[npt.NDArray[np.uint8]]:
    """Return the 162 ``pad-shift-flip`` copies of an (H, W, C) uint8 image."""
    height, width, channels = image.shape
    padded = np.zeros((height + 2 * PAD, width + 2 * PAD, channels), dtype=np.uint8)
    padded[PAD : PAD + height, PAD : PAD + width] = image
    out = []
    for top in range(2 * PAD + 1):
        for left in range(2 * PAD + 1):
            window = padded[top : top + height, left : left + width]
            out.extend([window, window[:, ::-1]])
    return out


class EvadingOracle(ClassifierOracle):
    """The honest oracle's answers, except where ``strategy`` recognises a query."""

    def __init__(
        self,
        honest: ClassifierOracle,
        strategy: str,
        published: npt.NDArray[np.uint8],
        epsilon: int,
    ) -> None:
        """Wrap ``honest``; ``published`` is (N, H, W, C) uint8, ``epsilon`` the marks' bound."""
        if strategy not in NOISE_STRATEGIES:
            raise ValueError(f"unknown strategy {strategy!r}; known: {NOISE_STRATEGIES}")
        self._honest = honest
        self._strategy = strategy
        self._epsilon = epsilon
        self._published = published.astype(np.int16).reshape(len(published), -1)
        self._hashes: set[bytes] = set()
        #: The PairDetect host of the two ``pairdetect`` strategies (None for the others).
        self._pairdetect: PairDetectOracle | None = None
        if strategy == "pairdetect":
            self._pairdetect = PairDetectOracle(honest, epsilon, memory=0, slack=PAIR_SLACK)
        elif strategy == "pairdetect-features":
            self._pairdetect = FeaturePairDetectOracle(honest, epsilon, memory=0)
        if strategy == "exact":
            for image in published:
                for copy in placements(image):
                    self._hashes.add(hashlib.sha256(np.ascontiguousarray(copy).tobytes()).digest())
        #: Queries recognised so far (published twins, or twins of earlier queries).
        self.recognised = 0
        self.queries = 0

    @property
    def info(self) -> OracleInfo:
        """The honest oracle's description: an evading host does not announce itself."""
        return self._honest.info

    def classify(self, images: F32Images) -> ClassifyAnswer:
        """Answer as the honest oracle, changing the answers of recognised queries."""
        self.queries += len(images)
        if self._pairdetect is not None:
            answer = self._pairdetect.classify(images)
            self.recognised = self._pairdetect.recognised
            return answer
        answer = self._honest.classify(images)
        quantised = levels(images)
        hits = self._published_hits(quantised)
        self.recognised += int(hits.sum())
        return _worst(answer, hits, self._honest.info.n_classes)

    def _published_hits(self, quantised: npt.NDArray[np.int16]) -> npt.NDArray[np.bool_]:
        flat = quantised.reshape(len(quantised), -1)
        if self._strategy == "exact":
            return np.array(
                [
                    hashlib.sha256(row.astype(np.uint8).tobytes()).digest() in self._hashes
                    for row in quantised
                ],
                dtype=bool,
            )
        hits = np.zeros(len(flat), dtype=bool)
        for start in range(0, len(flat), 256):
            block = flat[start : start + 256, None, :]
            distance = np.abs(block - self._published[None, :, :]).max(axis=2)
            hits[start : start + 256] = (distance <= NEAR_LEVELS).any(axis=1)
        return hits


def _worst(answer: ClassifyAnswer, hits: npt.NDArray[np.bool_], n_classes: int) -> ClassifyAnswer:
    """Return ``answer`` with the rows of ``hits`` made as unconvincing as they can be."""
    if answer.probabilities is not None:
        rows = answer.probabilities.copy()
        rows[hits] = 1.0 / n_classes
        return ClassifyAnswer(probabilities=rows)
    assert answer.labels is not None
    labels = answer.labels.copy()
    labels[hits] = (labels[hits] + 1) % n_classes
    return ClassifyAnswer(labels=labels)


def recognised_share(oracles: Sequence[EvadingOracle]) -> float:
    """Return the share of queries the oracles recognised."""
    queries = sum(o.queries for o in oracles)
    return sum(o.recognised for o in oracles) / queries if queries else 0.0


#: The query designs the evasion table compares (knowledge, family, K, statistic).
DESIGNS: tuple[tuple[str, str, int, str], ...] = (
    ("C1", "none", 1, "entropy"),
    ("C1", "dither", 1, "entropy"),
    ("C1", "dither", 1, "logit"),
    ("C1", "pad-shift-flip", 32, "entropy"),
    ("C3", "dither", 1, "entropy"),
    ("C3", "pad-shift-flip", 32, "entropy"),
    ("C3", "pad-shift-flip-dither", 32, "entropy"),
)


#: The ``noise`` claims (C3 and C4, K = 32, spec §10.3), measured against the same hosts
#: on the models they are for: the attacks table's ``noaug`` models
#: (:func:`evaluation.attacks.noaug_plan`).
NOISE_DESIGNS: tuple[tuple[str, str, int, str], ...] = (
    ("C3", "noise", 32, "entropy"),
    ("C4", "noise", 32, "entropy"),
)


def design_name(design: tuple[str, str, int, str]) -> str:
    """Return a design's row label."""
    knowledge, family, k, statistic = design
    return f"{knowledge} {family} K={k} {statistic}"


def run_evasion(
    workspace: Workspace,
    plan: Plan,
    say: Callable[[str], None],
    designs: Sequence[tuple[str, str, int, str]] = DESIGNS,
    strategies: Sequence[str] = STRATEGIES,
) -> dict[str, dict[str, object]]:
    """Run every design × strategy claim on the used models of ``plan``; return all records.

    ``designs`` are the query designs and ``strategies`` the evading hosts
    (:data:`DESIGNS` and :data:`STRATEGIES`, the ladder's; :data:`NOISE_DESIGNS` and
    :data:`NOISE_STRATEGIES` on the models trained without augmentation).

    Each claim is a real one (:func:`evaluation.audit.run_claim`, the verifier's claim
    engine) against the honest oracle or an :class:`EvadingOracle` around it; results
    go to ``evasion.jsonl`` in the work directory, keyed, so a rerun runs only what is
    missing.
    """
    path = workspace.root / "evasion.jsonl"
    log = AuditLog(path)
    used = dict.fromkeys((job.model, job.vault) for job in plan.jobs if not job.model.clean)
    for model, vault in used:
        todo = [
            (design, strategy)
            for design in designs
            for strategy in ("honest", *strategies)
            if evasion_key(model, vault, design, strategy) not in log.results
        ]
        if not todo or not (workspace.model_dir(model) / "model.pt").exists():
            continue
        net = workspace.load_model(model)
        published = workspace.published(vault)[0][..., None]
        opened = workspace.vault(vault)
        for design, strategy in todo:
            knowledge, family, k, statistic = design
            honest = TorchClassifierOracle(
                net, n_classes=10, model_name=model.name, label_only=knowledge in ("C3", "C4")
            )
            oracle: ClassifierOracle = honest
            if strategy != "honest":
                oracle = EvadingOracle(honest, strategy, published, vault.epsilon)
            key = evasion_key(model, vault, design, strategy)
            result = run_claim(
                opened,
                key=key,
                model_name=model.name,
                score=ScoreSpec(k=k, perturbation=family, knowledge=knowledge, statistic=statistic),
                test=TEST,
                p=P,
                oracle=oracle,
            )
            recognised = (
                oracle.recognised / oracle.queries if isinstance(oracle, EvadingOracle) else 0.0
            )
            log.add({**result, "model": model.name, "recognised": round(recognised, 4)})
        say(f"  evasion: {model.name}: {len(todo)} claims")
    return log.results


def evasion_key(
    model: ModelSpec, vault: VaultSpec, design: tuple[str, str, int, str], strategy: str
) -> str:
    """Return the record key of one evasion claim."""
    return f"{model.name}|{vault.name}|{design_name(design)}|{strategy}"


def evasion_table(
    plan: Plan,
    records: Mapping[str, Mapping[str, object]],
    designs: Sequence[tuple[str, str, int, str]] = DESIGNS,
    strategies: Sequence[str] = STRATEGIES,
) -> list[str]:
    """Return Markdown: per query design, DSR and q̂ against each oracle, and what it recognised."""
    used = list(dict.fromkeys((j.model, j.vault) for j in plan.jobs if not j.model.clean))
    header = ["marks", "query design", *(f"`{s}`" for s in ("honest", *strategies))]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for marker, design in (
        (mk, d) for mk in dict.fromkeys(v.marker for _, v in used) for d in designs
    ):
        row = [f"`{marker}`", design_name(design)]
        for strategy in ("honest", *strategies):
            mine = [
                records[k]
                for m, v in used
                if v.marker == marker and (k := evasion_key(m, v, design, strategy)) in records
            ]
            if not mine:
                row.append("—")
                continue
            detected = sum(r["decision"] == "detected" for r in mine)
            draws = sum(int(str(r["draws"])) for r in mine)
            wins = sum(int(str(r["successes"])) for r in mine)
            q = f"{wins / draws:.2f}" if draws else "—"
            seen = statistics.fmean(float(str(r["recognised"])) for r in mine)
            caught = f", recognised {seen:.1%}" if strategy != "honest" else ""
            row.append(f"{detected}/{len(mine)} (q̂ {q}{caught})")
        lines.append("| " + " | ".join(row) + " |")
    return lines


def load(path: Path) -> dict[str, dict[str, object]]:
    """Read the evasion records of a work directory (keyed like the audits)."""
    return AuditLog(path).results if path.exists() else {}
