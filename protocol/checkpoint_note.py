"""The arbiter's log checkpoint as a C2SP ``tlog-checkpoint`` signed note (spec §9.5).

A checkpoint note's text is three lines, the log's *origin*, its size in ASCII
decimal and its root in base64, and optional extension lines
(:class:`CheckpointText`). The arbiter's log has the origin ``twinaudit/log/<key id>``
(its key id of §8.3, :func:`arbiter_origin`), and it signs the three lines, with no
extension line, as a plain Ed25519 note signature (type 0x01) under a key named
after that origin (:func:`arbiter_key`). Witnesses add timestamped cosignatures
(type 0x04, :mod:`twinaudit.protocol.cosignature`) to the same text.

:func:`verify_checkpoint_note` is what a client runs: the arbiter's signature, the
text's exact form, and a :class:`WitnessPolicy` of ``k`` of ``n`` witnesses whose
cosignatures must verify and be neither from the future nor older than the policy
allows. The caller passes the current time: this module reads no clock.
"""

from __future__ import annotations

import hmac
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from . import limits
from .cosignature import timestamp_of
from .errors import (
    EncodingError,
    InputError,
    LimitExceededError,
    ParameterError,
    RootMismatchError,
    SignatureError,
    VerificationError,
)
from .keys import key_id as arbiter_key_id
from .keys import raw_public_key
from .merkle import EMPTY_ROOT, MAX_TREE_SIZE
from .note import (
    COSIGNATURE_V1,
    ED25519,
    MAX_NOTE_SIGNATURES,
    Note,
    NoteSignature,
    VerifierKey,
    decode_base64,
    encode_base64,
    open_note,
    parse_note,
)

if TYPE_CHECKING:  # escrow_messages imports the signer, which imports this module
    from .escrow_messages import Checkpoint

#: The origin of an arbiter's log is this prefix and the arbiter's key id (§8.3).
ORIGIN_PREFIX: Final = "twinaudit/log/"
#: Most extension lines a checkpoint text may carry (an arbiter's carries none).
MAX_EXTENSION_LINES: Final = 16
#: Default for how far in the future a cosignature's time may be: clocks disagree.
DEFAULT_MAX_SKEW_SECONDS: Final = 300

_SIZE: Final = re.compile(r"\A(?:0|[1-9][0-9]*)\Z")
_DIGITS: Final = re.compile(r"\A[0-9]+\Z")


@dataclass(frozen=True)
class CheckpointText:
    """A checkpoint note's text: origin, tree size, root and extension lines."""

    origin: str
    size: int
    root: bytes
    extensions: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        """Validate every line: non-empty, in range, and one line each."""
        for line in (self.origin, *self.extensions):
            if not isinstance(line, str) or not line or "\n" in line:
                raise InputError("an origin or extension line is non-empty text of one line")
        if isinstance(self.size, bool) or not isinstance(self.size, int):
            raise InputError("a tree size is an integer")
        if not 0 <= self.size <= MAX_TREE_SIZE:
            raise InputError(f"tree size {self.size} is outside [0, 2^64 - 1]")
        if not isinstance(self.root, bytes) or len(self.root) != limits.HASH_BYTES:
            raise InputError(f"a root hash is {limits.HASH_BYTES} bytes")
        if len(self.extensions) > MAX_EXTENSION_LINES:
            raise LimitExceededError(
                "extension lines of a checkpoint", len(self.extensions), MAX_EXTENSION_LINES
            )

    def text(self) -> str:
        """Return the note text: one line each, every line ending in a newline."""
        lines = (self.origin, str(self.size), encode_base64(self.root), *self.extensions)
        return "".join(line + "\n" for line in lines)


def parse_checkpoint_text(text: str) -> CheckpointText:
    """Read a checkpoint note's text strictly.

    Raises:
        EncodingError: the size has a leading zero or the root is not canonical base64.
        LimitExceededError: more than :data:`MAX_EXTENSION_LINES` extension lines.
        InputError: fewer than three lines, an empty line, a size that is not ASCII
            decimal or is above 2^64 - 1, or a root that is not 32 bytes.

    """
    if not isinstance(text, str) or not text.endswith("\n"):
        raise InputError("a checkpoint text ends in a newline")
    lines = text[:-1].split("\n")
    if len(lines) < 3:
        raise InputError("a checkpoint text has an origin, a size and a root line")
    if len(lines) > 3 + MAX_EXTENSION_LINES:
        raise LimitExceededError(
            "extension lines of a checkpoint", len(lines) - 3, MAX_EXTENSION_LINES
        )
    if any(not line for line in lines):
        raise InputError("a checkpoint text has no empty line")
    origin, size_line, root_line, *extensions = lines
    if not _SIZE.match(size_line):
        if _DIGITS.match(size_line):
            raise EncodingError(f"tree size {size_line!r} has a leading zero")
        raise InputError(f"tree size {size_line!r} is not ASCII decimal")
    root = decode_base64(root_line, "the root hash")
    return CheckpointText(origin, int(size_line), root, tuple(extensions))


def arbiter_origin(public: Ed25519PublicKey) -> str:
    """Return the origin of the log of the arbiter whose key is ``public``."""
    return ORIGIN_PREFIX + arbiter_key_id(public)


def arbiter_key(public: Ed25519PublicKey) -> VerifierKey:
    """Return the arbiter's note key: named after its origin, plain Ed25519 (0x01)."""
    return VerifierKey(arbiter_origin(public), ED25519, raw_public_key(public))


def arbiter_text(size: int, root: bytes, public: Ed25519PublicKey) -> str:
    """Return the text of the arbiter's checkpoint of its log at ``size`` with ``root``."""
    if size == 0 and root != EMPTY_ROOT:
        raise RootMismatchError(EMPTY_ROOT, root, what="root of the empty log")
    return CheckpointText(arbiter_origin(public), size, root).text()


def require_arbiter_text(text: bytes, public: Ed25519PublicKey) -> CheckpointText:
    """Return the checkpoint ``text`` if it is one the arbiter of ``public`` may sign.

    That is exactly the three lines of :func:`arbiter_text` for some size and root
    (§9.5.4): the arbiter's key signs no other note text, so that none of its note
    signatures can be taken for another message.

    Raises:
        InputError: ``text`` is not such a checkpoint text (subclasses name how).

    """
    if not isinstance(text, bytes):
        raise InputError("a checkpoint text to sign is bytes")
    try:
        decoded = text.decode("utf-8")
    except UnicodeDecodeError:
        raise InputError("a checkpoint text is UTF-8") from None
    parsed = parse_checkpoint_text(decoded)
    if parsed.extensions or parsed.origin != arbiter_origin(public):
        raise InputError("the arbiter signs only its own checkpoint texts, without extension lines")
    if parsed.size == 0 and parsed.root != EMPTY_ROOT:
        raise InputError("the empty log's checkpoint carries the root H()")
    if parsed.text() != decoded:
        raise InputError("a checkpoint text to sign is in its one accepted form")
    return parsed


def sign_checkpoint_note(size: int, root: bytes, key: Ed25519PrivateKey) -> bytes:
    """Return the arbiter's checkpoint note of its log at ``size``, signed by ``key``."""
    public = key.public_key()
    text = arbiter_text(size, root, public)
    signer = arbiter_key(public)
    line = NoteSignature(signer.name, signer.key_id, key.sign(text.encode("utf-8")))
    return Note(text, (line,)).encode()


def checkpoint_note_from_signature(
    size: int, root: bytes, public: Ed25519PublicKey, signature: bytes
) -> bytes:
    """Return the checkpoint note of a signature made elsewhere, once it verifies.

    A signer in another process returns the 64 signature bytes over
    :func:`arbiter_text`; a signature over anything else is refused.
    """
    text = arbiter_text(size, root, public)
    try:
        public.verify(signature, text.encode("utf-8"))
    except InvalidSignature:
        raise SignatureError("the signer's checkpoint note signature does not verify") from None
    signer = arbiter_key(public)
    return Note(text, (NoteSignature(signer.name, signer.key_id, signature),)).encode()


def add_signatures(note: bytes, lines: Sequence[NoteSignature]) -> bytes:
    """Return ``note`` with ``lines`` appended (cosignatures a witness returned).

    Nothing is verified here: a client verifies the whole note. A line already in the
    note is not added twice.
    """
    parsed = parse_note(note)
    merged = list(parsed.signatures)
    merged += [line for line in lines if line not in merged]
    if len(merged) > MAX_NOTE_SIGNATURES:
        raise LimitExceededError("signature lines of a note", len(merged), MAX_NOTE_SIGNATURES)
    return Note(parsed.text, tuple(merged)).encode()


@dataclass(frozen=True)
class WitnessPolicy:
    """Which witnesses a client trusts and how many of them must have cosigned.

    ``witnesses`` are cosignature keys (type 0x04), each with its own public key;
    ``threshold`` is ``k``, at most ``len(witnesses)``. A cosignature whose time is
    more than ``max_skew`` seconds after the client's clock refuses the checkpoint;
    one older than ``max_age`` seconds (when given) does not count toward ``k``.
    """

    witnesses: tuple[VerifierKey, ...]
    threshold: int
    max_age: int | None = None
    max_skew: int = DEFAULT_MAX_SKEW_SECONDS

    def __post_init__(self) -> None:
        """Refuse a policy that cannot be met or could count one key twice."""
        publics = [w.public for w in self.witnesses]
        if any(w.sig_type != COSIGNATURE_V1 for w in self.witnesses):
            raise ParameterError("a witness key is a cosignature key (signature type 0x04)")
        if len(set(publics)) != len(publics):
            raise ParameterError("a witness policy names each witness public key once")
        if len(self.witnesses) > MAX_NOTE_SIGNATURES - 1:
            raise ParameterError(
                f"a witness policy names at most {MAX_NOTE_SIGNATURES - 1} witnesses"
            )
        if isinstance(self.threshold, bool) or not isinstance(self.threshold, int):
            raise ParameterError("a witness threshold is an integer")
        if not 0 <= self.threshold <= len(self.witnesses):
            raise ParameterError(
                f"threshold {self.threshold} is outside [0, {len(self.witnesses)}]"
            )
        for name, value in (("max_age", self.max_age), ("max_skew", self.max_skew)):
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, int) or value < 0
            ):
                raise ParameterError(f"{name} is a number of seconds >= 0")


#: The policy of a client that trusts the arbiter's signature alone.
NO_WITNESSES: Final = WitnessPolicy((), 0)


@dataclass(frozen=True)
class Cosigned:
    """A witness cosignature that verified: the witness's name and the time it claims."""

    name: str
    timestamp: int


@dataclass(frozen=True)
class VerifiedCheckpoint:
    """A checkpoint note that verified under the arbiter's key and a witness policy."""

    origin: str
    size: int
    root: bytes
    #: The cosignatures counted toward the policy's threshold, in note order.
    counted: tuple[Cosigned, ...] = ()
    #: Cosignatures that verified but were older than the policy's ``max_age``.
    stale: tuple[Cosigned, ...] = ()

    def require_same_tree(self, checkpoint: Checkpoint) -> None:
        """Refuse an envelope checkpoint (§9.4) of another size or root than this note."""
        if checkpoint.size != self.size or not hmac.compare_digest(checkpoint.root, self.root):
            raise VerificationError(
                f"the checkpoint note (size {self.size}) and the envelope checkpoint "
                f"(size {checkpoint.size}) name different trees"
            )


def verify_checkpoint_note(
    data: bytes,
    arbiter_public_key: Ed25519PublicKey,
    policy: WitnessPolicy = NO_WITNESSES,
    *,
    now: int | None = None,
    not_before: int | None = None,
) -> VerifiedCheckpoint:
    """Verify the arbiter's checkpoint note and its witness policy (spec §9.5.4).

    ``now`` (seconds since the Unix epoch) is required when the policy names witnesses.
    ``not_before``, where given, is the earliest time a client needs a cosignature to
    state (§9.7.3): one cosigned more than ``policy.max_skew`` seconds before it is
    stale and not counted, as one older than ``policy.max_age`` is.

    Raises:
        InputError: the note or its text is malformed (subclasses name how), or the text
            is not the arbiter's three lines.
        SignatureError: the arbiter did not sign it, or a line of a known key (the
            arbiter's or a witness's) does not verify.
        RootMismatchError: an empty log with a root other than ``H()``.
        VerificationError: the origin is not the arbiter's, a cosignature is from the
            future, or fewer than ``k`` witnesses cosigned within ``max_age``.

    """
    if not isinstance(policy, WitnessPolicy):
        raise ParameterError("policy must be a WitnessPolicy")
    if not_before is not None and (isinstance(not_before, bool) or not isinstance(not_before, int)):
        raise ParameterError("not_before is a time in seconds")
    if policy.witnesses and (isinstance(now, bool) or not isinstance(now, int)):
        raise ParameterError("a witness policy is checked at a time: pass now in seconds")
    arbiter = arbiter_key(arbiter_public_key)
    if any(w.public == arbiter.public for w in policy.witnesses):
        raise ParameterError("the arbiter's own key cannot be one of its witnesses")
    # 1. The note's form; every line of a known key verifies; others are ignored.
    opened = open_note(data, (arbiter, *policy.witnesses))
    # 2. The arbiter signed it.
    if not opened.signed_by(arbiter):
        raise SignatureError("the checkpoint note carries no signature of the arbiter's key")
    # 3. The text is the arbiter's: its origin, size and root, and no extension line.
    text = parse_checkpoint_text(opened.text)
    if text.extensions:
        raise InputError("the arbiter's checkpoint note has no extension line")
    if text.origin != arbiter.name:
        raise VerificationError(f"origin {text.origin!r} is not the arbiter's {arbiter.name!r}")
    if text.size == 0 and text.root != EMPTY_ROOT:
        raise RootMismatchError(EMPTY_ROOT, text.root, what="root of the empty log")
    # 4. The witness policy: k distinct witnesses, none from the future, fresh enough.
    clock = now if isinstance(now, int) else 0  # an int whenever a witness is named
    counted: list[Cosigned] = []
    stale: list[Cosigned] = []
    seen: set[bytes] = set()
    for key, line in opened.verified:
        if key.sig_type != COSIGNATURE_V1 or key.public in seen:
            continue
        seen.add(key.public)
        cosigned = Cosigned(key.name, timestamp_of(line.signature))
        if cosigned.timestamp > clock + policy.max_skew:
            raise VerificationError(
                f"witness {key.name!r} cosigned at {cosigned.timestamp}, "
                f"after now ({clock}) by more than {policy.max_skew} s"
            )
        too_old = policy.max_age is not None and cosigned.timestamp < clock - policy.max_age
        if not_before is not None and cosigned.timestamp < not_before - policy.max_skew:
            too_old = True
        (stale if too_old else counted).append(cosigned)
    if len(counted) < policy.threshold:
        raise VerificationError(_missing_message(policy, counted, stale))
    return VerifiedCheckpoint(text.origin, text.size, text.root, tuple(counted), tuple(stale))


def _missing_message(
    policy: WitnessPolicy, counted: Sequence[Cosigned], stale: Sequence[Cosigned]
) -> str:
    """Say how many cosignatures counted, and name the witnesses missing or stale."""
    have = {c.name for c in counted}
    old = {c.name for c in stale}
    missing = [w.name for w in policy.witnesses if w.name not in have and w.name not in old]
    parts = [f"missing: {', '.join(missing)}"] if missing else []
    if old:
        parts.append(f"stale: {', '.join(sorted(old))}")
    return (
        f"{len(counted)} of the {policy.threshold} witness cosignatures the policy "
        f"requires verified ({'; '.join(parts)})"
    )


__all__ = [
    "DEFAULT_MAX_SKEW_SECONDS",
    "MAX_EXTENSION_LINES",
    "NO_WITNESSES",
    "ORIGIN_PREFIX",
    "CheckpointText",
    "Cosigned",
    "VerifiedCheckpoint",
    "WitnessPolicy",
    "add_signatures",
    "arbiter_key",
    "arbiter_origin",
    "arbiter_text",
    "checkpoint_note_from_signature",
    "parse_checkpoint_text",
    "require_arbiter_text",
    "sign_checkpoint_note",
    "verify_checkpoint_note",
]
