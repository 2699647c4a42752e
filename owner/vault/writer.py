"""Writing a vault: a resumable marking run, chunk by chunk, then the manifest.

:meth:`VaultWriter.create_or_resume` creates a new vault atomically (it is built in a
temporary sibling directory and renamed into place) or resumes an unfinished one after
checking it. :meth:`VaultWriter.append` makes one batch durable: chunk file first (temp
file, fsync, rename, fsync directory), then its journal record (fsynced). A failure at
any point removes what the batch had written, so a later run resumes at the same item.
:meth:`VaultWriter.finish` derives the salts, commits to every pair and writes the
manifest. A directory lock keeps two writers off one vault.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np
import numpy.typing as npt

from twinaudit.protocol import limits
from twinaudit.protocol.encoding import Value, decode, encode
from twinaudit.protocol.errors import (
    InputError,
    LimitExceededError,
    ParameterError,
    StateError,
    VaultIntegrityError,
    VaultStorageError,
)
from twinaudit.protocol.items import ITEM_KINDS

from . import files
from .chunks import check_batch, check_captions, encode_chunk
from .committing import commit_records
from .journal import (
    PROFILES_FROM_FORMAT,
    ChunkRecord,
    JournalAppender,
    RunParameters,
    frame,
    read_journal,
)
from .layout import (
    CHUNKS_DIR,
    DIR_MODE,
    FORMAT_VERSION,
    JOURNAL_FILE,
    MANIFEST_FILE,
    MAX_PARAMETERS_BYTES,
    MAX_PROFILE_BYTES,
    READABLE_FORMAT_VERSIONS,
    SECRET_BYTES,
    SECRET_FILE,
    TEMP_PREFIX,
    chunk_file,
    is_chunk_file,
)
from .manifest import Manifest
from .mark_fields import Field, field_problem
from .secret import check_secret, marking_seed, read_secret, secret_check
from .text_chunks import check_text_batch, encode_text_chunk
from .vault import VAULT_ITEM_KINDS, Vault, commitment_tree

Pixels = npt.NDArray[np.uint8]

#: Items per chunk that :func:`write_vault` uses unless told otherwise.
DEFAULT_BATCH_ITEMS = 4096


class VaultWriter:
    """Writes the pairs of one marking run into a vault; resumable after any interruption."""

    def __init__(
        self,
        path: Path,
        *,
        parameters: RunParameters,
        secret: bytes,
        records: list[ChunkRecord],
        journal: JournalAppender,
        lock: files.DirectoryLock,
    ) -> None:
        """Hold a checked, locked vault; use :meth:`create_or_resume`."""
        self.path = path
        self.item_kind = parameters.item_kind
        self.n_items = parameters.n_items
        self._parameters = parameters
        self._secret = secret
        self._records = records
        self._journal = journal
        self._lock: files.DirectoryLock | None = lock
        self.completed = sum(record.count for record in records)

    @classmethod
    def create_or_resume(
        cls,
        path: Path,
        *,
        item_kind: str,
        source: Mapping[str, Value],
        config: Mapping[str, Value],
        n_items: int,
        secret: bytes | None = None,
        format_version: int = FORMAT_VERSION,
    ) -> VaultWriter:
        """Create the vault at ``path``, or resume the unfinished run there.

        A new vault needs ``path`` absent or an empty directory; its secret is ``secret``
        or 32 bytes from ``os.urandom``. An existing unfinished vault must have been
        started with identical ``item_kind``, ``source``, ``config`` and ``n_items`` (and
        ``secret``, when one is given); every durable chunk is checked, leftovers of an
        interrupted batch are removed, and writing resumes at :attr:`completed`, in the
        vault format the run was started in. ``format_version`` is the format of a new
        vault: the current one unless told otherwise (formats 1, raw pixels, and 2,
        the midpoint stored losslessly, are kept writable for checks and migrations).

        Raises:
            ParameterError: an argument is out of range, or differs from what the
                unfinished run was started with (the message names it).
            InputError: ``path`` is a file, or a non-empty directory that is not a vault.
            StateError: the vault is already complete, or another writer holds it.
            VaultIntegrityError: a durable file of the unfinished vault was modified.
            VaultStorageError: the new vault could not be written.

        """
        path = Path(path)
        parameters = _check_parameters(item_kind, source, config, n_items, format_version)
        given = None if secret is None else check_secret(secret)
        if path.exists() and not path.is_dir():
            raise InputError(f"{path} is a file, not a vault directory")
        if not path.exists() or not any(path.iterdir()):
            _create(path, parameters, given if given is not None else os.urandom(SECRET_BYTES))
        lock = files.DirectoryLock(path)
        lock.acquire()
        try:
            return cls._resume(path, parameters, given, lock)
        except BaseException:
            lock.release()
            raise

    @classmethod
    def _resume(
        cls,
        path: Path,
        parameters: RunParameters,
        given: bytes | None,
        lock: files.DirectoryLock,
    ) -> VaultWriter:
        if (path / MANIFEST_FILE).exists():
            raise StateError(f"vault {path} is already complete; open it instead")
        if not (path / JOURNAL_FILE).exists():
            raise InputError(f"{path} is neither empty nor a vault; choose another directory")
        journal = read_journal(path)
        _require_same_run(journal.parameters, parameters)
        secret = read_secret(path)
        if secret_check(secret) != journal.parameters.secret_check:
            raise VaultIntegrityError(path, SECRET_FILE, "is not the secret the run started with")
        if given is not None and given != secret:
            raise ParameterError(f"vault {path} was started with another secret")
        leftovers = _leftovers(path, journal.chunks)
        for record in journal.chunks:
            try:
                digest = files.sha256_file(path / record.file)
            except FileNotFoundError:
                raise VaultIntegrityError(path, record.file, "is missing") from None
            if digest != record.sha256:
                raise VaultIntegrityError(path, record.file, "was modified (SHA-256 differs)")
        appender = JournalAppender(path / JOURNAL_FILE, journal.valid_bytes)
        try:
            appender.cut_torn_tail()
            for leftover in leftovers:
                files.remove_if_present(path / leftover)
            files.fsync_dir(path / CHUNKS_DIR)
            files.fsync_dir(path)
        except OSError as exc:
            raise VaultStorageError(path, "clean up an interrupted batch", exc) from exc
        return cls(
            path,
            parameters=journal.parameters,
            secret=secret,
            records=list(journal.chunks),
            journal=appender,
            lock=lock,
        )

    # --- Properties --------------------------------------------------------------------------

    @property
    def secret(self) -> bytes:
        """The 32-byte vault secret."""
        return self._secret

    @property
    def marking_seed(self) -> bytes:
        """The seed of the marking run's randomness (derived from the secret)."""
        return marking_seed(self._secret)

    @property
    def source(self) -> dict[str, Value]:
        """The source description the run was started with."""
        return self._parameters.source

    @property
    def keeps_profiles(self) -> bool:
        """Tell whether this run's vault format records colour profiles (format 4 on)."""
        return self._parameters.format_version >= PROFILES_FROM_FORMAT

    @property
    def config(self) -> dict[str, Value]:
        """The marking configuration the run was started with."""
        return self._parameters.config

    # --- Writing -----------------------------------------------------------------------------

    def append(
        self,
        versions0: Pixels,
        versions1: Pixels,
        labels: Sequence[int | None],
        names: Sequence[str],
        captions: Sequence[str] | None = None,
        *,
        originals: Sequence[bytes | None] | None = None,
        photos: Pixels | None = None,
        profiles: Sequence[bytes | None] | None = None,
        fields: Sequence[Field | None] | None = None,
    ) -> None:
        """Make one batch of images durable: items ``completed .. completed + B - 1``.

        ``versions0`` and ``versions1`` are uint8 arrays of one shape ``(B, H, W, C)``,
        ``labels`` and ``names`` have ``B`` entries, and so do ``captions``, which a
        captioned-image vault requires and an image vault refuses. ``originals``, when
        given, holds per item the bytes of the file it was read from (or None): a
        format-3 vault keeps a JPEG among them in place of the item's midpoint where that
        is smaller (any bytes are safe: a correction makes the pixels exact); earlier
        formats ignore them. ``photos``, with ``originals``, holds the ``(B, H, W, C)``
        images as decoded from those bytes with Pillow (what was marked), which spares
        decoding each JPEG again; pixels that are not that decoding are caught when the
        chunk is read back. ``profiles``, when given, holds per item the ICC colour
        profile it was read with (or None), which publication writes with it; formats
        before 4 cannot record them and refuse a batch with one. ``fields``, when given,
        holds per item the mark field its mark was carried back from (a float32 array
        ``(c, h, w)``; :mod:`twinaudit.owner.vault.mark_fields`) or None: format 5 stores
        such an item as what the field's prediction misses, which for the marker's own
        field is next to nothing (any field gives the exact pixels); earlier formats
        ignore them. On any failure nothing of the batch is kept and :attr:`completed` is
        unchanged.

        Raises:
            InputError, ParameterError: a wrong shape, dtype, count, label, name,
                caption or mark field, or a batch going past ``n_items``.
            StateError: the writer is finished or closed, or holds texts.
            VaultStorageError: the disk is full (or another write error); resume later.

        """
        self._require_open()
        if self.item_kind == "text":
            raise StateError(f"vault {self.path} holds texts: use append_texts")
        shape, label_list, name_list = check_batch(versions0, versions1, labels, names)
        count = len(label_list)
        caption_list: list[str] | None = None
        if self.item_kind == "captioned-image":
            if captions is None:
                raise ParameterError("a captioned-image vault needs a caption per item")
            caption_list = check_captions(captions, count)
        elif captions is not None:
            raise ParameterError(f"a vault of {self.item_kind} items takes no captions")
        kept = _check_originals(originals, count)
        profile_list = _check_profiles(profiles, count, self._parameters.format_version)
        if photos is not None and (
            not isinstance(photos, np.ndarray)
            or photos.dtype != np.uint8
            or photos.shape != versions0.shape
        ):
            raise ParameterError(f"photos must be uint8 of the versions' shape {versions0.shape}")
        field_list = _check_fields(fields, count, shape)
        pieces = encode_chunk(
            versions0,
            versions1,
            self._parameters.format_version,
            kept,
            photos,
            fields=field_list,
        )
        record = self._record(
            count, shape, pieces, label_list, names=name_list, captions=caption_list
        )
        if profile_list is not None:
            record = replace(record, profiles=profile_list)
        self._write_chunk(record, pieces)

    def append_texts(
        self,
        originals: Sequence[str],
        versions0: Sequence[str],
        versions1: Sequence[str],
        names: Sequence[str],
    ) -> None:
        """Make one batch of texts durable: items ``completed .. completed + B - 1``.

        Each item has its original (kept privately for ``owner inspect``, never
        committed) and two versions that must differ. On any failure nothing of the
        batch is kept and :attr:`completed` is unchanged.

        Raises:
            InputError, ParameterError: a text empty or above the protocol's limit,
                identical versions, a wrong count or name, or a batch past ``n_items``.
            StateError: the writer is finished or closed, or does not hold texts.
            VaultStorageError: the disk is full (or another write error); resume later.

        """
        self._require_open()
        if self.item_kind != "text":
            raise StateError(f"vault {self.path} holds {self.item_kind} items: use append")
        chunk, name_list = check_text_batch(originals, versions0, versions1, names)
        pieces = [encode_text_chunk(chunk)]
        record = self._record(
            len(chunk), None, pieces, [None] * len(chunk), names=name_list, captions=None
        )
        self._write_chunk(record, pieces)

    def _record(
        self,
        count: int,
        shape: tuple[int, int, int] | None,
        pieces: Sequence[bytes],
        labels: list[int | None],
        *,
        names: list[str],
        captions: list[str] | None,
    ) -> ChunkRecord:
        if self.completed + count > self.n_items:
            raise ParameterError(
                f"a batch of {count} items after {self.completed} goes past the run's "
                f"{self.n_items} items"
            )
        ordinal = len(self._records)
        digest = hashlib.sha256()
        for piece in pieces:
            digest.update(piece)
        return ChunkRecord(
            ordinal=ordinal,
            file=chunk_file(ordinal, self.item_kind, self._parameters.format_version),
            start=self.completed,
            count=count,
            shape=shape,
            sha256=digest.digest(),
            labels=labels,
            names=names,
            captions=captions,
        )

    def _write_chunk(self, record: ChunkRecord, pieces: Sequence[bytes]) -> None:
        """Write the chunk file durably, then its journal record; all or nothing."""
        ordinal, count = record.ordinal, record.count
        frame(record.to_value())  # a record too large fails here, before any write
        final = self.path / record.file
        try:
            files.write_atomic(final, pieces)
            self._journal.append(record.to_value())
        except BaseException as exc:
            files.remove_quietly(final)
            if isinstance(exc, OSError):
                raise VaultStorageError(self.path, f"write chunk {ordinal}", exc) from exc
            raise
        self._records.append(record)
        self.completed += count

    def finish(self) -> Vault:
        """Commit to every pair, write the manifest, and return the opened vault.

        Raises:
            StateError: not every item has been written, or the writer is closed.
            VaultIntegrityError: a chunk changed since it was written.
            VaultStorageError: the manifest could not be written (finish can be retried).

        """
        self._require_open()
        if self.completed != self.n_items:
            raise StateError(
                f"vault {self.path} holds {self.completed} of {self.n_items} items; "
                "append the rest before finishing"
            )
        commitments = commit_records(
            self.path,
            self._secret,
            self._records,
            self.item_kind,
            self._parameters.format_version,
        )
        tree = commitment_tree(commitments)
        try:
            digests = {
                SECRET_FILE: hashlib.sha256(self._secret).digest(),
                JOURNAL_FILE: files.sha256_file(self.path / JOURNAL_FILE),
            }
            digests.update({record.file: record.sha256 for record in self._records})
            manifest = Manifest(
                item_kind=self.item_kind,
                n_pairs=self.n_items,
                source=self._parameters.source,
                config=self._parameters.config,
                root=tree.root(),
                files=digests,
                format_version=self._parameters.format_version,
            )
            manifest.write(self.path)
        except OSError as exc:
            raise VaultStorageError(self.path, "write the manifest", exc) from exc
        vault = Vault(self.path, manifest, self._secret, self._records, commitments, tree=tree)
        self.close()
        return vault

    def close(self) -> None:
        """Release the vault without finishing it (a later run resumes it)."""
        if self._lock is not None:
            self._lock.release()
            self._lock = None

    def __enter__(self) -> VaultWriter:
        """Return the writer."""
        return self

    def __exit__(self, *exc: object) -> None:
        """Release the vault (finished or not)."""
        self.close()

    def _require_open(self) -> None:
        if self._lock is None:
            raise StateError(f"the writer of vault {self.path} is finished or closed")


def write_vault(  # noqa: PLR0917 - the positional form is the documented API
    path: Path,
    item_kind: str,
    versions0: Pixels,
    versions1: Pixels,
    labels: Sequence[int | None],
    names: Sequence[str],
    *,
    source: Mapping[str, Value],
    config: Mapping[str, Value],
    secret: bytes | None = None,
    batch_items: int = DEFAULT_BATCH_ITEMS,
    format_version: int = FORMAT_VERSION,
) -> Vault:
    """Write a whole vault from in-memory arrays (tests, demos, small tools) and open it.

    The items are written in chunks of ``batch_items``; a run interrupted here can be
    resumed by calling this again with the same arguments.
    """
    if isinstance(batch_items, bool) or not isinstance(batch_items, int) or batch_items < 1:
        raise ParameterError(f"batch_items must be a positive integer, got {batch_items!r}")
    if not isinstance(versions0, np.ndarray) or versions0.ndim != 4:
        raise InputError("versions0 must be a numpy array of shape (N, H, W, C)")
    total = len(versions0)
    with VaultWriter.create_or_resume(
        path,
        item_kind=item_kind,
        source=source,
        config=config,
        n_items=total,
        secret=secret,
        format_version=format_version,
    ) as writer:
        for start in range(writer.completed, total, batch_items):
            stop = min(start + batch_items, total)
            writer.append(
                versions0[start:stop], versions1[start:stop], labels[start:stop], names[start:stop]
            )
        return writer.finish()


# --- Creating and checking -----------------------------------------------------------------


def _per_item_bytes(values: object, count: int, what: str) -> list[bytes | None] | None:
    """Return ``values`` as a list of ``count`` bytes-or-None entries (None stays None)."""
    if values is None:
        return None
    if isinstance(values, str | bytes) or not isinstance(values, Sequence):
        raise InputError(f"{what} must be a sequence of bytes or None")
    if len(values) != count:
        raise ParameterError(f"{len(values)} {what} for a batch of {count} items")
    if not all(value is None or isinstance(value, bytes) for value in values):
        raise InputError(f"each of the {what} must be bytes or None")
    return list(values)


def _check_originals(originals: object, count: int) -> list[bytes | None] | None:
    """Return ``originals`` as a list of ``count`` bytes-or-None entries; else raise."""
    return _per_item_bytes(originals, count, "originals")


def _check_fields(
    fields: object, count: int, shape: tuple[int, int, int]
) -> list[Field | None] | None:
    """Return ``fields`` as a list of ``count`` checked mark fields or None; else raise."""
    if fields is None:
        return None
    if isinstance(fields, str | bytes) or not isinstance(fields, Sequence):
        raise ParameterError("fields must be a sequence with a mark field or None per item")
    if len(fields) != count:
        raise ParameterError(f"{len(fields)} mark fields for a batch of {count} items")
    checked: list[Field | None] = []
    for field in fields:
        if field is None:
            checked.append(None)
            continue
        problem = field_problem(field, shape)
        if problem is not None:
            raise ParameterError(problem)
        checked.append(field)
    return checked


def _check_profiles(profiles: object, count: int, format_version: int) -> list[bytes | None] | None:
    """Return ``profiles`` as ``count`` bytes-or-None entries, None where none is set."""
    listed = _per_item_bytes(profiles, count, "colour profiles")
    if listed is None:
        return None
    for profile in listed:
        if profile is not None and not 1 <= len(profile) <= MAX_PROFILE_BYTES:
            raise LimitExceededError("bytes of a colour profile", len(profile), MAX_PROFILE_BYTES)
    if all(profile is None for profile in listed):
        return None
    if format_version < PROFILES_FROM_FORMAT:
        raise ParameterError(
            f"a format-{format_version} vault cannot record colour profiles (format "
            f"{PROFILES_FROM_FORMAT} on can)"
        )
    return listed


def _check_parameters(
    item_kind: object, source: object, config: object, n_items: object, format_version: object
) -> RunParameters:
    """Check the run's parameters; return them canonical (secret check left empty)."""
    if not isinstance(item_kind, str) or item_kind not in ITEM_KINDS:
        raise ParameterError(f"item_kind {item_kind!r} is not one of {sorted(ITEM_KINDS)}")
    if item_kind not in VAULT_ITEM_KINDS:
        raise ParameterError(f"a vault holds {sorted(VAULT_ITEM_KINDS)} items, not {item_kind!r}")
    if isinstance(n_items, bool) or not isinstance(n_items, int):
        raise ParameterError(f"n_items must be an integer, got {type(n_items).__name__}")
    if n_items > limits.MAX_PAIRS:
        raise LimitExceededError("n_items", n_items, limits.MAX_PAIRS)
    if n_items < 1:
        raise ParameterError(f"n_items must be at least 1, got {n_items}")
    return RunParameters(
        item_kind=item_kind,
        n_items=n_items,
        source=_canonical_map(source, "source"),
        config=_canonical_map(config, "config"),
        secret_check=b"",
        format_version=_format_version(format_version),
    )


def _format_version(value: object) -> int:
    if isinstance(value, bool) or value not in READABLE_FORMAT_VERSIONS:
        raise ParameterError(f"format_version must be one of {READABLE_FORMAT_VERSIONS}")
    assert isinstance(value, int)
    return value


def _canonical_map(value: object, what: str) -> dict[str, Value]:
    if not isinstance(value, Mapping):
        raise InputError(f"{what} must be a map with text keys")
    data = encode(value)
    if len(data) > MAX_PARAMETERS_BYTES:
        raise LimitExceededError(f"encoded {what}", len(data), MAX_PARAMETERS_BYTES)
    canonical = decode(data, limit_sized=False)  # a source may list many image sizes
    assert isinstance(canonical, dict)
    return canonical


def _require_same_run(started: RunParameters, given: RunParameters) -> None:
    """Raise ParameterError naming what differs between the started run and this one."""
    if started.item_kind != given.item_kind:
        raise ParameterError(
            f"the vault holds {started.item_kind!r} items, not {given.item_kind!r}; mark "
            "into a new directory"
        )
    if started.n_items != given.n_items:
        raise ParameterError(f"the vault's run has n_items={started.n_items}, not {given.n_items}")
    for what, old, new in (
        ("source", started.source, given.source),
        ("config", started.config, given.config),
    ):
        keys = sorted(key for key in old.keys() | new.keys() if _differs(old, new, key))
        if keys:
            shown = ", ".join(
                f"{key!r}: {old.get(key, '<absent>')!r} there, {new.get(key, '<absent>')!r} here"
                for key in keys[:5]
            )
            raise ParameterError(
                f"the vault's run was started with another {what} ({shown}); to continue it, "
                "run the same command with the original input and options; to start over, "
                "remove the unfinished vault directory or mark into a new one"
            )


def _differs(old: dict[str, Value], new: dict[str, Value], key: str) -> bool:
    if (key in old) != (key in new):
        return True
    return encode(old[key]) != encode(new[key])


def _create(path: Path, parameters: RunParameters, secret: bytes) -> None:
    """Create a vault: build it in a sibling temp directory, then rename it into place."""
    started = RunParameters(
        item_kind=parameters.item_kind,
        n_items=parameters.n_items,
        source=parameters.source,
        config=parameters.config,
        secret_check=secret_check(secret),
        format_version=parameters.format_version,
    )
    staging: Path | None = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{path.name}.creating-", dir=path.parent))
        os.chmod(staging, DIR_MODE)
        files.write_new_file(staging / SECRET_FILE, secret)
        files.write_new_file(staging / JOURNAL_FILE, frame(started.to_value()))
        (staging / CHUNKS_DIR).mkdir(mode=DIR_MODE)
        files.fsync_dir(staging / CHUNKS_DIR)
        files.fsync_dir(staging)
        os.rename(staging, path)  # replaces an empty directory; fails on a non-empty one
        staging = None
        files.fsync_dir(path.parent)
    except OSError as exc:
        if staging is not None and path.is_dir() and any(path.iterdir()):
            raise InputError(f"{path} is not empty (another run created it?)") from exc
        raise VaultStorageError(path, "create the vault", exc) from exc
    finally:
        if staging is not None:
            shutil.rmtree(staging, ignore_errors=True)


def _leftovers(path: Path, records: Sequence[ChunkRecord]) -> list[str]:
    """Return what an interrupted batch may have left; raise on anything else unexpected."""
    present, directories, others = files.list_tree(path)
    if others:
        raise VaultIntegrityError(path, others[0], "is not a regular file or directory")
    if CHUNKS_DIR not in directories:
        raise VaultIntegrityError(path, CHUNKS_DIR, "is missing")
    if extra_directories := sorted(directories - {CHUNKS_DIR}):
        raise VaultIntegrityError(path, extra_directories[0], "is an unexpected directory")
    journaled = {record.file for record in records}
    leftovers = []
    for name in sorted(present - journaled - {SECRET_FILE, JOURNAL_FILE}):
        base = os.path.basename(name)
        if base.startswith(TEMP_PREFIX) or (is_chunk_file(name) and name not in journaled):
            leftovers.append(name)
        else:
            raise VaultIntegrityError(path, name, "is not part of an unfinished vault")
    return leftovers
