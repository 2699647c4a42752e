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


def audit_model(workspace: FoundationWorkspace, model: FoundationModel) -> dict[str, object]:
    """File the owner's claim against ``model``; return the result (with the model's fields)."""
    experiment = model.experiment
    result = run_claim(
        workspace.vault(experiment),
        key=model.audit_key,
        model_name=model.name,
        score=experiment.score(),
        test=TEST,
        p=P,
        oracle=oracle_for(model, workspace.load_model(model)),
    )
    return {
        "model": model.name,
        "kind": experiment.kind,
        "variant": model.variant,
        "seed": experiment.seed,
        "n_train": experiment.sizes.n_train,
        **result,
    }


def run_missing(
    workspace: FoundationWorkspace,
    experiments: Sequence[Experiment],
    log: AuditLog,
    say: Callable[[str], None],
) -> None:
    """Audit every model of ``experiments`` whose result is not in ``log`` (one torch thread)."""
    todo = [m for e in experiments for m in e.models if m.audit_key not in log.results]
    if not todo:
        return
    say(f"auditing: {len(todo)} claims")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        for model in todo:
            result = audit_model(workspace, model)
            log.add(result)
            say(
                f"  {model.name}: {result['decision']}, pairs opened "
                f"{result['pairs_opened']}/{result['n_pairs']}, successes "
                f"{result['successes']}/{result['draws']}, {result['seconds']} s"
            )
    finally:
        torch.set_num_threads(threads)
