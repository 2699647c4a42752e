"""Audit the foundation models in-process: one claim per model, with the verifier's engine.

Each model is served by the oracle ``twinaudit oracle serve --kind`` runs for its
type — :class:`~twinaudit.practitioner.torch_encoder.TorchEncoderOracle` (the SimCLR
backbone), :class:`~twinaudit.practitioner.torch_lm.TorchLanguageModelOracle` (byte
tokenizer with BOS), :class:`~twinaudit.practitioner.torch_encoder.TorchImageTextOracle`
(:class:`~evaluation.foundation.captions.WordTokenizer`) — and the claim is run by
:func:`evaluation.audit.run_claim`, the classifier evaluation's own driver of
:class:`twinaudit.verifier.claim.ClaimSession`. Results go to the same kind of append-only
:class:`~evaluation.audit.AuditLog`, keyed by
:attr:`~evaluation.foundation.specs.FoundationModel.audit_key`.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path

import torch

from twinaudit.practitioner.tokenizer import ByteTokenizer
from twinaudit.practitioner.torch_encoder import TorchEncoderOracle, TorchImageTextOracle
from twinaudit.practitioner.torch_lm import TorchLanguageModelOracle
from twinaudit.protocol.oracles.base import Oracle

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
    *,
    workers: int = 1,
) -> None:
    """Run every claim of ``experiments`` whose result is not in ``log``.

    First the owner's claim against each model, then the null check's claims against
    the models that never saw her data (:data:`~.specs.NULL_DRAWS` fresh arbiter
    randomness draws each). Within each phase the claims are grouped by model; with
    ``workers`` > 1 the groups run in that many worker processes (one torch thread
    each; the owner's vaults must exist) and each group's results are appended here as
    it finishes, so an interrupted run keeps every finished group.
    """
    models = [m for e in experiments for m in e.models]
    owner = {m: [0] for m in models if m.audit_key not in log.results}
    nulls = {
        m: draws
        for m in models
        if (draws := [d for d, k in enumerate(m.null_keys, start=1) if k not in log.results])
    }
    total = len(owner) + sum(map(len, nulls.values()))
    if not total:
        return
    say(f"auditing: {total} claims, {min(workers, max(len(owner), len(nulls)))} model(s) at a time")
    for groups in (owner, nulls):
        for model, results in _run_groups(workspace, groups, workers):
            for result in results:
                log.add(result)
            for result in results:
                if result["rho_draw"] == 0:  # the null check's claims are summarised below
                    say(
                        f"  {model.name}: {result['decision']}, pairs opened "
                        f"{result['pairs_opened']}/{result['n_pairs']}, successes "
                        f"{result['successes']}/{result['draws']}, {result['seconds']} s"
                    )
    found = [log.results[k] for m in models for k in m.null_keys if k in log.results]
    if found:
        detected = sum(r["decision"] == "detected" for r in found)
        say(f"  null check: {detected}/{len(found)} claims detected (bound p = {P} per claim)")


def _run_groups(
    workspace: FoundationWorkspace,
    groups: Mapping[FoundationModel, Sequence[int]],
    workers: int,
) -> Iterator[tuple[FoundationModel, list[dict[str, object]]]]:
    """Yield each model of ``groups`` with the results of its claims (the draws given)."""
    if not groups:
        return
    if workers <= 1:
        threads = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            for model, draws in groups.items():
                yield model, _audit_draws(workspace, model, draws)
        finally:
            torch.set_num_threads(threads)
        return
    context = multiprocessing.get_context("spawn")
    with _one_thread_children(), ProcessPoolExecutor(workers, mp_context=context) as pool:
        futures = {
            pool.submit(_audit_worker, workspace.root, model, list(draws)): model
            for model, draws in groups.items()
        }
        for future in as_completed(futures):
            yield futures[future], future.result()


@contextlib.contextmanager
def _one_thread_children() -> Iterator[None]:
    """Start worker processes with one BLAS/OpenMP thread each (numpy reads it at import).

    Workers already fill the cores; a BLAS that starts threads of its own in each of
    them competes with the others (the encoder score's matrix products ran several
    times slower so). The parent's environment is restored afterwards.
    """
    names = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")
    saved = {name: os.environ.get(name) for name in names}
    os.environ.update(dict.fromkeys(names, "1"))
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _audit_draws(
    workspace: FoundationWorkspace, model: FoundationModel, draws: Sequence[int]
) -> list[dict[str, object]]:
    """Load ``model`` once and file its claims under each of ``draws``."""
    net = workspace.load_model(model)
    return [audit_model(workspace, model, net, rho_draw=d) for d in draws]


def _audit_worker(
    root: Path, model: FoundationModel, draws: Sequence[int]
) -> list[dict[str, object]]:
    """Run one model's claims in a worker process (one torch thread)."""
    torch.set_num_threads(1)
    return _audit_draws(FoundationWorkspace(root), model, draws)
