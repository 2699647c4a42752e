"""Which query of a window each signed answer answers (spec §10.8): a claim's answers records.

The oracle signs each batch over the digests of the queries it received, in the order
received (:mod:`twinaudit.protocol.oracles.signed_answers`). A window's queries were
sent in the shuffled order of its :class:`~twinaudit.verifier.windows.QueryBatch`,
image queries by shape and in requests (spec §10.2 step 5); the batches come back in
that order, so each batch's digests, matched in turn against the window's queries in
sent order (the first query not yet matched that has the digest), name the queries it
answered. Queries with the same bytes have the same digest; matching them in sent order
names each exactly as it was sent. Each query is named as its slot ``[i, q]``: pair
``i``, place ``q`` among the pair's queries (``answer_records.pair_rows``).
"""

from __future__ import annotations

from collections import defaultdict, deque

import numpy as np

from twinaudit.protocol.claim.answer_records import answers_record, pair_rows
from twinaudit.protocol.encoding import Value
from twinaudit.protocol.errors import OracleError
from twinaudit.protocol.oracles.signed_answers import (
    SignedBatch,
    answer_signature_valid,
    image_query_digest,
    text_query_digest,
)
from twinaudit.verifier.windows import QueryBatch


def _queue(sent: list[tuple[tuple[int, int], bytes]]) -> dict[bytes, deque[tuple[int, int]]]:
    queues: dict[bytes, deque[tuple[int, int]]] = defaultdict(deque)
    for slot, digest in sent:
        queues[digest].append(slot)
    return queues


def sent_queries(
    batch: QueryBatch, indices: list[int]
) -> tuple[list[tuple[tuple[int, int], bytes]], list[tuple[tuple[int, int], bytes]]]:
    """Return the window's image and text queries in sent order, each as (slot, digest).

    ``indices`` are the window's pairs; a query's slot is ``(i, q)`` (spec §10.8) and its
    digest what an oracle signs of it (:func:`image_query_digest`, :func:`text_query_digest`).
    """
    pairs = len(indices)
    images = [] if batch.images is None else list(batch.images)
    per_image = len(batch.image_order) // pairs if pairs else 0
    per_text = len(batch.text_order) // pairs if pairs else 0
    image_digests = [
        image_query_digest(np.ascontiguousarray(image, dtype="<f4").tobytes()) for image in images
    ]
    image_slots = [
        (indices[u // per_image], u % per_image) for u in batch.image_order[: len(images)]
    ]
    text_digests = [text_query_digest(text) for text in batch.texts]
    text_slots = [(indices[u // per_text], per_image + u % per_text) for u in batch.text_order]
    return (
        list(zip(image_slots, image_digests, strict=True)),
        list(zip(text_slots, text_digests, strict=True)),
    )


def _sent_slots(
    batch: QueryBatch, indices: list[int]
) -> tuple[dict[bytes, deque[tuple[int, int]]], dict[bytes, deque[tuple[int, int]]]]:
    """Return the window's image and text queries, by digest, as slots in sent order."""
    images, texts = sent_queries(batch, indices)
    return _queue(images), _queue(texts)


def answers_records(
    *,
    function: str,
    k: int,
    answer_key: bytes,
    claim_nonce: bytes,
    window: int,
    batch: QueryBatch,
    indices: list[int],
    pair_records: list[dict[str, Value]],
    signed: list[SignedBatch],
) -> list[dict[str, Value]]:
    """Return the window's answers records, one per signed batch, in the order answered.

    Each batch's queries are named by their slots; every query of the window must be
    answered in exactly one batch, and each signature must verify over the rows that the
    window's pair records hold at its slots (what replay will check), or the oracle's
    answer is ``invalid-answer``.
    """
    images, texts = _sent_slots(batch, indices)
    rows = {record["index"]: pair_rows(function, k, record) for record in pair_records}
    records = []
    for part in signed:
        slots = []
        for queues, digests in ((images, part.image_digests), (texts, part.text_digests)):
            for digest in digests:
                if not queues.get(digest):
                    raise OracleError("invalid-answer", "a signed batch answers a query not sent")
                slots.append(queues[digest].popleft())
        answers = [rows[index][place] for index, place in slots]
        if not answer_signature_valid(
            answer_key, claim_nonce, part.query_digests, answers, part.signature
        ):
            raise OracleError(
                "invalid-answer", "a signed batch does not verify over the answers recorded"
            )
        records.append(answers_record(window, slots, part.query_digests, part.signature))
    if any(images.values()) or any(texts.values()):
        raise OracleError("invalid-answer", "a query of the window has no signed answer")
    return records
