"""Run every case of spec/vectors/claims.json: window schedules and whole claims (spec §10–§11).

Each case is read from its JSON alone, as a second implementation would: a schedule
from its parameters, a claim from its escrow record, claim map, openings and oracle
answers (:func:`spec.tools.vectors_claims.run_claim` feeds them to the claim engine).
The last test checks that the committed file is what spec/tools/vectors_claims.py
builds today.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from spec.tools import vectors_claims
from spec.tools.typed_json import from_typed
from spec.tools.vectors_claims import run_claim
from spec.tools.vectors_core import render
from spec.tools.vectors_transport import opening_message, pair_fields
from tests.support.vectors import raises_its_error
from twinaudit.protocol.claim.requests import padding, queries_per_request, request_runs
from twinaudit.protocol.claim.schedule import WindowSchedule
from twinaudit.protocol.claim.verdict import TranscriptHead, parse_verdict
from twinaudit.protocol.encoding import decode, encode
from twinaudit.protocol.stats.base import log_statistics_agree
from twinaudit.wire.openings import collect_openings

VECTOR_FILE = Path(__file__).resolve().parents[2] / "spec" / "vectors" / "claims.json"
DOC = json.loads(VECTOR_FILE.read_text(encoding="utf-8"))
SCHEDULES = [c for c in DOC["cases"] if c["kind"] == "schedule"]
REQUESTS = [c for c in DOC["cases"] if c["kind"] == "requests"]
OPENINGS = [c for c in DOC["cases"] if c["kind"] == "openings"]
CLAIMS = [c for c in DOC["cases"] if c["kind"] == "claim"]


def test_the_document_is_the_claims_topic() -> None:
    assert DOC["topic"] == "claims"
    assert {case["kind"] for case in DOC["cases"]} == {"schedule", "requests", "openings", "claim"}
    assert len({case["name"] for case in DOC["cases"]}) == len(DOC["cases"])
    for kind in ("schedule", "requests", "claim"):
        assert {c["valid"] for c in DOC["cases"] if c["kind"] == kind} == {True, False}


def test_the_claims_cover_every_test_both_tie_rules_every_stop_and_every_function() -> None:
    valid = [c for c in CLAIMS if c["valid"]]
    claims = [from_typed(c["input"]["claim"]) for c in valid]
    combinations = {(claim["test"]["name"], claim["tie_rule"]) for claim in claims}
    assert combinations == {
        (test, rule)
        for test in ("mixture-e", "pprm-chernoff", "mixture-graded")
        for rule in ("coin", "skip")
    }
    assert {c["expected"]["stop"] for c in valid} == {"detected", "exhausted", "budget"}
    functions = {claim["score"]["function"] for claim in claims}
    assert functions == {"image-classifier", "image-encoder", "language-model", "image-text"}
    conditions = {
        (claim["score"]["knowledge"], claim["model"]["oracle"]["classify_output"])
        for claim in claims
        if claim["score"]["function"] == "image-classifier"
    }
    assert {knowledge for knowledge, _ in conditions} == {"C1", "C2", "C3", "C4"}
    assert {output for _, output in conditions} == {"probabilities", "label"}
    budget_stops = [c for c in valid if c["expected"]["stop"] == "budget"]
    assert any(from_typed(c["input"]["claim"])["query_budget"] for c in budget_stops)
    assert any(from_typed(c["input"]["claim"])["max_pairs"] for c in budget_stops)
    broken = {
        c["name"].removeprefix("claim: ").removeprefix("mixed sizes: ").removeprefix("fitted: ")
        for c in CLAIMS
        if not c["valid"]
    }
    assert {name.split(",")[0].split(" ")[0] for name in broken} == {
        "image-classifier",
        "image-encoder",
        "language-model",
        "image-text",
    }


def test_claims_that_exclude_earlier_pairs_are_covered() -> None:
    """Second claims skip the pairs a first claim opened (spec §10.2 step 2), every stop."""
    fresh = [c for c in CLAIMS if c["valid"] and "excluded" in from_typed(c["input"]["claim"])]
    assert {c["expected"]["stop"] for c in fresh} == {"detected", "exhausted", "budget"}
    for case in fresh:
        claim = from_typed(case["input"]["claim"])
        assert set(claim["excluded"]).isdisjoint(case["expected"]["opened"])
        # The test runs over the pairs left (spec §10.1).
        assert claim["test"]["params"]["n_pairs"] == claim["record"]["n_pairs"] - len(
            claim["excluded"]
        )
        assert case["input"]["verdict"]["earlier_claims"] == 1
        if case["expected"]["stop"] == "exhausted":
            left = claim["record"]["n_pairs"] - len(claim["excluded"])
            assert len(case["expected"]["opened"]) == left
    broken = {c["error"] for c in CLAIMS if not c["valid"] and "excluded" in c["name"]}
    assert broken == {"invalid-input"}


def _shapes(case: dict[str, Any]) -> set[tuple[int, ...]]:
    """The (height, width, channels) of every opened image of a claim case."""
    shapes = set()
    for opening in case["input"]["openings"]:
        item = decode(bytes.fromhex(opening["version0"]))
        assert isinstance(item, dict)
        item = item.get("image", item)  # a captioned image's image
        assert isinstance(item, dict)
        shapes.add((item["height"], item["width"], item["channels"]))
    return shapes


def test_claims_fitted_to_the_models_input_are_covered() -> None:
    fitted = [c for c in CLAIMS if "input_fit" in from_typed(c["input"]["claim"])]
    valid = [c for c in fitted if c["valid"]]
    functions = {from_typed(c["input"]["claim"])["score"]["function"] for c in valid}
    assert functions == {"image-classifier", "image-encoder", "image-text"}
    changes = set()
    for case in valid:
        claim = from_typed(case["input"]["claim"])
        target = tuple(claim["model"]["oracle"]["input_shape"])
        for opening in case["input"]["openings"]:
            item = decode(bytes.fromhex(opening["version0"]))
            image = item.get("image", item)
            shape = (image["height"], image["width"], image["channels"])
            changes.add(("channels", shape[2], target[2]))
            changes.add(("sides", shape[0] < target[0], shape[1] > target[1]))
    assert {("channels", 3, 1), ("channels", 1, 3), ("channels", 3, 3)} <= changes
    assert any(c[0] == "sides" and c[1] for c in changes)
    assert any(c[0] == "sides" and c[2] for c in changes)
    assert {c["error"] for c in fitted if not c["valid"]} == {"invalid-input"}


def test_claims_over_images_of_several_sizes_are_covered() -> None:
    """Grey and RGB images of three sizes or more in one record (spec §10.2 step 5): the
    queries of a window go as one request per shape, so a window gets several answers."""
    image_kinds = ("image", "captioned-image")
    mixed = [
        c
        for c in CLAIMS
        if c["valid"]
        and c["input"]["record"]["item_kind"] in image_kinds
        and len(_shapes(c)) >= 3
        and "input_fit" not in from_typed(c["input"]["claim"])  # fitted: one shape a window
    ]
    functions = {from_typed(c["input"]["claim"])["score"]["function"] for c in mixed}
    assert functions == {"image-classifier", "image-encoder", "image-text"}
    for case in mixed:
        shapes = _shapes(case)
        assert {channels for _, _, channels in shapes} == {1, 3}
        # More oracle answers than requests: some windows were split by shape.
        assert len(case["input"]["answers"]) > len(case["expected"]["requests"])
    perturbations = {from_typed(c["input"]["claim"])["score"].get("perturbation") for c in mixed}
    assert {"random-resized-crop-flip-v2", "simclr-crop-flip-v2"} <= perturbations
    assert {c["expected"]["stop"] for c in mixed} >= {"detected", "budget"}
    # A window's first shape answered with a row too few fails the claim (§10.2 step 5).
    broken = [c for c in CLAIMS if not c["valid"] and c["name"].startswith("claim: mixed sizes")]
    assert [c["error"] for c in broken] == ["oracle-failed"]
    assert len(broken[0]["input"]["answers"]) == 1


@pytest.mark.parametrize("case", [pytest.param(c, id=c["name"]) for c in SCHEDULES])
def test_schedule(case: dict[str, Any]) -> None:
    inp = case["input"]

    def build() -> WindowSchedule:
        return WindowSchedule(
            inp["window"],
            inp["window_max"],
            inp["limit"],
            inp["queries_per_pair"],
            inp["query_budget"],
        )

    if not case["valid"]:
        raises_its_error(case, build)
        return
    schedule = build()
    assert schedule.sizes() == case["expected"]["sizes"]
    total = sum(case["expected"]["sizes"])
    numbers = schedule.windows_of(total)
    assert [numbers.count(j) for j in range(len(case["expected"]["sizes"]))] == case["expected"][
        "sizes"
    ]


@pytest.mark.parametrize("case", [pytest.param(c, id=c["name"]) for c in REQUESTS])
def test_requests(case: dict[str, Any]) -> None:
    inp = case["input"]

    def per_request(shape: tuple[int, int, int]) -> int:
        query = shape[0] * shape[1] * shape[2] * inp["element_bytes"]
        return queries_per_request(
            inp["max_batch"],
            inp["request_bytes"],
            query,
            inp["single_bytes"],
            answer_bytes=inp.get("answer_bytes", 0),
            fixed_batch=fixed,
        )

    fixed = inp["max_batch"] if inp.get("fixed_batch", False) else 0

    def runs() -> list[list[int]]:
        return request_runs([(h, w, c) for h, w, c in inp["shapes"]], per_request)

    if not case["valid"]:
        raises_its_error(case, runs)
        return
    assert runs() == case["expected"]["requests"]
    if fixed:
        assert padding(runs(), fixed) == case["expected"]["padding"]
    else:
        assert "padding" not in case["expected"]
    positions = [n for run in case["expected"]["requests"] for n in run]
    assert sorted(positions) == list(range(len(inp["shapes"])))


def test_requests_cover_both_bounds() -> None:
    """The answer bound and the fixed batch each have valid and refused cases."""
    fixed = [c["valid"] for c in REQUESTS if c["input"].get("fixed_batch")]
    answered = [c for c in REQUESTS if "answer_bytes" in c["input"]]
    assert True in fixed and False in fixed
    assert any(
        len(c["expected"]["requests"][0])
        == c["input"]["request_bytes"] // c["input"]["answer_bytes"]
        for c in answered
    )


@pytest.mark.parametrize("case", [pytest.param(c, id=c["name"]) for c in OPENINGS])
def test_openings(case: dict[str, Any]) -> None:
    """Reassemble a request's openings from its messages (spec §10.2 step 4, transport)."""
    inp = case["input"]

    def reassemble() -> list[dict[str, Any]]:
        stream = iter([opening_message(m) for m in inp["messages"]])
        pairs = collect_openings(
            None,
            lambda: next(stream, None),
            inp["count"],
            max_request_bytes=inp["max_request_bytes"],
            min_part_bytes=inp["min_part_bytes"],
        )
        return [pair_fields(p) for p in pairs]

    if not case["valid"]:
        raises_its_error(case, reassemble)
        return
    assert reassemble() == case["expected"]["pairs"]


def _same_payload(mine: str, expected: str) -> bool:
    """Equal payload bytes, but final.log_statistic only under §7.3.3's rule (spec §14)."""
    ours, theirs = decode(bytes.fromhex(mine)), decode(bytes.fromhex(expected))
    assert isinstance(ours, dict) and isinstance(theirs, dict)
    a, b = ours["final"]["log_statistic"], theirs["final"]["log_statistic"]  # type: ignore[index]
    draws = theirs["final"]["draws"]  # type: ignore[index]
    if (a is None) != (b is None) or (a is not None and not log_statistics_agree(a, b, draws)):
        return False
    ours["final"]["log_statistic"] = b  # type: ignore[index]
    return encode(ours) == encode(theirs)


@pytest.mark.parametrize("case", [pytest.param(c, id=c["name"]) for c in CLAIMS])
def test_claim(case: dict[str, Any]) -> None:
    if not case["valid"]:
        raises_its_error(case, lambda: run_claim(case["input"]))
        return
    result = run_claim(case["input"])
    expected = case["expected"]
    assert _same_payload(result.pop("payload"), expected["payload"])
    assert result == {k: v for k, v in expected.items() if k != "payload"}


@pytest.mark.parametrize("case", [pytest.param(c, id=c["name"]) for c in CLAIMS if c["valid"]])
def test_a_claim_payload_is_the_verdict_it_lists(case: dict[str, Any]) -> None:
    """The payload is a verdict (§11) whose fields are the case's other expected values."""
    expected = case["expected"]
    verdict = parse_verdict(decode(bytes.fromhex(expected["payload"])))
    assert list(verdict.opened) == expected["opened"]
    assert verdict.indicators == expected["indicators"]
    assert (verdict.decision, verdict.stop) == (expected["decision"], expected["stop"])
    assert verdict.queries == expected["queries"]
    final = verdict.final.to_value()
    statistic = verdict.final.log_statistic
    assert {**final, "log_statistic": None if statistic is None else statistic.hex()} == (
        expected["final"]
    )
    assert verdict.transcript == TranscriptHead(
        bytes.fromhex(expected["transcript"]["hash"]), expected["transcript"]["records"]
    )
    assert verdict.payload["claim"] == from_typed(case["input"]["claim"])
    assert encode(verdict.claim.to_value()) == encode(verdict.payload["claim"])
    assert [p for r in expected["requests"] for p in r["pairs"]] == list(verdict.opened)
    assert len(expected["scores"]) == len(verdict.opened) == expected["transcript"]["records"] - 1


def test_the_committed_file_is_what_the_builder_makes() -> None:
    assert VECTOR_FILE.read_text(encoding="utf-8") == render(vectors_claims.build())
