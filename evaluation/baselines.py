"""The baselines and several-owners tables (issue #25 items 2 and 3), at rung (a).

``python -m evaluation baselines`` (:func:`evaluation.specs.plan_baselines`): per seed,
the owner's 200 items (10% of M = 2,000) marked by each baseline — RData with one
carrier per class, per coarse label and one for all (:mod:`evaluation.rdata`), UBW-C
(:mod:`evaluation.ubw`) — each trained into a model of its own with the demo's
recipe (the ladder's 1,800 shared images beside them), then tested with the
baseline's own test; the same tests against the ladder's clean models (``-t1``, trained
without her items) measure their false detections. Our method's row is the ladder's
``pgdown`` model with the attacks table's claims (same models, same results).

``python -m evaluation owners`` (:func:`evaluation.specs.plan_owners`): ten owners per
seed, each with 200 items of her own (owner 0's are the split's owner share, owners
1–9's the next Fashion-MNIST training images of the split's permutation), her own proxy,
her own ``pgdown`` vault (what ``owner mark`` makes by default with labels) and her own
escrow record on the experiment's one arbiter (record j for owner j, each with its own
ρ). For k ∈ {1, 2, 5, 10}, the practitioner's M = 2,000 images hold owners 0..k−1's
published items (10% each) and 2,000 − 200k shared images; at k = 10 the whole set is
owners' data, as in the paper. Every owner files the claims of
:data:`evaluation.specs.OWNER_AUDITS` through the harness's audit path
(:func:`evaluation.audit.run_claim`): owners 0..k−1 against a model trained on their
data, owners k..9 against one that never saw theirs (false detections, measured for
free). k = 1 is the ladder's model. RData runs beside it: the same owners, each with her
own per-class carriers on her own proxy, in models of their own.

Records: ``baselines.jsonl`` (each baseline test: key, model, owner, method, p-value,
decision) and ``owners.jsonl`` (claims of owners other than the ladder's owner 0 on the
ladder's model, whose claims are in ``audits.jsonl``), both archived with the rest
(:mod:`evaluation.records`).
"""

from __future__ import annotations

import json
import multiprocessing
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Final

import numpy as np
import numpy.typing as npt
import torch

from twinaudit.owner.images.sources import open_source
from twinaudit.owner.mark import mark, secret_from_seed
from twinaudit.owner.marking import MarkingConfig
from twinaudit.owner.marking.config import PROXY_EPOCHS, pgd_defaults
from twinaudit.owner.marking.proxy import (
    HIDDEN,
    OWN_STEPS,
    load_proxy_state,
    train_own_proxy,
    write_proxy,
)
from twinaudit.owner.vault import Vault
from twinaudit.practitioner.torch_oracle import TorchClassifierOracle
from twinaudit.protocol.claim.scores.classifier import ScoreSpec

from . import paper, rdata, ubw
from .audit import AuditLog, run_claim
from .build import (
    Workspace,
    _publish_atomically,
    die_with_parent,
    published_versions,
    train_one,
)
from .specs import (
    MAX_OWNERS,
    OWNER_AUDITS,
    OWNER_COUNTS,
    AuditSpec,
    Job,
    ModelSpec,
    Plan,
)
from .tables import Cell, Result, _table, accuracy_summary

#: The baselines' marks: model ``marker`` → (method, ε). RData per class, per coarse
#: label and one carrier for all; UBW-C.
METHODS: Final = {
    "rdata-class": ("rdata", "class", rdata.EPSILON),
    "rdata-super": ("rdata", "superclass", rdata.EPSILON),
    "rdata-one": ("rdata", "one", rdata.EPSILON),
    "ubwc": ("ubw", "", ubw.EPSILON),
}
#: Public images the RData test aligns feature spaces on, and the benign images UBW's
#: verification draws: Fashion-MNIST test images no accuracy, attack or practitioner
#: here uses (accuracy reads the first 2,000, adversarial regularisation the next 2,000).
ALIGNMENT: Final = slice(4000, 6000)
UBW_VERIFY: Final = slice(6000, 6000 + ubw.M_VERIFY)


def _say_nothing(_: str) -> None:
    return None


# -- the owners' data, proxies, vaults and marks ------------------------------------------


def used_model(plan: Plan, seed: int) -> ModelSpec:
    """Return ``plan``'s model of experiment ``seed`` trained on owner 0's published items."""
    return next(m for m in plan.models if m.seed == seed and not m.clean)


def seeds_of(plan: Plan) -> list[int]:
    """Return the experiments of ``plan``, in order."""
    return list(dict.fromkeys(m.seed for m in plan.models))


def baseline_model(base: ModelSpec, marker: str) -> ModelSpec:
    """Return the model trained on owner 0's items marked by ``marker`` (:data:`METHODS`)."""
    return replace(base, marker=marker, epsilon=METHODS[marker][2])


def owners_model(base: ModelSpec, k: int, method: str) -> ModelSpec:
    """Return the model trained on owners 0..k−1's items, ``pgdown`` or ``rdata-class`` marked.

    k = 1 is the ladder's model (``pgdown``) or the baselines table's (``rdata-class``).
    """
    if k == 1:
        return base if method == "pgdown" else baseline_model(base, method)
    epsilon = base.epsilon if method == "pgdown" else METHODS[method][2]
    return replace(base, marker=f"owners{k}-{method}", epsilon=epsilon)


def owner_vault_name(base: ModelSpec, j: int) -> str:
    """Return the vault name of owner ``j`` (owner 0's is the ladder's)."""
    if j == 0:
        return base.vault().name
    return f"s{base.seed}-n{base.n_train}-owner{j}-{base.marker}{base.epsilon}"


@dataclass(frozen=True)
class Owners:
    """Where one experiment's owners' things are, in a work directory."""

    workspace: Workspace
    base: ModelSpec

    @property
    def n_owner(self) -> int:
        """Items per owner (10% of M)."""
        return self.base.n_train // 10

    @property
    def proxy_steps(self) -> int:
        """Steps of an owner's own proxy (fewer in smoke runs, as the workspace's)."""
        return OWN_STEPS * self.workspace.proxy_epochs // PROXY_EPOCHS

    @property
    def mark_scale(self) -> float:
        """The share of the baselines' marking steps a run takes (smoke runs: fewer)."""
        return self.workspace.proxy_epochs / PROXY_EPOCHS

    def _folder(self) -> Path:
        return self.workspace.root / "owners" / f"s{self.base.seed}-n{self.base.n_train}"

    def items(self, j: int) -> tuple[npt.NDArray[np.uint8], npt.NDArray[np.int64]]:
        """Return owner ``j``'s raw items and labels.

        Owner 0's are the split's owner share; owner j ≥ 1's are the ``n_owner`` images
        of the split's permutation after the split's M + N (:func:`demo.data.write_split`
        draws the same permutation), disjoint from every image a practitioner here has.
        """
        split = self.workspace.split_of(self.base)
        if j == 0:
            labels = json.loads(split.owner_labels.read_text())
            return np.load(split.owner_images), np.array(labels, dtype=np.int64)
        data = self.workspace.fashion_mnist()
        order = np.random.default_rng(self.base.seed).permutation(len(data.train_images))
        start = self.base.n_train + self.n_owner * j
        chosen = np.sort(order[start : start + self.n_owner])
        return data.train_images[chosen], data.train_labels[chosen].astype(np.int64)

    def item_files(self, j: int) -> tuple[Path, Path]:
        """Return owner ``j``'s items as files (an .npy and a JSON list of labels)."""
        if j == 0:
            split = self.workspace.split_of(self.base)
            return split.owner_images, split.owner_labels
        folder = self._folder() / f"owner{j}"

        def build(tmp: Path) -> None:
            images, labels = self.items(j)
            np.save(tmp / "photos.npy", images)
            (tmp / "labels.json").write_text(json.dumps([int(y) for y in labels]))

        _publish_atomically(build, folder)
        return folder / "photos.npy", folder / "labels.json"

    def proxy(self, j: int) -> Path:
        """Return owner ``j``'s proxy, trained on her own items (owner 0's: the ladder's)."""
        if j == 0:
            return self.workspace.own_proxy(self.base.vault())
        steps = self.proxy_steps
        smoke = "" if steps == OWN_STEPS else f"-t{steps}"
        target = (
            self.workspace.root
            / "proxy"
            / (f"own-s{self.base.seed}-n{self.base.n_train}-owner{j}{smoke}.pt")
        )
        if not target.exists():
            images, labels = self.items(j)
            # At full length the schedule owner mark trains (None: its epoch floor too).
            model = train_own_proxy(
                images, labels, seed=0, steps=steps if smoke else None, converge=False
            )
            target.parent.mkdir(parents=True, exist_ok=True)
            partial = target.with_name(f".{target.name}.tmp")
            write_proxy(model, partial)
            partial.replace(target)
        return target

    def vault(self, j: int) -> Vault:
        """Return owner ``j``'s ``pgdown`` vault (marked on first use, as ``owner mark``)."""
        if j == 0:
            return self.workspace.vault(self.base.vault())
        target = self.workspace.root / "vaults" / owner_vault_name(self.base, j)
        if not target.exists():
            images, labels = self.item_files(j)
            pgd = pgd_defaults("proxy-cnn", self.base.epsilon)
            config = MarkingConfig(
                marker="pgd",
                epsilon=self.base.epsilon,
                extractor="proxy-cnn",
                extractor_weights=str(self.proxy(j)),
                steps=int(pgd["steps"]),
                step_size=float(pgd["step_size"]),
                batch_size=int(pgd["batch_size"]),
                input_size=28,
            )

            def build(tmp: Path) -> None:
                source = open_source(images, labels=labels)
                secret = secret_from_seed(f"twinaudit evaluation {target.name}")
                mark(source, tmp / "vault", config, secret=secret, show_progress=False)

            _publish_atomically(build, target)
        return Vault.open(target / "vault")

    def published(self, j: int) -> tuple[npt.NDArray[np.uint8], npt.NDArray[np.int64]]:
        """Return what owner ``j`` published (version b_i of each pair, ρ her record's)."""
        if j == 0:
            return self.workspace.published(self.base.vault())
        return published_versions(self.vault(j))

    def carriers(self, j: int, marker: str) -> npt.NDArray[np.float64]:
        """Return owner ``j``'s RData carriers for ``marker`` (drawn from her own seed)."""
        grouping = METHODS[marker][1]
        seed = f"s{self.base.seed}-n{self.base.n_train}-owner{j}-{marker}"
        return rdata.carriers(seed, len(rdata.groups(grouping)), HIDDEN)

    def marked(self, j: int, marker: str) -> npt.NDArray[np.uint8]:
        """Return owner ``j``'s items marked by the baseline ``marker`` (built on first use)."""
        method, grouping, epsilon = METHODS[marker]
        name = f"s{self.base.seed}-n{self.base.n_train}-owner{j}-{marker}{epsilon}"
        if self.mark_scale < 1:
            name += f"-x{self.mark_scale:g}"
        folder = self.workspace.root / "baselines" / name

        def build(tmp: Path) -> None:
            images, labels = self.items(j)
            proxy, _ = load_proxy_state(str(self.proxy(j)))
            torch.set_num_threads(1)
            if method == "rdata":
                steps = max(2, round(rdata.STEPS * self.mark_scale))
                out = rdata.mark_rdata(
                    proxy.hidden_layer(),
                    images,
                    rdata.group_index(grouping, labels),
                    self.carriers(j, marker),
                    epsilon=epsilon,
                    steps=steps,
                    seed=j,
                )
            else:
                steps = max(2, round(ubw.STEPS * self.mark_scale))
                out = ubw.craft_ubw_c(proxy, images, labels, epsilon=epsilon, steps=steps, seed=j)
            np.save(tmp / "images.npy", out)

        _publish_atomically(build, folder)
        marked: npt.NDArray[np.uint8] = np.load(folder / "images.npy")
        return marked


# -- building: marks, models ----------------------------------------------------------


def _prepare(root: Path, data_folder: Path, proxy_epochs: int, base: ModelSpec, task: str) -> str:
    """Build one owner's things in a worker, in order: ``<what>+<what>…:<j>``.

    Each ``what`` is ``vault`` or a baseline's marker; one owner's things are built by
    one worker, so that her proxy is trained once.
    """
    torch.set_num_threads(1)
    owners = Owners(Workspace(root, data_folder, proxy_epochs=proxy_epochs), base)
    whats, _, j = task.partition(":")
    for what in whats.split("+"):
        if what == "vault":
            owners.vault(int(j))
        else:
            owners.marked(int(j), what)
    return f"s{base.seed} {task}"


def prepare(
    workspace: Workspace,
    tasks: Sequence[tuple[ModelSpec, str]],
    *,
    jobs: int,
    say: Callable[[str], None],
) -> None:
    """Build owners' vaults and baseline marks (``(base, task)``), ``jobs`` at a time.

    The split and owner 0's proxy are built first, here; each task is one owner's
    (:func:`_prepare`), so that no two workers build the same thing.
    """
    if not tasks:
        return
    began = time.monotonic()
    say(f"marking: {len(tasks)} owners' vaults and baseline marks, {jobs} at a time")
    for base in dict.fromkeys(b for b, _ in tasks):
        workspace.split_of(base)
        workspace.own_proxy(base.vault())
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(
        max_workers=jobs, mp_context=context, initializer=die_with_parent
    ) as pool:
        futures = [
            pool.submit(
                _prepare, workspace.root, workspace.data_folder, workspace.proxy_epochs, b, t
            )
            for b, t in tasks
        ]
        for done, future in enumerate(as_completed(futures), start=1):
            name = future.result()
            minutes = (time.monotonic() - began) / 60
            say(f"  [{done}/{len(tasks)}] {name} ({minutes:.1f} min so far)")


TrainingSet = tuple[npt.NDArray[np.uint8], npt.NDArray[np.int64]]


def training_set(owners: Owners, parts: Sequence[TrainingSet]) -> TrainingSet:
    """Return the shared images that fill M beside the owners' ``parts``, then the parts.

    The split's shared images in their order, as many as M leaves (1,800 beside one
    owner: the ladder's training set exactly).
    """
    split = owners.workspace.split_of(owners.base)
    n_shared = owners.base.n_train - sum(len(p[0]) for p in parts)
    shared = np.load(split.shared_images)[:n_shared], np.load(split.shared_labels)[:n_shared]
    if len(shared[0]) != n_shared:
        raise ValueError(f"the split has {len(shared[0])} shared images, {n_shared} needed")
    every = [shared, *parts]
    return (
        np.concatenate([p[0] for p in every]),
        np.concatenate([np.asarray(p[1], dtype=np.int64) for p in every]),
    )


def train_models(
    workspace: Workspace,
    todo: Sequence[tuple[ModelSpec, TrainingSet, TrainingSet]],
    *,
    jobs: int,
    device: str,
    say: Callable[[str], None],
) -> None:
    """Train each ``(spec, training set, owners' part)`` not trained yet, ``jobs`` at a time.

    As :meth:`evaluation.build.Workspace.train_missing` (the same worker, summary and
    folder), for training sets it cannot name.
    """
    todo = [t for t in todo if workspace.model_info(t[0]) is None]
    if not todo:
        return
    say(f"training {len(todo)} models, {jobs} at a time")
    began = time.monotonic()
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(
        max_workers=jobs, mp_context=context, initializer=die_with_parent
    ) as pool:
        futures = {}
        for spec, (images, labels), owner in todo:
            split = workspace.split_of(spec)
            future = pool.submit(
                train_one,
                workspace.model_dir(spec),
                spec,
                images=images,
                labels=labels,
                owner=owner,
                test_images=split.test_images,
                test_labels=split.test_labels,
                device=device,
            )
            futures[future] = spec
        for done, future in enumerate(as_completed(futures), start=1):
            info = future.result()
            say(
                f"  [{done}/{len(todo)}] {futures[future].name}: test accuracy "
                f"{info['test_accuracy']}, {info['train_seconds']} s "
                f"({(time.monotonic() - began) / 60:.1f} min so far)"
            )


# -- the tests ------------------------------------------------------------------------


def detection_key(model: ModelSpec, j: int, marker: str, test: str) -> str:
    """Return the record key of a baseline test of owner ``j``'s ``marker`` marks on ``model``."""
    return f"{model.name}|owner{j}-{marker}|{test}"


def baseline_tests(marker: str) -> tuple[str, ...]:
    """Return the tests of ``marker``: ``rdata``, or UBW's verification at each τ."""
    if METHODS[marker][0] == "rdata":
        return ("rdata",)
    return tuple(f"ubw-tau{tau:g}" for tau in ubw.TAUS)


def run_detections(
    owners: Owners,
    model: ModelSpec,
    checks: Sequence[tuple[int, str]],
    log: AuditLog,
) -> int:
    """Run each ``(owner j, marker)`` baseline test on ``model`` not in ``log``; return how many."""
    todo = [
        (j, marker, test)
        for j, marker in checks
        for test in baseline_tests(marker)
        if detection_key(model, j, marker, test) not in log.results
    ]
    if not todo:
        return 0
    net = owners.workspace.load_model(model)
    data = owners.workspace.fashion_mnist()
    alignment = data.test_images[ALIGNMENT]
    verify = data.test_images[UBW_VERIFY], data.test_labels[UBW_VERIFY].astype(np.int64)
    theirs = None
    for j, marker, test in todo:
        began = time.monotonic()
        if test == "rdata":
            proxy, _ = load_proxy_state(str(owners.proxy(j)))
            if theirs is None:  # the model's features of the alignment images, once
                theirs = rdata.features(rdata.last_layer(net)[0], alignment)
            result = rdata.run_rdata(
                net,
                proxy.hidden_layer(),
                alignment,
                owners.carriers(j, marker),
                METHODS[marker][1],
                model_features=theirs,
            )
            found = rdata.summary(result)
        else:
            tau = float(test.removeprefix("ubw-tau"))
            found = ubw.summary(ubw.ubw_test(net, *verify, tau))
        log.add(
            {
                "key": detection_key(model, j, marker, test),
                "model": model.name,
                "owner": j,
                "marker": marker,
                "test": test,
                **found,
                "seconds": round(time.monotonic() - began, 2),
            }
        )
    return len(todo)


def owner_claim_key(model: ModelSpec, base: ModelSpec, j: int, audit: AuditSpec) -> str:
    """Return the record key of owner ``j``'s claim ``audit`` on ``model``.

    Owner 0's claims on the ladder's model are the harness's own jobs (their key).
    """
    if j == 0 and model == base:
        return Job(model, base.vault(), audit).key
    return f"{model.name}|{owner_vault_name(base, j)}|{audit.name}|record{j}"


def run_owner_claims(
    owners: Owners,
    model: ModelSpec,
    log: AuditLog,
    *,
    device: str = "cpu",
) -> int:
    """File every owner's claims (:data:`OWNER_AUDITS`) against ``model``; return how many.

    Owner j's vault is her escrow record j on the experiment's one arbiter. Owner 0's
    claims on the ladder's model are the plan's own (run by the harness) and skipped.
    """
    base = owners.base
    todo = [
        (j, audit)
        for j in range(MAX_OWNERS)
        for audit in OWNER_AUDITS
        if not (j == 0 and model == base)
        and owner_claim_key(model, base, j, audit) not in log.results
    ]
    if not todo:
        return 0
    net = owners.workspace.load_model(model)
    oracle = TorchClassifierOracle(net, n_classes=10, model_name=model.name, device=device)
    for j, audit in todo:
        key = owner_claim_key(model, base, j, audit)
        result = run_claim(
            owners.vault(j),
            key=key,
            model_name=model.name,
            score=ScoreSpec(
                k=audit.k,
                perturbation=audit.perturbation,
                knowledge=audit.knowledge,
                statistic=audit.statistic,
                margin=audit.margin,
            ),
            test=audit.test,
            p=audit.p,
            oracle=oracle,
            record_index=j,
        )
        log.add(
            {
                "model": model.name,
                "vault": owner_vault_name(base, j),
                "audit": audit.name,
                "owner": j,
                **result,
            }
        )
    return len(todo)


def run_baselines(
    workspace: Workspace,
    plan: Plan,
    say: Callable[[str], None] = _say_nothing,
    *,
    jobs: int = 1,
    device: str = "cpu",
) -> None:
    """Mark, train and test every baseline of ``plan``'s experiments (``baselines.jsonl``)."""
    log = AuditLog(workspace.root / "baselines.jsonl")
    seeds = seeds_of(plan)
    bases = {seed: used_model(plan, seed) for seed in seeds}
    tasks = [(bases[s], "+".join(METHODS) + ":0") for s in seeds]
    prepare(workspace, tasks, jobs=jobs, say=say)
    todo = []
    for seed in seeds:
        owners = Owners(workspace, bases[seed])
        _, labels = owners.items(0)
        for marker in METHODS:
            part = (owners.marked(0, marker), labels)
            todo.append((baseline_model(bases[seed], marker), training_set(owners, [part]), part))
    train_models(workspace, todo, jobs=jobs, device=device, say=say)
    torch.set_num_threads(max(1, jobs))
    ran = 0
    for seed in seeds:
        owners = Owners(workspace, bases[seed])
        clean = next(m for m in plan.models if m.seed == seed and m.clean)
        for marker in METHODS:
            ran += run_detections(owners, baseline_model(bases[seed], marker), [(0, marker)], log)
        ran += run_detections(owners, clean, [(0, marker) for marker in METHODS], log)
    say(f"baselines: {ran} tests run")


def run_owners(
    workspace: Workspace,
    plan: Plan,
    say: Callable[[str], None] = _say_nothing,
    *,
    jobs: int = 1,
    device: str = "cpu",
) -> None:
    """Build the owners' vaults and models, file their claims, and run RData beside them.

    For every experiment of ``plan``; records in ``owners.jsonl`` and ``baselines.jsonl``.
    """
    claims = AuditLog(workspace.root / "owners.jsonl")
    tests = AuditLog(workspace.root / "baselines.jsonl")
    seeds = seeds_of(plan)
    bases = {seed: used_model(plan, seed) for seed in seeds}
    tasks = [(bases[s], f"vault+rdata-class:{j}") for s in seeds for j in range(MAX_OWNERS)]
    prepare(workspace, tasks, jobs=jobs, say=say)
    todo = []
    for seed in seeds:
        owners = Owners(workspace, bases[seed])
        for k in OWNER_COUNTS:
            ours = [owners.published(j) for j in range(k)]
            theirs = [(owners.marked(j, "rdata-class"), owners.items(j)[1]) for j in range(k)]
            for method, parts in (("pgdown", ours), ("rdata-class", theirs)):
                joined = (
                    np.concatenate([p[0] for p in parts]),
                    np.concatenate([p[1] for p in parts]),
                )
                spec = owners_model(bases[seed], k, method)
                todo.append((spec, training_set(owners, parts), joined))
    train_models(workspace, todo, jobs=jobs, device=device, say=say)
    torch.set_num_threads(max(1, jobs))
    filed = ran = 0
    for seed in seeds:
        owners = Owners(workspace, bases[seed])
        for k in OWNER_COUNTS:
            model = owners_model(bases[seed], k, "pgdown")
            now = run_owner_claims(owners, model, claims, device=device)
            marked = owners_model(bases[seed], k, "rdata-class")
            checks = [(j, "rdata-class") for j in range(MAX_OWNERS)]
            tested = run_detections(owners, marked, checks, tests)
            if now or tested:
                say(f"  seed {seed}, {k} owner(s): {now} claims, {tested} RData tests")
            filed, ran = filed + now, ran + tested
    say(f"owners: {filed} claims filed, {ran} RData tests run")


#: What ``python -m evaluation`` runs after a table's own claims (the extra step of each).
RUNNERS: Final = {"baselines": run_baselines, "owners": run_owners}


# -- the tables ------------------------------------------------------------------------


def _infos(work: Path, specs: Sequence[ModelSpec]) -> list[Mapping[str, object]]:
    found = []
    for spec in specs:
        path = work / "models" / spec.name / "model.json"
        if path.exists():
            found.append(json.loads(path.read_text()))
    return found


def _accuracy(work: Path, specs: Sequence[ModelSpec]) -> str:
    values = [float(str(i["test_accuracy"])) for i in _infos(work, specs)]
    return accuracy_summary(values)


def _count(records: Sequence[Result | None], wanted: int) -> str:
    done = [r for r in records if r is not None]
    hits = sum(_detected(r) for r in done)
    return f"{hits}/{len(done)}" + ("" if len(done) >= wanted else f" so far ({wanted} asked)")


def _detected(record: Result) -> bool:
    if "decision" in record:
        return record["decision"] == "detected"
    return bool(record["detected"])


def _claim_name(audit: AuditSpec) -> str:
    margin = f", margin {audit.margin:g}" if audit.margin else ""
    return f"{audit.knowledge} `{audit.perturbation}` K = {audit.k}{margin}"


#: The baselines table's rows: (key, name, labels known, white box, bounded FDR). The
#: circles are the paper's (● needed, ◐ partly, ○ not needed).
BASELINE_ROWS: Final = (
    ("rdata-class", "RData (per class)", "●", "●", "✓"),
    ("rdata-super", "RData (superclass)", "◐", "●", "✓"),
    ("rdata-one", "RData (one mark)", "○", "●", "✓"),
    ("ubwc-tau0.25", "UBW-C (τ = 0.25)", "●", "○", "✗"),
    ("ubwc-tau0.2", "UBW-C (τ = 0.20)", "●", "○", "✗"),
)
#: Our claims' rows and the paper's row each sits beside.
OUR_ROWS: Final = ((OWNER_AUDITS[2], "ours"), (OWNER_AUDITS[1], ""), (OWNER_AUDITS[0], ""))


def _paper_cells(key: str) -> list[str]:
    if not key:
        return ["—", "—"]
    out = []
    for table in (paper.BASELINES_CIFAR10, paper.BASELINES_CIFAR100):
        row = table.get(key)
        out.append("—" if row is None else f"{row[-1][0]}, {row[-1][1]}%")
    return out


def baselines_table(
    plan: Plan, results: Mapping[str, Result], work: Path, repeats: int
) -> list[str]:
    """Return Markdown: ours and each baseline, DSR, accuracy, false detections, the paper's."""
    tests = AuditLog(work / "baselines.jsonl").results
    seeds = seeds_of(plan)
    bases = [used_model(plan, s) for s in seeds]
    cleans = [m for m in plan.models if m.clean]
    rows: list[list[object]] = []
    for audit, theirs in OUR_ROWS:
        used = [results.get(Job(b, b.vault(), audit).key) for b in bases]
        clean = [results.get(Job(c, used_model(plan, c.seed).vault(), audit).key) for c in cleans]
        found = Cell(repeats, [r for r in used if r is not None])
        rows.append(
            [
                f"ours, {_claim_name(audit)}",
                "○" if audit.knowledge in ("C2", "C4") else "◐ (her own labels)",
                "○",
                "✓",
                f"{found.dsr()} (q̂ {found.q_hat()})",
                _accuracy(work, bases),
                _count(clean, len(cleans)),
                *_paper_cells(theirs),
            ]
        )
    for key, name, labels, white, bounded in BASELINE_ROWS:
        marker, _, tau = key.partition("-tau")
        test = f"ubw-tau{tau}" if tau else "rdata"
        models = [baseline_model(b, marker) for b in bases]
        used = [tests.get(detection_key(m, 0, marker, test)) for m in models]
        clean = [tests.get(detection_key(c, 0, marker, test)) for c in cleans]
        rows.append(
            [
                name,
                labels,
                white,
                bounded,
                _count(used, repeats) + _p_values(used),
                _accuracy(work, models),
                _count(clean, len(cleans)),
                *_paper_cells(key),
            ]
        )
    header = [
        "method",
        "labels known",
        "white box",
        "bounded FDR",
        "DSR",
        "accuracy",
        "false detections (clean models)",
        "paper CIFAR-10, 10%: DSR, acc",
        "paper CIFAR-100, 10%",
    ]
    return _table(header, rows)


def _p_values(records: Sequence[Result | None]) -> str:
    values = sorted(float(str(r["p_value"])) for r in records if r is not None)
    if not values:
        return ""
    return f" (median p {values[len(values) // 2]:.2g})"


def owners_table(plan: Plan, results: Mapping[str, Result], work: Path, repeats: int) -> list[str]:
    """Return Markdown: detections over all owners' claims per k, false detections, the paper's."""
    claims = {**results, **AuditLog(work / "owners.jsonl").results}
    tests = AuditLog(work / "baselines.jsonl").results
    bases = [used_model(plan, s) for s in seeds_of(plan)]
    rows: list[list[object]] = []

    def row(
        name: str, lookup: Callable[[ModelSpec, ModelSpec, int], Result | None], theirs: str
    ) -> list[object]:
        cells: list[object] = [name]
        controls: list[Result | None] = []
        for k in OWNER_COUNTS:
            method = "rdata-class" if theirs == "rdata" else "pgdown"
            found = []
            for base in bases:
                model = owners_model(base, k, method)
                found += [lookup(model, base, j) for j in range(k)]
                controls += [lookup(model, base, j) for j in range(k, MAX_OWNERS)]
            cells.append(_count(found, k * repeats))
        wanted = sum(MAX_OWNERS - k for k in OWNER_COUNTS) * repeats
        cells.append(_count(controls, wanted))
        paper_row = paper.MULTIPLE_OWNERS_CIFAR100.get(theirs)
        cells.append(", ".join(paper_row) if paper_row else "—")
        return cells

    for audit, theirs in OUR_ROWS:

        def claim(model: ModelSpec, base: ModelSpec, j: int, a: AuditSpec = audit) -> Result | None:
            return claims.get(owner_claim_key(model, base, j, a))

        rows.append(row(f"ours, {_claim_name(audit)}", claim, theirs))

    def rdata_test(model: ModelSpec, base: ModelSpec, j: int) -> Result | None:
        del base
        return tests.get(detection_key(model, j, "rdata-class", "rdata"))

    rows.append(row("RData (per class)", rdata_test, "rdata"))
    accuracy: list[object] = ["test accuracy: ours; RData"]
    for k in OWNER_COUNTS:
        ours = _accuracy(work, [owners_model(b, k, "pgdown") for b in bases])
        theirs = _accuracy(work, [owners_model(b, k, "rdata-class") for b in bases])
        accuracy.append(f"{ours}; {theirs}")
    rows.append([*accuracy, "", ""])
    header = [
        "method",
        *(f"{k} owner{'s' if k > 1 else ''}" for k in OWNER_COUNTS),
        "false detections (owners not in the set)",
        "paper CIFAR-100: 1, 2, 5, 10 owners",
    ]
    return _table(header, rows)


#: What the baselines table shows, above it in the results.
BASELINES_INTRO: Final = (
    "Rung (a) — the demo's regime (M = 2,000, the 1.62M-weight CNN, 500 epochs of Adam, "
    "pad-crop-flip) — with the owner's 200 items (10% of M, the paper's last column) "
    "marked by each method and trained into a model of its own (`evaluation.baselines`). "
    "Ours: the ladder's `pgdown` model (ε = 10) with the attacks table's claims. RData "
    "(Sablayrolles et al., ICML 2020; `evaluation.rdata`, our implementation from its "
    "paper): ε = 10 marks that push the owner's proxy's features along random carriers, "
    "one per class, per coarse label (tops, trousers and dresses, footwear, bags: ours, "
    "Fashion-MNIST has none) or one for all; tested white box, the model's last layer "
    "aligned with the proxy's features on 2,000 public test images; per-class cosines "
    "against the Beta null, Bonferroni within a carrier's classes, Fisher across "
    "carriers, detected at p < 0.05. UBW-C (Li et al., NeurIPS 2022; `evaluation.ubw`, "
    "ours from its paper): clean-label ε = 16 marks by gradient matching on the owner's "
    "proxy towards an untargeted, dispersed misclassification of images carrying a 4×4 "
    "checkerboard trigger; verified by a one-sided paired t-test on the true class's "
    "probability of 100 benign test images and their triggered versions at margin τ, "
    "detected at p < 0.05 — a p-value that bounds nothing (the paper's ✗). False "
    "detections: the same tests against the ladder's clean models (`-t1`, trained "
    "without her items). The paper's figures (R = 20, ResNet-18, its own share of 10%) "
    "alongside; its CIFAR-10 table has no superclass row."
)
#: What the owners table shows, above it in the results.
OWNERS_INTRO: Final = (
    "Several owners auditing one model, at rung (a): per experiment ten owners, each with "
    "200 items of her own (10% of M = 2,000), her own proxy, her own `pgdown` vault (ε = "
    "10, what `owner mark` makes by default with labels) and her own escrow record on "
    "the experiment's one arbiter (record j for owner j, each with its own ρ). The "
    "practitioner's 2,000 images hold the published items of owners 0..k−1 and 2,000 − "
    "200k shared images; at k = 10 the whole set is owners' data, as in the paper. Each "
    "owner files her claims independently through the harness's audit path; a cell is "
    "the total detections over all owners' claims of all experiments (k·R), as the "
    "paper reports. Owners k..9 claim against the same model too, which never saw their "
    "data: their claims are the false-detection column. k = 1 is the ladder's model. "
    "RData (per class, each owner her own carriers on her own proxy) in models of its "
    "own beside it, tested for every owner the same way. The paper's figures "
    "(CIFAR-100, 5,000 items per owner, its C4) alongside."
)


def section(plan: Plan, results: Mapping[str, Result], work: Path, repeats: int) -> list[str]:
    """Return the results document's lines for ``plan`` (the baselines or owners table)."""
    own = extra_models(plan)
    infos = _infos(work, own)
    hours = sum(float(str(i["train_seconds"])) for i in infos) / 3600
    done = (
        f"Its own step (`evaluation.baselines`): {len(infos)}/{len(own)} models of its own "
        f"trained ({hours:.2f} h of training, summed over models)."
    )
    if plan.table == "baselines":
        return [BASELINES_INTRO, "", done, "", *baselines_table(plan, results, work, repeats)]
    return [OWNERS_INTRO, "", done, "", *owners_table(plan, results, work, repeats)]


def extra_models(plan: Plan) -> list[ModelSpec]:
    """Return the models ``plan``'s extra step trains besides its own (for ``--plan``)."""
    bases = [used_model(plan, s) for s in seeds_of(plan)]
    if plan.table == "baselines":
        return [baseline_model(b, m) for b in bases for m in METHODS]
    return [
        owners_model(b, k, method)
        for b in bases
        for k in OWNER_COUNTS
        for method in ("pgdown", "rdata-class")
        if (k, method) != (1, "pgdown")
    ]
