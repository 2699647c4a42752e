"""Per-identity rate limits on escrow commits (spec §13, "grinding over receipts").

An owner who escrows many roots can keep the receipt whose publication bits suit a
model that already exists; each extra receipt adds at most ``p`` to her chance of
framing it. The public log makes such grinding visible; this module makes it slow.
Each client identity has a token bucket: ``burst`` commits at once, refilled at
``per_second``. A commit that finds the bucket empty is refused with
``RESOURCE_EXHAUSTED`` before anything is stored or signed.

The identity is the client's certificate where the server runs mTLS (its SHA-256
fingerprint), otherwise its network address without the port. The ``owner`` field
of a request is self-declared, so it is not an identity: one client could name
itself anything.
"""

from __future__ import annotations

import hashlib
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from twinaudit.protocol.errors import ParameterError, RateLimitedError

#: Buckets kept at most; beyond it the fullest (idlest) buckets are forgotten, which
#: only ever grants a forgotten client a full bucket again.
MAX_TRACKED: Final = 100_000


@dataclass(frozen=True)
class RateLimit:
    """``burst`` commits at once per identity, refilled at ``per_second``."""

    per_second: float
    burst: int

    def __post_init__(self) -> None:
        """Check both are positive and finite."""
        if not (math.isfinite(self.per_second) and self.per_second > 0):
            raise ParameterError(f"escrow rate must be a positive number, not {self.per_second}")
        if isinstance(self.burst, bool) or not isinstance(self.burst, int) or self.burst < 1:
            raise ParameterError(f"escrow burst must be a positive integer, not {self.burst!r}")


#: The default, per identity: 5 commits at once, then one every 10 seconds (a sustained
#: 360 an hour). An owner escrows one root per data set; a burst of 100 (the default
#: before issue #22 D10) let a client draw 100 receipts' randomness in one second.
DEFAULT_RATE_LIMIT: Final = RateLimit(per_second=0.1, burst=5)


class CommitLimiter:
    """Token buckets by identity; thread-safe."""

    def __init__(self, limit: RateLimit, *, clock: Callable[[], float] = time.monotonic) -> None:
        """Limit every identity to ``limit``, reading time from ``clock`` (seconds)."""
        self.limit = limit
        self._clock = clock
        self._buckets: dict[str, tuple[float, float]] = {}  # identity → (tokens, at)
        self._lock = threading.Lock()

    def _tokens(self, identity: str, now: float) -> float:
        tokens, at = self._buckets.get(identity, (float(self.limit.burst), now))
        return min(float(self.limit.burst), tokens + (now - at) * self.limit.per_second)

    def take(self, identity: str) -> None:
        """Spend one of ``identity``'s commits; raise :class:`RateLimitedError` if none is left.

        The error says how long until the next commit is allowed.
        """
        with self._lock:
            now = self._clock()
            tokens = self._tokens(identity, now)
            if tokens < 1.0:
                # Nothing stored: the refill counts from the last commit granted, so a
                # client that retries often is not slowed by rounding the refill at
                # every retry (ten additions of 0.1 fall short of 1).
                raise RateLimitedError(
                    identity,
                    self.limit.burst,
                    self.limit.per_second,
                    (1.0 - tokens) / self.limit.per_second,
                )
            self._buckets[identity] = (tokens - 1.0, now)
            if len(self._buckets) > MAX_TRACKED:
                self._forget_idle(now)

    def _forget_idle(self, now: float) -> None:
        """Drop the buckets that have refilled most (forgetting one grants a full bucket)."""
        by_fullness = sorted(self._buckets, key=lambda i: self._tokens(i, now), reverse=True)
        for identity in by_fullness[: len(self._buckets) - MAX_TRACKED // 2]:
            del self._buckets[identity]


def client_identity(context: Any) -> str:
    """Return who is calling: ``cert:<sha256>`` under mTLS, else ``addr:<host>``."""
    auth = context.auth_context() or {}
    certificates = auth.get("x509_pem_cert") or []
    if certificates:
        return "cert:" + hashlib.sha256(certificates[0]).hexdigest()
    peer = str(context.peer() or "unknown")
    kind, _, rest = peer.partition(":")
    if kind in ("ipv4", "ipv6"):
        host = rest.rsplit(":", 1)[0]  # drop the port; ipv6 keeps its brackets
        return f"addr:{host}"
    return f"addr:{peer}"
