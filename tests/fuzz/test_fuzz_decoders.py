"""Fuzz every decoder of bytes from another party (issue #22 item 8).

One target per decoder: the canonical decoder, items, envelope JSON and signatures,
the escrow messages (request, log entry, receipt, checkpoint, signed or not), signed
notes, vkeys and checkpoint notes with witness cosignatures, verdicts,
transcripts and their replay, claim maps, test states, Merkle proofs, public key
files and a request's openings sent in several messages. Each is seeded from real
artefacts (the spec's vectors, messages the code signs, a verdict and transcript of a
tiny claim) and asserts one thing: every input is
either accepted or refused with an error of the project's taxonomy
(``twinaudit.protocol.errors``), never another exception; and an accepted input is one the
code would have written (it re-encodes to the same bytes). Settings come from
``tests/support/fuzz.py``: a few seconds in the normal run, 50 times as many
examples with ``TWINAUDIT_FUZZ=long`` (docs/development.md).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from functools import cache, partial
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from google.protobuf.message import DecodeError
from hypothesis import event, given
from hypothesis import strategies as st

from tests.support.claims import make_pairset, run_session, signed_verdict
from tests.support.fuzz import attempt, fuzz, mutated, mutated_value
from tests.support.keys import KEY
from twinaudit.protocol.checkpoint_note import (
    WitnessPolicy,
    add_signatures,
    parse_checkpoint_text,
    sign_checkpoint_note,
    verify_checkpoint_note,
)
from twinaudit.protocol.claim.claim_map import ClaimMap
from twinaudit.protocol.claim.transcript import TranscriptWriter, chain_head, iter_records
from twinaudit.protocol.claim.verdict import VERDICT_KIND, check_verdict, parse_verdict
from twinaudit.protocol.encoding import check, decode, encode
from twinaudit.protocol.envelope import Envelope, payload_type, sign_envelope, verify_envelope
from twinaudit.protocol.errors import (
    EncodingError,
    InputError,
    LimitExceededError,
    TwinauditError,
    VerificationError,
)
from twinaudit.protocol.escrow_messages import (
    CHECKPOINT_KIND,
    RECEIPT_KIND,
    Checkpoint,
    EscrowRequest,
    Receipt,
    decode_checkpoint,
    decode_entry,
    decode_receipt,
    decode_request,
    make_entry,
    open_receipt,
    sign_checkpoint,
    sign_receipt,
    verify_checkpoint,
)
from twinaudit.protocol.items import (
    CaptionedImageItem,
    ImageItem,
    TextItem,
    decode_item,
    decode_pair,
    encode_item,
)
from twinaudit.protocol.keys import key_id, load_public_key, public_key_pem
from twinaudit.protocol.merkle import MerkleTree, verify_consistency, verify_inclusion
from twinaudit.protocol.note import (
    COSIGNATURE_V1,
    VerifierKey,
    cosign,
    open_note,
    parse_note,
    parse_vkey,
)
from twinaudit.protocol.stats.registry import test_from_state as restore_test
from twinaudit.verifier.replay import replay
from twinaudit.wire.openings import ReceivedPair, collect_openings, opening_messages
from twinaudit.wire.verifier.v1 import verifier_pb2 as vpb

VECTORS = Path(__file__).resolve().parents[2] / "spec" / "vectors"
#: The test key of spec appendix B: the vectors' verdicts are signed with it.
PUBLIC = KEY.public_key()
#: Refusals of malformed input: the family every decoder of bytes raises.
MALFORMED: tuple[type[BaseException], ...] = (InputError,)
#: ... and of input that is well formed but fails a check (a signature, a proof, replay).
REFUSED: tuple[type[BaseException], ...] = (InputError, VerificationError)
CANONICAL = (EncodingError, LimitExceededError)


def _vectors(topic: str) -> list[dict[str, Any]]:
    doc = json.loads((VECTORS / f"{topic}.json").read_text(encoding="utf-8"))
    return list(doc["cases"])


# --- Seeds: real artefacts --------------------------------------------------------------------


@cache
def canonical_seeds() -> list[bytes]:
    """The encodings of spec/vectors/encoding.json (valid and broken), and real messages."""
    seeds = []
    for case in _vectors("encoding"):
        hex_ = case["expected"]["hex"] if case["valid"] else case["input"]["hex"]
        if len(hex_) <= 4096:  # the sized-value cases are big; their kind is below anyway
            seeds.append(bytes.fromhex(hex_))
    seeds += [escrow_seeds()[kind] for kind in ("request", "entry", "receipt", "checkpoint")]
    seeds += item_seeds()[:3]
    seeds.append(claim()["payload"])
    seeds.append(b"\xdc\x00\x20" + b"\x80" * 16 + b"\xc0" * 16)  # an array16 of maps and nils
    return [seed for seed in seeds if seed]


@cache
def item_seeds() -> list[bytes]:
    """Items of every kind as the owner commits them, and openings from claims.json."""
    rng = np.random.default_rng(0)
    image = ImageItem(rng.integers(0, 256, (4, 5, 3), dtype=np.uint8), 2)
    grey = ImageItem(rng.integers(0, 256, (6, 6, 1), dtype=np.uint8))
    items = [image, grey, TextItem("a review ✓"), CaptionedImageItem(image, "a red shirt")]
    seeds = [encode_item(item) for item in items]
    for case in _vectors("claims"):
        for opening in case["input"].get("openings", [])[:1] if case["valid"] else []:
            seeds.append(bytes.fromhex(opening["version0"]))
        if len(seeds) >= 8:
            break
    return seeds


@cache
def escrow_seeds() -> dict[str, bytes]:
    """Escrow messages as the arbiter writes them: payloads and signed envelopes."""
    request = EscrowRequest(root=bytes(range(32)), n_pairs=40, item_kind="image", owner="o")
    moment = datetime(2026, 11, 21, 20, 40, 5, tzinfo=UTC)
    entry = make_entry(request, index=3, time=moment, rho=bytes(32))
    receipt = Receipt(
        arbiter=key_id(PUBLIC), entry=entry, rho=bytes(32), log_size=4, log_root=bytes(32)
    )
    checkpoint = Checkpoint(key_id(PUBLIC), 4, bytes(32), "2026-11-21T20:40:06Z")
    return {
        "request": request.encode(),
        "entry": entry.encode(),
        "receipt": receipt.encode(),
        "checkpoint": checkpoint.encode(),
        "receipt envelope": sign_receipt(receipt, KEY),
        "checkpoint envelope": sign_checkpoint(checkpoint, KEY),
    }


@cache
def claim() -> dict[str, Any]:
    """A real verdict and transcript: a tiny claim in-process, signed with the test key."""
    session = run_session(make_pairset(12, seed=4), max_pairs=6)
    other = run_session(make_pairset(24, seed=4), test="pprm-chernoff", max_pairs=6)
    envelope = signed_verdict(session, KEY)
    return {
        "envelope": envelope,
        "payload": Envelope.from_json(envelope).payload,
        "transcript": session.transcript.to_bytes(),
        "states": [session.test.state(), other.test.state()],
    }


@cache
def vector_claims() -> list[tuple[bytes, bytes]]:
    """(verdict envelope, transcript) of each whole claim of spec/vectors/verdicts.json."""
    return [
        (case["input"]["envelope"].encode(), bytes.fromhex(case["input"]["transcript"]))
        for case in _vectors("verdicts")
        if case["kind"] == "claim"
    ][:3]


@cache
def envelope_seeds() -> list[bytes]:
    seeds = [claim()["envelope"], escrow_seeds()["receipt envelope"]]
    for case in _vectors("envelope"):
        text = case.get("expected", {}).get("json") or case["input"].get("json")
        if text and len(text) < 100_000:
            seeds.append(text.encode())
    return seeds


def _resign(payload: bytes, kind: str) -> bytes:
    return sign_envelope(payload, payload_type(kind), KEY).to_json()


def _value_or_bytes(seeds: list[bytes]) -> st.SearchStrategy[bytes]:
    """Byte-level mutations of ``seeds``, or value-level ones re-encoded."""

    @st.composite
    def by_value(draw: st.DrawFn) -> bytes:
        return encode(draw(mutated_value(decode(draw(st.sampled_from(seeds)), limit_sized=False))))

    return mutated(seeds) | by_value()


# --- Targets ----------------------------------------------------------------------------------


@fuzz(300)
@given(st.deferred(lambda: mutated(canonical_seeds())) | st.binary(max_size=48))
def test_canonical_decode(data):
    """Spec §3.3: a value whose encoding is exactly the input, or a typed refusal."""
    try:
        value = decode(data)
    except CANONICAL as refused:
        event(f"refused: {refused.code}")
        with pytest.raises(type(refused)):
            check(data)
        return
    event("accepted")
    assert encode(value) == data
    assert check(data) >= 1


@fuzz(200)
@given(
    st.deferred(lambda: _value_or_bytes(item_seeds())),
    st.sampled_from([None, "image", "text", "captioned-image"]),
)
def test_item_decode(data, kind):
    """Spec §6.3: an item that re-encodes to the input, or invalid input."""
    item = attempt(decode_item, data, kind, refusals=MALFORMED)
    if item is not None:
        assert encode_item(item) == data


@fuzz(100)
@given(
    st.deferred(lambda: _value_or_bytes(item_seeds())),
    st.deferred(lambda: _value_or_bytes(item_seeds())),
    st.sampled_from(["image", "captioned-image", "text"]),
)
def test_item_pair_decode(version0, version1, kind):
    """Spec §6.3: both versions of one kind, differing in their marked content only."""
    attempt(decode_pair, version0, version1, kind, refusals=MALFORMED)


@fuzz(200)
@given(st.deferred(lambda: mutated(envelope_seeds())))
def test_envelope_json(data):
    """Spec §8.2: the one accepted form, or a typed refusal; then the signature check."""
    envelope = attempt(Envelope.from_json, data, refusals=MALFORMED)
    if envelope is None:
        return
    assert envelope.to_json() == data
    for kind in (VERDICT_KIND, RECEIPT_KIND):
        attempt(verify_envelope, envelope, PUBLIC, payload_type(kind), refusals=REFUSED)


@pytest.mark.parametrize(
    ("kind", "decoder"),
    [
        ("request", decode_request),
        ("entry", decode_entry),
        ("receipt", decode_receipt),
        ("checkpoint", decode_checkpoint),
    ],
)
def test_escrow_payloads(kind, decoder):
    """Spec §9: each escrow message decodes to one that re-encodes to the input."""

    @fuzz(100)
    @given(_value_or_bytes([escrow_seeds()[kind]]))
    def run(data):
        message = attempt(decoder, data, refusals=MALFORMED)
        if message is not None:
            assert message.encode() == data

    run()


@pytest.mark.parametrize("kind", ["receipt", "checkpoint"])
def test_escrow_envelopes(kind):
    """An owner opening what an arbiter sent: mutated bytes, or mutated payloads re-signed."""
    seed = escrow_seeds()[f"{kind} envelope"]
    payload = escrow_seeds()[kind]
    envelope_kind = RECEIPT_KIND if kind == "receipt" else CHECKPOINT_KIND
    opener = open_receipt if kind == "receipt" else verify_checkpoint

    @st.composite
    def resigned(draw: st.DrawFn) -> bytes:
        value = draw(mutated_value(decode(payload)))
        return _resign(encode(value), envelope_kind)

    @fuzz(80)
    @given(mutated([seed]) | resigned())
    def run(data):
        attempt(opener, data, PUBLIC, refusals=REFUSED)

    run()


#: The witness of the checkpoint-note target: a key of its own (seed 7 7 … 7).
WITNESS = Ed25519PrivateKey.from_private_bytes(bytes([7]) * 32)
WITNESS_KEY = VerifierKey.of("witness.example/w1", COSIGNATURE_V1, WITNESS.public_key())
NOW = 1_796_000_000


@cache
def note_seeds() -> list[bytes]:
    """Signed notes: the spec's vectors (valid and broken) and a cosigned checkpoint note."""
    seeds = [
        bytes(case["input"]["note"], "utf-8")
        for case in _vectors("notes")
        if "note" in case["input"]
    ]
    note = sign_checkpoint_note(12, bytes(range(32)), KEY)
    line = cosign(parse_note(note).text, WITNESS_KEY.name, WITNESS, NOW)
    return [*seeds[:24], add_signatures(note, [line])]


@fuzz(200)
@given(st.deferred(lambda: mutated(note_seeds())))
def test_signed_note(data):
    """Spec §9.5.1: a note that re-encodes to the input, or a typed refusal; then opened."""
    note = attempt(parse_note, data, refusals=MALFORMED)
    if note is None:
        return
    assert note.encode() == data
    attempt(open_note, data, [WITNESS_KEY], refusals=REFUSED)
    attempt(parse_checkpoint_text, note.text, refusals=MALFORMED)


@fuzz(150)
@given(st.deferred(lambda: mutated(note_seeds()[-1:])))
def test_checkpoint_note(data):
    """Spec §9.5.4: the arbiter's note under a 1-of-1 witness policy, or a typed refusal."""
    policy = WitnessPolicy((WITNESS_KEY,), 1, max_age=3600)
    verify = partial(verify_checkpoint_note, now=NOW)
    attempt(verify, data, PUBLIC, policy, refusals=REFUSED)


@fuzz(100)
@given(st.deferred(lambda: mutated([WITNESS_KEY.vkey().encode()])))
def test_vkey(data):
    """Spec §9.5.1: a vkey that writes back as the input, or a typed refusal."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return
    key = attempt(parse_vkey, text, refusals=MALFORMED)
    if key is not None:
        assert key.vkey() == text


@st.composite
def _verdicts(draw: st.DrawFn) -> bytes:
    """A real verdict's envelope mutated, or its payload mutated and signed again."""
    envelope = draw(st.sampled_from([claim()["envelope"], *(e for e, _ in vector_claims())]))
    if draw(st.booleans()):
        return draw(mutated([envelope]))
    payload = Envelope.from_json(envelope).payload
    if draw(st.booleans()):
        return _resign(draw(mutated([payload])), VERDICT_KIND)
    return _resign(encode(draw(mutated_value(decode(payload)))), VERDICT_KIND)


@fuzz(150)
@given(_verdicts())
def test_verdict(data):
    """Spec §11: a checked verdict, or a typed refusal."""
    verdict = attempt(check_verdict, data, PUBLIC, refusals=REFUSED)
    if verdict is not None:
        assert parse_verdict(dict(verdict.payload)) == verdict


def _read_transcript(data: bytes) -> tuple[bytes, int, int]:
    head, count = chain_head(data)
    return head, count, len(list(iter_records(data)))


@fuzz(150)
@given(st.deferred(lambda: mutated([claim()["transcript"], *(t for _, t in vector_claims())])))
def test_transcript_records(data):
    """Spec §12: framed canonical records, or a typed refusal; the chain over them."""
    read = attempt(_read_transcript, data, refusals=MALFORMED)
    if read is not None:
        head, count, records = read
        assert records == count
        assert TranscriptWriter.from_bytes(data).head == head


@st.composite
def _replays(draw: st.DrawFn) -> tuple[bytes, bytes]:
    """A real claim's transcript with a record changed, its verdict signed again over it.

    The verdict names the changed transcript's chain head and record count, so replay
    gets past the chain and reads the records (spec §12).
    """
    envelope, transcript = draw(
        st.sampled_from([(claim()["envelope"], claim()["transcript"]), *vector_claims()])
    )
    records = list(iter_records(transcript))
    at = draw(st.integers(0, len(records) - 1))
    if draw(st.integers(0, 3)):
        records[at] = draw(mutated_value(records[at]))
    else:
        del records[at]
    writer = TranscriptWriter()
    for record in records:
        writer.append(record)
    payload = decode(Envelope.from_json(envelope).payload)
    assert isinstance(payload, dict)
    payload["transcript"] = {"hash": writer.head, "records": writer.count}
    return _resign(encode(payload), VERDICT_KIND), writer.to_bytes()


def _check_and_replay(envelope: bytes, transcript: bytes) -> object:
    return replay(check_verdict(envelope, PUBLIC), transcript)


@fuzz(60)
@given(_replays())
def test_replay(case):
    """Replay refuses a changed record with verification-failed, never another error."""
    attempt(_check_and_replay, *case, refusals=REFUSED)


@pytest.mark.slow
@fuzz(150)
@given(st.data())
def test_claim_map(data):
    """Spec §10.1: a claim map read back (a verdict's, a transcript header's)."""
    claim_map = decode(claim()["payload"])["claim"]  # type: ignore[index]
    attempt(
        ClaimMap.from_value,
        data.draw(mutated_value(claim_map)),
        refusals=MALFORMED,
    )


@fuzz(150)
@given(st.data())
def test_test_state(data):
    """Spec §7.4: a sequential test restored from its state (as a claim resumes)."""
    value = data.draw(mutated_value(data.draw(st.sampled_from(claim()["states"]))))
    attempt(restore_test, value, refusals=(TwinauditError,))


def _merkle(index: int, size: int, proof: list[bytes], consistency: bool) -> None:
    tree = MerkleTree([bytes([i]) * 32 for i in range(16)])
    if consistency:
        verify_consistency(
            old_size=index, new_size=size, old_root=tree.root(), new_root=tree.root(), proof=proof
        )
    else:
        leaf = bytes([5]) * 32
        verify_inclusion(leaf_data=leaf, index=index, size=size, proof=proof, root=tree.root())


@fuzz(150)
@given(
    st.integers(-2, 20),
    st.integers(-2, 20),
    st.lists(st.binary(min_size=30, max_size=33), max_size=8),
    st.booleans(),
)
def test_merkle_proofs(index, size, proof, consistency):
    """Spec §6.2: any index, size and proof is a checked proof or a typed refusal."""
    if len(proof) % 2:  # half the time, the real proof of leaf 5 with one hash changed
        real = MerkleTree([bytes([i]) * 32 for i in range(16)]).inclusion_proof(5)
        proof = list(real)
        proof[index % len(proof)] = bytes(32)
    attempt(_merkle, index, size, proof, consistency, refusals=REFUSED)


@pytest.fixture(scope="module")
def key_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("keys")


@fuzz(80)
@given(st.deferred(lambda: mutated([public_key_pem(PUBLIC)])))
def test_public_key_file(key_dir, data):
    """A key file an owner is given: an Ed25519 key, or invalid input."""
    path = key_dir / "arbiter.key.pub"
    path.write_bytes(data)
    attempt(load_public_key, path, refusals=MALFORMED)


def _opening_stream() -> list[bytes]:
    """A request's openings as the owner sends them: small pairs whole, a large one in parts."""
    pairs = [
        ReceivedPair(i, bytes([i]) * 32, bytes([i]) * size, bytes([i + 1]) * (size + 1), [])
        for i, size in enumerate((40, 3000, 12))
    ]
    return [m.SerializeToString() for m in opening_messages(pairs, budget=1024)]


@st.composite
def _opening_messages(draw: st.DrawFn) -> tuple[list[bytes], int]:
    """The stream of :func:`_opening_stream` with messages dropped, repeated, moved or mutated."""
    stream = _opening_stream()
    for _ in range(draw(st.integers(0, 3))):
        position = draw(st.integers(0, len(stream) - 1))
        edit = draw(st.sampled_from(["drop", "repeat", "move", "mutate"]))
        if edit == "drop" and len(stream) > 1:
            stream.pop(position)
        elif edit == "repeat":
            stream.insert(position, stream[position])
        elif edit == "move":
            stream.insert(draw(st.integers(0, len(stream) - 1)), stream.pop(position))
        else:
            stream[position] = draw(mutated([stream[position]]))
    return stream, draw(st.sampled_from([3, 3, 3, 2, 4]))  # 3 pairs were sent


@fuzz(150)
@given(_opening_messages())
def test_openings_stream(case):
    """Spec §10.2 step 4: a request's openings reassembled, or a typed refusal."""
    stream, count = case
    messages = []
    for data in stream:
        try:
            messages.append(vpb.ClaimMessage.FromString(data))
        except DecodeError:  # gRPC refuses a message that does not parse before the verifier
            event("unparsable message")
            return
    feed = iter(messages)
    pairs = attempt(
        lambda: collect_openings(None, lambda: next(feed, None), count, min_part_bytes=512),
        refusals=MALFORMED,
    )
    if pairs is not None:
        assert len(pairs) == count
