"""Who files a claim (spec §10.7): the owner's signed claim request, and its trace in a verdict.

An escrow record made under this revision binds the owner's *claim key*, an Ed25519
public key (the log entry's ``claim_key``, §9.2). Every claim on such a record, a start,
a resume or a dry run, carries a *claim request*: an envelope (§8) of kind
``claim-request`` signed by that key over

    {"spec": "0.2", "arbiter": <the arbiter's key id>, "start": <start map>,
     "nonce": <32 bytes, fresh>}

where the start map holds every field of the ``ClaimStart`` message the owner sends
(:data:`START_KEYS`; ``twinaudit.wire.claim_start.start_map`` builds it from the message). The
arbiter checks it (:func:`verify_claim_request`) before it stores, counts or dials
anything, and refuses a nonce it has seen on the record before. A verdict of such a
claim carries the request that filed it, with its signature (:class:`Filing`, the
verdict's ``filing``), so that anyone can check offline that the record's owner asked
for exactly this claim (:func:`check_filing`).

Records escrowed before this revision bind no key: claims on them are not authenticated
(anyone who reads the public log can file one), their verdicts carry no ``filing``, and
their ``earlier_claims`` may count claims anyone filed (§11).
"""

from __future__ import annotations

import hmac
import math
from dataclasses import dataclass, replace
from typing import Any, Final

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from twinaudit.protocol import SPEC_VERSION, limits
from twinaudit.protocol.encoding import Value, check, decode, encode
from twinaudit.protocol.envelope import Envelope, pae, payload_type, sign_envelope, verify_envelope
from twinaudit.protocol.errors import (
    InputError,
    LimitExceededError,
    OracleError,
    ParameterError,
    SignatureError,
    VerificationError,
)
from twinaudit.protocol.keys import key_id, public_key_from_raw, raw_public_key
from twinaudit.protocol.versioning import require_supported

from .claim_map import ClaimMap
from .functions import resolve_score, score_request_from_fields
from .schedule import DEFAULT_WINDOW, default_window_max
from .scores.classifier import ScoreSpec

#: Message kind (spec §8.1) of a signed claim request.
CLAIM_REQUEST_KIND: Final = "claim-request"
#: Length of a claim request's nonce and of a raw Ed25519 public key.
NONCE_BYTES: Final = 32
PUBLIC_KEY_BYTES: Final = 32
SIGNATURE_BYTES: Final = 64
#: Largest canonical claim request payload (a valid one is well under 2 KiB).
MAX_CLAIM_REQUEST_PAYLOAD_BYTES: Final = 4096
#: Largest claim request envelope JSON accepted (checked before parsing any of it).
MAX_CLAIM_REQUEST_ENVELOPE_BYTES: Final = 8192
#: Most values (map keys included) a claim request holds: 4 + 4 keys and values, the
#: start map's 15 and 15, its score's 6 and 6, its test's 3 and 3, the maps, and up to
#: MAX_PROBES probe shapes of 4 values each.
MAX_CLAIM_REQUEST_VALUES: Final = 100

#: Keys of a claim request payload.
REQUEST_KEYS: Final = frozenset({"spec", "arbiter", "start", "nonce"})
#: Keys of the start map: one per field of the ``ClaimStart`` message it mirrors.
START_KEYS: Final = frozenset(
    {
        "record_index",
        "record_root",
        "endpoint",
        "model_name",
        "score",
        "test",
        "tie_rule",
        "max_pairs",
        "query_budget",
        "resume_claim_id",
        "window",
        "window_max",
        "fresh_pairs",
        "dry_run",
        "probes",
    }
)
#: Most probe shapes a dry run may ask for.
MAX_PROBES: Final = 8
#: Keys of the start map's score and test maps (the ``ScoreSpec`` and ``TestSpec`` fields).
START_SCORE_KEYS: Final = frozenset(
    {"function", "k", "perturbation", "knowledge", "statistic", "margin"}
)
START_TEST_KEYS: Final = frozenset({"name", "p", "alpha"})
#: The start map's test keys when the owner names a mixture test's prior (spec §10.7).
START_TEST_KEYS_WITH_PRIOR: Final = START_TEST_KEYS | {"prior"}
#: Keys of a verdict's ``filing`` map (§11).
FILING_KEYS: Final = frozenset({"claim_key", "request", "signature"})

#: The largest value of a start map's unsigned 64-bit fields.
_U64: Final = (1 << 64) - 1
_U32: Final = (1 << 32) - 1


def _text(value: object, what: str) -> str:
    if not isinstance(value, str) or len(value.encode("utf-8")) > limits.MAX_STR_BYTES:
        raise InputError(f"{what} must be text")
    return value


def _uint(value: object, what: str, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= high:
        raise InputError(f"{what} must be an integer in 0..{high}")
    return value


def _float(value: object, what: str) -> float:
    if not isinstance(value, float) or not math.isfinite(value):
        raise InputError(f"{what} must be a finite float")
    return value


def _bool(value: object, what: str) -> bool:
    if not isinstance(value, bool):
        raise InputError(f"{what} must be a boolean")
    return value


def _bytes(value: object, what: str, size: int) -> bytes:
    if not isinstance(value, bytes) or len(value) != size:
        raise InputError(f"{what} must be {size} bytes")
    return value


def _exact(value: object, keys: frozenset[str], what: str) -> dict[str, Any]:
    if not isinstance(value, dict) or set(value) != keys:
        raise InputError(f"{what} must be a map with exactly the keys {sorted(keys)}")
    return value


def _has_key(value: object, key: str) -> bool:
    return isinstance(value, dict) and key in value


def _checked_int(value: Value) -> int:
    """Return a start map's integer (its form already checked)."""
    assert isinstance(value, int)
    return value


def _checked_float(value: Value) -> float:
    """Return a start map's float (its form already checked)."""
    assert isinstance(value, float)
    return value


def check_start_map(value: object) -> dict[str, Value]:
    """Check a start map's keys and types (spec §10.7) and return it.

    Only the form is checked here: the values are the owner's request as sent, which
    the arbiter validates as any claim's parameters (§10.1) once the signature holds.
    """
    start = _exact(value, START_KEYS, "the claim request's start map")
    _uint(start["record_index"], "start.record_index", _U64)
    _bytes(start["record_root"], "start.record_root", limits.HASH_BYTES)
    for name in ("endpoint", "model_name", "tie_rule", "resume_claim_id"):
        _text(start[name], f"start.{name}")
    score = _exact(start["score"], START_SCORE_KEYS, "start.score")
    for name in ("function", "perturbation", "knowledge", "statistic"):
        _text(score[name], f"start.score.{name}")
    _uint(score["k"], "start.score.k", _U32)
    _float(score["margin"], "start.score.margin")
    keys = START_TEST_KEYS_WITH_PRIOR if _has_key(start["test"], "prior") else START_TEST_KEYS
    test = _exact(start["test"], keys, "start.test")
    _text(test["name"], "start.test.name")
    if "prior" in test:
        _text(test["prior"], "start.test.prior")
        if test["prior"] == "":
            raise InputError("start.test.prior is present only when the request names a prior")
    _float(test["p"], "start.test.p")
    _float(test["alpha"], "start.test.alpha")
    for name in ("max_pairs", "query_budget"):
        _uint(start[name], f"start.{name}", _U64)
    for name in ("window", "window_max"):
        _uint(start[name], f"start.{name}", _U32)
    _bool(start["fresh_pairs"], "start.fresh_pairs")
    _bool(start["dry_run"], "start.dry_run")
    probes = start["probes"]
    if not isinstance(probes, list) or len(probes) > MAX_PROBES:
        raise InputError(f"start.probes must be a list of at most {MAX_PROBES} shapes")
    for shape in probes:
        if not isinstance(shape, list) or len(shape) != 3:
            raise InputError("each of start.probes is [height, width, channels]")
        for side in shape:
            _uint(side, "a probe shape's side", _U32)
    return start


@dataclass(frozen=True)
class ClaimRequest:
    """A claim request payload (spec §10.7): for one arbiter, one start map, one nonce."""

    arbiter: str
    start: dict[str, Value]
    nonce: bytes
    spec: str = SPEC_VERSION

    def __post_init__(self) -> None:
        """Check every field's form."""
        require_supported(self.spec, "claim request")
        if not isinstance(self.arbiter, str) or len(self.arbiter) != 64:
            raise InputError("a claim request names its arbiter by key id (64 hex digits)")
        if any(c not in "0123456789abcdef" for c in self.arbiter):
            raise InputError("a claim request names its arbiter by key id (64 hex digits)")
        check_start_map(self.start)
        _bytes(self.nonce, "the claim request's nonce", NONCE_BYTES)

    @property
    def record_index(self) -> int:
        """The escrow record the request is for."""
        index = self.start["record_index"]
        assert isinstance(index, int)
        return index

    @property
    def resume_claim_id(self) -> str:
        """The claim the request resumes, or "" for a new claim."""
        return str(self.start["resume_claim_id"])

    @property
    def dry_run(self) -> bool:
        """Whether the request asks for a dry run (checks only, nothing filed)."""
        return bool(self.start["dry_run"])

    def to_value(self) -> dict[str, Value]:
        """Return the payload map."""
        return {
            "spec": self.spec,
            "arbiter": self.arbiter,
            "start": self.start,
            "nonce": self.nonce,
        }

    def encode(self) -> bytes:
        """Return the canonical encoding of the payload."""
        return encode(self.to_value())


def parse_claim_request(value: Value) -> ClaimRequest:
    """Return the claim request held by a decoded payload map (form checked, no signature)."""
    if isinstance(value, dict) and "spec" in value:
        require_supported(value["spec"], "claim request")
    fields = _exact(value, REQUEST_KEYS, "a claim request")
    return ClaimRequest(
        spec=str(fields["spec"]),
        arbiter=_text(fields["arbiter"], "the claim request's arbiter"),
        start=check_start_map(fields["start"]),
        nonce=_bytes(fields["nonce"], "the claim request's nonce", NONCE_BYTES),
    )


def _decode_request(payload: bytes) -> ClaimRequest:
    """Decode a claim request payload strictly, refusing more values than one holds."""
    values = check(payload, max_bytes=MAX_CLAIM_REQUEST_PAYLOAD_BYTES)
    if values > MAX_CLAIM_REQUEST_VALUES:
        raise LimitExceededError(
            "claim request values (map keys included)", values, MAX_CLAIM_REQUEST_VALUES
        )
    return parse_claim_request(decode(payload, max_bytes=MAX_CLAIM_REQUEST_PAYLOAD_BYTES))


def sign_claim_request(request: ClaimRequest, key: Ed25519PrivateKey) -> bytes:
    """Sign ``request`` with the owner's claim key; return the envelope's DSSE JSON."""
    return sign_envelope(request.encode(), payload_type(CLAIM_REQUEST_KIND), key).to_json()


def verify_claim_request(
    envelope_json: bytes,
    claim_key: Ed25519PublicKey,
    *,
    arbiter: str,
    start: dict[str, Value],
) -> ClaimRequest:
    """Check a claim request as an arbiter must before it stores or dials anything (§10.7).

    Steps: (1) the envelope parses strictly under its size cap and carries exactly one
    signature, labelled with the claim key's id; (2) the signature verifies under the
    record's claim key with payload type ``claim-request``; (3) the payload decodes
    strictly, in a spec version this code speaks, with every field of its form; (4) it
    names this arbiter; (5) its start map is exactly the one of the message received.
    The nonce's freshness (step 6) is the arbiter's store's to check.

    Raises:
        InputError: a malformed envelope or payload (``LimitExceededError`` above a cap).
        SignatureError: a signature that is not the record's claim key's.
        VerificationError: a request for another arbiter, or for other parameters.

    """
    if not isinstance(envelope_json, bytes | bytearray):
        raise InputError("a claim request is the bytes of an envelope")
    if len(envelope_json) > MAX_CLAIM_REQUEST_ENVELOPE_BYTES:
        raise LimitExceededError(
            "claim request envelope size", len(envelope_json), MAX_CLAIM_REQUEST_ENVELOPE_BYTES
        )
    # 1. Strict form; one signature labelled with the key that must have made it.
    envelope = Envelope.from_json(bytes(envelope_json))
    expected_id = key_id(claim_key)
    if len(envelope.signatures) != 1 or envelope.signatures[0].keyid != expected_id:
        raise SignatureError(
            "a claim request carries exactly one signature, labelled with the key id of the "
            "claim key the escrow record binds"
        )
    # 2. The record's claim key signed it, as a claim request.
    payload = verify_envelope(envelope, claim_key, payload_type(CLAIM_REQUEST_KIND))
    # 3. Strict decoding; every field of its form.
    request = _decode_request(payload)
    # 4. For this arbiter, and no other (a request is never good at two arbiters).
    if request.arbiter != arbiter:
        raise VerificationError(
            f"the claim request is for arbiter {request.arbiter}, not this one ({arbiter})"
        )
    # 5. For exactly the parameters received.
    if encode(request.start) != encode(check_start_map(start)):
        raise VerificationError(
            "the claim request's start map differs from the claim received: the owner's "
            "signature covers other parameters"
        )
    return request


@dataclass(frozen=True)
class Filing:
    """A verdict's ``filing`` (spec §11): the claim request that filed the claim, signed.

    ``claim_key`` is the raw public key the record binds, ``request`` the request that
    started the claim (not a later resume) and ``signature`` the claim key's signature
    over its envelope's pre-authentication encoding.
    """

    claim_key: bytes
    request: ClaimRequest
    signature: bytes

    @classmethod
    def from_envelope(cls, envelope_json: bytes, claim_key: Ed25519PublicKey) -> Filing:
        """Return the filing of an already verified claim request envelope."""
        envelope = Envelope.from_json(bytes(envelope_json))
        if len(envelope.signatures) != 1:
            raise InputError("a claim request carries exactly one signature")
        return cls(
            raw_public_key(claim_key), _decode_request(envelope.payload), envelope.signatures[0].sig
        )

    def to_value(self) -> dict[str, Value]:
        """Return the verdict's ``filing`` map."""
        return {
            "claim_key": self.claim_key,
            "request": self.request.to_value(),
            "signature": self.signature,
        }

    def verify_signature(self) -> None:
        """Check the claim key's signature over the request (spec §8.1's PAE)."""
        message = pae(payload_type(CLAIM_REQUEST_KIND), self.request.encode())
        try:
            public_key_from_raw(self.claim_key).verify(self.signature, message)
        except InvalidSignature:
            raise SignatureError(
                "the verdict's filing is not signed by the claim key it names"
            ) from None


def parse_filing(value: Value) -> Filing:
    """Check a verdict's ``filing`` map's form (spec §11) and return it; no signature checked."""
    fields = _exact(value, FILING_KEYS, "the verdict's filing")
    claim_key = _bytes(fields["claim_key"], "filing.claim_key", PUBLIC_KEY_BYTES)
    try:
        public_key_from_raw(claim_key)
    except ValueError:
        raise InputError("filing.claim_key is not an Ed25519 public key") from None
    return Filing(
        claim_key=claim_key,
        request=parse_claim_request(fields["request"]),
        signature=_bytes(fields["signature"], "filing.signature", SIGNATURE_BYTES),
    )


def check_filing(filing: Filing, claim: ClaimMap, arbiter: str) -> None:
    """Check that ``filing`` asked for exactly the claim a verdict records (spec §11 step 7).

    The signature verifies under ``filing.claim_key``; the request names the verdict's
    arbiter, is a start (no resume, no dry run, no probes) of a claim on the claim map's record
    (index and root), with its model endpoint and name, its test (name, ``p``, and the
    paper's test's ``alpha``, ``p/2`` where the request left it 0, and the mixture
    test's prior where the request names one), tie rule, limits and
    window schedule (the request's 0 read as the default), no exclusions unless it asked
    for fresh pairs, and a score that resolves, against the recorded Describe map, to the
    claim map's (§10.1).

    Raises:
        SignatureError: the signature does not verify under the named claim key.
        VerificationError: the request asked for something other than this claim.

    """
    filing.verify_signature()
    request, start = filing.request, filing.request.start
    if request.arbiter != arbiter:
        raise VerificationError("the filing request names another arbiter than the verdict's")
    if start["resume_claim_id"] != "" or start["dry_run"] or start["probes"]:
        # A start with probes is a dry run's (§10.7): no arbiter files one.
        raise VerificationError("a verdict's filing is the request that started the claim")
    score, test = start["score"], start["test"]
    assert isinstance(score, dict)
    assert isinstance(test, dict)
    window = _checked_int(start["window"]) or DEFAULT_WINDOW
    window_max = _checked_int(start["window_max"]) or default_window_max(window)
    p, asked_alpha = test["p"], test["alpha"]
    alpha = claim.test_params.get("alpha")
    if alpha is not None and isinstance(p, float):
        asked_alpha = asked_alpha or p / 2  # the paper's test's default (§7.2.1)
    checks = {
        "record index": (start["record_index"], claim.record_index),
        "model endpoint": (start["endpoint"], claim.endpoint),
        "model name": (start["model_name"], claim.model_name),
        "test": (test["name"], claim.test_name),
        "p": (p, claim.test_params.get("p")),
        "alpha": (asked_alpha if alpha is not None else None, alpha),
        "tie rule": (start["tie_rule"], claim.tie_rule.value),
        "max_pairs": (start["max_pairs"], claim.max_pairs),
        "query budget": (start["query_budget"], claim.query_budget),
        "window": (window, claim.window),
        "window_max": (window_max, claim.window_max),
    }
    if "prior" in test:  # a request without one took the arbiter's default prior (§7.3.1)
        checks["prior"] = (test["prior"], claim.test_params.get("prior"))
    for what, (asked, recorded) in checks.items():
        if asked != recorded or type(asked) is not type(recorded):
            raise VerificationError(
                f"the filing request asked for {what} {asked!r}; the claim map records {recorded!r}"
            )
    root = start["record_root"]
    assert isinstance(root, bytes)
    if not hmac.compare_digest(root, claim.record_root):
        raise VerificationError("the filing request names another record root")
    if claim.excluded and not start["fresh_pairs"]:
        raise VerificationError("the claim excludes pairs its filing request did not ask to")
    try:
        asked_score = score_request_from_fields(
            str(score["function"]),
            _checked_int(score["k"]),
            str(score["perturbation"]),
            str(score["knowledge"]),
            str(score["statistic"]),
            margin=_checked_float(score["margin"]),
        )
        resolved = resolve_score(asked_score, claim.oracle_info)
    except (ParameterError, InputError, OracleError) as exc:
        raise VerificationError(f"the filing request's score is not a valid one: {exc}") from None
    if isinstance(resolved, ScoreSpec) and isinstance(claim.score, ScoreSpec):
        # A request never names the arithmetic: the claim's is the arbiter's (§10.3.1), and
        # a claim started before it has none (§1.2).
        resolved = replace(resolved, arithmetic=claim.score.arithmetic)
    if encode(resolved.to_value()) != encode(claim.score.to_value()):
        raise VerificationError("the filing request asked for another score than the claim map's")
