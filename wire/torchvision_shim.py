"""Import torchvision on a torch whose build its C++ extension does not match.

torchvision 0.28's wheel is built against CUDA; next to the CPU build of torch 2.13
its extension ``torchvision/_C`` cannot be loaded, and ``import torchvision`` then
fails with "operator torchvision::nms does not exist": the package's
``_meta_registrations`` module registers fake (meta) kernels for ``torchvision::nms``
and ``torchvision::qnms`` unconditionally, and those schemas are only defined by the
extension. (Every other operator registration is guarded by ``extension._has_ops()``.)

The workaround is this module's one function, :func:`import_torchvision`: when the
schemas are missing and the extension cannot provide them, it defines the two schemas
itself with :mod:`torch.library` (no kernels) before importing torchvision. The
models and transforms then import and work; calling ``torchvision.ops.nms`` still
fails, as it would have without the extension. Where the extension loads, nothing is
defined and the import is the ordinary one. Nothing else in twinaudit may import
torchvision directly: go through :func:`import_torchvision`, and call it before
importing ``transformers`` (or ``sentence_transformers``), which imports torchvision
whenever it is installed. Before running code that may import either (a user's model
module, an unpickled model), call :func:`prepare_torchvision`.

It lives in the wire layer, below the roles, because two of them need it: the owner's
extractors and text models (re-exported as ``twinaudit.owner.marking.torchvision_shim``)
and the practitioner's Hugging Face oracles (:mod:`twinaudit.practitioner.hf`). Only a
caller that imports this module imports torch; nothing else in ``wire`` does.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import importlib.util
import sys
import threading
from pathlib import Path
from types import ModuleType
from typing import Final

import torch

#: Schemas of the operators torchvision's meta registrations need, as its extension
#: defines them.
_SCHEMAS: Final = {
    "nms": "nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor",
    "qnms": "qnms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor",
}

# Re-entrant: finding torchvision's spec under the lock may run the start-up hook's
# finder (wire/torchvision_hook.py), which prepares the schemas through this lock again.
_lock = threading.RLock()
# The library that holds the definitions must stay alive: dropping it unregisters them.
_library: torch.library.Library | None = None


def import_torchvision() -> ModuleType:
    """Return the ``torchvision`` module, defining its two missing schemas first if needed.

    Idempotent and thread-safe; a no-op shim where torchvision's extension loads.
    """
    with _lock:
        loaded = sys.modules.get("torchvision")
        if loaded is not None and hasattr(loaded, "models"):
            return loaded
        if not _schemas_defined() and not _load_extension():
            _define_schemas()
        return importlib.import_module("torchvision")


def prepare_torchvision() -> None:
    """Make a later plain ``import torchvision`` work, without importing it now.

    For code this project does not write: a model module named by ``--arch``, the
    classes an unpickled model names, ``transformers``. Defines the two schemas if they
    are missing (as :func:`import_torchvision` does); a no-op where torchvision is not
    installed or is already imported.
    """
    with _lock:
        if "torchvision" in sys.modules or importlib.util.find_spec("torchvision") is None:
            return
        if not _schemas_defined() and not _load_extension():
            _define_schemas()


def shim_active() -> bool:
    """Return True if this process runs torchvision on the shim's schemas (no extension)."""
    return _library is not None


def _schemas_defined() -> bool:
    """Return True if every operator in :data:`_SCHEMAS` has a schema in this process."""
    return all(_op_exists(name) for name in _SCHEMAS)


def _op_exists(name: str) -> bool:
    try:
        getattr(torch.ops.torchvision, name)
    except (AttributeError, RuntimeError):
        return False
    return True


def _load_extension() -> bool:
    """Load ``torchvision/_C`` the way torchvision would, without importing the package.

    Importing the package to find out would leave a half-imported torchvision behind
    (its submodules stay in ``sys.modules`` when ``__init__`` fails).
    """
    spec = importlib.util.find_spec("torchvision")
    if spec is None or not spec.submodule_search_locations:
        return False
    for folder in spec.submodule_search_locations:
        for suffix in importlib.machinery.EXTENSION_SUFFIXES:
            path = Path(folder) / f"_C{suffix}"
            if not path.is_file():
                continue
            try:
                torch.ops.load_library(str(path))  # type: ignore[no-untyped-call]  # unannotated in torch
            except (OSError, RuntimeError):
                return False
            return _schemas_defined()
    return False


def _define_schemas() -> None:
    global _library  # noqa: PLW0603 - the one process-wide registration handle
    if _library is None:
        # FRAGMENT, not DEF: it coexists with any other definer of the namespace.
        # (Library.__init__ and Library.define are unannotated in torch 2.13.)
        _library = torch.library.Library("torchvision", "FRAGMENT")  # type: ignore[no-untyped-call]
    for name, schema in _SCHEMAS.items():
        if not _op_exists(name):
            _library.define(schema)  # type: ignore[no-untyped-call]  # unannotated in torch
