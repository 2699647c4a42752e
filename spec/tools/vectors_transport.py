"""Vectors of how a claim's messages are cut (claims.json; spec §10.2 steps 4 and 5).

Two kinds, added to ``claims.json`` by :mod:`.vectors_claims`:

- ``requests`` cases that bound a request by its answers' bytes (``answer_bytes``, the
  ``m ≤ ⌊B/a⌋`` of step 5) and that pad a model's fixed batch (``fixed_batch``);
  the cases without those keys are the older ones, whose bytes stay as they were;
- ``openings`` cases: a request's openings as the owner sends them over gRPC, in
  several ``Openings`` messages and ``OpeningPart`` parts (step 4, *Transport*), and
  the pairs a verifier reassembles from them, or the error it refuses them with.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from twinaudit.protocol import limits
from twinaudit.protocol.claim.requests import padding, queries_per_request, request_runs
from twinaudit.wire.openings import ReceivedPair, collect_openings
from twinaudit.wire.verifier.v1 import verifier_pb2 as pb

from .vectors_core import case

#: oracle.v1's caps on a request (B) and on a request of one query (B₁), spec §10.2 step 5.
_GRPC_CAP = 64 * 1024 * 1024 - 256
_GRPC_ONE = 256 * 1024 * 1024 - 256
#: The most bytes of one answer of each kind (spec §10.2 step 5).
_EMBEDDING = 8 * 8192
_LABEL = 3

#: (name, shapes in sent order, max_batch, request_bytes, single_bytes, element_bytes,
#: answer_bytes, fixed_batch)
_BOUNDED: list[tuple[str, list[list[int]], int, int, int, int, int, bool]] = [
    (
        "embeddings of 8192 values: a cap of 3 answers and a little more holds 3 queries",
        [[2, 2, 1]] * 8,
        4096,
        3 * _EMBEDDING + 100,
        0,
        4,
        _EMBEDDING,
        False,
    ),
    (
        "probabilities of 40 classes: the answers bind before the queries and max_batch",
        [[2, 2, 1]] * 7,
        5,
        1000,
        0,
        4,
        8 * 40,
        False,
    ),
    (
        "labels: the queries bind before the answers",
        [[64, 64, 3]] * 5,
        4096,
        2 * 64 * 64 * 3 * 4,
        _GRPC_ONE,
        4,
        _LABEL,
        False,
    ),
    (
        "a query above the request cap goes alone, whatever its answer",
        [[3000, 4000, 3]] * 2,
        4096,
        _GRPC_CAP,
        _GRPC_ONE,
        4,
        _EMBEDDING,
        False,
    ),
    (
        "fixed batch of 3: runs of 3, the last padded with 2 blank images",
        [[4, 4, 3]] * 7,
        3,
        4 * 1024 * 1024 - 64 * 1024,
        0,
        4,
        0,
        True,
    ),
    (
        "fixed batch of 2 over two shapes: each shape's last run padded",
        [[4, 4, 3], [8, 8, 1], [4, 4, 3], [4, 4, 3], [8, 8, 1]],
        2,
        4 * 1024 * 1024 - 64 * 1024,
        0,
        2,
        0,
        True,
    ),
    (
        "fixed batch of 4 above what the byte cap holds: still runs of 4",
        [[64, 64, 3]] * 4,
        4,
        2 * 64 * 64 * 3 * 24,
        0,
        24,
        0,
        True,
    ),
    (
        "fixed batch of 4 whose one query is above the request cap",
        [[1024, 1024, 3]] * 2,
        4,
        4 * 1024 * 1024 - 64 * 1024,
        0,
        4,
        0,
        True,
    ),
]


def _bounded(row: tuple[str, list[list[int]], int, int, int, int, int, bool]) -> Any:
    name, shapes, max_batch, request_bytes, single_bytes, element_bytes, answer, fixed = row
    inp: dict[str, Any] = {
        "shapes": shapes,
        "max_batch": max_batch,
        "request_bytes": request_bytes,
        "single_bytes": single_bytes,
        "element_bytes": element_bytes,
    }
    if answer:
        inp["answer_bytes"] = answer
    if fixed:
        inp["fixed_batch"] = True

    def compute() -> dict[str, Any]:
        def per_request(shape: tuple[int, int, int]) -> int:
            query = shape[0] * shape[1] * shape[2] * element_bytes
            return queries_per_request(
                max_batch,
                request_bytes,
                query,
                single_bytes,
                answer_bytes=answer,
                fixed_batch=max_batch if fixed else 0,
            )

        runs = request_runs([(h, w, c) for h, w, c in shapes], per_request)
        if not fixed:
            return {"requests": runs}
        return {"requests": runs, "padding": padding(runs, max_batch)}

    return case(name, "requests", inp, compute)


def request_cases() -> list[dict[str, Any]]:
    """Return the ``requests`` cases with an answer bound or a fixed batch."""
    return [_bounded(row) for row in _BOUNDED]


# -- Openings split into messages and parts (§10.2 step 4, transport) ------------------------

#: The vectors scale the two byte thresholds down so that their messages stay small; an
#: implementation runs its reassembly with the case's values (the protocol's are 1 MiB
#: and 2 GiB).
_MIN_PART = 4
_MAX_REQUEST = 200
_SALT = [bytes([i]) * 32 for i in range(8)]
_HASH = bytes(range(32))


def _whole(index: int, v0: str, v1: str, proof: int = 0) -> dict[str, Any]:
    return {
        "index": index,
        "salt": _SALT[index].hex(),
        "proof": [_HASH.hex()] * proof,
        "version0": v0.encode().hex(),
        "version1": v1.encode().hex(),
    }


def _header(index: int, size0: int, size1: int) -> dict[str, Any]:
    return {
        "index": index,
        "salt": _SALT[index].hex(),
        "proof": [_HASH.hex()],
        "version0_size": size0,
        "version1_size": size1,
    }


def _openings(pairs: list[dict[str, Any]], more: bool) -> dict[str, Any]:
    return {"openings": {"pairs": pairs, "more": more}}


def _part(text: str) -> dict[str, Any]:
    return {"part": text.encode().hex()}


def opening_message(message: dict[str, Any]) -> pb.ClaimMessage:
    """Return the gRPC claim message a case's message describes."""
    if "part" in message:
        return pb.ClaimMessage(part=pb.OpeningPart(data=bytes.fromhex(message["part"])))
    pairs = []
    for pair in message["openings"]["pairs"]:
        pairs.append(
            pb.PairOpening(
                index=pair["index"],
                salt=bytes.fromhex(pair["salt"]),
                proof=[bytes.fromhex(h) for h in pair["proof"]],
                version0=bytes.fromhex(pair.get("version0", "")),
                version1=bytes.fromhex(pair.get("version1", "")),
                version0_size=pair.get("version0_size", 0),
                version1_size=pair.get("version1_size", 0),
            )
        )
    return pb.ClaimMessage(openings=pb.Openings(pairs=pairs, more=message["openings"]["more"]))


def pair_fields(pair: ReceivedPair) -> dict[str, Any]:
    """Return a reassembled pair as an ``openings`` case writes it (hex bytes)."""
    return {
        "index": pair.index,
        "salt": pair.salt.hex(),
        "proof": [h.hex() for h in pair.proof],
        "version0": pair.version0.hex(),
        "version1": pair.version1.hex(),
    }


def _split(name: str, count: int, messages: list[dict[str, Any]]) -> dict[str, Any]:
    inp = {
        "count": count,
        "min_part_bytes": _MIN_PART,
        "max_request_bytes": _MAX_REQUEST,
        "messages": messages,
    }

    def compute() -> dict[str, Any]:
        stream: Iterator[pb.ClaimMessage] = (opening_message(m) for m in messages)
        receive: Callable[[], pb.ClaimMessage | None] = lambda: next(stream, None)  # noqa: E731
        pairs = collect_openings(
            None,
            receive,
            count,
            max_request_bytes=_MAX_REQUEST,
            min_part_bytes=_MIN_PART,
        )
        return {"pairs": [pair_fields(p) for p in pairs]}

    return case(name, "openings", inp, compute)


def opening_cases() -> list[dict[str, Any]]:
    """Return the ``openings`` cases: valid splits and each refusal of step 4's transport."""
    two = [_whole(0, "aa", "bb"), _whole(1, "cc", "dd")]
    big = _header(1, 6, 5)  # "version-0" parts: 6 bytes then 5
    return [
        _split("one message, two whole pairs", 2, [_openings(two, False)]),
        _split(
            "two messages, more set on the first",
            2,
            [_openings(two[:1], True), _openings(two[1:], False)],
        ),
        _split(
            "a pair in parts between two whole pairs",
            3,
            [
                _openings([two[0], big], True),
                _part("abcd"),
                _part("efghijk"),
                _openings([_whole(2, "ee", "ff")], False),
            ],
        ),
        _split(
            "the request's last pair in parts: its parts follow the message without more",
            2,
            [_openings([two[0], big], False), _part("abcdef"), _part("ghijk")],
        ),
        _split(
            "a small pair sent in parts, one part of both versions",
            2,
            [_openings([two[0], _header(1, 1, 1)], False), _part("xy")],
        ),
        _split("more set on the request's last message", 2, [_openings(two, True)]),
        _split("more unset before every pair was sent", 2, [_openings(two[:1], False)]),
        _split("more pairs than requested", 1, [_openings(two, False)]),
        _split("an empty Openings message", 2, [_openings([], True), _openings(two, False)]),
        _split("a part where pairs are due", 1, [_part("abcd"), _openings(two[:1], False)]),
        _split(
            "pairs where parts are due",
            3,
            [_openings([two[0], big], True), _openings([_whole(2, "ee", "ff")], False)],
        ),
        _split(
            "a pair in parts that is not its message's last",
            2,
            [_openings([big, two[0]], False), _part("abcdefghijk")],
        ),
        _split(
            "a part under min_part_bytes before its pair's last",
            2,
            [_openings([two[0], big], False), _part("abc"), _part("defghijk")],
        ),
        _split(
            "parts beyond the declared sizes",
            2,
            [_openings([two[0], big], False), _part("abcdef"), _part("ghijkl")],
        ),
        _split(
            "an empty part",
            2,
            [_openings([two[0], big], False), _part(""), _part("abcdefghijk")],
        ),
        _split(
            "a pair in parts that declares a size of 0",
            2,
            [_openings([two[0], _header(1, 0, 4)], False), _part("abcd")],
        ),
        _split(
            "a pair in parts that also carries a version",
            2,
            [
                _openings([two[0], {**big, "version0": b"zz".hex()}], False),
                _part("abcdefghijk"),
            ],
        ),
        _split(
            "the stream ends inside a pair's parts",
            2,
            [_openings([two[0], big], False), _part("abcdef")],
        ),
        _split(
            "a declared version above MAX_ENCODED_BYTES",
            1,
            [_openings([_header(0, limits.MAX_ENCODED_BYTES + 1, 1)], False)],
        ),
        _split(
            "declared sizes above max_request_bytes, refused before any part",
            1,
            [_openings([_header(0, 100, 100)], False)],
        ),
        _split(
            "whole pairs above max_request_bytes",
            2,
            [_openings([_whole(0, "a" * 100, "b" * 40), _whole(1, "c" * 10, "d")], False)],
        ),
    ]
