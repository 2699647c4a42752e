"""The bodies of C2SP ``tlog-witness`` ``add-checkpoint`` (spec §9.7.1): pure text forms.

A log asks a witness to cosign a checkpoint by POSTing to ``<prefix>/add-checkpoint`` a
body of an *old size line* (``old <size>``, ASCII decimal without a leading zero), at
most :data:`MAX_PROOF_LINES` consistency proof lines (one base64 hash each), an empty
line and the checkpoint note. The witness answers 200 with note signature lines (its
cosignatures), or 409 with the size it last cosigned as ``text/x.tlog.size`` (a decimal
and a newline), or another status (:mod:`twinaudit.witness`).

This module reads and writes those bodies strictly and knows nothing of HTTP or of a
witness's state. Every malformation is :class:`~.errors.InputError` (the witness
answers it 400), a body or a count above its cap :class:`~.errors.LimitExceededError`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from . import limits
from .errors import EncodingError, InputError, LimitExceededError
from .merkle import MAX_TREE_SIZE
from .note import MAX_NOTE_BYTES, MAX_NOTE_SIGNATURES, NoteSignature, decode_base64, encode_base64
from .note import parse_note as _parse_note

#: Most consistency proof lines a request may carry (the C2SP text's bound: 63).
MAX_PROOF_LINES: Final = 63
#: Largest add-checkpoint body: the old size line, 63 proof lines and a note.
MAX_REQUEST_BYTES: Final = 32 + MAX_PROOF_LINES * 45 + MAX_NOTE_BYTES
#: Largest 200 answer: MAX_NOTE_SIGNATURES lines of a cosignature (each under 400 bytes).
MAX_COSIGNATURE_REPLY_BYTES: Final = MAX_NOTE_SIGNATURES * 400
#: Largest 409 answer: a tree size in decimal and a newline.
MAX_SIZE_REPLY_BYTES: Final = 24
#: The media type of a 409 answer's body.
SIZE_MEDIA_TYPE: Final = "text/x.tlog.size"

_SIZE: Final = re.compile(r"\A(?:0|[1-9][0-9]*)\Z")


def _size(text: str, what: str) -> int:
    if not _SIZE.match(text):
        if text.isascii() and text.isdigit():
            raise EncodingError(f"{what} {text!r} has a leading zero")
        raise InputError(f"{what} {text!r} is not ASCII decimal")
    value = int(text)
    if value > MAX_TREE_SIZE:
        raise InputError(f"{what} {value} is above 2^64 - 1")
    return value


@dataclass(frozen=True)
class AddCheckpoint:
    """An add-checkpoint request: the old size, the consistency proof and the note."""

    old_size: int
    proof: tuple[bytes, ...]
    note: bytes

    def __post_init__(self) -> None:
        """Validate the size, each proof hash and the count of proof lines."""
        if isinstance(self.old_size, bool) or not isinstance(self.old_size, int):
            raise InputError("an old size is an integer")
        if not 0 <= self.old_size <= MAX_TREE_SIZE:
            raise InputError(f"old size {self.old_size} is outside [0, 2^64 - 1]")
        if len(self.proof) > MAX_PROOF_LINES:
            raise LimitExceededError("consistency proof lines", len(self.proof), MAX_PROOF_LINES)
        if any(not isinstance(h, bytes) or len(h) != limits.HASH_BYTES for h in self.proof):
            raise InputError(f"a consistency proof line holds a {limits.HASH_BYTES}-byte hash")
        if not isinstance(self.note, bytes) or not self.note:
            raise InputError("an add-checkpoint request carries a checkpoint note")
        if len(self.note) > MAX_NOTE_BYTES:
            raise LimitExceededError("note size in bytes", len(self.note), MAX_NOTE_BYTES)

    def encode(self) -> bytes:
        """Return the request body."""
        head = f"old {self.old_size}\n" + "".join(encode_base64(h) + "\n" for h in self.proof)
        return (head + "\n").encode("ascii") + self.note


def parse_add_checkpoint(body: bytes) -> AddCheckpoint:
    """Read an add-checkpoint request body strictly; the note's form is checked too.

    Raises:
        LimitExceededError: above :data:`MAX_REQUEST_BYTES` or :data:`MAX_PROOF_LINES`.
        EncodingError: a size with a leading zero, a proof line not canonical base64.
        InputError: any other malformation (no old size line, no empty line, a proof
            line that is not a 32-byte hash, a malformed note).

    """
    if not isinstance(body, bytes | bytearray):
        raise InputError("an add-checkpoint body is bytes")
    if len(body) > MAX_REQUEST_BYTES:
        raise LimitExceededError("add-checkpoint body in bytes", len(body), MAX_REQUEST_BYTES)
    data = bytes(body)
    split = data.find(b"\n\n")
    if split < 0:
        raise InputError("an add-checkpoint body has an empty line before the checkpoint")
    try:
        head = data[:split].decode("ascii")
    except UnicodeDecodeError:
        raise InputError("the old size and proof lines are ASCII") from None
    lines = head.split("\n")
    old, space, size = lines[0].partition(" ")
    if old != "old" or not space:
        raise InputError("an add-checkpoint body starts with the line 'old <size>'")
    if len(lines) - 1 > MAX_PROOF_LINES:
        raise LimitExceededError("consistency proof lines", len(lines) - 1, MAX_PROOF_LINES)
    proof = []
    for line in lines[1:]:
        value = decode_base64(line, "a consistency proof line")
        if len(value) != limits.HASH_BYTES:
            raise InputError(f"a consistency proof line holds a {limits.HASH_BYTES}-byte hash")
        proof.append(value)
    note = data[split + 2 :]
    _parse_note(note)  # its form only: which keys signed it is the witness's question
    return AddCheckpoint(_size(size, "old size"), tuple(proof), note)


def encode_cosignatures(lines: Sequence[NoteSignature]) -> bytes:
    """Return a 200 answer's body: the signature lines, each ending in a newline."""
    if not lines:
        raise InputError("a witness answers at least one cosignature line")
    return "".join(line.line() for line in lines).encode("utf-8")


def parse_cosignatures(body: bytes) -> tuple[NoteSignature, ...]:
    """Read a 200 answer's signature lines (their form only; a client verifies them).

    Raises:
        LimitExceededError: above :data:`MAX_COSIGNATURE_REPLY_BYTES` or
            :data:`MAX_NOTE_SIGNATURES` lines.
        InputError: no line, a line that is not a note signature line, no final newline.

    """
    if len(body) > MAX_COSIGNATURE_REPLY_BYTES:
        raise LimitExceededError(
            "cosignature answer in bytes", len(body), MAX_COSIGNATURE_REPLY_BYTES
        )
    # A note of one placeholder line reads the lines with the note's own parser.
    return _parse_note(b"x\n\n" + bytes(body)).signatures


def encode_size(size: int) -> bytes:
    """Return a 409 answer's body: ``size`` in decimal and a newline."""
    return f"{size}\n".encode("ascii")


def parse_size(body: bytes) -> int:
    """Read a 409 answer's body (``text/x.tlog.size``).

    Raises:
        InputError: it is not a decimal size and a newline (subclasses name how).

    """
    if len(body) > MAX_SIZE_REPLY_BYTES or not body.endswith(b"\n"):
        raise InputError("a witness's size answer is a decimal and a newline")
    try:
        text = body[:-1].decode("ascii")
    except UnicodeDecodeError:
        raise InputError("a witness's size answer is ASCII") from None
    return _size(text, "the witness's size")


__all__ = [
    "MAX_COSIGNATURE_REPLY_BYTES",
    "MAX_PROOF_LINES",
    "MAX_REQUEST_BYTES",
    "MAX_SIZE_REPLY_BYTES",
    "SIZE_MEDIA_TYPE",
    "AddCheckpoint",
    "encode_cosignatures",
    "encode_size",
    "parse_add_checkpoint",
    "parse_cosignatures",
    "parse_size",
]
