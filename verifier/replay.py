"""Replay a verdict from its transcript, without the model and without the owner's data.

Anyone holding a verdict and its transcript can recompute, bit for bit, everything
the decision rests on: the audit order, every augmentation parameter, every score
(float64, from the recorded answers), every tie coin, the indicator string and the
sequential test's final state and decision (spec §12).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from protocol import SPEC_VERSION
from protocol.encoding import Value, encode
from protocol.errors import InputError, OracleError, ParameterError, VerificationError
from protocol.limits import HASH_BYTES
from protocol.prg import Prg, without_replacement
from protocol.stats.base import Decision, Step
from protocol.stats.registry import make_test
from verifier.oracles.base import OracleInfo
from verifier.schedule import WindowSchedule
from verifier.scoring.outcome import TIE, WIN, compare, tie_margin
from verifier.scoring.registry import score_spec_from_value
from verifier.windows import AnyWindowScorer, scorer_for

from .claim_map import check_claim_map
from .transcript import chain_head, iter_records
from .verdict import Verdict, is_int


@dataclass(frozen=True)
class ReplayResult:
    """What the replay recomputed; equal to the verdict's fields when it succeeds."""

    indicators: str
    final: dict[str, Value]
    decision: str
    pairs: int


def _fail(message: str) -> VerificationError:
    return VerificationError(f"replay: {message}")


def replay(verdict: Verdict, transcript: bytes) -> ReplayResult:
    """Recompute the verdict's decision from ``transcript``; raise on any difference.

    Steps: (1) the transcript's chain head and record count equal the verdict's; (2)
    its header carries the verdict's claim; (3) its pairs are the verdict's opened
    pairs, in the audit order of the verdict's seed, in the claim's windows; (4) per
    pair, the augmentation parameters are the PRG's, the scores follow from the
    recorded answers, and the outcome from the scores (and the tie coin); (5) the test
    fed these outcomes ends in the verdict's final state and decision; (6) the stop
    reason and the query count are the ones those pairs and that test give.
    """
    head, count = chain_head(transcript)
    if head != verdict["transcript"]["hash"] or count != verdict["transcript"]["records"]:
        raise _fail("the transcript's hash chain is not the one the verdict signs")
    records = list(iter_records(transcript))
    if not records:
        raise _fail("the transcript has no header record")
    header, pairs = records[0], records[1:]
    claim = check_claim_map(verdict["claim"])
    if (
        set(header) != HEADER_KEYS
        or header["type"] != "header"
        or header["spec"] != SPEC_VERSION
        or encode(header["claim"]) != encode(claim)
    ):
        raise _fail("the transcript header does not carry the verdict's claim")
    seed: bytes = verdict["audit_seed"]
    n_pairs = int(claim["record"]["n_pairs"])
    opened = [int(i) for i in verdict["opened"]]
    order = without_replacement(seed, n_pairs)
    if [next(order) for _ in opened] != opened:
        raise _fail("the opened pairs do not follow the audit seed's order")
    if [p.get("index") for p in pairs] != opened:
        raise _fail("the transcript's pairs are not the opened pairs")
    score = score_spec_from_value(claim["score"])
    for record in pairs:
        _check_pair_record(record, score.function)
    per_pair = 2 * score.queries_per_version
    if [p.get("window") for p in pairs] != _windows(claim, n_pairs, per_pair, len(pairs)):
        raise _fail("the transcript's windows do not follow the claim's window schedule")
    scorer = scorer_for(score)
    info = OracleInfo.from_value(claim["model"]["oracle"])
    test_params = claim["test"]["params"]
    test = make_test(claim["test"]["name"], n_pairs, test_params["p"], test_params.get("alpha"))
    skip_ties = claim["tie_rule"] == "skip"
    indicators = ""
    last = Step(0, 0, Decision.CONTINUE, None, None)
    for record in pairs:
        outcome = _replay_pair(record, seed, scorer, info, skip_ties, margin=tie_margin(score))
        fed = test.decision is Decision.CONTINUE
        if record.get("outcome") != (outcome if fed else ""):
            raise _fail(f"pair {record['index']!r}: recorded outcome disagrees with the scores")
        if fed:
            indicators += outcome
            if outcome != "s":
                last = test.update(outcome in "1h")
    final: dict[str, Value] = {
        "draws": last.draws,
        "successes": last.successes,
        "interval": list(last.interval) if last.interval is not None else None,
        "log_statistic": last.log_statistic,
    }
    decision = "detected" if test.decision is Decision.DETECTED else "not-detected"
    if indicators != verdict["indicators"]:
        raise _fail("the indicator string differs from the verdict's")
    if not _same_final(final, verdict["final"]) or decision != verdict["decision"]:
        raise _fail("the test's final state or decision differs from the verdict's")
    if verdict["stop"] != _stop(test.decision, len(pairs), n_pairs):
        raise _fail("the verdict's stop reason is not the one its pairs and test give")
    if verdict["queries"] != per_pair * len(pairs):
        raise _fail("the verdict's query count is not its opened pairs' (spec §12)")
    return ReplayResult(indicators, final, decision, len(pairs))


def _stop(decision: Decision, opened: int, n_pairs: int) -> str:
    """Return the stop reason of spec §10.2 step 7 for a claim that opened ``opened`` pairs."""
    if decision is Decision.DETECTED:
        return "detected"
    if decision is Decision.EXHAUSTED or opened == n_pairs:
        return "exhausted"
    return "budget"


#: Keys of the header record and of every pair record, and the extra keys of each
#: score function's pair records (spec §12).
HEADER_KEYS = frozenset({"type", "spec", "claim"})
PAIR_KEYS = frozenset({"type", "window", "index", "published", "digests", "scores", "outcome"})
FUNCTION_KEYS: dict[str, frozenset[str]] = {
    "image-classifier": frozenset({"label", "shape", "params", "query_digests", "answers"}),
    "image-encoder": frozenset({"shape", "params", "query_digests", "answers"}),
    "language-model": frozenset({"answers"}),
    "image-text": frozenset({"shape", "query_digests", "answers"}),
}
#: Bounds of an image item (spec §6.3): its side, and its label's range.
MAX_SIDE = 4096
MAX_LABEL = 1 << 16
#: The outcome characters a pair record may carry ("" for a pair opened after the decision).
OUTCOMES = frozenset({"1", "0", "h", "t", "s", ""})


def _digest_pair(value: Value) -> bool:
    return (
        isinstance(value, list)
        and len(value) == 2
        and all(isinstance(d, bytes) and len(d) == HASH_BYTES for d in value)
    )


def _check_pair_record(record: dict[str, Value], function: str) -> None:
    """Check a pair record's key set and the types of the fields every function shares."""
    index = record.get("index")
    keys = PAIR_KEYS | FUNCTION_KEYS[function]
    if set(record) != keys:
        missing, extra = sorted(keys - set(record)), sorted(set(record) - keys)
        raise _fail(f"pair record {index!r}: missing {missing}, unknown {extra}")
    window, published, scores = record["window"], record["published"], record["scores"]
    if (
        record["type"] != "pair"
        or not is_int(index)
        or not is_int(window)
        or window < 0  # type: ignore[operator]
        or published not in (0, 1)
        or isinstance(published, bool)
        or not _digest_pair(record["digests"])
        or not (isinstance(scores, list) and len(scores) == 2)
        or not all(isinstance(s, float) for s in scores)
        or not isinstance(record["outcome"], str)
        or record["outcome"] not in OUTCOMES
    ):
        raise _fail(f"pair record {index!r}: a field has the wrong type or value")
    if "query_digests" in record and not _digest_pair(record["query_digests"]):
        raise _fail(f"pair record {index!r}: query_digests must be two SHA-256 digests")
    shape = record.get("shape", [1, 1, 1])
    if not (
        isinstance(shape, list)
        and len(shape) == 3
        and all(is_int(d) and 1 <= d <= MAX_SIDE for d in shape)  # type: ignore[operator]
        and shape[2] in (1, 3)
    ):
        raise _fail(f"pair record {index!r}: shape must be [H, W, C], H, W in 1..4096, C 1 or 3")
    label = record.get("label")
    if label is not None and not (is_int(label) and 0 <= label < MAX_LABEL):  # type: ignore[operator]
        raise _fail(f"pair record {index!r}: label must be nil or a class index")


def _windows(claim: dict[str, Any], n_pairs: int, per_pair: int, count: int) -> list[int]:
    """Return the request number of each opened pair under the claim's schedule (§10.2)."""
    max_pairs = int(claim["max_pairs"])
    limit = n_pairs if max_pairs == 0 else min(max_pairs, n_pairs)
    try:
        first, largest, budget = (int(claim[k]) for k in ("window", "window_max", "query_budget"))
        return WindowSchedule(first, largest, limit, per_pair, budget).windows_of(count)
    except (ParameterError, ValueError) as exc:
        raise _fail(f"the claim's window schedule does not fit the transcript: {exc}") from exc


def _same_final(replayed: dict[str, Value], recorded: dict[str, Value]) -> bool:
    """Compare final states: counts and interval exactly, the log statistic loosely.

    The log e-value is informative only (the decision is made exactly, spec §7.3);
    it comes from the C library's log and lgamma, which may differ in the last bits
    between platforms, so it must agree to 1e-9 relative, not bit for bit.
    """
    exact = ("draws", "successes", "interval")
    if encode([replayed[k] for k in exact]) != encode([recorded.get(k) for k in exact]):
        return False
    mine, theirs = replayed["log_statistic"], recorded.get("log_statistic")
    if mine is None or theirs is None:
        return mine is theirs
    if not isinstance(mine, float) or not isinstance(theirs, float):
        return False
    return math.isclose(mine, theirs, rel_tol=1e-9, abs_tol=1e-12)


def _replay_pair(
    record: dict[str, Value],
    seed: bytes,
    scorer: AnyWindowScorer,
    info: OracleInfo,
    skip_ties: bool,
    *,
    margin: float,
) -> str:
    index, published, recorded = record["index"], record["published"], record["scores"]
    # _check_pair_record has checked the types.
    assert isinstance(index, int)
    assert isinstance(published, int)
    assert isinstance(recorded, list)
    try:
        scores = scorer.replay(info, seed, record)
    except (OracleError, ParameterError, InputError) as exc:
        raise _fail(f"pair {index!r}: the recorded answers do not replay: {exc}") from None
    if encode(scores) != encode(recorded):
        raise _fail(f"pair {index}: recorded scores differ from the recomputed ones")
    outcome = compare(scores[published], scores[1 - published], margin)
    if outcome != TIE:
        return "1" if outcome == WIN else "0"
    if skip_ties:
        return "s"
    return "h" if Prg(seed, f"tie/{index}").coin() else "t"
