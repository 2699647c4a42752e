"""Issue #19's evaluation: the regime ladder's plans, the ablation, the evading oracles."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch

from evaluation import ablation, evasion, prior_ceiling
from evaluation.__main__ import main as evaluation_main
from evaluation.build import architecture
from evaluation.specs import (
    CLI_AUDITS,
    CONVERGED_OWN_NULL_DRAWS,
    FAMILY_AUDITS,
    GRADED_AUDITS,
    LABEL_ONLY_AUDITS,
    LABELLED_DEFAULT_AUDITS,
    LADDER_NULL_DRAWS,
    MARGIN_AUDITS,
    PROXYLARGE_NULL_DRAWS,
    SCALE_CLEAN_SEEDS,
    SCALE_NULL_DRAWS,
    SCALE_OWN_AUDITS,
    UNLABELLED_AUDITS,
    UNLABELLED_DEFAULT_AUDITS,
    AuditSpec,
    ModelSpec,
    plan_converged,
    plan_converged_own,
    plan_ladder,
    plan_proxylarge,
    plan_proxylarge_noaug,
    plan_scale,
    plan_scale_own,
    plan_standard,
    plan_standard_clusters,
    plan_standard_own,
    plan_unlabelled,
)
from evaluation.standard import SmallResNet, make_resnet18, train_standard
from tests.support.fashion import DEBIAN, needs_data
from twinaudit.owner.claim_client import choose_score
from twinaudit.protocol.oracles.base import ClassifierOracle, ClassifyAnswer, OracleInfo
from twinaudit.protocol.prg import Prg
from twinaudit.protocol.stats.mixture_prior import DEFAULT_PRIOR
from twinaudit.protocol.stats.power import plan
from twinaudit.verifier.scoring.augment import draw_copies, to_unit

# --- plans -------------------------------------------------------------------------------------


def test_rung_a_audits_three_marks_and_the_cli_claims_with_clean_models_of_their_own():
    plan = plan_ladder([0, 1])
    used = [m for m in plan.models if not m.clean]
    clean = [m for m in plan.models if m.clean]
    markers = {"pgd", "pgdproxy", "pgdown"}
    assert {(m.marker, m.epsilon) for m in used} == {(marker, 10) for marker in markers}
    assert len(clean) == 2 and all(m.training == 1 for m in clean)  # main's, trained again
    assert clean[0] == ModelSpec(0, fraction=0.0, training=1)  # the recipe table's model
    assert {j.vault.name for j in plan.jobs} == {
        f"s{s}-n2000-{m}10" for s in (0, 1) for m in markers
    }
    for model in clean:  # audited with every vault of its seed
        assert {j.vault.marker for j in plan.jobs if j.model == model} == markers
    redrawn = [j for j in plan.jobs if j.audit.rho_draw]
    assert all(j.model.clean for j in redrawn)
    null_claims = len(CLI_AUDITS) + len(MARGIN_AUDITS) + len(GRADED_AUDITS) + len(FAMILY_AUDITS)
    null_claims += len(LABEL_ONLY_AUDITS)
    assert len(redrawn) == 2 * 3 * null_claims * LADDER_NULL_DRAWS
    assert {j.audit.perturbation for j in redrawn} == {
        "dither",
        "pad-shift-flip-dither",
        "pad-shift-flip",
    }
    (label_only,) = LABEL_ONLY_AUDITS
    assert (label_only.knowledge, label_only.perturbation) == ("C4", "pad-shift-flip")


def test_the_unlabelled_tables_claim_what_owner_claim_files_without_labels():
    # The word unlabelled, which the verifier resolves to C4 for any oracle, with the
    # dithered training family (its test is mixture-e: without a margin the graded test
    # is the same test, spec §7.5).
    default = choose_score("image")
    (audit,) = UNLABELLED_DEFAULT_AUDITS
    assert default.knowledge == "unlabelled" and audit.knowledge == "C4"
    assert (audit.perturbation, audit.k) == (default.perturbation, default.k)
    assert audit in UNLABELLED_AUDITS
    null = {j.audit for j in plan_unlabelled([0]).jobs if j.audit.rho_draw}
    assert replace(audit, rho_draw=1) in null


def test_rung_b_is_a_resnet_on_ten_thousand_images_with_its_own_names():
    plan = plan_standard([0])
    names = [m.name for m in plan.models]
    assert names == [
        "s0-n10000-resnet-sgd-pad-crop-flip-e80-pgd10-f1.0",
        "s0-n10000-resnet-sgd-pad-crop-flip-e80-pgdproxy10-f1.0",
        "s0-n10000-resnet-sgd-pad-crop-flip-e80-clean",
    ]
    # From seed 1 on, only the proxy's marks (the CLI's detected nothing on seed 0).
    later = [m.name for m in plan_standard([0, 1]).models if m.seed == 1]
    assert later == [
        "s1-n10000-resnet-sgd-pad-crop-flip-e80-pgdproxy10-f1.0",
        "s1-n10000-resnet-sgd-pad-crop-flip-e80-clean",
    ]
    assert {j.vault.marker for j in plan_standard([1]).jobs} == {"pgdproxy"}
    assert ModelSpec(0).name == "s0-n2000-pad-crop-flip-e500-bernoulli32-f1.0"  # unchanged
    with pytest.raises(ValueError, match="trainer"):
        ModelSpec(0, trainer="xgboost")


def test_rung_b_on_the_owners_own_proxy_marks_shares_the_standard_tables_clean_models():
    plan = plan_standard_own(range(5))
    used = [m for m in plan.models if not m.clean]
    assert [m.name for m in used][:1] == ["s0-n10000-resnet-sgd-pad-crop-flip-e80-pgdown10-f1.0"]
    assert len(used) == 5 and {m.marker for m in used} == {"pgdown"}
    clean = [m for m in plan.models if m.clean]
    assert [m.seed for m in clean] == [0, 1, 2, 3, 4]
    assert {m.name for m in clean} == {m.name for m in plan_standard(range(5)).models if m.clean}
    assert {j.vault.name for j in plan.jobs if j.model.clean} == {
        f"s{s}-n10000-pgdown10" for s in range(5)
    }
    assert {j.audit for j in plan.jobs} == {j.audit for j in plan_standard([1]).jobs}


def test_the_unlabelled_owners_rung_a_shares_the_ladders_clean_models_and_checks_200_nulls():
    plan = plan_unlabelled(range(5))
    used = [m for m in plan.models if not m.clean]
    clean = [m for m in plan.models if m.clean]
    assert used[0].name == "s0-n2000-pad-crop-flip-e500-pgdclusters10-f1.0"
    assert {m.name for m in clean} == {m.name for m in plan_ladder(range(5)).models if m.clean}
    # The claims of an owner without labels: C2 from probabilities (her default before),
    # C4 with the training family, and C4 with it dithered (her default since).
    c2, c4, c4_default = UNLABELLED_AUDITS
    assert (c2.knowledge, c2.k, c2.perturbation, c2.margin, c2.test) == (
        "C2",
        1,
        "dither",
        0.01,
        "mixture-graded",
    )
    assert c4 == LABEL_ONLY_AUDITS[0] and c4_default == UNLABELLED_DEFAULT_AUDITS[0]
    redrawn = [j for j in plan.jobs if j.audit.rho_draw]
    assert all(j.model.clean for j in redrawn)
    assert len(redrawn) == 5 * len(UNLABELLED_AUDITS) * LADDER_NULL_DRAWS >= 200
    assert {j.vault.marker for j in plan.jobs} == {"pgdclusters"}
    rung_b = plan_standard_clusters([0])
    assert [m.name for m in rung_b.models] == [
        "s0-n10000-resnet-sgd-pad-crop-flip-e80-pgdclusters10-f1.0",
        "s0-n10000-resnet-sgd-pad-crop-flip-e80-clean",
    ]
    assert {j.audit for j in rung_b.jobs if not j.audit.rho_draw} == {
        j.audit for j in plan.jobs if not j.audit.rho_draw
    }
    # Rung (b) checks only the default claim without labels under fresh bits, there on the
    # clean model alone.
    assert {replace(j.audit, rho_draw=0) for j in rung_b.jobs if j.audit.rho_draw} == set(
        UNLABELLED_DEFAULT_AUDITS
    )
    assert all(j.model.clean for j in rung_b.jobs if j.audit.rho_draw)


def test_converged_rung_b_trains_the_same_resnet_longer_on_the_proxy_marks_alone():
    plan = plan_converged([0, 1])
    assert [m.name for m in plan.models if m.seed == 0] == [
        "s0-n10000-resnet-sgd-pad-crop-flip-e200-pgdproxy10-f1.0",
        "s0-n10000-resnet-sgd-pad-crop-flip-e200-clean",
    ]
    assert {j.vault.name for j in plan.jobs} == {"s0-n10000-pgdproxy10", "s1-n10000-pgdproxy10"}
    # Same claims as rung (b) at 80 epochs, on the same vaults.
    assert {j.audit for j in plan.jobs} == {j.audit for j in plan_standard([1]).jobs}


def test_converged_own_trains_the_converged_resnet_on_the_default_marks_with_labels():
    plan = plan_converged_own([0, 1])
    assert [m.name for m in plan.models if m.seed == 0] == [
        "s0-n10000-resnet-sgd-pad-crop-flip-e200-pgdown10-f1.0",
        "s0-n10000-resnet-sgd-pad-crop-flip-e200-clean-t1",
    ]
    # rung (b)'s own-proxy vaults, the converged table's claims on the used models
    assert {j.vault.name for j in plan.jobs} == {"s0-n10000-pgdown10", "s1-n10000-pgdown10"}
    used = {j.audit for j in plan.jobs if not j.model.clean}
    assert used == {j.audit for j in plan_converged([0]).jobs if not j.model.clean}
    # the labelled defaults under fresh bits, on the clean models alone
    redrawn = [j for j in plan.jobs if j.audit.rho_draw]
    assert all(j.model.clean for j in redrawn)
    assert {replace(j.audit, rho_draw=0) for j in redrawn} == set(LABELLED_DEFAULT_AUDITS)
    assert len(redrawn) == 2 * len(LABELLED_DEFAULT_AUDITS) * CONVERGED_OWN_NULL_DRAWS


def test_rung_c_is_resnet18_on_54000_images_with_clean_models_for_two_seeds():
    plan = plan_scale(range(5))
    used = [m for m in plan.models if not m.clean]
    clean = [m for m in plan.models if m.clean]
    assert used[0].name == "s0-n54000-resnet18-sgd-pad-crop-flip-e80-pgdproxy10-f1.0"
    assert len(used) == 5 and [m.seed for m in clean] == list(SCALE_CLEAN_SEEDS)
    assert {j.vault.n_train for j in plan.jobs} == {54_000}
    redrawn = [j for j in plan.jobs if j.audit.rho_draw]
    assert all(j.model.clean for j in redrawn)
    assert len(redrawn) == len(clean) * len(CLI_AUDITS) * SCALE_NULL_DRAWS
    assert isinstance(architecture(used[0]), SmallResNet)


def test_rung_c_on_the_default_marks_pairs_every_used_resnet18_with_a_clean_one():
    plan = plan_scale_own(range(5))
    assert [m.name for m in plan.models if m.seed == 3] == [
        "s3-n54000-resnet18-sgd-pad-crop-flip-e80-pgdown10-f1.0",
        "s3-n54000-resnet18-sgd-pad-crop-flip-e80-clean-t1",
    ]
    # the scale table's models and data, the marks of the owner's own proxy
    scale = {m.name.replace("pgdproxy", "pgdown") for m in plan_scale(range(5)).models}
    assert {m.name for m in plan.models if not m.clean} <= scale
    assert {j.vault.name for j in plan.jobs} == {f"s{s}-n54000-pgdown10" for s in range(5)}
    assert set(LABELLED_DEFAULT_AUDITS) < set(SCALE_OWN_AUDITS)
    assert {j.audit for j in plan.jobs if not j.model.clean} == set(SCALE_OWN_AUDITS)
    redrawn = [j for j in plan.jobs if j.audit.rho_draw]
    assert all(j.model.clean for j in redrawn)
    assert {replace(j.audit, rho_draw=0) for j in redrawn} == set(LABELLED_DEFAULT_AUDITS)
    assert len(redrawn) == 5 * len(LABELLED_DEFAULT_AUDITS) * SCALE_NULL_DRAWS
    # a seed at a time, as a lent accelerator's time allows
    assert [m.seed for m in plan_scale_own([2]).models] == [2, 2]


def test_the_large_owner_table_splits_half_and_half_and_compares_two_proxy_schedules():
    plan = plan_proxylarge(range(3))
    assert [m.name for m in plan.models if m.seed == 2] == [
        "s2-n40000-o50-pad-crop-flip-e20-pgdownfit10-f1.0",
        "s2-n40000-o50-pad-crop-flip-e20-pgdownfitsteps10-f1.0",
        "s2-n40000-o50-pad-crop-flip-e20-clean",
    ]
    assert {j.vault.name for j in plan.jobs if j.model.seed == 0} == {
        "s0-n40000-o50-pgdownfit10",
        "s0-n40000-o50-pgdownfitsteps10",
    }
    assert {j.audit for j in plan.jobs if not j.model.clean} == set(LABELLED_DEFAULT_AUDITS)
    redrawn = [j for j in plan.jobs if j.audit.rho_draw]
    assert all(j.model.clean and j.vault.marker == "pgdownfit" for j in redrawn)
    assert len(redrawn) == 3 * len(LABELLED_DEFAULT_AUDITS) * PROXYLARGE_NULL_DRAWS
    clean = [j for j in plan.jobs if j.model.clean and not j.audit.rho_draw]
    assert len(clean) == 3 * 2 * len(LABELLED_DEFAULT_AUDITS)  # seeds, both vaults, claims
    # the memorising practitioner's table: the same vaults and claims, models of its own
    noaug = plan_proxylarge_noaug(range(3))
    assert [m.name for m in noaug.models if m.seed == 2] == [
        "s2-n40000-o50-none-e20-pgdownfit10-f1.0",
        "s2-n40000-o50-none-e20-pgdownfitsteps10-f1.0",
        "s2-n40000-o50-none-e20-clean",
    ]
    assert {(j.vault, j.audit) for j in noaug.jobs} == {(j.vault, j.audit) for j in plan.jobs}
    assert not {m.name for m in noaug.models} & {m.name for m in plan.models}
    # her share is named only where it is not the demo's 10%: every other name is as it was
    assert ModelSpec(0).name == "s0-n2000-pad-crop-flip-e500-bernoulli32-f1.0"
    assert ModelSpec(0).vault().name == "s0-n2000-bernoulli32"
    with pytest.raises(ValueError, match="owner_percent"):
        ModelSpec(0, owner_percent=60)


def test_resnet18_has_the_cifar_form_eleven_million_weights_and_full_size_first_stage():
    torch.manual_seed(0)
    net = make_resnet18().eval()
    assert sum(p.numel() for p in net.parameters()) == 11_172_810
    first = net.stages[0]
    assert first.conv1.stride == (1, 1) and isinstance(first.short, torch.nn.Identity)
    assert [b.conv1.stride for b in net.stages[2::2]] == [(2, 2)] * 3
    assert net(torch.zeros(2, 1, 28, 28)).shape == (2, 10)
    # Mixed precision asks for an accelerator: on the CPU it changes nothing.
    images = np.random.default_rng(1).integers(0, 256, (32, 28, 28), dtype=np.uint8)
    labels = np.arange(32) % 10
    torch.set_num_threads(1)
    plain = train_standard(images, labels, epochs=1, seed=2, batch=16)
    mixed = train_standard(images, labels, epochs=1, seed=2, batch=16, mixed=True)
    for a, b in zip(plain.state_dict().values(), mixed.state_dict().values(), strict=True):
        assert torch.equal(a, b)


def test_an_audit_names_its_statistic_only_when_not_the_default():
    assert AuditSpec(knowledge="C1").name == "C1-k32-pad-shift-flip-mixture-e-p0.05"
    assert AuditSpec(knowledge="C1", statistic="logit").name.endswith("-logit")


def test_the_small_resnet_trains_with_sgd_and_is_seeded():
    images = np.random.default_rng(0).integers(0, 256, (64, 28, 28), dtype=np.uint8)
    labels = np.arange(64) % 10
    torch.set_num_threads(1)
    first = train_standard(images, labels, epochs=1, seed=3)
    second = train_standard(images, labels, epochs=1, seed=3)
    assert isinstance(first, SmallResNet) and not first.training
    assert first(torch.zeros(2, 1, 28, 28)).shape == (2, 10)
    for a, b in zip(first.state_dict().values(), second.state_dict().values(), strict=True):
        assert torch.equal(a, b)
    assert sum(p.numel() for p in first.parameters()) == 309_162


# --- evading oracles ---------------------------------------------------------------------------


class _Fixed(ClassifierOracle):
    """Answers row n with a vector that names query n (so a copied answer shows)."""

    def __init__(self, label_only: bool = False) -> None:
        output = "label" if label_only else "probabilities"
        self._info = OracleInfo("fixed", "digest", ("classify",), output, 10, 4096)

    @property
    def info(self) -> OracleInfo:
        return self._info

    def classify(self, images):
        n = len(images)
        if self._info.classify_output == "label":
            return ClassifyAnswer(labels=np.arange(n, dtype=np.int64) % 10)
        rows = np.full((n, 10), 0.01)
        rows[np.arange(n), np.arange(n) % 10] = 0.91
        return ClassifyAnswer(probabilities=rows)


def _published(n=3):
    return np.random.default_rng(5).integers(1, 255, (n, 28, 28, 1), dtype=np.uint8)


def _copy(image, family, label="augment/0/0"):
    return draw_copies(family, 1, image, Prg(bytes(32), label))[1]


def test_exact_matching_finds_none_and_every_pad_shift_flip_copy_but_no_dither_copy():
    published = _published()
    oracle = evasion.EvadingOracle(_Fixed(), "exact", published, epsilon=10)
    queries = np.concatenate(
        [
            _copy(published[0], "none"),
            *(_copy(published[1], "pad-shift-flip", f"augment/{i}/1") for i in range(5)),
            _copy(published[2], "dither"),
        ]
    )
    answer = oracle.classify(queries)
    assert oracle.recognised == 6 and oracle.queries == 7
    assert answer.probabilities is not None
    assert np.all(answer.probabilities[:6] == 0.1)  # recognised: the uniform answer
    assert answer.probabilities[6].max() == 0.91  # the dither copy kept its answer


def test_near_matching_finds_dither_copies_and_labels_move_to_another_class():
    published = _published()
    oracle = evasion.EvadingOracle(_Fixed(label_only=True), "near", published, epsilon=10)
    other = to_unit(np.full((28, 28, 1), 128, dtype=np.uint8)).astype(np.float32)[None]
    answer = oracle.classify(np.concatenate([_copy(published[2], "dither"), other]))
    assert oracle.recognised == 1
    assert answer.labels is not None and answer.labels.tolist() == [1, 1]  # 0 moved to 1


def test_pairdetect_answers_a_twin_with_the_earlier_query_s_answer():
    image = _published(1)[0]
    plus = np.clip(image.astype(int) + 10, 0, 255).astype(np.uint8)
    minus = np.clip(image.astype(int) - 10, 0, 255).astype(np.uint8)
    far = np.zeros_like(image)
    queries = np.stack([to_unit(x).astype(np.float32) for x in (plus, far, minus)])
    oracle = evasion.EvadingOracle(_Fixed(), "pairdetect", _published(), epsilon=10)
    answer = oracle.classify(queries)
    assert answer.probabilities is not None
    assert np.array_equal(answer.probabilities[2], answer.probabilities[0])  # the twin
    assert not np.array_equal(answer.probabilities[1], answer.probabilities[0])
    assert oracle.recognised == 1
    with pytest.raises(ValueError, match="strategy"):
        evasion.EvadingOracle(_Fixed(), "psychic", _published(), epsilon=10)


def test_the_evading_oracle_describes_itself_as_the_honest_one():
    honest = _Fixed()
    assert evasion.EvadingOracle(honest, "near", _published(), 10).info == honest.info


# --- the ablation's arithmetic -----------------------------------------------------------------


def test_q_hat_pools_untied_pairs_and_reports_ties():
    records = [{"wins": 6, "losses": 2, "ties": 2}, {"wins": 3, "losses": 5, "ties": 0}]
    assert ablation.q_hat(records) == (9 / 16, 2 / 18)
    assert ablation.q_hat([{"wins": 0, "losses": 0, "ties": 4}]) is None


def test_the_ablation_table_leaves_out_a_variant_no_used_model_was_scored_with():
    plan = plan_unlabelled([0, 1])
    pairs = dict.fromkeys((job.model, job.vault) for job in plan.jobs)
    first, later = ablation.VARIANTS[:2]
    records = {
        ablation.key(m, v, variant): {"wins": 6, "losses": 4, "ties": 0}
        for m, v in pairs
        for variant in (first, later)
        if variant is first or m.clean  # the later one reached the clean models only
    }
    rows = ablation.ablation_table(plan, records, (first, later))[2:]
    row = f"| `pgdclusters` | {first.name} | 0.600 | 0.60 0.60 | 0% | 0.600 | 0.60 0.60 |"
    assert rows == [row]


def test_a_shared_variant_draws_both_twins_from_one_stream():
    assert ablation.Variant("C1", "pad-shift-flip", 32, shared=True).name.endswith("shared")
    spec = ablation.Variant("C2", "dither", 1, "logit").spec()
    assert spec.statistic == "logit" and spec.knowledge == "C2"


# --- a tiny run of rung (a), end to end --------------------------------------------------------


def _tiny_run(tmp_path: Path, table: str) -> Path:
    """Run ``table`` at M = 200, one epoch, one seed; return its work directory."""
    args = [table, "--n-train", "200", "--epochs", "1", "--repeats", "1"]
    args += ["--work", str(tmp_path / "work"), "--out", str(tmp_path / "results.md")]
    assert evaluation_main(args) == 0
    return tmp_path / "work"


@pytest.mark.slow
@needs_data
def test_a_tiny_ladder_trains_audits_ablates_measures_evasion_and_reports(tmp_path):
    work = _tiny_run(tmp_path, "ladder")
    audits = [json.loads(line) for line in (work / "audits.jsonl").read_text().splitlines()]
    assert len(audits) == len(plan_ladder([0]).jobs)
    variants = (work / "ablation.jsonl").read_text().splitlines()
    assert len(variants) == 6 * len(ablation.VARIANTS)  # three used models, one clean thrice
    for line in variants:
        record = json.loads(line)
        assert record["wins"] + record["losses"] + record["ties"] == 20  # every pair
    dodges = [json.loads(line) for line in (work / "evasion.jsonl").read_text().splitlines()]
    assert len(dodges) == 3 * len(evasion.DESIGNS) * (1 + len(evasion.STRATEGIES))
    assert (work / "proxy" / "fmnist-test-e1-s99.pt").exists()  # the smoke run's proxy
    assert (work / "proxy" / "own-s0-n200-t79.pt").exists()  # and the owner's, 79 steps
    guesses = [json.loads(line) for line in (work / "estimates.jsonl").read_text().splitlines()]
    assert sorted(g["vault"] for g in guesses) == [
        "s0-n200-pgd10",
        "s0-n200-pgdown10",
        "s0-n200-pgdproxy10",
    ]
    for guess in guesses:
        # The smoke run's practitioner: 200 steps; 144 public images beside 16 twins (10%).
        assert guess["config"]["steps"] == 200 and guess["public_images"] == 144
        assert (guess["used_pairs"], guess["control_pairs"]) == (16, 4)
        for condition in guess["conditions"]:
            used, control = condition["used"], condition["control"]
            assert used["wins"] + used["losses"] + used["ties"] == 16
            assert control["wins"] + control["losses"] + control["ties"] == 4
    exact_none = next(r for r in dodges if r["key"].endswith("C1 none K=1 entropy|exact"))
    assert exact_none["recognised"] == 0.5  # every published query, none of the hidden ones
    report = (tmp_path / "results.md").read_text()
    assert "## Regime ladder: the CLI's default marks and claims" in report
    assert "Ablation: q̂ of each score variant" in report and "Evasion:" in report
    assert "The owner's estimate before publishing" in report
    assert "| `pgdproxy` | C3 |" in report
    assert "Null check, C1 `dither` K = 1" in report
    assert "Rungs (b) and (c) follow." in report


@pytest.mark.slow
@needs_data
def test_a_tiny_unlabelled_rung_marks_on_a_clusters_proxy_and_reports(tmp_path, capsys):
    work = _tiny_run(tmp_path, "unlabelled")
    assert (work / "proxy" / "clusters-s0-n200-t79.pt").exists()  # the clusters proxy
    audits = [json.loads(line) for line in (work / "audits.jsonl").read_text().splitlines()]
    assert len(audits) == len(plan_unlabelled([0]).jobs)
    report = (tmp_path / "results.md").read_text()
    assert "## Regime ladder (a) for an owner without labels" in report
    assert "| `pgdclusters` ε = 10 | C2, `dither` K = 1, margin 0.01, `mixture-graded` |" in report
    # --ablation-only scores the variants not on record, and nothing else: here the last
    # variant of every model, its record dropped; no model trains, no claim runs.
    scored = (work / "ablation.jsonl").read_text().splitlines()
    last = ablation.VARIANTS[-1].name
    kept = [line for line in scored if not json.loads(line)["key"].endswith(f"|{last}")]
    assert len(scored) - len(kept) == 2  # one used model, one clean
    (work / "ablation.jsonl").write_text("\n".join(kept) + "\n")
    claims = (work / "audits.jsonl").read_text()
    capsys.readouterr()
    args = ["unlabelled", "--n-train", "200", "--epochs", "1", "--repeats", "1"]
    args += ["--work", str(work), "--out", str(tmp_path / "again.md"), "--ablation-only"]
    assert evaluation_main(args) == 0
    printed = capsys.readouterr().out
    assert printed.count(": 1 variants") == 2 and "training" not in printed
    assert "auditing" not in printed
    again = (work / "ablation.jsonl").read_text().splitlines()
    assert sorted(again) == sorted(scored)  # the same wins, losses and ties as before
    assert (work / "audits.jsonl").read_text() == claims


@pytest.mark.slow
@needs_data
def test_a_tiny_large_owner_table_marks_half_the_split_on_both_schedules(tmp_path):
    work = _tiny_run(tmp_path, "proxylarge")
    split = work / "data" / "s0-n200-o50"
    assert len(json.loads((split / "owner-labels.json").read_text())) == 100
    assert np.load(split / "shared-images.npy").shape[0] == 100
    proxies = sorted(p.name for p in (work / "proxy").iterdir())
    assert proxies == ["ownfit-s0-n200-o50-t79.pt", "ownfitsteps-s0-n200-o50-t79.pt"]
    audits = (work / "audits.jsonl").read_text().splitlines()
    assert len(audits) == len(plan_proxylarge([0]).jobs)
    for line in (work / "ablation.jsonl").read_text().splitlines():
        record = json.loads(line)
        assert record["wins"] + record["losses"] + record["ties"] == 100  # every pair
    report = (tmp_path / "results.md").read_text()
    assert "## An owner of 20,000 items" in report
    assert "| `pgdownfitsteps` ε = 10 | C3, `dither` K = 1 |" in report


def test_ablation_only_is_refused_outside_the_ladder(capsys):
    with pytest.raises(SystemExit):
        evaluation_main(["main", "--ablation-only"])
    assert "--ablation-only applies to the regime ladder's tables" in capsys.readouterr().err


def test_the_prior_ceiling_table_matches_the_planner_and_bounds_the_gain():
    lines = prior_ceiling.table()
    assert len(lines) == 2 + 2 * 5  # header, rule; four priors and the paper's test per N
    default = next(
        line for line in lines if line.startswith(f"| 200 | mixture-e ({DEFAULT_PRIOR.name})")
    )
    power = plan("mixture-e", 200, 0.6, 0.05)
    assert f"{power.detection_probability:.2f} / {power.expected_pairs:.0f}" in default
    cells = {
        line.split(" | ")[1]: float(line.split(" | ")[3].split(" / ")[0])
        for line in lines
        if line.startswith("| 200 |")
    }
    # At q = 0.576 no prior reaches more than the point prior at that q.
    assert cells["mixture-e (grid15-v1)"] < cells["mixture-e (low-q)"] <= cells["mixture-e (point)"]


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="prctl is Linux's")
def test_an_evaluation_worker_asks_to_end_with_the_process_that_started_it():
    # Run in a fresh interpreter: the setting stays with the process that made it.
    code = (
        "import ctypes\n"
        "from evaluation.build import PR_GET_PDEATHSIG, die_with_parent\n"
        "die_with_parent()\n"
        "value = ctypes.c_int()\n"
        "ctypes.CDLL(None).prctl(PR_GET_PDEATHSIG, ctypes.byref(value), 0, 0, 0)\n"
        "print(value.value)\n"
    )
    root = Path(__file__).resolve().parents[2]
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=root
    )
    assert int(out.stdout) == signal.SIGTERM


@needs_data
def test_seeds_picks_the_experiments_a_command_runs(tmp_path, capsys):
    work = ["--work", str(tmp_path), "--data", str(DEBIAN), "--plan"]
    assert evaluation_main(["scale", "--seeds", "3", "4", *work]) == 0
    assert "scale: 2 models to train" in capsys.readouterr().out  # seeds 3 and 4 train no clean
    assert evaluation_main(["scale", "--repeats", "2", *work]) == 0
    assert "scale: 4 models to train" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        evaluation_main(["scale", "--seeds", "-1", *work])


def test_noise_copies_escape_matching_hosts_and_pixel_pairdetect_but_not_feature_pairdetect():
    published = _published()
    image = published[0]
    marked = np.clip(image.astype(int) + 10, 0, 255).astype(np.uint8)
    twins = np.concatenate([_copy(image, "noise"), _copy(marked, "noise", "augment/0/1")])
    for strategy in ("exact", "near", "pairdetect"):
        oracle = evasion.EvadingOracle(_Fixed(), strategy, published, epsilon=10)
        oracle.classify(twins)
        assert oracle.recognised == 0, strategy
    # Pooled features average the per-pixel noise away: the twins are paired.
    oracle = evasion.EvadingOracle(_Fixed(), "pairdetect-features", published, epsilon=10)
    answer = oracle.classify(twins)
    assert oracle.recognised == 1
    assert answer.probabilities is not None
    assert np.array_equal(answer.probabilities[1], answer.probabilities[0])
