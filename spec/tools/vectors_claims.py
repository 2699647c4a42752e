"""Build spec/vectors/claims.json: window schedules and whole claims (spec §10.1–§11).

Run ``python -m spec.tools.vectors_claims`` to rewrite the file; the conformance test
fails if the file differs from what :func:`build` returns.
"""

from __future__ import annotations

import copy
import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from twinaudit.protocol import SPEC_VERSION
from twinaudit.protocol.claim.claim_map import check_input_fit
from twinaudit.protocol.claim.functions import score_spec_from_value
from twinaudit.protocol.claim.order import check_excluded
from twinaudit.protocol.claim.requests import Shape, queries_per_request, request_runs
from twinaudit.protocol.claim.schedule import WindowSchedule
from twinaudit.protocol.claim.scores.classifier import LEGACY_ARITHMETIC, ScoreSpec
from twinaudit.protocol.claim.scores.encoder import EncoderSpec
from twinaudit.protocol.claim.scores.function_only import ImageTextSpec, LanguageSpec
from twinaudit.protocol.claim.transcript import iter_records
from twinaudit.protocol.commitment import PairOpening, commit_pair
from twinaudit.protocol.encoding import Value, encode
from twinaudit.protocol.errors import TwinauditError
from twinaudit.protocol.items import (
    CaptionedImageItem,
    ImageItem,
    TextItem,
    decode_item,
    encode_item,
)
from twinaudit.protocol.keys import key_id
from twinaudit.protocol.merkle import MerkleTree
from twinaudit.protocol.oracles.base import ClassifierOracle, ClassifyAnswer, OracleInfo
from twinaudit.protocol.oracles.embedding import EmbeddingAnswer, EncoderOracle
from twinaudit.protocol.oracles.image_text import ImageTextAnswer, ImageTextOracle
from twinaudit.protocol.oracles.language import LanguageModelOracle, LogprobAnswer
from twinaudit.protocol.seeds import publication_bits
from twinaudit.protocol.stats.base import TiePolicy
from twinaudit.verifier.claim import ClaimParams, ClaimRecord, ClaimSession

from .typed_json import from_typed, to_typed
from .vectors_core import TEST_KEY_SEED, case, error_fields, render
from .vectors_transport import opening_cases, request_cases

VECTOR_FILE = Path(__file__).resolve().parent.parent / "vectors" / "claims.json"

#: (name, window, window_max, limit, per_pair, budget)
_SCHEDULES: list[tuple[str, int, int, int, int, int]] = [
    ("defaults (8 to 16), 200 pairs, K=32", 8, 16, 200, 64, 0),
    ("8 growing to 64, 200 pairs, K=32", 8, 64, 200, 64, 0),
    ("8 growing to 64, 1000 pairs", 8, 64, 1000, 64, 0),
    ("constant windows of 8", 8, 8, 30, 64, 0),
    ("first window larger than the record", 16, 64, 10, 2, 0),
    ("one pair at a time", 1, 1, 5, 2, 0),
    ("doubling from 1 to the largest", 1, 256, 1000, 2, 0),
    ("query budget cuts the third request", 8, 64, 200, 64, 64 * 30),
    ("query budget below one pair", 8, 64, 200, 64, 63),
    ("budget exactly two requests", 4, 64, 100, 32, 32 * 12),
    ("language model, 2 queries a pair", 8, 64, 100, 2, 0),
    ("empty limit (max_pairs reached)", 8, 64, 0, 64, 0),
    ("window 0", 0, 64, 100, 64, 0),
    ("window above 256", 257, 257, 1000, 64, 0),
    ("window_max below window", 16, 8, 100, 64, 0),
    ("window_max above 256", 8, 512, 100, 64, 0),
]


def _schedule(row: tuple[str, int, int, int, int, int]) -> Any:
    name, first, largest, limit, per_pair, budget = row
    inp = {
        "window": first,
        "window_max": largest,
        "limit": limit,
        "queries_per_pair": per_pair,
        "query_budget": budget,
    }

    def compute() -> dict[str, Any]:
        return {"sizes": WindowSchedule(first, largest, limit, per_pair, budget).sizes()}

    return case(name, "schedule", inp, compute)


_OIP_CAP = 4 * 1024 * 1024 - 64 * 1024
_ONE_QUERY_CAP = 256 * 1024 * 1024
#: (name, shapes in sent order, max_batch, request_bytes, single_bytes, element_bytes)
_REQUESTS: list[tuple[str, list[list[int]], int, int, int, int]] = [
    ("one shape, one request", [[4, 4, 1]] * 5, 64, 4 << 20, 0, 4),
    ("one shape cut by max_batch", [[4, 4, 1]] * 7, 3, 4 << 20, 0, 4),
    ("one shape cut by bytes", [[32, 32, 3]] * 7, 64, 3 * 32 * 32 * 3 * 4 + 1, 0, 4),
    (
        "two shapes, first occurrence order, each cut",
        [[8, 8, 3], [4, 4, 1], [8, 8, 3], [8, 8, 3], [4, 4, 1], [8, 8, 3], [4, 4, 1]],
        2,
        4 << 20,
        0,
        4,
    ),
    ("REST's 24 bytes an element", [[64, 64, 3]] * 4, 64, _OIP_CAP, 0, 24),
    ("a query above the request cap", [[1024, 1024, 3]], 64, _OIP_CAP, 0, 4),
    (
        "12-MP colour photos above the cap go one a request, small ones together",
        [[3000, 4000, 3], [32, 32, 3], [3000, 4000, 3], [32, 32, 3]],
        64,
        64 * 1024 * 1024 - 256,
        _ONE_QUERY_CAP - 256,
        4,
    ),
    ("a query above the one-query cap", [[4096, 4096, 3]], 64, 1 << 20, 1 << 26, 4),
]


def _requests(row: tuple[str, list[list[int]], int, int, int, int]) -> Any:
    name, shapes, max_batch, request_bytes, single_bytes, element_bytes = row
    inp = {
        "shapes": shapes,
        "max_batch": max_batch,
        "request_bytes": request_bytes,
        "single_bytes": single_bytes,
        "element_bytes": element_bytes,
    }

    def compute() -> dict[str, Any]:
        def per_request(shape: Shape) -> int:
            height, width, channels = shape
            query = height * width * channels * element_bytes
            return queries_per_request(max_batch, request_bytes, query, single_bytes)

        runs = request_runs([(h, w, c) for h, w, c in shapes], per_request)
        return {"requests": runs}

    return case(name, "requests", inp, compute)


# -- Whole claims (§10.1–§11): openings and answers in, verdict payload out ------------------

N_PAIRS = 20
SIDE = 4
N_CLASSES = 4
DIM = 4
RHO = hashlib.sha256(b"twinaudit claim vectors rho").digest()
RECEIPT_TIME = "2026-11-23T00:00:00Z"
TIME = "2026-11-24T00:00:00Z"
ENVIRONMENT = {"implementation": "vectors"}
WORDS = ("amber", "brisk", "cedar", "dune", "ember", "fable", "grove", "harbor", "island")


def _images(seed: int, *, labelled: bool) -> list[tuple[ImageItem, ImageItem]]:
    """Pairs of 4×4 grey images, a ±16 sign pattern apart (labelled: one class per pair)."""
    rng = np.random.default_rng([seed, N_PAIRS])
    base = rng.integers(32, 224, (N_PAIRS, SIDE, SIDE, 1))
    signs = np.where(rng.random((N_PAIRS, SIDE, SIDE, 1)) < 0.5, -16, 16)
    labels = [int(y) for y in rng.integers(0, N_CLASSES, N_PAIRS)]
    pairs = []
    for i in range(N_PAIRS):
        v0 = np.clip(base[i] + signs[i], 0, 255).astype(np.uint8)
        v1 = np.clip(base[i] - signs[i], 0, 255).astype(np.uint8)
        label = labels[i] if labelled else None
        pairs.append((ImageItem(v0, label), ImageItem(v1, label)))
    return pairs


def _texts() -> list[tuple[TextItem, TextItem]]:
    """Pairs of short texts: two wordings of one sentence per pair."""
    rng = np.random.default_rng([7, N_PAIRS])
    pairs = []
    for i in range(N_PAIRS):
        a, b, c = (WORDS[int(n)] for n in rng.integers(0, len(WORDS), 3))
        pairs.append(
            (TextItem(f"{i}: the {a} {b} by the {c}"), TextItem(f"{i}: a {a} {b} near a {c}"))
        )
    return pairs


def _captioned() -> list[tuple[CaptionedImageItem, CaptionedImageItem]]:
    """Pairs of 4×4 grey images with one caption per pair."""
    captions = [f"{WORDS[i % len(WORDS)]} number {i}" for i in range(N_PAIRS)]
    return [
        (CaptionedImageItem(v0, captions[i]), CaptionedImageItem(v1, captions[i]))
        for i, (v0, v1) in enumerate(_images(11, labelled=False))
    ]


@dataclass(frozen=True)
class _Record:
    """An escrow record of the vectors: both versions' bytes, the salts and the tree."""

    kind: str
    versions: list[tuple[bytes, bytes]]
    salts: list[bytes]
    tree: MerkleTree

    @classmethod
    def of(cls, kind: str, pairs: list[Any]) -> _Record:
        versions = [(encode_item(v0), encode_item(v1)) for v0, v1 in pairs]
        salts = [hashlib.sha256(b"claim vector salt %d" % i).digest() for i in range(N_PAIRS)]
        leaves = [commit_pair(v0, v1, s)[0] for (v0, v1), s in zip(versions, salts, strict=True)]
        return cls(kind, versions, salts, MerkleTree(leaves))

    @property
    def claim_record(self) -> ClaimRecord:
        return ClaimRecord(0, self.tree.root(), N_PAIRS, self.kind, RHO, RECEIPT_TIME)

    def published(self) -> list[bytes]:
        """The published version of every pair (§5.5)."""
        bits = publication_bits(self.tree.root(), RHO, N_PAIRS)
        return [self.versions[i][int(b)] for i, b in enumerate(bits)]


def _records() -> dict[str, _Record]:
    return {
        "labelled": _Record.of("image", _images(3, labelled=True)),
        "image": _Record.of("image", _images(5, labelled=False)),
        "text": _Record.of("text", _texts()),
        "captioned-image": _Record.of("captioned-image", _captioned()),
    }


def _hexes(rows: Any) -> Any:
    return [[float(x).hex() for x in row] for row in rows]


def _digests(images: Any) -> list[str]:
    return [hashlib.sha256(np.ascontiguousarray(q, "<f4").tobytes()).hexdigest() for q in images]


def _text_digests(texts: list[str]) -> list[str]:
    return [hashlib.sha256(t.encode("utf-8")).hexdigest() for t in texts]


class StandIn(ClassifierOracle, EncoderOracle, LanguageModelOracle, ImageTextOracle):
    """A deterministic model that answers from SHA-256 of each query (float32 bytes, UTF-8).

    ``classify``: the four bytes ``b_c`` of the digest give ``(b_c + 1) / Σ (b + 1)``
    (exact in binary64 up to the division), or the index of the largest as a label;
    ``embed-images`` and ``embed-image-text``: ``(b_d − 127.5) / 64`` for the first four
    bytes; ``token-logprobs``: ``−(b + 1) / 64`` for each word after the first. A query in
    ``known`` (what a model trained on the published versions recalls) is answered with
    near-certainty: probability ``1 − 3·2^−20`` on its label, or log-probabilities ``/ 64``
    smaller. Every call is kept in :attr:`calls` as (images' digests, texts' digests,
    answer as JSON). ``model`` is what its description reports of the model (framework,
    model format, input shape; spec §10.1), nothing by default.
    """

    def __init__(
        self,
        capability: str,
        output: str = "",
        known: dict[bytes, int] | None = None,
        model: tuple[str, str, tuple[int, ...]] = ("", "", ()),
    ) -> None:
        """Offer ``capability``; ``output`` is the classifier's (probabilities or label)."""
        self.known = known or {}
        classes = N_CLASSES if capability == "classify" else 0
        self._info = OracleInfo(
            "vector-oracle",
            "memoriser" if known else "sha256",
            (capability,),
            output,
            classes,
            512,
            *model,
        )
        self.calls: list[tuple[list[str], list[str], dict[str, Any]]] = []

    @property
    def info(self) -> OracleInfo:
        """The Describe map's fields."""
        return self._info

    @staticmethod
    def _bytes(query: Any) -> bytes:
        return (
            query.encode("utf-8")
            if isinstance(query, str)
            else np.ascontiguousarray(query).tobytes()
        )

    def _vector(self, query: Any) -> np.ndarray[Any, Any]:
        digest = hashlib.sha256(self._bytes(query)).digest()
        return np.array([(b - 127.5) / 64 for b in digest[:DIM]], dtype=np.float64)

    def classify(self, images: Any) -> ClassifyAnswer:
        """Probabilities (or labels) from each image's digest."""
        rows = np.empty((len(images), N_CLASSES), dtype=np.float64)
        for n, image in enumerate(images):
            label = self.known.get(self._bytes(image))
            if label is not None:
                rows[n] = 2.0**-20
                rows[n, label] = 1.0 - 3 * 2.0**-20
                continue
            weights = np.array(
                [b + 1 for b in hashlib.sha256(self._bytes(image)).digest()[:N_CLASSES]],
                dtype=np.float64,
            )
            rows[n] = weights / weights.sum()
        if self._info.classify_output == "label":
            answer = ClassifyAnswer(labels=rows.argmax(axis=1).astype(np.int64))
            self.calls.append((_digests(images), [], {"labels": answer.to_value()}))
            return answer
        self.calls.append((_digests(images), [], {"probabilities": _hexes(rows)}))
        return ClassifyAnswer(probabilities=rows)

    def embed_images(self, images: Any) -> EmbeddingAnswer:
        """One vector per image from its digest."""
        rows = np.stack([self._vector(image) for image in images])
        self.calls.append((_digests(images), [], {"embeddings": _hexes(rows)}))
        return EmbeddingAnswer(rows)

    def token_logprobs(self, texts: list[str]) -> LogprobAnswer:
        """One log-probability per word after the first, from the text's digest."""
        answers = []
        for text in texts:
            digest = hashlib.sha256(text.encode("utf-8")).digest()
            scale = 4096.0 if text.encode("utf-8") in self.known else 64.0
            answers.append(
                np.array([-(digest[n] + 1) / scale for n in range(len(text.split()) - 1)])
            )
        self.calls.append(([], _text_digests(texts), {"logprobs": _hexes(answers)}))
        return LogprobAnswer(tuple(answers))

    def embed_image_text(self, images: Any, texts: list[str]) -> ImageTextAnswer:
        """One vector per image and per text, from its digest."""
        # A window of several shapes sends its captions alone, then each shape's images
        # alone (spec §10.2 step 5): either part may be empty.
        images = [] if images is None else images
        image_rows = np.stack([self._vector(image) for image in images] or [np.zeros((0,))])
        text_rows = np.stack([self._vector(text) for text in texts] or [np.zeros((0,))])
        image_rows, text_rows = (
            rows.reshape(0, DIM) if rows.size == 0 else rows for rows in (image_rows, text_rows)
        )
        answer = {"images": _hexes(image_rows), "texts": _hexes(text_rows)}
        self.calls.append((_digests(images) if len(images) else [], _text_digests(texts), answer))
        return ImageTextAnswer(image_rows, text_rows)


def _memorised(record: _Record) -> dict[bytes, int]:
    """The queries a model trained on the record's published versions recalls."""
    known = {}
    for data in record.published():
        item = decode_item(data, record.kind)
        if isinstance(item, TextItem):
            known[item.text.encode("utf-8")] = 0
        elif isinstance(item, ImageItem):
            query = (item.pixels.astype(np.float32) / np.float32(255)).tobytes()
            known[query] = item.label or 0
    return known


def _openings(record: _Record, opened: list[int]) -> list[dict[str, Any]]:
    """The owner's openings of the pairs ``opened``, in that order."""
    return [
        {
            "index": i,
            "salt": record.salts[i].hex(),
            "version0": v0.hex(),
            "version1": v1.hex(),
            "proof": [h.hex() for h in record.tree.inclusion_proof(i)],
        }
        for i in opened
        for v0, v1 in [record.versions[i]]
    ]


def _claim_case(
    name: str, record: _Record, oracle: StandIn, params: dict[str, Any]
) -> dict[str, Any]:
    """Run one claim through the claim engine; return its vector case.

    ``params`` may hold ``excluded``: the pairs of earlier claims the claim skips (spec
    §10.2 step 2); such a claim's verdict counts one earlier claim.
    """
    key = Ed25519PrivateKey.from_private_bytes(TEST_KEY_SEED)
    params = dict(params)
    excluded: list[int] = params.pop("excluded", [])
    input_fit: str = params.pop("input_fit", "")
    # The claims of this file made before the arithmetic basic-v1 (spec §10.3.1) stay as
    # they were, claims of the rule before (§1.2); a row may name the arithmetic.
    arithmetic: str = params.pop("arithmetic", LEGACY_ARITHMETIC)
    if params["test_name"] != "pprm-chernoff":
        # The claims of this file were made under grid15-v1, the default until grid16-v1
        # (spec §7.3.8); they stay as they were. A row may ask for the default with prior None.
        params.setdefault("prior", "grid15-v1")
    claim = ClaimParams(0, record.tree.root(), "vector-oracle:0", "vector-model", **params)
    nonce = hashlib.sha256(f"twinaudit claim vector nonce {name}".encode()).digest()
    claim_id = f"vector-claim-{hashlib.sha256(name.encode()).hexdigest()[:12]}"
    session = ClaimSession.start(
        claim_id,
        record.claim_record,
        claim,
        oracle,
        nonce,
        excluded=excluded,
        input_fit=input_fit,
        arithmetic=arithmetic,
    )
    earlier = 1 if excluded else 0
    requests = []
    while indices := session.next_request():
        before = len(oracle.calls)
        session.submit(
            [
                (
                    i,
                    PairOpening(record.salts[i], *record.versions[i]),
                    record.tree.inclusion_proof(i),
                )
                for i in indices
            ]
        )
        # Every oracle call of the window, in order (one per shape, §10.2 step 5).
        images = [d for call in oracle.calls[before:] for d in call[0]]
        texts = [d for call in oracle.calls[before:] for d in call[1]]
        requests.append({"pairs": indices, "images": images, "texts": texts})
    verdict = {"arbiter": key_id(key.public_key()), "claim_id": claim_id, "time": TIME}
    payload = session.verdict_payload(
        arbiter=verdict["arbiter"],
        time=TIME,
        environment=dict(ENVIRONMENT),
        earlier_claims=earlier,
    )
    return {
        "name": f"claim: {name}",
        "kind": "claim",
        "valid": True,
        "input": {
            "record": {
                "index": 0,
                "root": record.tree.root().hex(),
                "n_pairs": N_PAIRS,
                "item_kind": record.kind,
                "rho": RHO.hex(),
                "time": RECEIPT_TIME,
            },
            "claim": to_typed(session.claim_map),
            "verdict": {**verdict, "earlier_claims": earlier, "environment": dict(ENVIRONMENT)},
            "openings": _openings(record, session.opened),
            "answers": [answer for _, _, answer in oracle.calls],
        },
        "expected": _expected(session, payload, requests),
    }


def _expected(
    session: ClaimSession, payload: dict[str, Value], requests: list[dict[str, Any]]
) -> dict[str, Any]:
    """What a claim case expects of a claim that has stopped with ``payload``."""
    final = payload["final"]
    assert isinstance(final, dict)
    statistic = final["log_statistic"]
    assert statistic is None or isinstance(statistic, float)
    return {
        "requests": requests,
        "opened": payload["opened"],
        "indicators": payload["indicators"],
        "final": {**final, "log_statistic": None if statistic is None else statistic.hex()},
        "decision": payload["decision"],
        "stop": payload["stop"],
        "queries": payload["queries"],
        "scores": _scores(session),
        "transcript": {"hash": session.transcript.head.hex(), "records": session.transcript.count},
        "payload": encode(payload).hex(),
    }


def _scores(session: ClaimSession) -> list[list[str]]:
    """Both scores of every opened pair, as its transcript record has them."""
    scores = []
    for record in list(iter_records(session.transcript.to_bytes()))[1:]:
        pair = record["scores"]
        assert isinstance(pair, list)
        scores.append([s.hex() for s in pair if isinstance(s, float)])
    return scores


class VectorOracle(ClassifierOracle, EncoderOracle, LanguageModelOracle, ImageTextOracle):
    """The oracle of a claim vector: its answers, in order, one per request.

    Keeps the digests of what it was sent (:attr:`sent`); it never looks at the queries.
    """

    def __init__(self, info: OracleInfo, answers: list[dict[str, Any]]) -> None:
        """Answer with ``answers`` (JSON, as a claim case's input lists them)."""
        self._info = info
        self.answers = list(answers)
        self.sent: list[tuple[list[str], list[str]]] = []

    @property
    def info(self) -> OracleInfo:
        """The Describe map of the claim map."""
        return self._info

    def _next(self, images: Any, texts: list[str]) -> dict[str, Any]:
        self.sent.append((_digests(images) if images is not None else [], _text_digests(texts)))
        if not self.answers:
            raise AssertionError("the claim asked for more requests than the vector answers")
        return self.answers.pop(0)

    def classify(self, images: Any) -> ClassifyAnswer:
        """The next answer: ``probabilities`` rows or ``labels``."""
        answer = self._next(images, [])
        if "labels" in answer:
            return ClassifyAnswer(labels=np.array(answer["labels"], dtype=np.int64))
        return ClassifyAnswer(probabilities=_matrix(answer["probabilities"]))

    def embed_images(self, images: Any) -> EmbeddingAnswer:
        """The next answer's ``embeddings``."""
        return EmbeddingAnswer(_matrix(self._next(images, [])["embeddings"]))

    def token_logprobs(self, texts: list[str]) -> LogprobAnswer:
        """The next answer's ``logprobs``, one list per text."""
        rows = self._next(None, texts)["logprobs"]
        return LogprobAnswer(
            tuple(np.array([float.fromhex(x) for x in row], dtype=np.float64) for row in rows)
        )

    def embed_image_text(self, images: Any, texts: list[str]) -> ImageTextAnswer:
        """The next answer's ``images`` and ``texts`` embeddings."""
        answer = self._next(images, texts)
        return ImageTextAnswer(_matrix(answer["images"]), _matrix(answer["texts"]))


def _matrix(rows: list[list[str]]) -> np.ndarray[Any, Any]:
    values = np.array([[float.fromhex(x) for x in row] for row in rows], dtype=np.float64)
    return values.reshape(len(rows), -1) if values.size else np.zeros((len(rows), 0))


def run_claim(inp: dict[str, Any]) -> dict[str, Any]:
    """Run a claim vector's input through the claim engine; return what it expects.

    The claim map (the transcript's header) gives the claim's parameters and the
    oracle's description; the oracle answers each request with the next listed answer;
    the owner opens each requested pair with its listed opening. Raises the typed
    error of the first check that fails.
    """
    rec = inp["record"]
    record = ClaimRecord(
        rec["index"],
        bytes.fromhex(rec["root"]),
        rec["n_pairs"],
        rec["item_kind"],
        bytes.fromhex(rec["rho"]),
        rec["time"],
    )
    claim = from_typed(inp["claim"])
    test = claim["test"]
    params = ClaimParams(
        claim["record"]["index"],
        claim["record"]["root"],
        claim["model"]["endpoint"],
        claim["model"]["name"],
        score_spec_from_value(claim["score"]),
        test["name"],
        test["params"]["p"],
        test["params"].get("alpha"),
        TiePolicy(claim["tie_rule"]),
        claim["max_pairs"],
        claim["query_budget"],
        claim["window"],
        claim["window_max"],
        prior=test["params"].get("prior"),
    )
    oracle = VectorOracle(OracleInfo.from_value(claim["model"]["oracle"]), inp["answers"])
    verdict = inp["verdict"]
    excluded = claim.get("excluded", [])
    if "excluded" in claim:  # pairs of earlier claims, checked as a claim map read back
        check_excluded(excluded, rec["n_pairs"])
    input_fit = claim.get("input_fit", "")
    if "input_fit" in claim:  # checked as a claim map read back
        check_input_fit(input_fit, claim["model"]["oracle"], rec["item_kind"])
    session = ClaimSession.start(
        verdict["claim_id"],
        record,
        params,
        oracle,
        claim["claim_nonce"],
        excluded=excluded,
        input_fit=input_fit,
        arithmetic=claim["score"].get("arithmetic", LEGACY_ARITHMETIC),
    )
    if encode(session.claim_map) != encode(claim):
        raise AssertionError("the claim engine made another claim map than the vector's")
    openings = {o["index"]: o for o in inp["openings"]}
    requests = []
    while indices := session.next_request():
        before = len(oracle.sent)
        session.submit(
            [
                (
                    i,
                    PairOpening(
                        bytes.fromhex(openings[i]["salt"]),
                        bytes.fromhex(openings[i]["version0"]),
                        bytes.fromhex(openings[i]["version1"]),
                    ),
                    [bytes.fromhex(h) for h in openings[i]["proof"]],
                )
                for i in indices
            ]
        )
        images = [d for call in oracle.sent[before:] for d in call[0]]
        texts = [d for call in oracle.sent[before:] for d in call[1]]
        requests.append({"pairs": indices, "images": images, "texts": texts})
    payload = session.verdict_payload(
        arbiter=verdict["arbiter"],
        time=verdict["time"],
        environment=dict(verdict["environment"]),
        earlier_claims=verdict["earlier_claims"],
    )
    return _expected(session, payload, requests)


def _claim_cases() -> dict[str, dict[str, Any]]:
    """Run every valid claim of the file; return its cases by name."""
    records = _records()
    labelled, image = records["labelled"], records["image"]
    text, captioned = records["text"], records["captioned-image"]
    coin = TiePolicy.COIN
    rows: list[tuple[str, _Record, StandIn, dict[str, Any]]] = [
        (
            "image-classifier C1, pad-shift-flip-dither K=2, mixture-e, skip, max_pairs 12",
            labelled,
            StandIn("classify", "probabilities"),
            {
                "score": ScoreSpec(k=2, perturbation="pad-shift-flip-dither", knowledge="C1"),
                "test_name": "mixture-e",
                "p": 0.05,
                "max_pairs": 12,
                "window": 4,
            },
        ),
        (
            "image-classifier C3 label answers, dither K=1, pprm-chernoff, coin",
            labelled,
            StandIn("classify", "label"),
            {
                "score": ScoreSpec(k=1, perturbation="dither", knowledge="C3"),
                "test_name": "pprm-chernoff",
                "p": 0.05,
                "tie_rule": coin,
                "window": 4,
                "window_max": 8,
            },
        ),
        (
            "image-classifier C2 of labelled images, none K=1, mixture-e, coin, "
            "stop on the query budget",
            labelled,
            StandIn("classify", "probabilities"),
            {
                "score": ScoreSpec(k=1, perturbation="none", knowledge="C2"),
                "test_name": "mixture-e",
                "p": 0.05,
                "tie_rule": coin,
                "window": 2,
                "query_budget": 14,
            },
        ),
        (
            "image-classifier C1 logit, margin 0.25, random-resized-crop K=2, "
            "pprm-chernoff, skip, max_pairs 6",
            labelled,
            StandIn("classify", "probabilities"),
            {
                "score": ScoreSpec(
                    k=2,
                    perturbation="random-resized-crop",
                    knowledge="C1",
                    statistic="logit",
                    margin=0.25,
                ),
                "test_name": "pprm-chernoff",
                "p": 0.05,
                "max_pairs": 6,
                "window": 2,
                "window_max": 4,
            },
        ),
        (
            "image-classifier C4 from probability answers, simclr-crop-flip K=3, mixture-e, "
            "skip, max_pairs 5",
            image,
            StandIn("classify", "probabilities"),
            {
                "score": ScoreSpec(k=3, perturbation="simclr-crop-flip", knowledge="C4"),
                "test_name": "mixture-e",
                "p": 0.05,
                "max_pairs": 5,
                "window": 1,
                "window_max": 4,
            },
        ),
        (
            "image-classifier C1, dither K=1, mixture-e, skip, max_pairs 4",
            labelled,
            StandIn("classify", "probabilities"),
            {
                "score": ScoreSpec(k=1, perturbation="dither", knowledge="C1"),
                "test_name": "mixture-e",
                "p": 0.05,
                "max_pairs": 4,
                "window": 4,
            },
        ),
        (
            _MEMORISED,
            labelled,
            StandIn("classify", "probabilities", _memorised(labelled)),
            _MEMORISED_PARAMS,
        ),
        (
            "a memorising classifier, C1 none K=1, mixture-e under the default prior "
            "grid16-v1, skip: detected",
            labelled,
            StandIn("classify", "probabilities", _memorised(labelled)),
            {**_MEMORISED_PARAMS, "prior": None},
        ),
        (
            _GRADED,
            labelled,
            StandIn("classify", "probabilities", _memorised(labelled)),
            {
                "score": ScoreSpec(k=1, perturbation="none", knowledge="C1", margin=0.01),
                "test_name": "mixture-graded",
                "p": 0.05,
                "window": 2,
                "window_max": 4,
            },
        ),
        (
            "image-classifier C1, dither K=1, margin 0.2, mixture-graded, coin, max_pairs 8",
            labelled,
            StandIn("classify", "probabilities"),
            {
                "score": ScoreSpec(k=1, perturbation="dither", knowledge="C1", margin=0.2),
                "test_name": "mixture-graded",
                "p": 0.05,
                "tie_rule": coin,
                "max_pairs": 8,
                "window": 3,
            },
        ),
        (
            "image-encoder K=2, random-resized-crop-flip, mixture-e, skip, max_pairs 8",
            image,
            StandIn("embed-images"),
            {
                "score": EncoderSpec(k=2, perturbation="random-resized-crop-flip"),
                "test_name": "mixture-e",
                "p": 0.05,
                "max_pairs": 8,
                "window": 4,
            },
        ),
        (
            "language-model, pprm-chernoff, coin",
            text,
            StandIn("token-logprobs"),
            {
                "score": LanguageSpec(),
                "test_name": "pprm-chernoff",
                "p": 0.05,
                "tie_rule": coin,
                "window": 8,
            },
        ),
        (
            _MEMORISED_LANGUAGE,
            text,
            StandIn("token-logprobs", known=_memorised(text)),
            {"score": LanguageSpec(), "test_name": "mixture-e", "p": 0.05, "window": 4},
        ),
        (
            "image-text, mixture-e, coin, query budget 12",
            captioned,
            StandIn("embed-image-text"),
            {
                "score": ImageTextSpec(),
                "test_name": "mixture-e",
                "p": 0.05,
                "tie_rule": coin,
                "query_budget": 12,
                "window": 2,
            },
        ),
        (
            "image-text, pprm-chernoff, skip",
            captioned,
            StandIn("embed-image-text"),
            {"score": ImageTextSpec(), "test_name": "pprm-chernoff", "p": 0.05, "window": 8},
        ),
        (
            _DESCRIBED,
            image,
            StandIn("classify", "probabilities", model=("onnxruntime 1.31.1", "onnx", (4, 4, 1))),
            {
                "score": ScoreSpec(k=1, perturbation="none", knowledge="C2"),
                "test_name": "mixture-e",
                "p": 0.05,
                "max_pairs": 4,
                "window": 4,
            },
        ),
    ]
    cases = {
        name: _claim_case(name, record, oracle, params) for name, record, oracle, params in rows
    }
    # Second claims on the same records that skip the pairs the first claims opened
    # (spec §10.1 "excluded", §10.2 step 2): the order skips them, the test runs over
    # the pairs left, and `exhausted` means every pair left was opened.
    after_classifier = sorted(cases[_MEMORISED]["expected"]["opened"])
    after_language = sorted(cases[_MEMORISED_LANGUAGE]["expected"]["opened"])
    fresh: list[tuple[str, _Record, StandIn, dict[str, Any]]] = [
        (
            _UNLEARNED,
            labelled,
            StandIn("classify", "probabilities"),
            {
                "score": ScoreSpec(k=1, perturbation="none", knowledge="C1"),
                "test_name": "mixture-e",
                "p": 0.05,
                "window": 2,
                "window_max": 4,
                "excluded": after_classifier,
            },
        ),
        (
            "a memorising classifier, C1 none K=1, mixture-e, skip, the pairs of an earlier "
            "claim excluded: detected on the pairs left",
            labelled,
            StandIn("classify", "probabilities", _memorised(labelled)),
            {
                "score": ScoreSpec(k=1, perturbation="none", knowledge="C1"),
                "test_name": "mixture-e",
                "p": 0.05,
                "window": 2,
                "window_max": 2,
                "excluded": after_classifier,
            },
        ),
        (
            "language-model, mixture-e over the pairs left, coin, the pairs of an earlier "
            "claim excluded, max_pairs 6",
            text,
            StandIn("token-logprobs"),
            {
                "score": LanguageSpec(),
                "test_name": "mixture-e",
                "p": 0.05,
                "tie_rule": coin,
                "max_pairs": 6,
                "window": 2,
                "excluded": after_language,
            },
        ),
    ]
    for name, record, oracle, params in fresh:
        cases[name] = _claim_case(name, record, oracle, params)
    return cases


# --- Claims over records whose images have several sizes (spec §10.2 step 5) ---------------
#
# A window's queries of several shapes go to the oracle as one request per shape; these
# claims pin that split (the order of the requests, the queries in each) with grey and
# RGB images of four sizes, and the -v2 crops (§10.3) on each size.

#: The (height, width, channels) of the mixed records' pairs, in turn.
_MIXED_SHAPES: tuple[tuple[int, int, int], ...] = ((4, 4, 1), (3, 5, 1), (4, 4, 3), (5, 2, 3))


def _mixed_images(seed: int, *, labelled: bool) -> list[tuple[ImageItem, ImageItem]]:
    """Pairs of grey and RGB images of four sizes, a ±16 sign pattern apart."""
    rng = np.random.default_rng([seed, N_PAIRS, 4])
    pairs = []
    for i in range(N_PAIRS):
        shape = _MIXED_SHAPES[i % len(_MIXED_SHAPES)]
        base = rng.integers(32, 224, shape)
        signs = np.where(rng.random(shape) < 0.5, -16, 16)
        label = int(rng.integers(0, N_CLASSES)) if labelled else None
        v0 = np.clip(base + signs, 0, 255).astype(np.uint8)
        v1 = np.clip(base - signs, 0, 255).astype(np.uint8)
        pairs.append((ImageItem(v0, label), ImageItem(v1, label)))
    return pairs


def _mixed_captioned() -> list[tuple[CaptionedImageItem, CaptionedImageItem]]:
    """The mixed sizes with one caption per pair."""
    captions = [f"{WORDS[(i + 4) % len(WORDS)]} size {i}" for i in range(N_PAIRS)]
    return [
        (CaptionedImageItem(v0, captions[i]), CaptionedImageItem(v1, captions[i]))
        for i, (v0, v1) in enumerate(_mixed_images(13, labelled=False))
    ]


def _mixed_size_cases() -> dict[str, dict[str, Any]]:
    """Valid claims over records of grey and RGB images of four sizes."""
    labelled = _Record.of("image", _mixed_images(17, labelled=True))
    unlabelled = _Record.of("image", _mixed_images(19, labelled=False))
    captioned = _Record.of("captioned-image", _mixed_captioned())
    rows: list[tuple[str, _Record, StandIn, dict[str, Any]]] = [
        (
            _MIXED,
            labelled,
            StandIn("classify", "probabilities"),
            {
                "score": ScoreSpec(k=2, perturbation="random-resized-crop-flip-v2", knowledge="C1"),
                "test_name": "mixture-e",
                "p": 0.05,
                "tie_rule": TiePolicy.COIN,
                "max_pairs": 10,
                "window": 4,
            },
        ),
        (
            "mixed sizes: a memorising classifier, C3 label answers, none K=1, mixture-e, "
            "skip: detected",
            labelled,
            StandIn("classify", "label", _memorised(labelled)),
            {
                "score": ScoreSpec(k=1, perturbation="none", knowledge="C3"),
                "test_name": "mixture-e",
                "p": 0.05,
                "window": 4,
                "window_max": 8,
            },
        ),
        (
            "mixed sizes: image-encoder K=2, simclr-crop-flip-v2, mixture-e, skip, max_pairs 8",
            unlabelled,
            StandIn("embed-images"),
            {
                "score": EncoderSpec(k=2, perturbation="simclr-crop-flip-v2"),
                "test_name": "mixture-e",
                "p": 0.05,
                "max_pairs": 8,
                "window": 8,
            },
        ),
        (
            "mixed sizes: image-classifier C2, pad-shift-flip-dither K=2, mixture-e, skip, "
            "max_pairs 8",
            unlabelled,
            StandIn("classify", "probabilities"),
            {
                "score": ScoreSpec(k=2, perturbation="pad-shift-flip-dither", knowledge="C2"),
                "test_name": "mixture-e",
                "p": 0.05,
                "max_pairs": 8,
                "window": 8,
            },
        ),
        (
            _FITTED,
            labelled,
            StandIn(
                "classify", "probabilities", model=("torch 2.13.0+cpu", "torchscript", (3, 3, 1))
            ),
            {
                "score": ScoreSpec(k=2, perturbation="random-resized-crop-flip-v2", knowledge="C1"),
                "test_name": "mixture-e",
                "p": 0.05,
                "tie_rule": TiePolicy.COIN,
                "max_pairs": 10,
                "window": 4,
                "input_fit": "area",
            },
        ),
        (
            "fitted: image-encoder K=2, pad-shift-flip-dither, mixture-e, skip, max_pairs 8, "
            "every image fitted to the model's input [6, 5, 3] (grey to colour, no side smaller)",
            unlabelled,
            StandIn("embed-images", model=("onnxruntime 1.31.1", "onnx", (6, 5, 3))),
            {
                "score": EncoderSpec(k=2, perturbation="pad-shift-flip-dither"),
                "test_name": "mixture-e",
                "p": 0.05,
                "max_pairs": 8,
                "window": 8,
                "input_fit": "area",
            },
        ),
        (
            "fitted: image-text, pprm-chernoff, coin, max_pairs 8, every image fitted to the "
            "model's input [4, 4, 3]",
            captioned,
            StandIn("embed-image-text", model=("", "", (4, 4, 3))),
            {
                "score": ImageTextSpec(),
                "test_name": "pprm-chernoff",
                "p": 0.05,
                "tie_rule": TiePolicy.COIN,
                "max_pairs": 8,
                "window": 8,
                "input_fit": "area",
            },
        ),
        (
            "mixed sizes: image-text, pprm-chernoff, coin, max_pairs 8",
            captioned,
            StandIn("embed-image-text"),
            {
                "score": ImageTextSpec(),
                "test_name": "pprm-chernoff",
                "p": 0.05,
                "tie_rule": TiePolicy.COIN,
                "max_pairs": 8,
                "window": 8,
            },
        ),
    ]
    return {
        name: _claim_case(name, record, oracle, params) for name, record, oracle, params in rows
    }


def _alpha_cases() -> dict[str, dict[str, Any]]:
    """A pprm-chernoff claim whose alpha is not p/2 (spec §10.1: any 0 < α < p)."""
    name = "image-classifier C3 label answers, dither K=1, pprm-chernoff alpha 0.01, coin"
    params = {
        "score": ScoreSpec(k=1, perturbation="dither", knowledge="C3"),
        "test_name": "pprm-chernoff",
        "p": 0.05,
        "alpha": 0.01,
        "tie_rule": TiePolicy.COIN,
        "window": 4,
        "window_max": 8,
    }
    record = _records()["labelled"]
    return {name: _claim_case(name, record, StandIn("classify", "label"), params)}


#: A change to a claim case's input; it also gets the pairs of the claim's first request.
Edit = Callable[[dict[str, Any], list[int]], None]


def _answer(request: int, key: str, edit: Callable[[list[Any]], object]) -> Edit:
    """Change the ``key`` rows (``probabilities``, ``embeddings``, …) of one answer."""

    def apply(inp: dict[str, Any], _: list[int]) -> None:
        edit(inp["answers"][request][key])

    return apply


def _opening(position: int, edit: Callable[[dict[str, Any], dict[str, Any]], object]) -> Edit:
    """Change the opening of the ``position``-th pair of the first request (given the next)."""

    def apply(inp: dict[str, Any], first: list[int]) -> None:
        openings = {o["index"]: o for o in inp["openings"]}
        edit(openings[first[position]], openings[first[position + 1]])

    return apply


def _claim_entry(*path: str, value: dict[str, Any]) -> Edit:
    """Set the entry at ``path`` of the claim map (typed JSON) to ``value``."""

    def apply(inp: dict[str, Any], _: list[int]) -> None:
        entries = inp["claim"]["map"]
        for key in path[:-1]:
            entries = next(e for e in entries if e[0] == key)[1]["map"]
        next(e for e in entries if e[0] == path[-1])[1] = value

    return apply


def _drop_input_shape(inp: dict[str, Any], _: list[int]) -> None:
    """Remove the Describe map's ``input_shape`` (typed JSON), keeping the claim's fit."""
    model = next(e for e in inp["claim"]["map"] if e[0] == "model")[1]["map"]
    oracle = next(e for e in model if e[0] == "oracle")[1]["map"]
    oracle[:] = [e for e in oracle if e[0] != "input_shape"]


def _excluded(inp: dict[str, Any]) -> list[Any]:
    """The claim map's ``excluded`` list (typed JSON), to change in place."""
    entry = next(e for e in inp["claim"]["map"] if e[0] == "excluded")
    values: list[Any] = entry[1]["array"]
    return values


def _labels_for_probabilities(inp: dict[str, Any], _: list[int]) -> None:
    answer = inp["answers"][0]
    answer["labels"] = [0] * len(answer.pop("probabilities"))


def _swap_versions(opening: dict[str, Any], _: dict[str, Any]) -> None:
    opening["version0"], opening["version1"] = opening["version1"], opening["version0"]


def _take_next(opening: dict[str, Any], following: dict[str, Any]) -> None:
    for key in ("salt", "version0", "version1"):
        opening[key] = following[key]


_SHORT = "image-classifier C1, dither K=1, mixture-e, skip, max_pairs 4"
_MEMORISED = "a memorising classifier, C1 none K=1, mixture-e, skip: detected"
_MEMORISED_PARAMS: dict[str, Any] = {
    "score": ScoreSpec(k=1, perturbation="none", knowledge="C1"),
    "test_name": "mixture-e",
    "p": 0.05,
    "window": 2,
    "window_max": 2,
}
_MEMORISED_LANGUAGE = "a memorising language model, mixture-e, skip: detected"
_UNLEARNED = (
    "image-classifier C1, none K=1, mixture-e, skip, the pairs of an earlier claim "
    "excluded, after unlearning (a model that recalls nothing): exhausted"
)
_GRADED = "a memorising classifier, C1 none K=1, margin 0.01, mixture-graded, skip: detected"
_MIXED = (
    "mixed sizes: image-classifier C1, random-resized-crop-flip-v2 K=2, mixture-e, coin, "
    "max_pairs 10"
)
_ENCODER = "image-encoder K=2, random-resized-crop-flip, mixture-e, skip, max_pairs 8"
_LANGUAGE = "language-model, pprm-chernoff, coin"
_IMAGE_TEXT = "image-text, mixture-e, coin, query budget 12"
_FITTED = (
    "fitted: image-classifier C1, random-resized-crop-flip-v2 K=2, mixture-e, coin, "
    "max_pairs 10, every image fitted to the model's input [3, 3, 1] (mixed sizes, colour "
    "to grey, sides larger and smaller)"
)
_NAN = float("nan").hex()
_DESCRIBED = (
    "image-classifier C2, none K=1, mixture-e, skip, max_pairs 4, an oracle that reports "
    "its framework, model format and input shape"
)

#: One input of a valid claim changed: (base claim, change, the request that fails (-1:
#: the claim fails to start), edit). The claim must fail with a typed error.
BROKEN: list[tuple[str, str, int, Edit]] = [
    (
        _SHORT,
        "answers with one class too few",
        0,
        _answer(0, "probabilities", lambda rows: [r.pop() for r in rows]),
    ),
    (_SHORT, "one answer too few", 0, _answer(0, "probabilities", lambda rows: rows.pop())),
    (
        _SHORT,
        "a probability above 1",
        0,
        _answer(0, "probabilities", lambda rows: rows[0].__setitem__(0, (1.5).hex())),
    ),
    (
        _SHORT,
        "a NaN probability",
        0,
        _answer(0, "probabilities", lambda rows: rows[1].__setitem__(2, _NAN)),
    ),
    (
        _SHORT,
        "a row summing to 1.01",
        0,
        _answer(
            0,
            "probabilities",
            lambda rows: rows.__setitem__(0, [x.hex() for x in (0.25, 0.25, 0.25, 0.26)]),
        ),
    ),
    (_SHORT, "labels answered where the claim needs probabilities", 0, _labels_for_probabilities),
    (
        "image-classifier C3 label answers, dither K=1, pprm-chernoff, coin",
        "a label outside the classes",
        1,
        _answer(1, "labels", lambda rows: rows.__setitem__(0, N_CLASSES)),
    ),
    (
        _SHORT,
        "an opening with another salt",
        0,
        _opening(0, lambda o, _: o.__setitem__("salt", "00" * 32)),
    ),
    (_SHORT, "an opening with its versions swapped", 0, _opening(0, _swap_versions)),
    (_SHORT, "the second pair opened with the third pair's opening", 0, _opening(1, _take_next)),
    (_SHORT, "a proof one hash short", 0, _opening(2, lambda o, _: o["proof"].pop())),
    (
        _SHORT,
        "a claim on another root",
        -1,
        _claim_entry("record", "root", value={"bin": "00" * 32}),
    ),
    (
        _SHORT,
        "C1 against an oracle that answers labels",
        -1,
        _claim_entry("model", "oracle", "classify_output", value={"str": "label"}),
    ),
    (
        _SHORT,
        "an image score on a record of texts",
        -1,
        lambda inp, _: inp["record"].__setitem__("item_kind", "text"),
    ),
    (
        _ENCODER,
        "copies that are dithered images",
        -1,
        _claim_entry("score", "perturbation", value={"str": "dither"}),
    ),
    (
        _ENCODER,
        "copies that are the image",
        -1,
        _claim_entry("score", "perturbation", value={"str": "none"}),
    ),
    (
        _ENCODER,
        "one copy per version",
        -1,
        _claim_entry("score", "k", value={"int": "1"}),
    ),
    (
        _ENCODER,
        "an embedding of zeros",
        0,
        _answer(0, "embeddings", lambda rows: rows.__setitem__(3, [(0.0).hex()] * DIM)),
    ),
    (
        _ENCODER,
        "an entry above 2^64",
        1,
        _answer(1, "embeddings", lambda rows: rows[0].__setitem__(1, (2.0**65).hex())),
    ),
    (
        _ENCODER,
        "embeddings of dimension 0",
        0,
        _answer(0, "embeddings", lambda rows: [r.clear() for r in rows]),
    ),
    (
        _LANGUAGE,
        "a positive log-probability",
        0,
        _answer(0, "logprobs", lambda rows: rows[3].__setitem__(0, (0.5).hex())),
    ),
    (
        _LANGUAGE,
        "log-probabilities for one text too few",
        0,
        _answer(0, "logprobs", lambda rows: rows.pop()),
    ),
    (
        _LANGUAGE,
        "a NaN log-probability",
        0,
        _answer(0, "logprobs", lambda rows: rows[0].__setitem__(1, _NAN)),
    ),
    (
        _IMAGE_TEXT,
        "caption embeddings of another dimension",
        0,
        _answer(0, "texts", lambda rows: [r.append((1.0).hex()) for r in rows]),
    ),
    (_IMAGE_TEXT, "one image embedding too few", 1, _answer(1, "images", lambda rows: rows.pop())),
    (
        _MIXED,
        "the first shape's request of the first window answered with one row too few",
        0,
        _answer(0, "probabilities", lambda rows: rows.pop()),
    ),
    (
        _UNLEARNED,
        "excluded pairs out of order",
        -1,
        lambda inp, _: _excluded(inp).reverse(),
    ),
    (
        _UNLEARNED,
        "an excluded pair listed twice",
        -1,
        lambda inp, _: _excluded(inp).append(_excluded(inp)[-1]),
    ),
    (
        _UNLEARNED,
        "an excluded pair beyond the record",
        -1,
        lambda inp, _: _excluded(inp).append({"int": str(N_PAIRS)}),
    ),
    (
        _UNLEARNED,
        "every pair excluded",
        -1,
        _claim_entry("excluded", value={"array": [{"int": str(i)} for i in range(N_PAIRS)]}),
    ),
    (
        _UNLEARNED,
        "an empty exclusion list (a claim without exclusions has no such key)",
        -1,
        _claim_entry("excluded", value={"array": []}),
    ),
    (
        _DESCRIBED,
        "a Describe map whose input_shape has two sides",
        -1,
        _claim_entry(
            "model", "oracle", "input_shape", value={"array": [{"int": "4"}, {"int": "4"}]}
        ),
    ),
    (
        _DESCRIBED,
        "a Describe map whose input_shape has 2 channels",
        -1,
        _claim_entry(
            "model",
            "oracle",
            "input_shape",
            value={"array": [{"int": "4"}, {"int": "4"}, {"int": "2"}]},
        ),
    ),
    (
        _FITTED,
        "an input_fit rule other than area",
        -1,
        _claim_entry("input_fit", value={"str": "bilinear"}),
    ),
    (
        _FITTED,
        "an input_fit where the Describe map declares no input_shape",
        -1,
        _drop_input_shape,
    ),
    (
        _DESCRIBED,
        "a Describe map with an empty model_format (an unreported field is left out)",
        -1,
        _claim_entry("model", "oracle", "model_format", value={"str": ""}),
    ),
]


def _broken_cases(valid: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """Each row of :data:`BROKEN`: the base claim's input with one change, and its error.

    The input keeps the openings and answers up to the request that fails (none when
    the claim fails to start): a claim stops at its first failure.
    """
    cases = []
    for base, change, fails, edit in BROKEN:
        inp = copy.deepcopy(valid[base]["input"])
        requests = valid[base]["expected"]["requests"]
        kept = {i for request in requests[: fails + 1] for i in request["pairs"]}
        inp["openings"] = [o for o in inp["openings"] if o["index"] in kept]
        inp["answers"] = inp["answers"][: fails + 1]
        edit(inp, requests[0]["pairs"])
        try:
            run_claim(inp)
        except TwinauditError as exc:
            error = error_fields(exc)
        else:  # pragma: no cover - every row breaks its claim
            raise AssertionError(f"{change}: the claim did not fail")
        cases.append(
            {"name": f"claim: {base}: {change}", "kind": "claim", "valid": False, "input": inp}
            | error
        )
    return cases


def build() -> dict[str, Any]:
    """Return the whole vector document."""
    claims = _claim_cases() | _mixed_size_cases() | _alpha_cases()
    for name, made in claims.items():
        assert run_claim(made["input"]) == made["expected"], name
    return {
        "spec_version": SPEC_VERSION,
        "topic": "claims",
        "description": (
            "Claims (spec §10–§11). 'schedule': the window schedule of a claim (§10.1, "
            "§10.2 step 3). 'limit' is min(max_pairs, n) (n when max_pairs is 0), "
            "'queries_per_pair' is 2K, 'query_budget' 0 means unlimited. 'sizes' lists the "
            "number of pairs of every request, in order, until the schedule stops (a claim "
            "that decides early makes only a prefix of them). 'claim': a whole claim run by "
            "the verifier (§10.2). Input: the escrow 'record' (its root, size, item kind, "
            "rho and receipt time), the 'claim' map of §10.1 as typed JSON (appendix A; the "
            "transcript's header; a claim map with 'excluded' skips the pairs earlier claims "
            "opened, §10.2 step 2), the verdict's own fields ('verdict': arbiter key id, "
            "claim_id, time, earlier_claims, environment), the owner's 'openings' of the pairs "
            "the claim opens (salt, both versions' bytes, inclusion proof), and the oracle's "
            "'answers', "
            "one per request to the oracle in the order they are made, each answering the "
            "request's queries in the order they are sent (one oracle request per window, "
            "except that a window whose image queries have several shapes makes one per "
            "shape, in the order §10.2 step 5 gives, image-text's captions first in a request "
            "of their own): 'probabilities' rows or 'labels' "
            "(classify), 'embeddings' rows (embed-images), 'logprobs' lists, one per text "
            "(token-logprobs), 'images' and 'texts' rows (embed-image-text). Expected: per "
            "request (window), the pairs it opens and the SHA-256 of every query in the order "
            "sent, over all its oracle requests "
            "('images': the float32 bytes, H, W, C row-major, little-endian; 'texts': the "
            "UTF-8 bytes); the verdict's opened pairs, indicators, final state, decision, "
            "stop and queries; both scores of every opened pair ('scores', as its transcript "
            "record holds them) and the transcript's chain head and record count (§12); and "
            "'payload', the canonical "
            "verdict payload of §11 — compared byte for byte, except that its "
            "final.log_statistic is compared under the agreement rule of §7.3.3. The answers were "
            "made by a stand-in model that reads SHA-256 of each query, one that recalls "
            "the published versions in the 'detected' claims. Invalid claim cases change one "
            "input of a valid one and keep the openings and answers up to the request that "
            "fails; the claim MUST fail with 'error'. Floats are C99 hex strings. "
            "'requests': how a window's image queries are cut into requests to the oracle "
            "(§10.2 step 5). Input: the 'shapes' [H, W, C] of the queries in the order sent, "
            "the oracle's 'max_batch', the protocol's 'request_bytes' cap, its cap on a "
            "request of one query ('single_bytes', 0: none) and the bytes an intensity "
            "takes in a request ('element_bytes'; a query takes H·W·C of them). "
            "Expected: the 'requests', each the positions (in the order sent) of the queries "
            "it holds, in the order they are sent; invalid where one query exceeds both caps. "
            "A 'requests' case may add 'answer_bytes', the most bytes one query's answer "
            "takes (a request then holds at most request_bytes/answer_bytes queries, at "
            "least 1), and 'fixed_batch' true (a model whose batch is fixed at max_batch: "
            "runs of exactly max_batch, whatever the byte cap, and 'padding', the blank "
            "images added to each request, expected too); a case without them has neither "
            "bound. 'openings': a request's openings split into gRPC messages (§10.2 step 4, "
            "transport). Input: the 'count' of pairs requested, the 'messages' in the order "
            "sent ('openings' with its 'pairs' and 'more', or a 'part' with its data), and "
            "the two byte thresholds scaled down for the vectors ('min_part_bytes' for 1 "
            "MiB, 'max_request_bytes' for MAX_REQUEST_OPENING_BYTES; MAX_ENCODED_BYTES is "
            "not scaled). Expected: the reassembled 'pairs' in order, or the error."
        ),
        "cases": [
            *[_schedule(row) for row in _SCHEDULES],
            *[_requests(row) for row in _REQUESTS],
            *request_cases(),
            *opening_cases(),
            *claims.values(),
            *_broken_cases(claims),
        ],
    }


def main() -> None:
    """Rewrite spec/vectors/claims.json."""
    VECTOR_FILE.write_text(render(build()), encoding="utf-8")


if __name__ == "__main__":
    main()
