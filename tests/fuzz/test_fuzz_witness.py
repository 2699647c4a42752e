"""Fuzz what a witness and a witness policy's client read from others (spec §9.7).

Seeded from spec/vectors/witness.json (every add-checkpoint body, policy file and log
evidence there, valid and broken) and mutated byte by byte. Each target asserts one
thing: the input is accepted (and, for a request, re-encodes to the same bytes) or
refused with an error of the taxonomy; a witness answers every body with one of the
statuses of §9.7.1, never an exception (which its server would answer 500).
"""

from __future__ import annotations

import json
import tempfile
from functools import cache
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from spec.tools.vectors_witness import ARBITER, WITNESSES
from tests.support.fuzz import attempt, fuzz, mutated
from twinaudit.protocol.checkpoint_note import arbiter_key
from twinaudit.protocol.errors import InputError, VerificationError
from twinaudit.protocol.log_evidence import check_log_evidence, parse_log_evidence
from twinaudit.protocol.tlog_witness import parse_add_checkpoint, parse_cosignatures
from twinaudit.protocol.witness_policy import parse_policy
from twinaudit.witness.cosigner import Cosigner, logs_by_origin
from twinaudit.witness.state import WitnessState

VECTORS = Path(__file__).resolve().parents[2] / "spec" / "vectors" / "witness.json"
STATUSES = {200, 400, 403, 404, 409, 422}


@cache
def _inputs(kind: str, field: str) -> list[bytes]:
    cases = json.loads(VECTORS.read_text(encoding="utf-8"))["cases"]
    return [c["input"][field].encode("utf-8") for c in cases if c["kind"] == kind]


@fuzz(150)
@given(st.deferred(lambda: mutated(_inputs("add-checkpoint", "body"))))
def test_add_checkpoint_bodies(data: bytes) -> None:
    request = attempt(parse_add_checkpoint, data, refusals=(InputError,))
    if request is not None:
        assert request.encode() == data


@fuzz(40)
@given(st.deferred(lambda: mutated(_inputs("add-checkpoint", "body"))))
def test_a_witness_answers_every_body_with_a_status(data: bytes) -> None:
    with tempfile.TemporaryDirectory() as folder:
        witness = Cosigner(
            "w1.example",
            WITNESSES["w1.example"],
            logs_by_origin([arbiter_key(ARBITER.public_key())]),
            WitnessState(Path(folder) / "w.db"),
            clock=lambda: 1_796_000_000,
        )
        assert witness.add_checkpoint(data).status in STATUSES


@cache
def _cosignature_answers() -> list[bytes]:
    cases = json.loads(VECTORS.read_text(encoding="utf-8"))["cases"]
    return [
        c["expected"]["body"].encode("utf-8")
        for c in cases
        if c["kind"] == "add-checkpoint" and c["expected"]["status"] == 200
    ]


@fuzz(100)
@given(st.deferred(lambda: mutated(_cosignature_answers())))
def test_cosignature_answers(data: bytes) -> None:
    attempt(parse_cosignatures, data, refusals=(InputError,))


@fuzz(150)
@given(st.deferred(lambda: mutated(_inputs("policy", "text"))))
def test_policy_files(data: bytes) -> None:
    attempt(parse_policy, data, refusals=(InputError,))


@fuzz(100)
@given(st.deferred(lambda: mutated(_inputs("log-evidence", "evidence"))))
def test_log_evidence(data: bytes) -> None:
    evidence = attempt(parse_log_evidence, data, refusals=(InputError,))
    if evidence is None:
        return
    policy = parse_policy(_inputs("policy", "text")[0]).policy
    attempt(
        lambda: check_log_evidence(
            evidence,
            ARBITER.public_key(),
            policy,
            record_index=5,
            record_root=bytes(32),
            not_before=0,
            now=1_796_000_000,
        ),
        refusals=(InputError, VerificationError),
    )
