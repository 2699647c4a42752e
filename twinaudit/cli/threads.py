"""``--threads``: how many CPU threads torch may use in a command that trains or marks.

Two settings make torch behave on a CPU shared with other work (measured in
``docs/benchmarks.md``): OpenMP's *passive* wait policy, so that a thread waiting for
work sleeps instead of spinning on a core another process needs, and a thread count no
larger than the cores this process may run on. :func:`passive_wait` sets the first (as
an environment default, before torch is imported; an explicit ``OMP_WAIT_POLICY`` wins)
and :func:`default_threads` gives the second.
"""

from __future__ import annotations

import argparse
import os
from typing import Final

from twinaudit.protocol.errors import InputError

#: The environment variable OpenMP reads its wait policy from, once, at start-up.
WAIT_POLICY_VAR: Final = "OMP_WAIT_POLICY"
#: The most threads a command takes by default: PGD on batches of a few images and the
#: small trainings here gain little beyond this.
MAX_DEFAULT_THREADS: Final = 4


def passive_wait() -> None:
    """Default OpenMP to the passive wait policy (before torch starts its thread pool)."""
    os.environ.setdefault(WAIT_POLICY_VAR, "PASSIVE")


def default_threads() -> int:
    """Return the default thread count: the CPUs this process may use, at most 4."""
    try:
        available = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        available = os.cpu_count() or 1
    return max(1, min(available, MAX_DEFAULT_THREADS))


def threads_arg(parser: argparse.ArgumentParser) -> None:
    """Add ``--threads``: the torch CPU threads a training or marking command uses."""
    parser.add_argument(
        "--threads",
        type=int,
        help=f"CPU threads torch may use (default: the CPUs this process may use, at most "
        f"{MAX_DEFAULT_THREADS}; {default_threads()} here). Threads wait passively "
        f"({WAIT_POLICY_VAR}=PASSIVE unless set), so a busy machine slows them less",
    )


def use_threads(threads: int | None) -> None:
    """Hold torch to ``threads`` CPU threads (:func:`default_threads` when None).

    Raises:
        InputError: a count below 1.

    """
    if threads is None:
        threads = default_threads()
    if threads < 1:
        raise InputError("--threads must be at least 1")
    passive_wait()
    import torch  # noqa: PLC0415 - building the command line must not import torch

    torch.set_num_threads(threads)
