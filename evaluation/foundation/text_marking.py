"""The text pairs of the language-model experiments, measured for the results document.

Issue #7 asks to show how close the marked versions stay to the original and how far
apart they are, as distributions and with a sample of ten pairs. Each experiment's
vault is measured once with ``owner inspect``'s own code
(:func:`twinaudit.owner.text.report.inspect_text_vault`: MiniLM similarity of each version to
its original, word-level edit distance between the versions) and cached next to it
as ``text-marking.json``; the results document pools the experiments' figures and
shows seed 0's sample.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final

from twinaudit.owner.text.report import inspect_text_vault
from twinaudit.owner.text.words import word_distance

from .build import FoundationWorkspace
from .specs import Experiment

#: The cache file inside an experiment's folder.
CACHE: Final = "text-marking.json"


def measure(workspace: FoundationWorkspace, experiment: Experiment) -> dict[str, Any]:
    """Return the text-pair figures of ``experiment``'s vault (measured once, then cached).

    The figures are ``owner inspect --json``'s, plus ``distances``: the word distance
    of every pair, in vault order, so that experiments can be pooled exactly.
    """
    path = workspace.folder(experiment) / CACHE
    if path.exists():
        cached: dict[str, Any] = json.loads(path.read_text())
        return cached
    vault = workspace.vault(experiment)
    figures = inspect_text_vault(vault).to_value()
    distances = [
        word_distance(chunk.versions0[k], chunk.versions1[k])
        for _, chunk, _ in vault.texts()
        for k in range(len(chunk))
    ]
    result = {**figures, "vault": path.parent.name, "distances": distances}
    tmp = path.with_name(CACHE + ".tmp")
    tmp.write_text(json.dumps(result, sort_keys=True, indent=1, default=_plain))
    tmp.replace(path)
    return result


def _plain(value: object) -> object:
    """JSON for the report's byte strings (digests in the source record): hex."""
    if isinstance(value, bytes):
        return value.hex()
    raise TypeError(f"cannot write {type(value).__name__} as JSON")


def load(folder: Path, experiments: Sequence[Experiment]) -> list[dict[str, Any]]:
    """Return the cached figures of those ``experiments`` that have them, in order."""
    found = []
    for experiment in experiments:
        path = folder / "experiments" / experiment.name / CACHE
        if path.exists():
            found.append(json.loads(path.read_text()))
    return found


def _quartiles(figures: Mapping[str, Any], digits: int = 3) -> str:
    parts = (figures["min"], figures["q1"], figures["median"], figures["q3"], figures["max"])
    spread = " / ".join(f"{v:.{digits}f}" for v in parts)
    return f"{spread} (mean {figures['mean']:.{digits}f})"


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def section(measured: Sequence[Mapping[str, Any]]) -> list[str]:
    """Return the results document's lines on the text pairs (empty when none is measured)."""
    if not measured:
        return []
    distances = [int(d) for m in measured for d in m["distances"]]
    histogram = Counter(distances)
    pairs = sum(int(m["pairs_measured"]) for m in measured)
    below = sum(int(m["below_bound"]) for m in measured)
    dropped = sum(len(m["dropped"]) for m in measured)
    bound = measured[0]["config"]["min_similarity"]
    lines = [
        "### The owner's text pairs",
        "",
        f"Measured by `owner inspect`'s code over the {pairs} pairs of the "
        f"{len(measured)} experiment vault(s) above ({dropped} sentence(s) left out as "
        f"unmarkable). Similarity is the MiniLM cosine of a version to its original "
        f"(bound {bound}; {below} version(s) below it); distance is the word-level edit "
        "distance between the two versions. Per vault, min / q1 / median / q3 / max:",
        "",
        "| vault | pairs | similarity, version 0 | similarity, version 1 | word distance |",
        "|---|---|---|---|---|",
    ]
    for m in measured:
        sims = m["similarity"]
        lines.append(
            f"| {m['vault']} | {m['pairs_measured']} | {_quartiles(sims['version 0'])} | "
            f"{_quartiles(sims['version 1'])} | {_quartiles(m['word_distance'], 1)} |"
        )
    lines += [
        "",
        "Word distance between the versions, all vaults: "
        + ", ".join(f"{d}: {histogram[d]}" for d in sorted(histogram))
        + f" pairs (distance: count; {len(distances)} pairs).",
        "",
        f"A sample of ten pairs of {measured[0]['vault']}, spread evenly over its vault "
        "(similarity to the original in brackets). The thesaurus swaps have no "
        "part-of-speech or sense check, which shows here.",
        "",
        "| original | version 0 | version 1 | distance |",
        "|---|---|---|---|",
    ]
    for pair in measured[0]["sample"]:
        lines.append(
            f"| {_cell(pair['original'])} | {_cell(pair['first'])} "
            f"({pair['similarity_first']:.3f}) | {_cell(pair['second'])} "
            f"({pair['similarity_second']:.3f}) | {pair['distance']} |"
        )
    return [*lines, ""]
