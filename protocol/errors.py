"""The error taxonomy of twinaudit: every error any role raises (spec §2.2).

Every failure twinaudit reports is a :class:`TwinauditError`, defined here, in one
module, whichever role raises it. The tree is deliberately small; callers (the gRPC
services, the CLI) map the families onto transport status codes
(:func:`twinaudit.wire.transport.status_for`) and exit codes:

- :class:`InputError` — the input is malformed, out of range or too large. Nothing
  about it was trusted. (gRPC ``INVALID_ARGUMENT``; ``RESOURCE_EXHAUSTED`` for
  :class:`LimitExceededError`; ``NOT_FOUND`` for :class:`NotFoundError`;
  ``FAILED_PRECONDITION`` for :class:`VersionError`.)
- :class:`VerificationError` — the input is well formed but a cryptographic or
  protocol check failed: a proof does not lead to the root, a salt does not open a
  commitment, a signature does not verify. (gRPC ``INVALID_ARGUMENT``.)
- :class:`StateError` — the operation is not valid in the current state (e.g. a
  detector that has already decided is given another observation). (gRPC
  ``FAILED_PRECONDITION``; ``ABORTED`` for :class:`ClaimBusyError`, whose request may
  succeed later.)
- :class:`OracleError` — the audited model's oracle failed. (gRPC ``UNAVAILABLE``,
  ``DEADLINE_EXCEEDED`` or ``FAILED_PRECONDITION`` by its reason.)

The escrow store's refusals (unknown record or claim, a root escrowed already, a claim
another run holds, a replayed claim request, a rate limit) travel over the wire. The
owner's vault, paraphraser and the oracle's model loading have codes of their own that
only the command line reports, never a remote call (spec §2.2).

Each error carries a stable ``code`` string for machines and a ``diagnostics()``
text for humans; the few refusals spec §2.2 lists also carry a ``rule``, a token a
client may act on (:data:`RULES`).
"""

from __future__ import annotations

import errno
from pathlib import Path
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


class UnknownRecordError(NotFoundError):
    """A log index or log size the store does not (yet) have; gRPC ``NOT_FOUND``."""


class UnknownClaimError(NotFoundError):
    """A claim id the store has never saved; gRPC ``NOT_FOUND``."""


class RateLimitedError(LimitExceededError):
    """A client has used up its escrow commits for now (``limit-exceeded``, RESOURCE_EXHAUSTED).

    ``burst`` commits are allowed at once, refilled at ``per_second``; ``wait_s`` is
    how long the client waits for its next one.
    """

    def __init__(self, identity: str, burst: int, per_second: float, wait_s: float) -> None:
        """Say who hit which limit and when it may commit again."""
        InputError.__init__(
            self,
            f"escrow rate limit reached for {identity} ({burst} at once, "
            f"{per_second:g}/s after that); retry in {wait_s:.1f} s",
        )
        self.what, self.size, self.limit = "escrow commits", burst + 1, burst
        self.identity, self.wait_s = identity, wait_s


#: What a :class:`ModelMismatchError` may say is wrong.
MODEL_MISMATCHES: Final = (
    "input",
    "input-shape",
    "output-shape",
    "class-count",
    "fixed-batch",
    "dtype",
    "non-finite",
)


class ModelMismatchError(InputError):
    """A model does not fit the oracle serving it (found when it is loaded or probed).

    ``mismatch`` says what (:data:`MODEL_MISMATCHES`): the model rejects the input
    (``input``), declares another input shape (``input-shape``), answers another
    shape than (N, classes) or (N, D) (``output-shape``), another number of classes
    (``class-count``), only a fixed batch (``fixed-batch``), takes or returns the
    wrong dtype (``dtype``), or returns NaN or infinity (``non-finite``). A local
    code: ``oracle serve`` and ``verifier model add`` report it before serving.
    """

    code = "model-mismatch"

    def __init__(self, mismatch: str, message: str) -> None:
        """Record what does not fit, with a one-line message."""
        assert mismatch in MODEL_MISMATCHES, mismatch
        super().__init__(f"{mismatch}: {message}")
        self.mismatch = mismatch


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


class VaultIntegrityError(VerificationError):
    """A file of the owner's vault is missing, unexpected or modified; ``file`` names it.

    ``file`` is relative to the vault directory. A local code.
    """

    code = "vault-integrity"

    def __init__(self, vault: Path, file: str, problem: str) -> None:
        """Record the vault, the file (relative to the vault) and what is wrong with it."""
        super().__init__(f"vault {vault}: {file}: {problem}")
        self.vault = vault
        self.file = file
        self.problem = problem


class StateError(TwinauditError):
    """The operation is not valid in the object's current state."""

    code = "invalid-state"


class RootAlreadyEscrowedError(StateError):
    """The request's root is already in the log (spec §9.1); gRPC ``FAILED_PRECONDITION``.

    ``index`` is the record that holds it. Its receipt and ``rho`` are never sent
    again: the log is public, so anyone could send a root copied from it.
    """

    def __init__(self, root: bytes, index: int) -> None:
        """Name the root and the record that already holds it."""
        super().__init__(
            f"root {root.hex()} is already escrowed as record {index}; a root is escrowed "
            "once (spec 9.1): commit to the pairs with fresh salts to escrow them again"
        )
        self.root = root
        self.index = index


class ReplayedRequestError(StateError):
    """A claim request nonce already used on the record (spec §10.7); gRPC ``FAILED_PRECONDITION``.

    A signed claim request is good once: a copy of one, sent again by anyone, files
    nothing.
    """


class ClaimBusyError(StateError):
    """Another holder runs the claim under an unexpired lease; gRPC ``ABORTED``.

    Raised when a claim is taken (``ClaimStore.acquire_claim``) while another
    verifier process holds it, and when a write names a lease that was taken over (the
    writer lost the claim and must stop). Nothing is changed; the claim can be taken
    once its holder releases it or its lease expires (``retry_after_s``, 0 if unknown).
    Its subclass :class:`ClaimsChangedError` refuses a claim start that raced another.
    """

    code = "claim-busy"

    def __init__(self, message: str, retry_after_s: float = 0.0) -> None:
        """Say why, and after how many seconds at most the lease lapses."""
        super().__init__(message)
        self.retry_after_s = retry_after_s


class ClaimsChangedError(ClaimBusyError):
    """A claim was filed on the record since the caller read its claims; gRPC ``ABORTED``.

    Raised by ``ClaimStore.create_claim`` when the claims filed on the record are
    no longer those the caller names (another run, in this process or another on the
    database, filed one meanwhile). Nothing is created; the caller may read the
    record's claims again and retry. Its code is ``claim-busy``, as another run's
    claim is what got in the way.
    """


class VaultStorageError(StateError):
    """Writing to the owner's vault failed; nothing of the failed step was kept.

    ``errno`` is the operating system's error number (``errno.ENOSPC`` for a full disk).
    A local code: the marking run can be resumed once the cause is fixed.
    """

    code = "vault-storage"

    def __init__(self, vault: Path, action: str, error: OSError) -> None:
        """Describe the failed ``action`` and the operating system's ``error``."""
        reason = "the disk is full" if error.errno == errno.ENOSPC else error.strerror or str(error)
        super().__init__(
            f"vault {vault}: could not {action}: {reason}; nothing of this step was kept, "
            "so the run can be resumed once the cause is fixed"
        )
        self.vault = vault
        self.errno = error.errno


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


class TransientError(OracleError):
    """The oracle's server could not answer this time; the request may be sent again.

    The arbiter's clients retry on it and, once their tries are spent, raise a plain
    :class:`OracleError` with its reason: it never leaves them.
    """


class ParaphraserError(TwinauditError):
    """The owner's paraphraser failed: unreachable, a malformed answer, or identical versions.

    ``reason`` is ``"unreachable"``, ``"invalid-answer"`` or ``"identical-versions"``.
    A local code: ``owner mark`` of texts reports it.
    """

    code = "paraphraser-failed"

    def __init__(self, reason: str, message: str) -> None:
        """Record why the paraphraser failed."""
        super().__init__(f"paraphraser {reason}: {message}")
        self.reason = reason


class RemoteCallError(TwinauditError):
    """A remote call failed before any twinaudit error came back (spec §2.2.1).

    The transport's own failures, which only the person whose client made the call
    learns of: a server that cannot be reached, a deadline that passed, a TLS
    handshake refused, a method the server does not have, or a server that failed
    without saying why (``remote-failed``). Local codes: never sent in a reply.
    """

    code = "remote-failed"


class UnavailableError(RemoteCallError):
    """No server answered at the address: not running, another port, or the network."""

    code = "unavailable"


class RemoteDeadlineError(RemoteCallError):
    """The server did not answer before the call's deadline."""

    code = "deadline-exceeded"


class UnauthenticatedError(RemoteCallError):
    """The TLS handshake failed or the server did not accept the client's credentials."""

    code = "unauthenticated"


class PermissionDeniedError(RemoteCallError):
    """The server knew the client and refused it this call."""

    code = "permission-denied"


class UnimplementedError(RemoteCallError):
    """The server does not have the method called: another service or another version."""

    code = "unimplemented"


class CancelledError(RemoteCallError):
    """The call was cancelled before it ended (by this side, or by a server stopping)."""

    code = "cancelled"
