"""The attacks table (issue #25): its plan, the training-time attacks, and a tiny run."""

import json

import numpy as np
import pytest
import torch
from torch.func import functional_call, grad, vmap

from evaluation import attacks, specs
from evaluation.__main__ import main as evaluation_main
from evaluation.attack_training import (
    ExampleNorms,
    gaussian_noise,
    mark_perturb,
    train_attacked,
)
from evaluation.specs import ATTACK_AUDITS, ModelSpec, plan_attacks, with_sizes
from tests.support.fashion import needs_data
from tests.support.models import TinyCNN

RNG = np.random.default_rng(0)


def test_the_plan_reuses_the_ladder_models_and_adds_one_model_per_training_attack():
    plan = plan_attacks([0, 1])
    names = [m.name for m in plan.models]
    assert "s0-n2000-pad-crop-flip-e500-pgdown10-f1.0" in names  # the ladder's, shared
    assert "s0-n2000-pad-crop-flip-e500-clean-t1" in names
    assert "s1-n2000-pad-crop-flip-e500-dp0.3-pgdown10-f1.0" in names
    assert "s0-n2000-pad-crop-flip-e125-pgdown10-f1.0" in names
    assert "s0-n2000-none-e500-pgdown10-f1.0" in names
    assert "s0-n2000-pad-crop-flip-e500-markperturb-clean" in names  # seed 0's clean attacks
    assert not any(n.startswith("s1") and n.endswith("-clean") for n in names)
    assert len(names) == len(set(names)) == 2 * (2 + 12) + 12
    rows = {attacks.row_of(j) for j in plan.jobs}
    assert rows == {key for key, _, _ in attacks.ROWS}
    topk = [j for j in plan.jobs if j.audit.defence == "topk:1"]
    assert {j.audit.knowledge for j in topk} == {"C1", "C2"}
    assert {j.audit.defence for j in plan.jobs if j.model.attack} == {""}
    assert all(j.vault.name == f"s{j.model.seed}-n2000-pgdown10" for j in plan.jobs)


def test_rows_keep_the_unattacked_models_and_only_the_named_training_rows(tmp_path):
    whole = plan_attacks([0, 1])
    plan = specs.only_attack_rows(whole, ["noaug"], [0, 1])
    names = {m.name for m in plan.models}
    assert names == {
        "s0-n2000-pad-crop-flip-e500-pgdown10-f1.0",
        "s0-n2000-pad-crop-flip-e500-clean-t1",
        "s1-n2000-pad-crop-flip-e500-pgdown10-f1.0",
        "s1-n2000-pad-crop-flip-e500-clean-t1",
        "s0-n2000-none-e500-pgdown10-f1.0",
        "s1-n2000-none-e500-pgdown10-f1.0",
        "s0-n2000-none-e500-clean",  # seed 0 is the attacks' clean seed
    }
    assert {attacks.row_of(j) for j in plan.jobs} == {"none", "noaug", *specs.ATTACK_DEFENCES}
    assert all(j in whole.jobs for j in plan.jobs)
    assert [j for j in whole.jobs if j.model.name in names] == plan.jobs
    with pytest.raises(ValueError, match="no training-time attack row nope"):
        specs.only_attack_rows(whole, ["nope"], [0, 1])
    assert evaluation_main(["attacks", "--rows", "noaug", "--plan", "--work", str(tmp_path)]) == 0


def test_noise_claims_go_to_the_noaug_row_with_fresh_bit_null_checks_on_its_clean_model():
    plan = plan_attacks([0, 1])
    noise = [j for j in plan.jobs if j.audit.perturbation == "noise"]
    assert {j.model.name for j in noise} == {
        "s0-n2000-none-e500-pgdown10-f1.0",
        "s1-n2000-none-e500-pgdown10-f1.0",
        "s0-n2000-none-e500-clean",
    }
    assert {(j.audit.knowledge, j.audit.k) for j in noise} == {("C3", 32), ("C4", 32)}
    clean = [j for j in noise if j.model.clean]
    assert sorted({j.audit.rho_draw for j in clean}) == list(range(specs.NOISE_NULL_DRAWS + 1))
    assert len(clean) == 2 * (specs.NOISE_NULL_DRAWS + 1)
    used = attacks.noaug_plan(plan)
    assert {j.model.name for j in used.jobs} == {
        "s0-n2000-none-e500-pgdown10-f1.0",
        "s1-n2000-none-e500-pgdown10-f1.0",
    }
    assert used.models == list(dict.fromkeys(j.model for j in used.jobs))
    header = attacks.attacks_table(plan, {}, {}, 2)[0]
    assert "C3 `noise` K=32 | C4 `noise` K=32" in header


def test_rows_apply_to_the_attacks_and_photo_tables_only(capsys):
    with pytest.raises(SystemExit):
        evaluation_main(["ladder", "--rows", "noaug", "--plan"])
    assert (
        "--rows applies to the attacks, photo and photo-standard tables" in capsys.readouterr().err
    )


def test_smoke_sizes_scale_early_stopping_and_keep_the_rows_apart():
    plan = with_sizes(plan_attacks([0]), n_train=200, epochs=4)
    epochs = sorted({m.epochs for m in plan.models})
    assert epochs == [1, 2, 3, 4]
    assert {attacks.row_of(j, 4) for j in plan.jobs} == {key for key, _, _ in attacks.ROWS}


def test_an_attack_is_named_and_checked():
    spec = ModelSpec(0, attack="gauss20")
    assert spec.name == "s0-n2000-pad-crop-flip-e500-gauss20-bernoulli32-f1.0"
    assert ModelSpec(0).name == "s0-n2000-pad-crop-flip-e500-bernoulli32-f1.0"
    with pytest.raises(ValueError, match="attack"):
        ModelSpec(0, attack="bribe")
    with pytest.raises(ValueError, match="attack"):
        ModelSpec(0, attack="dp1", trainer="resnet-sgd")
    audit = specs.AuditSpec(knowledge="C1", defence="topk:1")
    assert audit.name.endswith("-def[topk:1]")
    assert specs.AuditSpec().name == "C3-k32-pad-shift-flip-mixture-e-p0.05"


def test_the_hooks_per_example_norms_match_torch_func():
    torch.manual_seed(0)
    model = TinyCNN()
    norms = ExampleNorms(model)
    x, y = torch.rand(5, 1, 28, 28), torch.randint(0, 10, (5,))
    params = {k: v.detach() for k, v in model.named_parameters()}

    def loss(p, xi, yi):
        return torch.nn.functional.cross_entropy(functional_call(model, p, (xi[None],)), yi[None])

    expected = vmap(grad(loss), in_dims=(None, 0, 0))(params, x, y)
    reference = torch.sqrt(sum(g.reshape(5, -1).pow(2).sum(1) for g in expected.values()))
    norms.start()
    losses = torch.nn.functional.cross_entropy(model(x), y, reduction="none")
    torch.autograd.grad(losses.sum(), list(model.parameters()))
    torch.testing.assert_close(norms.stop().sqrt(), reference, rtol=1e-4, atol=1e-6)


def test_gaussian_noise_is_seeded_and_stays_in_range():
    images = RNG.integers(0, 256, size=(8, 28, 28), dtype=np.uint8)
    noisy = gaussian_noise(images, 20.0, seed=3)
    np.testing.assert_array_equal(noisy, gaussian_noise(images, 20.0, seed=3))
    assert noisy.dtype == np.uint8
    assert 10 < np.abs(noisy.astype(int) - images).mean() < 20


def test_mark_perturb_moves_each_image_by_at_most_epsilon():
    images = RNG.integers(0, 256, size=(16, 28, 28), dtype=np.uint8)
    labels = np.arange(16) % 4
    marked = mark_perturb(images, labels, seed=0, proxy_steps=2)
    assert marked.shape == images.shape
    assert marked.dtype == np.uint8
    moved = np.abs(marked.astype(int) - images)
    assert 0 < moved.max() <= 10


@pytest.mark.parametrize("attack", ["dp1", "advreg", "gauss10"])
def test_each_training_attack_trains_the_demo_network(attack):
    images = RNG.integers(0, 256, size=(24, 28, 28), dtype=np.uint8)
    labels = np.arange(24) % 10
    model = train_attacked(
        images,
        labels,
        attack=attack,
        epochs=1,
        seed=0,
        recipe="pad-crop-flip",
        reference=images[:8],
    )
    assert model(torch.zeros(2, 1, 28, 28)).shape == (2, 10)
    assert not model.training


def test_a_table_row_reads_its_cells_and_the_papers_figures():
    plan = plan_attacks([0])
    results = {}
    for job in plan.jobs:
        if attacks.row_of(job) == "topk:1":
            detected = not job.model.clean
            results[job.key] = {
                "decision": "detected" if detected else "not-detected",
                "pairs_opened": 40,
                "draws": 30,
                "successes": 24 if detected else 15,
            }
    table = attacks.attacks_table(plan, results, {}, 1)
    row = next(line for line in table if line.startswith("| `topk:1`"))
    assert "1/1 (2.00%, q̂ 0.800)" in row
    assert "0/3 claims, 1 model(s)" in row
    assert "74.29%: 20/20 0.24%; 20/20 0.24%; -; -" in row
    assert len(row.split("|")) == len(table[0].split("|"))
    assert len(ATTACK_AUDITS) == 6


@pytest.mark.slow
@needs_data
def test_a_tiny_attacks_table_trains_audits_and_reports(tmp_path, monkeypatch):
    monkeypatch.setattr(specs, "ATTACK_DP_SIGMAS", (1.0,))
    monkeypatch.setattr(specs, "ATTACK_NOISE", (20,))
    args = ["attacks", "--n-train", "200", "--epochs", "4", "--repeats", "1"]
    args += ["--work", str(tmp_path / "work"), "--out", str(tmp_path / "results.md")]
    assert evaluation_main(args) == 0
    work = tmp_path / "work"
    audits = [json.loads(line) for line in (work / "audits.jsonl").read_text().splitlines()]
    plan = with_sizes(plan_attacks([0]), n_train=200, epochs=4)
    assert len(audits) == len(plan.jobs)
    assert any("-def[pairdetect-features]" in a["key"] for a in audits)
    infos = [json.loads(p.read_text()) for p in (work / "models").glob("*/model.json")]
    assert {i["spec"]["attack"] for i in infos} == {"", "dp1", "advreg", "gauss20", "markperturb"}
    report = (tmp_path / "results.md").read_text()
    assert "## Adaptive attacks (the paper's table `classifier:robustness`)" in report
    for key in ("none", "pairdetect-features", "dp1", "es125", "noaug", "markperturb"):
        assert f"| `{key}` |" in report
    assert "**The `noise` claims against hosts that read the queries**" in report
    assert "| `pgdown` | C4 noise K=32 entropy |" in report
    runs = json.loads((work / "runs.json").read_text())
    assert runs[-1]["tables"] == ["attacks"]
