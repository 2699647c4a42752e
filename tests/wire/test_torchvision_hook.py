"""The environment hook that lets a user's plain ``import torchvision``/``transformers`` work."""

from __future__ import annotations

import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from wire import torchvision_hook
from wire.torchvision_hook import PTH_LINE, PTH_NAME, TorchvisionFinder

ROOT = Path(__file__).resolve().parents[2]


def test_install_status_remove(tmp_path, capsys):
    assert torchvision_hook.main(["status", "--site-packages", str(tmp_path)]) == 0
    assert "not installed" in capsys.readouterr().out
    torchvision_hook.main(["install", "--site-packages", str(tmp_path)])
    torchvision_hook.main(["install", "--site-packages", str(tmp_path)])  # replaces, no copy
    assert [p.name for p in tmp_path.iterdir()] == [PTH_NAME]
    assert (tmp_path / PTH_NAME).read_text(encoding="utf-8") == PTH_LINE
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


def _run_without_site(code: str) -> subprocess.CompletedProcess[str]:
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
        timeout=300,
        cwd=ROOT,
        env={"PYTHONPATH": ":".join(path), "PATH": "/usr/bin:/bin"},
        check=False,
    )


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
