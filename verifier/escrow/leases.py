"""The claim leases one verifier process holds, renewed in the background.

A verifier process (one replica of the arbiter) runs each claim under a
:class:`~.store.ClaimLease` of its own (:mod:`.claim_store` explains leases). While a
claim runs, its stream may wait minutes for the owner's openings or the model's
answers, longer than a lease lasts; a :class:`LeaseKeeper` renews every lease it holds
from one background thread, every third of the lease's duration, so a live replica
keeps its claims and a dead one loses them within one duration.
"""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
import socket
import threading
from typing import Final

from .store import ClaimLease, ClaimStore

#: How long a claim's lease lasts without renewal, in seconds: after a replica dies,
#: another may take over its claims this long after its last renewal.
DEFAULT_LEASE_S: Final = 30.0
#: Renewals per lease duration.
RENEWALS_PER_LEASE: Final = 3

_log = logging.getLogger(__name__)


class LeaseKeeper:
    """Makes the leases of one verifier process, and renews the ones it holds."""

    def __init__(self, claims: ClaimStore, duration_s: float = DEFAULT_LEASE_S) -> None:
        """Hold leases of ``duration_s`` seconds on the claims of ``claims``."""
        ClaimLease("probe", duration_s)  # check the duration now, not at the first claim
        self._claims = claims
        self._duration_s = float(duration_s)
        # Names this process in the database (host and pid), never shown to clients.
        self._process = f"{socket.gethostname()[:64]}:{os.getpid()}"
        self._held: dict[str, str] = {}  # holder -> claim id
        self._leases: dict[str, ClaimLease] = {}  # holder -> lease
        self._wake = threading.Condition()
        self._thread: threading.Thread | None = None

    @property
    def duration_s(self) -> float:
        """How long each lease lasts without renewal."""
        return self._duration_s

    def new_lease(self) -> ClaimLease:
        """Return a lease for one run of one claim, held by no one else."""
        return ClaimLease(f"{self._process}:{secrets.token_hex(8)}", self._duration_s)

    def hold(self, claim_id: str, lease: ClaimLease) -> None:
        """Renew ``lease`` on ``claim_id`` (already taken) until :meth:`release`."""
        with self._wake:
            self._held[lease.holder] = claim_id
            self._leases[lease.holder] = lease
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._renew_while_held, name="claim-leases", daemon=True
                )
                self._thread.start()

    def release(self, lease: ClaimLease) -> None:
        """Stop renewing ``lease`` and give it up in the store (best effort).

        A lease the store cannot release (the database is gone) lapses by itself.
        """
        with self._wake:
            claim_id = self._held.pop(lease.holder, None)
            self._leases.pop(lease.holder, None)
            self._wake.notify_all()
        if claim_id is not None:
            with contextlib.suppress(Exception):
                self._claims.release_claim(claim_id, lease)

    def _renew_while_held(self) -> None:
        interval = self._duration_s / RENEWALS_PER_LEASE
        while True:
            with self._wake:
                self._wake.wait(interval)
                if not self._held:
                    self._thread = None  # the next hold starts a new thread
                    return
                held = [(claim_id, self._leases[h]) for h, claim_id in self._held.items()]
            for claim_id, lease in held:
                try:
                    if not self._claims.renew_lease(claim_id, lease):
                        _log.warning("lease of claim %s was taken over; its run stops", claim_id)
                        with self._wake:
                            self._held.pop(lease.holder, None)
                            self._leases.pop(lease.holder, None)
                except Exception as exc:  # a renewal thread must outlive a database hiccup
                    # The database may be back before the lease lapses: keep trying.
                    _log.warning("could not renew the lease of claim %s: %s", claim_id, exc)
