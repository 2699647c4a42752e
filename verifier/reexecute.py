"""Re-execute a verdict's queries on the model artefact and compare every answer (spec §12.1).

Replay (:mod:`twinaudit.verifier.replay`) recomputes the decision from the answers a transcript
records; it cannot tell whether the model gave them. When the verdict's model is an
artefact the arbiter held (``held:sha256:<hex>``, :mod:`twinaudit.verifier.oracles.held`), and
its digest is the SHA-256 of a file, anyone holding the verdict, its transcript, the
openings of its pairs (:mod:`twinaudit.protocol.claim.openings`) and that file can run the
model again on the very queries the claim sent and confirm it answers what the
transcript records:

1. the verdict replays (:func:`~twinaudit.verifier.replay.replay`);
2. the file's SHA-256 is the model digest the verdict records (:func:`reexecute`);
3. each opened pair's opening is under the verdict's root, and its versions have the
   digests its transcript record lists;
4. each window of pairs is rebuilt as the claim built it — the same copies from the
   PRG, shuffled by the same stream — and checked against the recorded query
   digests (the score functions that record them) and, where the oracle signed its
   answers (spec §10.8), against every query digest its signed batches list;
5. the model, run in a child process exactly as the arbiter ran it (same options,
   same thread count, deterministic algorithms, the same requests: a window's
   shuffled queries split into the same batches), answers each window; the answers
   must equal the recorded ones **bit for bit** (their canonical encodings are
   compared).

Bit-for-bit equality needs the conditions spec §12.1 states (CPU float32, the same
torch version and CPU capability, one thread, deterministic algorithms, the same
batches); the recorded framework text names what the arbiter ran, and a mismatch
message says when this host differs. Every failure is a
:class:`~twinaudit.protocol.errors.VerificationError` with one line naming the first pair that
differs. Image classifiers (probabilities) and image encoders are re-executed.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import numpy as np

from twinaudit.protocol.claim.claim_map import ClaimMap
from twinaudit.protocol.claim.functions import SCORE_FUNCTIONS, score_function
from twinaudit.protocol.claim.openings import OpenedPair, decode_openings
from twinaudit.protocol.claim.transcript import iter_records
from twinaudit.protocol.claim.verdict import Verdict
from twinaudit.protocol.commitment import version_digest
from twinaudit.protocol.encoding import Value, encode
from twinaudit.protocol.errors import InputError, OracleError, TwinauditError, VerificationError
from twinaudit.protocol.items import Item, decode_pair
from twinaudit.protocol.merkle import verify_inclusion
from twinaudit.protocol.oracles.base import Oracle
from twinaudit.verifier.answer_slots import sent_queries
from twinaudit.verifier.oracles.held import HELD_THREADS, ServeOptions, file_sha256, start_held
from twinaudit.verifier.replay import replay
from twinaudit.verifier.windows import scorer_for
from twinaudit.verifier.windows.base import QueryBatch

#: Score functions whose answers can be re-executed: those of image models, which a held
#: child serves (the table of score functions, by item kind).
REEXECUTED_FUNCTIONS: Final = tuple(
    f.name for f in SCORE_FUNCTIONS.values() if f.item_kind == "image"
)
#: Describe fields the local model must report as the verdict records them.
_SAME_FIELDS = ("capabilities", "classify_output", "n_classes", "max_batch", "input_shape")


@dataclass(frozen=True)
class ReexecuteResult:
    """What was re-executed: pairs, windows and answers, all equal to the recorded ones."""

    pairs: int
    windows: int
    answers: int
    model_digest: str
    framework_recorded: str
    framework_here: str


@dataclass(frozen=True)
class ModelOptions:
    """What the verdict cannot say about serving the file: how it loads and normalises."""

    model_format: str | None = None
    arch: str | None = None
    trust_pickle: bool = False
    mean: tuple[float, ...] | None = None
    std: tuple[float, ...] | None = None


def _fail(message: str) -> VerificationError:
    return VerificationError(f"reexecute: {message}")


def reexecute(
    verdict: Verdict,
    transcript: bytes,
    openings: bytes,
    model: Path,
    options: ModelOptions = ModelOptions(),
) -> ReexecuteResult:
    """Check ``model``'s SHA-256 against the verdict, run it, and compare every answer.

    ``model`` is started as a held child (:func:`~twinaudit.verifier.oracles.held.start_held`)
    with the verdict's recorded Describe fields (name, kind, input shape, classes,
    batch) and ``options``. A file whose digest is not the recorded one is refused
    before it runs; a model that does not start is an ``InputError``.
    """
    replay(verdict, transcript)
    claim = verdict.claim
    info = claim.oracle_info
    _check_function(claim)
    digest = file_sha256(model)
    if digest != info.model_digest:
        raise _fail(
            f"the model file's SHA-256 {digest} is not the model digest the verdict records "
            f"({info.model_digest[:80]}): a different artefact"
        )
    serve = ServeOptions(
        name=info.model_name,
        kind="encoder" if claim.score.function == "image-encoder" else "classifier",
        model_format=options.model_format or info.model_format or None,
        arch=options.arch,
        trust_pickle=options.trust_pickle,
        input_shape=_height_width_channels(info.input_shape),
        n_classes=info.n_classes or None,
        mean=options.mean,
        std=options.std,
        max_batch=info.max_batch,
    )
    try:
        oracle = start_held(model, serve, digest=digest, threads=HELD_THREADS)
    except OracleError as exc:
        raise InputError(f"the model does not run: {exc}") from None
    try:
        return recompute_answers(verdict, transcript, openings, oracle)
    finally:
        oracle.close()


def recompute_answers(
    verdict: Verdict, transcript: bytes, openings: bytes, oracle: Oracle
) -> ReexecuteResult:
    """Rebuild every window's queries, ask ``oracle``, and compare with the recorded answers.

    Checks steps 3–5 of the module docstring (not the file's digest: :func:`reexecute`
    does). ``verdict`` and ``transcript`` must have replayed.
    """
    claim = verdict.claim
    recorded = claim.oracle_info
    _check_function(claim)
    here = oracle.info
    for name in _SAME_FIELDS:
        if getattr(here, name) != getattr(recorded, name):
            raise _fail(
                f"the model here reports {name} {getattr(here, name)!r}, the verdict "
                f"{getattr(recorded, name)!r}"
            )
    scorer = scorer_for(claim.score, claim.fit_shape)
    windows = answers = pairs = 0
    note = _framework_note(recorded.framework, here.framework)
    for window in rebuilt_windows(verdict, transcript, openings):
        try:
            answer = scorer.ask(oracle, recorded, window.batch)
        except (OracleError, InputError) as exc:
            raise _fail(f"window {window.number}: the model did not answer: {exc}{note}") from None
        scored = scorer.score(recorded, window.batch, answer, window.items)
        for record, result in zip(window.records, scored, strict=True):
            _compare(record, result.fields, note)
            answers += claim.queries_per_pair
        windows += 1
        pairs += len(window.records)
    return ReexecuteResult(
        pairs=pairs,
        windows=windows,
        answers=answers,
        model_digest=recorded.model_digest,
        framework_recorded=recorded.framework,
        framework_here=here.framework,
    )


@dataclass(frozen=True)
class RebuiltWindow:
    """One window of a verdict's claim, rebuilt from the openings.

    Its pairs' records, their items, and its queries in the order the claim sent them.
    """

    number: int
    records: list[dict[str, Value]]
    items: list[tuple[Item, Item]]
    batch: QueryBatch


def rebuilt_windows(
    verdict: Verdict, transcript: bytes, openings: bytes
) -> Iterator[RebuiltWindow]:
    """Check steps 3–4 of the module docstring, window by window; yield each window.

    Each opened pair's opening must be under the verdict's root and its versions must
    have the digests its record lists; each window's queries are rebuilt from the items
    and the PRG as the claim built them, and each record's fields that they fix (the
    image functions' label, shape, parameters and query digests) must equal the
    rebuilt ones. Where the oracle signed its answers (spec §10.8), every query digest
    that the window's answers records list must be the digest of the rebuilt query its
    slot names. No model is run. ``verdict`` and ``transcript`` must have replayed.

    Raises:
        InputError: the openings file is malformed (its subclasses say how).
        VerificationError: an opening, a digest or a rebuilt field differs.

    """
    claim = verdict.claim
    root, opened = decode_openings(openings)
    if root != claim.record_root:
        raise _fail("the openings are not under the verdict's escrowed root")
    # The pair records; an oracle that signed its answers adds answers records (§10.8).
    every = list(iter_records(transcript))[1:]
    records = [r for r in every if r.get("type") == "pair"]
    signed = [r for r in every if r.get("type") == "answers"]
    kind = score_function(claim.score.function).item_kind
    scorer = scorer_for(claim.score, claim.fit_shape)
    seed = verdict.audit_seed
    for number, window in _windows(records):
        indices = [_int(record["index"]) for record in window]
        items = [
            _items(record, opened.get(index), claim, kind)
            for record, index in zip(window, indices, strict=True)
        ]
        for first, second in items:
            scorer.check_item(first)
            scorer.check_item(second)
        batch = scorer.build(seed, number, indices, items)
        for j, (record, pair) in enumerate(zip(window, items, strict=True)):
            for key, value in scorer.item_fields(batch, j, pair).items():
                if encode(record[key]) != encode(value):
                    raise _fail(
                        f"pair {record['index']!r}: the recorded {key} is not the one its "
                        "opened items give"
                    )
        if claim.oracle_info.answer_key:
            _check_signed_digests(
                number, batch, indices, [r for r in signed if r["window"] == number]
            )
        yield RebuiltWindow(number, window, items, batch)


def _check_signed_digests(
    number: int, batch: QueryBatch, indices: list[int], answers: list[dict[str, Value]]
) -> None:
    """Compare the query digests a window's signed batches list with its rebuilt queries.

    Spec §10.8, §12: the digest at each slot ``[i, q]`` of an answers record must be
    the digest of query ``q`` of pair ``i`` as the claim built it from the items, so
    that the oracle's signatures are over the claim's own queries. Replay has checked
    the records' form and that their slots name each query of the window once.
    """
    images, texts = sent_queries(batch, indices)
    rebuilt = dict(images + texts)
    for position, record in enumerate(answers):
        slots, digests = record["slots"], record["query_digests"]
        assert isinstance(slots, list)  # replay checked the record's form
        assert isinstance(digests, list)
        for slot, digest in zip(slots, digests, strict=True):
            assert isinstance(slot, list)
            index, place = (_int(v) for v in slot)
            if rebuilt.get((index, place)) != digest:
                raise _fail(
                    f"window {number}: signed batch {position} lists at slot [{index}, "
                    f"{place}] (pair {index}, query {place}) a query digest that is not the "
                    "digest of the query the opened items give: the oracle's signature is "
                    "over another query"
                )


def check_openings(verdict: Verdict, transcript: bytes, openings: bytes) -> int:
    """Check a replayed verdict's records against the openings of its pairs; return the pairs.

    This is replay's check with the openings (spec §12), steps 3–4 of the module
    docstring for every score function: what a transcript records of the items (their
    digests, the image functions' label, shape, parameters and query digests, and the
    query digests the oracle signed, where it signed its answers) and replay alone
    cannot recompute, recomputed here from the items. No model runs.
    """
    return sum(len(window.records) for window in rebuilt_windows(verdict, transcript, openings))


def _height_width_channels(shape: tuple[int, ...]) -> tuple[int, int, int] | None:
    """Return a recorded ``input_shape`` as (H, W, C), None where none was reported.

    The claim map's Describe map was checked when the verdict was parsed: a shape it
    reports is (H, W, C) (spec §10.1).
    """
    if not shape:
        return None
    height, width, channels = shape
    return height, width, channels


def _check_function(claim: ClaimMap) -> None:
    function = claim.score.function
    if function not in REEXECUTED_FUNCTIONS:
        raise InputError(
            f"reexecute runs image classifiers and encoders, not a {function} score's model"
        )
    info = claim.oracle_info
    if "classify" in info.capabilities and info.classify_output != "probabilities":
        raise InputError("reexecute runs classifiers that answer probabilities, not labels")


def _windows(records: list[dict[str, Value]]) -> Iterator[tuple[int, list[dict[str, Value]]]]:
    """Yield each window's number and its pair records, in order (replay checked them)."""
    current: list[dict[str, Value]] = []
    for record in records:
        if current and record["window"] != current[0]["window"]:
            yield _int(current[0]["window"]), current
            current = []
        current.append(record)
    if current:
        yield _int(current[0]["window"]), current


def _int(value: Value) -> int:
    """Return a record's integer field (replay has checked its type)."""
    assert isinstance(value, int)
    return value


def _items(
    record: dict[str, Value], pair: OpenedPair | None, claim: ClaimMap, kind: str
) -> tuple[Item, Item]:
    """Check a pair's opening against the root and its record's digests; decode its items."""
    index = record["index"]
    if pair is None:
        raise _fail(f"the openings file has no opening of pair {index!r}")
    try:
        verify_inclusion(
            leaf_data=pair.opening.commitment(),
            index=pair.index,
            size=claim.n_pairs,
            proof=pair.proof,
            root=claim.record_root,
        )
    except TwinauditError as exc:
        raise _fail(f"pair {index!r}: the opening is not under the verdict's root: {exc}") from None
    digests = [version_digest(pair.opening.version0), version_digest(pair.opening.version1)]
    if encode(list[Value](digests)) != encode(record["digests"]):
        raise _fail(f"pair {index!r}: the opened versions are not the ones the transcript records")
    return decode_pair(pair.opening.version0, pair.opening.version1, kind)


def _compare(record: dict[str, Value], fields: dict[str, Value], note: str) -> None:
    """Compare a re-executed pair's answers with its record, bit for bit.

    Its queries were compared when its window was rebuilt (:func:`rebuilt_windows`).
    """
    index = record["index"]
    if encode(record["answers"]) != encode(fields["answers"]):
        gap = _largest_difference(record["answers"], fields["answers"])
        raise _fail(
            f"pair {index!r}: the model's answers differ from the recorded ones "
            f"(largest difference {gap:.3g}){note}"
        )


def _largest_difference(recorded: Value, computed: Value) -> float:
    """Return the largest absolute difference between two answers of one form (inf if unlike)."""
    try:
        a, b = _floats(recorded), _floats(computed)
    except (TypeError, ValueError):
        return float("inf")
    if a.shape != b.shape:
        return float("inf")
    return float(np.max(np.abs(a - b))) if a.size else 0.0


def _floats(value: Value) -> np.ndarray:
    """Flatten recorded answers to float64: lists of floats, or embeddings' ``values`` bytes."""
    if isinstance(value, dict):
        raw = value.get("values")
        if not isinstance(raw, bytes):
            raise TypeError("no values")
        return np.frombuffer(raw, dtype="<f8")
    if isinstance(value, list):
        parts = [_floats(v) for v in value] if value and isinstance(value[0], list | dict) else []
        if parts:
            return np.concatenate(parts)
        return np.array(value, dtype=np.float64)
    raise TypeError("not an answer")


def _framework_note(recorded: str, here: str) -> str:
    """Return a note when this host runs the model under another framework text."""
    if recorded == here:
        return ""
    return f"; the verdict's model ran under {recorded!r}, here {here!r} (spec §12.1)"
