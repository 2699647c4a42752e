"""``twinaudit owner …``: the data owner's commands.

``owner mark`` turns images into twin pairs in a private vault (resumable);
``owner escrow`` commits the vault's root with the arbiter and stores the verified
receipt in the vault; ``owner publish`` writes the published versions (derived from
the receipt) in the input's format; ``owner inspect`` reports on a vault; ``owner
claim`` files a claim against a model and saves the verdict and its transcript.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from protocol.errors import InputError
from protocol.keys import load_public_key

from .transport import TlsFiles, make_channel

EXIT_OK = 0
EXIT_FAILED = 1


def _tls_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--ca", type=Path, help="CA certificate of the arbiter (enables TLS)")
    parser.add_argument("--cert", type=Path, help="client certificate for mTLS")
    parser.add_argument("--cert-key", type=Path, help="client private key for mTLS")


def _tls(args: argparse.Namespace) -> TlsFiles | None:
    return TlsFiles(args.cert, args.cert_key, args.ca) if args.ca else None


def register(commands: Any) -> None:
    """Add the ``owner`` command group."""
    group = commands.add_parser(
        "owner", help="the data owner: mark, escrow, publish, inspect, file claims"
    )
    sub = group.add_subparsers(dest="owner_command", metavar="COMMAND", required=True)
    _register_mark(sub)
    _register_escrow(sub)
    _register_publish(sub)
    _register_inspect(sub)
    _register_claim(sub)


def _register_mark(sub: Any) -> None:
    from owner.marking import MarkingConfig

    defaults = MarkingConfig()
    mark = sub.add_parser(
        "mark",
        help="mark images into twin pairs in a new private vault (resumable)",
        description="Make two versions of every input image within epsilon of it and as "
        "far apart as possible for a model, commit to them, and store everything in a "
        "private vault. Killed and run again with the same arguments, it resumes.",
    )
    mark.add_argument("input", type=Path, help="folder of PNG/JPEG, .npy, .npz or idx(.gz)")
    mark.add_argument("--out", type=Path, required=True, help="vault directory (new or unfinished)")
    mark.add_argument("--labels", type=Path, help="labels file (CSV or JSON), kept for claims")
    mark.add_argument("--npz-key", help="array to read from an .npz input")
    mark.add_argument("--marker", default=defaults.marker, choices=["pgd", "gaussian", "bernoulli"])
    mark.add_argument(
        "--epsilon", type=int, default=defaults.epsilon, help="max change per pixel, 1..255"
    )
    mark.add_argument(
        "--extractor",
        default=defaults.extractor,
        help="efficientnet-lite0 | resnet18 | module.path:callable (pgd only)",
    )
    mark.add_argument("--extractor-weights", help="weights file for the extractor")
    mark.add_argument("--steps", type=int, default=defaults.steps, help="PGD steps")
    mark.add_argument(
        "--step-size", type=float, default=defaults.step_size, help="PGD step, pixel units"
    )
    mark.add_argument("--batch-size", type=int, default=defaults.batch_size)
    mark.add_argument(
        "--input-size",
        type=int,
        default=defaults.input_size,
        help="side the extractor sees (images are resized to it)",
    )
    mark.add_argument("--device", help="torch device (default: cuda if available, else cpu)")
    mark.add_argument(
        "--seed",
        help="derive the vault secret from this text (reproducible runs, tests and demos "
        "only: the secret protects the salts and the hidden versions)",
    )
    mark.add_argument("--quiet", action="store_true", help="no progress line")
    mark.set_defaults(handler=_mark)


def _register_escrow(sub: Any) -> None:
    escrow = sub.add_parser(
        "escrow", help="escrow a vault's root with the arbiter; store the verified receipt"
    )
    escrow.add_argument("vault", type=Path, help="vault directory")
    escrow.add_argument("--arbiter", required=True, help="HOST:PORT of the arbiter")
    escrow.add_argument("--arbiter-key", type=Path, required=True, help="arbiter public key (PEM)")
    escrow.add_argument("--owner", default="", help="owner label recorded in the public log")
    escrow.add_argument(
        "--receipt", type=Path, help="also write a copy of the receipt here (it is public)"
    )
    _tls_args(escrow)
    escrow.set_defaults(handler=_escrow)


def _register_publish(sub: Any) -> None:
    publish = sub.add_parser(
        "publish", help="write the published version of every pair (needs a receipt)"
    )
    publish.add_argument("vault", type=Path, help="vault directory")
    publish.add_argument("--out", type=Path, required=True, help="new publication directory")
    publish.add_argument("--quiet", action="store_true", help="no progress line")
    publish.set_defaults(handler=_publish)


def _register_inspect(sub: Any) -> None:
    inspect = sub.add_parser("inspect", help="report on a vault (checks, distances, sheet)")
    inspect.add_argument("vault", type=Path, help="vault directory")
    inspect.add_argument(
        "--input", type=Path, help="the original images (enables the epsilon check)"
    )
    inspect.add_argument("--labels", type=Path, help="labels file given to mark, if any")
    inspect.add_argument("--npz-key", help="array of an .npz input")
    inspect.add_argument(
        "--distance-pairs",
        type=int,
        default=512,
        help="pairs embedded for the feature distance (0: skip)",
    )
    inspect.add_argument("--extractor", help="extractor for the distance (default: marking's)")
    inspect.add_argument("--sheet", type=Path, help="write a contact sheet PNG here (private)")
    inspect.add_argument("--sheet-pairs", type=int, default=8)
    inspect.add_argument("--json", action="store_true", help="print the report as JSON")
    inspect.set_defaults(handler=_inspect)


def _register_claim(sub: Any) -> None:
    claim = sub.add_parser(
        "claim", help="file a claim against a model; save verdict and transcript"
    )
    claim.add_argument("vault", type=Path, help="vault directory (escrowed)")
    claim.add_argument("--arbiter", required=True, help="HOST:PORT of the arbiter")
    claim.add_argument("--arbiter-key", type=Path, required=True, help="arbiter public key (PEM)")
    claim.add_argument("--oracle", required=True, help="HOST:PORT of the model's oracle")
    claim.add_argument("--model-name", default="model")
    claim.add_argument(
        "--test",
        default="mixture-e",
        help="mixture-e (default: far fewer pairs) | pprm-chernoff (the paper's)",
    )
    claim.add_argument("--p", type=float, default=0.05, help="false-detection bound")
    claim.add_argument("--alpha", type=float, default=0.0, help="PPRM level (default p/2)")
    claim.add_argument("--k", type=int, default=1, help="perturbed copies per version")
    claim.add_argument(
        "--perturbation", default="none", help="none | random-resized-crop | pad-shift-flip"
    )
    claim.add_argument("--knowledge", default="C2", help="C1 | C2 | C3 | C4")
    claim.add_argument(
        "--tie-rule",
        default="skip",
        choices=["skip", "coin"],
        help="skip tied pairs (default, fewer pairs) or break ties by coin (the paper's)",
    )
    claim.add_argument("--max-pairs", type=int, default=0)
    claim.add_argument("--query-budget", type=int, default=0)
    claim.add_argument(
        "--window",
        type=int,
        default=0,
        help="pairs opened per request (default 8): larger is faster, smaller reveals "
        "fewer pairs beyond the decision",
    )
    claim.add_argument(
        "--out", type=Path, required=True, help="directory for verdict and transcript"
    )
    _tls_args(claim)
    claim.set_defaults(handler=_claim)


def _mark(args: argparse.Namespace) -> int:
    from owner.mark import mark_path, secret_from_seed
    from owner.marking import MarkingConfig

    config = MarkingConfig(
        marker=args.marker,
        epsilon=args.epsilon,
        extractor=args.extractor,
        extractor_weights=args.extractor_weights,
        steps=args.steps,
        step_size=args.step_size,
        batch_size=args.batch_size,
        input_size=args.input_size,
    )
    secret = None
    if args.seed is not None:
        secret = secret_from_seed(args.seed)
        print(
            "twinaudit: warning: --seed makes the vault secret reproducible; "
            "use it for tests and demos only",
            file=sys.stderr,
        )
    result = mark_path(
        args.input,
        args.out,
        config,
        labels=args.labels,
        npz_key=args.npz_key,
        secret=secret,
        device=args.device,
        show_progress=not args.quiet,
    )
    vault = result.vault
    resumed = f" (resumed after {result.resumed_from})" if result.resumed_from else ""
    print(
        f"marked {vault.n_pairs} pairs into {vault.path}{resumed}; root {vault.root.hex()}; "
        "next: twinaudit owner escrow"
    )
    return EXIT_OK


def _escrow(args: argparse.Namespace) -> int:
    from owner.escrow_client import escrow_root
    from owner.vault import Vault

    vault = Vault.open(args.vault)
    if vault.receipt is not None:
        raise InputError(f"{vault.path} is already escrowed (record {vault.receipt.entry.index})")
    arbiter_key = load_public_key(args.arbiter_key)
    if args.receipt is not None and args.receipt.exists():
        raise InputError(f"{args.receipt} exists; refusing to overwrite a receipt")
    channel = make_channel(args.arbiter, tls=_tls(args))
    escrowed = escrow_root(
        channel,
        root=vault.root,
        n_pairs=vault.n_pairs,
        item_kind=vault.item_kind,
        owner=args.owner,
        arbiter_public_key=arbiter_key,
    )
    receipt = vault.store_receipt(
        escrowed.envelope, arbiter_key, escrowed.inclusion_proof, expected_owner=args.owner
    )
    if args.receipt is not None:
        args.receipt.write_bytes(escrowed.envelope)
    print(
        f"escrowed {vault.n_pairs} pairs as record {receipt.entry.index} at "
        f"{receipt.entry.time}; receipt stored in {vault.path}; next: twinaudit owner publish"
    )
    return EXIT_OK


def _publish(args: argparse.Namespace) -> int:
    from owner.publish import publish
    from owner.vault import Vault

    vault = Vault.open(args.vault)
    files = publish(vault, args.out, show_progress=not args.quiet)
    print(f"published {vault.n_pairs} images in {len(files)} files under {args.out}")
    return EXIT_OK


def _inspect(args: argparse.Namespace) -> int:
    import json

    from owner.images.sources import open_source
    from owner.inspect import inspect_vault
    from owner.vault import Vault

    vault = Vault.open(args.vault)
    source = (
        open_source(args.input, labels=args.labels, npz_key=args.npz_key)
        if args.input is not None
        else None
    )
    report = inspect_vault(
        vault,
        source=source,
        distance_pairs=args.distance_pairs,
        extractor=args.extractor,
        sheet=args.sheet,
        sheet_pairs=args.sheet_pairs,
    )
    if args.json:
        print(json.dumps(report.to_value(), indent=2, sort_keys=True, default=_json_default))
    else:
        print(report.to_text())
    failed = report.epsilon is not None and not report.epsilon.holds
    return EXIT_FAILED if failed else EXIT_OK


def _json_default(value: object) -> object:
    if isinstance(value, bytes):
        return value.hex()
    raise TypeError(f"cannot write {type(value).__name__} as JSON")


def _claim(args: argparse.Namespace) -> int:
    from owner.claim_client import ClaimRequest, run_claim
    from owner.vault import Vault
    from protocol.keys import key_id
    from verifier.verdict import check_verdict

    vault = Vault.open(args.vault)
    receipt = vault.receipt
    if receipt is None or vault.arbiter_public_key is None:
        raise InputError(f"{vault.path} is not escrowed yet: run twinaudit owner escrow first")
    arbiter_key = load_public_key(args.arbiter_key)
    if key_id(arbiter_key) != key_id(vault.arbiter_public_key):
        raise InputError("the vault was escrowed with another arbiter (keys differ)")
    request = ClaimRequest(
        record_index=receipt.entry.index,
        record_root=vault.root,
        oracle_endpoint=args.oracle,
        model_name=args.model_name,
        k=args.k,
        perturbation=args.perturbation,
        knowledge=args.knowledge,
        test=args.test,
        p=args.p,
        alpha=args.alpha,
        tie_rule=args.tie_rule,
        max_pairs=args.max_pairs,
        query_budget=args.query_budget,
        window=args.window,
    )
    channel = make_channel(args.arbiter, tls=_tls(args))

    def show(progress: Any) -> None:
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

    outcome = run_claim(channel, request, vault.opening, on_progress=show)
    verdict = check_verdict(outcome.verdict, arbiter_key)
    from twinaudit.verifier.v1 import verifier_pb2 as pb
    from twinaudit.verifier.v1 import verifier_pb2_grpc as pb_grpc

    stored = pb_grpc.VerifierStub(channel).GetVerdict(  # type: ignore[no-untyped-call]
        pb.GetVerdictRequest(claim_id=outcome.claim_id), timeout=60
    )
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "verdict.json").write_bytes(outcome.verdict)
    (args.out / "transcript.bin").write_bytes(stored.transcript)
    print(
        f"{verdict['decision'].upper()}: claim {outcome.claim_id}, "
        f"{len(verdict['opened'])} pairs opened, {verdict['queries']} queries; "
        f"verdict and transcript in {args.out}"
    )
    return EXIT_OK
