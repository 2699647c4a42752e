"""Held-model isolation benchmark: what the sandbox and the signer process cost.

Run with ``python -m bench held``. Two figures, each a ratio measured in this run:

1. the start of a held model (a tiny TorchScript classifier: ``start_held`` until its
   ``Describe`` has answered, probe included) in its bubblewrap sandbox against the
   same start without bubblewrap (``--allow-weak-isolation``'s child: the same
   command, limits and Unix socket), alternated ROUNDS times; medians;
2. signatures per second on checkpoint payloads, through the signer process
   (:class:`~twinaudit.verifier.signer_process.ProcessSigner`: a pipe, strict decoding, the
   signature checked by the server) against an in-process signer doing the same check.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path

import torch

from twinaudit.protocol.escrow_messages import CHECKPOINT_KIND, Checkpoint
from twinaudit.protocol.keys import write_keypair
from twinaudit.verifier.oracles.held import ServeOptions, file_sha256, start_held
from twinaudit.verifier.oracles.sandbox import ChildLimits, SandboxPolicy, find_bwrap
from twinaudit.verifier.signer_process import ProcessSigner
from twinaudit.verifier.signing import arbiter_signer

ROUNDS = 5
SIGNATURES = 2000
OPTIONS = ServeOptions(name="tiny.ts", input_shape=(28, 28, 1), n_classes=10, max_batch=8)


def _model(folder: Path) -> Path:
    torch.manual_seed(0)
    net = torch.nn.Sequential(
        torch.nn.Conv2d(1, 4, 3), torch.nn.ReLU(), torch.nn.Flatten(), torch.nn.Linear(2704, 10)
    )
    path = folder / "tiny.ts"
    torch.jit.script(net).save(str(path))
    return path


def _start_seconds(model: Path, policy: SandboxPolicy) -> tuple[float, str]:
    started = time.perf_counter()
    oracle = start_held(model, OPTIONS, digest=file_sha256(model), policy=policy)
    seconds = time.perf_counter() - started
    isolation = oracle.isolation
    oracle.close()
    return seconds, isolation


def _starts(folder: Path) -> None:
    if find_bwrap(SandboxPolicy()) is None:
        print("start: bubblewrap is not installed here; nothing to compare")
        return
    model = _model(folder)
    limits = ChildLimits(start_s=120)
    sandboxed = SandboxPolicy(limits)
    weak = SandboxPolicy(limits, bwrap=str(folder / "no-bwrap"), allow_weak=True)
    times: dict[str, list[float]] = {"bubblewrap": [], "weak": []}
    for _ in range(ROUNDS):
        for policy in (sandboxed, weak):
            seconds, isolation = _start_seconds(model, policy)
            times[isolation].append(seconds)
    box, bare = (statistics.median(times[k]) for k in ("bubblewrap", "weak"))
    print(
        f"start to Describe, median of {ROUNDS}: in bubblewrap {box:.2f} s, "
        f"without {bare:.2f} s: {box / bare:.2f}x, {box - bare:+.2f} s"
    )


def _signatures(folder: Path) -> None:
    key = write_keypair(folder / "arbiter.key")
    local = arbiter_signer(key)
    remote = ProcessSigner.start(folder / "arbiter.key")
    payload = Checkpoint(local.key_id, 1, bytes(32), "2026-01-02T03:04:05Z").encode()
    rates = {}
    try:
        for name, signer in (("in process", local), ("signer process", remote)):
            started = time.perf_counter()
            for _ in range(SIGNATURES):
                signer.sign(payload, CHECKPOINT_KIND)
            rates[name] = SIGNATURES / (time.perf_counter() - started)
    finally:
        remote.close()
    print(
        f"checkpoint signatures/s: in process {rates['in process']:.0f}, through the signer "
        f"process {rates['signer process']:.0f} "
        f"({rates['in process'] / rates['signer process']:.2f}x the time each)"
    )


def main() -> None:
    """Print both figures."""
    with tempfile.TemporaryDirectory() as tmp:
        _signatures(Path(tmp))
        _starts(Path(tmp))


if __name__ == "__main__":
    main()
