"""``--threads``: how many CPU threads torch may use in a command that trains or marks."""

from __future__ import annotations

import argparse

from protocol.errors import InputError


def threads_arg(parser: argparse.ArgumentParser) -> None:
    """Add ``--threads``: the torch CPU threads a training or marking command uses."""
    parser.add_argument(
        "--threads",
        type=int,
        help="CPU threads torch may use (default: torch's, one per core); on a machine "
        "shared with other work, 1 or 2 is often several times faster",
    )


def use_threads(threads: int | None) -> None:
    """Hold torch to ``threads`` CPU threads (nothing when None); refuse a count below 1."""
    if threads is None:
        return
    if threads < 1:
        raise InputError("--threads must be at least 1")
    import torch  # noqa: PLC0415 - building the command line must not import torch

    torch.set_num_threads(threads)
