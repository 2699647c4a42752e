"""``twinaudit verifier …``: the arbiter's commands (keygen, serve, model, check, replay…)."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

from twinaudit.protocol.errors import InputError, TwinauditError
from twinaudit.protocol.keys import load_public_key, write_keypair
from twinaudit.verifier.claim_slots import DEFAULT_MAX_CLAIMS, MAX_MAX_CLAIMS
from twinaudit.verifier.escrow.cosigning import CheckpointCosigning, parse_witness_option
from twinaudit.verifier.escrow.leases import DEFAULT_LEASE_S
from twinaudit.verifier.escrow.rate_limit import DEFAULT_RATE_LIMIT, RateLimit
from twinaudit.verifier.escrow.store import (
    DEFAULT_MAX_FAILED_CLAIMS,
    DEFAULT_MAX_OPEN_CLAIMS,
    MAX_LEASE_SECONDS,
)
from twinaudit.wire.transport import TlsFiles, parse_address

from .failures import report_check
from .log_recount import add_log_args, recount, recount_line
from .results import print_json, verdict_figures, verdict_reading, verdict_summary
from .serve_options import add_operations_args, add_plaintext_arg, check_listen, start_operations
from .stop_signal import StopSignal
from .witness_check import add_witness_args, check_witnessed, read_witness_inputs, witnessed_line

EXIT_OK, EXIT_INVALID, EXIT_USAGE = 0, 1, 2

CHECK_EXIT = (
    "exit status: 0 the verdict is valid (whatever its decision: read it in the output, "
    "or in the JSON's decision and detected); 1 it is not (signature, schema or spec "
    "version; with --log, an earlier_claims the arbiter's log does not recount, or a log "
    "that is not a prefix of its latest checkpoint; with --witness-policy, a record not "
    "in a log its witnesses cosigned), and no --html report is written; 2 bad usage, an "
    "unreadable file or a report that cannot be written"
)
REPLAY_EXIT = (
    "exit status: 0 the replay arrived at the verdict's decision and final figures "
    "exactly; 1 it did not, or the transcript or signature is invalid, and no --html "
    "report is written; 2 bad usage, an unreadable file or a report that cannot be written"
)
REEXECUTE_EXIT = (
    "exit status: 0 the verdict checked and replayed, the model file is the artefact it "
    "records, and the model answered every recorded query exactly as recorded; 1 it did "
    "not (an invalid verdict or transcript, another artefact's digest, an opening not in "
    "the transcript, an answer that differs: one line names the first difference); 2 bad "
    "usage, an unreadable file, or a model that does not start (a missing --arch, a "
    "pickle without --trust-pickle)"
)
MODEL_ADD_EXIT = (
    "exit status: 0 the artefact is stored and its address printed; 2 bad usage, an "
    "unreadable file, or a model that does not load or fails the probe at start "
    "([model-mismatch]); nothing is stored then"
)
SERVE_EXIT = (
    "exit status: 0 stopped by SIGINT or SIGTERM; 2 bad usage (an address without a host, "
    "a port in use, an unreadable key); 1 the store or the disk failed"
)
STORE_CHECK_EXIT = (
    "exit status: 0 every entry, tree node, root and checkpoint of the escrow log checked; "
    "1 one did not (one line names the first difference: the store is corrupt) or the "
    "database failed; 2 bad usage or an unreadable key"
)
JSON_HELP = "print one JSON object on stdout (decision and figures) instead of the text line"
HTML_HELP = (
    "also write a self-contained HTML report of the verdict for people (the decision in "
    "words, what it does and does not establish, plots, the opened pairs) to FILE, "
    "only once the verdict has checked"
)


def register(commands: Any) -> None:
    """Add the ``verifier`` command group."""
    group = commands.add_parser("verifier", help="the arbiter: escrow, claims, verdicts")
    sub = group.add_subparsers(dest="verifier_command", metavar="COMMAND", required=True)

    keygen = sub.add_parser("keygen", help="make the arbiter's Ed25519 signing key")
    keygen.add_argument(
        "--key", type=Path, required=True, help="private key file (0600); .pub beside it"
    )
    keygen.set_defaults(handler=_keygen)

    serve = sub.add_parser("serve", help="run the escrow and verifier services", epilog=SERVE_EXIT)
    serve.add_argument("--listen", required=True, help="HOST:PORT (port 0 picks a free one)")
    serve.add_argument(
        "--db", required=True, help="SQLite file, or a postgresql:// DSN for the PostgreSQL backend"
    )
    serve.add_argument(
        "--key",
        type=Path,
        required=True,
        help="the arbiter's private key (PEM), read only by a separate signer process",
    )
    serve.add_argument("--tls-cert", type=Path, help="server certificate (PEM)")
    serve.add_argument("--tls-key", type=Path, help="server private key (PEM)")
    serve.add_argument("--client-ca", type=Path, help="require client certificates from this CA")
    add_plaintext_arg(serve)
    serve.add_argument("--oracle-ca", type=Path, help="CA of TLS model oracles")
    serve.add_argument(
        "--escrow-rate",
        type=float,
        default=DEFAULT_RATE_LIMIT.per_second,
        help="escrow commits per second per client (certificate under mTLS, else address) "
        f"once its burst is spent; 0: no limit (default {DEFAULT_RATE_LIMIT.per_second:g})",
    )
    serve.add_argument(
        "--escrow-burst",
        type=int,
        default=DEFAULT_RATE_LIMIT.burst,
        help=f"escrow commits a client may make at once (default {DEFAULT_RATE_LIMIT.burst})",
    )
    serve.add_argument(
        "--claim-lease",
        type=float,
        default=DEFAULT_LEASE_S,
        metavar="SECONDS",
        help="how long a claim stays held by this process after its last renewal (renewed "
        "every third of it while the claim runs); replicas on one database take over the "
        f"claims of a process that died this long after it (default {DEFAULT_LEASE_S:g})",
    )
    serve.add_argument(
        "--max-claims",
        type=int,
        default=DEFAULT_MAX_CLAIMS,
        metavar="N",
        help="claims this process runs at once, each on a thread of its own; one more is "
        "refused (RESOURCE_EXHAUSTED) until one stops, so that escrow, verdict and health "
        f"calls always have threads (1..{MAX_MAX_CLAIMS}, default {DEFAULT_MAX_CLAIMS})",
    )
    serve.add_argument(
        "--max-open-claims",
        type=int,
        default=DEFAULT_MAX_OPEN_CLAIMS,
        metavar="N",
        help="claims a record may have open at once before a new claim on it is refused "
        f"(limit-exceeded, nothing filed; spec 10.7; default {DEFAULT_MAX_OPEN_CLAIMS})",
    )
    serve.add_argument(
        "--max-failed-claims",
        type=int,
        default=DEFAULT_MAX_FAILED_CLAIMS,
        metavar="N",
        help="claims filed on a record in the last 24 hours that may have failed before a new "
        f"claim on it is refused (default {DEFAULT_MAX_FAILED_CLAIMS})",
    )
    serve.add_argument(
        "--models",
        type=Path,
        metavar="DIR",
        help="the store of model artefacts this arbiter holds (verifier model add): claims "
        "name one as held:sha256:<hex>, and the verifier runs it in a sandboxed child process",
    )
    serve.add_argument(
        "--witness",
        action="append",
        default=[],
        metavar="URL=VKEY",
        help="a witness to ask for cosignatures of the log's checkpoint notes (C2SP "
        "tlog-witness; its submission URL and cosignature vkey; repeatable): a witness "
        "that is down never delays an escrow, the note carries fewer cosignatures",
    )
    _isolation_arg(serve)
    add_operations_args(serve)
    serve.set_defaults(handler=_serve)
    _register_model(sub)

    store_check = sub.add_parser(
        "store-check",
        help="check every row of the escrow log (opening a store checks only its head)",
        epilog=STORE_CHECK_EXIT,
    )
    store_check.add_argument(
        "--db", required=True, help="SQLite file, or a postgresql:// DSN for the PostgreSQL backend"
    )
    store_check.add_argument(
        "--key", type=Path, required=True, help="the arbiter's private key (PEM)"
    )
    store_check.set_defaults(handler=_store_check)

    check = sub.add_parser(
        "check", help="verify a verdict offline (exit 0 valid, 1 invalid)", epilog=CHECK_EXIT
    )
    check.add_argument("verdict", type=Path, help="the verdict file (verdict.json)")
    check.add_argument("--pubkey", type=Path, required=True, help="the arbiter's public key (PEM)")
    check.add_argument("--json", action="store_true", help=JSON_HELP)
    check.add_argument("--html", type=Path, metavar="FILE", help=HTML_HELP)
    add_log_args(check)
    add_witness_args(check)
    check.set_defaults(handler=_check)

    replay = sub.add_parser(
        "replay", help="recompute a verdict's decision from its transcript", epilog=REPLAY_EXIT
    )
    replay.add_argument("verdict", type=Path, help="the verdict file (verdict.json)")
    replay.add_argument(
        "--transcript", type=Path, required=True, help="its transcript (transcript.bin)"
    )
    replay.add_argument("--pubkey", type=Path, help="also verify the verdict's signature")
    replay.add_argument(
        "--openings",
        type=Path,
        help="also check what the transcript records of the items (version digests; an image "
        "score's labels, shapes, copy parameters and query digests) against the openings of "
        "its pairs (owner openings writes them from the vault); replay alone cannot",
    )
    replay.add_argument("--json", action="store_true", help=JSON_HELP)
    replay.add_argument("--html", type=Path, metavar="FILE", help=HTML_HELP + " (needs --pubkey)")
    replay.set_defaults(handler=_replay)

    reexecute = sub.add_parser(
        "reexecute",
        help="run an arbiter-held model again on a verdict's queries; compare every answer",
        description="Check the verdict and replay its transcript, check that the model file "
        "is the artefact whose SHA-256 the verdict records, rebuild every query from the "
        "openings of its pairs, run the model as the arbiter ran it (a child process, one "
        "CPU thread, deterministic algorithms, the same batches) and confirm every answer "
        "equals the recorded one bit for bit.",
        epilog=REEXECUTE_EXIT,
    )
    reexecute.add_argument("verdict", type=Path, help="the verdict file (verdict.json)")
    reexecute.add_argument(
        "--transcript", type=Path, required=True, help="its transcript (transcript.bin)"
    )
    reexecute.add_argument(
        "--openings",
        type=Path,
        required=True,
        help="the openings of its pairs (owner openings writes them from the vault)",
    )
    reexecute.add_argument(
        "--model", type=Path, required=True, help="the model artefact the verdict names"
    )
    reexecute.add_argument("--pubkey", type=Path, help="also verify the verdict's signature")
    _serving_args(reexecute, recorded=True)
    _isolation_arg(reexecute)
    reexecute.add_argument("--json", action="store_true", help=JSON_HELP)
    reexecute.set_defaults(handler=_reexecute)


def _serving_args(parser: argparse.ArgumentParser, *, recorded: bool) -> None:
    """Add the options of ``oracle serve`` that say how a held model's file is served."""
    from .cmd_oracle import MODEL_FORMATS

    parser.add_argument(
        "--format",
        dest="model_format",
        choices=MODEL_FORMATS,
        help="the model file's format (default: "
        + ("the one the verdict records)" if recorded else "found from its name and content)"),
    )
    parser.add_argument(
        "--arch",
        metavar="MODULE:CALLABLE",
        help="callable returning the nn.Module a state dict or safetensors file is loaded "
        "into (imported from the current folder)",
    )
    parser.add_argument(
        "--trust-pickle",
        action="store_true",
        help="load a module pickled by torch.save(model); unpickling runs any code the file names",
    )
    parser.add_argument(
        "--mean", type=float, nargs="+", metavar="M", help="per-channel mean of the inputs"
    )
    parser.add_argument(
        "--std", type=float, nargs="+", metavar="S", help="per-channel standard deviation"
    )


def _register_model(sub: Any) -> None:
    """Add ``verifier model add`` and ``verifier model list``."""
    model = sub.add_parser("model", help="the model artefacts this arbiter holds")
    commands = model.add_subparsers(dest="model_command", metavar="COMMAND", required=True)
    add = commands.add_parser(
        "add",
        help="store a model artefact under its SHA-256, probed as oracle serve probes it",
        description="Copy a model file (any format oracle serve loads) into the store under "
        "its SHA-256, with the options it is served with, after starting it once as a held "
        "model (a child oracle serve process: loaded and probed on blank images). Prints "
        "the address claims name it by, held:sha256:<hex>.",
        epilog=MODEL_ADD_EXIT,
    )
    add.add_argument("file", type=Path, help="the model file")
    add.add_argument("--models", type=Path, required=True, metavar="DIR", help="the store")
    add.add_argument(
        "--kind",
        choices=("classifier", "encoder"),
        default="classifier",
        help="what it is (default %(default)s)",
    )
    _serving_args(add, recorded=False)
    _isolation_arg(add)
    add.add_argument(
        "--input-shape",
        metavar="H,W,C",
        help="the image shape it takes, probed at start (needed unless the file declares it)",
    )
    add.add_argument("--n-classes", type=int, metavar="N", help="classes the probe must find")
    add.add_argument(
        "--max-batch",
        type=int,
        default=256,
        metavar="N",
        help="most images per request and forward pass (default 256)",
    )
    add.add_argument("--name", help="the model name claims record (default: the file name)")
    add.add_argument("--json", action="store_true", help="print the artefact as one JSON object")
    add.set_defaults(handler=_model_add)
    listing = commands.add_parser("list", help="list the stored artefacts")
    listing.add_argument("--models", type=Path, required=True, metavar="DIR", help="the store")
    listing.set_defaults(handler=_model_list)


def _shape(text: str | None) -> tuple[int, int, int] | None:
    if text is None:
        return None
    try:
        parts = tuple(int(p) for p in text.split(","))
    except ValueError:
        parts = ()
    if len(parts) != 3 or min(parts) < 1:
        raise InputError(f"--input-shape must be three positive integers H,W,C, got {text!r}")
    return parts[0], parts[1], parts[2]


def _model_add(args: argparse.Namespace) -> int:
    from twinaudit.verifier.oracles.held import ArtefactStore, ServeOptions

    _set_isolation(args)
    options = ServeOptions(
        name=args.name or args.file.name,
        kind=args.kind,
        model_format=args.model_format,
        arch=args.arch,
        trust_pickle=args.trust_pickle,
        input_shape=_shape(args.input_shape),
        n_classes=args.n_classes,
        mean=tuple(args.mean) if args.mean else None,
        std=tuple(args.std) if args.std else None,
        max_batch=args.max_batch,
    )
    if args.trust_pickle:
        print(
            "twinaudit: warning: --trust-pickle: the held model's sandboxed process unpickles "
            "the file, which runs any code it names (docs/arbiter.md#isolation-of-model-code)",
            file=sys.stderr,
        )
    try:
        artefact, info = ArtefactStore(args.models).add(args.file, options)
    except TwinauditError as exc:
        if isinstance(exc, InputError):
            raise
        raise InputError(str(exc)) from None
    if args.json:
        print_json({"address": artefact.address, "path": str(artefact.path), **info.to_value()})
        return EXIT_OK
    print(
        f"stored {artefact.address} ({info.model_format or 'model'}, {info.framework}, "
        f"input {','.join(map(str, info.input_shape))}, "
        + (f"{info.n_classes} classes" if info.n_classes else ",".join(info.capabilities))
        + ")"
    )
    return EXIT_OK


def _model_list(args: argparse.Namespace) -> int:
    from twinaudit.verifier.oracles.held import ArtefactStore

    for artefact in ArtefactStore(args.models).list():
        print(f"{artefact.address} {artefact.options.name} {artefact.options.kind}")
    return EXIT_OK


def _keygen(args: argparse.Namespace) -> int:
    if not args.key.parent.is_dir():
        raise InputError(f"{args.key.parent} is not a folder: create it first (mkdir -p)")
    write_keypair(args.key)
    print(f"wrote {args.key} and {args.key}.pub")
    return EXIT_OK


def _open_store(db: str, key: Any) -> Any:
    if db.startswith(("postgresql://", "postgres://")):
        from twinaudit.verifier.escrow.postgres_store import PostgresEscrowStore

        return PostgresEscrowStore(db, key)
    from twinaudit.verifier.escrow.sqlite_store import SqliteEscrowStore

    return SqliteEscrowStore(db, key)


def _isolation_arg(parser: argparse.ArgumentParser) -> None:
    """Add ``--allow-weak-isolation`` (held models without bubblewrap) and ``--held-memory``."""
    parser.add_argument(
        "--held-memory",
        type=float,
        default=4.0,
        metavar="GIB",
        help="address space a held model's process may use, torch's own included "
        "(default %(default)g GiB; at least 0.5)",
    )
    parser.add_argument(
        "--allow-weak-isolation",
        action="store_true",
        help="run held models even where bubblewrap (bwrap) is missing: they then run as "
        "this user, with its files, /proc and network, under resource limits only "
        "(docs/arbiter.md#isolation-of-model-code); without it they are refused there",
    )


def _set_isolation(args: argparse.Namespace, hidden: tuple[Path, ...] = ()) -> None:
    """Set this process's sandbox policy for held models from the command's options."""
    from twinaudit.verifier.oracles.sandbox import GIB, ChildLimits, SandboxPolicy, set_policy

    if not 0.5 <= args.held_memory <= 1024:
        raise InputError("--held-memory must be from 0.5 to 1024 GiB")
    limits = ChildLimits(memory_bytes=int(args.held_memory * GIB))
    set_policy(SandboxPolicy(limits, hidden=hidden, allow_weak=args.allow_weak_isolation))


def _database_files(db: str) -> tuple[Path, ...]:
    """Return a SQLite database's files (none for a PostgreSQL DSN): what no held model sees."""
    if db.startswith(("postgresql://", "postgres://")):
        return ()
    return tuple(Path(db + suffix) for suffix in ("", "-wal", "-shm", "-journal"))


def _store_check(args: argparse.Namespace) -> int:
    from twinaudit.protocol.keys import load_private_key
    from twinaudit.verifier.escrow.log_check import check_log

    key = load_private_key(args.key)
    store = _open_store(args.db, key)
    try:
        start = time.monotonic()
        result = check_log(store.db, store.public_key)
        seconds = time.monotonic() - start
    finally:
        store.close()
    print(
        f"escrow log sound: {result.entries} entries, {result.nodes} tree nodes and"
        f" {result.checkpoints} checkpoints checked in {seconds:.1f} s; root {result.root.hex()}"
    )
    return EXIT_OK


def _serve(args: argparse.Namespace) -> int:
    from twinaudit.verifier.signer_process import ProcessSigner

    # A malformed --listen is refused before the store is opened (or created).
    host, _ = parse_address(args.listen, what="--listen", port_zero=True)
    check_listen(args, host)
    if args.max_open_claims < 1 or args.max_failed_claims < 1:
        raise InputError("--max-open-claims and --max-failed-claims must be at least 1")
    if not 0 < args.claim_lease <= MAX_LEASE_SECONDS:
        raise InputError(f"--claim-lease must be above 0 and at most {MAX_LEASE_SECONDS:g} s")
    if not 1 <= args.max_claims <= MAX_MAX_CLAIMS:
        raise InputError(f"--max-claims must be in 1..{MAX_MAX_CLAIMS}")
    args.witnesses = [parse_witness_option(text) for text in args.witness]
    _set_isolation(args, hidden=(args.key, *_database_files(args.db)))
    # The key is read by a signer process started before anything else; this process
    # holds only its public key (docs/arbiter.md#isolation-of-model-code).
    signer = ProcessSigner.start(args.key)
    try:
        return _serve_signed(args, host, signer)
    finally:
        signer.close()


def _serve_signed(args: argparse.Namespace, host: str, signer: Any) -> int:
    """Serve until SIGINT/SIGTERM, signing with ``signer``."""
    from twinaudit.verifier.server import serve_arbiter

    tls = TlsFiles(args.tls_cert, args.tls_key, args.client_ca) if args.tls_cert else None
    oracle_tls = TlsFiles(ca=args.oracle_ca) if args.oracle_ca else None
    rate = RateLimit(args.escrow_rate, args.escrow_burst) if args.escrow_rate != 0 else None
    ops = start_operations(args)  # logs, and the metrics endpoint (its port checked first)
    try:
        store = _open_store(args.db, signer)
        cosigning = CheckpointCosigning(store, args.witnesses) if args.witnesses else None
        try:
            server, port = serve_arbiter(
                store,
                signer,
                args.listen,
                tls=tls,
                oracle_tls=oracle_tls,
                escrow_rate_limit=rate,
                metrics=ops.metrics,
                reflection=args.reflection,
                claim_lease_s=args.claim_lease,
                held_models=args.models,
                max_claims=args.max_claims,
                max_open_claims=args.max_open_claims,
                max_failed_claims=args.max_failed_claims,
                cosigning=cosigning,
            )
        except BaseException:
            if cosigning is not None:
                cosigning.close()
            store.close()  # e.g. the port is in use: a one-line InputError, nothing left open
            raise
        print(f"twinaudit verifier serving on {host}:{port}", flush=True)
        if ops.metrics_address is not None:
            print(f"metrics on http://{ops.metrics_address}/metrics", flush=True)
        with StopSignal() as stop:
            stop.wait()
        server.stop(grace=5).wait()
        if cosigning is not None:
            cosigning.close()
        store.close()
    finally:
        ops.close()
    return EXIT_OK


def _check(args: argparse.Namespace) -> int:
    from twinaudit.cli import verdict_files as files

    files.check_report_target(args.html, args.verdict, args.pubkey)
    pubkey = load_public_key(args.pubkey)
    data = files.read_input(args.verdict, "verdict")
    witness_inputs = read_witness_inputs(args, pubkey)
    witnessed = None
    try:
        verdict = files.checked_verdict(data, pubkey)
        logged = recount(args, verdict, pubkey)
        if witness_inputs is not None:
            witnessed = check_witnessed(witness_inputs, verdict, pubkey)
    except TwinauditError as exc:
        return report_check("INVALID", exc, args, {"valid": False})
    if args.html is not None:
        files.write_verdict_report(args.html, args.verdict, verdict, data, None)
    if args.json:
        report: dict[str, object] = {"html": str(args.html)} if args.html is not None else {}
        if witnessed is not None:
            report["witnessed_by"] = [c.name for c in witnessed.checkpoint.counted]
        print_json({"valid": True, **verdict_figures(verdict), **logged, **report})
        return EXIT_OK
    print(f"VALID verdict {verdict.claim_id}: {verdict_summary(verdict)}")
    for line in verdict_reading(verdict):
        print(f"  {line}")
    if (recounted := recount_line(logged, verdict)) is not None:
        print(f"  {recounted}")
    if witnessed is not None:
        print(f"  {witnessed_line(witnessed)}")
    if args.html is not None:
        print(f"wrote the HTML report {args.html}")
    return EXIT_OK


def _replay(args: argparse.Namespace) -> int:
    from twinaudit.cli import verdict_files as files

    if args.html is not None and args.pubkey is None:
        raise InputError(
            "--html needs --pubkey: a report is written only for a verdict whose "
            "signature was checked"
        )
    files.check_report_target(args.html, args.verdict, args.transcript, args.pubkey)
    data = files.read_input(args.verdict, "verdict")
    transcript = files.read_input(args.transcript, "transcript")
    openings = files.read_input(args.openings, "openings") if args.openings is not None else None
    try:
        pubkey = load_public_key(args.pubkey) if args.pubkey is not None else None
        verdict = files.checked_verdict(data, pubkey)
        done = files.replayed(verdict, transcript, openings)
    except TwinauditError as exc:
        return report_check("REPLAY FAILED", exc, args, {"identical": False})
    if args.html is not None:
        files.write_verdict_report(args.html, args.verdict, verdict, data, transcript, done=done)
    figures = files.replay_figures(verdict, transcript, done)
    if args.json:
        report = {"html": str(args.html)} if args.html is not None else {}
        print_json(
            {
                **verdict_figures(verdict),
                "identical": True,
                **figures,
                "signature_checked": args.pubkey is not None,
                **report,
            }
        )
        return EXIT_OK
    for line in files.replay_lines(done):
        print(line)
    if figures["scored_alike_note"] is not None:
        print(f"note: {figures['scored_alike_note']}")
    if args.html is not None:
        print(f"wrote the HTML report {args.html}")
    return EXIT_OK


def _reexecute(args: argparse.Namespace) -> int:
    from twinaudit.cli import verdict_files as files
    from twinaudit.verifier.reexecute import ModelOptions, reexecute

    _set_isolation(args)
    data = files.read_input(args.verdict, "verdict")
    transcript = files.read_input(args.transcript, "transcript")
    openings = files.read_input(args.openings, "openings")
    if not args.model.is_file():
        raise InputError(f"model file {str(args.model)!r} does not exist")
    options = ModelOptions(
        model_format=args.model_format,
        arch=args.arch,
        trust_pickle=args.trust_pickle,
        mean=tuple(args.mean) if args.mean else None,
        std=tuple(args.std) if args.std else None,
    )
    try:
        pubkey = load_public_key(args.pubkey) if args.pubkey is not None else None
        verdict = files.checked_verdict(data, pubkey)
        result = reexecute(verdict, transcript, openings, args.model, options)
    except InputError:
        raise
    except TwinauditError as exc:
        return report_check("REEXECUTE FAILED", exc, args, {"identical": False})
    if args.json:
        print_json(
            {
                **verdict_figures(verdict),
                "identical": True,
                "pairs_reexecuted": result.pairs,
                "windows": result.windows,
                "answers": result.answers,
                "model_digest": result.model_digest,
                "framework_recorded": result.framework_recorded,
                "framework_here": result.framework_here,
                "signature_checked": args.pubkey is not None,
            }
        )
        return EXIT_OK
    print(
        f"REEXECUTED {result.pairs} pairs in {result.windows} windows: the model "
        f"sha256:{result.model_digest} answered all {result.answers} queries exactly as "
        "the transcript records"
    )
    return EXIT_OK
