"""Run ``python -m twinaudit`` as separate processes, as each role of a dispute would."""

from __future__ import annotations

import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

#: The repository root (the processes' working directory).
ROOT = Path(__file__).resolve().parents[2]


def cli(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """Run one ``twinaudit`` command to its end; return its outcome (raise if ``check`` fails)."""
    return subprocess.run(
        [sys.executable, "-m", "twinaudit", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=check,
    )


def serve(*args: str, ready: str) -> tuple[subprocess.Popen[str], str]:
    """Start a ``twinaudit`` server; return it and the last word of its line ``ready``."""
    process = subprocess.Popen(
        [sys.executable, "-m", "twinaudit", *args], cwd=ROOT, stdout=subprocess.PIPE, text=True
    )
    assert process.stdout is not None
    for line in process.stdout:
        if ready in line:
            return process, line.split()[-1]
    raise AssertionError(f"{args[0]} did not start")


def stop(process: subprocess.Popen[str]) -> None:
    """Stop a server with SIGTERM (SIGKILL after 30 s)."""
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        process.kill()


def stop_served(process: subprocess.Popen[str], timeout: float = 90) -> str:
    """Stop a server with SIGTERM, require exit status 0, and return its stderr.

    A server that has not left within ``timeout`` (slow teardowns on a loaded CI machine
    took over 20 s) is sent SIGABRT: one started with ``python -X faulthandler`` then
    prints every thread's stack, which the failure shows.
    """
    process.send_signal(signal.SIGTERM)
    try:
        _, err = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.send_signal(signal.SIGABRT)
        try:
            _, err = process.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            _, err = process.communicate()
        raise AssertionError(f"still serving {timeout} s after SIGTERM; stderr:\n{err}") from None
    finally:
        if process.returncode is None:
            process.kill()
            process.communicate()
    assert process.returncode == 0, err
    return str(err or "")


def serve_arbiter(directory: Path, *options: str) -> tuple[subprocess.Popen[str], str]:
    """Serve the arbiter of ``directory`` (its ``arbiter.key``, ``escrow.db``) on a free port."""
    return serve(
        "verifier",
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--db",
        str(directory / "escrow.db"),
        "--key",
        str(directory / "arbiter.key"),
        *options,
        ready="serving on",
    )


def serve_tiny_cnn(model: Path) -> tuple[subprocess.Popen[str], str]:
    """Serve a state dict of the tests' tiny CNN (10 classes) with ``oracle serve``."""
    return serve(
        "oracle",
        "serve",
        "--model",
        str(model),
        "--arch",
        "tests.support.models:tiny_cnn_16",
        "--n-classes",
        "10",
        "--threads",
        "1",
        "--listen",
        "127.0.0.1:0",
        ready="listening on",
    )


@contextmanager
def arbiter_process(directory: Path) -> Iterator[tuple[str, Path]]:
    """Make an arbiter key in ``directory`` and serve it; yield its address and public key."""
    cli("verifier", "keygen", "--key", str(directory / "arbiter.key"))
    process, address = serve_arbiter(directory)
    try:
        yield address, directory / "arbiter.key.pub"
    finally:
        stop(process)


def escrow_args(vault: Path, address: str, pub: Path) -> tuple[str, ...]:
    """Return ``owner escrow``'s arguments for ``vault`` with the arbiter at ``address``."""
    return ("owner", "escrow", str(vault), "--arbiter", address, "--arbiter-key", str(pub))


def claim_args(vault: Path, address: str, pub: Path, endpoint: str) -> tuple[str, ...]:
    """Return ``owner claim``'s arguments for a claim on ``vault`` against ``endpoint``."""
    return (
        "owner",
        "claim",
        str(vault),
        "--arbiter",
        address,
        "--arbiter-key",
        str(pub),
        "--oracle",
        endpoint,
    )


def check_and_replay(out: Path, pub: Path, decision: str) -> None:
    """Check ``out/verdict.json`` offline and replay it from ``out/transcript.bin``."""
    check = cli("verifier", "check", str(out / "verdict.json"), "--pubkey", str(pub))
    assert "VALID verdict" in check.stdout and decision in check.stdout, check.stdout
    replay = cli(
        "verifier",
        "replay",
        str(out / "verdict.json"),
        "--transcript",
        str(out / "transcript.bin"),
        "--pubkey",
        str(pub),
    )
    assert "identical to the verdict" in replay.stdout, replay.stdout
