"""``twinaudit owner …``: the data owner's commands for escrow and claims.

``owner escrow`` commits a pair set's root with the arbiter and stores the verified
receipt; ``owner claim`` files a claim against a model and saves the verdict and its
transcript. (Marking images into a pair set is the owner-side imaging issue.)
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


def _tls_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--ca", type=Path, help="CA certificate of the arbiter (enables TLS)")
    parser.add_argument("--cert", type=Path, help="client certificate for mTLS")
    parser.add_argument("--cert-key", type=Path, help="client private key for mTLS")


def _tls(args: argparse.Namespace) -> TlsFiles | None:
    return TlsFiles(args.cert, args.cert_key, args.ca) if args.ca else None


def register(commands: Any) -> None:
    """Add the ``owner`` command group."""
    group = commands.add_parser("owner", help="the data owner: escrow pairs, file claims")
    sub = group.add_subparsers(dest="owner_command", metavar="COMMAND", required=True)

    escrow = sub.add_parser("escrow", help="escrow a pair set's root; store the verified receipt")
    escrow.add_argument("pairs", type=Path, help="pair set file")
    escrow.add_argument("--arbiter", required=True, help="HOST:PORT of the arbiter")
    escrow.add_argument("--arbiter-key", type=Path, required=True, help="arbiter public key (PEM)")
    escrow.add_argument("--owner", default="", help="owner label recorded in the public log")
    escrow.add_argument("--receipt", type=Path, required=True, help="where to write the receipt")
    _tls_args(escrow)
    escrow.set_defaults(handler=_escrow)

    claim = sub.add_parser(
        "claim", help="file a claim against a model; save verdict and transcript"
    )
    claim.add_argument("pairs", type=Path, help="pair set file")
    claim.add_argument("--receipt", type=Path, required=True)
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


def _escrow(args: argparse.Namespace) -> int:
    from owner.escrow_client import escrow_root
    from owner.pairset import PairSet

    pairs = PairSet.load(args.pairs)
    if args.receipt.exists():
        raise InputError(f"{args.receipt} exists; refusing to overwrite a receipt")
    channel = make_channel(args.arbiter, tls=_tls(args))
    receipt, data = escrow_root(
        channel,
        root=pairs.root,
        n_pairs=len(pairs),
        item_kind=pairs.item_kind,
        owner=args.owner,
        arbiter_public_key=load_public_key(args.arbiter_key),
    )
    args.receipt.write_bytes(data)
    print(f"escrowed {len(pairs)} pairs as record {receipt.entry.index} at {receipt.entry.time}")
    return EXIT_OK


def _claim(args: argparse.Namespace) -> int:
    from owner.claim_client import ClaimRequest, run_claim
    from owner.pairset import PairSet
    from protocol.escrow_messages import open_receipt
    from verifier.verdict import check_verdict

    pairs = PairSet.load(args.pairs)
    arbiter_key = load_public_key(args.arbiter_key)
    receipt = open_receipt(args.receipt.read_bytes(), arbiter_key)
    if receipt.entry.root != pairs.root:
        raise InputError("the receipt is for another pair set (roots differ)")
    request = ClaimRequest(
        record_index=receipt.entry.index,
        record_root=pairs.root,
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

    outcome = run_claim(channel, request, pairs.opening, on_progress=show)
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
