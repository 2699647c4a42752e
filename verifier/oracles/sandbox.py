"""The sandbox a held model's child runs in: bubblewrap, resource limits, a Unix socket.

An arbiter runs model code it did not write: a pickle's ``__reduce__``, an ``--arch``
callable, a model that allocates whatever its file declares. That code runs in a child
process (:mod:`twinaudit.verifier.oracles.held`) started by :func:`child_command` and
:class:`ChildLimits`, in layers, each stopping something named:

- **bubblewrap** (``bwrap``, Debian's ``bubblewrap``; :func:`find_bwrap`), with
  ``--unshare-all`` (new user, mount, PID, network, IPC, UTS and cgroup namespaces),
  ``--cap-drop ALL``, ``--die-with-parent``, ``--new-session`` and ``--clearenv``:

  - the *mount namespace* shows the child only read-only binds of the Python prefix,
    the virtual environment, the folders on ``sys.path`` and the project's package
    (its folder ``twinaudit/`` and, in a checkout, the role folders its links lead
    to: never the rest of the checkout, its runs, vaults or ``.git``),
    the artefact (at ``/held/``), an empty private ``/tmp`` and a socket folder; the
    arbiter's key file, its database and every other file are absent, and the paths
    of :attr:`SandboxPolicy.hidden` are masked even inside a bound folder;
  - the *PID namespace* with its own ``/proc`` shows the child only its own
    processes: no ``/proc/<pid>/cmdline`` or ``environ`` of the arbiter (finding N5);
  - the *network namespace* has only its own loopback: no socket reaches
    anything; the arbiter talks to the child over a Unix socket in a folder bound
    into the sandbox;
  - ``--cap-drop ALL``: the child cannot raise its resource limits back, remount, or
    use root's privileges inside its namespaces; ``--clearenv``: none of the
    arbiter's environment is inherited, only the variables set here.
- **resource limits** (``setrlimit``, applied by the child itself before it loads the
  model, :func:`apply_limits`): address space, CPU seconds, file size and open
  files (finding N4: a zip bomb or a huge declared input runs out of memory in the
  child, not on the arbiter);
- **wall time**, enforced by the parent: a start deadline and a lifetime after which
  the child is killed (:mod:`twinaudit.verifier.oracles.held`);
- ``close_fds`` and a stdin pipe: the child inherits no descriptor but its three
  standard streams, and stops when its stdin closes (the parent stopped or died).

Without bubblewrap the first layer is missing: the child then runs as the arbiter's
user with its files, its ``/proc`` and its network. That is refused
(:class:`~twinaudit.protocol.errors.OracleError`) unless the policy accepts weaker isolation
(``--allow-weak-isolation``), and said in the log when it does. No seccomp filter is
applied (bubblewrap takes one as a compiled BPF program, and no maintained binding
that compiles one is a dependency); the namespaces above are what stop the threats
named in docs/arbiter.md.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import resource
import shutil
import subprocess
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from twinaudit.protocol.errors import InputError, OracleError

LOG = logging.getLogger("twinaudit.sandbox")

#: Where the artefact appears inside the sandbox (with its suffix).
ARTEFACT_DIR: Final = "/held"
#: Where a user's ``--arch`` module appears inside the sandbox (the child's working folder).
ARCH_DIR: Final = "/arch"
#: Where the socket folder appears inside the sandbox.
SOCKET_DIR: Final = "/run/oracle"
#: The socket's file name in that folder.
SOCKET_NAME: Final = "oracle.sock"
#: The project's one installed root, bound (read-only) wherever it is installed.
PROJECT_PACKAGES: Final = ("twinaudit",)
#: Top-level folders that are symbolic links on merged-/usr systems (re-made as links).
_SYSTEM_DIRS: Final = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
#: Files of /etc the dynamic loader and Python read (bound when present).
_ETC_FILES: Final = ("/etc/ld.so.cache", "/etc/localtime", "/etc/nsswitch.conf")
#: The flag that accepts a child without bubblewrap (named in refusals).
WEAK_FLAG: Final = "--allow-weak-isolation"

#: Seconds of CPU between the soft limit (SIGXCPU) and the hard one (SIGKILL).
CPU_GRACE_S: Final = 5
#: Most bytes of bubblewrap options written to its pipe (below a pipe's 64 KiB buffer).
_MAX_ARGS_BYTES: Final = 60_000

GIB: Final = 1 << 30
MIB: Final = 1 << 20


@dataclass(frozen=True)
class ChildLimits:
    """Resource limits of a held model's child (each a named cap; see docs/arbiter.md).

    ``memory_bytes`` (RLIMIT_AS: the child's address space, torch's own reservations
    included), ``cpu_seconds`` (RLIMIT_CPU), ``file_bytes`` (RLIMIT_FSIZE: the largest
    file it may write, its private ``/tmp`` included), ``open_files`` (RLIMIT_NOFILE),
    ``start_s`` (wall seconds to load, probe and listen) and ``lifetime_s`` (wall
    seconds it may run in all, after which the parent kills it).
    """

    memory_bytes: int = 4 * GIB
    cpu_seconds: int = 6 * 3600
    file_bytes: int = 64 * MIB
    open_files: int = 256
    start_s: float = 300.0
    lifetime_s: float = 24 * 3600.0

    def __post_init__(self) -> None:
        """Refuse limits no child could start under."""
        if self.memory_bytes < 512 * MIB:
            raise InputError("a held model's memory limit is at least 512 MiB")
        if min(self.cpu_seconds, self.file_bytes, self.open_files) < 1:
            raise InputError("a held model's limits are positive")
        if not 0 < self.start_s <= self.lifetime_s:
            raise InputError("a held model's start time is positive and within its lifetime")

    def as_argument(self) -> str:
        """Return the limits as the child's ``--limits`` value (what :func:`apply_limits` reads)."""
        return f"{self.memory_bytes},{self.cpu_seconds},{self.file_bytes},{self.open_files}"


@dataclass(frozen=True)
class SandboxPolicy:
    """How this process starts held models: limits, hidden paths, weaker isolation or not.

    ``hidden`` are files and folders no child may see even where a bound folder holds
    them (``verifier serve`` adds its key file and its database). ``allow_weak``
    accepts a child without bubblewrap (logged as a warning at each start).
    ``bwrap`` is the bubblewrap executable (None: looked up on ``PATH``).
    """

    limits: ChildLimits = field(default_factory=ChildLimits)
    hidden: tuple[Path, ...] = ()
    allow_weak: bool = False
    bwrap: str | None = None


_policy = SandboxPolicy()


def set_policy(policy: SandboxPolicy) -> None:
    """Set this process's policy for held models (``verifier serve`` sets it at start).

    One policy per process: it is the arbiter's, not a claim's, and the claims' code
    paths (:func:`twinaudit.verifier.oracles.dial.dial_oracle`) need not carry it.
    """
    global _policy  # noqa: PLW0603 - the process-wide setting this function exists for
    _policy = policy


def policy() -> SandboxPolicy:
    """Return this process's policy for held models."""
    return _policy


def find_bwrap(policy: SandboxPolicy) -> str | None:
    """Return the bubblewrap executable the policy names or ``PATH`` holds (None: none)."""
    if policy.bwrap is not None:
        return policy.bwrap if os.access(policy.bwrap, os.X_OK) else None
    return shutil.which("bwrap")


def python_paths() -> list[Path]:
    """Return the folders a child's Python needs: its prefixes, ``sys.path``, the packages.

    The project's packages are found where they are imported from (an editable install
    maps them to its project folder, a worktree on ``PYTHONPATH`` comes first).
    """
    prefixes = [Path(sys.base_prefix), Path(sys.prefix), Path(sys.exec_prefix)]
    found = [*prefixes, *package_folders()]
    # The folders of PYTHONPATH, and those of sys.path inside a prefix; never the folder
    # of the script or the working folder that Python puts first on sys.path.
    found += [Path(p) for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    for entry in sys.path:
        path = Path(entry)
        if entry and path.is_absolute() and any(path.is_relative_to(p) for p in prefixes):
            found.append(path)
    found = [p for p in found if p.is_absolute() and p.is_dir()]
    return _outermost(p.resolve() for p in found)


def package_roots() -> list[Path]:
    """Return the folders holding the project's packages (the child's ``PYTHONPATH``)."""
    roots = []
    for name in PROJECT_PACKAGES:
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.origin is not None:
            roots.append(Path(spec.origin).resolve().parent.parent)
    return list(dict.fromkeys(roots))


def package_folders() -> list[Path]:
    """Return the folders of the project's package: ``twinaudit/`` and what its links name.

    In a checkout the roles are links from ``twinaudit/`` to top-level folders
    (docs/architecture.md); each link's target is bound where it is, so that the links
    resolve inside the sandbox, and nothing else of the checkout is.
    """
    folders = []
    for root in package_roots():
        for name in PROJECT_PACKAGES:
            package = root / name
            folders.append(package)
            folders += [entry.resolve() for entry in package.iterdir() if entry.is_symlink()]
    return folders


def _outermost(paths: Iterable[Path]) -> list[Path]:
    """Return the paths that lie under no other of them (each bound once)."""
    unique = sorted(set(paths), key=lambda p: len(p.parts))
    kept: list[Path] = []
    for path in unique:
        if not any(path.is_relative_to(k) for k in kept):
            kept.append(path)
    return kept


def _system_args() -> list[str]:
    args: list[str] = []
    for name in _SYSTEM_DIRS:
        path = Path(name)
        if path.is_symlink():
            args += ["--symlink", os.readlink(path), name]
        elif path.is_dir():
            args += ["--ro-bind", name, name]
    for name in _ETC_FILES:
        if Path(name).exists():
            args += ["--ro-bind", name, name]
    return args


def _mask_args(hidden: Sequence[Path], bound: Sequence[Path]) -> list[str]:
    """Mask each hidden path that a bound folder would show (an empty file or folder)."""
    args: list[str] = []
    for path in hidden:
        target = path.resolve()
        if not any(target.is_relative_to(b) for b in bound):
            continue  # not bound: absent from the sandbox already
        if target.is_dir():
            args += ["--tmpfs", str(target)]
        elif target.exists():
            args += ["--ro-bind", "/dev/null", str(target)]
    return args


@dataclass(frozen=True)
class ChildCommand:
    """A child's command line, environment and working folder, and what isolates it.

    ``sandbox`` holds bubblewrap's executable and options (empty without it): they are
    passed to it through a pipe (``bwrap --args FD``), so that the bind list is not on
    a command line, not even the one the child sees as its PID 1's.
    """

    argv: list[str]
    env: dict[str, str]
    cwd: str
    isolation: str
    sandbox: tuple[str, ...] = ()

    def spawn(self, **popen: Any) -> subprocess.Popen[str]:
        """Start the child (``close_fds``, text mode) with the other ``Popen`` arguments."""
        if not self.sandbox:
            return subprocess.Popen(
                self.argv, env=self.env, cwd=self.cwd, close_fds=True, text=True, **popen
            )
        options = b"".join(arg.encode() + b"\0" for arg in self.sandbox[1:])
        if len(options) > _MAX_ARGS_BYTES:
            raise OracleError("unreachable", "the sandbox's options exceed a pipe's buffer")
        read, write = os.pipe()
        try:
            with os.fdopen(write, "wb") as pipe:
                pipe.write(options)
            argv = [self.sandbox[0], "--args", str(read), "--", *self.argv]
            return subprocess.Popen(
                argv, env=self.env, cwd=self.cwd, pass_fds=(read,), text=True, **popen
            )
        finally:
            os.close(read)


def child_command(
    python_args: Sequence[str],
    *,
    artefact: Path,
    socket_dir: Path,
    modules: Sequence[Path] = (),
    threads: int,
    policy: SandboxPolicy,
) -> ChildCommand:
    """Return how to run ``python <python_args>`` as a held model's child under ``policy``.

    In ``python_args`` the artefact is named by :func:`artefact_path` and the socket by
    :func:`socket_path`: the paths inside the sandbox (outside it, without bubblewrap,
    they are translated back). ``modules`` are the files or packages of the working
    folder an ``--arch`` callable needs (bound read-only in :data:`ARCH_DIR`, the
    child's working folder; nothing else of the working folder is visible).
    Raises :class:`OracleError` when bubblewrap is missing and the policy does not
    accept weaker isolation.
    """
    env = {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": "/tmp",
        "LANG": "C.UTF-8",
        "PYTHONNOUSERSITE": "1",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONPATH": os.pathsep.join(str(p) for p in package_roots()),
        # CPU only, one thread pool of the size asked for, whatever the host sets.
        "CUDA_VISIBLE_DEVICES": "",
        "OMP_NUM_THREADS": str(threads),
        "MKL_NUM_THREADS": str(threads),
    }
    bwrap = find_bwrap(policy)
    if bwrap is None:
        if not policy.allow_weak:
            raise OracleError(
                "unreachable",
                "bubblewrap (bwrap) is not installed, and held models run only in its "
                f"sandbox: install the Debian package bubblewrap, or accept weaker isolation "
                f"with {WEAK_FLAG} (docs/arbiter.md says what is then missing)",
            )
        LOG.warning(
            "held model started WITHOUT bubblewrap (%s): it runs as this user, may read "
            "this user's files, the arbiter's /proc and the network; only resource limits, "
            "a clean environment and closed descriptors apply",
            WEAK_FLAG,
        )
        inside = {
            artefact_path(artefact.suffix): str(artefact),
            socket_path(): str(socket_dir / SOCKET_NAME),
        }
        argv = [sys.executable, *(_outside(a, inside) for a in python_args)]
        return ChildCommand(argv, env, str(Path.cwd() if modules else socket_dir), "weak")
    bound = python_paths()
    args = [bwrap, "--unshare-all", "--die-with-parent", "--new-session", "--cap-drop", "ALL"]
    args += ["--clearenv", *_system_args(), "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"]
    for path in bound:
        args += ["--ro-bind", str(path), str(path)]
    args += ["--ro-bind", str(artefact), artefact_path(artefact.suffix)]
    args += ["--bind", str(socket_dir), SOCKET_DIR]
    for module in modules:
        bound.append(module.resolve())
        args += ["--ro-bind", str(module), f"{ARCH_DIR}/{module.name}"]
    args += _mask_args(policy.hidden, bound)
    for name, value in env.items():
        args += ["--setenv", name, value]
    args += ["--chdir", ARCH_DIR if modules else "/tmp"]
    return ChildCommand([sys.executable, *python_args], {}, "/", "bubblewrap", tuple(args))


def arch_modules(arch: str | None, folder: Path) -> list[Path]:
    """Return the file or package of ``folder`` that ``--arch MODULE:CALLABLE`` imports.

    Found without importing anything; empty when the module is not in ``folder`` (it
    is then imported from the Python's own packages, or not found in the child).
    """
    if arch is None:
        return []
    top = arch.partition(":")[0].partition(".")[0]
    if not top.isidentifier():
        return []
    package, module = folder / top, folder / f"{top}.py"
    if (package / "__init__.py").is_file():
        return [package]
    return [module] if module.is_file() else []


def artefact_path(suffix: str) -> str:
    """Return the artefact's path inside the sandbox."""
    return f"{ARTEFACT_DIR}/artefact{suffix}"


def socket_path() -> str:
    """Return the child's socket path inside the sandbox."""
    return f"{SOCKET_DIR}/{SOCKET_NAME}"


def _outside(arg: str, inside: dict[str, str]) -> str:
    """Return ``arg`` with the sandbox's paths replaced by the real ones."""
    for path, real in inside.items():
        arg = arg.replace(path, real)
    return arg


def apply_limits(text: str) -> None:
    """Apply a child's ``--limits MEMORY,CPU,FSIZE,NOFILE`` (soft and hard) to this process.

    Called first thing by ``oracle serve --limits`` in a held model's child, before any
    model code runs; without capabilities the child cannot raise them again. The CPU
    limit's hard value is :data:`CPU_GRACE_S` above its soft one: SIGXCPU (which ends
    the child) comes first, SIGKILL only if the child ignores it.
    """
    try:
        memory, cpu, fsize, nofile = (int(v) for v in text.split(","))
    except ValueError:
        raise InputError(f"--limits must be four integers, got {text!r}") from None
    for which, value in (
        (resource.RLIMIT_AS, memory),
        (resource.RLIMIT_CPU, cpu),
        (resource.RLIMIT_FSIZE, fsize),
        (resource.RLIMIT_NOFILE, nofile),
    ):
        _, hard = resource.getrlimit(which)
        soft = value if hard == resource.RLIM_INFINITY else min(value, hard)
        top = soft + CPU_GRACE_S if which == resource.RLIMIT_CPU else soft
        resource.setrlimit(which, (soft, top if hard == resource.RLIM_INFINITY else min(top, hard)))


__all__ = [
    "ChildCommand",
    "ChildLimits",
    "SandboxPolicy",
    "apply_limits",
    "artefact_path",
    "child_command",
    "find_bwrap",
    "package_folders",
    "package_roots",
    "policy",
    "python_paths",
    "set_policy",
    "socket_path",
]
