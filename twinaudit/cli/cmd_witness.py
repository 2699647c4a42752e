"""``twinaudit witness …``: a C2SP ``tlog-witness`` that cosigns arbiters' checkpoints."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from twinaudit.cli.stop_signal import StopSignal
from twinaudit.protocol.checkpoint_note import arbiter_key
from twinaudit.protocol.errors import InputError
from twinaudit.protocol.keys import load_private_key, load_public_key, write_keypair
from twinaudit.protocol.note import COSIGNATURE_V1, VerifierKey, check_key_name, parse_vkey
from twinaudit.wire.transport import parse_address

EXIT_OK = 0

SERVE_EXIT = (
    "exit status: 0 stopped by SIGINT or SIGTERM; 2 bad usage (no log, a malformed vkey, "
    "an unreadable key, a port in use); 1 the database failed"
)


def register(commands: Any) -> None:
    """Add ``twinaudit witness`` and its sub-commands to ``commands``."""
    group = commands.add_parser("witness", help="a witness: cosign arbiters' log checkpoints")
    sub = group.add_subparsers(dest="witness_command", metavar="SUBCOMMAND", required=True)

    keygen = sub.add_parser("keygen", help="make a witness's Ed25519 key; print its vkey")
    keygen.add_argument("--key", type=Path, required=True, help="private key file to create")
    keygen.add_argument("--name", required=True, help="the witness's key name (e.g. w1.example)")
    keygen.set_defaults(handler=_keygen)

    vkey = sub.add_parser("vkey", help="print a witness's vkey, or an arbiter's log vkey")
    which = vkey.add_mutually_exclusive_group(required=True)
    which.add_argument("--key", type=Path, help="the witness's private key (with --name)")
    which.add_argument("--arbiter-pubkey", type=Path, help="the arbiter's public key (PEM)")
    vkey.add_argument("--name", help="the witness's key name")
    vkey.set_defaults(handler=_vkey)

    serve = sub.add_parser(
        "serve", help="serve add-checkpoint over HTTP (C2SP tlog-witness)", epilog=SERVE_EXIT
    )
    serve.add_argument("--listen", required=True, help="HOST:PORT (port 0 picks a free one)")
    serve.add_argument("--key", type=Path, required=True, help="the witness's private key")
    serve.add_argument("--name", required=True, help="the witness's key name")
    serve.add_argument("--db", type=Path, required=True, help="the witness's SQLite state file")
    serve.add_argument(
        "--log",
        action="append",
        default=[],
        metavar="VKEY",
        help="a log to witness, by its note vkey (repeatable)",
    )
    serve.add_argument(
        "--arbiter-pubkey",
        action="append",
        default=[],
        type=Path,
        metavar="PEM",
        help="a twinaudit arbiter's log to witness, by its public key (repeatable)",
    )
    serve.add_argument("--prefix", default="/", help="URL prefix of the endpoints (default /)")
    serve.set_defaults(handler=_serve)


def _witness_key(key: Path, name: str | None) -> VerifierKey:
    if name is None:
        raise InputError("--name is required with --key")
    return VerifierKey.of(check_key_name(name), COSIGNATURE_V1, load_private_key(key).public_key())


def _keygen(args: argparse.Namespace) -> int:
    check_key_name(args.name)
    if not args.key.parent.is_dir():
        raise InputError(f"{args.key.parent} is not a folder: create it first (mkdir -p)")
    private = write_keypair(args.key)
    print(VerifierKey.of(args.name, COSIGNATURE_V1, private.public_key()).vkey())
    return EXIT_OK


def _vkey(args: argparse.Namespace) -> int:
    if args.arbiter_pubkey is not None:
        print(arbiter_key(load_public_key(args.arbiter_pubkey)).vkey())
    else:
        print(_witness_key(args.key, args.name).vkey())
    return EXIT_OK


def _serve(args: argparse.Namespace) -> int:
    from twinaudit.witness.cosigner import Cosigner, logs_by_origin
    from twinaudit.witness.server import start_witness
    from twinaudit.witness.state import WitnessState

    host, port = parse_address(args.listen, what="--listen", port_zero=True)
    logs = [parse_vkey(text) for text in args.log]
    logs += [arbiter_key(load_public_key(path)) for path in args.arbiter_pubkey]
    if not logs:
        raise InputError("name the logs to witness: --log VKEY or --arbiter-pubkey PEM")
    if not args.prefix.startswith("/") or not args.prefix.endswith("/"):
        raise InputError("--prefix starts and ends with '/'")
    cosigner = Cosigner(
        check_key_name(args.name),
        load_private_key(args.key),
        logs_by_origin(logs),
        WitnessState(args.db),
    )
    try:
        server, _ = start_witness(cosigner, host, port, args.prefix)
    except OSError as exc:
        raise InputError(f"cannot listen on {args.listen}: {exc.strerror or exc}") from None
    print(f"twinaudit witness {cosigner.vkey.vkey()}", flush=True)
    print(f"twinaudit witness serving on http://{host}:{server.port}{args.prefix}", flush=True)
    with StopSignal() as stop:
        stop.wait()
    server.shutdown()
    server.server_close()
    return EXIT_OK
