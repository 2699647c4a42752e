"""Token buckets per client identity for escrow commits (twinaudit.verifier.escrow.rate_limit)."""

from __future__ import annotations

import pytest

from twinaudit.protocol.errors import LimitExceededError, ParameterError, RateLimitedError
from twinaudit.verifier.escrow.rate_limit import (
    DEFAULT_RATE_LIMIT,
    CommitLimiter,
    RateLimit,
    client_identity,
)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_burst_then_one_commit_per_refill_interval():
    clock = Clock()
    limiter = CommitLimiter(RateLimit(per_second=0.5, burst=3), clock=clock)
    for _ in range(3):
        limiter.take("addr:10.0.0.1")
    with pytest.raises(RateLimitedError) as refused:
        limiter.take("addr:10.0.0.1")
    assert isinstance(refused.value, LimitExceededError)  # limit-exceeded, RESOURCE_EXHAUSTED
    assert refused.value.code == "limit-exceeded"
    assert refused.value.wait_s == pytest.approx(2.0)
    assert "retry in 2.0 s" in str(refused.value)
    limiter.take("addr:10.0.0.2")  # another client has its own bucket
    clock.now += 1.9
    with pytest.raises(RateLimitedError):
        limiter.take("addr:10.0.0.1")
    clock.now += 0.2  # 2.1 s after the refusal: one token back
    limiter.take("addr:10.0.0.1")
    with pytest.raises(RateLimitedError):
        limiter.take("addr:10.0.0.1")
    clock.now += 3600  # a long pause refills to the burst, no further
    for _ in range(3):
        limiter.take("addr:10.0.0.1")
    with pytest.raises(RateLimitedError):
        limiter.take("addr:10.0.0.1")


def test_refusals_do_not_spend_the_budget():
    clock = Clock()
    limiter = CommitLimiter(RateLimit(per_second=1.0, burst=1), clock=clock)
    limiter.take("a")
    for _ in range(10):
        with pytest.raises(RateLimitedError):
            limiter.take("a")
    clock.now += 1.0
    limiter.take("a")


def test_forgetting_idle_clients_keeps_memory_bounded(monkeypatch):
    import twinaudit.verifier.escrow.rate_limit as module

    monkeypatch.setattr(module, "MAX_TRACKED", 10)
    clock = Clock()
    limiter = CommitLimiter(RateLimit(per_second=1.0, burst=2), clock=clock)
    limiter.take("busy")
    limiter.take("busy")
    for i in range(20):
        limiter.take(f"idle-{i}")
    assert len(limiter._buckets) <= 10
    with pytest.raises(RateLimitedError):  # the emptiest bucket is never forgotten
        limiter.take("busy")


@pytest.mark.parametrize(
    ("rate", "burst"), [(0.0, 1), (-1.0, 1), (float("inf"), 1), (float("nan"), 1), (1.0, 0)]
)
def test_invalid_limits_are_refused(rate, burst):
    with pytest.raises(ParameterError):
        RateLimit(rate, burst)
    with pytest.raises(ParameterError):
        RateLimit(1.0, True)


class Context:
    def __init__(self, peer: str, certs: list[bytes] | None = None) -> None:
        self._peer, self._certs = peer, certs

    def peer(self) -> str:
        return self._peer

    def auth_context(self) -> dict[str, list[bytes]]:
        return {"x509_pem_cert": self._certs} if self._certs else {}


def test_identity_is_the_certificate_else_the_address_without_port():
    assert client_identity(Context("ipv4:192.0.2.7:51234")) == "addr:192.0.2.7"
    assert client_identity(Context("ipv6:[::1]:40000")) == "addr:[::1]"
    assert client_identity(Context("unix:/tmp/sock")) == "addr:unix:/tmp/sock"
    cert = client_identity(Context("ipv4:192.0.2.7:1", [b"-----BEGIN CERTIFICATE-----x"]))
    assert cert.startswith("cert:") and len(cert) == 5 + 64
    assert cert == client_identity(
        Context("ipv4:198.51.100.1:2", [b"-----BEGIN CERTIFICATE-----x"])
    )


def test_the_default_lets_a_handful_through_at_once_then_one_per_ten_seconds():
    """Issue #22 D10: the default burst was 100 commits at once; it is 5 now."""
    assert RateLimit(per_second=0.1, burst=5) == DEFAULT_RATE_LIMIT
    clock = Clock()
    limiter = CommitLimiter(DEFAULT_RATE_LIMIT, clock=clock)
    for _ in range(5):
        limiter.take("addr:192.0.2.7")
    with pytest.raises(RateLimitedError) as refused:
        limiter.take("addr:192.0.2.7")
    assert refused.value.wait_s == pytest.approx(10.0)
    assert "(5 at once, 0.1/s after that)" in str(refused.value)
    # Sustained: one commit per 10 s, 360 in an hour of trying every second.
    granted = 0
    for _ in range(3600):
        clock.now += 1.0
        try:
            limiter.take("addr:192.0.2.7")
        except RateLimitedError:
            continue
        granted += 1
    assert granted == 360


def test_verifier_serve_defaults_to_the_default_limit():
    from twinaudit.cli.main import build_parser

    args = build_parser().parse_args(
        ["verifier", "serve", "--listen", "127.0.0.1:0", "--db", "e.db", "--key", "k"]
    )
    assert (args.escrow_rate, args.escrow_burst) == (0.1, 5)
