"""The environment hook that lets a user's plain ``import torchvision``/``transformers`` work."""

from __future__ import annotations

import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from twinaudit.wire import torchvision_finder, torchvision_hook
from twinaudit.wire.torchvision_finder import TorchvisionFinder
from twinaudit.wire.torchvision_hook import PTH_NAME

ROOT = Path(__file__).resolve().parents[2]
SHIM = ROOT / "wire" / "torchvision_shim.py"


def test_install_status_remove(tmp_path, capsys):
    assert torchvision_hook.main(["status", "--site-packages", str(tmp_path)]) == 0
    assert "not installed" in capsys.readouterr().out
    torchvision_hook.main(["install", "--site-packages", str(tmp_path)])
    torchvision_hook.main(["install", "--site-packages", str(tmp_path)])  # replaces, no copy
    assert [p.name for p in tmp_path.iterdir()] == [PTH_NAME]
    text = (tmp_path / PTH_NAME).read_text(encoding="utf-8")
    assert text == torchvision_hook.pth_text(SHIM)
    comment, line = text.splitlines()
    assert comment.startswith("# ") and line.startswith("import ")  # one line that site runs
    torchvision_hook.main(["status", "--site-packages", str(tmp_path)])
    assert capsys.readouterr().out.startswith(f"installed {tmp_path / PTH_NAME}")
    assert torchvision_hook.remove(tmp_path)
    assert not torchvision_hook.remove(tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_finder_is_installed_once_and_finds_nothing_else():
    before = list(sys.meta_path)
    try:
        torchvision_finder.remove_finder()
        torchvision_finder.install_finder(str(SHIM))
        torchvision_finder.install_finder(str(SHIM))
        finders = [f for f in sys.meta_path if isinstance(f, TorchvisionFinder)]
        if "torchvision" not in sys.modules:
            assert len(finders) == 1
            assert sys.meta_path[0] is finders[0]
            assert finders[0].find_spec("json", None) is None
    finally:
        sys.meta_path[:] = before


def test_the_marker_names_agree():
    assert torchvision_hook.HOOK_NAME == torchvision_finder.MARK


def _run_without_site(code: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """Run ``code`` in a fresh interpreter that processed no path-configuration file.

    ``-S`` skips :mod:`site`, so neither the environment's copy of the hook nor the
    editable install's finder ran; the packages come from ``PYTHONPATH`` (the project's
    root and this environment's site-packages, whose ``.pth`` files are not read).
    """
    path = [str(ROOT), sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]]
    return subprocess.run(
        [sys.executable, "-S", "-c", code],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT,
        env={"PYTHONPATH": ":".join(path), "PATH": "/usr/bin:/bin"},
        check=False,
    )


def test_the_hook_keeps_the_wire_package_out_of_a_fresh_interpreter(tmp_path):
    """Loaded by its path, the hook leaves ``wire`` to be found where the process looks."""
    torchvision_hook.install(tmp_path)
    out = _run_without_site(
        "import site, sys; before = set(sys.modules)\n"
        f"site.addsitedir({str(tmp_path)!r})\n"
        "print(sorted(set(sys.modules) - before))\n"
        "print(sum(getattr(f, 'twinaudit_torchvision_hook', False) for f in sys.meta_path))\n"
    )
    assert (out.returncode, out.stderr) == (0, "")
    # Issue #40 N11: the line imports nothing (the path-loaded hook imported about 60
    # modules, typing and pathlib among them); python -m bench startup times it.
    assert out.stdout.split("\n")[:2] == ["[]", "1"]


def test_a_missing_shim_makes_the_line_do_nothing(tmp_path):
    (tmp_path / PTH_NAME).write_text(
        torchvision_hook.pth_text(tmp_path / "gone.py"), encoding="utf-8"
    )
    out = _run_without_site(
        f"import site, sys; site.addsitedir({str(tmp_path)!r})\nprint('started')\n"
        "sys.meta_path[0].find_spec('torchvision', None)\nprint('found nothing')\n"
    )
    assert (out.returncode, out.stdout.split(), out.stderr) == (
        0,
        ["started", "found", "nothing"],
        "",
    )


def _plant(folder: Path) -> Path:
    """A folder with a ``twinaudit/wire/torchvision_shim.py`` (and a bare ``wire/`` one) that
    says when it runs."""
    for package in (folder / "twinaudit" / "wire", folder / "wire"):
        package.mkdir(parents=True)
        package.joinpath("__init__.py").write_text("print('PLANTED wire')\n")
        package.joinpath("torchvision_shim.py").write_text(
            "print('PLANTED shim')\ndef prepare_torchvision():\n    print('PLANTED prepare')\n"
        )
    (folder / "twinaudit" / "__init__.py").write_text("print('PLANTED twinaudit')\n")
    return folder


def _run_in(folder: Path, code: str) -> subprocess.CompletedProcess[str]:
    """Run ``code`` with ``-S`` in ``folder``, with nothing on the path but the standard library."""
    return subprocess.run(
        [sys.executable, "-S", "-c", code],
        capture_output=True, text=True, timeout=60, cwd=folder,
        env={"PATH": "/usr/bin:/bin"}, check=False,
    )  # fmt: skip


def test_issue_40_n11_a_shim_planted_in_the_current_folder_is_not_executed(tmp_path):
    # On main the finder ran `from twinaudit.wire.torchvision_shim import prepare_torchvision`,
    # which found the current folder's wire package first (sys.path[0]).
    site_dir = tmp_path / "site"
    site_dir.mkdir()
    torchvision_hook.install(site_dir)
    here = _plant(tmp_path / "here")
    out = _run_in(here, f"import site; site.addsitedir({str(site_dir)!r})\nimport torchvision\n")
    assert "PLANTED" not in out.stdout + out.stderr
    # torch and torchvision are not on this interpreter's path: the installed shim
    # cannot apply, and says nothing; the import fails as it would without the hook.
    assert out.returncode == 1
    assert (
        out.stderr.strip().splitlines()[-1] == "ModuleNotFoundError: No module named 'torchvision'"
    )
    assert "Traceback" in out.stderr and out.stderr.count("Traceback") == 1


def _project_copy(folder: Path) -> Path:
    """A copy of the project's ``wire`` hook files, as an installed project would hold them."""
    (folder / "twinaudit" / "wire").mkdir(parents=True)
    (folder / "twinaudit" / "__init__.py").write_text("")
    (folder / "twinaudit" / "wire" / "__init__.py").write_text("")
    for name in ("torchvision_hook.py", "torchvision_finder.py", "torchvision_shim.py"):
        (folder / "twinaudit" / "wire" / name).write_bytes((ROOT / "wire" / name).read_bytes())
    return folder


def test_issue_40_n11_a_syntax_error_in_the_hook_prints_nothing_at_start(tmp_path):
    # On main the line loaded wire/torchvision_hook.py at every start: a syntax error in
    # it printed a traceback at every interpreter start.
    project = _project_copy(tmp_path / "project")
    site_dir = tmp_path / "site"
    site_dir.mkdir()
    install = subprocess.run(
        [sys.executable, "-S", "-m", "twinaudit.wire.torchvision_hook", "install",
         "--site-packages", str(site_dir)],
        capture_output=True, text=True, timeout=60, cwd=project, env={"PATH": "/usr/bin:/bin"},
        check=False,
    )  # fmt: skip
    assert install.returncode == 0, install.stderr
    for name in ("torchvision_hook.py", "torchvision_finder.py", "torchvision_shim.py"):
        with (project / "twinaudit" / "wire" / name).open("a") as handle:
            handle.write("\ndef broken(:\n")
    out = _run_in(tmp_path, f"import site; site.addsitedir({str(site_dir)!r})\nprint('started')\n")
    assert (out.returncode, out.stdout, out.stderr) == (0, "started\n", "")
    # Once torchvision is imported, the broken shim cannot apply: nothing is printed.
    out = _run_in(
        tmp_path,
        f"import site, sys; site.addsitedir({str(site_dir)!r})\n"
        "sys.meta_path[0].find_spec('torchvision', None)\nprint('found nothing')\n",
    )
    assert (out.returncode, out.stdout, out.stderr) == (0, "found nothing\n", "")


def test_a_line_written_before_still_installs_the_finder_silently(tmp_path):
    """A .pth line of the hook before issue #40 loads this file by path and calls install_finder."""
    old_line = (
        "import importlib.util as _u, os as _o; "
        f"_p = {str(ROOT / 'wire' / 'torchvision_hook.py')!r}; "
        "_s = _o.path.isfile(_p) and _u.spec_from_file_location('twinaudit_torchvision_hook', _p); "
        "_m = _s and _u.module_from_spec(_s); _s and _s.loader.exec_module(_m); "
        "_m and _m.install_finder()\n"
    )
    (tmp_path / PTH_NAME).write_text(old_line, encoding="utf-8")
    out = _run_in(
        tmp_path,
        f"import site, sys; site.addsitedir({str(tmp_path)!r})\n"
        "print(sum(getattr(f, 'twinaudit_torchvision_hook', False) for f in sys.meta_path))\n",
    )
    assert (out.returncode, out.stdout, out.stderr) == (0, "1\n", "")


@pytest.mark.slow
def test_preparing_the_shim_with_the_hook_installed_does_not_deadlock(tmp_path):
    """The shim's own spec lookup runs the hook's finder, which re-enters the shim."""
    pytest.importorskip("torchvision")
    torchvision_hook.install(tmp_path)
    out = _run_without_site(
        f"import site; site.addsitedir({str(tmp_path)!r})\n"
        "from twinaudit.wire.torchvision_shim import prepare_torchvision\n"
        "prepare_torchvision(); prepare_torchvision()\n"
        "import torchvision\nprint('prepared')\n",
        timeout=120,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "prepared"


@pytest.mark.slow
def test_plain_imports_work_once_the_pth_file_is_read(tmp_path):
    pytest.importorskip("torchvision")
    pytest.importorskip("transformers")
    torchvision_hook.install(tmp_path)
    plain = "import torchvision; import torchvision.models as m; m.resnet18(weights=None)\n"
    control = _run_without_site(plain)
    hooked = _run_without_site(
        f"import site; site.addsitedir({str(tmp_path)!r})\n"
        f"{plain}"
        "from transformers import GPT2Config, GPT2LMHeadModel\n"
        "GPT2LMHeadModel(GPT2Config(n_layer=1, n_head=2, n_embd=8, vocab_size=16))\n"
        "print('imported')\n"
    )
    assert hooked.returncode == 0, hooked.stderr[-2000:]
    assert hooked.stdout.strip().endswith("imported")
    # Where torchvision's extension does not load (the project's .venv), the same plain
    # import fails without the hook: the hook is what made the line above work.
    if control.returncode != 0:
        assert "torchvision::nms does not exist" in control.stderr
