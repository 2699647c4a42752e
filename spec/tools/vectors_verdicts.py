"""Build spec/vectors/verdicts.json: whole claims, signed, with their transcripts (§11, §12).

Each valid case is a verdict envelope signed with the test key of appendix B and the
transcript it signs; checking the verdict (§11) and replaying the transcript (§12)
must succeed and give the listed decision, indicators and final state. The claims
cover both tests, both tie rules, a stop on the query budget, probability and
label answers, and a detection. Broken cases are one valid claim with one field
changed and signed again (``check``: the verdict must be refused, ``invalid-input``)
or one transcript record changed and chained again into a re-signed verdict, or
one verdict field that checking cannot refuse changed and signed again, the transcript
unchanged (``replay``: ``verification-failed``), so that only the check named can
refuse them.

The claims run through the verifier's claim engine against a deterministic stand-in
model: its probability vector for an image is the 10 bytes of SHA-256 of the image's
float32 bytes, plus one, divided by their sum (exact in any IEEE 754 binary64
arithmetic), except that the ``memoriser`` answers an image equal to a published
version with probability 1 − 9·2^-20 on its committed label.

Run ``python -m spec.tools.vectors_verdicts`` to rewrite the file; the conformance
test fails if the file differs from what :func:`build` returns.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import hashlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from twinaudit.protocol import SPEC_VERSION
from twinaudit.protocol.claim.answer_records import pair_rows
from twinaudit.protocol.claim.filing import ClaimRequest, Filing, sign_claim_request
from twinaudit.protocol.claim.openings import OpenedPair, encode_openings
from twinaudit.protocol.claim.scores.classifier import (
    BASIC_ARITHMETIC,
    LEGACY_ARITHMETIC,
    MAX_MARGIN,
    ScoreSpec,
)
from twinaudit.protocol.claim.transcript import TranscriptWriter, iter_records
from twinaudit.protocol.claim.verdict import check_verdict
from twinaudit.protocol.commitment import PairOpening, commit_pair
from twinaudit.protocol.encoding import Value, decode, encode
from twinaudit.protocol.envelope import Envelope, payload_type, sign_envelope
from twinaudit.protocol.items import ImageItem, decode_item, encode_item
from twinaudit.protocol.keys import key_id, raw_public_key
from twinaudit.protocol.merkle import MerkleTree
from twinaudit.protocol.oracles.base import (
    ClassifierOracle,
    ClassifyAnswer,
    OracleInfo,
    check_images,
)
from twinaudit.protocol.oracles.signed_answers import (
    SignedBatch,
    classify_rows,
    image_query_digest,
    sign_answer_batch,
)
from twinaudit.protocol.seeds import publication_bits
from twinaudit.protocol.stats.base import TiePolicy
from twinaudit.verifier.claim import ClaimParams, ClaimRecord, ClaimSession
from twinaudit.verifier.replay import replay
from twinaudit.wire.claim_start import start_map, to_claim_start

from .vectors_core import TEST_KEY_SEED, render

VECTOR_FILE = Path(__file__).resolve().parent.parent / "vectors" / "verdicts.json"
N_PAIRS = 24
SIDE = 8
N_CLASSES = 10
RHO = hashlib.sha256(b"twinaudit vectors rho").digest()
TIME = "2026-11-24T00:00:00Z"
RECEIPT_TIME = "2026-11-23T00:00:00Z"
#: The private seed of the owner's claim key in the vectors' keyed record (spec §10.7), and
#: of another key, which the record does not bind.
CLAIM_KEY_SEED = hashlib.sha256(b"twinaudit vectors claim key").digest()
OTHER_CLAIM_KEY_SEED = hashlib.sha256(b"twinaudit vectors other claim key").digest()
#: The private seed of the answer key of the vectors' signing oracle (spec §10.8).
ANSWER_KEY_SEED = hashlib.sha256(b"twinaudit vectors answer key").digest()


def _pairs() -> tuple[list[tuple[bytes, bytes]], list[int]]:
    """Return the canonical bytes of both versions of every pair, and the labels."""
    rng = np.random.default_rng(20261124)
    base = rng.integers(32, 224, (N_PAIRS, SIDE, SIDE, 1))
    signs = np.where(rng.random((N_PAIRS, SIDE, SIDE, 1)) < 0.5, -16, 16)
    labels = [int(y) for y in rng.integers(0, N_CLASSES, N_PAIRS)]
    versions = []
    for i in range(N_PAIRS):
        v0 = np.clip(base[i] + signs[i], 0, 255).astype(np.uint8)
        v1 = np.clip(base[i] - signs[i], 0, 255).astype(np.uint8)
        versions.append(
            (encode_item(ImageItem(v0, labels[i])), encode_item(ImageItem(v1, labels[i])))
        )
    return versions, labels


class HashOracle(ClassifierOracle):
    """Probabilities from SHA-256 of the image bytes; optionally memorising some images."""

    def __init__(
        self,
        label_only: bool = False,
        known: dict[bytes, int] | None = None,
        digest: str | None = None,
    ) -> None:
        """Answer labels instead of probabilities when ``label_only``; ``known``: bytes → label.

        ``digest`` is the model digest it reports (an arbiter-held artefact's SHA-256).
        """
        self.known = known or {}
        self._info = OracleInfo(
            "vector-oracle",
            digest or ("memoriser" if known else "sha256"),
            ("classify",),
            "label" if label_only else "probabilities",
            N_CLASSES,
            512,
        )

    @property
    def info(self) -> OracleInfo:
        """The Describe map's fields."""
        return self._info

    def classify(self, images: npt.NDArray[np.float32]) -> ClassifyAnswer:
        """Answer each image (see the module docstring)."""
        images = check_images(images)
        rows = np.empty((len(images), N_CLASSES), dtype=np.float64)
        for n, image in enumerate(images):
            label = self.known.get(np.ascontiguousarray(image).tobytes())
            if label is not None:
                rows[n] = 2.0**-20
                rows[n, label] = 1.0 - 9 * 2.0**-20
                continue
            weights = np.array(
                [b + 1 for b in hashlib.sha256(image.tobytes()).digest()[:N_CLASSES]],
                dtype=np.float64,
            )
            rows[n] = weights / weights.sum()
        if self._info.classify_output == "label":
            return ClassifyAnswer(labels=rows.argmax(axis=1).astype(np.int64))
        return ClassifyAnswer(probabilities=rows)


class SigningHashOracle(HashOracle):
    """A :class:`HashOracle` that signs every answer batch with its answer key (spec §10.8).

    In process: inside :meth:`signed_batches` each ``classify`` call is one batch, signed
    over the claim's nonce, its images' digests and its rows, and collected as a verifier's
    client collects the batches it checked.
    """

    def __init__(self) -> None:
        """Answer as :class:`HashOracle` does, under the key of :data:`ANSWER_KEY_SEED`."""
        super().__init__()
        self._key = Ed25519PrivateKey.from_private_bytes(ANSWER_KEY_SEED)
        self._info = dataclasses.replace(
            self._info, answer_key=raw_public_key(self._key.public_key())
        )
        self._signing: tuple[bytes, list[SignedBatch]] | None = None

    @contextlib.contextmanager
    def signed_batches(self, claim_nonce: bytes) -> Iterator[list[SignedBatch]]:
        """Sign every batch of the block over ``claim_nonce``; collect the batches."""
        batches: list[SignedBatch] = []
        self._signing = (claim_nonce, batches)
        try:
            yield batches
        finally:
            self._signing = None

    def classify(self, images: npt.NDArray[np.float32]) -> ClassifyAnswer:
        """Answer as :class:`HashOracle`, and sign the batch inside :meth:`signed_batches`."""
        answer = super().classify(images)
        if self._signing is not None:
            nonce, batches = self._signing
            digests = tuple(
                image_query_digest(np.ascontiguousarray(image, dtype="<f4").tobytes())
                for image in images
            )
            rows = classify_rows(answer)
            signature = sign_answer_batch(self._key, nonce, digests, rows)
            batches.append(SignedBatch(digests, (), tuple(rows), signature))
        return answer


def _committed() -> tuple[list[tuple[bytes, bytes]], list[bytes], MerkleTree]:
    """Return the pairs' versions, their salts (SHA-256 of a counter) and the Merkle tree."""
    versions, _ = _pairs()
    salts = [hashlib.sha256(b"vector salt %d" % i).digest() for i in range(N_PAIRS)]
    commitments = [commit_pair(v0, v1, s)[0] for (v0, v1), s in zip(versions, salts, strict=True)]
    return versions, salts, MerkleTree(commitments)


#: The SHA-256 of the arbiter-held artefact of the held claim (spec §10.1: ``held:sha256:``).
HELD_DIGEST = hashlib.sha256(b"twinaudit vectors held artefact").hexdigest()


def _run(
    name: str,
    params: dict[str, Any],
    oracle: ClassifierOracle,
    endpoint: str = "vector-oracle:0",
    *,
    excluded: tuple[int, ...] = (),
    earlier_claims: int = 0,
    keyed: bool = False,
) -> tuple[bytes, bytes]:
    """Run one claim to its end; return its signed verdict envelope (JSON) and transcript.

    ``excluded`` are the pairs earlier claims opened (§10.2 step 2), ``earlier_claims``
    how many claims came before on the record (§11). ``keyed``: the record binds the
    vectors' claim key, which signed the claim's request, and the verdict has a
    ``filing`` (§10.7, §11).
    """
    versions, salts, tree = _committed()
    record = ClaimRecord(0, tree.root(), N_PAIRS, "image", RHO, RECEIPT_TIME)
    params = dict(params)
    # Made before the arithmetic basic-v1 (spec §10.3.1): claims of the rule before (§1.2).
    arithmetic: str = params.pop("arithmetic", LEGACY_ARITHMETIC)
    if params["test_name"] != "pprm-chernoff":
        # Made under grid15-v1, the default until grid16-v1 (spec §7.3.8): they stay as
        # they were; a claim may ask for the default with prior None.
        params.setdefault("prior", "grid15-v1")
    claim = ClaimParams(0, tree.root(), endpoint, "vector-model", **params)
    filing = _filing(name, claim) if keyed else None
    nonce = hashlib.sha256(f"twinaudit vectors nonce {name}".encode()).digest()
    session = ClaimSession.start(
        f"vector-{name}", record, claim, oracle, nonce, excluded=excluded, arithmetic=arithmetic
    )
    while indices := session.next_request():
        session.submit(
            [(i, PairOpening(salts[i], *versions[i]), tree.inclusion_proof(i)) for i in indices]
        )
    key = Ed25519PrivateKey.from_private_bytes(TEST_KEY_SEED)
    payload = session.verdict_payload(
        arbiter=key_id(key.public_key()),
        time=TIME,
        environment={"implementation": "vectors"},
        earlier_claims=earlier_claims,
        filing=filing,
    )
    return _sign(payload), session.transcript.to_bytes()


def _filing(name: str, claim: ClaimParams) -> Filing:
    """Return the signed request that filed ``claim`` (its ClaimStart as the owner sends it)."""
    owner = Ed25519PrivateKey.from_private_bytes(CLAIM_KEY_SEED)
    arbiter = Ed25519PrivateKey.from_private_bytes(TEST_KEY_SEED)
    # Their owners named no prior: TestSpec.prior did not exist, and the arbiter's default
    # was grid15-v1 (spec §7.3.8, §10.7), so the start maps are those of then.
    request = ClaimRequest(
        arbiter=key_id(arbiter.public_key()),
        start=start_map(to_claim_start(dataclasses.replace(claim, prior=None))),
        nonce=hashlib.sha256(f"twinaudit vectors request nonce {name}".encode()).digest(),
    )
    return Filing.from_envelope(sign_claim_request(request, owner), owner.public_key())


def _sign(payload: dict[str, Value]) -> bytes:
    key = Ed25519PrivateKey.from_private_bytes(TEST_KEY_SEED)
    return sign_envelope(encode(payload), payload_type("verdict"), key).to_json()


def _memoriser() -> HashOracle:
    """An oracle that recalls the published versions (what a model that trained on them does)."""
    versions, labels = _pairs()
    bits = publication_bits(_committed()[2].root(), RHO, N_PAIRS)
    known = {}
    for i, bit in enumerate(bits):
        item = decode_item(versions[i][int(bit)], "image")
        assert isinstance(item, ImageItem)
        known[(item.pixels.astype(np.float32) / np.float32(255)).tobytes()] = labels[i]
    return HashOracle(known=known)


#: The short claim (four pairs).
_SHORT_PARAMS: dict[str, Any] = {
    "score": ScoreSpec(k=1, perturbation="dither", knowledge="C1"),
    "test_name": "mixture-e",
    "p": 0.05,
    "max_pairs": 4,
    "window": 4,
}


def _claims() -> dict[str, tuple[bytes, bytes]]:
    """Run every valid claim of the file."""
    c1 = ScoreSpec(k=2, perturbation="pad-shift-flip-dither", knowledge="C1")
    # The short claim (four pairs), on a keyless record and on a keyed one.
    short = _SHORT_PARAMS
    memorised: dict[str, Any] = {
        "score": ScoreSpec(k=1, perturbation="none", knowledge="C1"),
        "test_name": "mixture-e",
        "p": 0.05,
        "window": 2,
        "window_max": 2,
    }
    return {
        "mixture-e, skip, C1 pad-shift-flip-dither K=2": _run(
            "a", {"score": c1, "test_name": "mixture-e", "p": 0.05}, HashOracle()
        ),
        _PPRM: _run(
            "b",
            {
                "score": ScoreSpec(k=1, perturbation="dither", knowledge="C3"),
                "test_name": "pprm-chernoff",
                "p": 0.05,
                "tie_rule": TiePolicy.COIN,
                "window": 4,
                "window_max": 4,
            },
            HashOracle(label_only=True),
        ),
        "mixture-e, coin, stop on the query budget": _run(
            "c",
            {
                "score": ScoreSpec(k=1, perturbation="none", knowledge="C2"),
                "test_name": "mixture-e",
                "p": 0.05,
                "tie_rule": TiePolicy.COIN,
                "window": 2,
                "query_budget": 14,
            },
            HashOracle(),
        ),
        _SHORT_CLAIM: _run("e", short, HashOracle()),
        "mixture-e, skip, C1 dither K=1 with a tie margin of 0.25": _run(
            "f",
            {
                "score": ScoreSpec(k=1, perturbation="dither", knowledge="C1", margin=0.25),
                "test_name": "mixture-e",
                "p": 0.05,
                "max_pairs": 12,
                "window": 4,
                "window_max": 4,
            },
            HashOracle(),
        ),
        _GRADED: _run(
            "g",
            {
                "score": ScoreSpec(k=1, perturbation="none", knowledge="C1", margin=0.01),
                "test_name": "mixture-graded",
                "p": 0.05,
                "window": 2,
                "window_max": 2,
            },
            _memoriser(),
        ),
        _GRADED_NO_DRAW: _run(
            "j",
            {
                "score": ScoreSpec(k=1, perturbation="dither", knowledge="C1", margin=MAX_MARGIN),
                "test_name": "mixture-graded",
                "p": 0.05,
                "max_pairs": 4,
                "window": 4,
            },
            HashOracle(),
        ),
        "mixture-e, skip, C1 dither K=1, an arbiter-held model (held:sha256:)": _run(
            "h",
            {
                "score": ScoreSpec(k=1, perturbation="dither", knowledge="C1"),
                "test_name": "mixture-e",
                "p": 0.05,
                "max_pairs": 4,
                "window": 4,
            },
            HashOracle(digest=HELD_DIGEST),
            endpoint=f"held:sha256:{HELD_DIGEST}",
        ),
        "mixture-e, skip, a memorising model is detected": _run("d", memorised, _memoriser()),
        "mixture-e, skip, a memorising model is detected under the default prior grid16-v1": _run(
            "k", {**memorised, "prior": None}, _memoriser()
        ),
        _FILED: _run("l", short, HashOracle(), keyed=True),
        _FRESH: _run(
            "i",
            memorised,
            _memoriser(),
            excluded=FRESH_EXCLUDED,
            earlier_claims=1,
        ),
    }


def _payload(envelope: bytes) -> dict[str, Value]:
    """Return the decoded payload of a verdict envelope this module signed."""
    payload = decode(Envelope.from_json(envelope).payload)
    assert isinstance(payload, dict)
    return payload


def _valid(name: str, envelope: bytes, transcript: bytes) -> dict[str, Any]:
    payload = _payload(envelope)
    final = payload["final"]
    assert isinstance(final, dict)
    return {
        "name": name,
        "kind": "claim",
        "valid": True,
        "input": {"envelope": envelope.decode(), "transcript": transcript.hex()},
        "expected": {
            "decision": payload["decision"],
            "stop": payload["stop"],
            "indicators": payload["indicators"],
            "opened": payload["opened"],
            "draws": final["draws"],
            "successes": final["successes"],
            "interval": final["interval"],
            "log_statistic": None
            if final["log_statistic"] is None
            else float(final["log_statistic"]).hex(),  # type: ignore[arg-type]
        },
    }


Edit = Callable[[dict[str, Any]], None]


def set_field(path: str, value: Any) -> Edit:
    """Return an edit setting the dotted ``path`` of a map (a payload, a record) to ``value``."""

    def edit(target: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        for name in parents:
            target = target[name]
        target[last] = value

    return edit


def no_draw_with_statistic(payload: dict[str, Any]) -> None:
    """Say the test drew nothing, with a log statistic of 0.5 (issue #40 N7)."""
    payload["final"].update(draws=0, successes=0, interval=None, log_statistic=0.5)
    if "grades" in payload["final"]:
        payload["final"]["grades"] = [0] * 6


def drop_field(path: str) -> Edit:
    """Return an edit deleting the dotted ``path`` of a map."""

    def edit(target: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        for name in parents:
            target = target[name]
        del target[last]

    return edit


#: Verdict fields broken one at a time (signed again): check must refuse each.
CHECK_CASES: dict[str, Edit] = {
    "claim.model is a number": set_field("claim.model", 5),
    "claim.test is a number": set_field("claim.test", 5),
    "final.grades on a mixture-e verdict": set_field("final.grades", [0, 0, 0, 0, 0, 0]),
    "claim.record without n_pairs": drop_field("claim.record.n_pairs"),
    "claim.record.root of 31 bytes": set_field("claim.record.root", bytes(31)),
    "claim.score names a knowledge word": set_field("claim.score.knowledge", "labelled"),
    "claim.score spells out a margin of 0.0": set_field("claim.score.margin", 0.0),
    "claim.score has a margin for C1 that is an integer": set_field("claim.score.margin", 1),
    "claim.test.params for another n_pairs": set_field("claim.test.params.n_pairs", 3),
    "claim.test.params with an extra key": set_field("claim.test.params.extra", 1),
    "claim.tie_rule unknown": set_field("claim.tie_rule", "maybe"),
    "claim.window_max below window": set_field("claim.window_max", 1),
    "claim.query_budget is a boolean": set_field("claim.query_budget", True),
    "claim_id empty": set_field("claim_id", ""),
    "environment maps to a number": set_field("environment", {"implementation": 1}),
    "final.successes above draws": set_field("final.successes", 1000),
    "final.interval of one number": set_field("final.interval", [1]),
    "decision detected, stop exhausted": set_field("decision", "detected"),
    "a pair opened twice": set_field("opened", [0, 0]),
    "indicators longer than the pairs opened": set_field("indicators", "1" * 100),
    "time not RFC 3339": set_field("time", "2026-11-24 00:00:00"),
    "transcript.records is a boolean": set_field("transcript.records", True),
    "transcript.records negative": set_field("transcript.records", -1),
    "final.log_statistic 0.5 with no draw": no_draw_with_statistic,
    "final.log_statistic nil after draws": set_field("final.log_statistic", None),
    "final.interval on a mixture-e verdict": set_field("final.interval", [0, 1]),
    "claim.model.oracle.input_shape of two sides": set_field(
        "claim.model.oracle.input_shape", [8, 8]
    ),
    "claim.model.oracle.model_format present but empty": set_field(
        "claim.model.oracle.model_format", ""
    ),
    "claim.model.oracle with an unknown key": set_field("claim.model.oracle.hardware", "gpu"),
    "claim.model.endpoint held:sha256: of another digest than the model's": set_field(
        "claim.model.endpoint", "held:sha256:" + "0" * 64
    ),
    "claim.model.endpoint held: without a SHA-256": set_field(
        "claim.model.endpoint", "held:court-exhibit-7"
    ),
    "an opened pair beyond the record (index n_pairs)": lambda p: p["opened"].__setitem__(
        -1, p["claim"]["record"]["n_pairs"]
    ),
    "claim.model.oracle.capabilities not sorted": set_field(
        "claim.model.oracle.capabilities", ["embed-images", "classify"]
    ),
    "claim.model.oracle.capabilities with a name in upper case": set_field(
        "claim.model.oracle.capabilities", ["Classify"]
    ),
}


def first_pair(edit: Edit) -> Callable[[list[dict[str, Any]]], None]:
    """Return a transcript edit applying ``edit`` to the first pair record."""

    def apply(records: list[dict[str, Any]]) -> None:
        edit(records[1])

    return apply


def no_records(records: list[dict[str, Any]]) -> None:
    """Remove every record, the header too."""
    records.clear()


def _header_spec(records: list[dict[str, Any]]) -> None:
    records[0]["spec"] = "9.9"


#: Transcript records broken one at a time (chained and signed again): replay must refuse each.
REPLAY_CASES: dict[str, Callable[[list[dict[str, Any]]], None]] = {
    "no records": no_records,
    "header of another spec version": _header_spec,
    "pair record without published": first_pair(drop_field("published")),
    "pair record with an extra key": first_pair(set_field("extra", 1)),
    "pair record of another type": first_pair(set_field("type", "pairs")),
    "pair digests of 31 bytes": first_pair(set_field("digests", [bytes(31), bytes(32)])),
    "pair query_digests three": first_pair(set_field("query_digests", [bytes(32)] * 3)),
    "pair shape of two numbers": first_pair(set_field("shape", [8, 8])),
    "pair scores integers": first_pair(set_field("scores", [1, 2])),
    "pair answers of integers": first_pair(set_field("answers", [[[1, 2]], [[3, 4]]])),
    "pair params not the PRG's": first_pair(
        lambda r: r.__setitem__("params", [r["params"][1], r["params"][0]])
    ),
    "pair outcome flipped": first_pair(
        lambda r: r.__setitem__("outcome", {"1": "0", "0": "1"}.get(r["outcome"], "1"))
    ),
}


def _flip_first_indicator(payload: dict[str, Any]) -> None:
    first = payload["indicators"][0]
    payload["indicators"] = {"1": "0", "0": "1"}.get(first, "1") + payload["indicators"][1:]


def _grades_moved_down(payload: dict[str, Any]) -> None:
    grades = payload["final"]["grades"]
    grades[0], grades[4] = grades[0] + grades[4], 0


def _grades_short(payload: dict[str, Any]) -> None:
    payload["final"]["grades"][4] -= 1


def _grades_five(payload: dict[str, Any]) -> None:
    payload["final"]["grades"].pop()


def _one_success_less(payload: dict[str, Any]) -> None:
    payload["final"]["successes"] -= 1


def _statistic_off(payload: dict[str, Any]) -> None:
    payload["final"]["log_statistic"] *= 1.0 + 1e-6


def _swap_first_opened(payload: dict[str, Any]) -> None:
    opened = payload["opened"]
    opened[0], opened[1] = opened[1], opened[0]


def _two_queries_more(payload: dict[str, Any]) -> None:
    payload["queries"] += 2


def _drop_excluded(payload: dict[str, Any]) -> None:
    del payload["claim"]["excluded"]
    payload["claim"]["test"]["params"]["n_pairs"] = N_PAIRS


def _one_pair_fewer(payload: dict[str, Any]) -> None:
    payload["queries"] -= payload["queries"] // len(payload["opened"])


_SHORT_CLAIM = "mixture-e, skip, C1 dither K=1, max_pairs 4"
_PPRM = "pprm-chernoff, coin, C3 label answers, dither K=1"
_FILED = (
    "mixture-e, skip, C1 dither K=1, max_pairs 4, on a keyed record: the owner's signed "
    "request that filed the claim (filing)"
)
_GRADED = "mixture-graded, skip, C1 none K=1 margin 0.01, a memorising model is detected"
_DETECTION = "mixture-e, skip, a memorising model is detected"
_GRADED_NO_DRAW = (
    "mixture-graded, skip, every pair within the largest tie margin: no bit fed, "
    "final.grades six zeros"
)
_FRESH = (
    "mixture-e, skip, C1 none K=1, the pairs an earlier claim opened excluded, "
    "a memorising model is detected over the pairs left"
)
#: The pairs the excluding claim's map lists (as if one earlier claim had opened them).
FRESH_EXCLUDED: tuple[int, ...] = (1, 4, 5, 9, 16, 23)

#: Verdict fields changed (signed again) so that the verdict still checks (§11) but is
#: not what its unchanged transcript replays to (§12): (claim, change, edit). Replay must
#: refuse each.
VERDICT_REPLAY_CASES: list[tuple[str, str, Edit]] = [
    (
        _SHORT_CLAIM,
        "a verdict that says detected",
        lambda p: p.update(decision="detected", stop="detected"),
    ),
    (
        _DETECTION,
        "a detection that says not detected",
        lambda p: p.update(decision="not-detected", stop="exhausted"),
    ),
    (_SHORT_CLAIM, "an indicator flipped", _flip_first_indicator),
    (_SHORT_CLAIM, "final.successes one less", _one_success_less),
    (_SHORT_CLAIM, "final.log_statistic off by a relative 1e-6", _statistic_off),
    (_SHORT_CLAIM, "the first two opened pairs swapped", _swap_first_opened),
    (_SHORT_CLAIM, "two queries more than the pairs sent", _two_queries_more),
    (_SHORT_CLAIM, "a budget stop that says exhausted", lambda p: p.update(stop="exhausted")),
    (_DETECTION, "a detection whose queries say one pair fewer", _one_pair_fewer),
    (_GRADED, "a graded verdict whose ones are moved to grade 1", _grades_moved_down),
    (_FRESH, "the excluded list emptied, the claim map no longer the header's", _drop_excluded),
]

#: Changes to the excluding claim's verdict that checking refuses (§11).
FRESH_CHECK_CASES: dict[str, Edit] = {
    "opened lists a pair the claim map excludes": lambda p: p["opened"].__setitem__(
        0, p["claim"]["excluded"][0]
    ),
    "claim.excluded not increasing": lambda p: p["claim"]["excluded"].reverse(),
    "claim.excluded lists every pair": set_field("claim.excluded", list(range(N_PAIRS))),
    "claim.excluded empty (the key is left out instead)": set_field("claim.excluded", []),
    "claim.excluded lists a pair past n_pairs": set_field("claim.excluded", [N_PAIRS]),
    "claim.test.params for n_pairs before the exclusion": set_field(
        "claim.test.params.n_pairs", N_PAIRS
    ),
}

#: Changes to the paper's test's verdict that checking refuses (§11: ``final``).
PPRM_CHECK_CASES: dict[str, Edit] = {
    "final.log_statistic on a pprm-chernoff verdict": set_field("final.log_statistic", 0.5),
    "final.interval nil after draws": set_field("final.interval", None),
    "final.interval with no draw": lambda p: p["final"].update(draws=0, successes=0),
}

#: Changes to the graded claim's verdict that checking refuses (§11: ``final.grades``).
GRADED_CHECK_CASES: dict[str, Edit] = {
    "final.grades that do not add up to draws": _grades_short,
    "final.grades missing from a graded verdict": drop_field("final.grades"),
    "final.grades of five counts": _grades_five,
    "final.log_statistic 0.5 with no draw, graded": no_draw_with_statistic,
}


def _resigned(change: Edit, seed: bytes = CLAIM_KEY_SEED) -> Edit:
    """Return an edit changing the filing's request and signing it again with ``seed``'s key.

    With the claim key's own seed, only step 7 of §11 can tell that the request does not
    ask for the claim the verdict records.
    """

    def edit(payload: dict[str, Any]) -> None:
        filing = payload["filing"]
        change(filing["request"])
        key = Ed25519PrivateKey.from_private_bytes(seed)
        envelope = Envelope.from_json(sign_claim_request(_request_of(filing["request"]), key))
        filing["signature"] = envelope.signatures[0].sig

    return edit


def _request_of(value: dict[str, Any]) -> ClaimRequest:
    return ClaimRequest(
        spec=value["spec"], arbiter=value["arbiter"], start=value["start"], nonce=value["nonce"]
    )


#: Changes to the keyed claim's verdict that checking refuses (§11 steps 4 and 7), with
#: the error each gets.
FILING_CHECK_CASES: dict[str, tuple[Edit, str]] = {
    "filing signed by a key the filing does not name": (
        _resigned(lambda r: None, OTHER_CLAIM_KEY_SEED),
        "invalid-signature",
    ),
    "filing.request for another arbiter": (
        _resigned(lambda r: r.__setitem__("arbiter", "0" * 64)),
        "verification-failed",
    ),
    "filing.request asks for another p": (
        _resigned(lambda r: r["start"]["test"].__setitem__("p", 0.01)),
        "verification-failed",
    ),
    "filing.request asks for another model endpoint": (
        _resigned(lambda r: r["start"].__setitem__("endpoint", "other-oracle:0")),
        "verification-failed",
    ),
    "filing.request asks for another perturbation": (
        _resigned(lambda r: r["start"]["score"].__setitem__("perturbation", "none")),
        "verification-failed",
    ),
    "filing.request asks for another record root": (
        _resigned(lambda r: r["start"].__setitem__("record_root", bytes(32))),
        "verification-failed",
    ),
    "filing.request is a resume, not the start that filed the claim": (
        _resigned(lambda r: r["start"].__setitem__("resume_claim_id", "vector-l")),
        "verification-failed",
    ),
    "filing.request is a dry run": (
        _resigned(lambda r: r["start"].__setitem__("dry_run", True)),
        "verification-failed",
    ),
    "filing.request has probes, which only a dry run carries": (
        _resigned(lambda r: r["start"].__setitem__("probes", [[28, 28, 1]])),
        "verification-failed",
    ),
    "filing without its signature": (drop_field("filing.signature"), "invalid-input"),
    "filing.claim_key of 31 bytes": (set_field("filing.claim_key", bytes(31)), "invalid-input"),
    "filing.signature of 63 bytes": (set_field("filing.signature", bytes(63)), "invalid-input"),
    "filing.request.start without probes": (
        drop_field("filing.request.start.probes"),
        "invalid-input",
    ),
    "filing.request.start.window a float": (
        set_field("filing.request.start.window", 4.0),
        "invalid-input",
    ),
    "filing.request.nonce of 16 bytes": (
        set_field("filing.request.nonce", bytes(16)),
        "invalid-input",
    ),
    "arbiter is another key's id than the signing key's (§11 step 6)": (
        set_field("arbiter", "ab" * 32),
        "invalid-signature",
    ),
}


def _check_cases(
    envelope: bytes, edits: dict[str, Edit] | dict[str, tuple[Edit, str]]
) -> list[dict[str, Any]]:
    """One case per row of ``edits`` applied to the verdict: checking fails (invalid-input,
    or the error a row names)."""
    cases = []
    for name, row in edits.items():
        edit, error = row if isinstance(row, tuple) else (row, "invalid-input")
        broken = copy.deepcopy(_payload(envelope))
        edit(broken)
        cases.append(
            {
                "name": f"check: {name}",
                "kind": "check",
                "valid": False,
                "input": {"envelope": _sign(broken).decode()},
                "error": error,
            }
        )
    return cases


def _verdict_replay_cases(claims: dict[str, tuple[bytes, bytes]]) -> list[dict[str, Any]]:
    """One case per row of :data:`VERDICT_REPLAY_CASES`, the claim's transcript unchanged."""
    cases = []
    for claim, name, edit in VERDICT_REPLAY_CASES:
        envelope, transcript = claims[claim]
        changed = copy.deepcopy(_payload(envelope))
        edit(changed)
        cases.append(
            {
                "name": f"replay: {name}",
                "kind": "replay",
                "valid": False,
                "input": {"envelope": _sign(changed).decode(), "transcript": transcript.hex()},
                "error": "verification-failed",
            }
        )
    return cases


def _broken(envelope: bytes, transcript: bytes) -> list[dict[str, Any]]:
    payload = _payload(envelope)
    cases: list[dict[str, Any]] = []
    for name, edit in CHECK_CASES.items():
        broken = copy.deepcopy(payload)
        edit(broken)
        cases.append(
            {
                "name": f"check: {name}",
                "kind": "check",
                "valid": False,
                "input": {"envelope": _sign(broken).decode()},
                "error": "invalid-input",
            }
        )
    return cases + _record_cases(payload, transcript, REPLAY_CASES, "replay")


def _record_cases(
    payload: dict[str, Value],
    transcript: bytes,
    edits: dict[str, Callable[[list[dict[str, Any]]], None]],
    kind: str,
    **extra: str,
) -> list[dict[str, Any]]:
    """One ``kind`` case per row of ``edits``: the transcript's records changed, chained
    again, and the verdict signed again for them; ``extra`` joins each case's input."""
    records = list(iter_records(transcript))
    cases = []
    for name, edit in edits.items():
        changed = copy.deepcopy(records)
        edit(changed)
        signed, chained = _rechained(payload, changed)
        cases.append(
            {
                "name": f"{kind}: {name}",
                "kind": kind,
                "valid": False,
                "input": {"envelope": signed.decode(), "transcript": chained.hex(), **extra},
                "error": "verification-failed",
            }
        )
    return cases


def _rechained(payload: dict[str, Value], records: list[dict[str, Any]]) -> tuple[bytes, bytes]:
    """Chain ``records`` into a transcript and sign ``payload`` for it; return both."""
    writer = TranscriptWriter()
    for record in records:
        writer.append(record)
    rechained = dict(payload, transcript={"hash": writer.head, "records": writer.count})
    return _sign(rechained), writer.to_bytes()


def _openings(envelope: bytes) -> bytes:
    """The openings file (§12.1) of a vector verdict's opened pairs."""
    versions, salts, tree = _committed()
    opened = _payload(envelope)["opened"]
    assert isinstance(opened, list)
    pairs = [
        OpenedPair(i, PairOpening(salts[i], *versions[i]), tree.inclusion_proof(i))
        for i in map(int, opened)
    ]
    return encode_openings(tree.root(), pairs)


#: Record fields that the items fix, changed in the first pair record (chained and signed
#: again): the verdict checks and replays, and checking it against the openings refuses it.
OPENINGS_CASES: dict[str, Callable[[list[dict[str, Any]]], None]] = {
    "pair shape one row more": first_pair(
        lambda r: r.__setitem__("shape", [r["shape"][0] + 1, *r["shape"][1:]])
    ),
    "pair shape of three channels": first_pair(
        lambda r: r.__setitem__("shape", [*r["shape"][:2], 3])
    ),
    "pair version digests swapped": first_pair(
        lambda r: r.__setitem__("digests", r["digests"][::-1])
    ),
    "pair query digest of version 0 zeroed": first_pair(
        lambda r: r.__setitem__("query_digests", [bytes(32), r["query_digests"][1]])
    ),
}


def _openings_cases(
    envelope: bytes,
    transcript: bytes,
    name: str = "the verdict's records are its items'",
    edits: dict[str, Callable[[list[dict[str, Any]]], None]] = OPENINGS_CASES,
) -> list[dict[str, Any]]:
    """The claim checked against its openings (case ``name``), then each row of ``edits``
    (by default :data:`OPENINGS_CASES`)."""
    payload, openings = _payload(envelope), _openings(envelope).hex()
    cases: list[dict[str, Any]] = [
        {
            "name": f"openings: {name}",
            "kind": "openings",
            "valid": True,
            "input": {
                "envelope": envelope.decode(),
                "transcript": transcript.hex(),
                "openings": openings,
            },
            "expected": {"pairs": len(payload["opened"])},
        }
    ]
    return cases + _record_cases(payload, transcript, edits, "openings", openings=openings)


def _signed_again(edit: Callable[[list[bytes]], None]) -> Callable[[list[dict[str, Any]]], None]:
    """Return an edit of the last answers record's digests, signed again with the oracle's key.

    The signature verifies under the claim's answer key over the changed digests and the
    rows the record's slots name, so replay accepts the transcript; only the openings
    can tell that a signed digest is not the claim's query (spec §12).
    """

    def apply(records: list[dict[str, Any]]) -> None:
        claim = records[0]["claim"]
        score = claim["score"]
        batch = [r for r in records if r["type"] == "answers"][-1]
        edit(batch["query_digests"])
        rows = {
            r["index"]: pair_rows(score["function"], score["k"], r)
            for r in records
            if r["type"] == "pair" and r["window"] == batch["window"]
        }
        batch["signature"] = sign_answer_batch(
            Ed25519PrivateKey.from_private_bytes(ANSWER_KEY_SEED),
            claim["claim_nonce"],
            batch["query_digests"],
            [rows[i][q] for i, q in batch["slots"]],
        )

    return apply


def _another_query(digests: list[bytes]) -> None:
    digests[0] = hashlib.sha256(b"a query the claim never sent").digest()


def _swap_two(digests: list[bytes]) -> None:
    digests[0], digests[1] = digests[1], digests[0]


#: The signed claim's records changed in their last answers record, signed again with the
#: oracle's key (and the verdict with the arbiter's): where a pair record holds the digest
#: of each query (``K`` = 1) replay refuses it; with ``K`` = 2 it replays, the openings
#: refuse it.
SIGNED_OPENINGS_CASES: dict[str, Callable[[list[dict[str, Any]]], None]] = {
    "signed answers: a signed query digest of a query the claim never sent": _signed_again(
        _another_query
    ),
    "signed answers: two signed query digests swapped": _signed_again(_swap_two),
}
_SIGNED_CLAIM = f"{_SHORT_CLAIM}, arithmetic basic-v1, answers signed by the oracle"
#: The signed claim's pair records changed where they record a query's digest, chained
#: and the verdict signed again with the ARBITER's key (the answers records untouched).
PAIR_DIGEST_CASES: dict[str, Callable[[list[dict[str, Any]]], None]] = {
    "signed answers: pair query digest of version 0 zeroed": first_pair(
        lambda r: r.__setitem__("query_digests", [bytes(32), r["query_digests"][1]])
    ),
    "signed answers: pair query digests of the two versions swapped": first_pair(
        lambda r: r.__setitem__("query_digests", r["query_digests"][::-1])
    ),
}
#: The signed claim again with K = 2 copies per version: a pair record's query digest is
#: over both copies together, which no signed per-query digest determines.
_SIGNED_K2_PARAMS: dict[str, Any] = {
    **_SHORT_PARAMS,
    "score": ScoreSpec(k=2, perturbation="dither", knowledge="C1"),
    "arithmetic": BASIC_ARITHMETIC,
}


def _signed_run() -> tuple[bytes, bytes]:
    """The short claim under basic-v1 on an oracle that signs its answers (``K`` = 1)."""
    return _run("signed", {**_SHORT_PARAMS, "arithmetic": BASIC_ARITHMETIC}, SigningHashOracle())


def _signed_cases() -> list[dict[str, Any]]:
    """Spec §10.8, §12: the short claim on an oracle that signs its answers, valid, and
    checked against its openings. Its forged cases, which passed replay before replay
    compared a pair record's query digests with the signed ones, are now among the
    :func:`_cross_check_cases` (appended last)."""
    envelope, transcript = _signed_run()
    opened = _openings_cases(
        envelope, transcript, "signed answers: every signed query digest is its rebuilt query's", {}
    )
    return [_valid(_SIGNED_CLAIM, envelope, transcript), *opened]


def _cross_check_cases() -> list[dict[str, Any]]:
    """Spec §10.8, §12: replay compares a pair record's query digests with the signed ones.

    On the signed ``K`` = 1 claim, a signed digest changed and its batch signed again with
    the oracle's key, and a pair record's query digest changed and the verdict signed
    again with the arbiter's key, fail replay (``verification-failed``). On the signed
    claim with ``K`` = 2, valid, both changes replay (a version's digest is over its two
    copies together) and checking them against the openings refuses them.
    """
    envelope, transcript = _signed_run()
    cases = _record_cases(
        _payload(envelope), transcript, SIGNED_OPENINGS_CASES | PAIR_DIGEST_CASES, "replay"
    )
    envelope, transcript = _run("signed k2", _SIGNED_K2_PARAMS, SigningHashOracle())
    opened = _openings_cases(
        envelope,
        transcript,
        "signed answers, K=2: every signed query digest is its rebuilt query's",
        {
            name.replace("signed answers:", "signed answers, K=2:"): edit
            for name, edit in (SIGNED_OPENINGS_CASES | PAIR_DIGEST_CASES).items()
        },
    )
    valid = _valid(f"{_SIGNED_CLAIM}, K=2 dither", envelope, transcript)
    return [*cases, valid, *opened]


def _last_bit(records: list[dict[str, Any]]) -> None:
    """Version 0's score of the first pair one ulp up (toward 1)."""
    scores = records[1]["scores"]
    records[1]["scores"] = [float(np.nextafter(scores[0], 1.0)), scores[1]]


def _moved(records: list[dict[str, Any]]) -> None:
    """Version 0's score of the first pair whose scores differ moved by ``|s|·2^-36``.

    The scores of this claim's (C1) terms all have one sign, so ``S = |s|`` up to
    rounding and the move is 16 times the tolerance of §1.2, far from any outcome change.
    """
    for record in records[1:]:
        first, second = record["scores"]
        step = abs(first) * 2.0**-36
        if step and abs(first - second) > 64 * step:
            record["scores"] = [first + step, second]
            return
    raise AssertionError("no pair to move")


def _arithmetic_cases(envelope: bytes, transcript: bytes) -> list[dict[str, Any]]:
    """Spec §1.2 and §10.3.1: a score's last bit under either arithmetic.

    The short claim of the rule before (no ``arithmetic`` key) with a score changed in its
    last bit replays (the tolerance of §1.2; the file's case of that name before this
    rule expected a refusal, and is gone), and with a score moved by 16 tolerances does
    not; the short claim under ``basic-v1`` is valid, and the same last-bit change fails.
    """
    payload = _payload(envelope)
    records = list(iter_records(transcript))
    cases = []
    changed = copy.deepcopy(records)
    _last_bit(changed)
    cases.append(
        _valid(
            "a claim of the rule before (no arithmetic key), a pair score changed in its "
            "last bit: replays within the tolerance of spec 1.2",
            *_rechained(payload, changed),
        )
    )
    cases += _record_cases(
        payload,
        transcript,
        {"a claim of the rule before, a pair score moved by 16 tolerances": _moved},
        "replay",
    )
    basic = _run("arithmetic", {**_SHORT_PARAMS, "arithmetic": BASIC_ARITHMETIC}, HashOracle())
    cases.append(_valid(f"{_SHORT_CLAIM}, arithmetic basic-v1", *basic))
    cases += _record_cases(
        _payload(basic[0]),
        basic[1],
        {"basic-v1: pair score changed in the last bit": _last_bit},
        "replay",
    )
    return cases


#: Valid claims of the file again, each as a case that also expects how its recorded
#: scores agree with the recomputed ones (spec §1.2, §12): name: the earlier case's name.
AGREEMENT_CASES: dict[str, str] = {
    "a claim of the rule before whose scores all recompute bit for bit: identical": (_SHORT_CLAIM),
    "a claim of the rule before, one score one ulp from the recomputed: within the "
    "tolerance": _GRADED_NO_DRAW,
    "a claim of the rule before, a pair score changed in its last bit: within the "
    "tolerance": "a claim of the rule before (no arithmetic key), a pair score changed in its "
    "last bit: replays within the tolerance of spec 1.2",
    "basic-v1: every score bit for bit: identical": f"{_SHORT_CLAIM}, arithmetic basic-v1",
}


def _agreement_cases(cases: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Spec §1.2, §12: one case per row of :data:`AGREEMENT_CASES`, a valid case again
    whose ``expected`` adds ``score_agreement``: the scores recomputed, whether every
    recorded score is the recomputed one bit for bit, and how many are not (accepted
    within the tolerance of §1.2)."""
    by_name = {case["name"]: case for case in cases}
    public = Ed25519PrivateKey.from_private_bytes(TEST_KEY_SEED).public_key()
    made = []
    for name, source in AGREEMENT_CASES.items():
        case = copy.deepcopy(by_name[source])
        verdict = check_verdict(case["input"]["envelope"].encode(), public)
        agreement = replay(verdict, bytes.fromhex(case["input"]["transcript"])).agreement
        case["name"] = f"replay agreement: {name}"
        case["expected"]["score_agreement"] = {
            "scores": agreement.recomputed,
            "bit_identical": agreement.bit_identical,
            "within_tolerance": agreement.within_tolerance,
        }
        made.append(case)
    return made


def build() -> dict[str, Any]:
    """Return the whole vector document."""
    claims = _claims()
    cases = [_valid(name, *made) for name, made in claims.items()]
    # The broken cases change the short claim (four pairs): small files, every check hit.
    cases += _broken(*claims[_SHORT_CLAIM])
    cases += _check_cases(claims[_GRADED][0], GRADED_CHECK_CASES)
    cases += _check_cases(claims[_PPRM][0], PPRM_CHECK_CASES)
    cases += _check_cases(claims[_FRESH][0], FRESH_CHECK_CASES)
    cases += _check_cases(claims[_FILED][0], FILING_CHECK_CASES)
    cases += _verdict_replay_cases(claims)
    cases += _openings_cases(*claims[_SHORT_CLAIM])
    cases += _arithmetic_cases(*claims[_SHORT_CLAIM])
    cases += _agreement_cases(cases)
    cases += _signed_cases()
    cases += _cross_check_cases()
    key = Ed25519PrivateKey.from_private_bytes(TEST_KEY_SEED)
    return {
        "spec_version": SPEC_VERSION,
        "topic": "verdicts",
        "description": (
            "Whole claims (spec §10–§12): each valid case is a verdict envelope signed with "
            "the test key of appendix B (public key "
            f"{raw_public_key(key.public_key()).hex()}) and its transcript (hex of the "
            "framed records); checking the verdict (§11) and replaying the transcript (§12) "
            "succeed and give 'expected' (log_statistic as a C99 hex float, compared under the "
            "agreement rule of §7.3.3). A verdict on a keyed record carries 'filing', the "
            "request the "
            "owner signed with her claim key (§10.7), which checking verifies (§11 step 7). "
            "'check' cases are a valid verdict with one field changed and "
            "signed again: checking it fails with 'error'. 'replay' cases change one "
            "transcript record, chain the records again and sign the verdict again, or "
            "change a verdict field that checking cannot refuse (its decision, an "
            "indicator, final, the order of its opened pairs) and sign it again: the "
            "verdict checks, and replaying fails with 'error'. 'openings' cases add the "
            "openings file of the verdict's opened pairs (§12.1, hex): the verdict checks "
            "and replays, and checking its records against the openings (§12) gives "
            "'expected' (the pairs checked) or fails with 'error'; the broken ones change "
            "one record field that the items fix (a shape, a digest), chain the records "
            "again and sign the verdict again. The last cases (spec 1.2, 10.3.1): a claim "
            "of the rule before (no 'arithmetic' in its score map) whose score changed in "
            "its last bit still replays, one moved by 16 times the tolerance does not, "
            "and under basic-v1 a last-bit change fails. The 'replay agreement' cases are "
            "valid claims of the file again whose 'expected' adds 'score_agreement' (spec "
            "1.2, 12): the scores recomputed (two per opened pair), whether every recorded "
            "score equals the recomputed one bit for bit ('bit_identical'), and how many do "
            "not and were accepted within the tolerance of spec 1.2 ('within_tolerance'), "
            "which a replayer reports. The last cases (spec 10.8, 12) are the short claim "
            "under basic-v1 on an oracle that signs its answers (its answer key's private "
            "seed is SHA-256('twinaudit vectors answer key')): valid, and checked against "
            "its openings. The last cases (spec 10.8, 12: replay compares a pair record's "
            "query digests with the digests the oracle signed where the record holds one "
            "query's digest, K = 1): on that claim, a query digest of its last answers "
            "record changed and the batch signed again with the oracle's key, and a pair "
            "record's query digest changed and the verdict signed again with the arbiter's "
            "key: replaying fails; then the same claim with K = 2, valid, whose version "
            "digests are over two copies together: the same changes replay, and the "
            "openings refuse them, since a signed digest is not the digest of the query its "
            "slot names or a recorded digest not the rebuilt one."
        ),
        "cases": cases,
    }


def main() -> None:
    """Rewrite the vector file."""
    VECTOR_FILE.write_text(render(build()), encoding="utf-8")


if __name__ == "__main__":
    main()
