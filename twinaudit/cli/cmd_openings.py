"""``twinaudit owner openings``: the openings of a verdict's pairs, for ``verifier reexecute``.

A transcript records each opened pair's version digests, not its versions (spec §12).
To re-execute an arbiter-held model on a claim's queries (``verifier reexecute``),
whoever re-executes needs the opened pairs' versions: the owner writes them from her
vault into an openings file (:mod:`twinaudit.protocol.claim.openings`, spec §12.1). Only the
pairs the verdict opened are written, which the arbiter has already seen; the vault's
other pairs stay secret.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from twinaudit.protocol.atomic_file import write_atomically
from twinaudit.protocol.errors import InputError
from twinaudit.protocol.keys import load_public_key

from .results import print_json

OPENINGS_EXIT = (
    "exit status: 0 the openings file is written; 1 the verdict does not verify; 2 bad "
    "usage, an unreadable file, a verdict on another vault's root, or an --out that exists"
)


def register_openings(sub: Any) -> None:
    """Add ``owner openings`` to the owner's command group."""
    openings = sub.add_parser(
        "openings",
        help="write the openings of a verdict's pairs (for verifier reexecute)",
        description="Write the openings (salt, both versions, inclusion proof) of the "
        "pairs a verdict opened, from the vault, into a new file that verifier reexecute "
        "reads with --openings. The verdict is checked first, under the arbiter's key.",
        epilog=OPENINGS_EXIT,
    )
    openings.add_argument("vault", type=Path, help="the vault the claim was filed from")
    openings.add_argument("--verdict", type=Path, required=True, help="the verdict file")
    openings.add_argument(
        "--arbiter-key", type=Path, required=True, help="the arbiter's public key (PEM)"
    )
    openings.add_argument(
        "--out", type=Path, required=True, help="the openings file to write (must not exist)"
    )
    openings.add_argument("--json", action="store_true", help="print one JSON object")
    openings.set_defaults(handler=_openings)


def _openings(args: argparse.Namespace) -> int:
    from twinaudit.owner.vault import Vault
    from twinaudit.protocol.claim.openings import OpenedPair, encode_openings
    from twinaudit.protocol.claim.verdict import check_verdict
    from twinaudit.protocol.commitment import PairOpening

    if args.out.exists():
        raise InputError(f"{args.out} exists: refusing to overwrite it")
    if not args.out.parent.is_dir():
        raise InputError(f"{args.out.parent} is not a folder: create it first (mkdir -p)")
    try:
        data = args.verdict.read_bytes()
    except OSError as exc:
        raise InputError(f"cannot read verdict {args.verdict}: {exc.strerror}") from None
    verdict = check_verdict(data, load_public_key(args.arbiter_key))
    vault = Vault.open(args.vault)
    if verdict.claim.record_root != vault.root:
        raise InputError(f"the verdict is on another root than the vault {args.vault}'s")
    pairs = []
    for index in verdict.opened:
        opening = vault.opening(index)
        pairs.append(
            OpenedPair(
                opening.index,
                PairOpening(opening.salt, opening.version0, opening.version1),
                list(opening.proof),
            )
        )
    try:
        write_atomically(args.out, encode_openings(vault.root, pairs), exclusive=True)
    except FileExistsError:
        raise InputError(f"{args.out} appeared meanwhile: refusing to overwrite it") from None
    if args.json:
        print_json({"openings_file": str(args.out), "pairs": len(pairs)})
    else:
        print(f"wrote the openings of {len(pairs)} pairs to {args.out}")
    return 0
