"""Make a plain ``import torchvision`` (and so ``import transformers``) work in an environment.

:mod:`wire.torchvision_shim` fixes torchvision's import for the code of this project,
which calls it first. A user's own script in the same environment (``from transformers
import GPT2LMHeadModel`` to build or save a model for ``oracle serve --hf``) does not, and
fails with "operator torchvision::nms does not exist" where torch is the CPU build and
torchvision the CUDA-built wheel (the project's ``.venv``).

This module installs, once per environment, a path-configuration file
(:data:`PTH_NAME`, processed by :mod:`site` at every interpreter start) whose one line
puts :class:`TorchvisionFinder` at the front of :data:`sys.meta_path`. The finder costs
nothing until something imports ``torchvision``: it then removes itself, runs
:func:`wire.torchvision_shim.prepare_torchvision` (which defines the two missing operator
schemas only where torchvision's extension cannot be loaded) and lets the ordinary import
go on. Nothing is imported at start-up but this module and :mod:`importlib`.

``make .venv/.installed`` installs it; elsewhere ``python -m wire.torchvision_hook
install`` does (``remove`` takes it out, ``status`` says whether it is there). Where
torchvision's extension loads, the hook changes nothing.
"""

from __future__ import annotations

import argparse
import importlib.abc
import importlib.machinery
import sys
import sysconfig
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import Final

#: The path-configuration file's name in the environment's ``site-packages``.
PTH_NAME: Final = "twinaudit-torchvision-hook.pth"
#: Its one line: install the finder when this module can be found, else do nothing
#: (a line that raises would print an error at every start once twinaudit is removed).
PTH_LINE: Final = (
    "import importlib.util as _u; "
    "_u.find_spec('wire.torchvision_hook') is not None "
    "and __import__('wire.torchvision_hook').torchvision_hook.install_finder()\n"
)


class TorchvisionFinder(importlib.abc.MetaPathFinder):
    """A finder that prepares torchvision's operator schemas before its first import."""

    def find_spec(
        self,
        fullname: str,
        path: Sequence[str] | None,
        target: ModuleType | None = None,
    ) -> importlib.machinery.ModuleSpec | None:
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
    if not any(isinstance(finder, TorchvisionFinder) for finder in sys.meta_path):
        sys.meta_path.insert(0, TorchvisionFinder())


def remove_finder() -> None:
    """Take every :class:`TorchvisionFinder` out of :data:`sys.meta_path`."""
    sys.meta_path[:] = [f for f in sys.meta_path if not isinstance(f, TorchvisionFinder)]


def pth_path(site_packages: Path | None = None) -> Path:
    """Return where the path-configuration file goes: this environment's ``purelib``."""
    folder = site_packages if site_packages is not None else Path(sysconfig.get_paths()["purelib"])
    return folder / PTH_NAME


def install(site_packages: Path | None = None) -> Path:
    """Write the path-configuration file (replacing an older one) and return its path."""
    path = pth_path(site_packages)
    partial = path.with_name(path.name + ".partial")
    partial.write_text(PTH_LINE, encoding="utf-8")
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
    if args.action == "install":
        print(f"installed {install(args.site_packages)}")
    elif args.action == "remove":
        path = pth_path(args.site_packages)
        print(f"removed {path}" if remove(args.site_packages) else f"not installed ({path})")
    else:
        path = pth_path(args.site_packages)
        print(f"installed {path}" if path.exists() else f"not installed ({path})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
