"""Build spec/vectors/filing.json: claim keys, claim requests and counting (spec §9.1–§9.2, §10.7).

Four kinds of case:

- ``escrow-request`` and ``log-entry``: a request or entry map (typed JSON, appendix A),
  with or without ``claim_key``; a valid one's canonical encoding, or the error;
- ``start-map``: the fields of a ``ClaimStart`` message, as sent, and the start map a
  claim request signs over them;
- ``claim-request``: the record's claim key, the arbiter's key id, the start map of the
  message received and the request envelope; a valid one's nonce, or the error of the
  first check of §10.7 it fails;
- ``count``: what the arbiter answered each claim start on one record, in order, and the
  ``earlier_claims`` the verdict of each filed claim carries; and histories where filed
  claims fail, before or after an outcome, and the owner asks to run one again
  (``restart``), with the arbiter's answers (§10.7, *Running a failed claim again*).
"""

from __future__ import annotations

import copy
import hashlib
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from twinaudit.protocol import SPEC_VERSION
from twinaudit.protocol.claim.filing import ClaimRequest, sign_claim_request
from twinaudit.protocol.encoding import Value, encode
from twinaudit.protocol.envelope import Envelope, Signature, payload_type, sign_envelope
from twinaudit.protocol.keys import key_id, raw_public_key
from twinaudit.wire.claim_start import start_map
from twinaudit.wire.verifier.v1 import verifier_pb2 as pb

from .typed_json import to_typed
from .vectors_core import TEST_KEY_SEED, render

VECTOR_FILE = Path(__file__).resolve().parent.parent / "vectors" / "filing.json"

#: The owner's claim key of the vectors, another key, and the arbiter's (appendix B).
CLAIM_KEY = Ed25519PrivateKey.from_private_bytes(hashlib.sha256(b"filing claim key").digest())
OTHER_KEY = Ed25519PrivateKey.from_private_bytes(hashlib.sha256(b"filing other key").digest())
ARBITER = Ed25519PrivateKey.from_private_bytes(TEST_KEY_SEED)
ARBITER_ID = key_id(ARBITER.public_key())
ROOT = hashlib.sha256(b"filing root").digest()


def _request_map(**changes: Value) -> dict[str, Value]:
    value: dict[str, Value] = {
        "spec": SPEC_VERSION,
        "root": ROOT,
        "n_pairs": 1000,
        "item_kind": "image",
        "owner": "alice",
        "claim_key": raw_public_key(CLAIM_KEY.public_key()),
    }
    value.update(changes)
    return value


def _escrow_cases() -> list[dict[str, Any]]:
    """Escrow requests and log entries with and without a claim key (§9.1, §9.2)."""
    entry_extra: dict[str, Value] = {
        "index": 7,
        "time": "2026-11-27T12:00:00Z",
        "rho_digest": hashlib.sha256(b"filing rho").digest(),
    }
    keyless = _request_map()
    del keyless["claim_key"]
    valid = {
        "a keyed request": ("escrow-request", _request_map()),
        "a keyless request (made before claim keys)": ("escrow-request", keyless),
        "a keyed entry": ("log-entry", {**_request_map(), **entry_extra}),
        "a keyless entry (escrowed before claim keys)": ("log-entry", {**keyless, **entry_extra}),
    }
    cases = [
        {
            "name": name,
            "kind": kind,
            "valid": True,
            "input": {"value": to_typed(value)},
            "expected": {"encoding": encode(value).hex()},
        }
        for name, (kind, value) in valid.items()
    ]
    invalid = {
        "a claim key of 31 bytes": _request_map(claim_key=bytes(31)),
        "a claim key of 33 bytes": _request_map(claim_key=bytes(33)),
        "a claim key that is nil": _request_map(claim_key=None),
        "a claim key that is text": _request_map(claim_key="00" * 32),
        "an unknown key beside the claim key": {**_request_map(), "claim_keys": b""},
    }
    cases += [
        {
            "name": f"escrow-request: {name}",
            "kind": "escrow-request",
            "valid": False,
            "input": {"value": to_typed(value)},
            "error": "invalid-input",
        }
        for name, value in invalid.items()
    ]
    return cases


def _start(**fields: Any) -> pb.ClaimStart:
    """A ClaimStart as an owner's client sends it."""
    start = pb.ClaimStart(
        spec_version=SPEC_VERSION,
        record_index=7,
        record_root=ROOT,
        model=pb.ModelRef(oracle_endpoint="oracle.example:7500", name="the model"),
        score=pb.ScoreSpec(
            function="image-classifier",
            k=32,
            perturbation="pad-shift-flip-dither",
            knowledge="unlabelled",
        ),
        test=pb.TestSpec(name="mixture-graded", p=0.05),
        tie_rule="skip",
        window=8,
        window_max=16,
    )
    for name, value in fields.items():
        setattr(start, name, value)
    return start


def _message_fields(start: pb.ClaimStart) -> dict[str, Any]:
    """The message's fields as JSON (bytes in hex), as a second implementation reads them."""
    return {
        "record_index": start.record_index,
        "record_root": bytes(start.record_root).hex(),
        "oracle_endpoint": start.model.oracle_endpoint,
        "name": start.model.name,
        "score": {
            "function": start.score.function,
            "k": start.score.k,
            "perturbation": start.score.perturbation,
            "knowledge": start.score.knowledge,
            "statistic": start.score.statistic,
            "margin": float(start.score.margin).hex(),
        },
        "test": {
            "name": start.test.name,
            "p": float(start.test.p).hex(),
            "alpha": float(start.test.alpha).hex(),
            **({"prior": start.test.prior} if start.test.prior else {}),
        },
        "tie_rule": start.tie_rule,
        "max_pairs": start.max_pairs,
        "query_budget": start.query_budget,
        "resume_claim_id": start.resume_claim_id,
        "window": start.window,
        "window_max": start.window_max,
        "fresh_pairs": start.fresh_pairs,
        "dry_run": start.dry_run,
        "probes": [[s.height, s.width, s.channels] for s in start.probes],
    }


def _start_map_cases() -> list[dict[str, Any]]:
    """Start maps of ClaimStart messages (§10.7), defaults as sent."""
    dry = _start(dry_run=True)
    dry.probes.add(height=2056, width=3088, channels=3)
    dry.probes.add(height=28, width=28, channels=1)
    starts = {
        "a claim's start": _start(),
        "a resume": _start(resume_claim_id="3f2a9c"),
        "a dry run with two probe shapes": dry,
        "a start that leaves the window unset and asks for fresh pairs": _start(
            window=0, window_max=0, fresh_pairs=True, max_pairs=200, query_budget=10_000
        ),
    }
    return [
        {
            "name": f"start map: {name}",
            "kind": "start-map",
            "valid": True,
            "input": {"message": _message_fields(start)},
            "expected": {
                "start_map": to_typed(start_map(start)),
                "encoding": encode(start_map(start)).hex(),
            },
        }
        for name, start in starts.items()
    ]


def _nonce(name: str) -> bytes:
    return hashlib.sha256(f"filing nonce {name}".encode()).digest()


def _signed(request: ClaimRequest, key: Ed25519PrivateKey = CLAIM_KEY) -> bytes:
    return sign_claim_request(request, key)


def _raw_signed(payload: Value, key: Ed25519PrivateKey = CLAIM_KEY) -> bytes:
    """Sign any payload as a claim request (to build payloads the checks must refuse)."""
    return sign_envelope(encode(payload), payload_type("claim-request"), key).to_json()


def _request_cases() -> list[dict[str, Any]]:
    """Claim requests an arbiter accepts, and those it refuses, with the error (§10.7)."""
    start = start_map(_start())
    good = ClaimRequest(arbiter=ARBITER_ID, start=start, nonce=_nonce("good"))
    good_json = _signed(good)
    other_start = start_map(_start(window_max=32))
    two = Envelope.from_json(good_json)
    extra = Envelope.from_json(_signed(good, OTHER_KEY)).signatures[0]
    two_signatures = Envelope(two.payload_type, two.payload, (*two.signatures, extra)).to_json()
    mislabelled = Envelope(
        two.payload_type,
        two.payload,
        (Signature(key_id(OTHER_KEY.public_key()), two.signatures[0].sig),),
    ).to_json()
    no_nonce = good.to_value()
    del no_nonce["nonce"]
    float_window = copy.deepcopy(good.to_value())
    start_value = float_window["start"]
    assert isinstance(start_value, dict)
    start_value["window"] = 8.0
    nine_probes = copy.deepcopy(good.to_value())
    start_value = nine_probes["start"]
    assert isinstance(start_value, dict)
    start_value["probes"] = [[28, 28, 1]] * 9
    crowded = copy.deepcopy(good.to_value())
    crowded["nonce"] = list(range(100))  # 101 values more than the nonce's one
    rows: list[tuple[str, bytes, dict[str, Value], str | None]] = [
        ("a request the claim key signed for this arbiter and this start", good_json, start, None),
        ("signed by another key", _signed(good, OTHER_KEY), start, "invalid-signature"),
        ("two signatures", two_signatures, start, "invalid-signature"),
        ("the signature labelled with another key id", mislabelled, start, "invalid-signature"),
        (
            "for another arbiter",
            _signed(ClaimRequest(arbiter="ab" * 32, start=start, nonce=_nonce("other arbiter"))),
            start,
            "verification-failed",
        ),
        ("for other parameters than the message received", good_json, other_start,
         "verification-failed"),
        ("a payload without its nonce", _raw_signed(no_nonce), start, "invalid-input"),
        ("a start map whose window is a float", _raw_signed(float_window), start,
         "invalid-input"),
        ("nine probe shapes", _raw_signed(nine_probes), start, "invalid-input"),
        (
            "of another kind (an escrow receipt's payload type)",
            sign_envelope(good.encode(), payload_type("escrow-receipt"), CLAIM_KEY).to_json(),
            start,
            "invalid-signature",
        ),
        (
            "of another spec version",
            _raw_signed({**good.to_value(), "spec": "9.9"}),
            start,
            "unsupported-version",
        ),
        ("an envelope of 8193 bytes", b" " * 8193, start, "limit-exceeded"),
        ("a payload of more than 100 values", _raw_signed(crowded), start, "limit-exceeded"),
    ]  # fmt: skip
    return [_request_case(*row, nonce=_nonce("good")) for row in rows]


def _request_case(
    name: str, envelope: bytes, received: dict[str, Value], error: str | None, *, nonce: bytes
) -> dict[str, Any]:
    """A claim request case: what the arbiter holds, the envelope, the nonce or the error."""
    case: dict[str, Any] = {
        "name": f"claim request: {name}",
        "kind": "claim-request",
        "valid": error is None,
        "input": {
            "claim_key": raw_public_key(CLAIM_KEY.public_key()).hex(),
            "arbiter": ARBITER_ID,
            "start_map": to_typed(received),
            "envelope": envelope.decode(),
        },
    }
    if error is None:
        case["expected"] = {"nonce": nonce.hex()}
    else:
        case["error"] = error
    return case


def _count_cases() -> list[dict[str, Any]]:
    """Claim histories of one record, and what each filed claim's verdict counts (§10.7, §11)."""
    histories = {
        "refusals, a dry run and a resume count nothing": [
            ("a", "refused"),
            ("b", "filed"),
            ("c", "dry-run"),
            ("b", "resumed"),
            ("d", "refused"),
            ("e", "filed"),
        ],
        "a claim that failed after it was filed counts": [
            ("a", "filed"),
            ("b", "filed"),
            ("c", "filed"),
        ],
    }
    cases = []
    for name, events in histories.items():
        earlier: dict[str, int] = {}
        filed = 0
        for claim, answer in events:
            if answer == "filed":
                earlier[claim] = filed
                filed += 1
        cases.append(
            {
                "name": f"count: {name}",
                "kind": "count",
                "valid": True,
                "input": {"events": [{"claim": c, "answer": a} for c, a in events]},
                "expected": {"earlier_claims": earlier},
            }
        )
    return cases + _restart_cases()


def _restart_cases() -> list[dict[str, Any]]:
    """Histories with failures and restarts (§10.7, *Running a failed claim again*).

    Written out by hand, as the rule reads: a restart (a resume of a failed claim) is
    resumed only on the claim's own record, when the claim computed no outcome and no
    claim was filed on that record after it; it files nothing, so the claim counts once.
    Each history is a line of events, ``claim[@record] word`` each (see :func:`_event`).
    """
    histories = {
        "a claim that failed before any outcome runs again and counts once": (
            "a filed, a failed-no-outcome, a restart, a failed-no-outcome, a restart, b filed",
            {"a": 0, "b": 1},
            ["resumed", "resumed"],
        ),
        "a claim that failed after an outcome cannot run again": (
            "a filed, a failed-after-outcome, a restart, b filed",
            {"a": 0, "b": 1},
            ["refused"],
        ),
        "a claim restarted once fails after an outcome and cannot run again": (
            "a filed, a failed-no-outcome, a restart, a failed-after-outcome, a restart",
            {"a": 0},
            ["resumed", "refused"],
        ),
        "a failed claim another claim followed cannot run again, and counts": (
            "a filed, a failed-no-outcome, b refused, c dry-run, a restart, "
            "a failed-no-outcome, d filed, a restart, e filed",
            {"a": 0, "d": 1, "e": 2},
            ["resumed", "refused"],
        ),
        "a claim runs again on its own record only": (
            "x@1 filed, x@1 failed-no-outcome, a filed, x restart, x@1 restart, b filed",
            {"x": 0, "a": 0, "b": 1},
            ["refused", "resumed"],
        ),
    }
    return [
        {
            "name": f"count: {name}",
            "kind": "count",
            "valid": True,
            "input": {"events": [_event(word) for word in line.split(", ")]},
            "expected": {"earlier_claims": earlier, "restarts": restarts},
        }
        for name, (line, earlier, restarts) in histories.items()
    ]


def _event(words: str) -> dict[str, Any]:
    """``"x@1 filed"`` → the event of claim x on record 1; ``restart`` is a request."""
    claim, word = words.split(" ")
    name, _, record = claim.partition("@")
    event: dict[str, Any] = {"claim": name}
    if record:
        event["record"] = int(record)
    event["request" if word == "restart" else "answer"] = word
    return event


def _prior_cases() -> list[dict[str, Any]]:
    """A start that names the mixture test's prior (§10.7), its start map and requests."""
    start = _start()
    start.test.CopyFrom(pb.TestSpec(name="mixture-e", p=0.05, prior="grid15-v1"))
    named = start_map(start)
    good = ClaimRequest(arbiter=ARBITER_ID, start=named, nonce=_nonce("prior"))
    empty = copy.deepcopy(good.to_value())
    start_value = empty["start"]
    assert isinstance(start_value, dict)
    assert isinstance(start_value["test"], dict)
    start_value["test"]["prior"] = ""
    cases: list[dict[str, Any]] = [
        {
            "name": "start map: a start that names the mixture test's prior",
            "kind": "start-map",
            "valid": True,
            "input": {"message": _message_fields(start)},
            "expected": {"start_map": to_typed(named), "encoding": encode(named).hex()},
        }
    ]
    rows = [
        ("a request for a start that names a prior", _signed(good), named, None),
        ("a start map whose test has an empty prior", _raw_signed(empty), named,
         "invalid-input"),
    ]  # fmt: skip
    cases += [_request_case(*row, nonce=_nonce("prior")) for row in rows]
    return cases


def build() -> dict[str, Any]:
    """Return the whole vector document."""
    return {
        "spec_version": SPEC_VERSION,
        "topic": "filing",
        "description": (
            "Claim keys, claim requests and which claims count (spec §9.1, §9.2, §10.7, "
            "§11). 'escrow-request' and 'log-entry': a map in typed JSON (appendix A); a "
            "valid one encodes canonically to 'encoding', an invalid one is refused with "
            "'error', as a decoder of §9 messages reads them (a request without a claim key "
            "is a valid message, which an arbiter then refuses to escrow, §9.1). "
            "'start-map': the fields of a ClaimStart message (bytes in hex, floats "
            "as C99 hex floats; the test's 'prior' only where it is set) and the start map "
            "a claim request signs over them. "
            "'claim-request': the record's claim key (raw Ed25519), the arbiter's key id, "
            "the start map of the message the arbiter received and the request envelope; "
            "checked as §10.7 steps 2 to 6 say, a valid one gives its 'nonce', an invalid "
            "one its 'error'. 'count': what the arbiter answered each claim start on one "
            "record, in order ('refused' before filing, 'dry-run', 'filed', 'resumed'), "
            "and the earlier_claims of each filed claim's verdict; in the cases with "
            "'restarts', an event is also what became of a filed claim "
            "('failed-no-outcome', 'failed-after-outcome': whether any pair's outcome had "
            "been computed), or a request to run a failed claim again ('request': "
            "'restart', a resume of its id), whose answers ('resumed' or 'refused'), in "
            "order, are 'restarts'; an event without 'record' is on record 0, and "
            "earlier_claims counts the claims filed on the same record. The arbiter's key "
            "is appendix B's."
        ),
        "cases": [
            *_escrow_cases(),
            *_start_map_cases(),
            *_request_cases(),
            *_count_cases(),
            *_prior_cases(),
        ],
    }


def main() -> None:
    """Rewrite the vector file."""
    VECTOR_FILE.write_text(render(build()), encoding="utf-8")


if __name__ == "__main__":
    main()
