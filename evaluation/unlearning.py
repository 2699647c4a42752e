"""The unlearning table (issue #25 item 4): audit, unlearn, audit again on fresh pairs.

``python -m evaluation unlearning`` (:func:`evaluation.specs.plan_unlearning`) works at
rung (a) with the marks ``twinaudit owner mark`` makes by default with labels
(``pgdown``, ε = 10), on the ladder's models. Per experiment:

1. **Claim 1 ("before")**: each claim of :data:`evaluation.specs.UNLEARNING_AUDITS`
   against the used model. It is the ladder's own claim (same key, hence the same
   nonce, order and result), filed again here to record the pairs it opened.
2. **The practitioner unlearns**, each state a model of its own: (i) exact retraining,
   the ladder's clean model ``-t1`` (trained from scratch without her items: see
   :data:`INTRO` for what it trained on); (ii) fine-tuning the used model on the
   retained data, its training set less her published items (:func:`fine_tune`);
   (iii) gradient ascent on her published items (:func:`gradient_ascent`), alone and
   interleaved with descent on the retained data (NegGrad+), within a fixed budget;
   (iv) no unlearning at all, the used model again: the control that shows what the
   pairs left can still detect.
3. **Claim 2 ("after")** against each state: the same score, with ``excluded`` = the
   pairs claim 1 opened (spec §10.2 step 2, the verifier's fresh pairs), its test over
   the pairs left, and the bound a reader states for it, ``(earlier_claims + 1)·p``
   with one earlier claim (spec §11). The claim nonce is the same for every state, so
   each state meets the same order of fresh pairs.

Records: ``unlearning.jsonl`` in the work directory (claims 1 and 2 with the pairs
they opened, and each state's accuracies), and ``models/<name>/model.json`` (and the
weights) of the unlearned models, archived with the rest (:mod:`evaluation.records`).
"""

from __future__ import annotations

import copy
import hashlib
import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import numpy as np
import numpy.typing as npt
import torch
import torch.nn.functional as F  # noqa: N812 - the usual torch alias

from demo.practitioner import accuracy, augmenter
from twinaudit.owner.marking.proxy import fit, to_tensor
from twinaudit.practitioner.torch_oracle import TorchClassifierOracle
from twinaudit.protocol.claim.scores.classifier import ScoreSpec
from twinaudit.protocol.errors import StateError

from .audit import AuditLog, run_claim
from .build import Workspace, _publish_atomically, architecture, device_name
from .specs import TEST, AuditSpec, Job, ModelSpec, Plan
from .tables import Cell, Result, _table, accuracy_summary

TrainingSet = tuple[npt.NDArray[np.uint8], npt.NDArray[np.int64]]

#: The table's records, in the work directory.
LOG: Final = "unlearning.jsonl"
#: Fine-tuning on the retained data: the demo trainer's recipe (Adam, cosine decay to 0,
#: batches of 128, the model's augmentation) for a few epochs at a tenth of its rate.
FINETUNE_EPOCHS: Final = 20
FINETUNE_LR: Final = 1e-4
#: Gradient ascent on her published items: Adam at this rate, batches of
#: :data:`ASCENT_BATCH` of her items (with the model's augmentation), at most
#: :data:`ASCENT_EPOCHS` passes over them; it stops after the first pass that takes the
#: model's accuracy on her items down to its test accuracy before unlearning (about what
#: a model that never saw them scores), the usual target of approximate unlearning.
ASCENT_LR: Final = 1e-4
ASCENT_BATCH: Final = 32
ASCENT_EPOCHS: Final = 10
#: NegGrad+: each ascent step also descends on :data:`RETAIN_BATCH` retained images.
RETAIN_BATCH: Final = 128
#: The approximate unlearning methods, in the table's order.
METHODS: Final = ("finetune", "ascent", "neggrad-plus")
#: Claims on the record before claim 2 (claim 1), and so the bound claim 2 is stated with.
EARLIER_CLAIMS: Final = 1


def _say_nothing(_: str) -> None:
    return None


# -- the unlearned models ----------------------------------------------------------------


@dataclass(frozen=True)
class Unlearned:
    """A model derived from the used model ``base`` by an approximate unlearning method."""

    base: ModelSpec
    method: str
    epochs: int
    lr: float

    def __post_init__(self) -> None:
        """Check the method."""
        if self.method not in METHODS:
            raise ValueError(f"unknown unlearning method {self.method!r}; known: {METHODS}")

    @property
    def name(self) -> str:
        """A file-system name that identifies the model (its base's, then the method's)."""
        return f"{self.base.name}-unlearn-{self.method}-e{self.epochs}-lr{self.lr:g}"

    @property
    def seed(self) -> int:
        """The seed of its batches and augmentation (derived from its name)."""
        label = f"twinaudit evaluation unlearning {self.name}".encode()
        return int.from_bytes(hashlib.sha256(label).digest()[:4], "big")


def unlearned_of(base: ModelSpec) -> list[Unlearned]:
    """Return the approximate unlearning states of the used model ``base``, in order."""
    return [
        Unlearned(base, "finetune", FINETUNE_EPOCHS, FINETUNE_LR),
        Unlearned(base, "ascent", ASCENT_EPOCHS, ASCENT_LR),
        Unlearned(base, "neggrad-plus", ASCENT_EPOCHS, ASCENT_LR),
    ]


def retained_set(workspace: Workspace, spec: ModelSpec) -> TrainingSet:
    """Return the used model's training set less the owner's published items.

    :meth:`~evaluation.build.Workspace.training_set` without its owner part: the shared
    images, then the stand-ins for her items it did not use (none when it used all).
    """
    split = workspace.split_of(spec)
    used = workspace.used_mask(spec)
    extra_images, extra_labels = np.load(split.clean_images), np.load(split.clean_labels)
    images = np.concatenate([np.load(split.shared_images), extra_images[~used]])
    labels = np.concatenate([np.load(split.shared_labels), extra_labels[~used]])
    return images, labels.astype(np.int64)


def fine_tune(
    model: torch.nn.Module,
    retained: TrainingSet,
    *,
    epochs: int,
    lr: float,
    seed: int,
    recipe: str,
    batch_size: int = 128,
    device: str = "cpu",
) -> torch.nn.Module:
    """Return a copy of ``model`` trained ``epochs`` more on ``retained`` (only).

    The demo trainer's recipe (:func:`demo.practitioner.train`: Adam, cosine decay to 0
    over the steps, the ``recipe`` augmentation) from the model's weights at rate ``lr``.
    """
    net = copy.deepcopy(model).to(device)
    optimiser = torch.optim.Adam(net.parameters(), lr=lr)
    steps = epochs * ((len(retained[0]) + batch_size - 1) // batch_size)
    schedule = torch.optim.lr_scheduler.CosineAnnealingLR(optimiser, steps)
    fit(
        net,
        *retained,
        optimiser=optimiser,
        schedule=schedule,
        epochs=epochs,
        seed=seed,
        batch_size=batch_size,
        augment=augmenter(recipe),
        device=device,
    )
    return net.to("cpu").eval()


def gradient_ascent(
    model: torch.nn.Module,
    forget: TrainingSet,
    retained: TrainingSet | None = None,
    *,
    max_epochs: int,
    lr: float,
    seed: int,
    recipe: str,
    stop_at: float | None = None,
    batch_size: int = ASCENT_BATCH,
    retain_batch: int = RETAIN_BATCH,
    device: str = "cpu",
) -> tuple[torch.nn.Module, int]:
    """Return a copy of ``model`` after gradient ascent on ``forget``, and the passes run.

    Each step raises the cross-entropy of a batch of ``forget`` (Adam at ``lr``, the
    ``recipe`` augmentation); with ``retained`` it also lowers that of
    ``retain_batch`` retained images drawn at random (NegGrad+). At most ``max_epochs``
    passes over ``forget``; with ``stop_at`` it stops after the first pass that leaves
    the accuracy on ``forget`` at or below it.
    """
    net = copy.deepcopy(model).to(device)
    optimiser = torch.optim.Adam(net.parameters(), lr=lr)
    generator = torch.Generator().manual_seed(seed)
    augment = augmenter(recipe)
    xf, yf = to_tensor(forget[0]), torch.from_numpy(np.asarray(forget[1], dtype=np.int64))
    if retained is not None:
        xr = to_tensor(retained[0])
        yr = torch.from_numpy(np.asarray(retained[1], dtype=np.int64))
    passes = 0
    while passes < max_epochs:
        passes += 1
        net.train()
        order = torch.randperm(len(xf), generator=generator)
        for start in range(0, len(xf), batch_size):
            index = order[start : start + batch_size]
            x = augment(xf[index], generator) if augment is not None else xf[index]
            loss = -F.cross_entropy(net(x.to(device)), yf[index].to(device))
            if retained is not None:
                pick = torch.randint(0, len(xr), (retain_batch,), generator=generator)
                x = augment(xr[pick], generator) if augment is not None else xr[pick]
                loss = loss + F.cross_entropy(net(x.to(device)), yr[pick].to(device))
            optimiser.zero_grad()
            loss.backward()  # type: ignore[no-untyped-call]
            optimiser.step()
        if stop_at is not None:
            net.eval()
            reached = accuracy(net, *forget, device=device) <= stop_at
            net.to(device)  # accuracy() hands an accelerator's model back on the CPU
            if reached:
                break
    return net.to("cpu").eval(), passes


def build_unlearned(
    workspace: Workspace, state: Unlearned, *, device: str = "cpu"
) -> dict[str, object]:
    """Derive ``state``'s model from its base (once); return its summary (``model.json``).

    Its ``train_accuracy`` is over the retained data, ``owner_accuracy`` over her
    published items (the data to forget), ``test_accuracy`` over the split's test images.
    """
    folder = workspace.root / "models" / state.name
    if (folder / "model.json").exists():
        found: dict[str, object] = json.loads((folder / "model.json").read_text())
        return found
    base = workspace.load_model(state.base)
    forget = workspace.owner_items(state.base)
    retained = retained_set(workspace, state.base)
    split = workspace.split_of(state.base)
    test = np.load(split.test_images), np.load(split.test_labels)
    before = accuracy(base, *test, device=device)
    began = time.monotonic()
    if state.method == "finetune":
        model = fine_tune(
            base,
            retained,
            epochs=state.epochs,
            lr=state.lr,
            seed=state.seed,
            recipe=state.base.recipe,
            device=device,
        )
        epochs_run = state.epochs
    else:
        model, epochs_run = gradient_ascent(
            base,
            forget,
            retained if state.method == "neggrad-plus" else None,
            max_epochs=state.epochs,
            lr=state.lr,
            seed=state.seed,
            recipe=state.base.recipe,
            stop_at=before,
            device=device,
        )
    seconds = time.monotonic() - began
    info: dict[str, object] = {
        "base": state.base.name,
        "method": state.method,
        "epochs": state.epochs,
        "epochs_run": epochs_run,
        "lr": state.lr,
        "seed": state.seed,
        **({"stop_at": round(before, 4)} if state.method != "finetune" else {}),
        "images": len(retained[0]),
        "forgotten": len(forget[0]),
        "train_accuracy": round(accuracy(model, *retained, device=device), 4),
        "test_accuracy": round(accuracy(model, *test, device=device), 4),
        "owner_accuracy": round(accuracy(model, *forget, device=device), 4),
        "train_seconds": round(seconds, 1),
        "weights": sum(p.numel() for p in model.parameters()),
        "torch": torch.__version__,
        "device": device_name(device),
    }

    def build(tmp: Path) -> None:
        torch.save(model.state_dict(), tmp / "model.pt")
        (tmp / "model.json").write_text(json.dumps(info, indent=2))

    _publish_atomically(build, folder)
    return info


def load_unlearned(workspace: Workspace, state: Unlearned) -> torch.nn.Module:
    """Return ``state``'s model (built by :func:`build_unlearned`), in eval mode."""
    model = architecture(state.base)
    path = workspace.root / "models" / state.name / "model.pt"
    model.load_state_dict(torch.load(path, weights_only=True))
    return model.eval()


# -- the claims ---------------------------------------------------------------------------


def used_of(plan: Plan, seed: int) -> ModelSpec:
    """Return ``plan``'s model of experiment ``seed`` that trained on her published items."""
    return next(m for m in plan.models if m.seed == seed and not m.clean)


def clean_of(plan: Plan, seed: int) -> ModelSpec:
    """Return ``plan``'s model of experiment ``seed`` that never saw her items (retraining)."""
    return next(m for m in plan.models if m.seed == seed and m.clean)


def seeds_of(plan: Plan) -> list[int]:
    """Return the experiments of ``plan``, in order."""
    return list(dict.fromkeys(m.seed for m in plan.models))


def state_name(plan: Plan, job: Job, state: str) -> str:
    """Return the name of the model that is ``state`` in ``job``'s experiment."""
    if state in ("before", "none"):
        return job.model.name
    if state == "retrain":
        return clean_of(plan, job.model.seed).name
    return next(u.name for u in unlearned_of(job.model) if u.method == state)


def after_claim(job: Job) -> str:
    """Return the name of claim 2 after claim 1 ``job`` (its nonce, one for every state)."""
    return f"{job.vault.name}|{job.audit.name}|fresh-after[{job.model.name}]"


def after_key(model_name: str, job: Job) -> str:
    """Return the record key of claim 2 (after claim 1 ``job``) against ``model_name``."""
    return f"{model_name}|{after_claim(job)}"


def accuracy_key(model_name: str, job: Job) -> str:
    """Return the record key of ``model_name``'s accuracies in ``job``'s experiment."""
    return f"{model_name}|{job.vault.name}|accuracy"


def score_of(audit: AuditSpec) -> ScoreSpec:
    """Return the classifier score of ``audit`` (as :func:`evaluation.audit.run_audit`)."""
    return ScoreSpec(
        k=audit.k,
        perturbation=audit.perturbation,
        knowledge=audit.knowledge,
        statistic=audit.statistic,
        margin=audit.margin,
    )


def file_before(
    workspace: Workspace, job: Job, model: torch.nn.Module, log: AuditLog, device: str = "cpu"
) -> Result:
    """File claim 1 (``job``, the harness's own claim, same key) keeping its opened pairs."""
    if job.key in log.results:
        return log.results[job.key]
    oracle = TorchClassifierOracle(model, n_classes=10, model_name=job.model.name, device=device)
    result = run_claim(
        workspace.vault(job.vault),
        key=job.key,
        model_name=job.model.name,
        score=score_of(job.audit),
        test=job.audit.test,
        p=job.audit.p,
        oracle=oracle,
        keep_opened=True,
    )
    log.add(
        {
            "model": job.model.name,
            "vault": job.vault.name,
            "audit": job.audit.name,
            "state": "before",
            "earlier_claims": 0,
            "bound": job.audit.p,
            **result,
        }
    )
    return log.results[job.key]


def file_after(
    workspace: Workspace,
    job: Job,
    first: Result,
    *,
    state: str,
    model_name: str,
    model: torch.nn.Module,
    log: AuditLog,
    device: str = "cpu",
) -> Result:
    """File claim 2 against ``model`` (``state``) on the pairs claim 1 (``first``) left.

    ``excluded`` is every pair claim 1 opened; the claim is refused (recorded with
    decision ``refused``) when claim 1 opened them all. Returns the record.
    """
    key = after_key(model_name, job)
    if key in log.results:
        return log.results[key]
    opened = first.get("opened")
    if not isinstance(opened, list):
        raise ValueError(f"claim 1 {job.key} has no opened pairs recorded")
    excluded = sorted({int(i) for i in opened})
    vault = workspace.vault(job.vault)
    record: dict[str, object] = {
        "key": key,
        "claim": after_claim(job),
        "model": model_name,
        "vault": job.vault.name,
        "audit": job.audit.name,
        "state": state,
        "earlier_claims": EARLIER_CLAIMS,
        "bound": round((EARLIER_CLAIMS + 1) * job.audit.p, 10),
        "excluded_pairs": len(excluded),
        "pairs_left": len(vault) - len(excluded),
    }
    oracle = TorchClassifierOracle(model, n_classes=10, model_name=model_name, device=device)
    try:
        result = run_claim(
            vault,
            key=after_claim(job),
            model_name=model_name,
            score=score_of(job.audit),
            test=job.audit.test,
            p=job.audit.p,
            oracle=oracle,
            excluded=excluded,
            keep_opened=True,
        )
    except StateError:  # claim 1 opened every pair: the verifier refuses claim 2
        result = {
            "decision": "refused",
            "stop": "no-pair-left",
            "pairs_opened": 0,
            "n_pairs": len(vault),
            "draws": 0,
            "successes": 0,
            "queries": 0,
            "opened": [],
        }
    log.add({**result, **record})
    return log.results[key]


def _accuracies(
    workspace: Workspace, job: Job, model: torch.nn.Module, device: str
) -> dict[str, object]:
    """Return ``model``'s accuracy on the retained data, test images and her items.

    The retained data and her published items are those of ``job``'s used model and vault.
    """
    split = workspace.split_of(job.model)
    test = np.load(split.test_images), np.load(split.test_labels)
    retained = retained_set(workspace, job.model)
    forget = workspace.published(job.vault)
    return {
        "retained_accuracy": round(accuracy(model, *retained, device=device), 4),
        "test_accuracy": round(accuracy(model, *test, device=device), 4),
        "owner_accuracy": round(accuracy(model, *forget, device=device), 4),
    }


def run_unlearning(
    workspace: Workspace,
    plan: Plan,
    say: Callable[[str], None] = _say_nothing,
    *,
    jobs: int = 1,
    device: str = "cpu",
) -> None:
    """Unlearn, and file claims 1 and 2 of every experiment of ``plan`` (``unlearning.jsonl``).

    The plan's models must be trained (the harness trains them before this step). Claim 1
    is checked against the harness's record of the same claim (``audits.jsonl``), when
    there is one: the same claim must give the same result.
    """
    log = AuditLog(workspace.root / LOG)
    harness = AuditLog(workspace.root / "audits.jsonl").results
    torch.set_num_threads(max(1, jobs))
    began, filed = time.monotonic(), 0
    for seed in seeds_of(plan):
        used, clean = used_of(plan, seed), clean_of(plan, seed)
        nets: dict[str, torch.nn.Module] = {
            used.name: workspace.load_model(used),
            clean.name: workspace.load_model(clean),
        }
        for derived in unlearned_of(used):
            info = build_unlearned(workspace, derived, device=device)
            say(
                f"  {derived.name}: {info['epochs_run']} epoch(s), retained accuracy "
                f"{info['train_accuracy']}, test {info['test_accuracy']}, her items "
                f"{info['owner_accuracy']}"
            )
            nets[derived.name] = load_unlearned(workspace, derived)
        for job in [j for j in plan.jobs if j.model == used]:
            for name, net in nets.items():
                key = accuracy_key(name, job)
                if key not in log.results:
                    log.add({"key": key, "model": name, **_accuracies(workspace, job, net, device)})
            first = file_before(workspace, job, nets[used.name], log, device)
            theirs = harness.get(job.key)
            if theirs is not None and any(
                theirs[f] != first[f] for f in ("decision", "pairs_opened", "successes")
            ):
                say(f"  warning: claim 1 {job.key} differs from the harness's record of it")
            for state in ("retrain", *METHODS, "none"):
                name = state_name(plan, job, state)
                file_after(
                    workspace,
                    job,
                    first,
                    state=state,
                    model_name=name,
                    model=nets[name],
                    log=log,
                    device=device,
                )
                filed += 1
    say(f"unlearning: {filed} claims after unlearning ({time.monotonic() - began:.0f} s)")


def extra_models(plan: Plan) -> list[Unlearned]:
    """Return the unlearned models ``plan``'s extra step derives (for ``--plan``)."""
    return [u for seed in seeds_of(plan) for u in unlearned_of(used_of(plan, seed))]


# -- the table ----------------------------------------------------------------------------

#: The table's rows: (state, what it is).
STATES: Final = (
    ("before", "before: the used model"),
    ("retrain", "(i) exact retraining: the clean model `-t1`"),
    ("finetune", f"(ii) fine-tuning on the retained data, {FINETUNE_EPOCHS} epochs"),
    ("ascent", f"(iii) gradient ascent on her items, ≤ {ASCENT_EPOCHS} passes"),
    ("neggrad-plus", f"(iii′) NegGrad+: (iii) with descent on retained data, ≤ {ASCENT_EPOCHS}"),
    ("none", "(iv) no unlearning: the used model again"),
)


def _claim_name(audit: AuditSpec) -> str:
    margin = f", margin {audit.margin:g}" if audit.margin else ""
    test = f", `{audit.test}`" if audit.test != TEST else ""
    return f"{audit.knowledge} `{audit.perturbation}` K = {audit.k}{margin}{test}"


def _pairs_left(records: Sequence[Result]) -> str:
    left = [int(str(r.get("pairs_left", r.get("n_pairs", 0)))) for r in records]
    if not left:
        return "—"
    n = int(str(records[0]["n_pairs"]))
    return f"{min(left)}–{max(left)} of {n}" if min(left) != max(left) else f"{left[0]} of {n}"


def _epochs_run(work: Path, names: Sequence[str]) -> str:
    runs = []
    for name in names:
        path = work / "models" / name / "model.json"
        if path.exists():
            runs.append(str(json.loads(path.read_text())["epochs_run"]))
    return f" (passes run: {', '.join(runs)})" if runs else ""


def unlearning_table(
    plan: Plan, results: Mapping[str, Result], work: Path, repeats: int
) -> list[str]:
    """Return Markdown: per claim and model state, DSR, Q/M, q̂, pairs left, FD, accuracies."""
    log = AuditLog(work / LOG).results
    m = plan.models[0].n_train
    rows: list[list[object]] = []
    for audit in dict.fromkeys(j.audit for j in plan.jobs):
        firsts = [j for j in plan.jobs if not j.model.clean and j.audit == audit]
        for state, label in STATES:
            names = [state_name(plan, j, state) for j in firsts]
            if state == "before":
                found = [log.get(j.key) or results.get(j.key) for j in firsts]
            else:
                found = [log.get(after_key(n, j)) for n, j in zip(names, firsts, strict=True)]
            records = [r for r in found if r is not None]
            cell = Cell(repeats, records)
            refused = sum(r["decision"] == "refused" for r in records)
            dsr = cell.dsr() + (f" ({refused} refused: no pair left)" if refused else "")
            draws = sum(int(str(r["draws"])) for r in records)
            q_m = f"{cell.q_over_m(m)} (q̂ {cell.q_hat()}, {draws} untied)"
            if state == "before":
                control = [
                    results.get(Job(clean_of(plan, j.model.seed), j.vault, audit).key)
                    for j in firsts
                ]
                done = [r for r in control if r is not None]
                hits = sum(r["decision"] == "detected" for r in done)
                fd = f"{hits}/{len(done)} (claim 1 on the clean model)"
                bound = f"p = {audit.p:g}"
            else:
                fd = "its DSR (never saw her items)" if state == "retrain" else "—"
                bound = f"({EARLIER_CLAIMS} + 1)·p = {(EARLIER_CLAIMS + 1) * audit.p:.2f}"
            accs = [log.get(accuracy_key(n, j)) for n, j in zip(names, firsts, strict=True)]
            known = [a for a in accs if a is not None]

            def acc(field: str, known: Sequence[Result] = known) -> str:
                return accuracy_summary([float(str(a[field])) for a in known])

            passes = _epochs_run(work, names) if state in ("ascent", "neggrad-plus") else ""
            rows.append(
                [
                    _claim_name(audit),
                    label + passes,
                    dsr,
                    q_m,
                    _pairs_left(records),
                    bound,
                    fd,
                    acc("retained_accuracy"),
                    acc("test_accuracy"),
                    acc("owner_accuracy"),
                ]
            )
    header = [
        "claim",
        "model state",
        "DSR",
        "Q/M (q̂, untied pairs)",
        "pairs left for the claim",
        "false-detection bound",
        "false detections (clean)",
        "accuracy: retained data",
        "test",
        "her items",
    ]
    return _table(header, rows)


#: What the unlearning table shows, above it in the results.
INTRO: Final = (
    "Auditing again after unlearning (the paper's §\"Toward Verifiable Machine "
    "Unlearning\"; the procedure is `docs/unlearning.md`), at rung (a) — the demo's regime "
    "(M = 2,000, the 1.62M-weight CNN, 500 epochs of Adam, pad-crop-flip) — with the marks "
    "`twinaudit owner mark` makes by default with labels (`pgdown`, ε = 10). Per "
    "experiment the owner files claim 1 against the used model (the ladder's claim, filed "
    "again to record the pairs it opened); the practitioner then unlearns, and she files "
    "claim 2 with the same score on fresh pairs (`excluded` = claim 1's opened pairs, "
    "spec §10.2 step 2; one claim nonce for every state, so each meets the same order of "
    "the pairs left). Each claim — C3 `dither` K = 1, the CLI's default claim for a "
    "labelled vault, and C1 on the same queries with the probability defaults (margin "
    "0.01, the graded test) — is its own scenario of two claims on the record, so "
    "claim 2 counts one earlier claim and is stated with the bound (1 + 1)·p = 0.10. "
    "States: (i) exact retraining is the "
    "ladder's clean model `-t1`: trained from scratch (its own initial weights, batches "
    "and augmentation, 500 epochs) on the 1,800 images the used model keeps plus 200 other "
    "Fashion-MNIST images in place of hers, so M stays 2,000 — a retraining without her "
    "data, not one on the 1,800 alone; (ii) the used model fine-tuned on the data it "
    f"keeps (its training set less her 200 published items) for {FINETUNE_EPOCHS} epochs "
    f"with the demo trainer's recipe at rate {FINETUNE_LR:g} (a tenth of its own); (iii) "
    f"gradient ascent on her 200 published items (Adam at {ASCENT_LR:g}, batches of "
    f"{ASCENT_BATCH}, the training augmentation), at most {ASCENT_EPOCHS} passes, stopped "
    "after the first pass that takes her items' accuracy down to the model's test "
    "accuracy before unlearning (about what a model that never saw them scores); (iii′) NegGrad+, "
    f"the same with each step also descending on {RETAIN_BATCH} retained images; (iv) no "
    "unlearning, the used model again: the control, what the pairs left can still detect "
    "in a model that kept her data. Each cell is over R experiments: DSR, Q/M over "
    "detecting experiments and q̂ over the untied pairs of all experiments (how many "
    "beside it); pairs left is N less claim 1's opened pairs (min–max over experiments). "
    "False detections: claim 1 against the clean model; for claim 2 the "
    "row (i) is the control — that model never saw her items, so each of its detections "
    "is a false one. Accuracies: on the retained data, the split's 2,000 test images and "
    "her 200 published items. **Not detected after unlearning is not proof of removal**: "
    "it says the test did not reach its threshold on the pairs it opened; a model that "
    "still holds her data can leave it undetected (weak memorisation, too few pairs left, "
    "a score that does not match the training, an oracle answering with another model)."
)


def section(plan: Plan, results: Mapping[str, Result], work: Path, repeats: int) -> list[str]:
    """Return the results document's lines for the unlearning table."""
    own = extra_models(plan)
    infos = [
        json.loads(p.read_text())
        for u in own
        if (p := work / "models" / u.name / "model.json").exists()
    ]
    seconds = sum(float(str(i["train_seconds"])) for i in infos)
    done = (
        f"Its own step (`evaluation.unlearning`): {len(infos)}/{len(own)} unlearned models "
        f"({seconds / 60:.1f} min of unlearning, summed over models)."
    )
    return [INTRO, "", done, "", *unlearning_table(plan, results, work, repeats)]
