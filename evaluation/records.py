"""The results' records: the small files the results document is written from.

A work directory holds trained weights, vaults and data splits (gigabytes) next to
the records the report reads: the audit results (``audits.jsonl``), each model's
training summary (``model.json``), the invocations and their wall time
(``runs.json``) and the owner's text-pair figures (``text-marking.json``).
``python -m evaluation archive`` copies those records into a folder kept with the
code (``docs/results-data/`` by default), so that the results document can be
written again — ``python -m evaluation report --work docs/results-data`` — by anyone,
after the work directory is gone.

Archiving merges: records already in the archive stay, new ones are added. Two
records under the same name that differ (an audit result with the same key, a model
summary of the same model) are a conflict: nothing is written and
:class:`RecordConflictError` names them, because a result measured twice must not be
silently replaced by the other measurement. A model summary that differs only in its
training time (:data:`RUN_TIMES`), or in spec fields an older summary leaves out at their
defaults, is the same model trained again, and an audit result
that differs only in its time (:data:`CLAIM_TIMES`) the same claim run again: the
archive's record stays.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, Final

from twinaudit.protocol.errors import StateError

from .audit import AuditLog
from .specs import ModelSpec


def trained_on(summary: Mapping[str, object]) -> str:
    """Return the device a model summary (``model.json``) names.

    Summaries written before the device was recorded are of models trained on the CPU.
    """
    return str(summary.get("device", "cpu"))


def devices_of(summaries: Iterable[Mapping[str, object]]) -> list[str]:
    """Return the devices ``summaries`` name, each once, sorted."""
    return sorted({trained_on(s) for s in summaries})


#: The records the report reads, as patterns relative to the work directory.
#: The keyed JSON-lines files (``audits.jsonl``, the ladder's ``ablation.jsonl``,
#: ``evasion.jsonl`` and ``estimates.jsonl``) and ``runs.json`` are merged entry by
#: entry; the others are copied whole.
KEYED: Final = (
    "audits.jsonl",
    "ablation.jsonl",
    "evasion.jsonl",
    "estimates.jsonl",
    "baselines.jsonl",  # evaluation.baselines: the baselines' tests
    "owners.jsonl",  # and the several owners' claims
    "unlearning.jsonl",  # evaluation.unlearning: claims before and after unlearning
    "photo-marks.jsonl",  # evaluation.photos: the photo vaults' marks, full size and resized
    "arithmetic.jsonl",  # evaluation.arithmetic: the ablation's variants under both arithmetics
)
PATTERNS: Final = (
    "runs.json",
    *KEYED,
    "models/*/model.json",
    "foundation/audits.jsonl",
    "foundation/experiments/*/models/*/model.json",
    "foundation/experiments/*/text-marking.json",
)


#: Fields of a model summary that measure the training run, not the model: a model
#: trained again (same weights, so the same accuracies) differs only in these.
RUN_TIMES: Final = ("train_seconds", "train_cpu_seconds")
#: Likewise for an audit result: a claim run again differs only in its time.
CLAIM_TIMES: Final = ("seconds", "cpu_seconds")


class RecordConflictError(StateError):
    """The archive already holds a different record under the same name."""


def records(work: Path) -> Iterator[Path]:
    """Yield the record files in ``work``, relative to it, in a stable order."""
    for pattern in PATTERNS:
        for path in sorted(work.glob(pattern)):
            if path.is_file():
                yield path.relative_to(work)


def _audit_lines(path: Path) -> dict[str, str]:
    """Return ``path``'s audit results by key, as canonical JSON (a torn last line is left out)."""
    return {key: json.dumps(r, sort_keys=True) for key, r in AuditLog(path).results.items()}


def _merge_audits(source: Path, target: Path, name: Path) -> str | None:
    have, new = _audit_lines(target), _audit_lines(source)

    def measured(line: str) -> dict[str, Any]:
        return _without(json.loads(line), CLAIM_TIMES)

    clashes = sorted(k for k in new.keys() & have.keys() if measured(new[k]) != measured(have[k]))
    if clashes:
        raise RecordConflictError(f"{name}: different results for {', '.join(clashes[:5])}")
    if new.keys() <= have.keys():
        return None
    merged = {**new, **have}  # a claim run again (only its time differs): the archive's stays
    return "".join(merged[k] + "\n" for k in sorted(merged))


def _merge_runs(source: Path, target: Path) -> str | None:
    have: list[Any] = json.loads(target.read_text()) if target.exists() else []
    added = [entry for entry in json.loads(source.read_text()) if entry not in have]
    return json.dumps([*have, *added], indent=2) + "\n" if added else None


def _copy_whole(source: Path, target: Path, name: Path) -> str | None:
    text = source.read_text()
    if not target.exists():
        return text
    have, new = json.loads(target.read_text()), json.loads(text)
    if isinstance(have, dict) and isinstance(new, dict):  # a run's own times may differ
        have, new = (_with_spec_defaults(_without(r, RUN_TIMES)) for r in (have, new))
    if have != new:
        raise RecordConflictError(f"{name}: the archive holds a different record")
    return None  # the same record (a model trained again): the archive's stays


def _with_spec_defaults(record: dict[str, Any]) -> dict[str, Any]:
    """Return a model summary whose ``spec`` names every field, the unnamed at its default.

    A summary written before a :class:`~evaluation.specs.ModelSpec` field existed leaves
    it out; the model it describes had the field's default value.
    """
    spec = record.get("spec")
    if not isinstance(spec, dict):
        return record
    defaults = {
        f.name: f.default
        for f in dataclasses.fields(ModelSpec)
        if f.default is not dataclasses.MISSING
    }
    return {**record, "spec": {**defaults, **spec}}


def _without(record: dict[str, Any], keys: tuple[str, ...]) -> dict[str, Any]:
    return {k: v for k, v in record.items() if k not in keys}


def archive(work: Path, dest: Path) -> list[Path]:
    """Merge ``work``'s records into ``dest``; return the files written (relative paths).

    Every record is read and checked before anything is written, and each file is
    replaced atomically, so a conflict leaves ``dest`` as it was.
    """
    if not work.is_dir():
        raise FileNotFoundError(f"no work directory at {work}")
    planned: dict[Path, str] = {}
    for name in records(work):
        source, target = work / name, dest / name
        if name.name in KEYED:
            text = _merge_audits(source, target, name)
        elif name.name == "runs.json":
            text = _merge_runs(source, target)
        else:
            text = _copy_whole(source, target, name)
        if text is not None:
            planned[name] = text
    for name, text in planned.items():
        target = dest / name
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(target.name + ".tmp")
        tmp.write_text(text)
        tmp.replace(target)
    return list(planned)
