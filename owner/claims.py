"""The owner's claim as a library call: from her vault to a checked verdict and its transcript.

``twinaudit owner claim`` is these two calls and its printing:

1. :func:`claim_params` reads the vault (its escrow receipt, the arbiter it was escrowed
   with, its labels), picks the score (:func:`~.claim_client.choose_score`) and returns
   the claim's parameters, checked as the arbiter will check them (spec §10.1), before
   anything is sent;
2. :func:`file_claim` files them on the arbiter's channel, signed with the vault's claim
   key on a record that binds one (§10.7), answers the opening requests from the vault
   (§10.2 step 4), checks the signed verdict against the arbiter's key (§11) and fetches
   its transcript (§12).

From the command line to the wire the parameters take two forms: these
:class:`~twinaudit.protocol.claim.params.ClaimParams`, and the ``ClaimStart`` message
(:func:`twinaudit.wire.claim_start.to_claim_start`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import grpc
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from twinaudit.protocol.claim.params import ClaimParams
from twinaudit.protocol.claim.schedule import DEFAULT_WINDOW
from twinaudit.protocol.claim.verdict import Verdict, check_verdict
from twinaudit.protocol.errors import InputError, ParameterError
from twinaudit.protocol.keys import key_id
from twinaudit.protocol.stats.base import TiePolicy
from twinaudit.protocol.stats.paper_test import PaperTest
from twinaudit.wire.transport import CLAIM_DEADLINE_S
from twinaudit.wire.verifier.v1 import verifier_pb2 as pb
from twinaudit.wire.verifier.v1 import verifier_pb2_grpc as pb_grpc

from .claim_client import ScoreChoice, choose_score, run_claim
from .vault import Vault

#: How long fetching the verdict's transcript may take, once the claim has ended.
TRANSCRIPT_DEADLINE_S = 60.0


@dataclass(frozen=True)
class FiledClaim:
    """A claim the arbiter decided: its id, its checked verdict and what anyone replays."""

    claim_id: str
    verdict: Verdict
    #: The signed verdict as the arbiter sent it (the file ``verdict.json``).
    signed: bytes
    #: The claim's transcript (``transcript.bin``, spec §12).
    transcript: bytes


def check_prior(test: str, prior: str | None) -> None:
    """Refuse a prior named for a test that has none (the paper's), before any other check.

    Raises:
        ParameterError: ``prior`` is set and ``test`` is the paper's test.

    """
    if prior is not None and test == PaperTest.name:
        raise ParameterError(f"--prior names a mixture test's prior; --test {test} has none")


def claim_params(
    vault: Vault,
    arbiter_key: Ed25519PublicKey,
    oracle: str,
    *,
    score_function: str | None = None,
    k: int | None = None,
    perturbation: str | None = None,
    knowledge: str | None = None,
    statistic: str | None = None,
    margin: float | None = None,
    model_name: str = "model",
    test: str = "mixture-graded",
    p: float = 0.05,
    alpha: float | None = None,
    prior: str | None = None,
    tie_rule: str = "skip",
    max_pairs: int = 0,
    query_budget: int = 0,
    window: int = 0,
    window_max: int = 0,
    fresh_pairs: bool = False,
) -> tuple[ClaimParams, ScoreChoice]:
    """Return the parameters of a claim on ``vault``'s record, and the score chosen.

    The score's fields left None take :func:`~.claim_client.choose_score`'s defaults for
    the vault's items and labels; ``window`` 0 is the default window. ``oracle`` is the
    address the arbiter dials.

    Raises:
        InputError: the vault is not escrowed, or was escrowed with another arbiter than
            ``arbiter_key``'s; a score option the function does not take.
        ParameterError: a parameter outside its domain (a prior for the paper's test).

    """
    check_prior(test, prior)
    receipt = vault.receipt
    if receipt is None or vault.arbiter_public_key is None:
        raise InputError(f"{vault.path} is not escrowed yet: run twinaudit owner escrow first")
    if key_id(arbiter_key) != key_id(vault.arbiter_public_key):
        raise InputError("the vault was escrowed with another arbiter (keys differ)")
    labels = vault.labels()
    score = choose_score(
        vault.item_kind,
        score_function,
        k=k,
        perturbation=perturbation,
        knowledge=knowledge,
        statistic=statistic,
        margin=margin,
        has_labels=bool(labels) and all(label is not None for label in labels),
    )
    assert score.spec is not None  # choose_score checked it
    params = ClaimParams(
        record_index=receipt.entry.index,
        record_root=vault.root,
        endpoint=oracle,
        model_name=model_name,
        score=score.spec,
        test_name=test,
        p=p,
        alpha=alpha,
        prior=prior,
        tie_rule=TiePolicy(tie_rule),
        max_pairs=max_pairs,
        query_budget=query_budget,
        window=window or DEFAULT_WINDOW,
        window_max=window_max,
        fresh_pairs=fresh_pairs,
    )
    return params, score


def file_claim(
    channel: grpc.Channel,
    vault: Vault,
    params: ClaimParams,
    arbiter_key: Ed25519PublicKey,
    *,
    resume_claim_id: str = "",
    on_progress: Callable[[pb.Progress], None] | None = None,
    on_accepted: Callable[[str], None] | None = None,
    timeout_s: float = CLAIM_DEADLINE_S,
) -> FiledClaim:
    """File the claim ``params`` on ``vault``'s record; return its checked verdict.

    The claim request is signed with the vault's claim key where the record binds one
    (spec §10.7), for the arbiter whose key is ``arbiter_key``; the verdict must verify
    under that key and be a valid verdict (§11) before it is returned, with the
    transcript the arbiter stored (§12). ``resume_claim_id`` resumes, or runs again, a
    claim of this vault (§10.7). ``on_accepted(claim_id)`` runs once the arbiter filed
    the claim: from then on it counts, whatever happens.

    Raises:
        grpc.RpcError: the arbiter refused or failed the claim (its status and message).
        TwinauditError: the verdict does not verify, or is not a valid verdict.

    """
    claim_key = vault.claim_key() if vault.record_binds_claim_key else None
    outcome = run_claim(
        channel,
        params,
        vault.opening,
        claim_key=claim_key,
        arbiter=key_id(arbiter_key),
        on_progress=on_progress,
        on_accepted=on_accepted,
        resume_claim_id=resume_claim_id,
        timeout_s=timeout_s,
    )
    verdict = check_verdict(outcome.verdict, arbiter_key)
    stored = pb_grpc.VerifierStub(channel).GetVerdict(  # type: ignore[no-untyped-call]
        pb.GetVerdictRequest(claim_id=outcome.claim_id), timeout=TRANSCRIPT_DEADLINE_S
    )
    return FiledClaim(outcome.claim_id, verdict, outcome.verdict, bytes(stored.transcript))


__all__ = ["TRANSCRIPT_DEADLINE_S", "FiledClaim", "check_prior", "claim_params", "file_claim"]
