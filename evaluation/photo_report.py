"""The photo rung's section of ``docs/results.md`` (issue #39, part 7).

Per seed and mark variant: each default claim's decision, Q/M, q̂ and untied share,
the same claim against the seed's clean model, and the marks' size at full size and
after the practitioner's resize (:mod:`evaluation.photos`); then the pooled DSR and
false detections.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Final

from . import ablation
from .photos import (
    MARK_SIZES_FILE,
    MODEL_SIDE,
    PHOTO_MARKERS,
    PHOTO_SIDE,
    PUBLISHED_JPEG_QUALITIES,
    load_mark_sizes,
)
from .specs import TEST, AuditSpec, Job, Plan
from .tables import Cell, Result, accuracy_summary

#: The tables of the photo rung: trained as rung (a), and as rung (b).
PHOTO_TABLES: Final = ("photo", "photo-standard")

INTRO: Final = (
    "The owner's items are photos (issue #39, part 7): each of her items in the split (rung "
    f"(a): 200 of M = 2,000) is made a {PHOTO_SIDE}×{PHOTO_SIDE} RGB photo (1.05 MP) — the "
    "28×28 Fashion-MNIST image upscaled with PIL's bicubic filter, a colour tint of unit "
    "luminance, a low-frequency texture (±6%) and sensor noise (σ = 3 levels), written "
    "as PNG files (`evaluation.photos`). She marks them at full size with `owner mark`'s "
    "defaults with `--labels` (`proxy-own`: the proxy CNN trained 3,160 steps on her "
    "photos at 32 px, PGD at a working resolution of 64 px carried back to full size, "
    "ε = 10), through the CLI's own configuration code: `photoown` with the default "
    "neutral mark, `photoownfree` with `--no-neutral-mark`, from the same photos and "
    "secret; `photoownjpeg` is a vault made as `photoown`'s (the same photos, secret, "
    "proxy and settings; marked here with one torch thread where seeds 3 and 4's "
    "`photoown` vaults were marked with two, 8 and 6 of their 200 pairs' marks came out "
    "different, PGD's sign steps following the float sums' order; marked again with two "
    "threads, seed 3's is `photoown`'s root) published as JPEG "
    f"files at quality {PUBLISHED_JPEG_QUALITIES['photoownjpeg']} (PIL, 4:2:0 chroma), "
    "and `photoownjpeglow` the same at quality "
    f"{PUBLISHED_JPEG_QUALITIES['photoownjpeglow']} (PIL's default quality; marked the "
    "same way, its vaults are `photoownjpeg`'s, root for root, seeds 2 to 4), which the "
    "practitioner decodes before her resize (their ε resized is measured on the decoded "
    "JPEG; their clean-model claims ran against their own vaults, seeds 3 and 4). "
    "The practitioner resizes the published photos with her own library and "
    f"settings (PIL: to grey, then Lanczos to {MODEL_SIDE}×{MODEL_SIDE}) and trains as in "
    "rung (a) (the demo's CNN, 500 epochs of Adam, pad-crop-flip) on them beside her "
    "1,800 other images of 28 px. The claims are the labelled owner's defaults (C1 "
    "`dither` K = 1, tie margin 0.01, `mixture-graded`; C3 `dither` K = 1); the items go "
    "to the model at their native size and her deployment resizes each query the same "
    "way before the network (`evaluation.photos.ResizingOracle`, in process: the "
    "arbiter's own resize for fixed-input oracles is not what ran here). Clean models: "
    "the demo's regime without her photos, trained a third time (`-t2`: the ladder's "
    "`-t1`, trained again here, did not come back as archived), with the same claims. ε at full "
    "size: |published − original photo| over every channel of every pixel of the "
    "published versions; after the resize: |resize(published) − resize(original)| at "
    f"{MODEL_SIDE} px (levels of 255: the largest |δ|, the mean over photos of their "
    "mean |δ|, and at full size the mean over photos of their mean signed δ, a brightness shift). "
    "What it does not cover: real photo datasets (none is available here: the photos are "
    "upscaled 28 px images, so their detail is what 28 px holds), training as in rungs "
    "(b) and (c), models of 96 or 224 px input, colour models, JPEG publication at "
    "rung (b) or at qualities other than 85 and 75, and the arbiter's own resize. The "
    "rung-(b) version "
    "(the ResNet, 80 epochs, her 1,000 "
    "photos, the arbiter's resize) is the next table: `python -m evaluation photo-standard "
    "--device cuda --jobs 16` on a lent accelerator, or on a CPU with `--jobs 2`."
)


#: Above the rung-(b) version's table.
INTRO_STANDARD: Final = (
    "The photo rung above, trained as rung (b): the ResNet of the `standard-own` table "
    "(SGD, 80 epochs, pad-crop-flip), M = 10,000 of which her 1,000 photos, resized by the "
    "practitioner as above (PIL: grey, then Lanczos to 28×28); the same kind of photos, "
    "marks and claims. The claims reach the model as the product sends them to a "
    "fixed-input model: the oracle declares its input (28×28×1, as `oracle serve` does) "
    "and the arbiter fits every query to it by spec §10.2 step 5's rule `area` (the "
    "claim's default), drawing the copies at that size; so the model trained on her "
    "Lanczos resize is asked through another resize, the arbiter's. q̂ over all pairs "
    "fits each version by the same rule. Clean models: the `standard` table's trained a "
    "second time (`-t1`: the archive keeps that table's summaries, not its weights), "
    "with the same claims. 36–50 minutes a model on the 2-core CPU, six trained side by "
    "side (`python -m evaluation photo-standard --repeats 3 --seeds N --rows photoown "
    "--jobs 2`: the default mark only), or `--device cuda --jobs 16` on a lent "
    "accelerator. What it does not cover: the rung above's list but training as in rung "
    "(b) and the arbiter's own resize."
)


def _claim_name(audit: AuditSpec) -> str:
    """Return how a row names ``audit``'s claim."""
    extra = f", margin {audit.margin:g}" if audit.margin else ""
    extra += f", `{audit.test}`" if audit.test != TEST else ""
    return f"{audit.knowledge}, `{audit.perturbation}` K = {audit.k}{extra}"


def _one(results: Mapping[str, Result], jobs: Sequence[Job]) -> Result | None:
    found = [results[j.key] for j in jobs if j.key in results]
    return found[0] if found else None


def _outcome(result: Result | None, m: int) -> list[str]:
    """Return decision, Q/M, q̂ (draws) of one claim, or dashes when it has not run."""
    if result is None:
        return ["not run", "—", "—"]
    draws, successes = int(str(result["draws"])), int(str(result["successes"]))
    opened = int(str(result["pairs_opened"]))
    q_hat = f"{successes / draws:.3f} ({draws}/{opened})" if draws else f"— (0/{opened})"
    detected = result["decision"] == "detected"
    return [
        "detected" if detected else "not detected",
        f"{100 * opened / m:.2f}%" if detected else "—",
        q_hat,
    ]


def _all_pairs(scored: Mapping[str, Mapping[str, object]], job: Job) -> str:
    """Return q̂ over all pairs of ``job``'s model and vault with its claim's score, or —."""
    variant = ablation.Variant(
        job.audit.knowledge, job.audit.perturbation, job.audit.k, margin=job.audit.margin
    )
    record = scored.get(ablation.key(job.model, job.vault, variant))
    if record is None:
        return "—"
    wins, losses = int(str(record["wins"])), int(str(record["losses"]))
    if wins + losses == 0:
        return "— (0)"
    return f"{wins / (wins + losses):.3f} ({wins + losses})"


def _sizes(record: Mapping[str, object] | None) -> list[str]:
    if record is None:
        return ["—", "—"]
    return [
        f"{record['full_max']} / {float(str(record['full_mean'])):.2f} / "
        f"{float(str(record['full_shift'])):+.2f}",
        f"{record['resized_max']} / {float(str(record['resized_mean'])):.2f}",
    ]


def _accuracy(infos: Mapping[str, Mapping[str, object]], names: Sequence[str], what: str) -> str:
    """Return ``mean ± sd`` of the ``what`` accuracy (train, test, owner) of these models."""
    key = f"{what}_accuracy"
    return accuracy_summary([float(str(infos[n][key])) for n in names if key in infos.get(n, {})])


def photo_section(
    plan: Plan,
    results: Mapping[str, Result],
    infos: Mapping[str, Mapping[str, object]],
    repeats: int,
    work: Path,
) -> list[str]:
    """Return the photo rung's intro and tables (per seed, then pooled)."""
    sizes = load_mark_sizes(work / MARK_SIZES_FILE)
    scored = ablation.load(work / "ablation.jsonl")
    m = plan.models[0].n_train
    lines = [INTRO if plan.table == "photo" else INTRO_STANDARD, ""]
    if not any(j.key in results for j in plan.jobs):
        return [*lines, "Not run yet."]
    used = [s for s in plan.models if not s.clean]
    clean = [s for s in plan.models if s.clean]
    for marker in _markers(plan):
        mine = [s.name for s in used if s.marker == marker]
        lines.append(
            f"- `{marker}` models: train {_accuracy(infos, mine, 'train')}, test "
            f"{_accuracy(infos, mine, 'test')}, on her resized published photos "
            f"{_accuracy(infos, mine, 'owner')}."
        )
    names = [s.name for s in clean]
    lines += [
        f"- clean models: train {_accuracy(infos, names, 'train')}, test "
        f"{_accuracy(infos, names, 'test')}.",
        "",
    ]
    header = [
        "marks",
        "seed",
        "ε full size (max / mean / mean δ)",
        "ε resized (max / mean)",
        "claim",
        "used model",
        "Q/M",
        "q̂ (untied/opened)",
        "q̂ all pairs (untied)",
        "clean model",
        "q̂ clean",
        "q̂ clean all pairs",
    ]
    rows: list[list[str]] = []
    audits = list(dict.fromkeys(j.audit for j in plan.jobs))
    seeds = sorted({j.model.seed for j in plan.jobs if j.key in results})  # those run
    for marker in _markers(plan):
        for seed in seeds:
            for audit in audits:
                picked = [
                    j
                    for j in plan.jobs
                    if j.vault.marker == marker and j.model.seed == seed and j.audit == audit
                ]
                hit = _one(results, [j for j in picked if not j.model.clean])
                miss = _one(results, [j for j in picked if j.model.clean])
                vault = picked[0].vault.name if picked else ""
                clean_out = _outcome(miss, m)
                every = [_all_pairs(scored, j) for j in picked]
                rows.append(
                    [
                        f"`{marker}`",
                        str(seed),
                        *_sizes(sizes.get(vault)),
                        _claim_name(audit),
                        *_outcome(hit, m),
                        next(
                            (e for j, e in zip(picked, every, strict=True) if not j.model.clean),
                            "—",
                        ),
                        clean_out[0],
                        clean_out[2],
                        next((e for j, e in zip(picked, every, strict=True) if j.model.clean), "—"),
                    ]
                )
    lines += ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    lines += ["", *_pooled(plan, results, scored, repeats=repeats, m=m, audits=audits)]
    return lines


def _markers(plan: Plan) -> list[str]:
    """Return the marks of ``plan``'s vaults, in the order of :data:`PHOTO_MARKERS`."""
    mine = {j.vault.marker for j in plan.jobs}
    return [marker for marker in PHOTO_MARKERS if marker in mine]


def _pooled(
    plan: Plan,
    results: Mapping[str, Result],
    scored: Mapping[str, Mapping[str, object]],
    *,
    repeats: int,
    m: int,
    audits: Sequence[AuditSpec],
) -> list[str]:
    """Return the pooled table: per marks and claim, DSR, Q/M, q̂, false detections."""
    header = [
        "marks",
        "claim",
        "DSR",
        "Q/M",
        "q̂",
        "q̂ all pairs",
        "false detections",
        "q̂ clean",
        "q̂ clean all pairs",
    ]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for marker in _markers(plan):
        for audit in audits:
            mine = [j for j in plan.jobs if j.vault.marker == marker and j.audit == audit]
            hit, miss = (
                Cell(
                    repeats,
                    [results[j.key] for j in mine if j.key in results and j.model.clean == c],
                )
                for c in (False, True)
            )
            every = [
                _pooled_all_pairs(scored, [j for j in mine if j.model.clean == c])
                for c in (False, True)
            ]
            lines.append(
                f"| `{marker}` | {_claim_name(audit)} | {hit.dsr()} | {hit.q_over_m(m)} | "
                f"{hit.q_hat()} | {every[0]} | {miss.dsr()} | {miss.q_hat()} | {every[1]} |"
            )
    return lines


def _pooled_all_pairs(scored: Mapping[str, Mapping[str, object]], jobs: Sequence[Job]) -> str:
    """Return q̂ over all pairs pooled over ``jobs``' models (untied pairs), or —."""
    wins = losses = 0
    for job in jobs:
        variant = ablation.Variant(
            job.audit.knowledge, job.audit.perturbation, job.audit.k, margin=job.audit.margin
        )
        record = scored.get(ablation.key(job.model, job.vault, variant))
        if record is not None:
            wins += int(str(record["wins"]))
            losses += int(str(record["losses"]))
    return f"{wins / (wins + losses):.3f} ({wins + losses})" if wins + losses else "—"
