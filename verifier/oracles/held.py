"""Arbiter-held models: artefacts the arbiter stores by SHA-256 and runs in a child process.

A court-ordered audit can hand the model itself to the arbiter. The arbiter registers
the file (:meth:`ArtefactStore.add`, ``twinaudit verifier model add``): it is copied
into the store under its SHA-256, ``MODELS/<hex>/artefact<suffix>``, beside
``serve.json``, the options it is served with (:class:`ServeOptions`: kind, format,
``--arch``, input shape, normalisation, batch). A claim names it by the address
``held:sha256:<hex>`` (:func:`parse_held_address`), and the verifier then runs it
itself (:func:`dial_held`), never reaching the practitioner:

- in a **child process** it starts for the claim and stops when the claim ends:
  ``python -m twinaudit oracle serve`` on the stored file, in a bubblewrap sandbox
  under resource limits (:mod:`twinaudit.verifier.oracles.sandbox`), on a Unix socket,
  queried over ``twinaudit.oracle.v1`` by
  :class:`~twinaudit.verifier.oracles.grpc_client.GrpcOracle`. The child is the very command a
  practitioner runs, so it loads every format ``oracle serve`` loads and runs the
  same probe forward pass at start (a model that does not fit never answers a
  query); the model's code (a pickle's, an ``--arch`` callable's) sees neither the
  signing key (held by the signer process), the store, the arbiter's processes nor
  the network; and the child's torch settings are its own;
- under the **CPU-determinism conditions** that ``verifier reexecute`` needs
  (:data:`HELD_THREADS` thread, ``--deterministic``: the child calls
  ``torch.use_deterministic_algorithms(True)`` and reports the torch version, the
  CPU capability torch dispatches to and the thread count in its framework text);
- with the **artefact's SHA-256** as the model digest of its Describe map
  (:class:`HeldOracle`), checked against the stored file each time it is started;
- after the **caps** of :mod:`twinaudit.verifier.oracles.artefact_limits` (file size, zip
  ratio, declared inputs), checked by :meth:`ArtefactStore.add` before it loads.

:func:`start_held` is what ``verifier reexecute`` uses to run a model file the
same way. Errors: a malformed address is an :class:`~twinaudit.protocol.errors.InputError`, an
artefact the store does not hold a :class:`~twinaudit.protocol.errors.NotFoundError`, a model
that does not start an :class:`~twinaudit.protocol.errors.OracleError` naming the child's
one-line error.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import queue
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Final

from twinaudit.protocol.errors import InputError, NotFoundError, OracleError
from twinaudit.protocol.oracles.base import OracleInfo
from twinaudit.protocol.oracles.model_inputs import check_input_shape
from twinaudit.wire import transport

from ..children import stop_child
from .artefact_limits import check_artefact
from .grpc_client import GrpcOracle
from .sandbox import (
    SOCKET_NAME,
    SandboxPolicy,
    arch_modules,
    artefact_path,
    child_command,
    socket_path,
)
from .sandbox import policy as sandbox_policy

#: How an address names an arbiter-held artefact: ``held:sha256:<64 lowercase hex>``.
HELD_PREFIX: Final = "held:"
_HELD_ADDRESS: Final = re.compile(r"held:sha256:([0-9a-f]{64})")
#: CPU threads the child's torch (and onnxruntime) runs on; reexecute uses the same.
HELD_THREADS: Final = 1
#: Kinds of model an arbiter holds (the image oracles of ``oracle serve``).
HELD_KINDS: Final = ("classifier", "encoder")
#: Seconds a child gets to stop once its stdin is closed, then after SIGTERM.
STOP_TIMEOUT_S: Final = 10.0
#: The options file beside each artefact.
OPTIONS_FILE: Final = "serve.json"


def is_held_address(endpoint: str) -> bool:
    """Tell whether ``endpoint`` is meant as an arbiter-held artefact (``held:…``)."""
    return endpoint.startswith(HELD_PREFIX)


def parse_held_address(endpoint: str) -> str:
    """Return the hex SHA-256 that a ``held:sha256:<hex>`` address names (else ``InputError``)."""
    match = _HELD_ADDRESS.fullmatch(endpoint)
    if match is None:
        raise InputError(
            f"an arbiter-held model is named held:sha256:<64 lowercase hex digits>, "
            f"not {endpoint[:100]!r}"
        )
    return match.group(1)


def held_address(digest: str) -> str:
    """Return the address that names the artefact of SHA-256 ``digest`` (hex)."""
    return f"{HELD_PREFIX}sha256:{digest}"


def file_sha256(path: Path) -> str:
    """Return the hex SHA-256 of a file's bytes."""
    with path.open("rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


@dataclass(frozen=True)
class ServeOptions:
    """How an artefact is served: the options of ``oracle serve`` that an arbiter sets.

    ``kind`` is ``classifier`` or ``encoder``; ``model_format``, ``arch`` and
    ``trust_pickle`` say how the file loads (:mod:`twinaudit.practitioner.formats`);
    ``input_shape`` (H, W, C) is probed at start (None: the shape the file declares);
    ``n_classes`` is checked by the probe; ``mean``/``std`` normalise the inputs;
    ``max_batch`` bounds a request and a forward pass; ``name`` is the model name the
    oracle reports.
    """

    name: str
    kind: str = "classifier"
    model_format: str | None = None
    arch: str | None = None
    trust_pickle: bool = False
    input_shape: tuple[int, int, int] | None = None
    n_classes: int | None = None
    mean: tuple[float, ...] | None = None
    std: tuple[float, ...] | None = None
    max_batch: int = 256

    def __post_init__(self) -> None:
        """Refuse a kind the arbiter does not hold and out-of-range numbers."""
        if self.kind not in HELD_KINDS:
            raise InputError(f"an arbiter holds {' or '.join(HELD_KINDS)} models, not {self.kind}")
        if not 1 <= self.max_batch <= 4096:
            raise InputError(f"max batch {self.max_batch} outside 1..4096")
        if not self.name or len(self.name.encode()) > 256:
            raise InputError("a held model's name is 1..256 bytes of text")
        if self.input_shape is not None:
            check_input_shape(self.input_shape)

    def serve_args(self, model: Path) -> list[str]:
        """Return the ``oracle serve`` arguments that serve ``model`` with these options."""
        args = ["--kind", self.kind, "--model", str(model), "--name", self.name]
        args += ["--max-batch", str(self.max_batch)]
        if self.model_format is not None:
            args += ["--format", self.model_format]
        if self.arch is not None:
            args += ["--arch", self.arch]
        if self.trust_pickle:
            args.append("--trust-pickle")
        if self.input_shape is not None:
            args += ["--input-shape", ",".join(map(str, self.input_shape))]
        if self.n_classes is not None:
            args += ["--n-classes", str(self.n_classes)]
        if self.mean is not None:
            args += ["--mean", *map(repr, self.mean)]
        if self.std is not None:
            args += ["--std", *map(repr, self.std)]
        return args

    def to_json(self) -> str:
        """Return the options as the JSON text of ``serve.json``."""
        return json.dumps(dataclasses.asdict(self), indent=2, sort_keys=True) + "\n"

    @classmethod
    def from_json(cls, text: str) -> ServeOptions:
        """Read ``serve.json`` (``InputError`` if it is not what :meth:`to_json` writes)."""
        try:
            value = json.loads(text)
            fields = {f.name for f in dataclasses.fields(cls)}
            if not isinstance(value, dict) or not set(value) <= fields:
                raise ValueError("unexpected keys")
            for key in ("input_shape", "mean", "std"):
                if value.get(key) is not None:
                    value[key] = tuple(value[key])
            return cls(**value)
        except (ValueError, TypeError) as exc:
            raise InputError(f"unreadable held-model options: {exc}") from None


@dataclass(frozen=True)
class Artefact:
    """A stored artefact: its SHA-256 (hex), its file and how it is served."""

    digest: str
    path: Path
    options: ServeOptions

    @property
    def address(self) -> str:
        """Return the address a claim names it by (``held:sha256:<hex>``)."""
        return held_address(self.digest)


class ArtefactStore:
    """The arbiter's model artefacts, one folder per SHA-256 under ``root``."""

    def __init__(self, root: Path) -> None:
        """Use the folder ``root`` (created by :meth:`add` when missing)."""
        self.root = Path(root)

    def add(self, file: Path, options: ServeOptions) -> tuple[Artefact, OracleInfo]:
        """Copy ``file`` into the store, start it once (the probe), and return it.

        The model must start as a held child would, with an input shape to probe (given
        or declared by the file); otherwise nothing is stored. Adding a file already
        stored replaces its options. Returns the artefact and the child's description.
        """
        if not file.is_file():
            raise InputError(f"model file {str(file)!r} does not exist")
        digest = file_sha256(file)
        self.root.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=".adding-", dir=self.root))
        try:
            stored = staging / f"artefact{file.suffix.lower()}"
            shutil.copyfile(file, stored)
            if file_sha256(stored) != digest:
                raise InputError(f"{str(file)!r} changed while it was copied")
            check_artefact(stored)  # size, zip ratio, declared inputs: before any loading
            (staging / OPTIONS_FILE).write_text(options.to_json(), encoding="utf-8")
            oracle = start_held(stored, options, digest=digest)
            try:
                info = oracle.info
            finally:
                oracle.close()
            if not info.input_shape:
                raise InputError(
                    "an arbiter-held model is probed at start: give --input-shape H,W,C "
                    "(or a file that declares its input shape)"
                )
            target = self.root / digest
            if target.exists():
                shutil.rmtree(target)
            staging.rename(target)
        finally:
            if staging.exists():
                shutil.rmtree(staging)
        return self.get(digest), info

    def get(self, digest: str) -> Artefact:
        """Return the stored artefact of SHA-256 ``digest``, its file checked against it."""
        folder = self.root / digest
        files = sorted(folder.glob("artefact*")) if folder.is_dir() else []
        if len(files) != 1 or not (folder / OPTIONS_FILE).is_file():
            raise NotFoundError(f"the arbiter holds no model artefact sha256:{digest}")
        if file_sha256(files[0]) != digest:
            raise OracleError(
                "unreachable", f"the stored artefact sha256:{digest} no longer has that digest"
            )
        options = ServeOptions.from_json((folder / OPTIONS_FILE).read_text(encoding="utf-8"))
        return Artefact(digest, files[0], options)

    def list(self) -> list[Artefact]:
        """Return every stored artefact (by digest)."""
        if not self.root.is_dir():
            return []
        found = []
        for folder in sorted(self.root.iterdir()):
            if re.fullmatch(r"[0-9a-f]{64}", folder.name):
                found.append(self.get(folder.name))
        return found


class _Child:
    """A running ``oracle serve`` child in its sandbox: its process, socket and stderr file."""

    def __init__(
        self, model: Path, options: ServeOptions, threads: int, policy: SandboxPolicy
    ) -> None:
        """Start the child and wait until it says where it listens and what it serves."""
        limits = policy.limits
        self._sockets = Path(tempfile.mkdtemp(prefix="twinaudit-held-"))
        inside = Path(artefact_path(model.suffix))
        python_args = [
            "-m",
            "twinaudit",
            "oracle",
            "serve",
            *options.serve_args(inside),
            "--listen",
            f"unix:{socket_path()}",
            "--threads",
            str(threads),
            "--deterministic",
            "--log-level",
            "warning",
            "--stop-on-eof",
            "--limits",
            limits.as_argument(),
        ]
        self._stderr: IO[bytes] = tempfile.TemporaryFile()  # noqa: SIM115 - closed by stop()
        try:
            # An --arch callable's module is imported from the working folder, as oracle
            # serve imports it: that module alone is bound into the sandbox.
            command = child_command(
                python_args,
                artefact=model.resolve(),
                socket_dir=self._sockets,
                modules=arch_modules(options.arch, Path.cwd()),
                threads=threads,
                policy=policy,
            )
            self.isolation = command.isolation
            self.process = command.spawn(
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr
            )
        except BaseException:  # refused (no bubblewrap) or not started: nothing left behind
            self._stderr.close()
            shutil.rmtree(self._sockets, ignore_errors=True)
            raise
        # The lifetime limit: the parent kills a child that outlives it (wall time).
        self._outlived = threading.Event()
        self._lifetime = threading.Timer(limits.lifetime_s, self._kill_outlived)
        self._lifetime.daemon = True
        self._lifetime.start()
        lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._read, args=(lines,), daemon=True).start()
        self.address = ""
        deadline = time.monotonic() + limits.start_s
        try:
            while True:
                try:
                    line = lines.get(timeout=max(0.0, deadline - time.monotonic()))
                except queue.Empty:
                    raise OracleError(
                        "unreachable",
                        f"the held model did not start within {limits.start_s:g} s",
                    ) from None
                if line is None and self._outlived.is_set():
                    # Killed at its lifetime, which is at least its start time: the same
                    # failure as the start deadline's, whichever of the two came first.
                    raise OracleError(
                        "unreachable",
                        f"the held model did not start within {limits.start_s:g} s",
                    )
                if line is None:
                    raise OracleError(
                        "unreachable", f"the held model did not start: {self._error_line()}"
                    )
                if line.startswith("listening on unix:"):  # the path of the child's side
                    self.address = f"unix:{self._sockets / SOCKET_NAME}"
                elif line.startswith("model ") and self.address:
                    return
        except BaseException:
            self.process.kill()  # a start that failed or ran out of time: not waited for
            self.stop()
            raise

    def _kill_outlived(self) -> None:
        """Kill the child at the end of its lifetime, and remember why it ended."""
        self._outlived.set()
        self.process.kill()

    def _read(self, lines: queue.Queue[str | None]) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            lines.put(line.strip())
        lines.put(None)

    def _error_line(self) -> str:
        """Return the child's last ``twinaudit`` line on stderr (or how it ended)."""
        try:
            self.process.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self._stderr.seek(0)
        text = self._stderr.read(_MAX_STDERR_BYTES).decode("utf-8", "replace")
        # The child's own error line, or bubblewrap's (a host without user namespaces).
        found = [
            line.strip()[:_MAX_ERROR_CHARS]
            for line in text.splitlines()
            if line.startswith(("twinaudit:", "bwrap:"))
        ]
        return found[-1] if found else _ended(self.process.returncode)

    def stop(self) -> None:
        """Stop the child (stdin closed, then SIGTERM, then SIGKILL) and release its files."""
        _stop_process(self.process, self._stderr, self._lifetime, self._sockets)


#: Most bytes of a child's stderr read for its error line.
_MAX_STDERR_BYTES: Final = 1 << 20
#: Most characters of that line reported.
_MAX_ERROR_CHARS: Final = 2000


def _ended(status: int | None) -> str:
    """Say how a child ended: its exit status, or the signal (a limit) that killed it.

    bubblewrap exits with 128 + N when its child was killed by signal N.
    """
    if status is not None and 128 < status < 128 + signal.NSIG:
        status = 128 - status
    if status is not None and status < 0:
        name = signal.Signals(-status).name
        reason = {
            "SIGKILL": " (killed: out of its wall time, or of memory)",
            "SIGXCPU": " (its CPU-time limit)",
            "SIGXFSZ": " (its file-size limit)",
        }.get(name, "")
        return f"killed by {name}{reason}"
    return f"exit status {status}"


def _stop_process(
    process: subprocess.Popen[str],
    stderr: IO[bytes],
    lifetime: threading.Timer,
    sockets: Path,
) -> None:
    lifetime.cancel()
    stop_child(process, STOP_TIMEOUT_S)  # the child stops at EOF, else is signalled
    stderr.close()
    shutil.rmtree(sockets, ignore_errors=True)


class HeldOracle(GrpcOracle):
    """A model the arbiter runs in a child process, described by its artefact's SHA-256.

    Its description is the child's ``Describe`` answer with ``model_digest`` set to
    the artefact's hex SHA-256. :meth:`close` stops the child (also done when the
    oracle is garbage-collected, and when this process exits: the child watches it).
    """

    def __init__(
        self,
        model: Path,
        options: ServeOptions,
        *,
        digest: str,
        threads: int = HELD_THREADS,
        timeout_s: float = 60.0,
        policy: SandboxPolicy | None = None,
    ) -> None:
        """Start the child on ``model`` with ``options``; query it with ``timeout_s`` deadlines.

        ``policy`` is how the child is isolated and limited (default: this process's,
        :func:`twinaudit.verifier.oracles.sandbox.policy`).
        """
        self._child = _Child(model, options, threads, policy or sandbox_policy())
        self._channel = transport.make_channel(
            self._child.address, max_send_bytes=transport.MAX_QUERY_MESSAGE_BYTES
        )
        super().__init__(
            self._channel, timeout_s, max_query_bytes=transport.MAX_QUERY_MESSAGE_BYTES
        )
        self._digest = digest
        self._held_info: OracleInfo | None = None
        child = self._child
        self._finalizer = weakref.finalize(
            self, _stop_process, child.process, child._stderr, child._lifetime, child._sockets
        )

    @property
    def isolation(self) -> str:
        """Say what isolates the child: ``bubblewrap``, or ``weak`` (accepted by the policy)."""
        return self._child.isolation

    @property
    def info(self) -> OracleInfo:
        """Return the child's description with the artefact's SHA-256 as the model digest."""
        if self._held_info is None:
            self._held_info = dataclasses.replace(super().info, model_digest=self._digest)
        return self._held_info

    def close(self) -> None:
        """Stop the child process and close the channel (idempotent)."""
        self._channel.close()
        self._finalizer()


def start_held(
    model: Path,
    options: ServeOptions,
    *,
    digest: str,
    threads: int = HELD_THREADS,
    policy: SandboxPolicy | None = None,
) -> HeldOracle:
    """Run ``model`` as a held child with ``options``; return its oracle (close it after use).

    The description is asked for at once, so a child that starts but does not answer
    ``Describe`` fails here. ``policy``: as :class:`HeldOracle` takes it.
    """
    oracle = HeldOracle(model, options, digest=digest, threads=threads, policy=policy)
    try:
        oracle.info  # noqa: B018 - asked once, now
    except BaseException:
        oracle.close()
        raise
    return oracle


def dial_held(endpoint: str, models: Path | None) -> HeldOracle:
    """Return the held model ``endpoint`` (``held:sha256:<hex>``) names, started from ``models``."""
    digest = parse_held_address(endpoint)
    if models is None:
        raise NotFoundError(
            "this arbiter holds no model artefacts (verifier serve --models DIR names its store)"
        )
    artefact = ArtefactStore(models).get(digest)
    return start_held(artefact.path, artefact.options, digest=artefact.digest)


__all__ = [
    "HELD_KINDS",
    "HELD_THREADS",
    "Artefact",
    "ArtefactStore",
    "HeldOracle",
    "ServeOptions",
    "dial_held",
    "file_sha256",
    "held_address",
    "is_held_address",
    "parse_held_address",
    "start_held",
]
