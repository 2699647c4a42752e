"""The unlearning table (issue #25 item 4): plan, unlearning methods, claims, table."""

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest
import torch

from demo.models import DemoCNN
from demo.practitioner import accuracy
from evaluation import specs, unlearning
from evaluation.__main__ import main as evaluation_main
from evaluation.audit import AuditLog
from evaluation.build import Workspace
from evaluation.specs import CLI_AUDITS, plan_unlearning, with_sizes
from tests.support.fashion import DEBIAN, needs_data
from twinaudit.owner.marking.proxy import fit

RNG = np.random.default_rng(0)


# -- the plan ----------------------------------------------------------------------------


def test_the_plan_audits_the_ladder_models_with_the_cli_default_and_c1() -> None:
    plan = plan_unlearning([0, 1])
    assert [m.name for m in plan.models] == [
        "s0-n2000-pad-crop-flip-e500-pgdown10-f1.0",
        "s0-n2000-pad-crop-flip-e500-clean-t1",
        "s1-n2000-pad-crop-flip-e500-pgdown10-f1.0",
        "s1-n2000-pad-crop-flip-e500-clean-t1",
    ]
    assert specs.PLANNERS["unlearning"] is plan_unlearning
    audits = list(dict.fromkeys(j.audit for j in plan.jobs))
    assert audits[0] == CLI_AUDITS[1]  # C3, K = 1 dither: owner claim's default with labels
    assert (audits[1].knowledge, audits[1].k, audits[1].perturbation) == ("C1", 1, "dither")
    assert audits[1].margin == 0.01
    assert {j.vault.name for j in plan.jobs} == {"s0-n2000-pgdown10", "s1-n2000-pgdown10"}
    derived = [u.name for u in unlearning.extra_models(plan)]
    assert len(derived) == len(set(derived)) == 2 * len(unlearning.METHODS)
    assert "s1-n2000-pad-crop-flip-e500-pgdown10-f1.0-unlearn-finetune-e20-lr0.0001" in derived
    with pytest.raises(ValueError, match="unlearning method"):
        unlearning.Unlearned(plan.models[0], "forget-me", 1, 1e-4)


def test_claim_two_is_one_claim_per_experiment_and_its_records_one_per_state() -> None:
    plan = plan_unlearning([0])
    job = plan.jobs[0]
    names = {unlearning.state_name(plan, job, s) for s, _ in unlearning.STATES}
    assert len(names) == len(unlearning.STATES) - 1  # before and none: the used model
    assert unlearning.state_name(plan, job, "retrain") == plan.models[1].name
    keys = {unlearning.after_key(n, job) for n in names}
    assert len(keys) == len(names)
    assert all(k.endswith(unlearning.after_claim(job)) for k in keys)
    other = plan.jobs[1]  # the other claim: its own claim 2
    assert unlearning.after_claim(other) != unlearning.after_claim(job)


# -- the unlearning methods --------------------------------------------------------------


def _memorised() -> tuple[DemoCNN, tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]:
    """A tiny CNN that has learnt 48 random images with random labels (forget: 16 of them)."""
    torch.manual_seed(0)
    images = RNG.integers(0, 256, size=(48, 28, 28), dtype=np.uint8)
    labels = RNG.integers(0, 10, size=48).astype(np.int64)
    model = DemoCNN(width=4, hidden=64)
    optimiser = torch.optim.Adam(model.parameters(), lr=3e-3)
    fit(
        model,
        images,
        labels,
        optimiser=optimiser,
        schedule=None,
        epochs=60,
        seed=0,
        batch_size=16,
        augment=None,
    )
    model.eval()
    return model, (images[:16], labels[:16]), (images[16:], labels[16:])


def test_gradient_ascent_lowers_the_accuracy_on_the_forgotten_items() -> None:
    model, forget, retained = _memorised()
    assert accuracy(model, *forget) == 1.0
    assert accuracy(model, *retained) == 1.0
    before = {k: v.clone() for k, v in model.state_dict().items()}
    ascended, passes = unlearning.gradient_ascent(
        model, forget, max_epochs=5, lr=3e-3, seed=0, recipe="none", batch_size=8
    )
    assert passes == 5
    assert accuracy(ascended, *forget) <= 0.5
    # NegGrad+: ascent on hers, descent on the retained items, stopped at a target.
    plus, passes = unlearning.gradient_ascent(
        model,
        forget,
        retained,
        max_epochs=20,
        lr=3e-3,
        seed=0,
        recipe="none",
        stop_at=0.5,
        batch_size=8,
        retain_batch=8,
    )
    assert accuracy(plus, *forget) <= 0.5
    assert passes < 20  # stopped at the target, not at the budget
    assert accuracy(plus, *retained) > accuracy(plus, *forget)
    # The model handed in is left as it was (the used model stays the used model).
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())


def test_fine_tuning_trains_on_the_retained_set_only(monkeypatch: pytest.MonkeyPatch) -> None:
    model, _, retained = _memorised()
    seen: list[npt.NDArray[np.uint8]] = []

    def spy(
        net: torch.nn.Module,
        images: npt.NDArray[np.uint8],
        labels: npt.NDArray[np.int64],
        **options: Any,
    ) -> None:
        seen.append(images)
        fit(net, images, labels, **options)

    monkeypatch.setattr(unlearning, "fit", spy)
    tuned = unlearning.fine_tune(model, retained, epochs=2, lr=1e-3, seed=0, recipe="pad-crop-flip")
    assert len(seen) == 1
    assert seen[0] is retained[0]
    moved = any(
        not torch.equal(a, b)
        for a, b in zip(tuned.state_dict().values(), model.state_dict().values(), strict=True)
    )
    assert moved


# -- a tiny run of the table -------------------------------------------------------------


@pytest.mark.slow
@needs_data
def test_tiny_unlearning_run_unlearns_claims_again_on_fresh_pairs_and_reports(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(unlearning, "FINETUNE_EPOCHS", 1)
    monkeypatch.setattr(unlearning, "ASCENT_EPOCHS", 2)
    seen: list[npt.NDArray[np.uint8]] = []

    def spy(
        net: torch.nn.Module,
        images: npt.NDArray[np.uint8],
        labels: npt.NDArray[np.int64],
        **options: Any,
    ) -> None:
        seen.append(images)
        fit(net, images, labels, **options)

    monkeypatch.setattr(unlearning, "fit", spy)
    work, out = tmp_path / "work", tmp_path / "results.md"
    common = ["--n-train", "200", "--epochs", "2", "--repeats", "1"]
    assert evaluation_main(["unlearning", *common, "--work", str(work), "--out", str(out)]) == 0

    plan = with_sizes(plan_unlearning([0]), n_train=200, epochs=2)
    used = plan.models[0]
    workspace = Workspace(work, DEBIAN, proxy_epochs=2)
    forgotten, _ = workspace.published(used.vault())
    hers = {image.tobytes() for image in forgotten}
    # The retained set is the training set less her published items, and nothing else.
    retained, _ = unlearning.retained_set(workspace, used)
    trained, _ = workspace.training_set(used)
    assert len(retained) + len(forgotten) == len(trained) == 200
    assert not {image.tobytes() for image in retained} & hers
    assert sorted(i.tobytes() for i in trained) == sorted(
        [i.tobytes() for i in retained] + [i.tobytes() for i in forgotten]
    )
    # Fine-tuning (its one call of the trainer) saw the retained set: none of her items.
    assert len(seen) == 1
    assert len(seen[0]) == len(retained)
    assert not {image.tobytes() for image in seen[0]} & hers

    records: dict[str, Any] = AuditLog(work / unlearning.LOG).results
    for first_job in [j for j in plan.jobs if not j.model.clean]:
        first = records[first_job.key]
        assert first["state"] == "before"
        ladder = AuditLog(work / "audits.jsonl").results[first_job.key]
        assert (first["decision"], first["pairs_opened"]) == (
            ladder["decision"],
            ladder["pairs_opened"],
        )
        opened = set(first["opened"])
        assert len(opened) == first["pairs_opened"]
        for state, _ in unlearning.STATES[1:]:
            name = unlearning.state_name(plan, first_job, state)
            after = records[unlearning.after_key(name, first_job)]
            assert after["earlier_claims"] == 1
            assert after["bound"] == pytest.approx(0.1)
            assert after["pairs_left"] == 20 - len(opened)
            if after["pairs_left"] == 0:
                assert after["decision"] == "refused"
            else:
                assert not set(after["opened"]) & opened
                assert after["pairs_opened"] <= after["pairs_left"]
    for u in unlearning.unlearned_of(used):
        info = json.loads((work / "models" / u.name / "model.json").read_text())
        assert info["base"] == used.name
        assert info["images"] == len(retained) and info["forgotten"] == len(forgotten)
        assert 0.0 <= float(info["owner_accuracy"]) <= 1.0
        assert (
            records[unlearning.accuracy_key(u.name, plan.jobs[0])]["owner_accuracy"]
            == (info["owner_accuracy"])
        )
    text = out.read_text()
    assert "## Auditing again after unlearning" in text
    assert "not proof of removal" in text
    assert "(1 + 1)·p = 0.10" in text


@needs_data
def test_claim_two_skips_the_pairs_claim_one_opened_or_is_refused(tmp_path: Path) -> None:
    plan = with_sizes(plan_unlearning([0]), n_train=200, epochs=1)
    workspace = Workspace(tmp_path, DEBIAN, proxy_epochs=1)
    job = plan.jobs[0]
    vault = workspace.vault(job.vault)
    torch.manual_seed(0)
    model = DemoCNN(width=4, hidden=32).eval()  # untrained: the claim runs over every pair
    log = AuditLog(tmp_path / "log.jsonl")
    first = {"opened": list(range(3, 15))}

    def after(state: str, first: Mapping[str, object]) -> dict[str, Any]:
        record = unlearning.file_after(
            workspace, job, first, state=state, model_name=state, model=model, log=log
        )
        return dict(record)

    found = after("none", first)
    assert found["excluded_pairs"] == 12
    assert found["pairs_left"] == len(vault) - 12 == 8
    assert found["stop"] == "exhausted"
    assert sorted(found["opened"]) == [0, 1, 2, *range(15, 20)]
    again = after("retrain", first)  # another state, the same claim: the same order
    assert again["opened"] == found["opened"]
    refused = after("finetune", {"opened": list(range(20))})
    assert refused["decision"] == "refused"
    assert refused["pairs_left"] == 0
    with pytest.raises(ValueError, match="opened"):
        after("ascent", {"decision": "detected"})


# -- the table ---------------------------------------------------------------------------


def _claim(detected: bool, count: int, **more: object) -> dict[str, object]:
    return {
        "decision": "detected" if detected else "not-detected",
        "pairs_opened": count,
        "n_pairs": 200,
        "draws": 10,
        "successes": 9 if detected else 5,
        **more,
    }


def test_the_table_reads_both_claims_the_control_and_the_accuracies(tmp_path: Path) -> None:
    plan = plan_unlearning([0, 1])
    results = {
        j.key: _claim(not j.model.clean, 80 if not j.model.clean else 200) for j in plan.jobs
    }
    lines = []
    for job in [j for j in plan.jobs if not j.model.clean]:
        lines.append({"key": job.key, **_claim(True, 80, opened=list(range(80)))})
        for state, _ in unlearning.STATES[1:]:
            name = unlearning.state_name(plan, job, state)
            lines.append(
                {
                    "key": unlearning.after_key(name, job),
                    **_claim(state == "none", 40, pairs_left=120),
                }
            )
            lines.append(
                {
                    "key": unlearning.accuracy_key(name, job),
                    "retained_accuracy": 0.99,
                    "test_accuracy": 0.87,
                    "owner_accuracy": 1.0 if state in ("none", "finetune") else 0.85,
                }
            )
    (tmp_path / unlearning.LOG).write_text("".join(json.dumps(r) + "\n" for r in lines))
    table = unlearning.unlearning_table(plan, results, tmp_path, 2)
    assert len(table) == 2 + 2 * len(unlearning.STATES)
    c3 = [row for row in table if row.startswith("| C3")]
    before = next(r for r in c3 if "before" in r)
    assert "| 2/2 |" in before and "4.00% (q̂ 0.900, 20 untied)" in before
    assert "0/2 (claim 1 on the clean model)" in before and "p = 0.05" in before
    retrain = next(r for r in c3 if "(i) exact" in r)
    assert "| 0/2 |" in retrain and "120 of 200" in retrain and "(1 + 1)·p = 0.10" in retrain
    assert "85.00 ± 0.00%" in retrain
    control = next(r for r in c3 if "(iv)" in r)
    assert "| 2/2 |" in control and "100.00 ± 0.00%" in control
    section = unlearning.section(plan, results, tmp_path, 2)
    assert "not proof of removal" in section[0]
    assert "0/6 unlearned models" in section[2]
