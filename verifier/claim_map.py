"""The claim map of spec §10.1, checked strictly wherever it is read back (verdicts, replay).

The claim engine builds the map from parameters it has already validated; a verdict
or a transcript is input from anyone, so :func:`check_claim_map` re-checks every key,
type and range before any field is used. Every failure is ``invalid-input``
(:class:`~protocol.errors.InputError`), naming the field.
"""

from __future__ import annotations

from typing import Any

from protocol import limits
from protocol.encoding import Value, encode
from protocol.errors import InputError, OracleError, ParameterError
from protocol.stats.registry import make_test
from verifier.oracles.base import OracleInfo
from verifier.schedule import MAX_WINDOW
from verifier.scoring.registry import score_spec_from_value

#: Keys of the claim map and of its three sub-maps (spec §10.1).
CLAIM_KEYS = frozenset(
    {
        "record",
        "model",
        "score",
        "test",
        "tie_rule",
        "max_pairs",
        "query_budget",
        "window",
        "window_max",
        "claim_nonce",
    }
)
RECORD_KEYS = frozenset({"index", "root", "n_pairs"})
MODEL_KEYS = frozenset({"endpoint", "name", "oracle"})
TEST_KEYS = frozenset({"name", "params"})
TIE_RULES = frozenset({"coin", "skip"})
#: Longest endpoint and model name a claim map may carry (UTF-8 bytes).
MAX_NAME_BYTES = 256


def _map(value: object, keys: frozenset[str], what: str) -> dict[str, Any]:
    if not isinstance(value, dict) or set(value) != keys:
        raise InputError(f"{what} must be a map with exactly the keys {sorted(keys)}")
    return value


def _int(value: object, what: str, low: int, high: int) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        raise InputError(f"{what} must be an integer in {low}..{high}")
    return value


def _text(value: object, what: str) -> str:
    if not isinstance(value, str) or len(value.encode()) > MAX_NAME_BYTES:
        raise InputError(f"{what} must be text of at most {MAX_NAME_BYTES} bytes")
    return value


def _hash(value: object, what: str) -> bytes:
    if not isinstance(value, bytes) or len(value) != limits.HASH_BYTES:
        raise InputError(f"{what} must be {limits.HASH_BYTES} bytes")
    return value


def check_claim_map(value: Value) -> dict[str, Any]:
    """Check a claim map against spec §10.1 and return it; raise ``InputError`` otherwise.

    Checked: exact key sets (claim, ``record``, ``model``, ``test``); ``record.index``
    ≥ 0, ``record.root`` and ``claim_nonce`` 32 bytes, ``record.n_pairs`` in
    1..MAX_PAIRS; ``model.endpoint`` and ``model.name`` text, ``model.oracle`` a
    valid Describe map; the score map valid for its function with a resolved
    knowledge condition; the test registered, its ``params`` exactly those the test
    takes for ``n_pairs`` (§7); ``tie_rule`` ``coin`` or ``skip``; ``max_pairs`` and
    ``query_budget`` ≥ 0; ``window`` in 1..256 and ``window_max`` in ``window``..256.
    """
    claim = _map(value, CLAIM_KEYS, "the claim")
    record = _map(claim["record"], RECORD_KEYS, "claim.record")
    _int(record["index"], "claim.record.index", 0, 2**63 - 1)
    _hash(record["root"], "claim.record.root")
    n_pairs = _int(record["n_pairs"], "claim.record.n_pairs", 1, limits.MAX_PAIRS)
    model = _map(claim["model"], MODEL_KEYS, "claim.model")
    _text(model["endpoint"], "claim.model.endpoint")
    _text(model["name"], "claim.model.name")
    try:
        info = OracleInfo.from_value(model["oracle"])
        score = score_spec_from_value(claim["score"])
        score.check_oracle(info)
    except (OracleError, ParameterError) as exc:
        raise InputError(f"claim.model.oracle or claim.score: {exc}") from None
    test = _map(claim["test"], TEST_KEYS, "claim.test")
    params = test["params"]
    if not isinstance(test["name"], str) or not isinstance(params, dict):
        raise InputError("claim.test must name a test and carry a parameter map")
    p, alpha = params.get("p"), params.get("alpha")
    if not isinstance(p, float) or (alpha is not None and not isinstance(alpha, float)):
        raise InputError("claim.test.params.p (and alpha) must be floats")
    try:
        built = make_test(test["name"], n_pairs, p, alpha)
    except ParameterError as exc:
        raise InputError(f"claim.test: {exc}") from None
    if encode(built.parameters()) != encode(params):
        raise InputError(
            f"claim.test.params must be exactly the parameters of {test['name']!r} "
            f"over {n_pairs} pairs at p = {p}"
        )
    if not isinstance(claim["tie_rule"], str) or claim["tie_rule"] not in TIE_RULES:
        raise InputError(f"claim.tie_rule must be one of {sorted(TIE_RULES)}")
    _int(claim["max_pairs"], "claim.max_pairs", 0, limits.MAX_PAIRS)
    _int(claim["query_budget"], "claim.query_budget", 0, 2**63 - 1)
    window = _int(claim["window"], "claim.window", 1, MAX_WINDOW)
    _int(claim["window_max"], "claim.window_max", window, MAX_WINDOW)
    _hash(claim["claim_nonce"], "claim.claim_nonce")
    return claim
