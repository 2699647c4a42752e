"""The environment hook that lets a user's plain ``import torchvision``/``transformers`` work."""

from __future__ import annotations

import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from wire import torchvision_hook
from wire.torchvision_hook import PTH_NAME, TorchvisionFinder

ROOT = Path(__file__).resolve().parents[2]


def test_install_status_remove(tmp_path, capsys):
    assert torchvision_hook.main(["status", "--site-packages", str(tmp_path)]) == 0
    assert "not installed" in capsys.readouterr().out
    torchvision_hook.main(["install", "--site-packages", str(tmp_path)])
    torchvision_hook.main(["install", "--site-packages", str(tmp_path)])  # replaces, no copy
    assert [p.name for p in tmp_path.iterdir()] == [PTH_NAME]
    line = (tmp_path / PTH_NAME).read_text(encoding="utf-8")
    assert line == torchvision_hook.pth_line(Path(torchvision_hook.__file__).resolve())
    assert line.startswith("import ") and line.count("\n") == 1  # one line that site runs
    torchvision_hook.main(["status", "--site-packages", str(tmp_path)])
    assert capsys.readouterr().out.startswith(f"installed {tmp_path / PTH_NAME}")
    assert torchvision_hook.remove(tmp_path)
    assert not torchvision_hook.remove(tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_finder_is_installed_once_and_finds_nothing_else():
    before = list(sys.meta_path)
    try:
        torchvision_hook.remove_finder()
        torchvision_hook.install_finder()
        torchvision_hook.install_finder()
        finders = [f for f in sys.meta_path if isinstance(f, TorchvisionFinder)]
        if "torchvision" not in sys.modules:
            assert len(finders) == 1
            assert sys.meta_path[0] is finders[0]
            assert finders[0].find_spec("json", None) is None
    finally:
        sys.meta_path[:] = before


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
        f"import site, sys; site.addsitedir({str(tmp_path)!r})\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('wire', 'torch')))\n"
        "print(sum(getattr(f, 'twinaudit_torchvision_hook', False) for f in sys.meta_path))\n"
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split("\n")[:2] == ["[]", "1"]


def test_a_missing_hook_file_makes_the_line_do_nothing(tmp_path):
    (tmp_path / PTH_NAME).write_text(
        torchvision_hook.pth_line(tmp_path / "gone.py"), encoding="utf-8"
    )
    out = _run_without_site(
        f"import site, sys; site.addsitedir({str(tmp_path)!r})\nprint('started')\n"
    )
    assert (out.returncode, out.stdout.strip(), out.stderr) == (0, "started", "")


@pytest.mark.slow
def test_preparing_the_shim_with_the_hook_installed_does_not_deadlock(tmp_path):
    """The shim's own spec lookup runs the hook's finder, which re-enters the shim."""
    pytest.importorskip("torchvision")
    torchvision_hook.install(tmp_path)
    out = _run_without_site(
        f"import site; site.addsitedir({str(tmp_path)!r})\n"
        "from wire.torchvision_shim import prepare_torchvision\n"
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
