"""Errors of the owner's vault, in the :mod:`twinaudit.protocol.errors` taxonomy.

- :class:`VaultIntegrityError` (a :class:`~twinaudit.protocol.errors.VerificationError`): a file
  of the vault is missing, unexpected, or not what the vault recorded. It names the
  file, relative to the vault directory.
- :class:`VaultStorageError` (a :class:`~twinaudit.protocol.errors.StateError`): the operating
  system refused a write (disk full, permissions, I/O error). Nothing of the failed
  step was kept, so the marking run can be resumed once the cause is fixed.
"""

from __future__ import annotations

import errno
from pathlib import Path

from twinaudit.protocol.errors import StateError, VerificationError


class VaultIntegrityError(VerificationError):
    """A vault file is missing, unexpected or modified; ``file`` names it."""

    code = "vault-integrity"

    def __init__(self, vault: Path, file: str, problem: str) -> None:
        """Record the vault, the file (relative to the vault) and what is wrong with it."""
        super().__init__(f"vault {vault}: {file}: {problem}")
        self.vault = vault
        self.file = file
        self.problem = problem


class VaultStorageError(StateError):
    """Writing to the vault failed; nothing of the failed step was kept.

    ``errno`` is the operating system's error number (``errno.ENOSPC`` for a full disk).
    """

    code = "vault-storage"

    def __init__(self, vault: Path, action: str, error: OSError) -> None:
        """Describe the failed ``action`` and the operating system's ``error``."""
        reason = "the disk is full" if error.errno == errno.ENOSPC else error.strerror or str(error)
        super().__init__(
            f"vault {vault}: could not {action}: {reason}; nothing of this step was kept, "
            "so the run can be resumed once the cause is fixed"
        )
        self.vault = vault
        self.errno = error.errno
