"""Hash-chained claim transcripts and their records (spec §12).

A transcript is the header record followed by one record per opened pair, each a
canonical map. On disk and on the wire it is the concatenation of frames
``u32be(len(record)) ‖ record``. The chain is

    h_0 = tagged_hash("transcript-link", [32 zero bytes, record_0])
    h_j = tagged_hash("transcript-link", [h_{j-1}, record_j])

over the records' canonical bytes; the verdict carries the last link, so changing,
dropping, reordering or appending a record changes the hash. The header record is
``{"type": "header", "spec", "claim"}``; each pair record has :data:`PAIR_KEYS` and the
keys its score function adds
(:attr:`~twinaudit.protocol.claim.functions.ScoreFunction.record_keys`),
checked by :func:`check_pair_record`.
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Iterator
from dataclasses import dataclass, field

from twinaudit.protocol.encoding import Value, decode, encode
from twinaudit.protocol.errors import EncodingError, InputError, LimitExceededError
from twinaudit.protocol.hashing import TAG_PREFIX
from twinaudit.protocol.items import MAX_IMAGE_SIDE, MAX_LABEL
from twinaudit.protocol.limits import HASH_BYTES

from .functions import score_function
from .outcome import OUTCOME_CHARS

#: Largest transcript accepted when reading (the escrow store's cap, too).
MAX_TRANSCRIPT_BYTES = 256 * 1024 * 1024
#: Largest single record.
MAX_RECORD_BYTES = 16 * 1024 * 1024
_GENESIS = bytes(32)
_FRAME = struct.Struct(">I")
#: A fixarray of two, the tag, a fixarray of two and a 32-byte bin8 header.
_LINK_HEAD = b"\x92" + encode(TAG_PREFIX + "transcript-link") + b"\x92\xc4\x20"


def link(previous: bytes, record: bytes | memoryview) -> bytes:
    """Return the chain link after ``record`` (its canonical bytes).

    That is ``tagged_hash("transcript-link", [previous, record])``, hashed as it is
    encoded rather than encoded first: the record's bytes are not copied.
    """
    size = len(record)
    if len(previous) == 32:  # canonical([tag, [previous, ...]]) up to the record's header
        head = _LINK_HEAD + previous
    else:  # canonical([tag, [previous, b""]]) ends with b""'s header, c4 00
        head = encode([TAG_PREFIX + "transcript-link", [previous, b""]])[:-2]
    # The record's bin8/16/32 header (spec §3.2 item 5), then the record.
    if size < 1 << 8:
        head += b"\xc4" + size.to_bytes(1, "big")
    elif size < 1 << 16:
        head += b"\xc5" + size.to_bytes(2, "big")
    else:
        head += b"\xc6" + size.to_bytes(4, "big")
    digest = hashlib.sha256(head)
    digest.update(record)
    return digest.digest()


@dataclass
class TranscriptWriter:
    """Accumulates records, keeping the framed bytes and the running chain head."""

    head: bytes = _GENESIS
    count: int = 0
    _frames: list[bytes] = field(default_factory=list)

    def append(self, record: dict[str, Value]) -> bytes:
        """Add a record; return the new chain head."""
        data = encode(record)
        if len(data) > MAX_RECORD_BYTES:
            raise LimitExceededError("transcript record size", len(data), MAX_RECORD_BYTES)
        self.head = link(self.head, data)
        self.count += 1
        self._frames.append(_FRAME.pack(len(data)) + data)
        return self.head

    def to_bytes(self) -> bytes:
        """Return the framed transcript so far."""
        return b"".join(self._frames)

    def since(self, count: int) -> bytes:
        """Return the framed records after the first ``count`` (what a save appends)."""
        if not 0 <= count <= self.count:
            raise InputError(f"the transcript has {self.count} records, not {count}")
        return b"".join(self._frames[count:])

    @classmethod
    def from_bytes(cls, data: bytes) -> TranscriptWriter:
        """Rebuild a writer (to continue a resumed claim) from framed bytes."""
        writer = cls()
        for record in iter_records(data):
            writer.append(record)
        return writer


def _frames(data: bytes) -> Iterator[tuple[memoryview, dict[str, Value]]]:
    """Yield each record's canonical bytes (a view) and its map, strictly.

    Each frame's length is checked against the bytes left and the record cap before
    its record is decoded, in place, under the caps of spec §2.3; no trailing bytes.
    """
    if len(data) > MAX_TRANSCRIPT_BYTES:
        raise LimitExceededError("transcript size", len(data), MAX_TRANSCRIPT_BYTES)
    data = bytes(data)
    view = memoryview(data)
    pos = 0
    while pos < len(data):
        if pos + _FRAME.size > len(data):
            raise EncodingError("transcript ends inside a frame header")
        (size,) = _FRAME.unpack_from(data, pos)
        pos += _FRAME.size
        if size > MAX_RECORD_BYTES:
            raise LimitExceededError("transcript record size", size, MAX_RECORD_BYTES)
        if pos + size > len(data):
            raise EncodingError("transcript ends inside a record")
        value = decode(data, max_bytes=MAX_RECORD_BYTES, start=pos, end=pos + size)
        if not isinstance(value, dict):
            raise EncodingError("a transcript record must be a map")
        yield view[pos : pos + size], value
        pos += size


def iter_records(data: bytes) -> Iterator[dict[str, Value]]:
    """Yield the records of a framed transcript, strictly (canonical, no trailing bytes)."""
    for _, record in _frames(data):
        yield record


def chain_head(data: bytes) -> tuple[bytes, int]:
    """Return the final link and the number of records of a framed transcript.

    A record decodes only from its canonical bytes, so the link is over the bytes read.
    """
    head, count = _GENESIS, 0
    for raw, _ in _frames(data):
        head = link(head, raw)
        count += 1
    return head, count


#: Keys of the header record and of every pair record (spec §12).
HEADER_KEYS = frozenset({"type", "spec", "claim"})
PAIR_KEYS = frozenset({"type", "window", "index", "published", "digests", "scores", "outcome"})
#: The outcome characters a pair record may carry ("" for a pair opened after the decision).
RECORD_OUTCOMES = OUTCOME_CHARS | {""}


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _digest_pair(value: Value) -> bool:
    return (
        isinstance(value, list)
        and len(value) == 2
        and all(isinstance(d, bytes) and len(d) == HASH_BYTES for d in value)
    )


def check_pair_record(record: dict[str, Value], function: str) -> str | None:
    """Check a pair record's key set and the types of its shared fields (spec §12).

    Returns None when the record is well formed, else what is wrong with it (replay
    turns that into its verification error).
    """
    index = record.get("index")
    keys = PAIR_KEYS | score_function(function).record_keys
    if set(record) != keys:
        missing, extra = sorted(keys - set(record)), sorted(set(record) - keys)
        return f"pair record {index!r}: missing {missing}, unknown {extra}"
    window, published, scores = record["window"], record["published"], record["scores"]
    if (
        record["type"] != "pair"
        or not _is_int(index)
        or not _is_int(window)
        or window < 0  # type: ignore[operator]
        or published not in (0, 1)
        or isinstance(published, bool)
        or not _digest_pair(record["digests"])
        or not (isinstance(scores, list) and len(scores) == 2)
        or not all(isinstance(s, float) for s in scores)
        or not isinstance(record["outcome"], str)
        or record["outcome"] not in RECORD_OUTCOMES
    ):
        return f"pair record {index!r}: a field has the wrong type or value"
    if "query_digests" in record and not _digest_pair(record["query_digests"]):
        return f"pair record {index!r}: query_digests must be two SHA-256 digests"
    shape = record.get("shape", [1, 1, 1])
    if not (
        isinstance(shape, list)
        and len(shape) == 3
        and all(_is_int(d) and 1 <= d <= MAX_IMAGE_SIDE for d in shape)  # type: ignore[operator]
        and shape[2] in (1, 3)
    ):
        return f"pair record {index!r}: shape must be [H, W, C], H, W in 1..4096, C 1 or 3"
    label = record.get("label")
    if label is not None and not (_is_int(label) and 0 <= label < MAX_LABEL):  # type: ignore[operator]
        return f"pair record {index!r}: label must be nil or a class index"
    return None
