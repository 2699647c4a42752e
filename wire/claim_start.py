"""The claim parameters on the wire: ``ClaimParams`` (spec §10.1) ⇄ ``ClaimStart``.

The owner's client sends a claim's parameters as a ``twinaudit.verifier.v1.ClaimStart``
(:func:`to_claim_start`); the verifier reads them back (:func:`params_from_claim_start`)
and checks them as spec §10.1 says. These two functions are the only place the
parameters change form between the owner's command line and the claim map.
"""

from __future__ import annotations

from twinaudit.protocol import SPEC_VERSION
from twinaudit.protocol.claim.filing import check_start_map
from twinaudit.protocol.claim.functions import score_request_from_fields
from twinaudit.protocol.claim.params import ClaimParams
from twinaudit.protocol.claim.schedule import DEFAULT_WINDOW
from twinaudit.protocol.encoding import Value
from twinaudit.protocol.errors import InputError
from twinaudit.protocol.stats.base import TiePolicy
from twinaudit.protocol.versioning import require_supported
from twinaudit.wire.verifier.v1 import verifier_pb2 as pb

#: The tie rules a ClaimStart may name (spec §7.1).
TIE_RULES = tuple(rule.value for rule in TiePolicy)


def to_claim_start(params: ClaimParams, resume_claim_id: str = "") -> pb.ClaimStart:
    """Return the ClaimStart message of ``params`` (resuming ``resume_claim_id`` if given)."""
    score = pb.ScoreSpec()
    for name, value in params.score.to_fields().items():  # the fields the score takes
        setattr(score, name, value)
    return pb.ClaimStart(
        spec_version=SPEC_VERSION,
        record_index=params.record_index,
        record_root=params.record_root,
        model=pb.ModelRef(oracle_endpoint=params.endpoint, name=params.model_name),
        score=score,
        test=pb.TestSpec(
            name=params.test_name, p=params.p, alpha=params.alpha or 0.0, prior=params.prior or ""
        ),
        tie_rule=params.tie_rule.value,
        max_pairs=params.max_pairs,
        query_budget=params.query_budget,
        resume_claim_id=resume_claim_id,
        window=params.window,
        window_max=params.window_max,
        fresh_pairs=params.fresh_pairs,
    )


def params_from_claim_start(start: pb.ClaimStart) -> ClaimParams:
    """Validate a ClaimStart and return the claim parameters.

    A knowledge word in the score fields stays a word here; the claim resolves it when
    it starts, from the oracle's description (spec §10.2 step 1). Unset ``alpha``,
    ``window`` and ``window_max`` (0) take their defaults, an unset ``prior`` ("") the
    mixture tests' default prior.
    """
    require_supported(start.spec_version, "claim")
    if start.tie_rule not in TIE_RULES:
        raise InputError(f"unknown tie rule {start.tie_rule!r}")
    if not start.model.oracle_endpoint:
        raise InputError("the claim names no oracle endpoint")
    return ClaimParams(
        record_index=start.record_index,
        record_root=bytes(start.record_root),
        endpoint=start.model.oracle_endpoint,
        model_name=start.model.name,
        score=score_request_from_fields(
            start.score.function,
            start.score.k,
            start.score.perturbation,
            start.score.knowledge,
            start.score.statistic,
            margin=start.score.margin,
        ),
        test_name=start.test.name,
        p=start.test.p,
        alpha=start.test.alpha or None,
        prior=start.test.prior or None,
        tie_rule=TiePolicy(start.tie_rule),
        max_pairs=start.max_pairs,
        query_budget=start.query_budget,
        window=start.window or DEFAULT_WINDOW,
        window_max=start.window_max,
        fresh_pairs=start.fresh_pairs,
    )


def start_map(start: pb.ClaimStart) -> dict[str, Value]:
    """Return the start map of a ClaimStart: the fields its claim request signs (spec §10.7).

    Every field but ``spec_version`` and ``authorization`` itself, as sent (unset fields
    as their proto3 defaults), so that the owner who sends a message and the arbiter who
    receives it build the same map; the test's ``prior`` only where it is set, so that a
    start without one has the map it had before the field existed.
    """
    probes: list[Value] = [[s.height, s.width, s.channels] for s in start.probes]
    test: dict[str, Value] = {
        "name": start.test.name,
        "p": float(start.test.p),
        "alpha": float(start.test.alpha),
    }
    if start.test.prior:
        test["prior"] = start.test.prior
    return check_start_map(
        {
            "record_index": start.record_index,
            "record_root": bytes(start.record_root),
            "endpoint": start.model.oracle_endpoint,
            "model_name": start.model.name,
            "score": {
                "function": start.score.function,
                "k": start.score.k,
                "perturbation": start.score.perturbation,
                "knowledge": start.score.knowledge,
                "statistic": start.score.statistic,
                "margin": float(start.score.margin),
            },
            "test": test,
            "tie_rule": start.tie_rule,
            "max_pairs": start.max_pairs,
            "query_budget": start.query_budget,
            "resume_claim_id": start.resume_claim_id,
            "window": start.window,
            "window_max": start.window_max,
            "fresh_pairs": start.fresh_pairs,
            "dry_run": start.dry_run,
            "probes": probes,
        }
    )
