"""Verdict payloads: building, strict parsing and offline checking (spec §11).

A verdict is a canonical map signed by the arbiter in an envelope of kind
``verdict``. :func:`check_verdict` is what anyone holding the arbiter's public key
runs offline: it verifies the signature, decodes the payload strictly, checks the
schema and the spec version, and returns the parsed verdict. :func:`verdict_payload`
builds the payload a claim engine signs. The claim map inside is checked by
:meth:`~twinaudit.protocol.claim.claim_map.ClaimMap.from_value`, with the Describe-map parser the
caller gives (``twinaudit.verifier.verdict`` binds the verifier's).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

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
from .scores.oracle_view import DescribeParser

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
#: Longest claim id a verdict may carry (UTF-8 bytes).
MAX_CLAIM_ID_BYTES = 128
_DECISIONS = {"detected", "not-detected"}
_STOPS = {"detected", "exhausted", "budget"}


@dataclass(frozen=True)
class Verdict:
    """A parsed, schema-checked verdict payload; ``value`` is the whole canonical map.

    ``claim`` is its claim map, typed (None only for a verdict built by hand), and
    ``filing`` the signed request that filed the claim, on a record that binds a claim
    key (None on a record escrowed before claim keys, whose claims anyone could file).
    """

    value: dict[str, Value]
    claim: ClaimMap | None = field(default=None, compare=False)
    filing: Filing | None = field(default=None, compare=False)

    @property
    def earlier_claims(self) -> int:
        """Claims counted on the record before this one (spec §11)."""
        earlier = self.value["earlier_claims"]
        assert isinstance(earlier, int)
        return earlier

    @property
    def authenticated(self) -> bool:
        """Whether only the record's owner could file the claims it counts (a ``filing``)."""
        return self.filing is not None

    def record_bound(self) -> float:
        """Return the bound on a false detection over the record's claims, min((k + 1)·p, 1)."""
        assert self.claim is not None
        p = self.claim.test_params["p"]
        assert isinstance(p, float)
        return min(1.0, (self.earlier_claims + 1) * p)

    def __getitem__(self, key: str) -> Any:
        """Return a top-level field."""
        return self.value[key]

    @property
    def detected(self) -> bool:
        """Whether the verdict says data use was detected."""
        return self.value["decision"] == "detected"

    def fed_bits(self) -> list[int]:
        """Return the indicator bits fed to the test (ties skipped are left out)."""
        indicators = str(self.value["indicators"])
        return [INDICATOR_BITS[c] for c in indicators if c in INDICATOR_BITS]


def _require(value: dict[str, Value], name: str, kind: type | tuple[type, ...]) -> Any:
    if name not in value:
        raise InputError(f"verdict field {name!r} is missing")
    field = value[name]
    if isinstance(field, bool) or not isinstance(field, kind):
        raise InputError(f"verdict field {name!r} has the wrong type")
    return field


def parse_verdict(value: Value, describe: DescribeParser) -> Verdict:
    """Check a decoded payload against the verdict schema of spec §11.

    ``describe`` parses the claim map's Describe map (``model.oracle``).
    """
    if not isinstance(value, dict):
        raise InputError("a verdict payload must be a map")
    expected = set(_FIELDS) | ({FILING_KEY} if FILING_KEY in value else set())
    if set(value) != expected:
        missing, extra = expected - set(value), set(value) - expected
        raise InputError(f"verdict fields: missing {sorted(missing)}, unknown {sorted(extra)}")
    require_supported(value.get("spec"), "verdict")
    for name, kind in _FIELDS.items():
        _require(value, name, kind)
    for name in ("time", "receipt_time"):
        if not _TIME.match(str(value[name])):
            raise InputError(f"verdict field {name!r} is not an RFC 3339 UTC time")
    claim = ClaimMap.from_value(value["claim"], describe)
    claim_id = str(value["claim_id"])
    if not 1 <= len(claim_id.encode()) <= MAX_CLAIM_ID_BYTES:
        raise InputError(f"claim_id must be 1 to {MAX_CLAIM_ID_BYTES} bytes of text")
    environment = value["environment"]
    assert isinstance(environment, dict)
    if not all(isinstance(v, str) for v in environment.values()):
        raise InputError("environment must map text to text")
    if value["decision"] not in _DECISIONS or value["stop"] not in _STOPS:
        raise InputError("unknown decision or stop reason")
    if (value["decision"] == "detected") != (value["stop"] == "detected"):
        raise InputError("decision and stop reason disagree")
    if value["earlier_claims"] < 0:  # type: ignore[operator]
        raise InputError("earlier_claims cannot be negative")
    if len(value["audit_seed"]) != 32:  # type: ignore[arg-type]
        raise InputError("audit_seed must be 32 bytes")
    if value["queries"] < 0:  # type: ignore[operator]
        raise InputError("queries cannot be negative")
    opened = value["opened"]
    assert isinstance(opened, list)
    if not all(
        isinstance(i, int) and not isinstance(i, bool) and 0 <= i < claim.n_pairs for i in opened
    ):
        raise InputError(f"opened must list pair indices in 0..{claim.n_pairs - 1}")
    if len(set(opened)) != len(opened):
        raise InputError("a pair is listed as opened twice")
    if claim.excluded and not set(claim.excluded).isdisjoint(opened):
        raise InputError("opened lists a pair the claim map excludes")
    indicators = str(value["indicators"])
    if set(indicators) - INDICATOR_CHARS or len(indicators) > len(opened):
        raise InputError("indicators must be one of 0 1 h t s per processed pair")
    transcript = value["transcript"]
    assert isinstance(transcript, dict)
    if (
        set(transcript) != {"hash", "records"}
        or not isinstance(transcript["hash"], bytes)
        or len(transcript["hash"]) != 32
        or not is_int(transcript["records"])
        or transcript["records"] < 0  # type: ignore[operator]
    ):
        raise InputError("transcript must be {hash: 32 bytes, records: an integer >= 0}")
    test = claim.make_test()
    _check_final(value["final"], len(opened), test.graded, test.reports)
    filing = parse_filing(value[FILING_KEY]) if FILING_KEY in value else None
    return Verdict(value, claim, filing)


def _check_final(final: Value, opened: int, graded: bool, reports: Reported) -> None:
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
    if not (is_int(draws) and is_int(successes) and 0 <= successes <= draws <= opened):  # type: ignore[operator]
        raise InputError(
            "final.draws and final.successes must be 0 <= successes <= draws <= opened"
        )
    interval = final["interval"]
    if interval is not None and not (
        isinstance(interval, list) and len(interval) == 2 and all(is_int(x) for x in interval)
    ):
        raise InputError("final.interval must be nil or two integers")
    if final["log_statistic"] is not None and not isinstance(final["log_statistic"], float):
        raise InputError("final.log_statistic must be nil or a float")
    for name in ("interval", "log_statistic"):
        if (final[name] is not None) != (name == reports and draws != 0):
            raise InputError(
                f"final.{name} must be "
                + ("set exactly when draws > 0" if name == reports else "nil for this test")
            )
    if graded:
        grades = final["grades"]
        if not (
            isinstance(grades, list)
            and len(grades) == 6
            and all(is_int(n) and n >= 0 for n in grades)  # type: ignore[operator]
            and sum(grades) == draws  # type: ignore[arg-type]
            and sum(grades[0::2]) == successes  # type: ignore[arg-type]
        ):
            raise InputError(
                "final.grades must be six counts [S_1, F_1, S_2, F_2, S_3, F_3] adding up "
                "to draws and, the ones, to successes"
            )


def is_int(value: object) -> bool:
    """Return whether ``value`` is an integer of the data model (a boolean is not one)."""
    return isinstance(value, int) and not isinstance(value, bool)


def check_verdict(
    envelope_json: bytes, arbiter_key: Ed25519PublicKey, describe: DescribeParser
) -> Verdict:
    """Verify a verdict envelope offline and return the parsed verdict (spec §11).

    Steps: (1) parse the envelope strictly; (2) it carries exactly one signature, whose
    key id names the arbiter's key (so no byte of the file can change unnoticed — the
    id is still only a label: step 3 decides); (3) verify the arbiter's signature over
    the PAE with payload type ``verdict``; (4) decode the payload canonically; (5)
    check the schema and the spec version; (6) the payload's ``arbiter`` is that key;
    (7) where the verdict carries a ``filing``, the record's claim key signed a request
    for exactly this claim (:func:`~.filing.check_filing`). ``describe`` parses the
    claim map's Describe map.
    """
    envelope = Envelope.from_json(envelope_json)
    expected_id = key_id(arbiter_key)
    require_sole_signer(envelope, arbiter_key, VERDICT_KIND)
    verdict = parse_verdict(open_envelope(envelope, arbiter_key, VERDICT_KIND), describe)
    if verdict["arbiter"] != expected_id:
        raise SignatureError("the verdict names another arbiter than the key that signed it")
    if verdict.filing is not None:
        assert verdict.claim is not None
        check_filing(verdict.filing, verdict.claim, expected_id, describe)
    return verdict


def final_state(step: Step) -> dict[str, Value]:
    """Return a verdict's ``final`` map for the test's last step (spec §11).

    A graded test's map (spec §7.5) also holds ``grades``, its per-grade counts.
    """
    final: dict[str, Value] = {
        "draws": step.draws,
        "successes": step.successes,
        "interval": list(step.interval) if step.interval is not None else None,
        "log_statistic": step.log_statistic,
    }
    if step.grades is not None:
        final["grades"] = list(step.grades)
    return final


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
) -> dict[str, Value]:
    """Return the verdict payload of spec §11 (``transcript`` is its chain head and count).

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
    return payload
