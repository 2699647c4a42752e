"""Signed answer batches in a transcript (spec §10.8, §12): records, rows and their check.

A claim whose Describe map names an ``answer_key`` records, after each window's pair
records, one *answers record* per answer batch the oracle signed, in the order the
batches were answered:

    {"type": "answers", "window": j, "slots": [[i, q], …],
     "query_digests": [<32 bytes>, …], "signature": <64 bytes>}

``slots[n]`` names the query of position ``n`` in the batch: pair ``i`` of the window
and ``q``, the query's place among the pair's queries (:func:`pair_rows`); the batch's
answer rows are not recorded twice, since they are the pair records' answers at those
slots. :func:`check_window_answers` is what replay checks of a window: the slots cover
each query of the window's pairs exactly once, and every signature verifies under the
answer key over the claim nonce, the recorded query digests and the rows rebuilt from
the pair records. An answer altered after the oracle signed it therefore fails replay
(``verification-failed``), even when the verdict is signed again with the arbiter's key.
Where a pair record's ``query_digests`` hold the digest of one query (image functions
with ``K`` = 1, image-text's images: :func:`recorded_query_digest`), the digest signed
at that query's slot must be the record's, so that neither can be changed alone.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from twinaudit.protocol.encoding import Value
from twinaudit.protocol.errors import VerificationError
from twinaudit.protocol.limits import HASH_BYTES
from twinaudit.protocol.oracles.signed_answers import SIGNATURE_BYTES, answer_signature_valid

__all__ = [
    "ANSWERS_KEYS",
    "answers_record",
    "check_answers_record",
    "check_window_answers",
    "pair_rows",
    "queries_of_pair",
    "recorded_query_digest",
]

#: The keys of an answers record (spec §12).
ANSWERS_KEYS: Final = frozenset({"type", "window", "slots", "query_digests", "signature"})


def _fail(message: str) -> VerificationError:
    return VerificationError(f"replay: signed answers: {message}")


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def answers_record(
    window: int, slots: Sequence[tuple[int, int]], query_digests: Sequence[bytes], signature: bytes
) -> dict[str, Value]:
    """Return the answers record of one signed batch of window ``window``."""
    return {
        "type": "answers",
        "window": window,
        "slots": [[index, place] for index, place in slots],
        "query_digests": list(query_digests),
        "signature": signature,
    }


def queries_of_pair(function: str, k: int) -> int:
    """Return how many queries a pair of the score ``function`` sends (its slots ``q``).

    ``2·K`` for the image-classifier and image-encoder (version 0's copies, then version
    1's), 2 for the language model (the two texts) and 3 for image-text (the two images,
    then the caption).
    """
    if function in ("image-classifier", "image-encoder"):
        return 2 * k
    return 3 if function == "image-text" else 2


def recorded_query_digest(
    function: str, k: int, record: dict[str, Value], place: int
) -> bytes | None:
    """Return the pair record's digest of the query at ``place``, where it records one.

    A pair record's ``query_digests`` hold one SHA-256 per version: for the image
    functions over the version's ``K`` copies concatenated, which is the digest of the
    one query an oracle signs when ``K`` = 1 and follows from no per-query digest when
    ``K`` > 1; for image-text, of the version's image, the query at ``place`` = ``v``.
    None where the record holds no digest of that query alone (``K`` > 1, a caption, a
    language model's texts). The record's form was checked first (spec §12).
    """
    if function in ("image-classifier", "image-encoder"):
        version = place if k == 1 else None
    elif function == "image-text":
        version = place if place < 2 else None
    else:
        version = None
    digests = record.get("query_digests")
    if version is None or not isinstance(digests, list) or version >= len(digests):
        return None
    digest = digests[version]
    return digest if isinstance(digest, bytes) else None


def _matrix_rows(value: Value, count: int) -> list[Value]:
    """Split a recorded ``{"dim": D, "values": …}`` into ``count`` rows of ``8·D`` bytes."""
    if not isinstance(value, dict) or set(value) != {"dim", "values"}:
        raise _fail("a recorded embedding is not {dim, values}")
    dim, data = value["dim"], value["values"]
    if not isinstance(dim, int) or isinstance(dim, bool) or not isinstance(data, bytes):
        raise _fail("a recorded embedding is not {dim: integer, values: bytes}")
    if dim < 1 or len(data) != 8 * dim * count:
        raise _fail("a recorded embedding's values do not match its dimension")
    width = 8 * dim
    return [data[n * width : (n + 1) * width] for n in range(count)]


def pair_rows(function: str, k: int, record: dict[str, Value]) -> list[Value]:
    """Return a pair record's answer rows in slot order (``q`` = 0, 1, …), as signed.

    Each row is the answer to one query as an oracle signs it (spec §10.8): a
    probability vector (a list of floats) or a label (an integer) of a classify answer,
    an embedding's ``D`` binary64 values (bytes), a text's log-probabilities (a list of
    floats).
    """
    answers = record.get("answers")
    if function == "image-classifier":
        if not (isinstance(answers, list) and len(answers) == 2):
            raise _fail("a classifier record's answers are not two lists")
        rows: list[Value] = []
        for version in answers:
            if not isinstance(version, list) or len(version) != k:
                raise _fail(f"a classifier record's version does not hold {k} answers")
            rows += version
        return rows
    if function == "image-encoder":
        if not (isinstance(answers, list) and len(answers) == 2):
            raise _fail("an encoder record's answers are not two matrices")
        return _matrix_rows(answers[0], k) + _matrix_rows(answers[1], k)
    if function == "image-text":
        if not isinstance(answers, dict) or set(answers) != {"images", "caption"}:
            raise _fail("an image-text record's answers are not images and caption")
        return _matrix_rows(answers["images"], 2) + _matrix_rows(answers["caption"], 1)
    if not (isinstance(answers, list) and len(answers) == 2):
        raise _fail("a language-model record's answers are not two lists")
    return list(answers)


def check_answers_record(record: dict[str, Value], window: int) -> str | None:
    """Check an answers record's keys and types; None when well formed, else the fault."""
    if set(record) != ANSWERS_KEYS or record["type"] != "answers":
        return f"an answers record of window {window} has the keys {sorted(record)}"
    slots, digests, signature = record["slots"], record["query_digests"], record["signature"]
    if record["window"] != window or not _is_int(record["window"]):
        return f"an answers record follows window {window} but names {record['window']!r}"
    if not (isinstance(slots, list) and isinstance(digests, list)) or not slots:
        return f"an answers record of window {window} has no slots"
    if len(slots) != len(digests):
        return (
            f"an answers record of window {window} has {len(slots)} slots, {len(digests)} digests"
        )
    if not all(
        isinstance(s, list) and len(s) == 2 and _is_int(s[0]) and _is_int(s[1]) for s in slots
    ):
        return f"an answers record of window {window} has a slot that is not [index, place]"
    if not all(isinstance(d, bytes) and len(d) == HASH_BYTES for d in digests):
        return f"an answers record of window {window} has a query digest that is not 32 bytes"
    if not isinstance(signature, bytes) or len(signature) != SIGNATURE_BYTES:
        return f"an answers record of window {window} has no 64-byte signature"
    return None


def check_window_answers(
    *,
    function: str,
    k: int,
    answer_key: bytes,
    claim_nonce: bytes,
    window: int,
    pairs: Sequence[dict[str, Value]],
    batches: Sequence[dict[str, Value]],
) -> None:
    """Check one window's answers records against its pair records (spec §12).

    Raise ``verification-failed`` unless every batch is well formed, the slots of the
    window's batches name each query of its pairs exactly once, every signature
    verifies under ``answer_key`` over ``claim_nonce``, the batch's query digests and
    the answer rows its slots name in the pair records, and every signed digest whose
    query the pair record gives a digest of (:func:`recorded_query_digest`) is that one.
    """
    if not batches:
        raise _fail(f"window {window} has no signed answer batch")
    per_pair = queries_of_pair(function, k)
    rows: dict[int, list[Value]] = {}
    recorded: dict[int, dict[str, Value]] = {}
    for record in pairs:
        index = record["index"]
        assert isinstance(index, int)  # replay checked the pair records first
        rows[index] = pair_rows(function, k, record)
        recorded[index] = record
    expected = {(index, place) for index in rows for place in range(per_pair)}
    seen: set[tuple[int, int]] = set()
    for number, batch in enumerate(batches):
        problem = check_answers_record(batch, window)
        if problem is not None:
            raise _fail(problem)
        slots = _slots(batch)
        for slot in slots:
            if slot not in expected or slot in seen:
                raise _fail(f"window {window}: slot {list(slot)} is not a query of the window once")
            seen.add(slot)
        answers = [rows[index][place] for index, place in slots]
        digests = [d for d in _list(batch["query_digests"]) if isinstance(d, bytes)]
        signature = batch["signature"]
        assert isinstance(signature, bytes)  # check_answers_record checked the types
        if not answer_signature_valid(answer_key, claim_nonce, digests, answers, signature):
            raise _fail(
                f"window {window}: batch {number}'s signature does not verify under the "
                "oracle's answer key over the claim's nonce and the recorded answers"
            )
        for (index, place), digest in zip(slots, digests, strict=True):
            mine = recorded_query_digest(function, k, recorded[index], place)
            if mine is not None and mine != digest:
                raise _fail(
                    f"window {window}: pair {index}, slot [{index}, {place}]: the query "
                    "digest the oracle signed is not the pair record's query digest"
                )
    if seen != expected:
        raise _fail(f"window {window}: {len(expected - seen)} queries have no signed answer")


def _list(value: Value) -> list[Value]:
    return value if isinstance(value, list) else []


def _slots(batch: dict[str, Value]) -> list[tuple[int, int]]:
    """Return a checked answers record's slots as ``(index, place)`` pairs."""
    slots = []
    for slot in _list(batch["slots"]):
        index, place = _list(slot)
        assert isinstance(index, int)  # check_answers_record checked both
        assert isinstance(place, int)
        slots.append((index, place))
    return slots
