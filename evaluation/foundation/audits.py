"""Audit the foundation models in-process: one claim per model, with the verifier's engine.

Each model is served by the oracle ``twinaudit oracle serve --kind`` runs for its
type — :class:`~verifier.oracles.torch_encoder.TorchEncoderOracle` (the SimCLR
backbone), :class:`~verifier.oracles.torch_lm.TorchLanguageModelOracle` (byte
tokenizer with BOS), :class:`~verifier.oracles.torch_encoder.TorchImageTextOracle`
(:class:`~evaluation.foundation.captions.WordTokenizer`) — and the claim is run by
:func:`evaluation.audit.run_claim`, the classifier evaluation's own driver of
:class:`verifier.claim.ClaimSession`. Results go to the same kind of append-only
:class:`~evaluation.audit.AuditLog`, keyed by
:attr:`~evaluation.foundation.specs.FoundationModel.audit_key`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

from verifier.oracles.base import Oracle
from verifier.oracles.tokenizer import ByteTokenizer
from verifier.oracles.torch_encoder import TorchEncoderOracle, TorchImageTextOracle
from verifier.oracles.torch_lm import TorchLanguageModelOracle

from ..audit import AuditLog, run_claim
from .build import FoundationWorkspace
from .captions import WordTokenizer
from .models import SimClr
from .specs import TEST, Experiment, FoundationModel, P


def oracle_for(model: FoundationModel, net: torch.nn.Module) -> Oracle:
    """Return the oracle that serves ``net``, the trained ``model``."""
    kind = model.experiment.kind
    if kind == "encoder":
        if not isinstance(net, SimClr):
            raise TypeError("an encoder experiment's model is a SimClr")
        return TorchEncoderOracle(net.encoder, model_name=model.name)
    if kind == "lm":
        return TorchLanguageModelOracle(net, ByteTokenizer(), model_name=model.name)
    return TorchImageTextOracle(net, WordTokenizer(), model_name=model.name)


def audit_model(
    workspace: FoundationWorkspace,
    model: FoundationModel,
    net: torch.nn.Module | None = None,
    rho_draw: int = 0,
) -> dict[str, object]:
    """File the owner's claim against ``model``; return the result (with the model's fields).

    ``rho_draw`` n ≥ 1 audits under the n-th fresh arbiter randomness instead of the
    one the items were published with (the null check); ``net`` is the loaded model,
    when the caller has it.
    """
    experiment = model.experiment
    result = run_claim(
        workspace.vault(experiment),
        key=model.null_key(rho_draw),
        model_name=model.name,
        score=experiment.score(),
        test=TEST,
        p=P,
        oracle=oracle_for(model, net if net is not None else workspace.load_model(model)),
        rho_draw=rho_draw,
    )
    return {
        "model": model.name,
        "kind": experiment.kind,
        "variant": model.variant,
        "seed": experiment.seed,
        "n_train": experiment.sizes.n_train,
        "rho_draw": rho_draw,
        **result,
    }


def run_missing(
    workspace: FoundationWorkspace,
    experiments: Sequence[Experiment],
    log: AuditLog,
    say: Callable[[str], None],
) -> None:
    """Run every claim of ``experiments`` whose result is not in ``log`` (one torch thread).

    First the owner's claim against each model, then the null check's claims against
    the models that never saw her data (:data:`~.specs.NULL_DRAWS` fresh arbiter
    randomness draws each).
    """
    models = [m for e in experiments for m in e.models]
    todo = [(m, 0) for m in models if m.audit_key not in log.results]
    todo += [
        (m, d)
        for m in models
        for d, key in enumerate(m.null_keys, start=1)
        if key not in log.results
    ]
    if not todo:
        return
    say(f"auditing: {len(todo)} claims")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    loaded: tuple[FoundationModel, torch.nn.Module] | None = None
    try:
        for model, draw in todo:
            if loaded is None or loaded[0] != model:
                loaded = (model, workspace.load_model(model))
            result = audit_model(workspace, model, loaded[1], rho_draw=draw)
            log.add(result)
            if draw:
                continue  # the null check's claims are summarised in the results
            say(
                f"  {model.name}: {result['decision']}, pairs opened "
                f"{result['pairs_opened']}/{result['n_pairs']}, successes "
                f"{result['successes']}/{result['draws']}, {result['seconds']} s"
            )
    finally:
        torch.set_num_threads(threads)
    nulls = [log.results[k] for m in models for k in m.null_keys if k in log.results]
    if nulls:
        found = sum(r["decision"] == "detected" for r in nulls)
        say(f"  null check: {found}/{len(nulls)} claims detected (bound p = {P} per claim)")
