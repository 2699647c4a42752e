"""Hash-chained transcripts: framing, chain heads, and every kind of tampering."""

import struct

import pytest

from tests.support.claims import make_pairset, run_session
from tests.support.fake_oracle import LinearOracle
from twinaudit.protocol import limits
from twinaudit.protocol.claim.scores.classifier import ScoreSpec
from twinaudit.protocol.claim.transcript import TranscriptWriter, chain_head, iter_records, link
from twinaudit.protocol.encoding import encode
from twinaudit.protocol.errors import EncodingError, LimitExceededError
from twinaudit.protocol.hashing import tagged_hash


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


@pytest.mark.parametrize("size", [0, 1, 255, 256, 65535, 65536, 70000])
def test_link_hashes_the_record_in_place(size):
    previous, record = bytes(range(32)), bytes(size)
    assert link(previous, record) == tagged_hash("transcript-link", [previous, record])
    assert link(previous, memoryview(record)) == link(previous, record)
    assert link(b"short", record) == tagged_hash("transcript-link", [b"short", record])


def _sized(value):
    if isinstance(value, list):
        return 1 + sum(_sized(v) for v in value)
    if isinstance(value, dict):
        return 1 + sum(1 + _sized(v) for v in value.values())
    return int(isinstance(value, str | bytes))


@pytest.mark.parametrize("label_only", [True, False])
def test_the_densest_records_stay_far_below_max_sized_values(label_only):
    """Spec §3.3: the largest record, 256 copies of the family with the most parameters,
    holds about 4,700 sized values, under MAX_SIZED_VALUES's fixed part (8192)."""
    pairs = make_pairset(2, seed=5)
    knowledge = "C3" if label_only else "C1"
    score = ScoreSpec(k=256, perturbation="random-resized-crop-flip", knowledge=knowledge)
    oracle = LinearOracle(n_classes=10, label_only=label_only)
    session = run_session(pairs, oracle, score=score, max_pairs=1)
    records = list(iter_records(session.transcript.to_bytes()))
    assert len(records) >= 2
    densest = max(_sized(record) for record in records)
    assert 4000 < densest <= 4700 < limits.SIZED_VALUES_BASE
