"""Marking: make the twin versions x⁰, x¹ of each image (paper Eq. 2, appendix E).

:class:`MarkingConfig` (plain data, no torch) says how; :func:`make_marker` builds a
:class:`Marker` from it and the secret 32-byte marking seed. The torch-dependent names
(``make_marker``, ``Marker``, ``Extractor``, ``load_extractor``, ``feature_distances``)
are imported on first use, so reading a vault's config does not import torch.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from .config import MarkingConfig

if TYPE_CHECKING:
    from .extractors import Extractor, feature_distances, load_extractor
    from .markers import Marker, make_marker

_LAZY = {
    "Extractor": "extractors",
    "feature_distances": "extractors",
    "load_extractor": "extractors",
    "Marker": "markers",
    "make_marker": "markers",
}

__all__ = [
    "Extractor",
    "Marker",
    "MarkingConfig",
    "feature_distances",
    "load_extractor",
    "make_marker",
]


def __getattr__(name: str) -> object:
    """Import the torch-dependent names lazily."""
    if name in _LAZY:
        return getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
