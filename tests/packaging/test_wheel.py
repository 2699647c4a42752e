"""The distribution as a user installs it: one top-level name, beside a package named protocol.

``python -m build`` makes the sdist and, from it, the wheel; the wheel goes into a fresh
virtual environment that already holds an unrelated package owning the top-level name
``protocol``, and the console script and the README's quick start run there, from a
folder outside the repository (so nothing is imported from the checkout).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import sys
import sysconfig
import tarfile
import threading
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cli.test_docs_commands import _signed_verdict, command_words, quick_start_in
from twinaudit.cli.main import EXTRAS

ROOT = Path(__file__).resolve().parents[2]
ROLES = ("protocol", "wire", "owner", "verifier", "practitioner", "witness", "cli")
#: The ``.pth`` file by which the fresh environment borrows this one's extras.
BORROWED = "zz-borrowed-extras.pth"
#: Modules of the optional extras (pyproject.toml) that a module may need at import.
EXTRA_MODULES = frozenset({*EXTRAS, "onnx", "onnxruntime", "onnxscript", "safetensors", "mlserver"})
#: Imports every module of the installed package; prints those that failed, as JSON.
IMPORT_ALL = """
import importlib, json, pkgutil, twinaudit
failed = {}
for info in pkgutil.walk_packages(twinaudit.__path__, "twinaudit."):
    if info.name.endswith("__main__"):
        continue  # runs the command
    try:
        importlib.import_module(info.name)
    except ModuleNotFoundError as error:
        failed[info.name] = ["missing", str(error.name)]
    except Exception as error:
        failed[info.name] = ["error", repr(error)]
print(json.dumps(failed))
"""

#: What the unrelated package's ``protocol`` module says about itself.
UNRELATED = "an unrelated package that owns the name protocol"

pytestmark = pytest.mark.slow


def _run(args: list[str], cwd: Path, env: dict[str, str] | None = None, timeout: int = 600):
    # Without PYTHONPATH: a checkout on it (and its twinaudit.egg-info) would be seen by the
    # fresh environment's pip and interpreter as an installed twinaudit.
    if env is None:
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    result = subprocess.run(
        args, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )
    assert result.returncode == 0, f"{shlex.join(args)}\n{result.stdout}\n{result.stderr}"
    return result


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Build the sdist, then the wheel from it (``python -m build``); return both."""
    out = tmp_path_factory.mktemp("dist")
    _run([sys.executable, "-m", "build", "--no-isolation", "--outdir", str(out), str(ROOT)], ROOT)
    (wheel,) = out.glob("twinaudit-*.whl")
    (sdist,) = out.glob("twinaudit-*.tar.gz")
    return {"wheel": wheel, "sdist": sdist}


def _unrelated_protocol(folder: Path) -> Path:
    """Build a wheel of a package whose top-level module is ``protocol``; return it."""
    source = folder / "unrelated"
    (source / "protocol").mkdir(parents=True)
    (source / "protocol" / "__init__.py").write_text(f"WHO = {UNRELATED!r}\n")
    (source / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools"]\nbuild-backend = "setuptools.build_meta"\n'
        '[project]\nname = "unrelated-protocol"\nversion = "1.0"\n'
        '[tool.setuptools]\npackages = ["protocol"]\n'
    )
    _run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "--wheel-dir",
            str(folder),
            str(source),
        ],
        folder,
    )
    (wheel,) = folder.glob("unrelated_protocol-*.whl")
    return wheel


@pytest.fixture(scope="module")
def venv(dist: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh virtual environment: the unrelated ``protocol``, then the wheel and its needs.

    The wheel's dependencies, and nothing else, are installed from the package index
    (constraints.txt's pins): no extra, nothing of this environment.
    """
    folder = tmp_path_factory.mktemp("fresh")
    target = folder / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", str(target)], folder)
    python = target / "bin" / "python"
    pip = [sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet"]
    _run([*pip, "--no-deps", str(_unrelated_protocol(folder))], folder)
    _run([*pip, "-c", str(ROOT / "constraints.txt"), str(dist["wheel"])], folder)
    return target


@pytest.fixture
def venv_with_extras(venv: Path) -> Iterator[Path]:
    """The same environment, which then also sees this one's packages (the extras).

    The model extras (torch and the rest, 1.7 GB) are not installed again: a ``.pth``
    line puts this environment's site-packages after the fresh one's, so the quick start
    finds them while everything the fresh environment holds comes first. The line is
    there for the test that asks for it and removed after it, so that the other tests
    see the fresh environment alone in whatever order they run.
    """
    site = _run(
        [
            str(venv / "bin" / "python"),
            "-c",
            "import sysconfig; print(sysconfig.get_path('purelib'))",
        ],
        venv,
    ).stdout.strip()
    borrowed = Path(site, BORROWED)
    borrowed.write_text(sysconfig.get_path("purelib") + "\n")
    try:
        yield venv
    finally:
        borrowed.unlink(missing_ok=True)


def _env(venv: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    env["VIRTUAL_ENV"] = str(venv)
    return env


def _serve(args: list[str], cwd: Path, env: dict[str, str]) -> subprocess.Popen[str]:
    """Start a server as the README does (its log to a file); return once it is ready."""
    log = (cwd / f"{args[0]}.log").open("w")
    process = subprocess.Popen(
        ["twinaudit", *args], cwd=cwd, env=env, text=True, stdout=subprocess.PIPE, stderr=log
    )
    log.close()
    ready = "serving on" if args[0] == "verifier" else "listening on"
    assert process.stdout is not None
    for line in process.stdout:
        if ready in line:
            break
    else:
        pytest.fail(f"{shlex.join(args)} did not start: {(cwd / f'{args[0]}.log').read_text()}")
    threading.Thread(target=process.stdout.read, daemon=True).start()
    return process


def test_the_wheel_installs_one_top_level_name(dist: dict[str, Path]) -> None:
    with zipfile.ZipFile(dist["wheel"]) as wheel:
        names = wheel.namelist()
        tops = {name.split("/")[0] for name in names}
        entry_points = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
        scripts = wheel.read(entry_points).decode()
    (info,) = [top for top in tops if top.endswith(".dist-info")]
    assert tops == {"twinaudit", info}
    for role in ROLES:
        assert f"twinaudit/{role}/__init__.py" in names, role
    assert "twinaudit/py.typed" in names
    assert "twinaudit/wire/verifier/v1/verifier_pb2.py" in names
    assert not [n for n in names if re.search(r"/(tests|demo|evaluation|bench|spec)/", n)]
    assert "twinaudit = twinaudit.cli.main:main" in scripts


def test_the_sdist_holds_the_files_not_links(dist: dict[str, Path]) -> None:
    with tarfile.open(dist["sdist"]) as sdist:
        members = sdist.getmembers()
    assert not [m.name for m in members if m.issym() or m.islnk()]
    names = {m.name.split("/", 1)[1] for m in members if "/" in m.name}
    assert "twinaudit/protocol/errors.py" in names
    assert "twinaudit/practitioner/grpc_server.py" in names
    # The contract travels with the source (MANIFEST.in), not in the wheel.
    assert {"spec/protocol.md", "spec/vectors/verdicts.json", "spec/vectors/pln.json"} <= names
    assert "proto/twinaudit/verifier/v1/verifier.proto" in names


def _python(venv: Path) -> str:
    return str(venv / "bin" / "python")


def test_the_fresh_environment_holds_the_wheel_s_dependencies(venv: Path, tmp_path: Path) -> None:
    """pip finds nothing missing, and every module imports but those that need an extra."""
    site = _run(
        [_python(venv), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        tmp_path,
        _env(venv),
    ).stdout.strip()
    assert not Path(site, BORROWED).exists()
    _run([sys.executable, "-m", "pip", "--python", _python(venv), "check"], tmp_path)
    out = _run([_python(venv), "-c", IMPORT_ALL], tmp_path, _env(venv)).stdout
    failed = json.loads(out.strip().splitlines()[-1])
    errors = {name: why for name, why in failed.items() if why[0] != "missing"}
    assert not errors, errors
    unknown = {n: w[1] for n, w in failed.items() if w[1].split(".")[0] not in EXTRA_MODULES}
    assert not unknown, f"modules that need an undeclared dependency: {unknown}"
    assert "twinaudit.verifier.server" not in failed
    assert "twinaudit.cli.main" not in failed


def test_anyone_verifies_a_verdict_with_the_wheel_alone(venv: Path, tmp_path: Path) -> None:
    """`twinaudit verify` (check and replay) needs no extra: the spec vectors' first claim."""
    files = _signed_verdict(tmp_path)
    args = ["twinaudit", "verify", str(files["verdict.json"]), "--pubkey", str(files[".pub"])]
    args += ["--transcript", str(files["transcript.bin"])]
    out = _run(args, tmp_path, _env(venv)).stdout
    assert out.startswith("VERIFIED verdict"), out


def test_pip_show_lists_files_under_the_root_alone(venv: Path) -> None:
    shown = _run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(venv / "bin" / "python"),
            "show",
            "-f",
            "twinaudit",
        ],
        venv,
    ).stdout
    files = [line.strip() for line in shown.split("Files:", 1)[1].splitlines() if line.strip()]
    assert files
    outside = [f for f in files if not f.startswith(("twinaudit/", "twinaudit-"))]
    assert outside == ["../../../bin/twinaudit"], outside


def test_the_console_script_runs_beside_an_unrelated_protocol(venv: Path, tmp_path: Path) -> None:
    env = _env(venv)
    version = _run(["twinaudit", "--version"], tmp_path, env).stdout
    assert version.startswith("twinaudit "), version
    probe = (
        "import protocol, twinaudit, twinaudit.protocol.errors, twinaudit.cli.main;"
        "print(protocol.WHO); print(twinaudit.__file__)"
    )
    who, where = _run([str(venv / "bin" / "python"), "-c", probe], tmp_path, env).stdout.split(
        "\n"
    )[:2]
    assert who == UNRELATED
    assert Path(where).is_relative_to(venv)


@pytest.mark.filterwarnings("ignore")
def test_the_readme_quick_start_runs_on_the_installed_wheel(
    venv_with_extras: Path, tmp_path: Path
) -> None:
    venv = venv_with_extras
    env = _env(venv)
    servers: list[subprocess.Popen[str]] = []
    ran = []
    try:
        for command, words in quick_start_in(tmp_path):
            program, rest = words[0], words[1:]
            if program == ".":
                continue  # activating the environment: PATH leads to the fresh one
            if program == "mkdir":
                Path(rest[-1]).mkdir(parents=True, exist_ok=True)
            elif program == "export":
                env.update(a.split("=", 1) for a in rest)
            elif program == "twinaudit" and rest[-1] == "&":
                servers.append(_serve(command_words(rest), tmp_path, env))
            elif program == "twinaudit":
                _run(["twinaudit", *rest], tmp_path, env)
            elif program == "python":
                script = str(ROOT / rest[0])
                _run([str(venv / "bin" / "python"), script, *rest[1:]], tmp_path, env)
            elif program == "kill":
                pass  # the servers stop below
            else:
                pytest.fail(f"{command.where}: the test cannot run {command.text!r}")
            ran.append(" ".join(command.words[:3]))
    finally:
        for process in servers:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
    assert ran[-2] == "twinaudit verify runs/try/claim/verdict.json"
    assert (tmp_path / "try" / "claim" / "transcript.bin").is_file()
