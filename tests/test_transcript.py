"""Hash-chained transcripts: framing, chain heads, and every kind of tampering."""

import struct

import pytest

from protocol.encoding import encode
from protocol.errors import EncodingError, LimitExceededError
from protocol.hashing import tagged_hash
from verifier.transcript import TranscriptWriter, chain_head, iter_records


def _writer(n=5):
    w = TranscriptWriter()
    w.append({"type": "header", "claim": {"x": 1}})
    for i in range(n):
        w.append({"type": "pair", "index": i, "scores": [0.5, -0.25]})
    return w


def test_chain_definition_and_round_trip():
    w = _writer(3)
    data = w.to_bytes()
    records = list(iter_records(data))
    head = bytes(32)
    for record in records:
        head = tagged_hash("transcript-link", [head, encode(record)])
    assert chain_head(data) == (head, 4) == (w.head, w.count)
    again = TranscriptWriter.from_bytes(data)
    assert again.head == w.head and again.to_bytes() == data


def test_tampering_changes_or_breaks_the_chain():
    w = _writer(4)
    data = w.to_bytes()
    records = list(iter_records(data))
    frames = [struct.pack(">I", len(encode(r))) + encode(r) for r in records]
    reordered = b"".join([frames[0], frames[2], frames[1], *frames[3:]])
    dropped = b"".join(frames[:-1])
    extra = data + frames[-1]
    for other in (reordered, dropped, extra):
        assert chain_head(other)[0] != w.head
    flipped = bytearray(data)
    flipped[-1] ^= 0x01  # inside the last record's last float
    assert chain_head(bytes(flipped))[0] != w.head


@pytest.mark.parametrize(
    "data",
    [b"\x00\x00", b"\x00\x00\x00\x05\x81", b"\x00\x00\x00\x01\x05", b"\x00\x00\x00\x02\xcc\x05"],
    ids=["short header", "short record", "record not a map", "non-canonical record"],
)
def test_malformed_transcripts_rejected(data):
    with pytest.raises(EncodingError):
        list(iter_records(data))


def test_oversized_record_rejected():
    with pytest.raises(LimitExceededError):
        list(iter_records(struct.pack(">I", 1 << 30)))
