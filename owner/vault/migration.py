"""``owner vault-migrate``: rewrite a vault in format 2, 3 or 4.

Any format becomes format 2 (self-contained: no JPEG decoder is needed to read it); any
becomes format 3 or 4 when the photos it was marked from are given (each item whose
photo is found there as a JPEG is kept as that JPEG where that is smaller: any file is
safe to give, since a correction plane makes the pixels exact and the smaller coding is
chosen per item). Format 4 keeps the colour profile each photo was read with (a vault
before format 4 recorded none); a vault that holds profiles is not migrated to a format
that cannot record them, since its publication would then show other colours.

Nothing a vault commits to changes: the same pairs give the same commitments, root,
inclusion proofs and openings, so the escrow receipt and its inclusion proof stay
valid. What changes is how the chunks are stored (:mod:`twinaudit.owner.vault.pair_codec`), hence
their names and SHA-256, the journal's records and the manifest's file list.

The migration never touches the old vault until the new one is complete:

1. the old vault is opened (every check of :meth:`Vault.open`) and locked;
2. the new one is written in a sibling directory ``.<name>.migrating-<random>``: the
   secret, each chunk re-encoded one at a time, the journal, the receipt and the
   arbiter's key as they were, and the manifest;
3. the new one is opened (every check again, the receipt included), and its
   commitments compared with the old one's, pair by pair;
4. the two directories are swapped in one atomic step (``renameat2`` with
   ``RENAME_EXCHANGE``), the parent directory made durable, and the old vault, now
   under the sibling's name, removed.

A crash before step 4 leaves the old vault in place, unchanged, and at most a sibling
directory that the next run removes; a crash after it leaves the new vault in place,
and the old one in the sibling, which the next run removes too. Where the file system
cannot swap two directories atomically the migration stops before step 4 and leaves
the old vault as it was.
"""

from __future__ import annotations

import ctypes
import errno
import hmac
import os
import shutil
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Final

from twinaudit.protocol.errors import (
    ParameterError,
    StateError,
    VaultIntegrityError,
    VaultStorageError,
)
from twinaudit.protocol.items import MAX_IMAGE_SIDE

from ..heif_reader import is_heif
from . import files
from .chunks import encode_chunk, read_record
from .journal import PROFILES_FROM_FORMAT, ChunkRecord, frame, read_journal
from .jpeg_pairs import is_jpeg
from .layout import (
    ARBITER_KEY_FILE,
    CHUNKS_DIR,
    DIR_MODE,
    FORMAT_VERSION,
    JOURNAL_FILE,
    MANIFEST_FILE,
    MAX_CHUNK_BYTES,
    MAX_RECEIPT_FILE_BYTES,
    RECEIPT_FILE,
    SECRET_FILE,
    chunk_file,
)
from .manifest import Manifest, read_manifest
from .secret import read_secret
from .vault import PIXEL_ITEM_KINDS, Vault

#: ``renameat2``'s flag that swaps two paths atomically, and the "current directory" fd.
_RENAME_EXCHANGE: Final = 2
_AT_FDCWD: Final = -100
#: What ``renameat2`` answers where the file system (or kernel) cannot exchange.
_CANNOT_EXCHANGE: Final = frozenset({errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP})
#: The formats a vault can be migrated to.
TARGET_VERSIONS: Final = (2, 3, 4, 5)
#: Longest source file read for an item (the largest image's raw pixels); a longer JPEG
#: than its own item's raw pixels is not kept either.
_MAX_ORIGINAL_BYTES: Final = MAX_IMAGE_SIDE * MAX_IMAGE_SIDE * 3

#: Returns the bytes of the file an item (named as the vault names it) was read from, or None.
Originals = Callable[[str], bytes | None]


@dataclass(frozen=True)
class Migration:
    """What :func:`migrate_vault` did: the formats before and after, and the bytes on disk."""

    path: Path
    from_version: int
    to_version: int
    bytes_before: int
    bytes_after: int

    def describe(self) -> str:
        """Return one line for a person."""
        if self.from_version == self.to_version:
            return (
                f"vault {self.path} is already format {self.to_version}; nothing to do "
                f"({self.bytes_after:,} bytes)"
            )
        return (
            f"vault {self.path}: format {self.from_version} -> {self.to_version}, "
            f"{self.bytes_before:,} -> {self.bytes_after:,} bytes; root, commitments and "
            "receipt unchanged"
        )


def migrate_vault(
    path: Path, *, to_version: int | None = None, originals: Originals | None = None
) -> Migration:
    """Rewrite the vault at ``path`` in ``to_version``, atomically (see the module).

    ``to_version`` is 2, 3 or 4; unset, it is 4 when ``originals`` is given, else 2.
    ``originals`` (see :func:`originals_in`) gives the source file of each item by name,
    which formats 3 and 4 need; a vault already in ``to_version`` is left as it is.

    Raises:
        ParameterError: ``to_version`` is not 2, 3 or 4, is 3 or 4 without
            ``originals``, or cannot record the colour profiles the vault holds.
        InputError, StateError, VersionError, VaultIntegrityError: the vault does not
            open (it is named as by :meth:`Vault.open`), or another writer holds it.
        StateError: the file system cannot swap two directories atomically; nothing
            was changed.
        VaultStorageError: writing the new vault failed (the disk is full?); the old
            vault is as it was.

    """
    target = _target_version(to_version, originals)
    old = Vault.open(Path(path))
    if target >= 3 and originals is None and old.format_version != target:
        raise ParameterError(
            f"format {target} keeps each photo as its JPEG: give the folder of photos the "
            "vault was marked from (--sources), or migrate to format 2"
        )
    profiled = sum(profile is not None for profile in old.colour_profiles())
    if profiled and target < PROFILES_FROM_FORMAT:
        raise ParameterError(
            f"vault {path} keeps the colour profiles of {profiled} photos, which format "
            f"{target} cannot record (its publication would show other colours): keep it "
            f"in format {old.format_version}"
        )
    path = Path(path).resolve()  # a link to the vault: swap the directory it names
    with files.DirectoryLock(path):
        _remove_leftovers(path)
        before = files.tree_bytes(path)
        if old.format_version == target:
            return Migration(path, old.format_version, target, before, before)
        manifest = read_manifest(path)
        if manifest != old.manifest:
            raise StateError(f"vault {path} changed since it was opened; run the migration again")
        staging = Path(tempfile.mkdtemp(prefix=_staging_prefix(path), dir=path.parent))
        try:
            os.chmod(staging, DIR_MODE)
            _write_migrated(path, staging, manifest, target, originals)
            new = Vault.open(staging)
            if new.root != old.root or not hmac.compare_digest(
                new.packed_commitments(), old.packed_commitments()
            ):
                raise VaultIntegrityError(staging, MANIFEST_FILE, "commits to other pairs")
            _exchange(staging, path)
        except BaseException as exc:
            shutil.rmtree(staging, ignore_errors=True)
            if isinstance(exc, OSError):
                raise VaultStorageError(path, "write the migrated vault", exc) from exc
            raise
        shutil.rmtree(staging, ignore_errors=True)  # the old vault, now under that name
    return Migration(path, old.format_version, target, before, files.tree_bytes(path))


def originals_in(folder: Path) -> Originals:
    """Return a reader of the JPEG and HEIF files in ``folder`` named as a vault names its items.

    A name that leaves the folder, a missing or unreadable file, anything but a regular
    file, a file that is neither a JPEG nor a HEIF (format 3 keeps JPEGs only) or is
    longer than the largest image's raw pixels gives None (that item keeps its midpoint).
    """
    root = Path(folder).resolve()
    if not root.is_dir():
        raise ParameterError(f"{folder} is not a folder of photos")

    def read(name: str) -> bytes | None:
        candidate = (root / name).resolve()
        if not candidate.is_relative_to(root) or not candidate.is_file():
            return None
        try:
            data = files.read_bounded(candidate, _MAX_ORIGINAL_BYTES)
        except OSError:
            return None
        kept = is_jpeg(data) or is_heif(data)
        return data if kept and len(data) <= _MAX_ORIGINAL_BYTES else None

    return read


def _target_version(to_version: object, originals: Originals | None) -> int:
    if to_version is None:
        return FORMAT_VERSION if originals is not None else 2
    if isinstance(to_version, bool) or to_version not in TARGET_VERSIONS:
        raise ParameterError(f"a vault migrates to format 2, 3, 4 or 5, not {to_version!r}")
    assert isinstance(to_version, int)
    return to_version


def _write_migrated(
    source: Path, target: Path, manifest: Manifest, version: int, originals: Originals | None
) -> None:
    """Write the vault at ``source`` in format ``version`` into the empty ``target``."""
    journal = read_journal(source)
    parameters = replace(journal.parameters, format_version=version)
    (target / CHUNKS_DIR).mkdir(mode=DIR_MODE)
    records: list[ChunkRecord] = []
    for record in journal.chunks:
        kept = None
        if originals is not None and version >= 3:
            kept = [originals(name) for name in record.names]
        records.append(
            _migrate_chunk(
                source,
                target,
                record,
                parameters.item_kind,
                version,
                kept,
                source_version=journal.parameters.format_version,
            )
        )
    files.write_new_file(target / SECRET_FILE, read_secret(source))
    framed = [frame(parameters.to_value()), *(frame(record.to_value()) for record in records)]
    files.write_new_file(target / JOURNAL_FILE, framed)
    digests = {name: digest for name, digest in manifest.files.items() if "/" not in name}
    digests[JOURNAL_FILE] = files.sha256_file(target / JOURNAL_FILE)
    digests.update({record.file: record.sha256 for record in records})
    for name in (RECEIPT_FILE, ARBITER_KEY_FILE):
        if name in manifest.files:
            files.write_new_file(
                target / name, files.read_bounded(source / name, MAX_RECEIPT_FILE_BYTES)
            )
    files.fsync_dir(target / CHUNKS_DIR)
    replace(manifest, files=digests, format_version=version).write(target)


def _migrate_chunk(  # noqa: PLR0917 - one chunk and what its new format needs
    source: Path,
    target: Path,
    record: ChunkRecord,
    item_kind: str,
    version: int,
    originals: Sequence[bytes | None] | None,
    *,
    source_version: int,
) -> ChunkRecord:
    """Write one chunk of the old vault (in ``source_version``) into the new; return its record."""
    name = chunk_file(record.ordinal, item_kind, version)
    if item_kind in PIXEL_ITEM_KINDS:
        pixels = read_record(source, record, source_version).pixels()
        pieces = encode_chunk(pixels[0], pixels[1], version, originals)
        del pixels
    else:  # text chunks are stored alike in both formats
        pieces = [files.read_bounded(source / record.file, MAX_CHUNK_BYTES)]
    files.write_new_file(target / name, pieces)
    return replace(record, file=name, sha256=files.sha256_file(target / name))


def _exchange(first: Path, second: Path) -> None:
    """Swap the directories ``first`` and ``second`` atomically, durably; StateError if not here."""
    try:
        renameat2 = ctypes.CDLL(None, use_errno=True).renameat2
    except (AttributeError, OSError):
        raise StateError(
            "this system cannot swap two directories atomically (no renameat2); the vault "
            "was left as it was"
        ) from None
    renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p]
    renameat2.argtypes.append(ctypes.c_uint)
    renameat2.restype = ctypes.c_int
    if renameat2(_AT_FDCWD, os.fsencode(first), _AT_FDCWD, os.fsencode(second), _RENAME_EXCHANGE):
        error = ctypes.get_errno()
        if error in _CANNOT_EXCHANGE:
            raise StateError(
                f"the file system of {second} cannot swap two directories atomically; the "
                "vault was left as it was"
            )
        raise OSError(error, os.strerror(error), str(second))
    files.fsync_dir(second.parent)


def _staging_prefix(path: Path) -> str:
    return f".{path.name}.migrating-"


def _remove_leftovers(path: Path) -> None:
    """Remove what an interrupted migration of ``path`` left beside it (old or new copies)."""
    parent = path.parent
    if not parent.is_dir():
        return
    prefix = _staging_prefix(path)
    for entry in parent.iterdir():
        if entry.name.startswith(prefix) and entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry, ignore_errors=True)
