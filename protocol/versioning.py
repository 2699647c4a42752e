"""Spec-version checks (spec §1.2): refuse any message produced under a version we do not speak."""

from __future__ import annotations

from typing import Final

from . import SPEC_VERSION
from .errors import VersionError

#: Versions of spec/protocol.md whose messages this implementation accepts.
SUPPORTED_SPEC_VERSIONS: Final = frozenset({SPEC_VERSION})


def require_supported(version: object, what: str = "message") -> str:
    """Return ``version`` if this implementation speaks it, else raise VersionError."""
    if not isinstance(version, str) or version not in SUPPORTED_SPEC_VERSIONS:
        raise VersionError(
            f"{what} was produced under spec version {version!r}; "
            f"this implementation speaks {sorted(SUPPORTED_SPEC_VERSIONS)}"
        )
    return version
