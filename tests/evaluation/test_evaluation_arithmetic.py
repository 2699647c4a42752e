"""Issue #42: the ablation's variants scored under both arithmetics from one set of answers."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from evaluation import ablation, arithmetic
from evaluation.__main__ import main as evaluation_main
from evaluation.specs import plan_proxyfit
from twinaudit.protocol.oracles.base import ClassifierOracle, ClassifyAnswer, OracleInfo

#: Pixel levels a step apart per class: a version whose pixels are all ``STEP · c`` is
#: answered class ``c`` by :class:`_ByLevel`.
STEP = 20
#: The committed label of the C3 pairs below, and two wrong classes whose C3 scores
#: differ in the last bits under the rule before (class-order sums) but not in basic-v1.
LABEL, WRONG_LOW, WRONG_HIGH = 0, 1, 9
#: A C3 variant that asks each version once, unperturbed.
C3_PLAIN = ablation.Variant("C3", "none", 1)


class _ByLevel(ClassifierOracle):
    """Answers every copy with the class its pixel level names; counts the copies asked."""

    def __init__(self) -> None:
        self.asked = 0

    @property
    def info(self) -> OracleInfo:
        return OracleInfo("by-level", "digest", ("classify",), "probabilities", 10, 4096)

    def classify(self, images):
        self.asked += len(images)
        classes = np.rint(images.reshape(len(images), -1).mean(axis=1) * 255 / STEP)
        rows = np.full((len(images), 10), 0.0)
        rows[np.arange(len(images)), classes.astype(np.int64)] = 1.0
        return ClassifyAnswer(probabilities=rows)


def _pairs(classes: list[tuple[int, int]]) -> np.ndarray:
    """Return versions (N, 2, 4, 4, 1) whose pixels name the classes the oracle answers."""
    levels = np.array(classes, dtype=np.uint8) * STEP
    return np.broadcast_to(levels[:, :, None, None, None], (len(classes), 2, 4, 4, 1)).copy()


def test_one_set_of_answers_scored_under_both_rules_gives_each_rules_tallies():
    # Pair 0: the published twin (bit 1) gets the label, the other a wrong class: a win
    # under both rules. Pair 1: both wrong, of different classes: the rule before orders
    # them by the last bits of a class-order sum (the published twin, class 9, scores
    # higher), basic-v1 ties them. Pair 2: the same wrong class twice: a tie under both.
    # Pair 3: the unpublished twin (bit 0 published) gets the label: a loss under both.
    versions = _pairs([(WRONG_LOW, LABEL), (WRONG_LOW, WRONG_HIGH), (5, 5), (WRONG_LOW, LABEL)])
    bits = [1, 1, 1, 0]
    oracle = _ByLevel()
    both = arithmetic.both_outcomes(oracle, C3_PLAIN, bytes(32), (versions, [LABEL] * 4, bits))
    assert oracle.asked == 2 * 4  # asked once: K = 1 copy per version, for both rules
    assert both["before"].tolist() == [1, 1, 0, -1]
    assert both["after"].tolist() == [1, 0, 0, -1]
    record = arithmetic.counts(both)
    assert record["before"] == {"wins": 2, "losses": 1, "ties": 1}
    assert record["after"] == {"wins": 1, "losses": 1, "ties": 2}
    assert (record["changed"], record["tied_after_only"]) == (1, 1)
    assert (record["tied_before_only"], record["flipped"]) == (0, 0)


def test_probability_answers_with_a_clear_order_give_the_same_outcome_under_both_rules():
    versions = _pairs([(WRONG_LOW, LABEL), (3, 7)])
    variant = ablation.Variant("C1", "none", 1)
    both = arithmetic.both_outcomes(_ByLevel(), variant, bytes(32), (versions, [LABEL] * 2, [1, 0]))
    assert both["before"].tolist() == both["after"].tolist()
    assert arithmetic.counts(both)["changed"] == 0


class _Workspace:
    """The parts of :class:`evaluation.build.Workspace` the scoring reads: a tiny linear model."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.loaded = 0

    def model_dir(self, spec):
        folder = self.root / "models" / spec.name
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "model.pt").touch()
        return folder

    def load_model(self, spec):
        self.loaded += 1
        torch.manual_seed(spec.seed)
        return torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(28 * 28, 10)).eval()

    def vault(self, spec):
        return _Vault(spec.name.encode().ljust(32, b"\0")[:32])


class _Vault(SimpleNamespace):
    """A vault's root and size (6 pairs)."""

    def __init__(self, root: bytes) -> None:
        super().__init__(root=root)

    def __len__(self) -> int:
        return 6


def test_a_rerun_scores_only_the_variants_not_on_record(tmp_path, monkeypatch):
    images = np.random.default_rng(3).integers(0, 255, (6, 2, 28, 28, 1), dtype=np.uint8)
    monkeypatch.setattr(ablation, "versions_of", lambda ws, vault: (images, [2, 4, 1, 0, 7, 3]))
    monkeypatch.setattr(ablation, "publication_bits", lambda root, rho, n: [0, 1, 1, 0, 1, 0])
    plan = plan_proxyfit([0])
    variants = (ablation.Variant("C1", "dither", 1), C3_PLAIN)
    workspace = _Workspace(tmp_path)
    said: list[str] = []
    arithmetic.run_arithmetic(workspace, plan, said.append, variants=variants)
    path = tmp_path / arithmetic.RECORDS
    first = [json.loads(line) for line in path.read_text().splitlines()]
    assert len(first) == 2 * len(variants)  # the used model and the clean one, each variant
    for record in first:
        for rule in ("before", "after"):
            assert sum(record[rule].values()) == 6  # every pair
    # Drop the C3 record of one model: a rerun scores that one alone, the same way.
    dropped = next(r for r in first if r["key"].endswith(C3_PLAIN.name))
    path.write_text("".join(json.dumps(r) + "\n" for r in first if r is not dropped))
    workspace.loaded = 0
    asked: list[str] = []
    scored = arithmetic.both_outcomes

    def spy(oracle, variant, seed, pairs):
        asked.append(variant.name)
        return scored(oracle, variant, seed, pairs)

    monkeypatch.setattr(arithmetic, "both_outcomes", spy)
    records = arithmetic.run_arithmetic(workspace, plan, said.append, variants=variants)
    assert asked == [C3_PLAIN.name] and workspace.loaded == 1
    again = records[dropped["key"]]
    for field in ("before", "after", "changed"):
        assert again[field] == dropped[field]
    arithmetic.run_arithmetic(workspace, plan, said.append, variants=variants)  # nothing left
    assert asked == [C3_PLAIN.name] and workspace.loaded == 1


def test_the_table_pools_each_rule_over_seeds_and_counts_the_changed_pairs():
    plan = plan_proxyfit([0, 1])
    pairs = dict.fromkeys((job.model, job.vault) for job in plan.jobs)
    records = {}
    for m, v in pairs:
        before = {"wins": 6 + m.seed, "losses": 4, "ties": 0}
        after = {"wins": 6, "losses": 4, "ties": m.seed}
        moved = {"tied_after_only": m.seed, "tied_before_only": 0, "flipped": 0}
        key = ablation.key(m, v, C3_PLAIN)
        records[key] = {"before": before, "after": after, "changed": m.seed, **moved}
    rows = arithmetic.arithmetic_table(plan, records, (C3_PLAIN, ablation.VARIANTS[0]))
    assert rows[2:] == [
        f"| {C3_PLAIN.name} | 0.619 (0.60–0.64), tied 0% | 0.600 (0.60–0.60), tied 5% "
        "| 1 of 21 (1 tie after, 0 before, 0 flip) | 0.619 (0.60–0.64), tied 0% "
        "| 0.600 (0.60–0.60), tied 5% | 1 of 21 (1 tie after, 0 before, 0 flip) |"
    ]


def test_arithmetic_only_is_refused_outside_the_ladder_and_proxyfit(capsys):
    with pytest.raises(SystemExit):
        evaluation_main(["main", "--arithmetic-only"])
    assert "--arithmetic-only applies to: ladder" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        evaluation_main(["ladder", "--arithmetic-only", "--ablation-only"])
    assert "--arithmetic-only excludes" in capsys.readouterr().err


def test_the_results_notes_hold_the_table_of_the_archived_records():
    root = Path(__file__).resolve().parents[2]
    records = ablation.load(root / "docs/results-data/arithmetic.jsonl")
    rows = arithmetic.arithmetic_table(plan_proxyfit(range(5)), records)
    assert len(rows) == 2 + len(ablation.VARIANTS)  # every variant on the proxyfit models
    notes = (root / "evaluation/notes.md").read_text()
    assert all(row in notes for row in rows)
