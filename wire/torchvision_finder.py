"""The finder that :mod:`twinaudit.wire.torchvision_hook` runs at every interpreter start.

Its text is compiled and run by the environment's path-configuration file, at each
start of the interpreter, with nothing imported but :mod:`sys` and :mod:`os`, which the
interpreter has loaded already: it defines :class:`TorchvisionFinder` and puts one at
the front of :data:`sys.meta_path` (:func:`install_finder`), which costs a few dozen
microseconds. The finder does nothing until something imports ``torchvision``; it then
takes itself out and makes torchvision's two missing operator schemas exist
(:func:`twinaudit.wire.torchvision_shim.prepare_torchvision`) before the ordinary import goes on.

The shim it runs is the installed project's, loaded by its absolute path, never found
through :data:`sys.path`, whose first entry is the script's folder or the current one: a
``wire/torchvision_shim.py`` planted there is not executed. Where a
``twinaudit.wire.torchvision_shim``
is already imported (the project's own code is running, and calls it first), that one is
used, so one copy holds the process's registration. Nothing here may fail loudly: any
error (no torch, a moved project) leaves the import to go on as it would without the hook,
and the path-configuration line prints nothing.
"""

from __future__ import annotations

import os
import sys

# Not typing.TYPE_CHECKING: importing typing would cost the start-up milliseconds this
# module exists to save (mypy reads the name the same way).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from types import ModuleType

#: The name the installed project's shim is loaded under when the process has none.
SHIM_MODULE = "twinaudit_torchvision_shim"
#: The attribute that marks a finder as this hook's, whichever copy of the code made it.
MARK = "twinaudit_torchvision_hook"


class TorchvisionFinder:
    """A meta-path finder that prepares torchvision's operator schemas before its import.

    ``shim`` is the absolute path of the installed project's ``wire/torchvision_shim.py``.
    """

    twinaudit_torchvision_hook = True

    def __init__(self, shim: str) -> None:
        """Remember the shim's absolute path."""
        self.shim = shim

    def find_spec(
        self, fullname: str, path: Sequence[str] | None = None, target: ModuleType | None = None
    ) -> None:
        """Prepare the shim when ``torchvision`` is imported; find nothing itself."""
        if fullname != "torchvision":
            return None
        remove_finder()
        import contextlib  # noqa: PLC0415 - only once torchvision is imported

        with contextlib.suppress(Exception):  # a hook that cannot apply stays silent
            load_shim(self.shim).prepare_torchvision()
        return None  # the ordinary finders import torchvision itself


def load_shim(shim: str) -> ModuleType:
    """Return the process's ``twinaudit.wire.torchvision_shim``, or load the one at ``shim``."""
    loaded = sys.modules.get("twinaudit.wire.torchvision_shim") or sys.modules.get(SHIM_MODULE)
    if loaded is not None:
        return loaded
    if not os.path.isabs(shim):
        raise ImportError(f"the torchvision shim's path is not absolute: {shim!r}")
    import importlib.util  # noqa: PLC0415 - only once torchvision is imported

    spec = importlib.util.spec_from_file_location(SHIM_MODULE, shim)
    if spec is None or spec.loader is None:
        raise ImportError(f"no torchvision shim at {shim!r}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[SHIM_MODULE] = module  # keeps its torch.library registration alive
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[SHIM_MODULE]
        raise
    return module


def install_finder(shim: str) -> None:
    """Put one :class:`TorchvisionFinder` at the front of :data:`sys.meta_path` (idempotent)."""
    if "torchvision" in sys.modules:
        return
    if not any(getattr(finder, MARK, False) for finder in sys.meta_path):
        sys.meta_path.insert(0, TorchvisionFinder(shim))


def remove_finder() -> None:
    """Take every finder this hook put in :data:`sys.meta_path` out of it."""
    sys.meta_path[:] = [f for f in sys.meta_path if not getattr(f, MARK, False)]
