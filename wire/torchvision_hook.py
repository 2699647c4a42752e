"""Make a plain ``import torchvision`` (and so ``import transformers``) work in an environment.

:mod:`twinaudit.wire.torchvision_shim` fixes torchvision's import for the code of this project,
which calls it first. A user's own script in the same environment (``from transformers
import GPT2LMHeadModel`` to build or save a model for ``oracle serve --hf``) does not, and
fails with "operator torchvision::nms does not exist" where torch is the CPU build and
torchvision the CUDA-built wheel (the project's ``.venv``).

This module installs, once per environment, a path-configuration file
(:data:`PTH_NAME`, processed by :mod:`site` at every interpreter start). Its one line
holds :mod:`twinaudit.wire.torchvision_finder` compiled at install time (:func:`finder_code`) and
runs it, inside a ``try`` that swallows every error, so that a
:class:`~twinaudit.wire.torchvision_finder.TorchvisionFinder` stands at the front of
:data:`sys.meta_path`. It imports no module (``sys``, ``os`` and ``marshal`` are loaded
already) and reads no project file: it adds about half a millisecond to an interpreter
start (``python -m bench startup``), where loading this module by its path took 20–60 ms
(its ``importlib.abc`` pulled in ``typing``, ``pathlib`` and ``tempfile``), and no edit
of the project's files, a syntax error included, makes every interpreter print a
traceback. The finder costs nothing until something imports ``torchvision``: it then
removes itself and runs :func:`twinaudit.wire.torchvision_shim.prepare_torchvision` (which defines
the two missing operator schemas only where torchvision's extension cannot be loaded)
from the installed project's file, by its absolute path, never through
:data:`sys.path` (whose first entry is the current folder), and lets the ordinary
import go on.

``make .venv/.installed`` installs it; elsewhere ``python -m twinaudit.wire.torchvision_hook
install`` does (``remove`` takes it out, ``status`` says whether it is there), and again
after :mod:`twinaudit.wire.torchvision_finder` changes, since the line holds a copy. Where
torchvision's extension loads, the hook changes nothing. A moved or deleted project
leaves a line that does nothing; ``install`` again points it at the new place.
"""

from __future__ import annotations
import __future__

import ast
import contextlib
import marshal
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Final

#: The path-configuration file's name in the environment's ``site-packages``.
PTH_NAME: Final = "twinaudit-torchvision-hook.pth"
#: The name the finder's code runs under (:data:`twinaudit.wire.torchvision_finder.MARK`).
HOOK_NAME: Final = "twinaudit_torchvision_hook"
#: The file name the finder's code object carries.
_SOURCE_NAME: Final = "<twinaudit torchvision hook>"
#: What the line runs: the code object, in a ``try`` that swallows every error.
_GUARDED: Final = "try:\n exec(marshal.loads(code), {'__name__': name})\nexcept Exception:\n pass\n"


def finder_code(shim_file: Path) -> bytes:
    """Return the marshalled code that defines the finder and installs it for ``shim_file``.

    It is :mod:`twinaudit.wire.torchvision_finder` without its docstrings and ``__future__`` import
    (compiled with postponed annotations instead), followed by
    ``install_finder(<shim_file>)``: a few kilobytes that load in microseconds.
    """
    tree = ast.parse(_sibling("torchvision_finder.py").read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef) and ast.get_docstring(
            node
        ):
            node.body = node.body[1:] or [ast.Pass()]
    future = [n for n in tree.body if isinstance(n, ast.ImportFrom) and n.module == "__future__"]
    call = ast.parse(f"install_finder({str(shim_file)!r})").body
    body = [n for n in tree.body if n not in future] + call
    module = ast.fix_missing_locations(ast.Module(body=body, type_ignores=[]))
    flags = __future__.annotations.compiler_flag
    return marshal.dumps(compile(module, _SOURCE_NAME, "exec", flags=flags, dont_inherit=True))


def pth_text(shim_file: Path) -> str:
    """Return the path-configuration file that installs the finder for ``shim_file``.

    ``shim_file`` is the absolute path of the ``wire/torchvision_shim.py`` the finder
    runs. The file is a comment naming what it does, then one line that :mod:`site`
    executes (it starts with ``import``). The line runs :func:`finder_code` only on the
    interpreter it was compiled for (its ``cache_tag``), inside ``try``/``except
    Exception: pass``: it prints nothing where it cannot apply, and does nothing where
    the shim is gone. Unmarshalling costs microseconds where compiling the finder's
    source at every start cost a millisecond or more.
    """
    tag = sys.implementation.cache_tag
    context = f"{{'marshal': marshal, 'name': {HOOK_NAME!r}, 'code': {finder_code(shim_file)!r}}}"
    return (
        "# twinaudit: makes a plain `import torchvision` work (wire/torchvision_hook.py); "
        f"compiled from {_sibling('torchvision_finder.py')} for {tag}, runs {shim_file} when "
        "torchvision is first imported. "
        "`python -m twinaudit.wire.torchvision_hook remove` removes it.\n"
        f"import sys, marshal; exec({_GUARDED!r}, {context}) "
        f"if sys.implementation.cache_tag == {tag!r} else None\n"
    )


def _sibling(name: str) -> Path:
    """Return the absolute path of ``name`` in this file's folder (the installed project's).

    This module never imports its siblings: a path-configuration line written before
    the finder moved to :mod:`twinaudit.wire.torchvision_finder` loads this file by its path, with
    no package around it, and calls :func:`install_finder`.
    """
    return Path(__file__).resolve().with_name(name)


def install_finder() -> None:
    """Install the finder, for a path-configuration line written before 2026-11-28.

    Such a line loads this file by its path at every start and calls this function; it
    keeps working, silently, until ``install`` (``make``) writes the current line.
    """
    with contextlib.suppress(Exception):  # a hook that cannot apply stays silent
        exec(marshal.loads(finder_code(_sibling("torchvision_shim.py"))), {"__name__": HOOK_NAME})


def pth_path(site_packages: Path | None = None) -> Path:
    """Return where the path-configuration file goes: this environment's ``purelib``."""
    import sysconfig  # noqa: PLC0415 - only the commands need it, not the start-up hook

    folder = site_packages if site_packages is not None else Path(sysconfig.get_paths()["purelib"])
    return folder / PTH_NAME


def install(site_packages: Path | None = None) -> Path:
    """Write the path-configuration file (replacing an older one) and return its path."""
    path = pth_path(site_packages)
    partial = path.with_name(path.name + ".partial")
    partial.write_text(pth_text(_sibling("torchvision_shim.py")), encoding="utf-8")
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
    """``python -m twinaudit.wire.torchvision_hook install|remove|status``; return the exit code."""
    import argparse  # noqa: PLC0415 - only the command needs it, not the start-up hook

    parser = argparse.ArgumentParser(
        prog="python -m twinaudit.wire.torchvision_hook",
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
