"""Verdict payloads: building, strict parsing and offline checking (spec §11).

A verdict is a canonical map signed by the arbiter in an envelope of kind
``verdict``. :func:`check_verdict` is what anyone holding the arbiter's public key
runs offline: it verifies the signature, decodes the payload strictly, checks the
schema and the spec version, and returns the parsed verdict. :func:`parse_verdict`
checks a payload once and builds the typed, immutable :class:`Verdict` every reader
reads fields of (its claim map, :class:`FinalState`, :class:`TranscriptHead`, its
``filing``): nothing is parsed twice and no reader looks a field up by name.
:func:`verdict_payload` builds the payload a claim engine signs. The claim map inside
is checked by :meth:`~twinaudit.protocol.claim.claim_map.ClaimMap.from_value`, which parses
its Describe map with :meth:`~twinaudit.protocol.oracles.base.OracleInfo.from_value`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Final, Literal, TypeGuard

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from twinaudit.protocol import SPEC_VERSION
from twinaudit.protocol.encoding import Value
from twinaudit.protocol.envelope import Envelope, open_envelope, require_sole_signer
from twinaudit.protocol.errors import InputError, SignatureError
from twinaudit.protocol.keys import key_id
from twinaudit.protocol.stats.base import Reported, Step
from twinaudit.protocol.versioning import require_supported

from .claim_map import ClaimMap
from .filing import Filing, check_filing, parse_filing
from .outcome import INDICATOR_BITS, OUTCOME_CHARS

#: Envelope kind of a verdict.
VERDICT_KIND = "verdict"
#: Characters of the indicator string: score decided 0/1, tie coin heads/tails, tie skipped.
INDICATOR_CHARS = OUTCOME_CHARS
_TIME = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$")

_FIELDS: dict[str, type | tuple[type, ...]] = {
    "spec": str,
    "arbiter": str,
    "claim_id": str,
    "time": str,
    "claim": dict,
    "audit_seed": bytes,
    "receipt_time": str,
    "earlier_claims": int,
    "opened": list,
    "indicators": str,
    "final": dict,
    "decision": str,
    "stop": str,
    "queries": int,
    "transcript": dict,
    "environment": dict,
}
#: The optional key of a verdict on a record that binds a claim key (spec §11): the
#: signed claim request that filed the claim (:class:`~.filing.Filing`).
FILING_KEY = "filing"
#: The optional key of a verdict whose claim is a log entry (spec §9.6, §11): the
#: claim-start entry's index and the log's root once it was appended.
CLAIM_ENTRY_KEY = "claim_entry"
#: Longest claim id a verdict may carry (UTF-8 bytes).
MAX_CLAIM_ID_BYTES = 128
#: A verdict's decision, and why its claim stopped (spec §10.2 step 7, §11).
DecisionWord = Literal["detected", "not-detected"]
StopReason = Literal["detected", "exhausted", "budget"]
_DECISIONS: Final[Mapping[str, DecisionWord]] = {
    "detected": "detected",
    "not-detected": "not-detected",
}
_STOPS: Final[Mapping[str, StopReason]] = {
    "detected": "detected",
    "exhausted": "exhausted",
    "budget": "budget",
}


@dataclass(frozen=True, slots=True)
class FinalState:
    """A verdict's ``final``: the sequential test's state after its last fed bit (spec §11).

    ``interval`` is set for the paper's test and ``log_statistic`` for the mixtures, each
    once the test has drawn (both None before a draw); ``grades`` holds a graded test's
    six counts ``[S_1, F_1, S_2, F_2, S_3, F_3]`` (spec §7.5), and is None for the others.
    """

    draws: int
    successes: int
    interval: tuple[int, int] | None
    log_statistic: float | None
    grades: tuple[int, ...] | None = None

    @classmethod
    def from_step(cls, step: Step) -> FinalState:
        """Return the final state a test reports in ``step`` (its last)."""
        return cls(step.draws, step.successes, step.interval, step.log_statistic, step.grades)

    def to_value(self) -> dict[str, Value]:
        """Return the canonical ``final`` map (``grades`` only for a graded test)."""
        final: dict[str, Value] = {
            "draws": self.draws,
            "successes": self.successes,
            "interval": list(self.interval) if self.interval is not None else None,
            "log_statistic": self.log_statistic,
        }
        if self.grades is not None:
            final["grades"] = list(self.grades)
        return final


@dataclass(frozen=True, slots=True)
class TranscriptHead:
    """A verdict's ``transcript``: the head of its transcript's hash chain and its records."""

    hash: bytes
    records: int


@dataclass(frozen=True, slots=True)
class ClaimEntryRef:
    """Where a verdict's claim was filed in the arbiter's log (spec §9.6, §11).

    ``index`` is its claim-start entry's log index; ``log_root`` the root of the log of
    ``index + 1`` entries, which the verdict's signature vouches for. Whoever holds
    those entries recounts ``earlier_claims`` from them.
    """

    index: int
    log_root: bytes

    @property
    def log_size(self) -> int:
        """The size of the log ``log_root`` is the root of: the entry and those before it."""
        return self.index + 1

    def to_value(self) -> dict[str, Value]:
        """Return the verdict's ``claim_entry`` map."""
        return {"index": self.index, "log_root": self.log_root}

    @classmethod
    def from_value(cls, value: Value) -> ClaimEntryRef:
        """Return the reference a verdict's ``claim_entry`` map holds (``invalid-input``)."""
        if not isinstance(value, dict) or set(value) != {"index", "log_root"}:
            raise InputError("claim_entry is a map of exactly index and log_root")
        index, root = value["index"], value["log_root"]
        if not is_int(index) or not 1 <= index < 2**63:
            raise InputError("claim_entry.index is an integer log index above 0")
        if not isinstance(root, bytes) or len(root) != 32:
            raise InputError("claim_entry.log_root is 32 bytes")
        return cls(index, root)


@dataclass(frozen=True, slots=True)
class Verdict:
    """A verdict payload, parsed and schema-checked once (spec §11); readers read its fields.

    Every field of the payload is here, typed: ``claim`` its claim map (§10.1),
    ``final`` the test's final state, ``transcript`` the transcript's chain head, and
    ``filing`` the signed request that filed the claim, on a record that binds a claim
    key (None on a record escrowed before claim keys, whose claims anyone could file).
    ``payload`` is the canonical map as signed, for what needs it whole (its encoding);
    it is read-only, like the verdict.
    """

    spec: str
    arbiter: str
    claim_id: str
    time: str
    claim: ClaimMap
    audit_seed: bytes
    receipt_time: str
    earlier_claims: int
    opened: tuple[int, ...]
    indicators: str
    final: FinalState
    decision: DecisionWord
    stop: StopReason
    queries: int
    transcript: TranscriptHead
    environment: Mapping[str, str]
    filing: Filing | None
    claim_entry: ClaimEntryRef | None
    payload: Mapping[str, Value] = field(repr=False, compare=False)

    @property
    def authenticated(self) -> bool:
        """Whether only the record's owner could file the claims it counts (a ``filing``)."""
        return self.filing is not None

    @property
    def p(self) -> float:
        """The claim's bound on a false detection, ``p`` (§7)."""
        p = self.claim.test_params["p"]
        assert isinstance(p, float)  # ClaimMap.from_value checked it
        return p

    def record_bound(self) -> float:
        """Return the bound on a false detection over the record's claims, min((k + 1)·p, 1)."""
        return min(1.0, (self.earlier_claims + 1) * self.p)

    @property
    def detected(self) -> bool:
        """Whether the verdict says data use was detected."""
        return self.decision == "detected"

    def fed_bits(self) -> list[int]:
        """Return the indicator bits fed to the test (ties skipped are left out)."""
        return [INDICATOR_BITS[c] for c in self.indicators if c in INDICATOR_BITS]


def is_int(value: object) -> TypeGuard[int]:
    """Return whether ``value`` is an integer of the data model (a boolean is not one)."""
    return isinstance(value, int) and not isinstance(value, bool)


def _is_ints(value: object) -> TypeGuard[list[int]]:
    return isinstance(value, list) and all(is_int(x) for x in value)


def _require(value: Mapping[str, Value], name: str, kind: type | tuple[type, ...]) -> None:
    if name not in value:
        raise InputError(f"verdict field {name!r} is missing")
    found = value[name]
    if isinstance(found, bool) or not isinstance(found, kind):
        raise InputError(f"verdict field {name!r} has the wrong type")


def _text(value: Value) -> str:
    assert isinstance(value, str)  # _require checked the type
    return value


def _int(value: Value) -> int:
    assert is_int(value)  # _require checked the type
    return value


def parse_verdict(value: Value) -> Verdict:
    """Check a decoded payload against the verdict schema of spec §11 and return it, typed.

    The claim map's Describe map (``model.oracle``) is parsed by
    :meth:`~twinaudit.protocol.oracles.base.OracleInfo.from_value`. Every failure is
    ``invalid-input`` (an unsupported ``spec``, ``unsupported-version``).
    """
    if not isinstance(value, dict):
        raise InputError("a verdict payload must be a map")
    expected = set(_FIELDS) | ({FILING_KEY, CLAIM_ENTRY_KEY} & set(value))
    if set(value) != expected:
        missing, extra = expected - set(value), set(value) - expected
        raise InputError(f"verdict fields: missing {sorted(missing)}, unknown {sorted(extra)}")
    spec = require_supported(value.get("spec"), "verdict")
    for name, kind in _FIELDS.items():
        _require(value, name, kind)
    for name in ("time", "receipt_time"):
        if not _TIME.match(_text(value[name])):
            raise InputError(f"verdict field {name!r} is not an RFC 3339 UTC time")
    claim = ClaimMap.from_value(value["claim"])
    claim_id = _text(value["claim_id"])
    if not 1 <= len(claim_id.encode()) <= MAX_CLAIM_ID_BYTES:
        raise InputError(f"claim_id must be 1 to {MAX_CLAIM_ID_BYTES} bytes of text")
    environment = value["environment"]
    assert isinstance(environment, dict)
    texts = {k: v for k, v in environment.items() if isinstance(v, str)}
    if len(texts) != len(environment):
        raise InputError("environment must map text to text")
    decision = _DECISIONS.get(_text(value["decision"]))
    stop = _STOPS.get(_text(value["stop"]))
    if decision is None or stop is None:
        raise InputError("unknown decision or stop reason")
    if (decision == "detected") != (stop == "detected"):
        raise InputError("decision and stop reason disagree")
    earlier_claims = _int(value["earlier_claims"])
    if earlier_claims < 0:
        raise InputError("earlier_claims cannot be negative")
    audit_seed = value["audit_seed"]
    assert isinstance(audit_seed, bytes)
    if len(audit_seed) != 32:
        raise InputError("audit_seed must be 32 bytes")
    queries = _int(value["queries"])
    if queries < 0:
        raise InputError("queries cannot be negative")
    opened = value["opened"]
    if not (_is_ints(opened) and all(0 <= i < claim.n_pairs for i in opened)):
        raise InputError(f"opened must list pair indices in 0..{claim.n_pairs - 1}")
    if len(set(opened)) != len(opened):
        raise InputError("a pair is listed as opened twice")
    if claim.excluded and not set(claim.excluded).isdisjoint(opened):
        raise InputError("opened lists a pair the claim map excludes")
    indicators = _text(value["indicators"])
    if set(indicators) - INDICATOR_CHARS or len(indicators) > len(opened):
        raise InputError("indicators must be one of 0 1 h t s per processed pair")
    transcript = _transcript_head(value["transcript"])
    test = claim.make_test()
    final = _parse_final(value["final"], len(opened), test.graded, test.reports)
    filing = parse_filing(value[FILING_KEY]) if FILING_KEY in value else None
    entry = value.get(CLAIM_ENTRY_KEY)
    claim_entry = ClaimEntryRef.from_value(entry) if CLAIM_ENTRY_KEY in value else None
    return Verdict(
        spec=spec,
        arbiter=_text(value["arbiter"]),
        claim_id=claim_id,
        time=_text(value["time"]),
        claim=claim,
        audit_seed=audit_seed,
        receipt_time=_text(value["receipt_time"]),
        earlier_claims=earlier_claims,
        opened=tuple(opened),
        indicators=indicators,
        final=final,
        decision=decision,
        stop=stop,
        queries=queries,
        transcript=transcript,
        environment=MappingProxyType(texts),
        filing=filing,
        claim_entry=claim_entry,
        payload=MappingProxyType(value),
    )


def _transcript_head(transcript: Value) -> TranscriptHead:
    """Check ``transcript``: exactly a 32-byte ``hash`` and an integer ``records`` ≥ 0."""
    assert isinstance(transcript, dict)  # _require checked the type
    head, records = transcript.get("hash"), transcript.get("records")
    if (
        set(transcript) != {"hash", "records"}
        or not isinstance(head, bytes)
        or len(head) != 32
        or not is_int(records)
        or records < 0
    ):
        raise InputError("transcript must be {hash: 32 bytes, records: an integer >= 0}")
    return TranscriptHead(head, records)


def _parse_final(final: Value, opened: int, graded: bool, reports: Reported) -> FinalState:
    """Check ``final``: counts 0 ≤ successes ≤ draws ≤ opened; interval; log statistic.

    ``graded``: the claim's test is graded (spec §7.5), so ``final`` also holds
    ``grades``, six counts that add up to ``draws`` and, the ones, to ``successes``.
    ``reports``: the one of ``interval`` and ``log_statistic`` the test sets once it
    has drawn; the other is always nil, and both are nil before any draw (spec §11).
    """
    keys = {"draws", "successes", "interval", "log_statistic"}
    if not isinstance(final, dict) or set(final) != (keys | {"grades"} if graded else keys):
        raise InputError(
            "final must have exactly draws, successes, interval, log_statistic"
            + (" and grades (a graded test)" if graded else "")
        )
    draws, successes = final["draws"], final["successes"]
    if not (is_int(draws) and is_int(successes) and 0 <= successes <= draws <= opened):
        raise InputError(
            "final.draws and final.successes must be 0 <= successes <= draws <= opened"
        )
    interval, log_statistic = final["interval"], final["log_statistic"]
    if interval is not None and not (_is_ints(interval) and len(interval) == 2):
        raise InputError("final.interval must be nil or two integers")
    if log_statistic is not None and not isinstance(log_statistic, float):
        raise InputError("final.log_statistic must be nil or a float")
    for name in ("interval", "log_statistic"):
        if (final[name] is not None) != (name == reports and draws != 0):
            raise InputError(
                f"final.{name} must be "
                + ("set exactly when draws > 0" if name == reports else "nil for this test")
            )
    grades = None
    if graded:
        listed = final["grades"]
        if not (
            _is_ints(listed)
            and len(listed) == 6
            and all(n >= 0 for n in listed)
            and sum(listed) == draws
            and sum(listed[0::2]) == successes
        ):
            raise InputError(
                "final.grades must be six counts [S_1, F_1, S_2, F_2, S_3, F_3] adding up "
                "to draws and, the ones, to successes"
            )
        grades = tuple(listed)
    return FinalState(
        draws,
        successes,
        (interval[0], interval[1]) if interval is not None else None,
        log_statistic,
        grades,
    )


def check_verdict(envelope_json: bytes, arbiter_key: Ed25519PublicKey) -> Verdict:
    """Verify a verdict envelope offline and return the parsed verdict (spec §11).

    Steps: (1) parse the envelope strictly; (2) it carries exactly one signature, whose
    key id names the arbiter's key (so no byte of the file can change unnoticed — the
    id is still only a label: step 3 decides); (3) verify the arbiter's signature over
    the PAE with payload type ``verdict``; (4) decode the payload canonically; (5)
    check the schema and the spec version (:func:`parse_verdict`); (6) the payload's
    ``arbiter`` is that key; (7) where the verdict carries a ``filing``, the record's
    claim key signed a request for exactly this claim (:func:`~.filing.check_filing`).
    """
    envelope = Envelope.from_json(envelope_json)
    expected_id = key_id(arbiter_key)
    require_sole_signer(envelope, arbiter_key, VERDICT_KIND)
    verdict = parse_verdict(open_envelope(envelope, arbiter_key, VERDICT_KIND))
    if verdict.arbiter != expected_id:
        raise SignatureError("the verdict names another arbiter than the key that signed it")
    if verdict.filing is not None:
        check_filing(verdict.filing, verdict.claim, expected_id)
    return verdict


def final_state(step: Step) -> dict[str, Value]:
    """Return a verdict's ``final`` map for the test's last step (spec §11).

    A graded test's map (spec §7.5) also holds ``grades``, its per-grade counts.
    """
    return FinalState.from_step(step).to_value()


def stop_reason(detected: bool, exhausted: bool, opened: int, n_pairs: int) -> str:
    """Return the stop of spec §10.2 step 7 of a claim that stopped after ``opened`` pairs.

    ``detected`` and ``exhausted`` are the test's decision: ``detected`` when it detected,
    ``exhausted`` when it can no longer detect or every pair the claim may open is opened
    (``n_pairs``: the record's pairs less those the claim excludes), else ``budget``
    (the claim's ``max_pairs`` or query budget ran out).
    """
    if detected:
        return "detected"
    if exhausted or opened == n_pairs:
        return "exhausted"
    return "budget"


def verdict_payload(
    *,
    arbiter: str,
    claim_id: str,
    time: str,
    claim: ClaimMap,
    audit_seed: bytes,
    receipt_time: str,
    earlier_claims: int,
    opened: list[int],
    indicators: str,
    final: Step,
    stop: str,
    queries: int,
    transcript: tuple[bytes, int],
    environment: dict[str, Value],
    filing: Filing | None = None,
    claim_entry: ClaimEntryRef | None = None,
) -> dict[str, Value]:
    """Return the verdict payload of spec §11 (``transcript`` is its chain head and count).

    ``claim_entry`` is where the claim was filed in the log (§9.6); None for a claim
    that has no claim-start entry.

    ``filing`` is the signed request that filed the claim, on a record that binds a
    claim key; a record escrowed before claim keys has none, and neither has the payload.
    """
    payload: dict[str, Value] = {
        "spec": SPEC_VERSION,
        "arbiter": arbiter,
        "claim_id": claim_id,
        "time": time,
        "claim": claim.to_value(),
        "audit_seed": audit_seed,
        "receipt_time": receipt_time,
        "earlier_claims": earlier_claims,
        "opened": list(opened),
        "indicators": indicators,
        "final": final_state(final),
        "decision": "detected" if stop == "detected" else "not-detected",
        "stop": stop,
        "queries": queries,
        "transcript": {"hash": transcript[0], "records": transcript[1]},
        "environment": environment,
    }
    if filing is not None:
        payload[FILING_KEY] = filing.to_value()
    if claim_entry is not None:
        payload[CLAIM_ENTRY_KEY] = claim_entry.to_value()
    return payload
