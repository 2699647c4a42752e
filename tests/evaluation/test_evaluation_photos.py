"""Issue #39, part 7: the photo rung (the owner's items are photos; the model resizes)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from evaluation import photo_pairs, photos
from evaluation.__main__ import main as evaluation_main
from evaluation.photo_pairs import RememberingOracle
from evaluation.specs import (
    LABELLED_DEFAULT_AUDITS,
    only_photo_marks,
    only_used_models,
    plan_photo,
    plan_photo_standard,
)
from tests.support.fashion import needs_data
from tests.support.proxy import short_own_proxy
from twinaudit.owner.vault import Vault
from twinaudit.practitioner.torch_oracle import TorchClassifierOracle
from twinaudit.protocol.oracles.base import ClassifierOracle, ClassifyAnswer, OracleInfo
from twinaudit.verifier.scoring.fit import fit_image


def test_the_photo_rung_audits_both_marks_and_a_clean_model_per_seed_with_the_defaults():
    plan = plan_photo([0, 1])
    used = [m for m in plan.models if not m.clean]
    assert sorted({m.marker for m in used}) == [
        "photoown",
        "photoownfree",
        "photoownjpeg",
        "photoownjpeglow",
    ]
    assert all(m.trainer == "demo" and m.n_train == 2000 and m.epsilon == 10 for m in used)
    clean = [m for m in plan.models if m.clean]
    assert [m.name for m in clean] == [f"s{s}-n2000-pad-crop-flip-e500-clean-t2" for s in (0, 1)]
    assert {j.audit for j in plan.jobs} == set(LABELLED_DEFAULT_AUDITS)
    assert len(plan.jobs) == 2 * 4 * 2 * len(LABELLED_DEFAULT_AUDITS)  # seeds, marks, models
    standard = plan_photo_standard([0])
    assert {m.trainer for m in standard.models} == {"resnet-sgd"}
    assert {j.vault.name for j in standard.jobs} == {  # no JPEG row at rung (b)
        "s0-n10000-photoown10",
        "s0-n10000-photoownfree10",
    }
    with pytest.raises(ValueError, match="no photo mark photoownjpeg"):
        only_photo_marks(standard, ["photoownjpeg"])
    jpeg = only_used_models(only_photo_marks(plan_photo([2]), ["photoownjpeg"]))
    assert [m.name for m in jpeg.models] == ["s2-n2000-pad-crop-flip-e500-photoownjpeg10-f1.0"]


def test_used_only_leaves_out_the_clean_models_and_their_claims(capsys):
    whole = only_photo_marks(plan_photo_standard([0, 1]), ["photoownfree"])
    used = only_used_models(whole)
    assert used.models == [m for m in whole.models if not m.clean]
    assert {m.marker for m in used.models} == {"photoownfree"} and len(used.models) == 2
    assert used.jobs == [j for j in whole.jobs if not j.model.clean]
    assert len(used.jobs) == 2 * len(LABELLED_DEFAULT_AUDITS)
    assert (
        evaluation_main(["photo-standard", "--rows", "photoownfree", "--used-only", "--plan"]) == 0
    )
    assert "clean" not in capsys.readouterr().out
    with pytest.raises(SystemExit):
        evaluation_main(["standard", "--used-only", "--plan"])
    assert "applies to the photo and photo-standard tables" in capsys.readouterr().err


def test_rows_keep_one_photo_mark_with_the_clean_models_it_needs(capsys):
    whole = plan_photo_standard([0, 1])
    kept = only_photo_marks(whole, ["photoown"])
    assert {j.vault.marker for j in kept.jobs} == {"photoown"}
    assert {m.marker for m in kept.models if not m.clean} == {"photoown"}
    assert sum(m.clean for m in kept.models) == 2  # each seed's clean model stays
    assert len(kept.jobs) == len(whole.jobs) // 2
    assert {m.name for m in kept.models} <= {m.name for m in whole.models}
    with pytest.raises(ValueError, match="no photo mark nope"):
        only_photo_marks(whole, ["nope"])
    with pytest.raises(SystemExit):
        evaluation_main(["photo", "--rows", "nope", "--plan"])
    assert "no photo mark nope" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        evaluation_main(["standard", "--rows", "photoown", "--plan"])
    assert "applies to the attacks, photo and photo-standard tables" in capsys.readouterr().err


def test_a_photo_is_a_seeded_colour_upscale_that_resizes_back_to_its_item():
    item = (np.arange(28 * 28).reshape(28, 28) % 256).astype(np.uint8)
    one = photos.make_photo(item, np.random.default_rng(0), side=256)
    assert one.shape == (256, 256, 3) and one.dtype == np.uint8
    assert np.array_equal(one, photos.make_photo(item, np.random.default_rng(0), side=256))
    assert not np.array_equal(one[..., 0], one[..., 2])  # tinted: a colour photo
    back = photos.practitioner_resize(one).astype(int)
    assert back.shape == (28, 28)
    assert np.abs(back - item.astype(int)).mean() < 25  # the item again, blurred


class _Recorder(ClassifierOracle):
    def __init__(self) -> None:
        self.seen: list[tuple[int, ...]] = []

    @property
    def info(self) -> OracleInfo:
        return OracleInfo(
            model_name="m",
            model_digest="0" * 64,
            capabilities=("classify",),
            classify_output="probabilities",
            n_classes=2,
            max_batch=8,
        )

    def classify(self, images):  # type: ignore[no-untyped-def]
        self.seen.append(images.shape)
        return ClassifyAnswer(probabilities=np.full((len(images), 2), 0.5))


def test_the_resizing_oracle_sends_the_model_its_own_input_size():
    inner = _Recorder()
    served = photos.ResizingOracle(inner)
    answer = served.classify(np.zeros((3, 200, 300, 3), dtype=np.float32))
    assert inner.seen == [(3, 28, 28, 1)] and len(answer) == 3
    assert served.info == inner.info


@pytest.mark.slow
@needs_data
def test_a_tiny_photo_rung_marks_photos_trains_audits_and_reports(tmp_path, monkeypatch):
    monkeypatch.setattr(photos, "PHOTO_SIDE", 160)  # still above the 64 px working side
    short_own_proxy(monkeypatch, 20)
    args = ["photo", "--n-train", "200", "--epochs", "1", "--repeats", "1"]
    args += ["--work", str(tmp_path / "work"), "--out", str(tmp_path / "results.md")]
    assert evaluation_main(args) == 0
    work = tmp_path / "work"
    audits = [json.loads(line) for line in (work / "audits.jsonl").read_text().splitlines()]
    assert len(audits) == len(plan_photo([0]).jobs)
    sizes = photos.load_mark_sizes(work / photos.MARK_SIZES_FILE)
    assert sorted(sizes) == [
        "s0-n200-photoown10",
        "s0-n200-photoownfree10",
        "s0-n200-photoownjpeg10",
        "s0-n200-photoownjpeglow10",
    ]
    for record in sizes.values():
        assert record["pairs"] == 20 and 0 < int(str(record["full_max"])) <= 10
    scored = (work / "ablation.jsonl").read_text().splitlines()
    assert len(scored) == 2 * 8  # two scores, four used models and the clean one four times
    for line in scored:
        record = json.loads(line)
        assert record["wins"] + record["losses"] + record["ties"] == 20  # every pair
    photo = next((work / "photos" / "s0-n200" / "photos").iterdir())
    assert photo.suffix == ".png"
    report = (tmp_path / "results.md").read_text()
    assert "## Photo rung, trained as rung (a)" in report
    assert "| `photoownfree` | 0 |" in report
    assert "python -m evaluation photo-standard --device cuda" in report
    # The neutral and the free marks of the seed share one proxy, trained once.
    assert len(list((work / "proxy").glob("own-photos-*.pt"))) == 1
    configs = [
        Vault.open(work / "vaults" / f"s0-n200-{marker}10" / "vault").config
        for marker in ("photoown", "photoownfree")
    ]
    assert configs[0]["extractor"] == "proxy-own" and configs[0]["neutral_mark"] is True
    assert "neutral_mark" not in configs[1]  # --no-neutral-mark: recorded by omission
    assert configs[0]["extractor_weights"] == configs[1]["extractor_weights"]
    # The JPEG row's vault is made as the default mark's: marked by one process, bit for
    # bit; what differs is what the practitioner trained on: the JPEG she downloaded,
    # decoded, then resized.
    roots = [
        Vault.open(work / "vaults" / f"s0-n200-{marker}10" / "vault").root
        for marker in ("photoown", "photoownjpeg", "photoownjpeglow")
    ]
    assert roots[0] == roots[1] == roots[2]
    plain = sizes["s0-n200-photoown10"]
    jpeg = sizes["s0-n200-photoownjpeg10"]
    low = sizes["s0-n200-photoownjpeglow10"]
    assert jpeg["full_max"] == plain["full_max"] and jpeg["resized_mean"] != plain["resized_mean"]
    assert low["resized_mean"] not in (plain["resized_mean"], jpeg["resized_mean"])
    assert "| `photoownjpeg` | 0 |" in report and "| `photoownjpeglow` | 0 |" in report


def test_photo_models_of_rung_b_are_audited_through_the_arbiters_fit():
    assert photos.fits_at_arbiter("resnet-sgd") and not photos.fits_at_arbiter("demo")
    rng = np.random.default_rng(0)
    versions = rng.integers(0, 256, (3, 2, 90, 70, 3), dtype=np.uint8)
    fitted = photo_pairs.fitted(versions)
    assert fitted.shape == (3, 2, 28, 28, 1) and fitted.dtype == np.uint8
    assert np.array_equal(fitted[1, 0], fit_image(versions[1, 0], (28, 28, 1)))


@pytest.mark.slow
@needs_data
def test_a_tiny_photo_rung_b_sends_its_model_queries_the_arbiter_fitted(tmp_path, monkeypatch):
    monkeypatch.setattr(photos, "PHOTO_SIDE", 160)
    short_own_proxy(monkeypatch, 20)
    shapes, declared = [], []
    original = TorchClassifierOracle.classify

    def spy(self, images):  # type: ignore[no-untyped-def]
        shapes.append(images.shape[1:])
        declared.append(self.info.input_shape)
        return original(self, images)

    def refuse(self, images):  # type: ignore[no-untyped-def]
        raise AssertionError("rung (b) must not answer behind the practitioner's resize")

    monkeypatch.setattr(TorchClassifierOracle, "classify", spy)
    monkeypatch.setattr(photos.ResizingOracle, "classify", refuse)
    args = ["photo-standard", "--n-train", "200", "--epochs", "1", "--repeats", "1"]
    args += ["--rows", "photoown", "--jobs", "1", "--work", str(tmp_path / "work")]
    assert evaluation_main([*args, "--out", str(tmp_path / "results.md")]) == 0
    work = tmp_path / "work"
    audits = (work / "audits.jsonl").read_text().splitlines()
    assert len(audits) == 2 * len(LABELLED_DEFAULT_AUDITS)  # the used and the clean model
    assert shapes and set(shapes) == {(28, 28, 1)}
    # The claims' oracle declares its input (the arbiter fits); all-pairs fits beforehand.
    assert (28, 28, 1) in declared and set(declared) <= {(28, 28, 1), ()}
    for line in (work / "ablation.jsonl").read_text().splitlines():
        record = json.loads(line)
        assert record["wins"] + record["losses"] + record["ties"] == 20  # every pair
    assert (work / "models" / "s0-n200-resnet-sgd-pad-crop-flip-e1-clean-t1").is_dir()


def test_the_remembering_oracle_asks_each_query_once():
    inner = _Recorder()
    served = RememberingOracle(inner)
    images = np.zeros((2, 28, 28, 1), dtype=np.float32)
    first, again = served.classify(images), served.classify(images.copy())
    assert len(inner.seen) == 1 and first is again
    served.forget()
    served.classify(images)
    assert len(inner.seen) == 2
