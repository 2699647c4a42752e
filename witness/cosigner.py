"""The add-checkpoint checks of C2SP ``tlog-witness`` (spec §9.7.1), without HTTP.

:meth:`Cosigner.add_checkpoint` takes a request body and returns the :class:`Answer`
(status, media type, body) the server sends, in the order the spec gives:

1. 400 for a malformed body (old size line, proof lines, note form, checkpoint text);
2. 404 for an origin the witness does not watch;
3. 403 when no line of the origin's trusted keys verifies, or one of them fails;
4. 400 when the old size is above the checkpoint's size;
5. 409 with the size it last cosigned (``text/x.tlog.size``) when the old size is not
   that size;
6. 422 for an empty tree whose root is not ``H()``, a non-empty proof from size 0, a
   proof that does not verify, or the same size with another root;
7. 200 with its cosignature line, once the new state is stored by compare-and-swap
   (a request that lost a race is answered 409 with the size that won).

A witness thus never cosigns a checkpoint that is smaller than, or not consistent
with, the last one it cosigned for the origin.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from twinaudit.protocol.checkpoint_note import parse_checkpoint_text
from twinaudit.protocol.errors import InputError, ProofError, SignatureError
from twinaudit.protocol.merkle import EMPTY_ROOT, verify_consistency
from twinaudit.protocol.note import (
    COSIGNATURE_V1,
    Note,
    VerifierKey,
    check_key_name,
    cosign,
    open_note,
    parse_note,
)
from twinaudit.protocol.tlog_witness import (
    SIZE_MEDIA_TYPE,
    encode_cosignatures,
    encode_size,
    parse_add_checkpoint,
)

from .state import LogState, WitnessState

#: The media type of every answer but a 409's.
TEXT: Final = "text/plain; charset=utf-8"


@dataclass(frozen=True)
class Answer:
    """An HTTP answer: status, ``Content-Type`` and body."""

    status: int
    content_type: str
    body: bytes


def _say(status: int, message: str) -> Answer:
    return Answer(status, TEXT, (message.rstrip("\n") + "\n").encode("utf-8"))


def logs_by_origin(keys: Sequence[VerifierKey]) -> dict[str, tuple[VerifierKey, ...]]:
    """Index the logs' note keys by origin (a log's key is named after its origin)."""
    index: dict[str, tuple[VerifierKey, ...]] = {}
    for key in keys:
        if key.sig_type == COSIGNATURE_V1:
            raise InputError(f"log key {key.name!r} is a cosignature key, not a log's")
        index[key.name] = (*index.get(key.name, ()), key)
    return index


class Cosigner:
    """One witness: its name and key, the logs it watches and its state."""

    def __init__(
        self,
        name: str,
        key: Ed25519PrivateKey,
        logs: Mapping[str, Sequence[VerifierKey]],
        state: WitnessState,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        """Cosign as ``name`` with ``key`` for ``logs`` (origin to trusted keys)."""
        self.name = check_key_name(name)
        self._key = key
        self._logs = {origin: tuple(keys) for origin, keys in logs.items()}
        self._state = state
        self._clock = clock

    @property
    def vkey(self) -> VerifierKey:
        """The witness's cosignature key (type 0x04), as clients name it in a policy."""
        return VerifierKey.of(self.name, COSIGNATURE_V1, self._key.public_key())

    def add_checkpoint(self, body: bytes) -> Answer:
        """Check an add-checkpoint request and answer it (see the module)."""
        # 1. The body's form, the note's form and its checkpoint text.
        try:
            request = parse_add_checkpoint(body)
            text = parse_checkpoint_text(parse_note(request.note).text)
        except InputError as exc:
            return _say(400, f"malformed add-checkpoint request: {exc}")
        # 2. A log this witness watches.
        trusted = self._logs.get(text.origin)
        if trusted is None:
            return _say(404, f"unknown log origin {text.origin!r}")
        # 3. Signed by one of its keys, and no line of its keys fails.
        try:
            opened = open_note(request.note, trusted)
        except SignatureError as exc:
            return _say(403, f"the checkpoint is not signed by the log's key: {exc}")
        if not any(known.sig_type != COSIGNATURE_V1 for known, _ in opened.verified):
            return _say(403, "the checkpoint carries no signature of the log's key")
        # 4. The old size is at most the new one.
        if request.old_size > text.size:
            return _say(400, f"old size {request.old_size} is above the size {text.size}")
        # 5. The old size is the one last cosigned.
        state = self._state.get(text.origin)
        if request.old_size != state.size:
            return Answer(409, SIZE_MEDIA_TYPE, encode_size(state.size))
        # 6. The new tree extends the one last cosigned.
        if text.size == 0 and text.root != EMPTY_ROOT:
            return _say(422, "a checkpoint of size 0 has the root of the empty tree")
        try:
            verify_consistency(
                old_size=state.size,
                new_size=text.size,
                old_root=state.root,
                new_root=text.root,
                proof=request.proof,
            )
        except ProofError as exc:  # RootMismatchError included
            return _say(422, f"the checkpoint is not consistent with size {state.size}: {exc}")
        # 7. Cosign, store by compare-and-swap, and only then answer.
        line = cosign(opened.text, self.name, self._key, max(1, int(self._clock())))
        logged = tuple(
            signed for known, signed in opened.verified if known.sig_type != COSIGNATURE_V1
        )
        kept = Note(opened.text, (*logged, line)).encode()  # what the monitoring path serves
        lost = self._state.advance(text.origin, state, LogState(text.size, text.root, kept))
        if lost is not None:
            return Answer(409, SIZE_MEDIA_TYPE, encode_size(lost.size))
        return Answer(200, TEXT, encode_cosignatures([line]))

    def origins(self) -> tuple[str, ...]:
        """Return the origins of the logs this witness watches."""
        return tuple(self._logs)

    def latest(self, origin: str) -> bytes | None:
        """Return the last note cosigned for ``origin``, or None if there is none."""
        return self._state.get(origin).note


__all__ = ["Answer", "Cosigner", "logs_by_origin"]
