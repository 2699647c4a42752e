"""Run every case of spec/vectors/filing.json: claim keys, claim requests, counting (§10.7).

Each case is read from its JSON alone, as a second implementation would. The last test
checks that the committed file is what spec/tools/vectors_filing.py builds today.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from spec.tools import vectors_filing
from spec.tools.typed_json import from_typed
from spec.tools.vectors_core import render
from tests.support.vectors import raises_its_error
from twinaudit.protocol.claim.filing import verify_claim_request
from twinaudit.protocol.claim.restart import recount
from twinaudit.protocol.encoding import encode
from twinaudit.protocol.escrow_messages import parse_entry, parse_request
from twinaudit.protocol.keys import public_key_from_raw
from twinaudit.wire.claim_start import start_map
from twinaudit.wire.verifier.v1 import verifier_pb2 as pb

VECTOR_FILE = Path(__file__).resolve().parents[2] / "spec" / "vectors" / "filing.json"
DOC = json.loads(VECTOR_FILE.read_text(encoding="utf-8"))


def _message(fields: dict[str, Any]) -> pb.ClaimStart:
    """Build the ClaimStart a case describes (only from the case's JSON)."""
    start = pb.ClaimStart(
        record_index=fields["record_index"],
        record_root=bytes.fromhex(fields["record_root"]),
        model=pb.ModelRef(oracle_endpoint=fields["oracle_endpoint"], name=fields["name"]),
        score=pb.ScoreSpec(
            **{k: v for k, v in fields["score"].items() if k != "margin"},
            margin=float.fromhex(fields["score"]["margin"]),
        ),
        test=pb.TestSpec(
            name=fields["test"]["name"],
            p=float.fromhex(fields["test"]["p"]),
            alpha=float.fromhex(fields["test"]["alpha"]),
            prior=fields["test"].get("prior", ""),
        ),
        tie_rule=fields["tie_rule"],
        max_pairs=fields["max_pairs"],
        query_budget=fields["query_budget"],
        resume_claim_id=fields["resume_claim_id"],
        window=fields["window"],
        window_max=fields["window_max"],
        fresh_pairs=fields["fresh_pairs"],
        dry_run=fields["dry_run"],
    )
    for height, width, channels in fields["probes"]:
        start.probes.add(height=height, width=width, channels=channels)
    return start


def test_the_document_covers_every_kind_valid_and_invalid() -> None:
    assert DOC["topic"] == "filing"
    kinds = {(c["kind"], c["valid"]) for c in DOC["cases"]}
    assert {("escrow-request", True), ("escrow-request", False), ("log-entry", True)} <= kinds
    assert {("claim-request", True), ("claim-request", False), ("start-map", True)} <= kinds
    assert ("count", True) in kinds
    restarts = [c for c in DOC["cases"] if "restarts" in c.get("expected", {})]
    answers = {a for c in restarts for a in c["expected"]["restarts"]}
    events = {e.get("answer") for c in restarts for e in c["input"]["events"]}
    assert answers == {"resumed", "refused"}
    assert {"failed-no-outcome", "failed-after-outcome"} <= events
    assert len({c["name"] for c in DOC["cases"]}) == len(DOC["cases"])


@pytest.mark.parametrize("case", [pytest.param(c, id=c["name"]) for c in DOC["cases"]])
def test_case(case: dict[str, Any]) -> None:
    kind, given = case["kind"], case["input"]
    if kind in ("escrow-request", "log-entry"):
        parse = parse_request if kind == "escrow-request" else parse_entry
        value = from_typed(given["value"])
        if not case["valid"]:
            raises_its_error(case, lambda: parse(value))
            return
        assert parse(value).encode().hex() == case["expected"]["encoding"]
    elif kind == "start-map":
        made = start_map(_message(given["message"]))
        assert made == from_typed(case["expected"]["start_map"])
        assert encode(made).hex() == case["expected"]["encoding"]
    elif kind == "claim-request":

        def check() -> Any:
            return verify_claim_request(
                given["envelope"].encode(),
                public_key_from_raw(bytes.fromhex(given["claim_key"])),
                arbiter=given["arbiter"],
                start=from_typed(given["start_map"]),
            )

        if not case["valid"]:
            raises_its_error(case, check)
            return
        assert check().nonce.hex() == case["expected"]["nonce"]
    else:
        assert kind == "count"
        counted = recount(given["events"])
        assert counted.earlier_claims == case["expected"]["earlier_claims"]
        assert counted.restarts == case["expected"].get("restarts", [])


def test_the_committed_file_is_what_the_builder_makes() -> None:
    assert VECTOR_FILE.read_text(encoding="utf-8") == render(vectors_filing.build())
