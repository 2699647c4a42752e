"""Build spec/vectors/answers.json: answers the practitioner signs (spec §10.8, §12).

Run ``python -m spec.tools.vectors_answers`` to rewrite the file; the conformance test
fails if the file differs from what :func:`build` returns. Three kinds of case:

- ``sign``: an Ed25519 seed (the oracle's answer key), a claim nonce, the digests of a
  batch's queries and its answer rows (typed values, appendix A); the 32-byte message
  and the signature, byte for byte;
- ``receive``: what a verifier checks as a reply arrives: the answer key of the Describe
  map, the claim nonce it sent, the digests of the queries it sent, the rows it received
  and the signature (empty: none); the message, or ``oracle-failed``;
- ``window``: what replay checks of one window of a transcript: the score function, its
  ``K``, the answer key and claim nonce of the claim map, the window's pair records and
  its answers records (typed values); the number of queries whose signed answers were
  checked, or ``verification-failed``.

The oracle's key is the test key of appendix B; "another key" has the seed
SHA-256("answers: another key").
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import numpy as np
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from twinaudit.protocol import SPEC_VERSION
from twinaudit.protocol.claim.answer_records import answers_record, check_window_answers
from twinaudit.protocol.encoding import Value
from twinaudit.protocol.keys import raw_public_key
from twinaudit.protocol.oracles.signed_answers import (
    answer_batch_message,
    check_answer_batch,
    embedding_rows,
    sign_answer_batch,
)

from .typed_json import from_typed, to_typed
from .vectors_core import TEST_KEY_SEED, case, render

VECTOR_FILE = Path(__file__).resolve().parent.parent / "vectors" / "answers.json"

ORACLE = Ed25519PrivateKey.from_private_bytes(TEST_KEY_SEED)
ORACLE_KEY = raw_public_key(ORACLE.public_key())
OTHER = Ed25519PrivateKey.from_private_bytes(hashlib.sha256(b"answers: another key").digest())
NONCE = hashlib.sha256(b"answers: claim nonce").digest()
OTHER_NONCE = hashlib.sha256(b"answers: another claim's nonce").digest()


def _digest(text: str) -> bytes:
    return hashlib.sha256(text.encode()).digest()


def _run_sign(inp: dict[str, Any]) -> dict[str, Any]:
    key = Ed25519PrivateKey.from_private_bytes(bytes.fromhex(inp["seed"]))
    nonce = bytes.fromhex(inp["claim_nonce"])
    digests = [bytes.fromhex(d) for d in inp["query_digests"]]
    answers = from_typed(inp["answers"])
    return {
        "answer_key": raw_public_key(key.public_key()).hex(),
        "message": answer_batch_message(nonce, digests, answers).hex(),
        "signature": sign_answer_batch(key, nonce, digests, answers).hex(),
    }


def _run_receive(inp: dict[str, Any]) -> dict[str, Any]:
    nonce = bytes.fromhex(inp["claim_nonce"])
    digests = [bytes.fromhex(d) for d in inp["query_digests"]]
    answers = from_typed(inp["answers"])
    check_answer_batch(
        bytes.fromhex(inp["answer_key"]), nonce, digests, answers, bytes.fromhex(inp["signature"])
    )
    return {"message": answer_batch_message(nonce, digests, answers).hex()}


def _run_window(inp: dict[str, Any]) -> dict[str, Any]:
    batches = from_typed(inp["batches"])
    check_window_answers(
        function=inp["function"],
        k=inp["k"],
        answer_key=bytes.fromhex(inp["answer_key"]),
        claim_nonce=bytes.fromhex(inp["claim_nonce"]),
        window=inp["window"],
        pairs=from_typed(inp["pairs"]),
        batches=batches,
    )
    return {"queries": sum(len(b["slots"]) for b in batches)}


#: Each kind's runner: the case's input in, its expectation out (or a typed error).
RUNNERS = {"sign": _run_sign, "receive": _run_receive, "window": _run_window}

#: A classify batch of three queries: two probability vectors and one more.
_ROWS: list[Value] = [[0.75, 0.25], [0.125, 0.875], [0.5, 0.5]]
_DIGESTS = [_digest(f"query {n}") for n in range(3)]


def _sign_cases() -> list[dict[str, Any]]:
    cases = []
    for name, digests, answers in (
        ("classify probabilities", _DIGESTS, _ROWS),
        ("classify labels", _DIGESTS, [3, 0, 9]),
        (
            "embeddings (binary64 rows)",
            _DIGESTS[:2],
            embedding_rows(np.array([[1.0, -2.0], [0.5, 0.25]])),
        ),
        ("token log-probabilities", _DIGESTS[:2], [[-1.5, -0.25], [-3.0]]),
    ):
        inp = {
            "seed": TEST_KEY_SEED.hex(),
            "claim_nonce": NONCE.hex(),
            "query_digests": [d.hex() for d in digests],
            "answers": to_typed(answers),
        }
        cases.append(case(name, "sign", inp, lambda inp=inp: _run_sign(inp)))
    return cases


def _receive_cases() -> list[dict[str, Any]]:
    good = sign_answer_batch(ORACLE, NONCE, _DIGESTS, _ROWS)
    altered: list[Value] = [[0.75, 0.25], [0.125, 0.875], [0.5000000000000001, 0.5]]
    variants = (
        ("valid", ORACLE_KEY, NONCE, _ROWS, good),
        ("an altered answer (one ulp)", ORACLE_KEY, NONCE, altered, good),
        ("another claim's nonce", ORACLE_KEY, OTHER_NONCE, _ROWS, good),
        (
            "another key",
            ORACLE_KEY,
            NONCE,
            _ROWS,
            sign_answer_batch(OTHER, NONCE, _DIGESTS, _ROWS),
        ),
        ("no signature", ORACLE_KEY, NONCE, _ROWS, b""),
    )
    cases = []
    for name, key, nonce, answers, signature in variants:
        inp = {
            "answer_key": key.hex(),
            "claim_nonce": nonce.hex(),
            "query_digests": [d.hex() for d in _DIGESTS],
            "answers": to_typed(answers),
            "signature": signature.hex(),
        }
        cases.append(case(name, "receive", inp, lambda inp=inp: _run_receive(inp)))
    return cases


def _pair(index: int, answers: Value) -> dict[str, Value]:
    """A pair record of window 2, reduced to what the check reads (``index``, ``answers``)."""
    return {"type": "pair", "window": 2, "index": index, "answers": answers}


def _window_cases() -> list[dict[str, Any]]:
    # Two image-classifier pairs, K = 1: slots (i, 0) version 0 and (i, 1) version 1,
    # answered in two batches in the shuffled order the claim sent them.
    pairs = [_pair(14, [[[0.75, 0.25]], [[0.5, 0.5]]]), _pair(3, [[[0.125, 0.875]], [[1.0, 0.0]]])]
    rows = {14: [[0.75, 0.25], [0.5, 0.5]], 3: [[0.125, 0.875], [1.0, 0.0]]}
    parts = [[(3, 1), (14, 0), (3, 0)], [(14, 1)]]

    def batches(
        key: Ed25519PrivateKey = ORACLE, nonce: bytes = NONCE, slots: list[Any] = parts
    ) -> list[dict[str, Value]]:
        out = []
        for number, part in enumerate(slots):
            digests = [_digest(f"window 2 batch {number} query {n}") for n in range(len(part))]
            answers: list[Value] = [rows[i][q] for i, q in part]
            signature = sign_answer_batch(key, nonce, digests, answers)
            out.append(answers_record(2, part, digests, signature))
        return out

    altered = [
        _pair(14, [[[0.75, 0.25]], [[0.5, 0.5]]]),
        _pair(3, [[[0.125, 0.875]], [[1.0, 0.0]]]),
    ]
    altered[1]["answers"][0][0][0] = 0.12500000000000003  # type: ignore[index]
    unsigned = batches()
    del unsigned[1]["signature"]
    variants = (
        ("valid", pairs, batches()),
        ("an answer altered after signing", altered, batches()),
        ("signed over another claim's nonce", pairs, batches(nonce=OTHER_NONCE)),
        ("signed by another key", pairs, batches(key=OTHER)),
        ("an answers record without its signature", pairs, unsigned),
        ("a query with no signed answer", pairs, batches(slots=parts[:1])),
        ("a slot signed twice", pairs, batches(slots=[parts[0], [(14, 1), (3, 1)]])),
        ("no answers record", pairs, []),
    )
    cases = []
    for name, window_pairs, window_batches in variants:
        inp = {
            "function": "image-classifier",
            "k": 1,
            "answer_key": ORACLE_KEY.hex(),
            "claim_nonce": NONCE.hex(),
            "window": 2,
            "pairs": to_typed(window_pairs),  # type: ignore[arg-type]
            "batches": to_typed(window_batches),  # type: ignore[arg-type]
        }
        cases.append(case(name, "window", inp, lambda inp=inp: _run_window(inp)))
    return cases


def build() -> dict[str, Any]:
    """Return the vector document of §10.8."""
    return {
        "spec_version": SPEC_VERSION,
        "topic": "answers",
        "description": (
            "Answers the practitioner signs (spec §10.8): the signed message and signature "
            "of answer batches (sign), a verifier's check of a reply as it arrives "
            "(receive: oracle-failed when it fails) and replay's check of one window's "
            "answers records against its pair records (window: verification-failed when "
            "it fails). Keys, nonces, digests, messages and signatures are lowercase hex; "
            "answers and records are typed values (appendix A)."
        ),
        "cases": [*_sign_cases(), *_receive_cases(), *_window_cases()],
    }


def main() -> None:
    """Rewrite spec/vectors/answers.json."""
    VECTOR_FILE.write_text(render(build()), encoding="utf-8")


if __name__ == "__main__":
    main()
