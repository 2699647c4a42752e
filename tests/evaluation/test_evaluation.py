"""The evaluation harness: plans, training sets, the tables' arithmetic, and a tiny run."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace

import numpy as np
import pytest
import torch

from demo.practitioner import RECIPES, augmenter, random_resized_crop_flip, train
from evaluation.__main__ import main as evaluation_main
from evaluation.build import Workspace
from evaluation.specs import (
    PLANNERS,
    AuditSpec,
    Job,
    ModelSpec,
    Plan,
    is_clean_name,
    plan_epsilon,
    plan_fraction,
    plan_k,
    plan_main,
    plan_recipe,
)
from evaluation.tables import Cell, cell, pooled_false_detections
from tests.support.fashion import DEBIAN, needs_data


def test_a_clean_model_has_no_marks_and_names_are_unique():
    assert ModelSpec(0, fraction=0.0, epsilon=48) == ModelSpec(0, fraction=0.0)
    assert ModelSpec(0, fraction=0.0).epsilon == 0
    assert ModelSpec(0, fraction=0.0).vault().epsilon == 32  # audited with the default marks
    names = {
        m.name
        for planner in (plan_main, plan_fraction, plan_epsilon, plan_k, plan_recipe)
        for m in planner([0, 1]).models
    }
    specs = {
        m
        for planner in (plan_main, plan_fraction, plan_epsilon, plan_k, plan_recipe)
        for m in planner([0, 1]).models
    }
    assert len(names) == len(specs)
    with pytest.raises(ValueError, match="fraction"):
        ModelSpec(0, fraction=1.5)


def test_tables_share_models():
    main = set(plan_main([0, 1, 2]).models)
    assert main <= set(plan_fraction([0, 1, 2]).models)  # f = 0 and f = 1
    assert set(plan_k([0, 1, 2]).models) == main  # K costs audits only
    epsilon = plan_epsilon([0, 1, 2])
    assert {m for m in main if not m.clean} <= set(epsilon.models)  # the ε = 32 column
    keys = [j.key for j in plan_epsilon([0, 1]).jobs]
    assert len(keys) == len(set(keys))
    # Clean models are audited against every ε's vault.
    clean_vaults = {j.vault.epsilon for j in plan_epsilon([0]).jobs if j.model.clean}
    assert clean_vaults == {10, 20, 32, 48}


def test_second_trainings_measure_cells_of_their_own():
    main = plan_main([0, 1, 2])
    recipe = plan_recipe([0, 1, 2])
    # The recipe table's pad-crop-flip row is main's models trained again ...
    again = {replace(m, training=1) for m in main.models}
    assert again == {m for m in recipe.models if m.recipe == "pad-crop-flip"}
    # ... so none of its claims is one of main's a second time.
    assert not {j.key for j in main.jobs} & {j.key for j in recipe.jobs}
    # The ε table's clean models are those second trainings too (trained once for both).
    clean = {m for m in plan_epsilon([0, 1, 2]).models if m.clean}
    assert clean == {m for m in again if m.clean}
    assert not clean & set(main.models)


def test_a_training_has_its_own_name_and_randomness_and_keeps_the_data():
    first, second, third = (ModelSpec(3, training=t) for t in (0, 1, 2))
    assert first.training_seed == 3  # the models trained before trainings were counted
    assert first.name == "s3-n2000-pad-crop-flip-e500-bernoulli32-f1.0"
    assert second.name == first.name + "-t1"
    seeds = {ModelSpec(s, training=t).training_seed for s in range(5) for t in range(1, 4)}
    assert len(seeds) == 15 and not seeds & set(range(5))
    assert second.training_seed == ModelSpec(3, training=1).training_seed  # stable
    assert first.vault() == second.vault() == third.vault()  # same marks, same publication
    with pytest.raises(ValueError, match="training"):
        ModelSpec(0, training=-1)


def _result(decision: str, opened: int, draws: int, successes: int) -> dict[str, object]:
    return {
        "decision": decision,
        "pairs_opened": opened,
        "draws": draws,
        "successes": successes,
    }


def test_cell_arithmetic_follows_the_papers_definitions():
    results = [
        _result("detected", 20, 10, 9),
        _result("detected", 40, 30, 21),
        _result("not-detected", 200, 100, 50),
    ]
    c = Cell(3, results)
    assert c.dsr() == "2/3"
    assert c.q_over_m(2000) == "1.50%"  # mean Q = 30 over the detections only
    assert c.cost(32) == "1,920"  # 2·K·mean Q
    assert c.q_hat() == f"{80 / 140:.3f}"  # pooled over every experiment
    assert c.untied() == f"{140 / 260:.2f}"
    partial = Cell(5, results)
    assert partial.dsr() == "2/3 so far (5 asked)"
    assert partial.q_over_m(2000) == "1.50%"  # over the experiments done
    assert Cell(5, []).dsr() == "0 of 5 run"
    assert Cell(2, [_result("not-detected", 200, 0, 0)] * 2).q_hat() == "—"


def test_cell_selects_its_jobs_by_predicate():
    plan = Plan("t", "t")
    plan.add(ModelSpec(0), [AuditSpec("C1"), AuditSpec("C3")])
    plan.add(ModelSpec(1), [AuditSpec("C1"), AuditSpec("C3")])
    results = {j.key: _result("detected", 10, 10, 10) for j in plan.jobs if j.model.seed == 0}
    c = cell(plan, results, 2, lambda j: j.audit.knowledge == "C3")
    assert len(c.results) == 1 and not c.complete


def test_random_resized_crop_is_seeded_and_in_range():
    x = torch.rand((6, 1, 28, 28))
    a = random_resized_crop_flip(x, torch.Generator().manual_seed(3))
    b = random_resized_crop_flip(x, torch.Generator().manual_seed(3))
    assert a.shape == x.shape and torch.equal(a, b)
    assert float(a.min()) >= 0.0 and float(a.max()) <= 1.0
    assert not torch.allclose(a, x)
    assert augmenter("none") is None
    assert all(augmenter(r) is not None for r in RECIPES if r != "none")
    with pytest.raises(ValueError, match="unknown training recipe"):
        augmenter("mixup")


@needs_data
def test_training_set_holds_the_asked_share_of_the_publication(tmp_path):
    workspace = Workspace(tmp_path, DEBIAN)
    spec = ModelSpec(0, fraction=0.3, n_train=300)
    images, labels = workspace.training_set(spec)
    assert images.shape == (300, 28, 28) and labels.shape == (300,)
    published, _ = workspace.published(spec.vault())
    split = workspace.split(0, 300)
    raw = np.load(split.owner_images)
    as_rows = {row.tobytes() for row in images.reshape(300, -1)}
    n_published = sum(row.tobytes() in as_rows for row in published.reshape(30, -1))
    n_raw = sum(row.tobytes() in as_rows for row in raw.reshape(30, -1))
    assert n_published == 9 and n_raw == 0  # marked copies only, never the owner's originals
    clean_images, _ = workspace.training_set(ModelSpec(0, fraction=0.0, n_train=300))
    clean_rows = {row.tobytes() for row in clean_images.reshape(300, -1)}
    assert not any(row.tobytes() in clean_rows for row in published.reshape(30, -1))


@pytest.mark.slow
@needs_data
def test_a_tiny_main_table_runs_resumes_and_reports(tmp_path, capsys):
    args = ["main", "--n-train", "300", "--epochs", "1", "--repeats", "1"]
    args += ["--work", str(tmp_path / "work"), "--out", str(tmp_path / "results.md")]
    # --audit-only trains nothing: with no model here, every claim is left for later.
    assert evaluation_main([*args, "--audit-only"]) == 0
    assert "--audit-only: 16 claims left for later, on 2 models not trained here" in (
        capsys.readouterr().out
    )
    assert not (tmp_path / "work" / "models").exists() or not any(
        (tmp_path / "work" / "models").rglob("model.pt")
    )
    assert evaluation_main(args) == 0
    lines = (tmp_path / "work" / "audits.jsonl").read_text().splitlines()
    assert len(lines) == len(plan_main([0]).jobs) == 16
    first = json.loads(lines[0])
    assert first["n_pairs"] == 30 and len(first["indicators"]) == first["pairs_opened"]
    report = (tmp_path / "results.md").read_text()
    assert "| C3 | mixture-e |" in report and "20/20, 4.22%" in report
    assert "Done: 2/2 models, 16/16 audits" in report
    assert "0 of 1 run" in report  # the tables not run yet
    # A second run trains and audits nothing and gives the same results.
    capsys.readouterr()
    assert evaluation_main(args) == 0
    assert "training" not in capsys.readouterr().out
    assert (tmp_path / "work" / "audits.jsonl").read_text().splitlines() == lines
    # With the models trained, --audit-only runs their claims (here: those not on record).
    (tmp_path / "work" / "audits.jsonl").write_text("\n".join(lines[:10]) + "\n")
    assert evaluation_main([*args, "--audit-only"]) == 0
    printed = capsys.readouterr().out
    assert "0 claims left for later" in printed and "auditing: 6 claims" in printed
    assert len((tmp_path / "work" / "audits.jsonl").read_text().splitlines()) == 16
    # The archived records (no weights) write the same document, with no images at hand.
    archived = tmp_path / "records"
    archiving = ["archive", "--work", str(tmp_path / "work"), "--to", str(archived)]
    assert evaluation_main(archiving) == 0
    assert not list(archived.rglob("*.pt")) and (archived / "audits.jsonl").exists()
    again = tmp_path / "again.md"
    tail = ["--n-train", "300", "--epochs", "1", "--repeats", "1", "--data", str(tmp_path / "x")]
    assert evaluation_main(["report", "--work", str(archived), "--out", str(again), *tail]) == 0
    assert again.read_text() == (tmp_path / "results.md").read_text()  # as the second run wrote
    # A work directory seeded from the records has summaries but no weights: nothing
    # is trained again, and the claims left to run are named as left out, not failed.
    seeded = tmp_path / "seeded"
    shutil.copytree(archived, seeded)
    (seeded / "audits.jsonl").write_text("")
    rerun = ["main", "--n-train", "300", "--epochs", "1", "--repeats", "1", "--work", str(seeded)]
    rerun += ["--out", str(tmp_path / "seeded.md")]
    capsys.readouterr()
    assert evaluation_main([*rerun, "--plan"]) == 0
    assert "0 models to train, 16 audits (16 on archived models without weights)" in (
        capsys.readouterr().out
    )
    assert evaluation_main(rerun) == 0
    printed = capsys.readouterr().out
    assert "training 2 models" not in printed and "auditing" not in printed
    assert "left out 16 claims: 2 model(s) have a summary here but no weights" in printed
    assert (seeded / "audits.jsonl").read_text() == ""
    # --train-again gives them back on the machine kind their summaries name (here the
    # CPU): the same models, so the same claims, and the archive takes them as they are.
    summary = next(seeded.glob("models/*/model.json"))
    original = summary.read_text()
    summary.write_text(original.replace('"device": "cpu"', '"device": "cuda (Some GPU)"'))
    assert evaluation_main([*rerun, "--train-again"]) == 2
    assert "was trained on cuda (Some GPU); trained on cpu" in capsys.readouterr().err
    assert not list(seeded.rglob("*.pt"))  # nothing trained
    summary.write_text(original)
    assert evaluation_main([*rerun, "--train-again"]) == 0
    assert "training 2 models" in capsys.readouterr().out

    def claims(text: list[str]) -> list[dict[str, object]]:
        parsed = [json.loads(line) for line in text]
        return sorted(({k: v for k, v in r.items() if k != "seconds"} for r in parsed), key=str)

    assert claims((seeded / "audits.jsonl").read_text().splitlines()) == claims(lines)
    assert evaluation_main(["archive", "--work", str(seeded), "--to", str(archived)]) == 0


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has an accelerator")
def test_a_device_torch_cannot_see_is_a_usage_error(tmp_path, capsys):
    work = tmp_path / "work"
    with pytest.raises(SystemExit) as exited:
        evaluation_main(["main", "--device", "cuda", "--work", str(work)])
    assert exited.value.code == 2
    assert (
        "--device: device 'cuda' asked for, but torch sees no accelerator"
        in capsys.readouterr().err
    )
    assert not work.exists()  # nothing built, nothing trained


@pytest.mark.slow
def test_training_on_a_named_device_returns_a_cpu_model_with_the_same_batches():
    images = np.random.default_rng(0).integers(0, 256, (40, 28, 28), dtype=np.uint8)
    labels = np.arange(40) % 10
    default = train(images, labels, epochs=2, seed=3, batch_size=16)
    named = train(images, labels, epochs=2, seed=3, batch_size=16, device="cpu")
    for a, b in zip(default.state_dict().values(), named.state_dict().values(), strict=True):
        assert a.device.type == "cpu" and torch.equal(a, b)


def test_jobs_key_names_model_vault_and_audit():
    job = Job(ModelSpec(2), ModelSpec(2).vault(), AuditSpec("C4", k=8))
    assert job.key == (
        "s2-n2000-pad-crop-flip-e500-bernoulli32-f1.0|s2-n2000-bernoulli32|"
        "C4-k8-pad-shift-flip-mixture-e-p0.05"
    )


def test_the_null_table_redraws_the_arbiters_randomness_only():
    from evaluation.specs import NULL_DRAWS, plan_null

    plan = plan_null([0, 1])
    assert all(m.clean for m in plan.models) and len(plan.models) == 2
    assert len(plan.jobs) == 2 * 2 * NULL_DRAWS
    assert len({j.key for j in plan.jobs}) == len(plan.jobs)
    assert AuditSpec("C3", k=8, rho_draw=3).name.endswith("-rho3")
    assert AuditSpec("C3", k=8).name == "C3-k8-pad-shift-flip-mixture-e-p0.05"  # old keys kept


@needs_data
def test_rho_draws_are_fresh_and_draw_zero_is_the_publication(tmp_path):
    from evaluation.build import rho_of

    vault = Workspace(tmp_path, DEBIAN).vault(ModelSpec(0, n_train=300).vault())
    draws = {rho_of(vault, d) for d in range(4)}
    assert len(draws) == 4
    assert rho_of(vault) == rho_of(vault, 0)


def test_a_second_training_trains_with_its_own_seed_on_the_same_set(tmp_path, monkeypatch):
    import evaluation.build as build

    seen: list[int] = []

    def fake_train(images, labels, *, seed, **_):
        seen.append(seed)
        return train(images[:20], labels[:20], epochs=1, seed=seed, batch_size=10)

    monkeypatch.setattr(build, "train", fake_train)
    images = np.random.default_rng(0).integers(0, 256, (20, 28, 28), dtype=np.uint8)
    labels = np.arange(20) % 10
    np.save(tmp_path / "ti.npy", images)
    np.save(tmp_path / "tl.npy", labels)
    infos = []
    for training in (0, 1):
        spec = ModelSpec(4, fraction=0.0, training=training)
        infos.append(
            build.train_one(
                tmp_path / spec.name,
                spec,
                images=images,
                labels=labels,
                test_images=tmp_path / "ti.npy",
                test_labels=tmp_path / "tl.npy",
            )
        )
    assert seen == [4, ModelSpec(4, training=1).training_seed]
    assert [info["spec"]["training"] for info in infos] == [0, 1]  # type: ignore[index]
    first, second = (
        torch.load(tmp_path / n / "model.pt")
        for n in (ModelSpec(4, fraction=0.0).name, ModelSpec(4, fraction=0.0, training=1).name)
    )
    assert any(not torch.equal(first[k], second[k]) for k in first)


def test_a_clean_models_name_says_so_whichever_training_it_is():
    models = {m for planner in PLANNERS.values() for m in planner([0, 1]).models}
    assert any(m.training for m in models) and any(m.clean for m in models)
    assert all(is_clean_name(m.name) == m.clean for m in models)
    assert not is_clean_name("s0-n2000-none-e500-clean-t0")  # the first training has no suffix
    assert not is_clean_name("s0-n2000-none-e500-cleanish")


def test_pooled_false_detections_count_every_training_of_clean_models():
    results = {
        "a": {"model": "s0-n2000-pad-crop-flip-e500-clean", "decision": "exhausted"},
        "b": {"model": "s0-n2000-pad-crop-flip-e500-clean-t1", "decision": "detected"},
        "c": {"model": "s0-n2000-pad-crop-flip-e500-bernoulli32-f1.0-t1", "decision": "detected"},
    }
    assert pooled_false_detections(results) == (
        "Every claim against a clean model so far, all tables together: 1 of 2 detected "
        "(50.0%; each claim's bound is p = 5%), on 1 of the 2 clean models."
    )
