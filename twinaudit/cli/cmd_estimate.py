"""``twinaudit owner estimate``: what an audit of this vault can find, measured before publishing.

Trains a proxy practitioner on labelled public images of the owner's domain plus the
published twins of most of her pairs, scores every pair as a claim would, and prints
q̂ per knowledge condition with the detection probability and expected pairs of a
claim on all her pairs (:mod:`twinaudit.cli.estimate`).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from twinaudit.protocol.atomic_file import write_atomically
from twinaudit.protocol.errors import InputError

from .estimate_config import CONTROL_SHARE, SHARE, STEPS, TEST, EstimateConfig, P
from .helptext import paragraphs
from .threads import threads_arg, use_threads

if TYPE_CHECKING:
    from .estimate import Estimate

EXIT_OK = 0


ESTIMATE_HELP = paragraphs(
    "Measure, before publishing, what an audit of this vault can find: a proxy "
    "practitioner learns your labelled public images with the published twins of 80% "
    "of your pairs; every pair is scored as a claim would score it; q̂ per knowledge "
    "condition is printed with the detection probability and the expected pairs of "
    "a claim on all your pairs, and the same q̂ on the 20% it never saw (the "
    "control, near 0.5).",
    "example: twinaudit owner estimate vault/ --public public/ --labels public.csv "
    "--out estimate.json",
)


def register(sub: Any) -> None:
    """Add ``owner estimate`` to the owner command group ``sub``."""
    parser = sub.add_parser(
        "estimate",
        help="measure, before publishing, the per-pair signal q an audit of the vault sees",
        description=ESTIMATE_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("vault", type=Path, help="vault directory (from owner mark --labels)")
    parser.add_argument(
        "--public",
        type=Path,
        required=True,
        help="labelled images of your domain that are not yours (folder of PNG/JPEG, .npy, "
        ".npz or idx(.gz)); the practitioner learns them with your published twins",
    )
    parser.add_argument(
        "--labels", type=Path, help="labels of --public (CSV or JSON); idx and npz carry theirs"
    )
    parser.add_argument("--npz-key", help="array to read from an .npz --public")
    parser.add_argument(
        "--knowledge",
        nargs="+",
        default=["C1", "C3"],
        help="conditions to score (default C1 C3: probabilities or top label, with the label)",
    )
    parser.add_argument(
        "--copies",
        "--k",
        dest="k",
        metavar="K",
        type=int,
        help="copies per version, k (default: owner claim's, 1; --k is the short name)",
    )
    parser.add_argument(
        "--perturbation", help="perturbation family (default: owner claim's, dither)"
    )
    parser.add_argument("--statistic", choices=["entropy", "logit"], help="C1/C2 statistic")
    parser.add_argument(
        "--steps",
        type=int,
        default=STEPS,
        help=f"the proxy practitioner's optimiser steps (default {STEPS}, the demo's "
        "practitioner: 500 epochs of 2,000 images)",
    )
    parser.add_argument(
        "--share",
        type=float,
        default=SHARE,
        help=f"your twins' share of its training set (default {SHARE}, the paper's): the "
        "public images it learns are a random subset of --public of that size",
    )
    parser.add_argument(
        "--seed", type=int, default=0, help="seed of the whole estimate (default %(default)s)"
    )
    parser.add_argument(
        "--control-share",
        type=float,
        default=CONTROL_SHARE,
        help=f"share of pairs kept out of training as the control (default {CONTROL_SHARE})",
    )
    parser.add_argument("--test", default=TEST, help=f"the claim's test (default {TEST})")
    parser.add_argument(
        "--false-detection",
        "--p",
        dest="p",
        metavar="P",
        type=float,
        default=P,
        help=f"false-detection bound p (default {P}; --p is the short name)",
    )
    parser.add_argument("--out", type=Path, help="also write the estimate as JSON (a new file)")
    threads_arg(parser)
    parser.set_defaults(handler=_estimate)


def _estimate(args: argparse.Namespace) -> int:
    import numpy as np

    from twinaudit.owner.images.sources import open_source
    from twinaudit.owner.vault import Vault

    from .estimate import estimate

    use_threads(args.threads)
    if args.out is not None and args.out.exists():
        raise InputError(f"{args.out} exists; the estimate is written to a new file")
    if args.out is not None and not args.out.parent.is_dir():
        raise InputError(f"{args.out.parent} is not a folder")
    config = EstimateConfig(
        conditions=tuple(args.knowledge),
        k=args.k,
        perturbation=args.perturbation,
        statistic=None if args.statistic in (None, "entropy") else args.statistic,
        steps=args.steps,
        share=args.share,
        seed=args.seed,
        control_share=args.control_share,
        test=args.test,
        p=args.p,
    )
    vault = Vault.open(args.vault)
    source = open_source(args.public, labels=args.labels, npz_key=args.npz_key)
    if not source.has_labels:
        raise InputError(
            f"{args.public} has no labels: give --labels (the practitioner learns them)"
        )
    batches = list(source.batches(1024))
    if len({b.pixels.shape[1:] for b in batches}) > 1:
        raise InputError(f"the images of {args.public} are not all of one size and kind")
    images = np.concatenate([b.pixels for b in batches])
    labels = np.array([label for b in batches for label in b.labels], dtype=np.int64)
    result = estimate(vault, images, labels, config, say=lambda line: print(line, flush=True))
    print()
    print(render(result))
    if args.out is not None:
        write_atomically(args.out, (json.dumps(result.to_json(), indent=2) + "\n").encode())
        print(f"\nwrote {args.out}", file=sys.stderr)
    return EXIT_OK


def render(result: Estimate) -> str:
    """Return the estimate as the text ``owner estimate`` prints."""
    config = result.config
    lines = [
        f"proxy practitioner: {result.public_images} public images + {result.used_pairs} "
        f"published twins, {result.epochs} epochs; accuracy {result.train_accuracy:.3f} on "
        f"its training set, {result.owner_accuracy:.3f} on your twins it learnt, "
        f"{result.control_accuracy:.3f} on the {result.control_pairs} it did not",
        "",
        f"{'':3}{'score':<26}{'q̂ (95% interval)':<22}{'ties':>6}{'control q̂':>11}"
        f"{'P(detect)':>11}{'E[pairs]':>10}",
    ]
    for cond in result.conditions:
        score = {key: str(value) for key, value in cond.score.items()}
        name = f"{score['perturbation']} K={score['k']} {score.get('statistic', 'entropy')}"
        q, interval, control = cond.used.q_hat, cond.used.interval(), cond.control.q_hat
        measured = (
            f"{q:.3f} [{interval[0]:.2f}, {interval[1]:.2f}]"
            if q is not None and interval
            else "all tied"
        )
        power = cond.power or {}
        lines.append(
            f"{cond.knowledge:<3}{name:<26}{measured:<22}{cond.used.tie_share:>6.0%}"
            f"{_rate(control):>11}{_num(power.get('detection_probability'), '.2f'):>11}"
            f"{_num(power.get('expected_pairs'), '.0f'):>10}"
        )
    lines += [
        "",
        f"P(detect) and E[pairs]: a claim on all {result.pairs} pairs ({config.test}, p = "
        f"{config.p}) against a model that fits your items as this one does, at the measured "
        "q̂ over untied pairs (ties skipped); at the interval's low end:",
    ]
    for cond in result.conditions:
        low = cond.power_low
        if low is not None:
            lines.append(
                f"  {cond.knowledge}: q = {low['q']:.3f}: P(detect) "
                f"{low['detection_probability']:.2f}, E[pairs] {low['expected_pairs']:.0f}"
            )
    lines += [
        "The control q̂ scores pairs the practitioner never saw; it should sit near 0.5.",
        "This practitioner is trained until it fits its training set; one that trains less, "
        "on more data, or generalises more memorises each item less and shows a lower q "
        "(docs/results.md, regime ladder). If q̂ is near 0.5, mark with a proxy of your "
        "domain (owner proxy, owner mark --extractor proxy-cnn), raise epsilon, or mark "
        "more pairs.",
    ]
    return "\n".join(lines)


def _rate(value: float | None) -> str:
    return "—" if value is None else f"{value:.3f}"


def _num(value: float | None, spec: str) -> str:
    return "—" if value is None else format(value, spec)
