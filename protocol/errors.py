"""The error taxonomy of the protocol core.

Every failure the protocol core reports is a :class:`TwinauditError`. The tree is
deliberately small; callers (the gRPC services, the CLI) map the families onto
transport status codes and exit codes:

- :class:`InputError` — the input is malformed, out of range or too large. Nothing
  about it was trusted. (gRPC ``INVALID_ARGUMENT``; ``RESOURCE_EXHAUSTED`` for
  :class:`LimitExceededError`; ``FAILED_PRECONDITION`` for :class:`VersionError`.)
- :class:`VerificationError` — the input is well formed but a cryptographic or
  protocol check failed: a proof does not lead to the root, a salt does not open a
  commitment, a signature does not verify. (gRPC ``INVALID_ARGUMENT`` or
  ``PERMISSION_DENIED`` depending on the service.)
- :class:`StateError` — the operation is not valid in the current state (e.g. a
  detector that has already decided is given another observation).

Each error carries a stable ``code`` string for machines and a ``diagnostics()``
text for humans; the few refusals spec §2.2 lists also carry a ``rule``, a token a
client may act on (:data:`RULES`).
"""

from __future__ import annotations

from typing import Final, Self

#: The refusal rules of spec §2.2: tokens naming which requirement an input broke, for
#: the refusals a client may answer by changing its request. ``c4-one-copy``: an
#: image-classifier claim whose knowledge condition is (or resolved to) C4 with one
#: copy per version (spec §10.3), which would tie every pair.
RULES: Final = frozenset({"c4-one-copy"})


class TwinauditError(Exception):
    """Base class of every error raised by twinaudit."""

    code: str = "error"
    #: The refusal rule of spec §2.2 this error reports (one of :data:`RULES`), or None.
    rule: str | None = None

    def with_rule(self, rule: str) -> Self:
        """Return this error naming ``rule`` (one of :data:`RULES`), to be raised."""
        if rule not in RULES:
            raise ValueError(f"unknown refusal rule {rule!r}; known: {sorted(RULES)}")
        self.rule = rule
        return self

    def diagnostics(self) -> str:
        """Return a human-readable explanation, including the error's code."""
        return f"[{self.code}] {self}"


class InputError(TwinauditError):
    """The input is malformed or outside the domain the protocol accepts."""

    code = "invalid-input"


class EncodingError(InputError):
    """A byte string is not the canonical encoding of any value (spec §3)."""

    code = "non-canonical-encoding"


class LimitExceededError(InputError):
    """An input exceeds one of the named size caps in :mod:`twinaudit.protocol.limits`."""

    code = "limit-exceeded"

    def __init__(self, what: str, size: int, limit: int) -> None:
        """Record which cap was hit, by how much."""
        super().__init__(f"{what} is {size}, above the limit of {limit}")
        self.what = what
        self.size = size
        self.limit = limit


class ParameterError(InputError):
    """A numeric or enumerated parameter is outside its allowed domain."""

    code = "invalid-parameter"


class NotFoundError(InputError):
    """The input names something that does not exist (an escrow record, a claim)."""

    code = "not-found"


class VersionError(InputError):
    """A message names a protocol or spec version this implementation does not speak."""

    code = "unsupported-version"


class VerificationError(TwinauditError):
    """A well-formed input failed a cryptographic or protocol check."""

    code = "verification-failed"


class ProofError(VerificationError):
    """A Merkle proof is structurally invalid (wrong length, index out of range)."""

    code = "invalid-proof"


class RootMismatchError(ProofError):
    """A Merkle proof was processed but led to a different root than expected."""

    code = "root-mismatch"

    def __init__(self, expected: bytes, computed: bytes, what: str = "root") -> None:
        """Keep both roots so that diagnostics can show them."""
        super().__init__(f"{what} mismatch: expected {expected.hex()}, computed {computed.hex()}")
        self.expected = expected
        self.computed = computed


class CommitmentError(VerificationError):
    """An opening (salt and versions) does not match its commitment."""

    code = "commitment-mismatch"


class SignatureError(VerificationError):
    """A signed envelope does not verify under the expected key."""

    code = "invalid-signature"


class StateError(TwinauditError):
    """The operation is not valid in the object's current state."""

    code = "invalid-state"


class OracleError(TwinauditError):
    """The audited model's oracle failed: unreachable, too slow, or a malformed answer.

    ``reason`` is one of ``"unreachable"``, ``"deadline"``, ``"invalid-answer"``. A claim
    whose oracle fails ends without a verdict.
    """

    code = "oracle-failed"

    def __init__(self, reason: str, message: str) -> None:
        """Record why the oracle failed."""
        super().__init__(f"oracle {reason}: {message}")
        self.reason = reason
