"""The claim map of spec §10.1: typed, and checked strictly wherever it is read back.

A :class:`ClaimMap` is what a claim's transcript header and its verdict carry: the
record, the model and the oracle's description, the score with its knowledge
condition resolved, the test and its parameters, the tie rule, the limits, the window
schedule's parameters, the claim nonce and, where the claim excludes the pairs earlier
claims on the record opened, those pairs (``excluded``). The claim engine builds it from
parameters it has already validated; a verdict or a transcript is input from anyone,
so :meth:`ClaimMap.from_value` re-checks every key, type and range before any field
is used. Every failure is ``invalid-input`` (:class:`~twinaudit.protocol.errors.InputError`),
naming the field.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from twinaudit.protocol import limits
from twinaudit.protocol.encoding import Value, encode
from twinaudit.protocol.errors import InputError, OracleError, ParameterError
from twinaudit.protocol.oracles.base import OracleInfo
from twinaudit.protocol.stats.base import SequentialTest, TiePolicy
from twinaudit.protocol.stats.registry import make_test

from .functions import AnyScoreSpec, score_spec_from_value
from .order import check_excluded, claim_order
from .params import MAX_NAME_BYTES
from .schedule import MAX_WINDOW, WindowSchedule

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
#: The optional key of a claim that excludes pairs opened by earlier claims (spec §10.1).
EXCLUDED_KEY = "excluded"
#: The optional key of a claim that fits every image query to the model's declared input
#: shape (spec §10.1, §10.2 step 5), and the one rule it may name.
INPUT_FIT_KEY = "input_fit"
INPUT_FIT_RULES = frozenset({"area"})
#: The item kinds whose score functions send images (what ``input_fit`` applies to).
IMAGE_KINDS = frozenset({"image", "captioned-image"})
RECORD_KEYS = frozenset({"index", "root", "n_pairs"})
MODEL_KEYS = frozenset({"endpoint", "name", "oracle"})
TEST_KEYS = frozenset({"name", "params"})
TIE_RULES = frozenset(rule.value for rule in TiePolicy)


@dataclass(frozen=True)
class ClaimMap:
    """A claim as its transcript and verdict record it (spec §10.1)."""

    record_index: int
    record_root: bytes
    n_pairs: int
    endpoint: str
    model_name: str
    #: The oracle's Describe map, as recorded.
    oracle: dict[str, Value]
    #: The score, its knowledge condition resolved.
    score: AnyScoreSpec
    test_name: str
    #: The test's parameters over ``n_pairs`` pairs (§7), as the test reports them.
    test_params: dict[str, Value]
    tie_rule: TiePolicy
    max_pairs: int
    query_budget: int
    window: int
    window_max: int
    claim_nonce: bytes
    #: Pairs opened by earlier claims on the record, which this claim never opens:
    #: strictly increasing, at most ``n_pairs − 1`` of them; empty when none (§10.1).
    excluded: tuple[int, ...] = ()
    #: The rule that fits every image query to the Describe map's ``input_shape``
    #: (``"area"``), or ``""``: queries at the items' own shapes (§10.2 step 5).
    input_fit: str = ""

    @cached_property
    def oracle_info(self) -> OracleInfo:
        """The oracle's Describe map, parsed (spec §10.1; :meth:`from_value` checked it)."""
        return OracleInfo.from_value(self.oracle)

    @property
    def fit_shape(self) -> tuple[int, int, int] | None:
        """The shape every image query is fitted to (the oracle's input), or None."""
        if not self.input_fit:
            return None
        shape = self.oracle.get("input_shape")
        assert isinstance(shape, list)
        height, width, channels = (d for d in shape if isinstance(d, int))
        return height, width, channels

    @property
    def population(self) -> int:
        """The pairs the claim can open: the record's, less the excluded (its test's ``N``)."""
        return self.n_pairs - len(self.excluded)

    @property
    def limit(self) -> int:
        """How many pairs the claim may open at most (``max_pairs`` or its population)."""
        return self.population if self.max_pairs == 0 else min(self.max_pairs, self.population)

    def order(self, seed: bytes) -> Iterator[int]:
        """Return the claim's opening order under ``seed`` (§10.2 step 2), excluded skipped."""
        return claim_order(seed, self.n_pairs, self.excluded)

    @property
    def queries_per_pair(self) -> int:
        """Oracle queries per pair: both versions' copies (2K, or 2)."""
        return 2 * self.score.queries_per_version

    @property
    def schedule(self) -> WindowSchedule:
        """The claim's window schedule (spec §10.2 step 3)."""
        return WindowSchedule(
            self.window, self.window_max, self.limit, self.queries_per_pair, self.query_budget
        )

    def make_test(self) -> SequentialTest:
        """Return a fresh sequential test with the claim's name and parameters (§7)."""
        alpha, prior = self.test_params.get("alpha"), self.test_params.get("prior")
        p = self.test_params["p"]
        assert isinstance(p, float)
        assert alpha is None or isinstance(alpha, float)
        assert prior is None or isinstance(prior, str)
        return make_test(self.test_name, self.population, p, alpha, prior)

    def to_value(self) -> dict[str, Value]:
        """Return the canonical claim map (``excluded`` only when the claim excludes pairs)."""
        value: dict[str, Value] = {
            "record": {
                "index": self.record_index,
                "root": self.record_root,
                "n_pairs": self.n_pairs,
            },
            "model": {"endpoint": self.endpoint, "name": self.model_name, "oracle": self.oracle},
            "score": self.score.to_value(),
            "test": {"name": self.test_name, "params": self.test_params},
            "tie_rule": self.tie_rule.value,
            "max_pairs": self.max_pairs,
            "query_budget": self.query_budget,
            "window": self.window,
            "window_max": self.window_max,
            "claim_nonce": self.claim_nonce,
        }
        if self.excluded:
            excluded: list[Value] = list(self.excluded)
            value[EXCLUDED_KEY] = excluded
        if self.input_fit:
            value[INPUT_FIT_KEY] = self.input_fit
        return value

    @classmethod
    def from_value(cls, value: Value) -> ClaimMap:
        """Check a claim map against spec §10.1 and return it; raise ``InputError`` otherwise.

        Checked: exact key sets (claim, ``record``, ``model``, ``test``); ``record.index``
        ≥ 0, ``record.root`` and ``claim_nonce`` 32 bytes, ``record.n_pairs`` in
        1..MAX_PAIRS; ``model.endpoint`` and ``model.name`` text, ``model.oracle`` a
        valid Describe map (:meth:`~twinaudit.protocol.oracles.base.OracleInfo.from_value`
        parses it), whose ``model_digest`` is the hex a ``held:sha256:<hex>`` endpoint
        names (an arbiter-held model); the score map valid for its function with a
        resolved knowledge condition, served by that oracle; the test registered, its
        ``params`` exactly those the test takes for ``n_pairs`` (§7);
        ``tie_rule`` ``coin`` or ``skip``; ``max_pairs`` and ``query_budget`` ≥ 0;
        ``window`` in 1..256 and ``window_max`` in ``window``..256; ``excluded``, where
        present, strictly increasing pair indices that leave at least one pair, the
        test's parameters then being those over the pairs left.
        """
        optional = {EXCLUDED_KEY, INPUT_FIT_KEY} & set(value) if isinstance(value, dict) else set()
        claim = _map(value, CLAIM_KEYS | optional, "the claim")
        record = _map(claim["record"], RECORD_KEYS, "claim.record")
        index = _int(record["index"], "claim.record.index", 0, 2**63 - 1)
        root = _hash(record["root"], "claim.record.root")
        n_pairs = _int(record["n_pairs"], "claim.record.n_pairs", 1, limits.MAX_PAIRS)
        excluded: tuple[int, ...] = ()
        if EXCLUDED_KEY in claim:
            excluded = tuple(check_excluded(claim[EXCLUDED_KEY], n_pairs))
        population = n_pairs - len(excluded)
        model = _map(claim["model"], MODEL_KEYS, "claim.model")
        endpoint = _text(model["endpoint"], "claim.model.endpoint")
        name = _text(model["name"], "claim.model.name")
        try:
            info = OracleInfo.from_value(model["oracle"])
            score = score_spec_from_value(claim["score"])
            score.check_oracle(info)
        except (OracleError, ParameterError) as exc:
            raise InputError(f"claim.model.oracle or claim.score: {exc}") from None
        _check_held(endpoint, model["oracle"])
        input_fit = ""
        if INPUT_FIT_KEY in claim:
            input_fit = check_input_fit(claim[INPUT_FIT_KEY], model["oracle"], score.item_kind)
        test = _map(claim["test"], TEST_KEYS, "claim.test")
        params = test["params"]
        if not isinstance(test["name"], str) or not isinstance(params, dict):
            raise InputError("claim.test must name a test and carry a parameter map")
        p, alpha, prior = params.get("p"), params.get("alpha"), params.get("prior")
        if not isinstance(p, float) or (alpha is not None and not isinstance(alpha, float)):
            raise InputError("claim.test.params.p (and alpha) must be floats")
        if prior is not None and not isinstance(prior, str):
            raise InputError("claim.test.params.prior must name a registered prior")
        try:
            built = make_test(test["name"], population, p, alpha, prior)
        except ParameterError as exc:
            raise InputError(f"claim.test: {exc}") from None
        if encode(built.parameters()) != encode(params):
            raise InputError(
                f"claim.test.params must be exactly the parameters of {test['name']!r} "
                f"over {population} pairs at p = {p}" + (f" with prior {prior!r}" if prior else "")
            )
        if not isinstance(claim["tie_rule"], str) or claim["tie_rule"] not in TIE_RULES:
            raise InputError(f"claim.tie_rule must be one of {sorted(TIE_RULES)}")
        max_pairs = _int(claim["max_pairs"], "claim.max_pairs", 0, limits.MAX_PAIRS)
        budget = _int(claim["query_budget"], "claim.query_budget", 0, 2**63 - 1)
        window = _int(claim["window"], "claim.window", 1, MAX_WINDOW)
        window_max = _int(claim["window_max"], "claim.window_max", window, MAX_WINDOW)
        nonce = _hash(claim["claim_nonce"], "claim.claim_nonce")
        claim_map = cls(
            record_index=index,
            record_root=root,
            n_pairs=n_pairs,
            endpoint=endpoint,
            model_name=name,
            oracle=model["oracle"],
            score=score,
            test_name=test["name"],
            test_params=params,
            tie_rule=TiePolicy(claim["tie_rule"]),
            max_pairs=max_pairs,
            query_budget=budget,
            window=window,
            window_max=window_max,
            claim_nonce=nonce,
            excluded=excluded,
            input_fit=input_fit,
        )
        # The Describe map parsed above is the claim's oracle_info: cached, never parsed again.
        vars(claim_map)["oracle_info"] = info
        return claim_map


def default_fit_shape(info: OracleInfo, item_kind: str) -> tuple[int, int, int] | None:
    """Return the shape a claim started now fits image queries to, or None (§10.2 step 5).

    A claim started now fits every image query (rule ``"area"``) where the oracle's
    Describe map declares an ``input_shape`` and the score function sends images; it
    sends items at their own shapes otherwise. The owner's estimate scores as such a
    claim would, so both take the rule from here.
    """
    if item_kind not in IMAGE_KINDS or len(info.input_shape) != 3:
        return None
    height, width, channels = info.input_shape
    return height, width, channels


def check_input_fit(rule: object, oracle: object, item_kind: str) -> str:
    """Return a claim map's ``input_fit`` rule, checked (spec §10.1); else ``invalid-input``.

    The rule is ``"area"``, the Describe map declares an ``input_shape`` and the score
    function sends images.
    """
    if not isinstance(rule, str) or rule not in INPUT_FIT_RULES:
        raise InputError(f"claim.input_fit must be one of {sorted(INPUT_FIT_RULES)}")
    if not isinstance(oracle, dict) or "input_shape" not in oracle:
        raise InputError("claim.input_fit needs a Describe map that declares input_shape")
    if item_kind not in IMAGE_KINDS:
        raise InputError(f"claim.input_fit applies to scores of images, not of {item_kind!r}")
    return rule


def _map(value: object, keys: frozenset[str], what: str) -> dict[str, Any]:
    if not isinstance(value, dict) or set(value) != keys:
        raise InputError(f"{what} must be a map with exactly the keys {sorted(keys)}")
    return value


def _int(value: object, what: str, low: int, high: int) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        raise InputError(f"{what} must be an integer in {low}..{high}")
    return value


#: An arbiter-held model's endpoint (spec §10.1): ``held:sha256:<64 lowercase hex>``.
HELD_ENDPOINT = re.compile(r"held:sha256:([0-9a-f]{64})")


def _check_held(endpoint: str, oracle: Value) -> None:
    """Refuse a ``held:…`` endpoint other than ``held:sha256:<hex>`` of the model digest (§10.1)."""
    if not endpoint.startswith("held:"):
        return
    match = HELD_ENDPOINT.fullmatch(endpoint)
    if match is None:
        raise InputError("claim.model.endpoint held:… must be held:sha256:<64 lowercase hex>")
    assert isinstance(oracle, dict)  # the Describe map has been parsed
    if oracle.get("model_digest") != match.group(1):
        raise InputError(
            "claim.model.oracle.model_digest must be the SHA-256 its held:sha256: endpoint names"
        )


def _text(value: object, what: str) -> str:
    if not isinstance(value, str) or len(value.encode()) > MAX_NAME_BYTES:
        raise InputError(f"{what} must be text of at most {MAX_NAME_BYTES} bytes")
    return value


def _hash(value: object, what: str) -> bytes:
    if not isinstance(value, bytes) or len(value) != limits.HASH_BYTES:
        raise InputError(f"{what} must be {limits.HASH_BYTES} bytes")
    return value
