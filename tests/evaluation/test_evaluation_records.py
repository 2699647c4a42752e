"""Archiving the evaluation's records, and rewriting one part of the results document."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evaluation.__main__ import main as evaluation_main
from evaluation.build import _publish_atomically
from evaluation.records import RecordConflictError, archive, devices_of, trained_on
from evaluation.report import FOUNDATION_HEADING, split_parts, write_results
from evaluation.specs import plan_main, plan_recipe


def _audit(key: str, decision: str = "detected") -> str:
    return json.dumps({"key": key, "decision": decision, "seconds": 1.0}, sort_keys=True)


def _work(root: Path) -> Path:
    """A work directory with one record of each kind, weights and a torn audit line."""
    (root / "models" / "m0").mkdir(parents=True)
    (root / "models" / "m0" / "model.json").write_text('{"accuracy": 0.9}')
    (root / "models" / "m0" / "model.pt").write_bytes(b"weights")
    (root / "vaults" / "v0").mkdir(parents=True)
    (root / "vaults" / "v0" / "vault.db").write_bytes(b"secret")
    (root / "audits.jsonl").write_text(_audit("a") + "\n" + _audit("b") + "\n" + '{"key": "c"')
    (root / "runs.json").write_text(json.dumps([{"command": "x", "started": "t0"}]))
    experiment = root / "foundation" / "experiments" / "lm-s0"
    (experiment / "models" / "used").mkdir(parents=True)
    (experiment / "models" / "used" / "model.json").write_text('{"utility": 5.2}')
    (experiment / "text-marking.json").write_text('{"pairs_measured": 4}')
    (root / "foundation" / "audits.jsonl").write_text(_audit("lm-a") + "\n")
    return root


def test_archive_copies_the_records_only_and_merges(tmp_path: Path) -> None:
    work, dest = _work(tmp_path / "work"), tmp_path / "archive"
    written = {str(p) for p in archive(work, dest)}
    assert written == {
        "runs.json",
        "audits.jsonl",
        "models/m0/model.json",
        "foundation/audits.jsonl",
        "foundation/experiments/lm-s0/models/used/model.json",
        "foundation/experiments/lm-s0/text-marking.json",
    }
    assert not list(dest.rglob("*.pt")) and not (dest / "vaults").exists()
    keys = [json.loads(line)["key"] for line in (dest / "audits.jsonl").read_text().splitlines()]
    assert keys == ["a", "b"]  # the torn line is not a record
    # Again: nothing new, nothing written. A new result and a new run are added.
    assert archive(work, dest) == []
    with (work / "audits.jsonl").open("a") as stream:
        stream.write("\n" + _audit("d") + "\n")
    (work / "runs.json").write_text(json.dumps([{"command": "y", "started": "t1"}]))
    assert {str(p) for p in archive(work, dest)} == {"audits.jsonl", "runs.json"}
    keys = [json.loads(line)["key"] for line in (dest / "audits.jsonl").read_text().splitlines()]
    assert keys == ["a", "b", "d"]
    runs = json.loads((dest / "runs.json").read_text())
    assert [r["command"] for r in runs] == ["x", "y"]


def test_a_conflicting_record_stops_the_archive_before_anything_is_written(
    tmp_path: Path,
) -> None:
    work, dest = _work(tmp_path / "work"), tmp_path / "archive"
    archive(work, dest)
    before = {p: p.read_bytes() for p in dest.rglob("*") if p.is_file()}
    (work / "runs.json").write_text(json.dumps([{"command": "z", "started": "t2"}]))
    (work / "audits.jsonl").write_text(_audit("a", decision="exhausted") + "\n")
    with pytest.raises(RecordConflictError, match=r"audits\.jsonl: different results for a"):
        archive(work, dest)
    assert {p: p.read_bytes() for p in dest.rglob("*") if p.is_file()} == before
    (work / "audits.jsonl").write_text(_audit("a") + "\n")
    (work / "models" / "m0" / "model.json").write_text('{"accuracy": 0.8}')
    with pytest.raises(RecordConflictError, match=r"model\.json"):
        archive(work, dest)
    assert {p: p.read_bytes() for p in dest.rglob("*") if p.is_file()} == before
    # The command line says so and exits 2; so it does for a missing work directory.
    args = ["archive", "--work", str(work), "--to", str(dest)]
    assert evaluation_main(args) == 2
    assert evaluation_main(["archive", "--work", str(tmp_path / "none"), "--to", str(dest)]) == 2


def test_a_record_measured_again_differs_only_in_its_time(tmp_path: Path) -> None:
    work, dest = _work(tmp_path / "work"), tmp_path / "archive"
    archive(work, dest)
    before = {p: p.read_bytes() for p in dest.rglob("*") if p.is_file()}
    # The same claim run again, the same model trained again: only the times differ.
    again = json.dumps({"key": "a", "decision": "detected", "seconds": 7.5}, sort_keys=True)
    (work / "audits.jsonl").write_text(again + "\n" + _audit("b") + "\n")
    summary = {"accuracy": 0.9, "train_seconds": 12.0, "train_cpu_seconds": 11.0}
    (work / "models" / "m0" / "model.json").write_text(json.dumps(summary))
    assert archive(work, dest) == []
    assert {p: p.read_bytes() for p in dest.rglob("*") if p.is_file()} == before  # kept
    # Anything else that differs is still a conflict.
    (work / "models" / "m0" / "model.json").write_text(json.dumps({**summary, "accuracy": 0.8}))
    with pytest.raises(RecordConflictError, match=r"model\.json"):
        archive(work, dest)


def test_a_summary_naming_spec_fields_an_older_one_left_at_their_default_is_the_same(
    tmp_path: Path,
) -> None:
    work, dest = _work(tmp_path / "work"), tmp_path / "archive"
    older = {"accuracy": 0.9, "train_seconds": 12.0, "spec": {"seed": 0, "recipe": "none"}}
    (work / "models" / "m0" / "model.json").write_text(json.dumps(older))
    archive(work, dest)
    newer = {**older, "train_seconds": 7.0, "spec": {**older["spec"], "attack": "", "training": 0}}
    (work / "models" / "m0" / "model.json").write_text(json.dumps(newer))
    assert archive(work, dest) == []  # the same model: the archive's summary stays
    assert json.loads((dest / "models" / "m0" / "model.json").read_text()) == older
    attacked = {**newer, "spec": {**newer["spec"], "attack": "dp1"}}
    (work / "models" / "m0" / "model.json").write_text(json.dumps(attacked))
    with pytest.raises(RecordConflictError, match=r"model\.json"):
        archive(work, dest)


def test_split_parts_finds_the_foundation_heading() -> None:
    document = "# Results\n\ntables\n\n" + FOUNDATION_HEADING + "\n\nencoder\n"
    parts = split_parts(document)
    assert parts["classifier"] == "# Results\n\ntables\n\n"
    assert parts["foundation"] == FOUNDATION_HEADING + "\n\nencoder\n"
    assert split_parts("# Results only\n") == {"classifier": "# Results only\n", "foundation": ""}


def test_a_part_kept_is_taken_unchanged_from_the_document_there(tmp_path: Path) -> None:
    out = tmp_path / "results.md"
    classifier = "# Results: measured elsewhere\n\n| C1 | 5/5 |\n\n"
    out.write_text(classifier + FOUNDATION_HEADING + "\n\nold foundation\n")
    common = {"plans": [plan_main([0])], "results": {}, "infos": {}, "repeats": 1}
    new_foundation = [FOUNDATION_HEADING, "", "new foundation", ""]
    write_results(out, **common, work=tmp_path, extra=new_foundation, keep=("classifier",))
    parts = split_parts(out.read_text())
    assert parts["classifier"] == classifier
    assert parts["foundation"] == "\n".join(new_foundation)
    # Keeping the foundation part instead rewrites the classifier tables from the records.
    write_results(out, **common, work=tmp_path, extra=[], keep=("foundation",))
    parts = split_parts(out.read_text())
    assert "Done: 0/2 models" in parts["classifier"]
    assert parts["foundation"] == "\n".join(new_foundation)
    with pytest.raises(ValueError, match="unknown parts"):
        write_results(out, **common, work=tmp_path, keep=("tables",))


def test_report_part_rewrites_one_part_only(tmp_path: Path) -> None:
    out, work = tmp_path / "results.md", tmp_path / "work"
    foundation = FOUNDATION_HEADING + "\n\nmeasured elsewhere\n"
    out.write_text("# Results: measured elsewhere\n\n" + foundation)
    args = ["report", "--work", str(work), "--out", str(out), "--repeats", "1"]
    assert evaluation_main([*args, "--part", "classifier"]) == 0
    parts = split_parts(out.read_text())
    assert parts["foundation"] == foundation and "Done: 0/2 models" in parts["classifier"]
    with pytest.raises(SystemExit):
        evaluation_main(["main", "--part", "classifier", "--work", str(work)])


def test_a_table_with_second_trainings_says_which_and_where(tmp_path: Path) -> None:
    out = tmp_path / "results.md"
    recipe, main = plan_recipe([0, 1]), plan_main([0, 1])
    summary = {"device": "cpu", "train_seconds": 1.0, "test_accuracy": 0.9}
    infos = {m.name: summary for m in recipe.models if m.training}
    write_results(
        out, plans=[main, recipe], results={}, infos=infos, repeats=2, work=tmp_path, extra=[]
    )
    text = out.read_text()
    said = [line for line in text.splitlines() if line.startswith("Trained again")]
    assert said == [
        "Trained again for this table (4 models, trained on cpu): "
        "`s*-n2000-pad-crop-flip-e500-bernoulli32-f1.0-t1`, "
        "`s*-n2000-pad-crop-flip-e500-clean-t1`. Each is a spec another table uses, trained "
        "a second time with its own initial weights, batches and augmentation on the same "
        "data, so these cells measure models of their own instead of repeating that "
        "table's claims."
    ]  # the recipe table only: main's models are the first trainings

    del infos[[m for m in recipe.models if m.training][-1].name]  # one not trained yet
    write_results(
        out, plans=[main, recipe], results={}, infos=infos, repeats=2, work=tmp_path, extra=[]
    )
    assert "Trained again for this table (3 of 4 models, trained on cpu): " in out.read_text()


def test_a_summary_without_a_device_is_of_a_cpu_model() -> None:
    assert trained_on({"device": "cuda (NVIDIA H100 80GB HBM3)"}) == "cuda (NVIDIA H100 80GB HBM3)"
    assert trained_on({"train_seconds": 1.0}) == "cpu"  # written before devices were kept
    summaries = [{"device": "cuda (X)"}, {}, {"device": "cpu"}, {"device": "cuda (X)"}]
    assert devices_of(summaries) == ["cpu", "cuda (X)"]


def test_an_empty_model_folder_is_replaced_and_a_published_one_kept(tmp_path: Path) -> None:
    # A folder whose summary was removed by hand (to train it again) is no result: a
    # model trained into it must land there, not be dropped as "already published".
    def build(tmp: Path) -> None:
        (tmp / "model.json").write_text("{}")

    empty = tmp_path / "empty"
    empty.mkdir()
    assert _publish_atomically(build, empty) == empty
    assert (empty / "model.json").read_text() == "{}"
    kept = tmp_path / "kept"
    kept.mkdir()
    (kept / "model.json").write_text('{"first": 1}')
    _publish_atomically(build, kept)
    assert json.loads((kept / "model.json").read_text()) == {"first": 1}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["empty", "kept"]  # no tmp left
