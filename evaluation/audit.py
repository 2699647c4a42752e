"""Run the evaluation's claims in-process, with the verifier's own claim engine.

Each audit is a :class:`twinaudit.verifier.claim.ClaimSession` — the code the arbiter's
service runs — fed the owner's openings from her vault and querying the model
through :class:`twinaudit.practitioner.torch_oracle.TorchClassifierOracle`, the code
``twinaudit oracle serve`` runs. Only the transport is left out (the demo and the
tests exercise it); the pairs opened, queries, indicators and decisions are those a
served claim would produce with the same arbiter randomness and nonce.

Results are appended, one JSON line per audit, to ``audits.jsonl`` in the work
directory and looked up by :attr:`evaluation.specs.Job.key`, so an audit is never
run twice.
"""

from __future__ import annotations

import hashlib
import json
import multiprocessing
import os
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path

import torch

from twinaudit.owner.vault import Vault
from twinaudit.practitioner.defences import wrap
from twinaudit.practitioner.torch_oracle import TorchClassifierOracle
from twinaudit.protocol.claim.functions import AnyScoreSpec
from twinaudit.protocol.claim.scores.classifier import ScoreSpec
from twinaudit.protocol.commitment import PairOpening
from twinaudit.protocol.oracles.base import ClassifierOracle, Oracle
from twinaudit.verifier.claim import ClaimParams, ClaimRecord, ClaimSession

from .build import Workspace, die_with_parent, rho_of
from .photos import MODEL_INPUT, ResizingOracle, fits_at_arbiter, is_photo_marker
from .specs import Job

#: The escrow time written into the in-process claim records (not used by the audit).
RECORD_TIME = "2026-01-01T00:00:00Z"


def claim_nonce(job: Job) -> bytes:
    """Return the claim nonce of ``job`` (a real arbiter draws it fresh per claim)."""
    return nonce_of(job.key)


def nonce_of(key: str) -> bytes:
    """Return the claim nonce of the claim whose result is keyed ``key``."""
    return hashlib.sha256(f"twinaudit evaluation claim\x00{key}".encode()).digest()


def run_claim(
    vault: Vault,
    *,
    key: str,
    model_name: str,
    score: AnyScoreSpec,
    test: str,
    p: float,
    oracle: Oracle,
    rho_draw: int = 0,
    record_index: int = 0,
    excluded: Sequence[int] = (),
    keep_opened: bool = False,
) -> dict[str, object]:
    """File one claim with ``vault``'s pairs against ``oracle``; return what its verdict says.

    The arbiter randomness is :func:`~evaluation.build.rho_of` the vault (its
    ``rho_draw``-th fresh draw when not 0) and the claim nonce is derived from ``key``
    (the result's key), so a rerun is the same claim. ``record_index`` is the vault's
    escrow record on the arbiter (several owners' records on one arbiter: the owners
    table). ``excluded`` are pairs earlier claims opened, which this claim skips (spec
    §10.2 step 2: a second claim on fresh pairs, the unlearning rows); with
    ``keep_opened`` the result's ``opened`` lists the pairs the claim opened.
    """
    rho = rho_of(vault, rho_draw)
    record = ClaimRecord(record_index, vault.root, len(vault), vault.item_kind, rho, RECORD_TIME)
    params = ClaimParams(
        record_index=record_index,
        record_root=vault.root,
        endpoint="in-process",
        model_name=model_name,
        score=score,
        test_name=test,
        p=p,
        # Constant requests of 8 pairs, as every table was measured with (spec 0.1's
        # only schedule): Q is the pairs opened, a multiple of 8 (docs/results.md).
        window=8,
        window_max=8,
    )
    nonce = nonce_of(key)
    began = time.monotonic()
    session = ClaimSession.start("evaluation", record, params, oracle, nonce, excluded=excluded)
    openings = ChunkOpenings(vault)
    while indices := session.next_request():
        progress = session.submit([openings.take(i) for i in indices])
    step = progress.step
    return {
        "key": key,
        "decision": step.decision.value,
        "stop": progress.stop,
        "pairs_opened": progress.pairs_opened,
        "n_pairs": len(vault),
        "draws": step.draws,
        "successes": step.successes,
        "queries": progress.queries,
        "log_statistic": step.log_statistic,
        "indicators": session.indicators,
        "seconds": round(time.monotonic() - began, 2),
        **({"opened": list(session.opened)} if keep_opened else {}),
    }


class ChunkOpenings:
    """A claim's openings of ``vault``'s pairs, read a chunk at a time.

    The vault keeps one chunk in memory, and a claim opens pairs in a shuffled order, so
    reading each opening alone reads (and hashes) a chunk per pair: for a photo vault,
    64 pairs of 1 MP photos, 400 MB a pair opened. Here the first pair asked of a chunk
    reads the openings of all its pairs; each is handed out once and let go. The
    openings are the vault's own (:meth:`~twinaudit.owner.vault.Vault.pair_opening`).
    """

    def __init__(self, vault: Vault) -> None:
        """Serve the openings of ``vault``."""
        self._vault = vault
        self._spans = vault.chunk_spans()
        self._ready: dict[int, tuple[int, PairOpening, list[bytes]]] = {}

    def take(self, index: int) -> tuple[int, PairOpening, list[bytes]]:
        """Return pair ``index``'s (index, opening, inclusion proof)."""
        if index not in self._ready:
            start, stop = next((a, b) for a, b in self._spans if a <= index < b)
            for i in range(start, stop):
                self._ready[i] = (i, self._vault.pair_opening(i), self._vault.inclusion_proof(i))
        return self._ready.pop(index)


def run_audit(
    workspace: Workspace, job: Job, model: torch.nn.Module, device: str = "cpu"
) -> dict[str, object]:
    """File ``job``'s claim against ``model`` (run on ``device``); return what its verdict says.

    The model answers through the audit's output defence, when it names one
    (:mod:`twinaudit.practitioner.defences`: the host's, not the arbiter's); with a photo
    vault's pairs, behind the practitioner's resize
    (:class:`~evaluation.photos.ResizingOracle`), or, for a model the arbiter fits
    queries to (:func:`~evaluation.photos.fits_at_arbiter`), declaring its input shape
    so that the claim fits every query by the spec's rule, as it does by default.
    """
    audit = job.audit
    photo = is_photo_marker(job.vault.marker)
    fit = photo and fits_at_arbiter(job.model.trainer)
    served: ClassifierOracle = TorchClassifierOracle(
        model,
        n_classes=10,
        probe_shape=MODEL_INPUT if fit else None,
        model_name=job.model.name,
        device=device,
    )
    if photo and not fit:
        served = ResizingOracle(served)  # her deployment resizes each query to its input
    result = run_claim(
        workspace.vault(job.vault),
        key=job.key,
        model_name=job.model.name,
        score=ScoreSpec(
            k=audit.k,
            perturbation=audit.perturbation,
            knowledge=audit.knowledge,
            statistic=audit.statistic,
            margin=audit.margin,
        ),
        test=audit.test,
        p=audit.p,
        oracle=wrap(served, [audit.defence] if audit.defence else []),
        rho_draw=audit.rho_draw,
    )
    return {"model": job.model.name, "vault": job.vault.name, "audit": audit.name, **result}


class AuditLog:
    """The append-only file of audit results, keyed by job."""

    def __init__(self, path: Path) -> None:
        """Read the results already in ``path`` (a torn last line is ignored)."""
        self.path = path
        self.results: dict[str, dict[str, object]] = {}
        if path.exists():
            for line in path.read_text().splitlines():
                try:
                    result = json.loads(line)
                except json.JSONDecodeError:
                    continue
                self.results[str(result["key"])] = result

    def add(self, result: dict[str, object]) -> None:
        """Append ``result`` and flush it to disk."""
        with self.path.open("a") as stream:
            stream.write(json.dumps(result, sort_keys=True) + "\n")
            stream.flush()
        self.results[str(result["key"])] = result


def run_missing(
    workspace: Workspace,
    jobs: Sequence[Job],
    log: AuditLog,
    say: Callable[[str], None],
    *,
    workers: int = 1,
    device: str = "cpu",
) -> None:
    """Run every job of ``jobs`` whose result is not in ``log`` (models must be trained).

    Claims are grouped by model; with ``workers`` > 1 the groups run in that many worker
    processes (the CPU's threads shared among them) and their results are appended
    here, as each group finishes, so an interrupted run keeps every finished group.
    The models answer on ``device`` (the verifier's side of each claim on the CPU).
    """
    todo = [job for job in dict.fromkeys(jobs) if job.key not in log.results]
    todo, absent = without_weights(workspace, todo)
    if absent:
        names = sorted({job.model.name for job in absent})
        say(
            f"left out {len(absent)} claims: {len(names)} model(s) have a summary here but "
            f"no weights (records from an archive; the summary names the machine they were "
            f"trained on, where training them again gives them back): {', '.join(names[:4])}"
            + (", …" if len(names) > 4 else "")
        )
    if not todo:
        return
    say(f"auditing: {len(todo)} claims, {workers} model(s) at a time")
    by_model: dict[str, list[Job]] = {}
    for job in todo:
        by_model.setdefault(job.model.name, []).append(job)
    if workers <= 1:
        torch.set_num_threads(2)
        for name, model_jobs in by_model.items():
            for result in audit_model(workspace, model_jobs, device):
                log.add(result)
            say(f"  {name}: {len(model_jobs)} claims")
        return
    for spec in dict.fromkeys(job.vault for job in todo):  # marked before workers read them
        workspace.vault(spec)
    threads = max(1, (os.cpu_count() or 1) // workers)
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(
        max_workers=workers, mp_context=context, initializer=die_with_parent
    ) as pool:
        futures = {
            pool.submit(
                _audit_worker, workspace.root, workspace.data_folder, group, threads, device
            ): name
            for name, group in by_model.items()
        }
        for future in as_completed(futures):
            results = future.result()
            for result in results:
                log.add(result)
            say(f"  {futures[future]}: {len(results)} claims")


def without_weights(workspace: Workspace, jobs: Sequence[Job]) -> tuple[list[Job], list[Job]]:
    """Split ``jobs`` into those whose model's weights are here and those whose are not.

    A work directory seeded from archived records (:mod:`evaluation.records`) holds
    model summaries without weights: such a model counts as trained, but its claims
    cannot run here.
    """
    have: list[Job] = []
    absent: list[Job] = []
    for job in jobs:
        present = (workspace.model_dir(job.model) / "model.pt").exists()
        (have if present else absent).append(job)
    return have, absent


def audit_model(
    workspace: Workspace, model_jobs: Sequence[Job], device: str = "cpu"
) -> list[dict[str, object]]:
    """Load the model of ``model_jobs`` (all of one model) and run each of its claims."""
    model = workspace.load_model(model_jobs[0].model)
    return [run_audit(workspace, job, model, device) for job in model_jobs]


def _audit_worker(
    root: Path, data_folder: Path, model_jobs: Sequence[Job], threads: int, device: str
) -> list[dict[str, object]]:
    """Run one model's claims in a worker process (its share of :func:`run_missing`)."""
    torch.set_num_threads(threads)
    return audit_model(Workspace(root, data_folder), model_jobs, device)
