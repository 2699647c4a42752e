"""Import torchvision on a torch whose build its C++ extension does not match.

The shim itself is :mod:`twinaudit.wire.torchvision_shim`, shared with the practitioner's
Hugging Face oracles; this module keeps the owner's import path.
"""

from __future__ import annotations

from twinaudit.wire.torchvision_shim import import_torchvision, shim_active

__all__ = ["import_torchvision", "shim_active"]
