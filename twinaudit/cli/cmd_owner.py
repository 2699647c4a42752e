"""``twinaudit owner …``: the data owner's commands.

``owner mark`` turns images into twin pairs in a private vault (resumable);
``owner escrow`` commits the vault's root with the arbiter and stores the verified
receipt in the vault; ``owner publish`` writes the published versions (derived from
the receipt) in the input's format; ``owner inspect`` reports on a vault; ``owner
claim`` files a claim against a model and saves the verdict and its transcript (with
the score function of ``--score``: by default the one for the vault's item kind).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from twinaudit.protocol.atomic_file import write_atomically
from twinaudit.protocol.claim.functions import DEFAULT_FUNCTION, SCORE_FUNCTIONS
from twinaudit.protocol.claim.scores.classifier import FUNCTION as CLASSIFIER
from twinaudit.protocol.claim.scores.classifier import ScoreSpec
from twinaudit.protocol.claim.scores.perturbations import SINGLE_COPY
from twinaudit.protocol.errors import InputError, TwinauditError
from twinaudit.protocol.keys import load_public_key
from twinaudit.protocol.stats.mixture_prior import DEFAULT_PRIOR, PRIORS
from twinaudit.protocol.stats.registry import TESTS
from twinaudit.wire.transport import TlsFiles, make_channel, parse_address

from .cmd_estimate import register as register_estimate
from .cmd_openings import register_openings
from .failures import HintedError
from .results import (
    EXIT_NOT_DETECTED,
    authentication_line,
    bound_line,
    claims_authenticated,
    label_only_follow_up,
    pairs_left_line,
    print_json,
    verdict_figures,
)
from .threads import threads_arg, use_threads

if TYPE_CHECKING:
    import grpc

    from twinaudit.protocol.claim.verdict import Verdict

EXIT_OK = 0
EXIT_FAILED = 1

ESCROW_EXIT = (
    "exit status: 0 escrowed, the receipt checked and stored in the vault; 1 the "
    "arbiter refused or could not be reached, or its receipt or key did not check out "
    "(nothing is stored); 2 bad usage, or a vault already escrowed"
)
CLAIM_EXIT = (
    "exit status: 0 a signed verdict was received, checked and saved, DETECTED or "
    f"NOT-DETECTED (with --exit-code: 0 DETECTED, {EXIT_NOT_DETECTED} NOT-DETECTED; with "
    "--json: the decision and detected fields); 1 the claim failed (refused by the "
    "arbiter, an unreachable oracle, a verdict that does not check), nothing signed is "
    "saved; 2 bad usage, including an --out that already holds a verdict"
)


#: The image-classifier's record in the table of score functions (its owner defaults).
_CLASSIFIER = SCORE_FUNCTIONS[CLASSIFIER]


def _tls_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--ca", type=Path, help="CA certificate of the arbiter (enables TLS)")
    parser.add_argument("--cert", type=Path, help="client certificate for mTLS")
    parser.add_argument("--cert-key", type=Path, help="client private key for mTLS")


#: Environment variables that stand for repeated options (read when the option is absent).
ARBITER_ENV = "TWINAUDIT_ARBITER"
ARBITER_KEY_ENV = "TWINAUDIT_ARBITER_KEY"


def _arbiter_args(parser: argparse.ArgumentParser) -> None:
    """Add --arbiter and --arbiter-key, defaulting to their environment variables."""
    address, key = os.environ.get(ARBITER_ENV), os.environ.get(ARBITER_KEY_ENV)
    parser.add_argument(
        "--arbiter",
        default=address,
        required=address is None,
        metavar="HOST:PORT",
        help=f"HOST:PORT of the arbiter (default: ${ARBITER_ENV})",
    )
    parser.add_argument(
        "--arbiter-key",
        type=Path,
        default=Path(key) if key else None,
        required=key is None,
        metavar="KEY",
        help=f"arbiter public key (PEM) (default: ${ARBITER_KEY_ENV})",
    )


def _witness_policy_arg(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument(
        "--witness-policy",
        type=Path,
        metavar="FILE",
        help="the witnesses you trust and how many must have cosigned the arbiter's log "
        f"(C2SP tlog-policy lines: witness NAME VKEY, group NAME K MEMBERS..., quorum NAME); "
        f"{what} is refused, naming the witnesses missing or stale, unless the record is "
        "in a checkpoint they cosigned",
    )


def _witness_policy(args: argparse.Namespace, arbiter_key: Any) -> Any:
    """Return the WitnessPolicy of ``--witness-policy`` (None without one)."""
    if args.witness_policy is None:
        return None
    from twinaudit.protocol.witness_policy import read_policy

    policy_file = read_policy(args.witness_policy)
    policy_file.require_log(arbiter_key)
    return policy_file.policy


def _cosigners(evidence: Any) -> str:
    """Name the witnesses whose cosignatures counted, for a line of output."""
    names = [c.name for c in evidence.checkpoint.counted]
    return ", ".join(names) if names else "none (the policy asks for none)"


def _tls(args: argparse.Namespace) -> TlsFiles | None:
    return TlsFiles(args.cert, args.cert_key, args.ca) if args.ca else None


def _arbiter_channel(args: argparse.Namespace) -> grpc.Channel:
    """Open the channel to ``--arbiter``, refusing anything but HOST:PORT.

    gRPC would dial a bare host (``localhost``) on port 443; an arbiter listens on the
    port its ``verifier serve --listen`` names, which has no default, so the address
    must name it too.
    """
    parse_address(args.arbiter, what="--arbiter")
    return make_channel(args.arbiter, tls=_tls(args))


def _check_oracle(address: str) -> None:
    """Refuse an ``--oracle`` the arbiter cannot dial, before the vault is opened.

    The arbiter dials the address the claim names: ``HOST:PORT`` (``oracle serve``), an
    Open Inference Protocol URL or an arbiter-held model's ``held:sha256:<hex>``. A bare
    host (``localhost``) would reach the arbiter and be refused there, after the vault's
    checks and a round trip; here it is refused at once, with the form it needs.
    """
    from twinaudit.verifier.oracles.held import is_held_address, parse_held_address
    from twinaudit.verifier.oracles.oip_address import is_oip_address, parse_oip_address

    if is_held_address(address):
        parse_held_address(address)
    elif is_oip_address(address):
        parse_oip_address(address)
    else:
        parse_address(address, what="--oracle")


def register(commands: Any) -> None:
    """Add the ``owner`` command group."""
    group = commands.add_parser(
        "owner", help="the data owner: mark, escrow, publish, inspect, file claims"
    )
    sub = group.add_subparsers(dest="owner_command", metavar="COMMAND", required=True)
    _register_mark(sub)
    _register_proxy(sub)
    register_estimate(sub)
    _register_escrow(sub)
    _register_publish(sub)
    _register_inspect(sub)
    _register_claim(sub)
    register_openings(sub)
    _register_vault_migrate(sub)


def _register_mark(sub: Any) -> None:
    from twinaudit.owner.kinds import KINDS
    from twinaudit.owner.marking import MarkingConfig
    from twinaudit.owner.marking.config import (
        OWN_MAX_SIDE,
        OWN_OTHER_SIDE,
        OWN_PROXY_EPOCHS,
        OWN_PROXY_STEPS,
    )

    defaults = MarkingConfig()
    mark = sub.add_parser(
        "mark",
        help="mark images, texts or captioned images into twin pairs in a private vault",
        description="Make two versions of every input item, each within the utility bound "
        "of it and as far apart as possible, commit to them, and store everything in a "
        "private vault. Images (the default): within epsilon per pixel. Texts: synonym "
        "swaps (or paraphrases) within an embedding-similarity bound. Captioned images: "
        "marked image pairs with the same caption. Killed and run again with the same "
        "arguments, it resumes.",
    )
    mark.add_argument(
        "input",
        type=Path,
        help="images: folder of PNG/JPEG/WebP/TIFF/BMP/GIF/HEIC, .npy, .npz or idx(.gz); "
        "text: .jsonl, .csv or plain text (one per line); captioned-image: images as for "
        "image, with --captions",
    )
    mark.add_argument("--out", type=Path, required=True, help="vault directory (new or unfinished)")
    mark.add_argument(
        "--kind",
        choices=list(KINDS),
        help="what the input holds (default: text for a .jsonl, .csv or .txt file, else image)",
    )
    mark.add_argument("--labels", type=Path, help="labels file (CSV or JSON), kept for claims")
    mark.add_argument("--npz-key", help="array to read from an .npz input")
    mark.add_argument(
        "--marker",
        help="image: pgd (default) | gaussian | bernoulli; text: thesaurus (default) | "
        "seq2seq | chat",
    )
    mark.add_argument(
        "--epsilon",
        type=int,
        default=defaults.epsilon,
        help="max change per pixel, 1..255 (default %(default)s)",
    )
    mark.add_argument(
        "--extractor",
        help="pgd: proxy-own (default with --labels) | proxy-clusters (default without, "
        "from 20 images) | efficientnet-lite0 | resnet18 | proxy-cnn (--extractor-weights "
        "from owner proxy) | module.path:callable; docs/owner.md, Marking images",
    )
    mark.add_argument("--extractor-weights", help="weights file for the extractor")
    mark.add_argument(
        "--steps",
        type=int,
        help=f"PGD steps (default {defaults.steps}; 10 with a proxy extractor)",
    )
    mark.add_argument(
        "--step-size",
        type=float,
        help=f"PGD step, pixel units (default {defaults.step_size:g}; epsilon/4 with a proxy)",
    )
    mark.add_argument(
        "--batch-size",
        type=int,
        help=f"items per batch and vault chunk (image default {defaults.batch_size}, 64 with a "
        "proxy, fewer for photos that --memory leaves no room for; text 256)",
    )
    text = mark.add_argument_group("texts (--kind text)")
    text.add_argument("--field", help="JSON Lines field or CSV column holding the text (text)")
    text.add_argument(
        "--text-format", choices=["jsonl", "csv", "text"], help="default: from the suffix"
    )
    text.add_argument(
        "--min-similarity",
        type=float,
        default=0.85,
        help="utility bound: MiniLM cosine similarity of each version to the original "
        "(default %(default)s)",
    )
    text.add_argument(
        "--max-candidates",
        type=int,
        default=4,
        help="synonyms tried per word (default %(default)s)",
    )
    text.add_argument(
        "--thesaurus",
        type=Path,
        help="MyThes .dat file (default /usr/share/mythes/th_en_US_v2.dat, mythes-en-us)",
    )
    text.add_argument(
        "--drop-unmarkable",
        action="store_true",
        help="leave texts with no admissible version out of the vault (reported) instead "
        "of refusing the input",
    )
    text.add_argument(
        "--paraphrase-model",
        help="seq2seq: a local Hugging Face model directory; chat: the model id",
    )
    text.add_argument("--endpoint", help="chat: the OpenAI-compatible base URL (…/v1)")
    text.add_argument(
        "--api-key-env",
        default="OPENAI_API_KEY",
        help="chat: environment variable holding the API key, never stored (default %(default)s)",
    )
    captioned = mark.add_argument_group("captioned images (--kind captioned-image)")
    captioned.add_argument(
        "--captions",
        type=Path,
        help="captions: CSV with filename,caption (folders) or name,caption / one per "
        "line; or JSON (a list in order, or an object by name)",
    )
    mark.add_argument(
        "--input-size",
        type=int,
        help="side the extractor sees (images are resized to it; default "
        f"{defaults.input_size}, and for proxy-own and proxy-clusters the images' own "
        f"side when all are square and at most {OWN_MAX_SIDE}, else {OWN_OTHER_SIDE})",
    )
    mark.add_argument(
        "--work-scale",
        type=int,
        help="pgd: mark larger images at this many times the extractor's side, then carry "
        f"the mark to full size (default {defaults.work_scale}; 0: at full size)",
    )
    mark.add_argument(
        "--neutral-mark",
        action=argparse.BooleanOptionalAction,
        help="pgd at a working resolution: a mark that casts no colour (default)",
    )
    mark.add_argument(
        "--proxy-converge",
        action=argparse.BooleanOptionalAction,
        help="train the proxy only until it fits the images, at most "
        f"{OWN_PROXY_STEPS:,} steps or {OWN_PROXY_EPOCHS} epochs, whichever is more "
        "(default; --no-proxy-converge: every step)",
    )
    mark.add_argument(
        "--device",
        help="torch device, for the proxy's training too (default: cuda if available, else cpu)",
    )
    mark.add_argument(
        "--memory",
        help="images: the most memory marking may hold, e.g. 2G or 1500M (default 2G)",
    )
    mark.add_argument(
        "--seed",
        help="derive the vault secret from this text (reproducible runs, tests and demos "
        "only: the secret protects the salts and the hidden versions)",
    )
    mark.add_argument("-q", "--quiet", action="store_true", help="no progress lines")
    threads_arg(mark)
    mark.set_defaults(handler=_mark)


def _register_proxy(sub: Any) -> None:
    from twinaudit.owner.marking.config import PROXY_EPOCHS as EPOCHS

    proxy = sub.add_parser(
        "proxy",
        help="train a proxy classifier on labelled images of your domain, to mark with",
        description="Train a small CNN (the proxy practitioner) on labelled images like "
        "yours: public images of your domain, your own, or both. Marks made in its features "
        "(owner mark --extractor proxy-cnn --extractor-weights FILE) are far apart for the "
        "classifiers that learn from such images, where an ImageNet extractor's are not "
        "(docs/results.md, Regime ladder). Images of other sizes are resized to --side.",
    )
    proxy.add_argument(
        "input", type=Path, help="folder of PNG/JPEG/WebP/TIFF/BMP/GIF/HEIC, .npy, .npz or idx(.gz)"
    )
    proxy.add_argument(
        "--labels", type=Path, help="labels file (CSV or JSON); idx and npz inputs carry theirs"
    )
    proxy.add_argument("--npz-key", help="array to read from an .npz input")
    proxy.add_argument("--out", type=Path, required=True, help="the proxy's file (written new)")
    proxy.add_argument(
        "--side",
        type=int,
        help="side of the proxy's square input, a multiple of 4 (default: the images' side "
        "when they are square, a multiple of 4 and all of one size)",
    )
    proxy.add_argument(
        "--epochs", type=int, default=EPOCHS, help=f"training epochs (default {EPOCHS})"
    )
    proxy.add_argument("--seed", type=int, default=0, help="training seed (default 0)")
    proxy.add_argument(
        "--memory",
        help="the most memory reading the images may hold, e.g. 2G or 1500M (default 2G): "
        "they are read in batches of that size and kept at --side only",
    )
    threads_arg(proxy)
    proxy.set_defaults(handler=_proxy)


def _proxy(args: argparse.Namespace) -> int:
    use_threads(args.threads)
    import numpy as np

    from twinaudit.owner.images.sources import open_source
    from twinaudit.owner.mark import source_shapes
    from twinaudit.owner.marking.memory import DEFAULT_MEMORY, parse_memory, proxy_read_batches
    from twinaudit.owner.marking.proxy import square_images, train_proxy, write_proxy

    if args.epochs < 1:
        raise InputError("--epochs must be at least 1")
    if args.out.exists():
        raise InputError(f"{args.out} exists; the proxy is written to a new file")
    if not args.out.parent.is_dir():
        raise InputError(f"{args.out.parent} is not a folder")
    memory = DEFAULT_MEMORY if args.memory is None else parse_memory(args.memory)
    source = open_source(args.input, labels=args.labels, npz_key=args.npz_key)
    if not source.has_labels:
        raise InputError(f"{args.input} has no labels: give --labels (a proxy learns them)")
    shapes = source_shapes(source)
    colour = any(channels == 3 for _, _, channels in shapes)
    if colour and any(channels == 1 for _, _, channels in shapes):
        # A colour proxy sees grey images repeated to three channels, as marking does.
        print("the images mix grey and colour: the proxy sees the grey ones as colour")
    side = args.side
    if side is None:
        (height, width, _), *rest = shapes
        if any(shape[:2] != (height, width) for shape in rest) or height != width or height % 4:
            raise InputError(
                "the images are not all square of one side divisible by 4: give --side"
            )
        side = height
    if side < 8 or side % 4 or side > 512:
        raise InputError(f"--side must be a multiple of 4 in 8..512, not {side}")
    # Read in batches that fit the memory setting, each kept at the proxy's side only.
    fits = proxy_read_batches(memory, shapes, len(source), side)
    squares, labels_read = [], []
    for batch in source.batches(1024, fits=fits):
        pixels = batch.pixels
        if colour and pixels.shape[3] == 1:
            pixels = np.repeat(pixels, 3, axis=3)
        squares.append(square_images(pixels, side))
        labels_read.extend(batch.labels)
        del batch, pixels
    images = np.concatenate(squares)
    labels = np.array(labels_read, dtype=np.int64)
    print(f"training a proxy on {len(images)} images at {side}x{side}, {args.epochs} epochs")

    def progress(epoch: int, loss: float, accuracy: float) -> None:
        if not args.quiet and (epoch == args.epochs or epoch % 10 == 0):
            print(f"  epoch {epoch}: loss {loss:.3f}, accuracy {accuracy:.3f}", flush=True)

    model = train_proxy(images, labels, epochs=args.epochs, seed=args.seed, progress=progress)
    write_proxy(model, args.out)
    print(
        f"wrote {args.out}; next: mark in its features (twinaudit owner mark IMAGES "
        f"--extractor proxy-cnn --extractor-weights {args.out} --out VAULT), or serve it "
        f"as a stand-in model (python docs/examples/stand_in_model.py {args.out} --out "
        "MODEL.pt)"
    )
    return EXIT_OK


def _register_escrow(sub: Any) -> None:
    escrow = sub.add_parser(
        "escrow",
        help="escrow a vault's root with the arbiter; store the verified receipt",
        epilog=ESCROW_EXIT,
    )
    escrow.add_argument("vault", type=Path, help="vault directory")
    _arbiter_args(escrow)
    escrow.add_argument("--owner", default="", help="owner label recorded in the public log")
    escrow.add_argument(
        "--receipt", type=Path, help="also write a copy of the receipt here (it is public)"
    )
    _witness_policy_arg(escrow, "the receipt")
    escrow.add_argument(
        "--json",
        action="store_true",
        help="print one JSON object on stdout (the record, its time, the log) instead of "
        "the text line",
    )
    _tls_args(escrow)
    escrow.set_defaults(handler=_escrow)


def _register_publish(sub: Any) -> None:
    publish = sub.add_parser(
        "publish", help="write the published version of every pair (needs a receipt)"
    )
    publish.add_argument("vault", type=Path, help="vault directory")
    publish.add_argument("--out", type=Path, required=True, help="new publication directory")
    publish.add_argument(
        "--input",
        type=Path,
        help="text vaults marked from JSON Lines: the file they were marked from (checked "
        "against the hash the vault recorded); the publication then keeps each record's "
        "other fields, under the file's own name, with the published text in its field",
    )
    publish.add_argument("-q", "--quiet", action="store_true", help="no progress lines")
    publish.set_defaults(handler=_publish)


def _register_inspect(sub: Any) -> None:
    from twinaudit.owner.marking import MarkingConfig
    from twinaudit.owner.marking.config import IMAGENET_EXTRACTOR

    defaults = MarkingConfig()
    inspect = sub.add_parser("inspect", help="report on a vault (checks, distances, sheet)")
    inspect.add_argument("vault", type=Path, help="vault directory")
    inspect.add_argument(
        "--input", type=Path, help="the original images (enables the epsilon check)"
    )
    inspect.add_argument("--labels", type=Path, help="labels file given to mark, if any")
    inspect.add_argument("--npz-key", help="array of an .npz input")
    inspect.add_argument("--captions", type=Path, help="captions file given to mark, if any")
    inspect.add_argument(
        "--distance-pairs",
        type=int,
        default=512,
        help="the first pairs (whatever their sizes) embedded for the feature distance, or "
        "for a text vault the pairs measured (similarity, word distance); default %(default)s, "
        "0: skip, -1 (text): all",
    )
    inspect.add_argument(
        "--extractor",
        help="extractor for the feature distance (default: the one the marks were made in; "
        "for marks made with proxy-own or proxy-clusters, which the vault does not keep, "
        f"{IMAGENET_EXTRACTOR} at {defaults.input_size} px)",
    )
    inspect.add_argument("--sheet", type=Path, help="write a contact sheet PNG here (private)")
    inspect.add_argument(
        "--sheet-pairs",
        type=int,
        default=8,
        help="the first pairs shown on the contact sheet, whatever their sizes (default 8; "
        "images of several sizes are fitted to one cell for display)",
    )
    inspect.add_argument("--json", action="store_true", help="print the report as JSON")
    inspect.set_defaults(handler=_inspect)


def _register_vault_migrate(sub: Any) -> None:
    migrate = sub.add_parser(
        "vault-migrate",
        help="rewrite a vault in format 2 (self-contained) or 5 (photos kept as their JPEG or "
        "HEIC files), "
        "atomically; the root, every opening and the receipt stay the same",
        description="Rewrite a vault in vault format 2 (compact and self-contained) or 5 "
        "(each photo read from a JPEG or HEIC file kept as that file plus a correction where "
        "that is smaller, and the colour profile each photo was read with; reading it decodes "
        "the file with Pillow or pi-heif, and a decoder that gives other pixels is refused, "
        "naming the item). With --sources (the folder of photos the vault was marked from) "
        "the vault becomes format 5; without it, format 2: the way to move a vault to a "
        "machine with another Pillow, or to upgrade a format-1 vault. Format 5 stores a mark "
        "as the small field it was carried back from only when `owner mark` wrote it: a "
        "vault rewritten in format 5 keeps its marks as format 4 does. Formats 3 and 4 are "
        "for older twinaudit versions (3: no colour profiles or HEIC files). A vault that "
        "keeps colour profiles is not "
        "rewritten in a format that cannot record them. The root, every commitment, opening "
        "and inclusion proof, the secret and the receipt stay the same. The new vault is "
        "written and checked beside the old one, then the two directories are swapped in one "
        "atomic step: interrupted, the command leaves the old vault or the new one, whole, "
        "and the next run clears what it left beside it. A vault already in the target "
        "format is left as it is.",
    )
    migrate.add_argument("vault", type=Path, help="vault directory")
    migrate.add_argument(
        "--to",
        type=int,
        choices=(2, 3, 4, 5),
        default=None,
        help="the format to write (default: 5 with --sources, else 2)",
    )
    migrate.add_argument(
        "--sources",
        type=Path,
        default=None,
        help="the folder of photos the vault was marked from (formats 3 to 5 keep their JPEGs, "
        "formats 4 and 5 their HEIC files too; "
        "any file there is safe: a correction makes the pixels exact)",
    )
    migrate.set_defaults(handler=_vault_migrate)


def _register_claim(sub: Any) -> None:
    claim = sub.add_parser(
        "claim",
        help="file a claim against a model; save verdict and transcript",
        epilog=CLAIM_EXIT,
    )
    claim.add_argument("vault", type=Path, help="vault directory (escrowed)")
    _arbiter_args(claim)
    claim.add_argument(
        "--oracle",
        required=True,
        help="the model's oracle: HOST:PORT (oracle serve), or a model on an Open Inference "
        "Protocol server, oip+http://HOST:PORT/v2/models/NAME or oip+grpc://HOST:PORT/NAME "
        "(docs/practitioner.md)",
    )
    claim.add_argument(
        "--model-name",
        default="model",
        help="the audited model's name, recorded in the claim and the verdict (default model)",
    )
    claim.add_argument(
        "--test",
        default="mixture-graded",
        choices=list(TESTS),
        help="mixture-graded (default: bets sized by each pair's score gap) | mixture-e "
        "(whole bets) | pprm-chernoff (the paper's); docs/owner.md, Which test",
    )
    claim.add_argument(
        "--false-detection",
        "--p",
        dest="p",
        metavar="P",
        type=float,
        default=0.05,
        help="false-detection bound p (default %(default)s)",
    )
    claim.add_argument("--alpha", type=float, default=0.0, help="PPRM level (default p/2)")
    claim.add_argument(
        "--prior",
        choices=sorted(PRIORS),
        help=f"the mixture tests' prior (default: the arbiter's, {DEFAULT_PRIOR.name})",
    )
    claim.add_argument(
        "--score",
        choices=list(SCORE_FUNCTIONS),
        help=_score_help(),
    )
    claim.add_argument(
        "--copies",
        "--k",
        dest="k",
        metavar="K",
        type=int,
        help=f"{_takers('k')}: perturbed copies per version (default {_defaults('k')}; "
        f"{_CLASSIFIER.parameter('k').chosen_default} for the image-classifier with a "
        f"--perturbation other than {' or '.join(SINGLE_COPY)})",
    )
    claim.add_argument(
        "--perturbation",
        help=f"{_takers('perturbation')}: how copies are made, one of "
        f"{' | '.join(_choices('perturbation'))} (default {_defaults('perturbation')}; "
        "pad-shift-flip-dither for C4); docs/owner.md, Perturbations and copies",
    )
    claim.add_argument(
        "--allow-published-queries",
        action="store_true",
        help="accept --perturbation none, which sends the published files themselves "
        "(a host that compares queries with its files can evade)",
    )
    claim.add_argument(
        "--statistic",
        choices=list(_choices("statistic")),
        help="C1, C2: entropy of the averaged answers (default, the paper's) or logit",
    )
    claim.add_argument(
        "--margin",
        type=float,
        metavar="M",
        help="C1, C2: pairs whose scores differ by at most M tie (default "
        f"{_CLASSIFIER.parameter('margin').chosen_default} with the entropy statistic, "
        "else 0); docs/owner.md, The tie margin",
    )
    claim.add_argument(
        "--knowledge",
        help="image-classifier: C1 | C2 | C3 | C4, or labelled (C3) | unlabelled (C4); "
        "default labelled when every item has a label; docs/owner.md, Knowledge conditions",
    )
    claim.add_argument(
        "--tie-rule",
        default="skip",
        choices=["skip", "coin"],
        help="skip tied pairs (default, fewer pairs) or break ties by coin (the paper's)",
    )
    claim.add_argument(
        "--max-pairs",
        type=int,
        default=0,
        help="open at most this many pairs (default 0: every pair of the vault)",
    )
    claim.add_argument(
        "--query-budget",
        type=int,
        default=0,
        help="stop before the oracle queries would exceed this (default 0: no budget)",
    )
    claim.add_argument(
        "--window",
        type=int,
        default=0,
        help="pairs of the first request (default 8), doubling up to --window-max",
    )
    claim.add_argument(
        "--window-max",
        type=int,
        default=0,
        help="largest request (default 2 x --window, at most 256); docs/owner.md, "
        "Requests of pairs",
    )
    claim.add_argument(
        "--fresh-pairs",
        action="store_true",
        help="open only pairs no earlier claim on this record opened, for a second audit "
        "(docs/unlearning.md)",
    )
    claim.add_argument(
        "--resume",
        metavar="CLAIM_ID",
        default="",
        help="run claim CLAIM_ID again from where it stopped, with its options and pairs, "
        "counted once (a broken connection; a failure that says so)",
    )
    claim.add_argument(
        "--out",
        type=Path,
        help="directory for verdict and transcript (not with --dry-run); one that holds "
        "either is refused",
    )
    claim.add_argument(
        "--dry-run",
        action="store_true",
        help="have the arbiter check the record, request, parameters and oracle; nothing is filed",
    )
    claim.add_argument(
        "--json",
        action="store_true",
        help="print one JSON object on stdout (decision, detected, figures, files) instead "
        "of the text line; progress stays on stderr",
    )
    claim.add_argument(
        "--exit-code",
        action="store_true",
        help=f"exit {EXIT_NOT_DETECTED} for a verdict of NOT-DETECTED (0 stays DETECTED)",
    )
    _witness_policy_arg(
        claim, "the claim (checked before it is filed) and the verdict (then nothing is saved)"
    )
    _tls_args(claim)
    claim.set_defaults(handler=_claim)


def _score_help() -> str:
    """Return ``--score``'s help: each function of the table and the defaults by item kind."""
    functions = "; ".join(f"{f.name} audits {f.summary}" for f in SCORE_FUNCTIONS.values())
    defaults = ", ".join(
        f"{name} for a{'n' if kind[0] in 'aeiou' else ''} {kind} vault"
        for kind, name in DEFAULT_FUNCTION.items()
    )
    return f"the score function: {functions} (default: {defaults})"


def _takers(parameter: str) -> str:
    """Return the score functions that take ``parameter``, comma-separated."""
    return ", ".join(f.name for f in SCORE_FUNCTIONS.values() if parameter in f.parameter_names)


def _defaults(parameter: str) -> str:
    """Return ``parameter``'s default for each function that takes it (the table's)."""
    defaults = [
        f"{p.default} for {f.name}"
        for f in SCORE_FUNCTIONS.values()
        for p in f.parameters
        if p.name == parameter
    ]
    return ", ".join(defaults)


def _choices(parameter: str) -> tuple[str, ...]:
    """Return every choice of ``parameter`` across the functions that take it, in order."""
    choices: dict[str, None] = {}
    for function in SCORE_FUNCTIONS.values():
        for p in function.parameters:
            if p.name == parameter:
                choices.update(dict.fromkeys(p.choices))
    return tuple(choices)


def _mark(args: argparse.Namespace) -> int:
    from twinaudit.owner.kinds import (
        ImageOptions,
        MarkOptions,
        TextOptions,
        item_kind,
        kind_of_input,
    )
    from twinaudit.owner.marking.memory import parse_memory

    use_threads(args.threads)
    kind = item_kind(args.kind or kind_of_input(args.input))
    kind.check_mark_options(vars(args))
    options = MarkOptions(
        input=args.input,
        out=args.out,
        marker=args.marker,
        batch_size=args.batch_size,
        captions=args.captions,
        device=args.device,
        secret=_seeded_secret(args),
        show_progress=not args.quiet,
        image=ImageOptions(
            labels=args.labels,
            npz_key=args.npz_key,
            epsilon=args.epsilon,
            extractor=args.extractor,
            extractor_weights=args.extractor_weights,
            steps=args.steps,
            step_size=args.step_size,
            input_size=args.input_size,
            work_scale=args.work_scale,
            neutral_mark=args.neutral_mark,
            proxy_converge=args.proxy_converge,
            memory=None if args.memory is None else parse_memory(args.memory),
        ),
        text=TextOptions(
            field=args.field,
            text_format=args.text_format,
            min_similarity=args.min_similarity,
            max_candidates=args.max_candidates,
            thesaurus=args.thesaurus,
            drop_unmarkable=args.drop_unmarkable,
            paraphrase_model=args.paraphrase_model,
            endpoint=args.endpoint,
            api_key_env=args.api_key_env,
        ),
    )
    for line in kind.mark(options):
        print(line)
    return EXIT_OK


def _seeded_secret(args: argparse.Namespace) -> bytes | None:
    from twinaudit.owner.mark import secret_from_seed

    if args.seed is None:
        return None
    print(
        "twinaudit: warning: --seed makes the vault secret reproducible; "
        "use it for tests and demos only",
        file=sys.stderr,
    )
    return secret_from_seed(args.seed)


def _escrow(args: argparse.Namespace) -> int:
    from twinaudit.owner.escrow_client import escrow_root
    from twinaudit.owner.vault import Vault

    vault = Vault.open(args.vault)
    if vault.receipt is not None:
        raise InputError(f"{vault.path} is already escrowed (record {vault.receipt.entry.index})")
    arbiter_key = load_public_key(args.arbiter_key)
    if args.receipt is not None and args.receipt.exists():
        raise InputError(f"{args.receipt} exists; refusing to overwrite a receipt")
    policy = _witness_policy(args, arbiter_key)
    channel = _arbiter_channel(args)
    escrowed = escrow_root(
        channel,
        root=vault.root,
        n_pairs=vault.n_pairs,
        item_kind=vault.item_kind,
        owner=args.owner,
        claim_key=vault.claim_public_key(),
        arbiter_public_key=arbiter_key,
        witness_policy=policy,
    )
    receipt = vault.store_receipt(
        escrowed.envelope, arbiter_key, escrowed.inclusion_proof, expected_owner=args.owner
    )
    if args.receipt is not None:
        write_atomically(args.receipt, escrowed.envelope)
    witnessed = None if escrowed.log_evidence is None else list(escrowed.witnessed_by)
    if args.json:
        print_json(
            {
                "escrowed": True,
                "record": receipt.entry.index,
                "time": receipt.entry.time,
                "n_pairs": vault.n_pairs,
                "item_kind": vault.item_kind,
                "root": vault.root,
                "log_size": receipt.log_size,
                "log_root": receipt.log_root,
                "vault": str(vault.path),
                "receipt": None if args.receipt is None else str(args.receipt),
                "witnessed_by": witnessed,
            }
        )
        return EXIT_OK
    print(
        f"escrowed {vault.n_pairs} pairs as record {receipt.entry.index} at "
        f"{receipt.entry.time}; receipt stored in {vault.path}; next: twinaudit owner publish"
    )
    if escrowed.log_evidence is not None:
        print(f"the record is in a checkpoint cosigned by {', '.join(witnessed or ['none'])}")
    return EXIT_OK


def _publish(args: argparse.Namespace) -> int:
    from twinaudit.owner.kinds import item_kind
    from twinaudit.owner.vault import Vault

    vault = Vault.open(args.vault)
    kind = item_kind(vault.item_kind)
    print(kind.publish(vault, args.out, original=args.input, show=not args.quiet))
    return EXIT_OK


def _vault_migrate(args: argparse.Namespace) -> int:
    from twinaudit.owner.vault.migration import migrate_vault, originals_in

    originals = None if args.sources is None else originals_in(args.sources)
    print(migrate_vault(args.vault, to_version=args.to, originals=originals).describe())
    return EXIT_OK


def _inspect(args: argparse.Namespace) -> int:
    import json

    from twinaudit.owner.kinds import InspectOptions, item_kind
    from twinaudit.owner.vault import Vault

    vault = Vault.open(args.vault)
    inspection = item_kind(vault.item_kind).inspect(
        vault,
        InspectOptions(
            input=args.input,
            labels=args.labels,
            npz_key=args.npz_key,
            captions=args.captions,
            distance_pairs=args.distance_pairs,
            extractor=args.extractor,
            sheet=args.sheet,
            sheet_pairs=args.sheet_pairs,
        ),
    )
    report = inspection.report
    if args.json:
        print(json.dumps(report.to_value(), indent=2, sort_keys=True, default=_json_default))
    else:
        print(report.to_text())
    return EXIT_OK if inspection.holds else EXIT_FAILED


def _json_default(value: object) -> object:
    if isinstance(value, bytes):
        return value.hex()
    raise TypeError(f"cannot write {type(value).__name__} as JSON")


def _claim(args: argparse.Namespace) -> int:
    import grpc

    from twinaudit.owner.claims import check_prior, claim_params, file_claim
    from twinaudit.owner.vault import Vault

    if args.out is None and not args.dry_run:
        raise InputError("owner claim needs --out (the folder for verdict and transcript)")
    check_prior(args.test, args.prior)  # before the vault and --out are touched
    _check_oracle(args.oracle)
    if args.out is not None:
        _refuse_used_out(args.out)
    vault = Vault.open(args.vault)
    arbiter_key = load_public_key(args.arbiter_key)
    policy = _witness_policy(args, arbiter_key)
    request, score = claim_params(
        vault,
        arbiter_key,
        args.oracle,
        score_function=args.score,
        k=args.k,
        perturbation=args.perturbation,
        knowledge=args.knowledge,
        statistic=None if args.statistic in (None, "entropy") else args.statistic,
        margin=args.margin,
        model_name=args.model_name,
        test=args.test,
        p=args.p,
        alpha=args.alpha or None,
        prior=args.prior,
        tie_rule=args.tie_rule,
        max_pairs=args.max_pairs,
        query_budget=args.query_budget,
        window=args.window,
        window_max=args.window_max,
        fresh_pairs=args.fresh_pairs,
    )
    if score.function == CLASSIFIER and score.perturbation == "none":
        if not args.allow_published_queries:
            raise InputError(
                "--perturbation none queries each published version with the published "
                "file itself, so the model's host can tell which twin is published; use "
                "--perturbation dither (the default), or add --allow-published-queries"
            )
        print(
            "note: with --perturbation none the query of each published version is the "
            "published file itself, so the model's host can tell which twin is published "
            "and answer to evade; --perturbation dither queries as close to the image "
            "without that leak",
            file=sys.stderr,
        )
    channel = _arbiter_channel(args)

    def show(progress: Any) -> None:
        if args.quiet:
            return
        interval = (
            f" interval [{progress.interval_low}, {progress.interval_high}]"
            if progress.has_interval
            else f" log e-value {progress.log_statistic:.2f}"
        )
        print(
            f"  pairs {progress.pairs_opened:6d}  successes {progress.successes}/"
            f"{progress.draws}{interval}  {progress.decision}",
            file=sys.stderr,
            flush=True,
        )

    if args.dry_run:
        if args.resume:
            raise InputError("--dry-run checks a new claim; it cannot --resume one")
        # On a record that binds the vault's claim key, the vault signs the claim (§10.7).
        claim_key = vault.claim_key() if vault.record_binds_claim_key else None
        return _dry_run(args, vault, request, channel, claim_key=claim_key, arbiter_key=arbiter_key)
    if policy is not None:  # the record in a witnessed log before a claim is spent on it
        _witnessed(
            channel,
            vault,
            arbiter_key,
            policy,
            not_before=None,
            refused="the record is not in a log your witness policy's witnesses cosigned; no claim "
            "was filed",
        )
    filed: list[str] = []
    try:
        claim = file_claim(
            channel,
            vault,
            request,
            arbiter_key,
            resume_claim_id=args.resume,
            on_progress=show,
            on_accepted=filed.append,
        )
    except grpc.RpcError as exc:
        words, fields = _attempt_words(exc, filed, request.record_index)
        raise HintedError(exc, words, fields) from exc
    verdict = claim.verdict
    evidence = None
    if policy is not None:
        evidence = _witnessed(
            channel,
            vault,
            arbiter_key,
            policy,
            not_before=verdict.time,
            refused=f"claim {claim.claim_id} has a signed verdict, but its record is not in "
            "a log your witness policy's witnesses cosigned since; nothing is saved",
        )
    args.out.mkdir(parents=True, exist_ok=True)
    _write_new(args.out / "verdict.json", claim.signed)
    _write_new(args.out / "transcript.bin", claim.transcript)
    if evidence is not None:
        _write_new(args.out / "log-evidence.json", evidence[0].encode())
    status = EXIT_NOT_DETECTED if args.exit_code and not verdict.detected else EXIT_OK
    if args.json:
        print_json(
            {
                **verdict_figures(verdict),
                "knowledge_asked": score.knowledge,
                "verdict_file": str(args.out / "verdict.json"),
                "transcript_file": str(args.out / "transcript.bin"),
                **(
                    {
                        "log_evidence_file": str(args.out / "log-evidence.json"),
                        "witnessed_by": [c.name for c in evidence[1].checkpoint.counted],
                    }
                    if evidence is not None
                    else {}
                ),
            }
        )
        return status
    print(
        f"{verdict.decision.upper()} (stop: {verdict.stop}), {bound_line(verdict)}: "
        f"claim {claim.claim_id}, {len(verdict.opened)} pairs opened, "
        f"{verdict.queries} queries{_knowledge_note(verdict, score.knowledge)}; verdict and "
        f"transcript in {args.out}"
    )
    if evidence is not None:
        print(
            f"the record is in a checkpoint cosigned by {_cosigners(evidence[1])}; "
            f"log evidence in {args.out / 'log-evidence.json'}"
        )
    if not claims_authenticated(verdict):
        print(f"note: {authentication_line(verdict)}")
    print(pairs_left_line(verdict))
    from .report_html import identical_answers_note, pairs_from_transcript

    note = identical_answers_note(verdict, pairs_from_transcript(verdict, claim.transcript))
    if note is not None:
        print(f"note: {note}")
    follow_up = label_only_follow_up(verdict)
    if follow_up is not None:
        print(f"note: {follow_up}")
    return status


def _witnessed(
    channel: Any,
    vault: Any,
    arbiter_key: Any,
    policy: Any,
    *,
    not_before: str | None,
    refused: str,
) -> Any:
    """Fetch and check the record's log evidence under the policy (spec §9.7.3).

    ``not_before`` is the protocol time the cosignatures must not predate (less the
    skew; None: the record's own time); ``refused`` is the hint after the error when
    the evidence fails.
    """
    from twinaudit.owner.witnessed import epoch_seconds, fetch_log_evidence

    entry = vault.receipt.entry
    try:
        return fetch_log_evidence(
            channel,
            arbiter_public_key=arbiter_key,
            entry=entry,
            policy=policy,
            not_before=epoch_seconds(not_before or entry.time),
        )
    except TwinauditError as exc:
        raise HintedError(exc, refused) from exc


def _attempt_words(error: Any, filed: list[str], record: int) -> tuple[str, dict[str, Any]]:
    """Say whether a claim that failed was filed, and so counts on the record (spec §10.7).

    The arbiter says so in the error's details; a failure on this side of the connection
    (a message too large to send, a deadline) counts if the arbiter had accepted the claim.
    Returns the words, and the fields of ``--json`` (``record``, ``counted``, ``claim_id``,
    ``restart``).
    """
    from twinaudit.wire.transport import error_details

    details = error_details(error)
    counted = details.counted if details is not None and details.counted is not None else None
    claim_id = (details.claim_id if details is not None else "") or (filed[0] if filed else "")
    if counted is None:
        counted = bool(filed)
    restart = bool(counted and details is not None and details.restart)
    fields = {
        "record": record,
        "counted": counted,
        "claim_id": claim_id or None,
        "restart": restart,
    }
    if not counted:
        return (
            (
                f"this attempt was not filed: it does not count on record {record}; "
                "--dry-run checks a claim without filing it"
            ),
            fields,
        )
    if restart:
        return (
            (
                f"claim {claim_id} was filed on record {record} and counted once; it failed "
                "before any pair's outcome was computed, so it can run again at no further "
                f"cost: the same command with --resume {claim_id} runs it again as the same "
                "claim (same pairs, same order, counted once), as long as no other claim is "
                f"filed on record {record} first; a new claim instead counts one more"
            ),
            fields,
        )
    return (
        (
            f"claim {claim_id} was filed on record {record} before it failed: it counts "
            "among the record's claims, so every later verdict on the record has a bound one "
            "p higher; --dry-run checks a claim without filing it"
        ),
        fields,
    )


def _dry_run(
    args: argparse.Namespace,
    vault: Any,
    request: Any,
    channel: Any,
    *,
    claim_key: Any,
    arbiter_key: Any,
) -> int:
    """Check a claim without filing it (spec §10.7); exit 0 if every check holds, else 1."""
    import json

    from twinaudit.owner.claim_client import dry_run_claim
    from twinaudit.protocol.encoding import decode
    from twinaudit.protocol.keys import key_id
    from twinaudit.wire.openings import MAX_REQUEST_OPENING_BYTES

    shapes = vault.item_shapes()
    report = dry_run_claim(
        channel,
        request,
        claim_key=claim_key,
        arbiter=key_id(arbiter_key),
        probes=tuple(list(shapes)[:8]),
    )
    largest = vault.largest_opening_bytes()
    request_bytes = largest * request.window_max
    problems = [
        f"the oracle failed on a {h}x{w}x{c} image: {error}"
        for (h, w, c), error in report.probes
        if error
    ]
    if request_bytes > MAX_REQUEST_OPENING_BYTES:
        fits = max(1, MAX_REQUEST_OPENING_BYTES // max(1, largest))
        problems.append(
            f"a request of {request.window_max} pairs of the largest items is "
            f"{request_bytes / 2**20:.1f} MiB, above the verifier's "
            f"{MAX_REQUEST_OPENING_BYTES // 2**20} MiB a request: ask for "
            f"--window {min(fits, request.window)} --window-max {fits}"
        )
    oracle = decode(report.oracle)
    score = decode(report.score)
    p = request.p
    figures = {
        "would_be_bound": min(1.0, (report.earlier_claims + 1) * p),
        "earlier_claims": report.earlier_claims,
        "claims_authenticated": claim_key is not None,
        "record": request.record_index,
        "n_pairs": report.n_pairs,
        "oracle": oracle,
        "score": score,
        "probes": [
            {"shape": list(shape), "ok": not error, "error": error}
            for shape, error in report.probes
        ],
        "largest_opening_bytes": largest,
        "largest_request_bytes": request_bytes,
        "problems": problems,
        "filed": False,
    }
    if args.json:
        print_json(figures)
        return EXIT_FAILED if problems else EXIT_OK
    print(
        f"DRY RUN of a claim on record {request.record_index} ({report.n_pairs} pairs): nothing "
        f"was filed, nothing counts. Filed now, its verdict's bound would be "
        f"({report.earlier_claims} + 1)·{p:g} = {figures['would_be_bound']:g}."
    )
    print(f"  score as the claim would record it: {json.dumps(score, default=_json_default)}")
    print(f"  oracle: {json.dumps(oracle, default=_json_default)}")
    for (h, w, c), error in report.probes:
        print(f"  probe {h}x{w}x{c}: {'answered' if not error else 'FAILED: ' + error}")
    print(
        f"  openings: the largest pair is {largest / 2**20:.2f} MiB; a request of up to "
        f"{request.window_max} pairs is {request_bytes / 2**20:.2f} MiB "
        f"(cap {MAX_REQUEST_OPENING_BYTES // 2**20} MiB, sent in messages under the cap)"
    )
    if claim_key is None:
        print(
            "  note: the record binds no claim key (escrowed before claim keys): the claim "
            "would not be signed, and anyone could file claims on the record"
        )
    for problem in problems:
        print(f"  problem: {problem}")
    print("every check holds" if not problems else f"{len(problems)} check(s) failed")
    return EXIT_FAILED if problems else EXIT_OK


#: The files a claim writes into its --out folder.
CLAIM_FILES = ("verdict.json", "transcript.bin")


def _refuse_used_out(out: Path) -> None:
    """Refuse an --out that is not a folder, or that holds a claim's files already."""
    if out.exists() and not out.is_dir():
        raise InputError(f"--out {out} exists and is not a folder")
    held = [name for name in CLAIM_FILES if (out / name).exists()]
    if held:
        raise InputError(
            f"{out} already holds {' and '.join(held)}: refusing to overwrite a signed "
            "verdict; give another --out"
        )


def _write_new(path: Path, data: bytes) -> None:
    """Write a file that must not exist yet (another claim may have raced into --out)."""
    try:
        with path.open("xb") as stream:
            stream.write(data)
    except FileExistsError:
        raise InputError(f"{path} appeared during the claim: refusing to overwrite it") from None


def _knowledge_note(verdict: Verdict, asked: str) -> str:
    """Return ", knowledge C3 (asked: labelled)": the condition the verdict records, if any."""
    score = verdict.claim.score
    if not isinstance(score, ScoreSpec):
        return ""
    used = score.knowledge
    return f", knowledge {used}" + (f" (asked: {asked})" if asked != used else "")
