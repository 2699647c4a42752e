"""Verdicts checked with the verifier's Describe-map parser (spec §11).

The verdict payload and its checks are the claim protocol's
(:mod:`twinaudit.protocol.claim.verdict`); a claim map inside names the oracle's description,
which the verifier parses with :meth:`~twinaudit.protocol.oracles.base.OracleInfo.from_value`.
:func:`check_verdict` and :func:`parse_verdict` bind that parser, so a caller needs
only the envelope and the arbiter's key.
"""

from __future__ import annotations

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from twinaudit.protocol.claim import verdict as _verdict
from twinaudit.protocol.claim.verdict import VERDICT_KIND, Verdict, is_int
from twinaudit.protocol.encoding import Value
from twinaudit.protocol.oracles.base import OracleInfo

__all__ = ["VERDICT_KIND", "Verdict", "check_verdict", "is_int", "parse_verdict"]


def parse_verdict(value: Value) -> Verdict:
    """Check a decoded payload against the verdict schema of spec §11."""
    return _verdict.parse_verdict(value, OracleInfo.from_value)


def check_verdict(envelope_json: bytes, arbiter_key: Ed25519PublicKey) -> Verdict:
    """Verify a verdict envelope offline and return the parsed verdict (spec §11).

    The steps are :func:`twinaudit.protocol.claim.verdict.check_verdict`'s.
    """
    return _verdict.check_verdict(envelope_json, arbiter_key, OracleInfo.from_value)
