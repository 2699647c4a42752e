"""How many claims one verifier process runs at once (``verifier serve --max-claims``).

A claim holds one of the gRPC server's threads for as long as it runs: while its owner
sends openings and while its oracle answers, which a slow or hostile oracle can stretch
to its deadline at every request (issue #40 N2). The arbiter's server therefore has
``max_claims`` threads beyond those of its other calls
(:func:`twinaudit.verifier.server.serve_arbiter`), and a claim that would make ``max_claims + 1``
is refused at once (``limit-exceeded``, ``RESOURCE_EXHAUSTED``), before anything is read
or stored: escrow commits, checkpoints, verdict reads and health checks always find a
thread.
"""

from __future__ import annotations

import threading
from typing import Final

from twinaudit.protocol.errors import LimitExceededError, ParameterError

#: Claims one verifier runs at once unless ``--max-claims`` says otherwise.
DEFAULT_MAX_CLAIMS: Final = 16
#: The most ``--max-claims`` may be (each claim is a thread, and may be a child process).
MAX_MAX_CLAIMS: Final = 1024


class ClaimSlots:
    """A count of the claims running, refusing one beyond ``limit``."""

    def __init__(self, limit: int = DEFAULT_MAX_CLAIMS) -> None:
        """Allow ``limit`` claims at once (1..:data:`MAX_MAX_CLAIMS`)."""
        if isinstance(limit, bool) or not 1 <= limit <= MAX_MAX_CLAIMS:
            raise ParameterError(f"claims at once must be in 1..{MAX_MAX_CLAIMS}, got {limit!r}")
        self.limit = limit
        self._free = threading.BoundedSemaphore(limit)

    def take(self) -> None:
        """Take a slot for a claim, or raise :class:`LimitExceededError` when none is free."""
        if not self._free.acquire(blocking=False):
            raise LimitExceededError(
                "claims running at once on this verifier", self.limit + 1, self.limit
            )

    def give_back(self) -> None:
        """Free the slot of a claim that has stopped."""
        self._free.release()
