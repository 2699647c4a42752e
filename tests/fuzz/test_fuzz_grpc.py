"""Fuzz every gRPC handler of the arbiter and the oracle server (issue #22 item 8).

Real in-process servers on 127.0.0.1, started once: the arbiter (escrow and verifier
services on SQLite) holding three records — a root with no pairs behind it, 16 honest
pairs, and 16 pairs an owner committed to hostile bytes (the D2 openings: an array of
empty maps, pixels that are an array, wrong shapes, non-canonical and truncated items) —
and a model oracle. One target per method: request bytes are real requests mutated
(or random bytes); the claim stream is answered as the server asks, with openings
mutated. Every call must end with a typed status (spec §2.2 as wire/transport.py maps
it) within its deadline: never UNKNOWN or INTERNAL (an exception the handler did not
type), never DEADLINE_EXCEEDED (a hang). Settings from ``tests/support/fuzz.py``.
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import queue
import random
import threading
from collections.abc import Callable, Iterator
from functools import cache
from typing import Any

import grpc
import numpy as np
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from grpc_health.v1 import health_pb2
from hypothesis import event, given
from hypothesis import strategies as st

from tests.support.claims import make_pairset
from tests.support.fake_oracle import LinearOracle
from tests.support.fuzz import Edit, apply_edits, edits, fuzz, mutated
from tests.support.keys import KEY
from tests.support.pairset import PairSet
from twinaudit.owner.claim_client import sign_start
from twinaudit.owner.escrow_client import escrow_root
from twinaudit.practitioner.grpc_server import serve_oracle
from twinaudit.protocol.encoding import encode
from twinaudit.protocol.errors import InputError
from twinaudit.protocol.items import ImageItem, encode_item
from twinaudit.protocol.keys import key_id, raw_public_key
from twinaudit.protocol.oracles.base import check_images
from twinaudit.verifier.escrow.sqlite_store import SqliteEscrowStore
from twinaudit.verifier.server import serve_arbiter
from twinaudit.wire.escrow.v1 import escrow_pb2
from twinaudit.wire.oracle.v1 import oracle_pb2
from twinaudit.wire.transport import make_channel
from twinaudit.wire.verifier.v1 import verifier_pb2 as vpb

TIMEOUT_S = 20.0
G = grpc.StatusCode
#: Typed refusals: what the services answer for input they do not accept (spec §2.2).
REFUSALS = {
    G.INVALID_ARGUMENT,
    G.NOT_FOUND,
    G.FAILED_PRECONDITION,
    G.RESOURCE_EXHAUSTED,
    G.PERMISSION_DENIED,
    G.OUT_OF_RANGE,
}
#: ... and for a claim stream: ABORTED when it ends before the claim does (resumable).
CLAIM_REFUSALS = REFUSALS | {G.ABORTED}
#: ... and for the oracle: UNIMPLEMENTED for a capability the model does not offer.
ORACLE_REFUSALS = REFUSALS | {G.UNIMPLEMENTED}
ROOT = bytes([7]) * 32
#: The owner's claim key every record of the fuzz arbiter binds (spec §10.7).
CLAIM_KEY = Ed25519PrivateKey.from_private_bytes(bytes(range(100, 132)))
CLAIM_KEY_RAW = raw_public_key(CLAIM_KEY.public_key())
_NONCES = itertools.count()


def _signed(start: vpb.ClaimStart) -> vpb.ClaimStart:
    """Sign ``start`` with the records' claim key, a nonce fixed by its bytes and a counter.

    A fuzzed start is signed after it is changed, so that it reaches the checks past the
    signature (a byte-edited message is signed before its edits, and tests the signature).
    """
    digest = hashlib.sha256(start.SerializeToString() + next(_NONCES).to_bytes(8, "big"))
    # A field no request can carry (a NaN p) is sent unsigned: the arbiter refuses it.
    with contextlib.suppress(InputError):
        sign_start(start, CLAIM_KEY, key_id(KEY.public_key()), nonce=digest.digest())
    return start


class Entropy:
    """The arbiter's claim ids and nonces: SHAKE-256 of a seed set per example, and a counter.

    With the seed reset at the start of an example, the claim it files gets the same
    nonce, hence opens pairs in the same order, whenever it runs (tests only).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.reset(b"")

    def reset(self, seed: bytes) -> None:
        with self._lock:
            self._seed, self._counter = hashlib.sha256(seed).digest(), 0

    def __call__(self, n: int) -> bytes:
        with self._lock:
            self._counter += 1
            return hashlib.shake_256(self._seed + self._counter.to_bytes(8, "big")).digest(n)


ENTROPY = Entropy()
CLAIM = "/twinaudit.verifier.v1.Verifier/FileClaim"


class ShapedOracle(LinearOracle):
    """The test model, refusing images of a shape it does not take (InputError).

    The oracle server answers INTERNAL when the model itself fails (a crash is not the
    caller's fault, practitioner/grpc_server.py), and LinearOracle multiplies
    whatever it is given; a model adapter that knows its input shape refuses the others
    as invalid input, which is what the fuzz exercises.
    """

    def classify(self, images: Any) -> Any:
        images = check_images(images)
        if images.shape[1:] != (28, 28, 1):
            raise InputError(f"the model takes 28x28x1 images, not {images.shape[1:]}")
        return super().classify(images)


def _hostile_versions() -> tuple[list[tuple[bytes, bytes]], list[tuple[bytes, bytes]]]:
    """Pairs whose bytes are not two items of one image shape, and four good pairs.

    Each hostile pair is refused when opened, whatever the claim: its bytes are not an
    item, or not an image, or its two versions differ in shape or label.
    """
    rng = np.random.default_rng(1)
    good = [
        encode_item(ImageItem(rng.integers(0, 256, (28, 28, 1), dtype=np.uint8), 3))
        for _ in range(4)
    ]
    many = 200_000
    empty_maps = b"\xdd" + many.to_bytes(4, "big") + b"\x80" * many  # issue #22 D2
    fields = b"\xa8channels\x01\xa6height\x1c\xa4kind\xa5image\xa6pixels"
    array_pixels = b"\x85" + fields + b"\xdd" + many.to_bytes(4, "big") + b"\xc0" * many
    array_pixels += b"\xa5width\x1c"
    other_shape = encode_item(ImageItem(np.zeros((27, 28, 1), np.uint8), 3))
    no_label = encode_item(ImageItem(np.zeros((28, 28, 1), np.uint8)))
    text = encode({"kind": "text", "text": "not an image"})
    nil_label = encode(
        {
            "kind": "image",
            "height": 28,
            "width": 28,
            "channels": 1,
            "pixels": bytes(784),
            "label": None,
        }
    )
    hostile = [
        empty_maps,
        array_pixels,
        good[0][:-1],
        good[0] + b"\x00",
        b"\xc1",
        text,
        nil_label,
        b"\x91" * 40 + b"\x90",
    ]
    honest = [(good[i % 4], good[(i + 1) % 4]) for i in range(4)]
    refused = [(h, good[0]) for h in hostile]
    refused += [(good[1], other_shape), (good[2], no_label)]
    return refused, honest


@cache
def _pairs() -> dict[str, PairSet]:
    """The records' pairs: honest ones, 16 that mix both, and one per hostile pair."""
    refused, honest = _hostile_versions()
    pairs = {"honest": make_pairset(16, seed=5)}
    pairs["hostile"] = PairSet.commit("image", (honest + refused)[:16])
    for i, versions in enumerate(refused):
        pairs[f"hostile-{i}"] = PairSet.commit("image", [versions])
    return pairs


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """The arbiter with a record of each of ``_pairs()`` and one of no pairs; an oracle."""
    directory = tmp_path_factory.mktemp("fuzz-arbiter")
    oracle, oracle_port = serve_oracle(ShapedOracle(), "127.0.0.1:0")
    store = SqliteEscrowStore(directory / "escrow.db", KEY)
    # No escrow rate limit: the fixture escrows more roots than the default burst, and
    # the Commit target should reach the handler rather than the limiter.
    arbiter, port = serve_arbiter(
        store, KEY, "127.0.0.1:0", entropy=ENTROPY, escrow_rate_limit=None
    )
    channel = make_channel(f"127.0.0.1:{port}")
    oracle_channel = make_channel(f"127.0.0.1:{oracle_port}")
    records = {}
    roots = {"none": (ROOT, 8)} | {name: (p.root, len(p)) for name, p in _pairs().items()}
    try:
        for name, (root, n_pairs) in roots.items():
            receipt = escrow_root(
                channel,
                root=root,
                n_pairs=n_pairs,
                item_kind="image",
                owner="fuzz",
                claim_key=CLAIM_KEY_RAW,
                arbiter_public_key=KEY.public_key(),
            ).receipt
            records[name] = (receipt.entry.index, root, n_pairs)
        yield {
            "arbiter": channel,
            "oracle": oracle_channel,
            "oracle address": f"127.0.0.1:{oracle_port}",
            "records": records,
        }
    finally:
        channel.close()
        oracle_channel.close()
        arbiter.stop(None)
        oracle.stop(None)
        store.close()


def _call(channel: grpc.Channel, method: str, request: bytes) -> grpc.StatusCode:
    try:
        channel.unary_unary(method)(request, timeout=TIMEOUT_S)
    except grpc.RpcError as error:
        return error.code()  # type: ignore[no-any-return]
    return G.OK


def _expect(code: grpc.StatusCode, allowed: set[grpc.StatusCode]) -> None:
    event(f"status: {code.name}")
    assert code == G.OK or code in allowed, code


# --- Unary handlers ---------------------------------------------------------------------------


def _image(height: int = 28, width: int = 28) -> oracle_pb2.Image:
    pixels = np.linspace(0, 1, height * width, dtype="<f4").tobytes()
    return oracle_pb2.Image(height=height, width=width, channels=1, pixels_f32le=pixels)


UNARY: dict[str, tuple[str, list[bytes], set[grpc.StatusCode]]] = {
    "Commit": (
        "/twinaudit.escrow.v1.Escrow/Commit",
        [
            escrow_pb2.CommitRequest(
                spec_version="0.2",
                root=bytes(range(32)),
                n_pairs=16,
                item_kind="image",
                owner="o",
                claim_key=CLAIM_KEY_RAW,
            ).SerializeToString()
        ],
        REFUSALS,
    ),
    "GetRecord": (
        "/twinaudit.escrow.v1.Escrow/GetRecord",
        [escrow_pb2.GetRecordRequest(index=i).SerializeToString() for i in (0, 2, 9)],
        REFUSALS,
    ),
    "GetCheckpoint": (
        "/twinaudit.escrow.v1.Escrow/GetCheckpoint",
        [escrow_pb2.GetCheckpointRequest().SerializeToString()],
        REFUSALS,
    ),
    "GetInclusionProof": (
        "/twinaudit.escrow.v1.Escrow/GetInclusionProof",
        [escrow_pb2.GetInclusionProofRequest(index=1, size=3).SerializeToString()],
        REFUSALS,
    ),
    "GetEntries": (
        "/twinaudit.escrow.v1.Escrow/GetEntries",
        [
            escrow_pb2.GetEntriesRequest(start=start, count=count).SerializeToString()
            for start, count in ((0, 1), (1, 256), (0, 257))
        ],
        REFUSALS,
    ),
    "GetConsistencyProof": (
        "/twinaudit.escrow.v1.Escrow/GetConsistencyProof",
        [escrow_pb2.GetConsistencyProofRequest(old_size=1, new_size=3).SerializeToString()],
        REFUSALS,
    ),
    "GetVerdict": (
        "/twinaudit.verifier.v1.Verifier/GetVerdict",
        [vpb.GetVerdictRequest(claim_id="0123456789abcdef" * 2).SerializeToString()],
        REFUSALS,
    ),
    "GetPublicKey": (
        "/twinaudit.verifier.v1.Verifier/GetPublicKey",
        [vpb.GetPublicKeyRequest().SerializeToString()],
        REFUSALS,
    ),
    "arbiter health": (
        "/grpc.health.v1.Health/Check",
        [health_pb2.HealthCheckRequest(service="").SerializeToString()],
        REFUSALS,
    ),
    "arbiter health list": (
        "/grpc.health.v1.Health/List",
        [health_pb2.HealthListRequest().SerializeToString()],
        REFUSALS,
    ),
    "oracle health list": (
        "/grpc.health.v1.Health/List",
        [health_pb2.HealthListRequest().SerializeToString()],
        ORACLE_REFUSALS,
    ),
    "Describe": (
        "/twinaudit.oracle.v1.Oracle/Describe",
        [oracle_pb2.DescribeRequest().SerializeToString()],
        ORACLE_REFUSALS,
    ),
    "Classify": (
        "/twinaudit.oracle.v1.Oracle/Classify",
        [
            oracle_pb2.ClassifyRequest(images=[_image(), _image()]).SerializeToString(),
            oracle_pb2.ClassifyRequest(images=[_image(2, 3)]).SerializeToString(),
        ],
        ORACLE_REFUSALS,
    ),
    "EmbedImages": (
        "/twinaudit.oracle.v1.Oracle/EmbedImages",
        [oracle_pb2.EmbedImagesRequest(images=[_image()]).SerializeToString()],
        ORACLE_REFUSALS,
    ),
    "TokenLogprobs": (
        "/twinaudit.oracle.v1.Oracle/TokenLogprobs",
        [oracle_pb2.TokenLogprobsRequest(texts=["a text", "é"]).SerializeToString()],
        ORACLE_REFUSALS,
    ),
    "EmbedImageText": (
        "/twinaudit.oracle.v1.Oracle/EmbedImageText",
        [oracle_pb2.EmbedImageTextRequest(images=[_image()], texts=["x"]).SerializeToString()],
        ORACLE_REFUSALS,
    ),
    "oracle health": (
        "/grpc.health.v1.Health/Check",
        [health_pb2.HealthCheckRequest(service="").SerializeToString()],
        ORACLE_REFUSALS,
    ),
}


def test_every_method_has_a_target():
    """A method added to a service must get a fuzz target here (FileClaim has its own)."""
    named = {path.rsplit("/", 1)[1] for path, _, _ in UNARY.values()} | {"FileClaim"}
    for module in (vpb, escrow_pb2, oracle_pb2, health_pb2):
        for service in module.DESCRIPTOR.services_by_name.values():
            for method in service.methods:
                assert method.name in named or method.name == "Watch", method.name


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_handler(servers, name):
    """Mutated real requests, or random bytes: a typed status every time."""
    method, seeds, allowed = UNARY[name]
    channel = servers["oracle" if allowed is ORACLE_REFUSALS else "arbiter"]

    @fuzz(25)
    @given(mutated(seeds) | st.binary(max_size=64))
    def run(request):
        _expect(_call(channel, method, request), allowed)

    run()


# --- The claim stream -------------------------------------------------------------------------


def _start(servers: dict[str, Any], record: str, **fields: Any) -> vpb.ClaimStart:
    index, root, _ = servers["records"][record]
    start = vpb.ClaimStart(
        spec_version="0.2",
        record_index=index,
        record_root=root,
        tie_rule="skip",
        model=vpb.ModelRef(oracle_endpoint=servers["oracle address"], name="m"),
        score=vpb.ScoreSpec(function="image-classifier", k=1, perturbation="none", knowledge="C1"),
        test=vpb.TestSpec(name="mixture-e", p=0.05),
        window=4,
    )
    for name, value in fields.items():
        setattr(start, name, value)
    return start


def _openings(pairs: PairSet, indices: list[int]) -> vpb.Openings:
    return vpb.Openings(
        pairs=[
            vpb.PairOpening(
                index=i,
                salt=pairs.salts[i],
                version0=pairs.versions[i][0],
                version1=pairs.versions[i][1],
                proof=pairs.tree.inclusion_proof(i),
            )
            for i in indices
            if 0 <= i < len(pairs)
        ]
    )


def claim_stream(
    channel: grpc.Channel, start: bytes, answer: Callable[[list[int]], bytes]
) -> tuple[list[str], grpc.StatusCode]:
    """Run a claim: send ``start``, then ``answer(indices)`` to each request, as they come."""
    outbox: queue.Queue[bytes | None] = queue.Queue()

    def messages() -> Iterator[bytes]:
        yield start
        while (message := outbox.get()) is not None:
            yield message

    stream = channel.stream_stream(CLAIM, response_deserializer=vpb.VerifierMessage.FromString)
    kinds: list[str] = []
    try:
        for message in stream(messages(), timeout=TIMEOUT_S):
            kinds.append(message.WhichOneof("kind"))
            if kinds[-1] == "request":
                outbox.put(answer(list(message.request.indices)))
        code = G.OK
    except grpc.RpcError as error:
        code = error.code()
    finally:
        outbox.put(None)
    return kinds, code


def test_an_honest_claim_runs_to_its_verdict(servers):
    """The driver itself: unmutated openings give a verdict (the fuzz starts from here)."""
    pairs = _pairs()["honest"]
    start = vpb.ClaimMessage(start=_signed(_start(servers, "honest"))).SerializeToString()
    kinds, code = claim_stream(
        servers["arbiter"],
        start,
        lambda indices: vpb.ClaimMessage(openings=_openings(pairs, indices)).SerializeToString(),
    )
    assert code == G.OK and kinds[0] == "accepted" and kinds[-1] == "verdict"


@st.composite
def _start_messages(draw: st.DrawFn, servers: dict[str, Any]) -> tuple[str, bytes]:
    """A claim start for a record, mutated: by bytes, or one field set to another value."""
    record = draw(st.sampled_from(["honest", "hostile", "none"]))
    start = _start(servers, record)
    how = draw(st.integers(0, 5))
    if how == 1:
        signed = vpb.ClaimMessage(start=_signed(start)).SerializeToString()
        data = apply_edits(signed, draw(edits()))
        parsed = vpb.ClaimMessage()
        try:
            parsed.ParseFromString(data)
        except Exception:  # not a message: sent as it is (the interceptor refuses it)
            return record, data
        # A mutated endpoint would be dialled (a name would be looked up): keep it local.
        if parsed.start.model.oracle_endpoint != servers["oracle address"]:
            parsed.start.model.oracle_endpoint = servers["oracle address"]
        return record, parsed.SerializeToString()
    if how == 2:
        start.score.function = draw(
            st.sampled_from(["image-encoder", "language-model", "image-text", "", "x"])
        )
    elif how == 3:
        start.score.k = draw(st.integers(0, 300))
        start.score.perturbation = draw(
            st.sampled_from(["none", "dither", "pad-shift-flip", "random-resized-crop", "?"])
        )
    elif how == 4:
        start.window = draw(st.integers(0, 300))
        start.window_max = draw(st.integers(0, 300))
        start.max_pairs = draw(st.integers(0, 40))
        start.query_budget = draw(st.integers(0, 40))
    elif how == 5:
        start.test.p = draw(st.floats(allow_nan=True, allow_infinity=True))
        start.test.alpha = draw(st.floats(allow_nan=True, allow_infinity=True))
        start.test.name = draw(st.sampled_from(["mixture-e", "pprm-chernoff", ""]))
    return record, vpb.ClaimMessage(start=_signed(start)).SerializeToString()


#: What is done to one window's openings: how, byte edits, and the choices it needs
#: (which pair, the proof's new hashes, an index, a salt, an order), all drawn before
#: the server says which pairs it wants, so that an example draws the same whatever
#: the claim's order.
Plan = tuple[int, list[Edit], int, list[int], int, int, int]


def _plans() -> st.SearchStrategy[Plan]:
    return st.tuples(
        st.integers(0, 6),
        edits(),
        st.integers(0, 255),
        st.lists(st.integers(0, 20), max_size=6),
        st.sampled_from([0, 1, 15, 16, 2**63, 2**64 - 1]),
        st.integers(0, 2),
        st.integers(0, 2**32),
    )


def _answer(plan: Plan, pairs: PairSet, indices: list[int]) -> bytes:
    """The openings the server asked for, changed (or not) as ``plan`` says."""
    how, byte_edits, pick, proof_picks, index, salt, order = plan
    openings = _openings(pairs, indices)
    chosen = openings.pairs[pick % len(openings.pairs)] if openings.pairs else None
    if how == 1:
        return apply_edits(vpb.ClaimMessage(openings=openings).SerializeToString(), byte_edits)
    if how == 2 and chosen is not None:
        chosen.version0 = apply_edits(chosen.version0, byte_edits)
    elif how == 3 and chosen is not None:
        hashes = [*chosen.proof, bytes(32), b""]
        del chosen.proof[:]
        chosen.proof.extend(hashes[i % len(hashes)] for i in proof_picks)
    elif how == 4 and chosen is not None:
        chosen.index = index
        chosen.salt = (chosen.salt, b"", bytes(33))[salt]
    elif how == 5:
        kept = list(openings.pairs)
        random.Random(order).shuffle(kept)
        del openings.pairs[:]
        openings.pairs.extend(kept[: order % (len(kept) + 1)])
        openings.pairs.extend(kept[: proof_picks[0] % 3] if proof_picks else [])
    elif how == 6:
        return vpb.ClaimMessage(start=vpb.ClaimStart()).SerializeToString()
    return vpb.ClaimMessage(openings=openings).SerializeToString()


def test_claim_stream(servers):
    """FileClaim: a start, then openings answered as requested, each step possibly changed.

    The hostile record's pairs are opened honestly (their commitments hold): its bytes
    reach the item decoder (issue #22 D2) and must be refused with a typed status. The
    arbiter's claim nonces come from a seed set per example, so an example replays.
    """

    @fuzz(20)
    @given(_start_messages(servers), st.integers(0, 3), st.lists(_plans(), min_size=8, max_size=8))
    def run(start_message, honest_windows, plans):
        record, start = start_message
        pairs = _pairs().get(record) or _pairs()["honest"]
        ENTROPY.reset(start)
        answered = [0]

        def answer(indices: list[int]) -> bytes:
            window = answered[0]
            answered[0] += 1
            if window < honest_windows:
                return vpb.ClaimMessage(openings=_openings(pairs, indices)).SerializeToString()
            return _answer(plans[window % len(plans)], pairs, indices)

        kinds, code = claim_stream(servers["arbiter"], start, answer)
        event(f"messages: {'+'.join(sorted(set(kinds)))}")
        _expect(code, CLAIM_REFUSALS)

    run()


def test_hostile_openings_are_refused(servers):
    """Each hostile pair, opened as committed, ends its claim with a typed refusal.

    The D2 openings (200,000 empty maps; an image whose pixels are an array) and the
    nesting are over the caps of spec §2.3 (RESOURCE_EXHAUSTED); the rest are not items
    of the record's kind, or two versions that differ in more than their marks
    (INVALID_ARGUMENT).
    """
    refused, _ = _hostile_versions()
    codes = []
    for i in range(len(refused)):
        pairs = _pairs()[f"hostile-{i}"]

        def answer(indices: list[int], pairs: PairSet = pairs) -> bytes:
            return vpb.ClaimMessage(openings=_openings(pairs, indices)).SerializeToString()

        signed = _signed(_start(servers, f"hostile-{i}"))
        start = vpb.ClaimMessage(start=signed).SerializeToString()
        kinds, code = claim_stream(servers["arbiter"], start, answer)
        assert kinds == ["accepted", "request"]
        codes.append(code.name)
    assert codes == [
        "RESOURCE_EXHAUSTED",  # 200,000 empty maps: more sized values than the cap
        "INVALID_ARGUMENT",  # pixels as an array of nil
        "INVALID_ARGUMENT",  # truncated
        "INVALID_ARGUMENT",  # a trailing byte
        "INVALID_ARGUMENT",  # 0xc1
        "INVALID_ARGUMENT",  # a text item in an image record
        "INVALID_ARGUMENT",  # a nil label
        "RESOURCE_EXHAUSTED",  # 41 arrays deep
        "INVALID_ARGUMENT",  # two image shapes
        "INVALID_ARGUMENT",  # a label and none
    ]
