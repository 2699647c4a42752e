"""The baselines (RData, UBW-C) and several-owners tables (issue #25 items 2 and 3)."""

import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch
from scipy import stats
from torch import nn

from evaluation import baselines, paper, rdata, specs, ubw
from evaluation.__main__ import main as evaluation_main
from evaluation.build import Workspace
from evaluation.specs import OWNER_AUDITS, ModelSpec, plan_baselines, plan_owners
from tests.support.fashion import DEBIAN, needs_data
from twinaudit.owner.marking.proxy import SmallCNN

RNG = np.random.default_rng(0)


# -- RData ------------------------------------------------------------------------------


def test_rdata_cosine_p_values_are_uniform_under_the_null() -> None:
    dim = 64
    v = rdata.carriers("fixed direction", 1, dim)[0]
    p = np.array(
        [rdata.cosine_p_value(float(v @ u), dim) for u in rdata.carriers("null", 2000, dim)]
    )
    assert 0.45 < p.mean() < 0.55
    assert 0.03 < (p < 0.05).mean() < 0.07
    assert rdata.cosine_p_value(1.0, dim) == pytest.approx(0.0, abs=1e-12)
    assert rdata.cosine_p_value(0.0, dim) == pytest.approx(0.5)


def test_rdata_p_value_is_the_spheres_exact_tail() -> None:
    # On the sphere of R^3 a uniform direction's cosine with a fixed one is uniform on
    # [-1, 1] (Archimedes), so P(cos ≥ c) = (1 − c)/2: the Beta((d−1)/2, (d−1)/2) law of
    # (1 + cos)/2 that RData's test rests on, at d = 3.
    for c in (-0.9, -0.3, 0.0, 0.25, 0.8):
        assert rdata.cosine_p_value(c, 3) == pytest.approx((1.0 - c) / 2.0, abs=1e-12)
    # And at d = 1,024 (the proxy's features), a cosine of 0.1 is a 3.2σ event.
    assert rdata.cosine_p_value(0.1, 1024) == pytest.approx(stats.norm.sf(0.1 * 1023**0.5), rel=0.1)


def test_rdata_with_labels_is_fishers_combination_of_the_class_p_values() -> None:
    # RData's own test (one carrier per class): p_c = P(cos ≥ cos(v_c, u_c)) under the
    # null, combined over the classes by Fisher's method, −2 Σ log p_c ~ χ²(2C).
    dim = 48
    directions = rdata.carriers("a model", 10, dim) + 0.2 * rdata.carriers("owner", 10, dim)
    carriers = rdata.carriers("owner", 10, dim)
    result = rdata.rdata_test(directions, carriers, "class")
    cosines = [
        float(v @ u / (np.linalg.norm(v) * np.linalg.norm(u)))
        for v, u in zip(directions, carriers, strict=True)
    ]
    p = [float(stats.beta.sf((1 + c) / 2, (dim - 1) / 2, (dim - 1) / 2)) for c in cosines]
    assert list(result.group_p) == pytest.approx(p, rel=1e-9)
    fisher = stats.chi2.sf(-2 * sum(math.log(x) for x in p), 20)
    assert result.p_value == pytest.approx(fisher, rel=1e-9)
    assert result.p_value == pytest.approx(stats.combine_pvalues(p, method="fisher")[1])


@pytest.mark.parametrize("grouping", rdata.GROUPINGS)
def test_the_combined_rdata_test_holds_its_bound_on_random_models(grouping: str) -> None:
    dim, n = 32, 400
    hits = 0
    for trial in range(n):
        directions = rdata.carriers(f"model {trial}", 10, dim)
        carriers = rdata.carriers(f"owner {trial}", len(rdata.groups(grouping)), dim)
        hits += rdata.rdata_test(directions, carriers, grouping).detected
    assert hits / n < 0.08  # p = 0.05 (Bonferroni makes one mark and superclass conservative)


@pytest.mark.parametrize("grouping", rdata.GROUPINGS)
def test_rdata_detects_class_directions_that_lean_on_the_carriers(grouping: str) -> None:
    dim = 256
    carriers = rdata.carriers("owner", len(rdata.groups(grouping)), dim)
    noise = rdata.carriers("model", 10, dim)
    lean = carriers[rdata.group_index(grouping, np.arange(10))]
    result = rdata.rdata_test(noise + 0.5 * lean, carriers, grouping)
    assert result.detected
    assert result.p_value < 1e-6
    assert len(result.group_p) == len(rdata.groups(grouping))


def test_superclasses_cover_each_class_once() -> None:
    flat = sorted(c for group in rdata.SUPERCLASSES for c in group)
    assert flat == list(range(10))
    assert list(rdata.group_index("superclass", np.array([0, 1, 5, 8]))) == [0, 1, 2, 3]
    assert set(rdata.group_index("one", np.arange(10))) == {0}
    with pytest.raises(ValueError, match="grouping"):
        rdata.groups("colour")


def test_alignment_recovers_a_models_own_last_layer() -> None:
    torch.manual_seed(0)
    model = SmallCNN(width=4, hidden=16).eval()
    images = RNG.integers(0, 256, size=(200, 28, 28), dtype=np.uint8)
    directions = rdata.class_directions(model, model.hidden_layer(), images)
    weights = rdata.last_layer(model)[1].weight.detach().double().numpy()
    # Same logits (dead hidden units aside, where the least-squares map is zero).
    hidden = rdata.features(model.hidden_layer(), images)
    np.testing.assert_allclose(hidden @ directions.T, hidden @ weights.T, atol=1e-6)
    with pytest.raises(TypeError, match="SmallCNN"):
        rdata.last_layer(nn.Linear(3, 2))


def test_rdata_marks_stay_within_epsilon_and_push_features_along_the_carrier() -> None:
    torch.manual_seed(0)
    proxy = SmallCNN(width=4, hidden=32).eval()
    images = RNG.integers(0, 256, size=(12, 28, 28), dtype=np.uint8)
    groups = np.zeros(12, dtype=np.int64)
    carriers = rdata.carriers("push", 1, 32)
    marked = rdata.mark_rdata(proxy.hidden_layer(), images, groups, carriers, steps=10)
    moved = np.abs(marked.astype(int) - images)
    assert marked.dtype == np.uint8
    assert 0 < moved.max() <= rdata.EPSILON
    before = rdata.features(proxy.hidden_layer(), images)
    after = rdata.features(proxy.hidden_layer(), marked)
    assert float(np.mean((after - before) @ carriers[0])) > 0


# -- UBW-C ------------------------------------------------------------------------------


class _CornerModel(nn.Module):
    """Class 0 unless the trigger's corner is lit; ``sensitive`` turns the trigger into doubt."""

    def __init__(self, sensitive: bool) -> None:
        super().__init__()
        self.sensitive = sensitive

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        corner = x[:, 0, -4:, -4:].mean(dim=(1, 2))
        logits = torch.zeros(len(x), 10)
        logits[:, 0] = 6.0 - (12.0 * corner if self.sensitive else 0.0)
        return logits + 2.0 * x[:, 0, :4, :4].mean(dim=(1, 2))[:, None] * torch.arange(10)


def test_the_trigger_is_a_checkerboard_in_the_corner() -> None:
    images = np.full((2, 28, 28), 7, dtype=np.uint8)
    stamped = ubw.stamp(images)
    assert stamped[0, -1, -1] == 255 and stamped[0, -1, -2] == 0
    assert (stamped[:, :-4, :] == 7).all()
    assert (images == 7).all()


def test_ubw_verification_detects_a_trigger_sensitive_model_only() -> None:
    images = RNG.integers(0, 60, size=(50, 28, 28), dtype=np.uint8)
    labels = np.zeros(50, dtype=np.int64)
    for tau in ubw.TAUS:
        assert ubw.ubw_test(_CornerModel(True), images, labels, tau).detected
        quiet = ubw.ubw_test(_CornerModel(False), images, labels, tau)
        assert not quiet.detected
        assert quiet.p_value > 0.5


def test_ubw_verification_is_the_papers_paired_t_test_at_tau() -> None:
    # H0: P_b ≤ P_p + τ against H1: P_b > P_p + τ, one-sided paired t-test on the true
    # class's probability of benign images and their triggered versions.
    images = RNG.integers(0, 60, size=(40, 28, 28), dtype=np.uint8)
    labels = np.zeros(40, dtype=np.int64)
    model = _CornerModel(True)
    benign = ubw.true_class_probabilities(model, images, labels)
    triggered = ubw.true_class_probabilities(model, ubw.stamp(images), labels)
    assert float(np.std(benign - triggered)) > 0
    for tau in (*ubw.TAUS, 0.9):
        result = ubw.ubw_test(model, images, labels, tau)
        paired = stats.ttest_rel(benign, triggered + tau, alternative="greater")
        assert result.p_value == pytest.approx(float(paired.pvalue), rel=1e-9)
        gap = benign - triggered - tau
        t = float(np.mean(gap) / (np.std(gap, ddof=1) / math.sqrt(len(gap))))
        assert result.p_value == pytest.approx(float(stats.t.sf(t, len(gap) - 1)), rel=1e-9)
        assert result.detected == (result.p_value < ubw.P)
    assert not ubw.ubw_test(model, images, labels, 0.9).detected  # a margin it cannot clear


def test_ubw_c_marks_keep_the_bound_and_the_labels() -> None:
    torch.manual_seed(0)
    surrogate = SmallCNN(width=4, hidden=16)
    images = RNG.integers(0, 256, size=(8, 28, 28), dtype=np.uint8)
    labels = np.arange(8) % 4
    marked = ubw.craft_ubw_c(surrogate, images, labels, steps=4)
    moved = np.abs(marked.astype(int) - images)
    assert marked.shape == images.shape
    assert 0 < moved.max() <= ubw.EPSILON


# -- plans, keys and tables -------------------------------------------------------------


def test_the_plans_reuse_the_ladder_models_and_name_their_own() -> None:
    plan = plan_baselines([0, 1])
    names = [m.name for m in plan.models]
    assert names == [
        "s0-n2000-pad-crop-flip-e500-pgdown10-f1.0",
        "s0-n2000-pad-crop-flip-e500-clean-t1",
        "s1-n2000-pad-crop-flip-e500-pgdown10-f1.0",
        "s1-n2000-pad-crop-flip-e500-clean-t1",
    ]
    extra = [m.name for m in baselines.extra_models(plan)]
    assert "s0-n2000-pad-crop-flip-e500-rdata-class10-f1.0" in extra
    assert "s1-n2000-pad-crop-flip-e500-ubwc16-f1.0" in extra
    assert len(extra) == 2 * len(baselines.METHODS)
    owners = plan_owners([0])
    assert [j.audit for j in owners.jobs] == list(OWNER_AUDITS)
    extra = [m.name for m in baselines.extra_models(owners)]
    assert "s0-n2000-pad-crop-flip-e500-owners10-pgdown10-f1.0" in extra
    assert "s0-n2000-pad-crop-flip-e500-owners2-rdata-class10-f1.0" in extra
    assert "s0-n2000-pad-crop-flip-e500-rdata-class10-f1.0" in extra  # k = 1: the baselines'
    assert len(extra) == 2 * len(specs.OWNER_COUNTS) - 1
    assert {"baselines", "owners"} <= set(specs.PLANNERS)


def test_owner_zero_on_the_ladder_model_shares_the_harness_key() -> None:
    base = ModelSpec(0, epsilon=10, marker="pgdown")
    audit = OWNER_AUDITS[0]
    ladder_key = specs.Job(base, base.vault(), audit).key
    assert baselines.owner_claim_key(base, base, 0, audit) == ladder_key
    other = baselines.owners_model(base, 5, "pgdown")
    assert baselines.owner_claim_key(other, base, 3, audit).endswith("|record3")
    assert baselines.owner_vault_name(base, 3) == "s0-n2000-owner3-pgdown10"


def _claim(detected: bool) -> dict[str, object]:
    return {
        "decision": "detected" if detected else "not-detected",
        "pairs_opened": 40,
        "draws": 30,
        "successes": 24 if detected else 15,
    }


def test_the_tables_read_their_records_and_the_papers(tmp_path: Path) -> None:
    plan = plan_baselines([0])
    base = plan.models[0]
    results = {j.key: _claim(not j.model.clean) for j in plan.jobs}
    tests = [
        {"key": baselines.detection_key(m, 0, marker, t), "detected": m != plan.models[1]}
        | {"p_value": 0.01}
        for marker in baselines.METHODS
        for m in (baselines.baseline_model(base, marker), plan.models[1])
        for t in baselines.baseline_tests(marker)
    ]
    (tmp_path / "baselines.jsonl").write_text("".join(json.dumps(t) + "\n" for t in tests))
    table = baselines.baselines_table(plan, results, tmp_path, 1)
    rdata_row = next(r for r in table if r.startswith("| RData (per class)"))
    assert "| 1/1 (median p 0.01) |" in rdata_row
    assert "0/1" in rdata_row
    assert "4/20, 93.26%" in rdata_row and "20/20, 73.53%" in rdata_row
    assert any(r.startswith("| UBW-C (τ = 0.20)") for r in table)
    ours = next(r for r in table if "C4" in r)
    assert "1/1 (q̂ 0.800)" in ours and "20/20, 93.64%" in ours

    owners = plan_owners([0])
    claims = []
    for k in specs.OWNER_COUNTS:
        model = baselines.owners_model(base, k, "pgdown")
        for j in range(specs.MAX_OWNERS):
            for audit in OWNER_AUDITS:
                key = baselines.owner_claim_key(model, base, j, audit)
                claims.append({"key": key, **_claim(j < k)})
    (tmp_path / "owners.jsonl").write_text("".join(json.dumps(c) + "\n" for c in claims))
    table = baselines.owners_table(owners, {}, tmp_path, 1)
    row = next(r for r in table if "C4" in r)
    assert "| 1/1 | 2/2 | 5/5 | 10/10 | 0/22 |" in row
    assert ", ".join(paper.MULTIPLE_OWNERS_CIFAR100["ours"]) in row
    rdata_row = next(r for r in table if r.startswith("| RData"))
    assert "0 of" not in rdata_row and "so far" in rdata_row  # no RData records yet


@needs_data
def test_owner_items_are_disjoint_from_each_other_and_the_split(tmp_path: Path) -> None:
    workspace = Workspace(tmp_path, DEBIAN, proxy_epochs=1)
    owners = baselines.Owners(workspace, ModelSpec(0, n_train=200, epsilon=10, marker="pgdown"))
    split = workspace.split(0, 200)
    seen = {
        image.tobytes()
        for name in ("shared_images", "clean_images")
        for image in np.load(getattr(split, name))
    }
    for j in range(specs.MAX_OWNERS):
        images, labels = owners.items(j)
        assert len(images) == len(labels) == 20
        keys = {image.tobytes() for image in images}
        assert not keys & seen
        seen |= keys


# -- a tiny run of both tables ----------------------------------------------------------


@pytest.mark.slow
@needs_data
def test_tiny_baselines_and_owners_tables_train_test_and_report(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    one = (specs.OWNER_AUDITS[1],)  # the CLI's default claim in C3
    monkeypatch.setattr(specs, "BASELINE_AUDITS", one)
    monkeypatch.setattr(specs, "OWNER_AUDITS", one)
    monkeypatch.setattr(baselines, "OWNER_AUDITS", one)
    monkeypatch.setattr(baselines, "MAX_OWNERS", 3)
    monkeypatch.setattr(baselines, "OWNER_COUNTS", (1, 2))
    work, out = tmp_path / "work", tmp_path / "results.md"
    common = ["--n-train", "200", "--epochs", "2", "--repeats", "1"]
    common += ["--work", str(work), "--out", str(out)]
    assert evaluation_main(["baselines", *common]) == 0
    assert evaluation_main(["owners", *common]) == 0
    tests = [json.loads(line) for line in (work / "baselines.jsonl").read_text().splitlines()]
    # baselines: 4 markings on their models and on the clean model (UBW at two τ each);
    # owners: RData for owners 1-2 on k = 1's model (owner 0's ran above), 3 on k = 2's.
    assert len(tests) == 2 * (3 + 2) + 2 + 3
    for t in tests:
        assert 0.0 <= t["p_value"] <= 1.0
        assert t["detected"] == (t["p_value"] < 0.05)
        if t["test"] == "rdata":  # Fisher's method over the carriers' p-values, as recorded
            fisher = -2 * sum(math.log(p) for p in t["group_p"])
            assert t["p_value"] == pytest.approx(stats.chi2.sf(fisher, 2 * len(t["group_p"])))
            assert len(t["group_p"]) == len(rdata.groups(baselines.METHODS[t["marker"]][1]))
    # No test flags a model that never saw the owner's marks: the clean model (-t1) for
    # every baseline, and RData for the owners outside a several-owners model's set.
    # (Each would flag with probability at most p = 0.05 under RData's null; this seed's
    # draws are fixed, so the check is deterministic.)
    clean = [t for t in tests if "-clean-t1" in t["model"]]
    outside = [
        t
        for t in tests
        if t["owner"] >= (2 if "-owners2-" in t["model"] else 1) and "-clean-" not in t["model"]
    ]
    assert len(clean) == 5 and len(outside) == 3
    assert not any(t["detected"] for t in clean + outside)
    claims = [json.loads(c) for c in (work / "owners.jsonl").read_text().splitlines()]
    assert sorted((c["model"].split("-")[-3], c["owner"]) for c in claims) == [
        ("e2", 1),
        ("e2", 2),
        ("owners2", 0),
        ("owners2", 1),
        ("owners2", 2),
    ]
    assert {c["stop"] for c in claims} <= {"detected", "exhausted"}
    never_saw = [c for c in claims if c["owner"] >= (2 if "-owners2-" in c["model"] else 1)]
    assert len(never_saw) == 3
    assert all(c["decision"] != "detected" for c in never_saw)
    text = out.read_text()
    assert "## Baselines: RData and UBW-C" in text
    assert "## Several owners" in text
    # The baselines table: each method's row with its DSR (and q̂ or median p-value)
    # and its false detections on the clean model, from the records above; the owners
    # table's false detections are the claims and RData tests of owners outside the set.
    first, _, second = text.partition("## Several owners")
    assert "| method |" in first and "| method |" in second

    def rows(part: str) -> dict[str, list[str]]:
        return {r.split(" | ")[0].lstrip("| "): r.split(" | ") for r in part.splitlines()}

    table = rows(first.partition("## Baselines: RData and UBW-C")[2])
    assert table["method"][6] == "false detections (clean models)"
    for name in ("RData (per class)", "RData (superclass)", "RData (one mark)", "UBW-C (τ = 0.20)"):
        assert table[name][4].startswith(("0/1 (median p", "1/1 (median p"))
        assert table[name][6] == "0/1"
    ours = table["ours, C3 `dither` K = 1"]
    assert ours[4].startswith(("0/1 (q̂ ", "1/1 (q̂ ")) and ours[6] == "0/1"
    table = rows(second.partition("## Window")[0])
    assert table["method"][1:4] == [
        "1 owner",
        "2 owners",
        "false detections (owners not in the set)",
    ]
    for name in ("ours, C3 `dither` K = 1", "RData (per class)"):
        cells = table[name]
        assert cells[1] in ("0/1", "1/1") and cells[2] in ("0/2", "1/2", "2/2")
        assert cells[3] == "0/3"  # owners 1-2 beside k = 1, owner 2 beside k = 2
    runs = json.loads((work / "runs.json").read_text())
    assert [r["tables"] for r in runs] == [["baselines"], ["owners"]]
