"""Make a plain ``import torchvision`` (and so ``import transformers``) work in an environment.

:mod:`wire.torchvision_shim` fixes torchvision's import for the code of this project,
which calls it first. A user's own script in the same environment (``from transformers
import GPT2LMHeadModel`` to build or save a model for ``oracle serve --hf``) does not, and
fails with "operator torchvision::nms does not exist" where torch is the CPU build and
torchvision the CUDA-built wheel (the project's ``.venv``).

This module installs, once per environment, a path-configuration file
(:data:`PTH_NAME`, processed by :mod:`site` at every interpreter start) whose one line
loads this file by its path, under the name :data:`HOOK_MODULE`, and puts a
:class:`TorchvisionFinder` at the front of :data:`sys.meta_path`. Loading it by path
keeps the ``wire`` package out of every interpreter that does not import torchvision
(a tool that analyses another copy of the project must find that copy's ``wire``). The
finder costs nothing until something imports ``torchvision``: it then removes itself,
runs :func:`wire.torchvision_shim.prepare_torchvision` (which defines the two missing
operator schemas only where torchvision's extension cannot be loaded) and lets the
ordinary import go on. Nothing is imported at start-up but this file and
:mod:`importlib`'s own modules.

``make .venv/.installed`` installs it; elsewhere ``python -m wire.torchvision_hook
install`` does (``remove`` takes it out, ``status`` says whether it is there). Where
torchvision's extension loads, the hook changes nothing. A moved or deleted project
leaves a line that does nothing; ``install`` again points it at the new place.
"""

from __future__ import annotations

import importlib.abc
import sys
from collections.abc import Sequence
from importlib.machinery import ModuleSpec
from pathlib import Path
from types import ModuleType
from typing import Final

#: The path-configuration file's name in the environment's ``site-packages``.
PTH_NAME: Final = "twinaudit-torchvision-hook.pth"
#: The name this file is loaded under at start-up (not ``wire.…``: see the module text).
HOOK_MODULE: Final = "twinaudit_torchvision_hook"
#: The attribute that marks a finder as this hook's, whichever copy of the module made it.
_MARK: Final = "twinaudit_torchvision_hook"


class TorchvisionFinder(importlib.abc.MetaPathFinder):
    """A finder that prepares torchvision's operator schemas before its first import."""

    twinaudit_torchvision_hook = True

    def find_spec(
        self,
        fullname: str,
        path: Sequence[str] | None,
        target: ModuleType | None = None,
    ) -> ModuleSpec | None:
        """Prepare the shim when ``torchvision`` is imported; find nothing itself."""
        if fullname != "torchvision":
            return None
        remove_finder()
        from wire.torchvision_shim import prepare_torchvision  # noqa: PLC0415 - imports torch

        prepare_torchvision()
        return None  # the ordinary finders import torchvision itself


def install_finder() -> None:
    """Put one :class:`TorchvisionFinder` at the front of :data:`sys.meta_path` (idempotent)."""
    if "torchvision" in sys.modules:
        return
    if not any(getattr(finder, _MARK, False) for finder in sys.meta_path):
        sys.meta_path.insert(0, TorchvisionFinder())


def remove_finder() -> None:
    """Take every finder this hook put in :data:`sys.meta_path` out of it."""
    sys.meta_path[:] = [f for f in sys.meta_path if not getattr(f, _MARK, False)]


def pth_line(module_file: Path) -> str:
    """Return the path-configuration line that loads ``module_file`` and installs the finder.

    The line does nothing where the file is gone, so a removed project leaves no error
    at every interpreter start.
    """
    return (
        "import importlib.util as _u, os as _o; "
        f"_p = {str(module_file)!r}; "
        f"_s = _o.path.isfile(_p) and _u.spec_from_file_location({HOOK_MODULE!r}, _p); "
        "_m = _s and _u.module_from_spec(_s); "
        "_s and _s.loader.exec_module(_m); "
        "_m and _m.install_finder()\n"
    )


def pth_path(site_packages: Path | None = None) -> Path:
    """Return where the path-configuration file goes: this environment's ``purelib``."""
    import sysconfig  # noqa: PLC0415 - only the commands need it, not the start-up hook

    folder = site_packages if site_packages is not None else Path(sysconfig.get_paths()["purelib"])
    return folder / PTH_NAME


def install(site_packages: Path | None = None) -> Path:
    """Write the path-configuration file (replacing an older one) and return its path."""
    path = pth_path(site_packages)
    partial = path.with_name(path.name + ".partial")
    partial.write_text(pth_line(Path(__file__).resolve()), encoding="utf-8")
    partial.replace(path)  # site never reads a half-written line
    return path


def remove(site_packages: Path | None = None) -> bool:
    """Delete the path-configuration file; return False if there was none."""
    path = pth_path(site_packages)
    if not path.exists():
        return False
    path.unlink()
    return True


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m wire.torchvision_hook install|remove|status``; return the exit code."""
    import argparse  # noqa: PLC0415 - only the command needs it, not the start-up hook

    parser = argparse.ArgumentParser(
        prog="python -m wire.torchvision_hook",
        description="Let a plain `import torchvision` / `import transformers` work in this "
        "environment where torch is the CPU build and torchvision the CUDA-built wheel.",
    )
    parser.add_argument("action", choices=("install", "remove", "status"))
    parser.add_argument(
        "--site-packages",
        type=Path,
        help="the folder to write into (default: this interpreter's purelib)",
    )
    args = parser.parse_args(argv)
    path = pth_path(args.site_packages)
    if args.action == "install":
        print(f"installed {install(args.site_packages)}")
    elif args.action == "remove":
        print(f"removed {path}" if remove(args.site_packages) else f"not installed ({path})")
    else:
        print(f"installed {path}" if path.exists() else f"not installed ({path})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
