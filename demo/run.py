"""Orchestrate the whole dispute, each role a subprocess of the ``twinaudit`` CLI.

Stages (each printed with the elapsed time, and timed for the report):

1. data: find Fashion-MNIST (:mod:`demo.data`) and split it: the owner's photos
   (10% of a practitioner's training set), the other 90% both practitioners have,
   and as many further images for the clean practitioner;
2. arbiter: ``verifier keygen`` and ``verifier serve`` on localhost;
3. owner: ``owner mark`` (the owner's photos → vault), ``owner escrow``, ``owner publish``;
4. practitioners: the *used* one trains on her 90% plus what the owner published, the
   *clean* one on her 90% plus other images (:mod:`demo.practitioner`, crop/flip);
   each serves her model with ``oracle serve``;
5. claims: ``owner claim`` against each model;
6. verification: ``twinaudit verify`` of both verdicts (signature, figures, replay);
7. report: ``report.md`` with plots (:mod:`demo.report`).

Servers are stopped on every exit path. The run fails (exit 1) if the used model is
not DETECTED, the clean one not NOT-DETECTED, or a check or replay fails; the
message says which.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import IO, Final

import numpy as np

from twinaudit.protocol.claim.verdict import check_verdict
from twinaudit.protocol.keys import load_public_key

from . import data as demo_data
from .report import ClaimOutcome, summary_line, write_report

#: The repository root (the CLI subprocesses run here so ``demo.models`` imports).
ROOT = Path(__file__).resolve().parent.parent
#: Seconds a server gets to print its address.
READY_TIMEOUT_S = 120.0
#: Seconds a stopped server gets before it is killed.
STOP_TIMEOUT_S = 20.0


@dataclass(frozen=True)
class Settings:
    """Everything the demo chooses; :data:`FULL` is ``make demo``, :data:`QUICK` a smoke run."""

    #: Images in each practitioner's training set, M.
    n_train: int
    #: The owner's L∞ bound on 0..255.
    epsilon: int
    #: ``owner mark --marker``.
    marker: str
    #: Training epochs of each practitioner.
    epochs: int
    #: Perturbed copies per version in the audit.
    k: int
    perturbation: str = "pad-shift-flip"
    #: C3: the oracle answers top labels only (``oracle serve --label-only``), the
    #: committed label is used; tied pairs (the same K labels for both twins) are skipped.
    knowledge: str = "C3"
    #: Serve labels only, as most deployments would (C3/C4 need nothing more).
    label_only: bool = True
    test: str = "mixture-e"
    p: float = 0.05
    batch_size: int = 128
    lr: float = 1e-3
    #: Seed of the data split and of both trainings (the arbiter's randomness is fresh).
    seed: int = 0
    #: torch threads per training (the two trainings run at the same time).
    threads: int = 1
    #: Fail unless used → DETECTED and clean → NOT-DETECTED (off for the quick run).
    check_decisions: bool = True
    #: The owner's share of a practitioner's training set, in percent (N = M·share/100).
    owner_percent: int = 10

    @property
    def n_owner(self) -> int:
        """N: the owner's photos, all marked, escrowed, published and in the used set."""
        return self.n_train * self.owner_percent // 100


#: The settings of ``make demo`` (docs/demo.md says why). p = 0.005 and N = 400 pairs make
#: both chance failures, a false and a missed detection, less likely than 0.5% per run
#: (:mod:`demo.reliability` computes them).
FULL = Settings(
    n_train=2000, epsilon=32, marker="bernoulli", epochs=500, k=32, p=0.005, owner_percent=20
)
#: Tiny sizes that exercise every stage in well under a minute (decisions not checked).
QUICK = Settings(n_train=200, epsilon=24, marker="bernoulli", epochs=2, k=4, check_decisions=False)


class DemoError(RuntimeError):
    """A stage failed; the message says which and why."""


def _stamp(start: float) -> str:
    elapsed = int(time.monotonic() - start)
    return f"[{elapsed // 60:2d}:{elapsed % 60:02d}]"


class _Job:
    """A running subprocess whose output is collected by two threads."""

    def __init__(
        self, name: str, argv: list[str], process: subprocess.Popen[str], log: Path
    ) -> None:
        self.name, self.argv, self.process, self.log = name, argv, process, log
        self.stdout: list[str] = []
        self.stderr: list[str] = []
        self.threads: list[threading.Thread] = []

    def pump(self, out: IO[str], echo: str | None) -> None:
        """Start collecting stdout and stderr (stderr also printed after ``echo``)."""

        def collect(stream: IO[str] | None, lines: list[str], prefix: str | None) -> None:
            assert stream is not None
            for line in stream:
                lines.append(line)
                if prefix is not None:
                    print(f"{prefix}{line.rstrip()}", file=out, flush=True)

        self.threads = [
            threading.Thread(target=collect, args=(self.process.stdout, self.stdout, None)),
            threading.Thread(target=collect, args=(self.process.stderr, self.stderr, echo)),
        ]
        for thread in self.threads:
            thread.daemon = True
            thread.start()

    def wait(self) -> subprocess.CompletedProcess[str]:
        """Wait for the process and its output; write the log; return the result."""
        self.process.wait()
        for thread in self.threads:
            thread.join()
        stdout, stderr = "".join(self.stdout), "".join(self.stderr)
        self.log.write_text(f"$ {' '.join(self.argv)}\n--- stdout\n{stdout}--- stderr\n{stderr}")
        return subprocess.CompletedProcess(self.argv, self.process.returncode, stdout, stderr)


class Runner:
    """Runs the stages, keeps their timings, and owns the server processes."""

    def __init__(self, run_dir: Path, settings: Settings, out: IO[str] = sys.stdout) -> None:
        """Prepare ``run_dir`` (created) and the clock."""
        self.run_dir = run_dir
        self.settings = settings
        self.out = out
        self.start = time.monotonic()
        self.timings: list[tuple[str, float]] = []
        self.servers: list[subprocess.Popen[str]] = []
        self.jobs: list[_Job] = []
        self.logs = run_dir / "logs"
        self.logs.mkdir(parents=True, exist_ok=True)
        self.env = dict(os.environ, PYTHONUNBUFFERED="1")
        self.env["PYTHONPATH"] = os.pathsep.join(
            p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p
        )

    def say(self, message: str) -> None:
        """Print ``message`` with the elapsed time."""
        print(f"{_stamp(self.start)} {message}", file=self.out, flush=True)

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        """Announce, time and record one stage."""
        self.say(f"== {name}")
        began = time.monotonic()
        yield
        took = time.monotonic() - began
        self.timings.append((name, took))
        self.say(f"   {name}: done in {took:.1f} s")

    # -- subprocesses --------------------------------------------------------------

    def start_job(self, log_name: str, argv: Sequence[str], *, echo: str | None = None) -> _Job:
        """Start ``argv``, collecting its output; stderr is also shown after ``echo``."""
        process = subprocess.Popen(
            list(argv),
            cwd=ROOT,
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        job = _Job(log_name, list(argv), process, self.logs / f"{log_name}.log")
        self.jobs.append(job)
        job.pump(self.out, echo)
        return job

    def finish_job(self, job: _Job, *, check: bool = True) -> subprocess.CompletedProcess[str]:
        """Wait for ``job``, write its log; raise :class:`DemoError` if it failed and ``check``."""
        result = job.wait()
        self.jobs.remove(job)
        if check and result.returncode != 0:
            tail = (result.stderr or result.stdout).strip().splitlines()[-5:]
            raise DemoError(
                f"{job.name} failed (exit {result.returncode}): "
                + " | ".join(tail)
                + f" (see {job.log})"
            )
        return result

    def command(
        self, log_name: str, argv: Sequence[str], *, echo: bool = False, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        """Run ``argv`` to completion, logging both streams to ``logs/<log_name>.log``.

        With ``echo`` its standard error (the progress lines) is also shown, indented.
        Raises :class:`DemoError` on a non-zero exit when ``check``.
        """
        job = self.start_job(log_name, argv, echo="      " if echo else None)
        return self.finish_job(job, check=check)

    def cli(self, log_name: str, *args: str, **kwargs: bool) -> subprocess.CompletedProcess[str]:
        """Run ``twinaudit ARGS`` (see :meth:`command`)."""
        return self.command(log_name, [sys.executable, "-m", "twinaudit", *args], **kwargs)

    def serve(self, log_name: str, args: Sequence[str], ready: str) -> str:
        """Start a ``twinaudit`` server; return the address it prints after ``ready``."""
        log = (self.logs / f"{log_name}.log").open("w")
        process = subprocess.Popen(
            [sys.executable, "-m", "twinaudit", *args],
            cwd=ROOT,
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=log,
            text=True,
        )
        self.servers.append(process)
        assert process.stdout is not None
        timer = threading.Timer(READY_TIMEOUT_S, process.kill)
        timer.start()
        try:
            for line in process.stdout:
                log.write(line)
                log.flush()
                if ready in line:
                    address = line.split()[-1]
                    threading.Thread(target=_drain, args=(process.stdout, log), daemon=True).start()
                    return address
        finally:
            timer.cancel()
        raise DemoError(f"{log_name} did not start (exit {process.wait()}; see {log.name})")

    def stop_servers(self) -> None:
        """Stop every server (and unfinished job) this runner started.

        SIGTERM first, SIGKILL after :data:`STOP_TIMEOUT_S`.
        """
        self.servers.extend(job.process for job in self.jobs)
        self.jobs.clear()
        for process in self.servers:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in self.servers:
            try:
                process.wait(timeout=STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        self.servers.clear()


def _drain(stream: IO[str], log: IO[str]) -> None:
    for line in stream:
        log.write(line)
        log.flush()


def _practitioner_set(
    run_dir: Path, name: str, parts: Sequence[tuple[np.ndarray, np.ndarray]]
) -> tuple[Path, Path]:
    """Write a practitioner's training set (images .npy, labels .npy); return the paths."""
    folder = run_dir / "practitioners" / name
    folder.mkdir(parents=True, exist_ok=True)
    images = np.concatenate([p[0].reshape(len(p[0]), 28, 28) for p in parts])
    labels = np.concatenate([np.asarray(p[1], dtype=np.int64) for p in parts])
    np.save(folder / "train-images.npy", images)
    np.save(folder / "train-labels.npy", labels)
    return folder / "train-images.npy", folder / "train-labels.npy"


@dataclass
class Dispute:
    """What the stages hand each other: paths, addresses and results."""

    runner: Runner
    split: demo_data.Split | None = None
    source: str = ""
    arbiter: str = ""
    pubkey: Path = Path()
    vault: Path = Path()
    endpoints: dict[str, str] = field(default_factory=dict)
    models: dict[str, dict[str, object]] = field(default_factory=dict)
    decisions: dict[str, str] = field(default_factory=dict)
    outcomes: list[ClaimOutcome] = field(default_factory=list)

    @property
    def run_dir(self) -> Path:
        """The run directory."""
        return self.runner.run_dir

    @property
    def settings(self) -> Settings:
        """The demo's settings."""
        return self.runner.settings


def stage_data(d: Dispute, data_path: Path | None) -> None:
    """Find Fashion-MNIST and write the owner's and the practitioners' sets."""
    folder = demo_data.locate(data_path, log=d.runner.say)
    d.source = str(folder)
    d.runner.say(f"   Fashion-MNIST from {folder}")
    s = d.settings
    d.split = demo_data.write_split(
        demo_data.load(folder),
        d.run_dir / "data",
        n_train=s.n_train,
        seed=s.seed,
        owner_percent=s.owner_percent,
    )


def stage_arbiter(d: Dispute) -> None:
    """Make the arbiter's key and start its server."""
    folder = d.run_dir / "arbiter"
    folder.mkdir(exist_ok=True)
    key = folder / "arbiter.key"
    d.pubkey = folder / "arbiter.key.pub"
    d.runner.cli("verifier-keygen", "verifier", "keygen", "--key", str(key))
    d.arbiter = d.runner.serve(
        "verifier-serve",
        [
            *("verifier", "serve", "--listen", "127.0.0.1:0"),
            *("--db", str(folder / "escrow.db"), "--key", str(key)),
        ],
        ready="serving on",
    )
    d.runner.say(f"   arbiter serving on {d.arbiter}")


def stage_mark(d: Dispute) -> None:
    """Mark the owner's photos into her vault (``owner mark``)."""
    assert d.split is not None
    s = d.settings
    d.vault = d.run_dir / "owner" / "vault"
    result = d.runner.cli(
        "owner-mark",
        *("owner", "mark", str(d.split.owner_images), "--labels", str(d.split.owner_labels)),
        *("--out", str(d.vault), "--marker", s.marker, "--epsilon", str(s.epsilon)),
        *("--seed", f"twinaudit demo {s.seed}"),
        echo=True,
    )
    d.runner.say("   " + result.stdout.strip().splitlines()[-1])


def stage_escrow_publish(d: Dispute) -> Path:
    """Escrow the vault's commitments, then publish; return the publication folder."""
    owner = d.run_dir / "owner"
    result = d.runner.cli(
        "owner-escrow",
        *("owner", "escrow", str(d.vault), "--arbiter", d.arbiter),
        *("--arbiter-key", str(d.pubkey), "--owner", "demo owner"),
        *("--receipt", str(owner / "receipt.json")),
    )
    d.runner.say("   " + result.stdout.strip().splitlines()[-1])
    published = owner / "published"
    d.runner.cli("owner-publish", "owner", "publish", str(d.vault), "--out", str(published))
    d.runner.say(f"   published {d.settings.n_owner} images in {published}")
    return published


def stage_train(d: Dispute, sets: Mapping[str, tuple[Path, Path]]) -> None:
    """Train every practitioner's model on her set (crop/flip), all at the same time.

    Each training is its own process with ``threads`` torch threads (one each on the
    2-core machine: two single-threaded trainings run about 1.5 times faster than two
    two-threaded ones in turn). Each writes ``model.pt`` and ``model.json``.
    """
    assert d.split is not None
    s = d.settings
    jobs = []
    for name, (images, labels) in sets.items():
        argv = [
            *(sys.executable, "-m", "demo.practitioner"),
            *("--images", str(images), "--labels", str(labels)),
            *("--out", str(images.parent / "model.pt")),
            *("--epochs", str(s.epochs), "--seed", str(s.seed), "--threads", str(s.threads)),
            *("--batch-size", str(s.batch_size), "--lr", str(s.lr)),
            *("--test-images", str(d.split.test_images)),
            *("--test-labels", str(d.split.test_labels)),
        ]
        jobs.append((name, d.runner.start_job(f"train-{name}", argv, echo=f"      {name:>5}: ")))
    for name, job in jobs:
        d.runner.finish_job(job)
        d.models[name] = json.loads((sets[name][0].parent / "model.json").read_text())


def stage_serve(d: Dispute, name: str) -> None:
    """Expose one practitioner's model through ``twinaudit oracle serve``."""
    d.endpoints[name] = d.runner.serve(
        f"oracle-{name}",
        [
            *("oracle", "serve", "--model", str(d.run_dir / "practitioners" / name / "model.pt")),
            *("--arch", "demo.models:make_net", "--n-classes", "10", "--threads", "1"),
            *("--name", f"{name}-practitioner", "--listen", "127.0.0.1:0"),
            *(("--label-only",) if d.settings.label_only else ()),
        ],
        ready="listening on",
    )
    d.runner.say(f"   {name} model served on {d.endpoints[name]}")


def stage_claim(d: Dispute, name: str) -> None:
    """File the owner's claim against one model; keep the decision it printed first."""
    s = d.settings
    result = d.runner.cli(
        f"claim-{name}",
        *("owner", "claim", str(d.vault), "--arbiter", d.arbiter),
        *("--arbiter-key", str(d.pubkey), "--oracle", d.endpoints[name]),
        *("--model-name", f"{name}-practitioner", "--knowledge", s.knowledge),
        *("--k", str(s.k), "--perturbation", s.perturbation, "--test", s.test),
        *("--p", str(s.p), "--out", str(d.run_dir / "claims" / name)),
        echo=True,
    )
    d.decisions[name] = decision_of(result.stdout)
    d.runner.say(f"   {result.stdout.strip()}")


#: The decision that starts ``owner claim``'s summary line ("DETECTED (stop: ...): ...").
_DECISION: Final = re.compile(r"\s*(NOT-DETECTED|DETECTED)\b")


def decision_of(claim_stdout: str) -> str:
    """Return the decision ``owner claim`` printed first, or what it printed instead.

    The word alone: whatever follows it (the stop reason, the claim id) may change
    without changing the decision the demo checks.
    """
    match = _DECISION.match(claim_stdout)
    if match:
        return match.group(1)
    first = claim_stdout.strip().splitlines()[:1]
    return f"no decision (the claim printed {first[0]!r})" if first else "no decision"


def stage_verify(d: Dispute, name: str) -> None:
    """Verify one verdict as anyone could: its signature, its figures and its replay."""
    folder = d.run_dir / "claims" / name
    verdict = folder / "verdict.json"
    verify = d.runner.cli(
        f"verify-{name}",
        *("verify", str(verdict), "--pubkey", str(d.pubkey)),
        *("--transcript", str(folder / "transcript.bin"), "--html", str(folder / "verdict.html")),
        check=False,
    )
    d.outcomes.append(
        ClaimOutcome(
            practitioner=name,
            verdict=check_verdict(verdict.read_bytes(), load_public_key(d.pubkey)),
            verified=verify.returncode == 0 and verify.stdout.startswith("VERIFIED verdict"),
            verify_output=verify.stdout + verify.stderr,
            training_set_size=d.settings.n_train,
            expected=EXPECTED[name],
            model=d.models.get(name, {}),
        )
    )
    d.runner.say(f"   verify {name}: {(verify.stdout or verify.stderr).strip()}")


#: What each claim must decide.
EXPECTED: Final = {"used": "DETECTED", "clean": "NOT-DETECTED"}


def problems_of(
    decisions: Mapping[str, str], outcomes: Sequence[ClaimOutcome], *, check_decisions: bool
) -> list[str]:
    """Return what went against expectations (empty when the demo succeeded)."""
    problems = []
    for outcome in outcomes:
        if not outcome.verified:
            problems.append(f"twinaudit verify of the {outcome.practitioner} verdict failed")
    if check_decisions:
        for name, expected in EXPECTED.items():
            got = decisions.get(name, "no decision")
            if got != expected:
                data = "with" if name == "used" else "without"
                problems.append(
                    f"the {name} model (trained {data} the published data) was {got}, "
                    f"expected {expected}"
                )
    return problems


def run_demo(
    run_dir: Path, settings: Settings, *, data_path: Path | None = None, out: IO[str] = sys.stdout
) -> int:
    """Run the whole dispute into ``run_dir``; return the exit status.

    0: every stage ran and every expectation held; 1: a stage failed or an
    expectation did not hold (the message says which); 2: no Fashion-MNIST.
    """
    runner = Runner(run_dir, settings, out)
    d = Dispute(runner)
    s = settings
    runner.say(f"run directory {run_dir}")
    runner.say(
        f"settings: {s.n_train} training images per practitioner, owner share "
        f"{s.n_owner}, {s.marker} marks eps={s.epsilon}, {s.epochs} epochs with "
        f"crop/flip, audit K={s.k} {s.perturbation} {s.knowledge} {s.test}"
    )
    (run_dir / "settings.json").write_text(json.dumps(asdict(s), indent=2))
    try:
        with runner.stage("data"):
            stage_data(d, data_path)
        with runner.stage("arbiter: keygen, serve"):
            stage_arbiter(d)
        with runner.stage("owner: mark"):
            stage_mark(d)
        with runner.stage("owner: escrow, publish"):
            published = stage_escrow_publish(d)
        assert d.split is not None
        pub_set = demo_data.read_published(published, d.split.owner_images.name)
        shared = (np.load(d.split.shared_images), np.load(d.split.shared_labels))
        extra = (np.load(d.split.clean_images), np.load(d.split.clean_labels))
        sets = {
            "used": _practitioner_set(run_dir, "used", [shared, pub_set]),
            "clean": _practitioner_set(run_dir, "clean", [shared, extra]),
        }
        with runner.stage("practitioners: train (in parallel)"):
            stage_train(d, sets)
        with runner.stage("practitioners: oracle serve"):
            for name in sets:
                stage_serve(d, name)
        for name in sets:
            with runner.stage(f"owner: claim against the {name} model"):
                stage_claim(d, name)
        runner.stop_servers()
        with runner.stage("anyone: twinaudit verify"):
            for name in sets:
                stage_verify(d, name)
        problems = problems_of(d.decisions, d.outcomes, check_decisions=s.check_decisions)
        with runner.stage("report"):
            report = write_report(
                run_dir,
                settings=_settings_table(s, d.source, quick=not s.check_decisions),
                outcomes=d.outcomes,
                timings=runner.timings,
                problems=problems,
                decisions_checked=s.check_decisions,
                meaning=p_meaning(s),
            )
    except demo_data.DataNotFoundError as exc:
        runner.say(f"FAILED: {exc}")
        return 2
    except DemoError as exc:
        runner.say(f"FAILED: {exc}")
        return 1
    finally:
        runner.stop_servers()
    total = time.monotonic() - runner.start
    print("\n== summary", file=out)
    for outcome in d.outcomes:
        print(summary_line(outcome), file=out)
    for name, info in d.models.items():
        print(f"{name:>5} model: " + ", ".join(f"{k} {v}" for k, v in info.items()), file=out)
    print(f"report: {report}", file=out)
    print(f"total {total:.0f} s ({total / 60:.1f} min)", file=out)
    print(p_meaning(s)[0], file=out)
    if not s.check_decisions:
        print(
            "quick run: decisions NOT checked at this size (the models are far too small); "
            "a decision that differs from the expected one is reported as unmet",
            file=out,
        )
    for problem in problems:
        print(f"FAILED: {problem}", file=out)
    if problems:
        return 1
    print("OK: " + ("all stages ran" if not s.check_decisions else "as expected"), file=out)
    return 0


def p_meaning(s: Settings) -> list[str]:
    """Return what the bound p means for the clean model's verdict (and the used one's).

    The first paragraph is also the terminal's; the figures are exact
    (:mod:`demo.reliability`).
    """
    from .reliability import reliability  # noqa: PLC0415 - it imports this module

    r = reliability(s)
    first = (
        f"p = {s.p} is a bound fixed before the claim: a model that never saw the published "
        f"twins is DETECTED with probability at most {s.p:g} per claim (here at most "
        f"{r.false_detection:.2%}: the exact probability that {s.n_owner} fair coins, one per "
        "pair, cross the test's boundary). The clean model's "
        "NOT-DETECTED is what such a model gets; it is not a finding that the model did not "
        "use the data."
    )
    second = (
        "A DETECTED verdict means: had the model not seen the published twins, a result at "
        f"least this strong would have had probability below p = {s.p:g}. NOT-DETECTED "
        "means only that the owner's pairs did not show it; a model trained on the data "
        "can go undetected too"
    )
    if s.check_decisions:
        second += (
            f" (this demo's chance of that: {r.missed_detection:.2%} per run, at a success "
            f"rate q = {r.q} on the {r.untied:.0%} of pairs that do not tie, below what "
            "the demo's used models measured; `python -m demo --reliability`)."
        )
    else:
        second += " (the quick run's models are far too small to show anything)."
    return [first, second]


def _settings_table(s: Settings, source: str, *, quick: bool) -> dict[str, object]:
    table: dict[str, object] = {
        "run": "QUICK (tiny sizes; decisions not checked)" if quick else "full",
        "data": f"Fashion-MNIST from `{source}`",
        "practitioner training set": f"M = {s.n_train} images",
        "owner's share": f"N = {s.n_owner} images = published pairs ({s.owner_percent}% of M)",
        "marks": f"{s.marker}, ε = {s.epsilon}/255",
        "model": "`demo.models:make_net`: conv 16, conv 32, fc 1024, fc 10 (1.62M weights)",
        "training": f"{s.epochs} epochs, Adam lr {s.lr} with cosine decay, batch "
        f"{s.batch_size}, pad-4 random crop + horizontal flip, seed {s.seed}",
        "oracle": "top label only (`--label-only`)" if s.label_only else "probabilities",
        "audit": f"K = {s.k} copies per version, `{s.perturbation}`, knowledge {s.knowledge}",
        "test": f"`{s.test}`, p = {s.p}, ties skipped",
    }
    return table


def with_overrides(settings: Settings, **changes: object) -> Settings:
    """Return ``settings`` with the non-None ``changes`` applied."""
    return replace(settings, **{k: v for k, v in changes.items() if v is not None})  # type: ignore[arg-type]
