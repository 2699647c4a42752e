"""The vault's append-only journal: the run's parameters, then one record per chunk.

A record is framed as ``length (4 bytes, big-endian) ‖ payload ‖ SHA-256(length ‖
payload)``, where the payload is the canonical encoding (spec §3) of a map. The first
record is the header (:class:`RunParameters`): item kind, number of items, source and
marking configuration, and a check value of the secret. Each later record is a
:class:`ChunkRecord`, appended (and fsynced) only once its chunk file is durable, so the
journal lists exactly the chunks a resumed run may keep.

A crash can leave the last record torn (short, or with a checksum that does not match
and nothing after it). Readers ignore such a tail, and a resumed run cuts it off before
appending. Anything else that does not parse is an integrity error naming the journal.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Final

from twinaudit.protocol import SPEC_VERSION
from twinaudit.protocol.encoding import Value, decode, encode
from twinaudit.protocol.errors import InputError, VaultIntegrityError, VersionError
from twinaudit.protocol.items import MAX_IMAGE_SIDE, MAX_LABEL, MAX_TEXT_BYTES
from twinaudit.protocol.versioning import require_supported

from . import files
from .layout import (
    FORMAT_NAME,
    FORMAT_VERSION,
    JOURNAL_FILE,
    MAX_NAME_BYTES,
    MAX_PROFILE_BYTES,
    MAX_RECORD_BYTES,
    READABLE_FORMAT_VERSIONS,
    chunk_file,
)

_LENGTH_BYTES: Final = 4
_CHECK_BYTES: Final = 32
_HEADER_KEYS: Final = frozenset(
    {
        "record",
        "format",
        "format_version",
        "spec",
        "item_kind",
        "n_items",
        "source",
        "config",
        "secret_check",
    }
)
_CHUNK_KEYS: Final = frozenset(
    {"record", "ordinal", "file", "start", "count", "shape", "sha256", "labels", "names"}
)


#: The keys a chunk record of image or captioned-image items has when an item of it was
#: read with an ICC colour profile (format 4 on): ``icc_profiles``, the chunk's distinct
#: profiles in order of first use, and ``icc``, per item the index of its profile there,
#: or null. Publication writes each item with its profile.
PROFILE_KEYS: Final = frozenset({"icc_profiles", "icc"})
#: The first vault format whose chunk records may carry colour profiles.
PROFILES_FROM_FORMAT: Final = 4


def chunk_keys(item_kind: str) -> frozenset[str]:
    """Return the keys of a chunk record of ``item_kind`` items.

    Image chunks have exactly :data:`_CHUNK_KEYS`; text chunks have no ``shape`` (their
    file holds texts); captioned-image chunks add ``captions`` (one per item, the same
    for both versions). A chunk with colour profiles adds :data:`PROFILE_KEYS`.
    """
    if item_kind == "text":
        return _CHUNK_KEYS - {"shape"}
    if item_kind == "captioned-image":
        return _CHUNK_KEYS | {"captions"}
    return _CHUNK_KEYS


class _MalformedError(Exception):
    """A journal value is not what the format says (turned into VaultIntegrityError)."""


@dataclass(frozen=True)
class RunParameters:
    """What a marking run was started with; a resumed run must be started with the same.

    ``format_version`` is the vault format the run writes: a new run writes
    :data:`~twinaudit.owner.vault.layout.FORMAT_VERSION`, and a resumed run continues in the
    format it was started in.
    """

    item_kind: str
    n_items: int
    source: dict[str, Value]
    config: dict[str, Value]
    secret_check: bytes
    format_version: int = FORMAT_VERSION

    def to_value(self) -> dict[str, Value]:
        """Return the header record's map."""
        return {
            "record": "header",
            "format": FORMAT_NAME,
            "format_version": self.format_version,
            "spec": SPEC_VERSION,
            "item_kind": self.item_kind,
            "n_items": self.n_items,
            "source": self.source,
            "config": self.config,
            "secret_check": self.secret_check,
        }

    @classmethod
    def from_value(cls, value: Value) -> RunParameters:
        """Parse a header record strictly (the format and spec versions first)."""
        if not isinstance(value, dict) or value.get("record") != "header":
            raise _MalformedError("the first record is not a header")
        version = require_format(value.get("format"), value.get("format_version"), "journal header")
        require_supported(value.get("spec"), "vault journal")
        fields = _exact(value, _HEADER_KEYS, "header")
        source, config = fields["source"], fields["config"]
        if not isinstance(source, dict) or not isinstance(config, dict):
            raise _MalformedError("source and config must be maps")
        return cls(
            item_kind=_text(fields["item_kind"], "item_kind"),
            n_items=_count(fields["n_items"], "n_items"),
            source=source,
            config=config,
            secret_check=_digest(fields["secret_check"], "secret_check"),
            format_version=version,
        )


@dataclass(frozen=True)
class ChunkRecord:
    """One durable chunk: items ``start .. start + count - 1`` in ``file``.

    ``shape`` is the item shape ``(H, W, C)`` of image and captioned-image chunks and
    None for text chunks; ``captions`` is set (one per item) for captioned images only;
    ``profiles`` (format 4 on) holds per item the ICC colour profile it was read with,
    or None, and is None for a chunk where no item has one.
    """

    ordinal: int
    file: str
    start: int
    count: int
    shape: tuple[int, int, int] | None
    sha256: bytes
    labels: list[int | None]
    names: list[str]
    captions: list[str] | None = None
    profiles: list[bytes | None] | None = None

    def to_value(self) -> dict[str, Value]:
        """Return the chunk record's map."""
        value: dict[str, Value] = {
            "record": "chunk",
            "ordinal": self.ordinal,
            "file": self.file,
            "start": self.start,
            "count": self.count,
            "sha256": self.sha256,
            "labels": list(self.labels),
            "names": list(self.names),
        }
        if self.shape is not None:
            value["shape"] = list(self.shape)
        if self.captions is not None:
            value["captions"] = list(self.captions)
        if self.profiles is not None:
            table: dict[bytes, int] = {}
            value["icc"] = [
                None if profile is None else table.setdefault(profile, len(table))
                for profile in self.profiles
            ]
            value["icc_profiles"] = list(table)
        return value

    @classmethod
    def from_value(
        cls, value: Value, item_kind: str = "image", format_version: int = FORMAT_VERSION
    ) -> ChunkRecord:
        """Parse a chunk record of ``item_kind`` items in vault ``format_version`` strictly."""
        if not isinstance(value, dict) or value.get("record") != "chunk":
            raise _MalformedError("a record after the header is not a chunk record")
        keys = chunk_keys(item_kind)
        with_profiles = (
            format_version >= PROFILES_FROM_FORMAT and item_kind != "text" and "icc" in value
        )
        fields = _exact(value, keys | PROFILE_KEYS if with_profiles else keys, "chunk record")
        shape: tuple[int, int, int] | None = None
        if item_kind != "text":
            shape = _shape(fields["shape"])
        labels, names = fields["labels"], fields["names"]
        if not isinstance(labels, list) or not isinstance(names, list):
            raise _MalformedError("labels and names must be arrays")
        captions: list[str] | None = None
        if item_kind == "captioned-image":
            listed = fields["captions"]
            if not isinstance(listed, list):
                raise _MalformedError("captions must be an array")
            captions = [_caption(caption) for caption in listed]
        profiles = _profiles(fields["icc"], fields["icc_profiles"]) if with_profiles else None
        return cls(
            ordinal=_index(fields["ordinal"], "ordinal"),
            file=_text(fields["file"], "file"),
            start=_index(fields["start"], "start"),
            count=_count(fields["count"], "count"),
            shape=shape,
            sha256=_digest(fields["sha256"], "sha256"),
            labels=[_label(label) for label in labels],
            names=[_name(name) for name in names],
            captions=captions,
            profiles=profiles,
        )


def _profiles(indices: Value, table: Value) -> list[bytes | None]:
    """Return each item's profile from a chunk's ``icc`` and ``icc_profiles``.

    The table must hold distinct profiles of 1 to :data:`MAX_PROFILE_BYTES` bytes, each
    used, numbered by first use (as :meth:`ChunkRecord.to_value` writes them), so that a
    chunk's profiles have one encoding.
    """
    if not isinstance(indices, list) or not isinstance(table, list) or not table:
        raise _MalformedError("icc must be an array and icc_profiles a non-empty array")
    blobs = [profile for profile in table if isinstance(profile, bytes)]
    if len(blobs) != len(table) or not all(1 <= len(blob) <= MAX_PROFILE_BYTES for blob in blobs):
        raise _MalformedError(f"a colour profile must be 1..{MAX_PROFILE_BYTES} bytes")
    if len(set(blobs)) != len(blobs):
        raise _MalformedError("icc_profiles lists a profile twice")
    profiles: list[bytes | None] = []
    used = 0
    for index in indices:
        if index is not None and (
            isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < len(blobs)
        ):
            raise _MalformedError(f"icc index {index!r} is not one of icc_profiles")
        if index is not None and index > used:
            raise _MalformedError("icc_profiles must be numbered by first use")
        if index == used:
            used += 1
        profiles.append(None if index is None else blobs[index])
    if used != len(blobs):
        raise _MalformedError("icc_profiles lists a profile no item uses")
    return profiles


def _shape(shape: Value) -> tuple[int, int, int]:
    if not isinstance(shape, list) or len(shape) != 3:
        raise _MalformedError("a chunk shape is [height, width, channels]")
    height, width, channels = (_count(side, "shape") for side in shape)
    if max(height, width) > MAX_IMAGE_SIDE or channels not in (1, 3):
        raise _MalformedError(f"chunk shape {shape} is out of range")
    return height, width, channels


def _caption(value: Value) -> str:
    if not isinstance(value, str) or not 1 <= len(value.encode("utf-8")) <= MAX_TEXT_BYTES:
        raise _MalformedError(f"a caption must be 1..{MAX_TEXT_BYTES} UTF-8 bytes")
    return value


@dataclass(frozen=True)
class JournalContents:
    """A parsed journal: the header, the complete chunk records, and where they end."""

    parameters: RunParameters
    chunks: list[ChunkRecord]
    valid_bytes: int
    torn_bytes: int

    @property
    def completed(self) -> int:
        """Items covered by the complete chunk records."""
        return sum(record.count for record in self.chunks)


def require_format(name: object, version: object, what: str) -> int:
    """Return ``version`` if ``name``/``version`` are a vault format this code reads.

    Raises VersionError otherwise.
    """
    if (
        name != FORMAT_NAME
        or isinstance(version, bool)
        or not isinstance(version, int)
        or version not in READABLE_FORMAT_VERSIONS
    ):
        readable = " or ".join(str(known) for known in READABLE_FORMAT_VERSIONS)
        raise VersionError(
            f"{what} is format {name!r} version {version!r}; "
            f"this implementation reads {FORMAT_NAME!r} version {readable}"
        )
    return version


def frame(value: dict[str, Value]) -> bytes:
    """Return the framed bytes of one record."""
    payload = encode(value)
    if len(payload) > MAX_RECORD_BYTES:
        raise InputError(
            f"a journal record would be {len(payload)} bytes, above {MAX_RECORD_BYTES}: "
            "use smaller batches or shorter names"
        )
    head = len(payload).to_bytes(_LENGTH_BYTES, "big") + payload
    return head + hashlib.sha256(head).digest()


def read_journal(vault: Path) -> JournalContents:
    """Read and check the journal of ``vault``; a torn last record is left out."""
    with _journal_errors(vault):
        values, valid_bytes, torn_bytes = _journal_records(vault)
        parameters = _header(values)
        kind = parameters.item_kind
        version = parameters.format_version
        chunks = [ChunkRecord.from_value(value, kind, version) for value in values[1:]]
        _check_sequence(parameters, chunks)
    return JournalContents(parameters, chunks, valid_bytes, torn_bytes)


def read_header(vault: Path) -> RunParameters:
    """Read and check only the journal's first record, the run's parameters.

    What a caller needs before it reads the chunks, without reading them (a journal of a
    million items lists a million names).
    """
    with _journal_errors(vault):
        return _header(_journal_records(vault, limit=1)[0])


@contextmanager
def _journal_errors(vault: Path) -> Iterator[None]:
    """Turn an unreadable or malformed journal into a VaultIntegrityError naming it."""
    try:
        yield
    except OSError as exc:
        raise VaultIntegrityError(vault, JOURNAL_FILE, f"cannot be read: {exc.strerror}") from None
    except _MalformedError as exc:
        raise VaultIntegrityError(vault, JOURNAL_FILE, str(exc)) from None


def _journal_records(vault: Path, limit: int | None = None) -> tuple[list[Value], int, int]:
    with (vault / JOURNAL_FILE).open("rb") as handle:
        return _read_records(handle, limit)


def _header(values: list[Value]) -> RunParameters:
    if not values:
        raise _MalformedError("has no header record")
    return RunParameters.from_value(values[0])


def _read_records(handle: BinaryIO, limit: int | None = None) -> tuple[list[Value], int, int]:
    """Return the decoded complete records, their total length, and the torn tail's.

    With ``limit``, stop after that many records (the rest is not read).
    """
    values: list[Value] = []
    offset = 0
    while limit is None or len(values) < limit:
        length_bytes = handle.read(_LENGTH_BYTES)
        if not length_bytes:
            return values, offset, 0
        length = int.from_bytes(length_bytes, "big")
        rest = handle.read(length + _CHECK_BYTES) if len(length_bytes) == _LENGTH_BYTES else b""
        if len(rest) < length + _CHECK_BYTES:  # a record cut short by a crash
            return values, offset, len(length_bytes) + len(rest)
        head, check = length_bytes + rest[:length], rest[length:]
        if hashlib.sha256(head).digest() != check:
            if not handle.read(1):  # the last record: a torn write
                return values, offset, len(head) + len(check)
            raise _MalformedError(f"the record at byte {offset} does not match its checksum")
        if length > MAX_RECORD_BYTES:
            raise _MalformedError(f"the record at byte {offset} is larger than {MAX_RECORD_BYTES}")
        try:
            values.append(decode(rest[:length], max_bytes=MAX_RECORD_BYTES, limit_sized=False))
        except InputError as exc:
            raise _MalformedError(f"the record at byte {offset} is not canonical: {exc}") from None
        offset += len(head) + len(check)
    return values, offset, 0


def _check_sequence(parameters: RunParameters, chunks: Sequence[ChunkRecord]) -> None:
    """Check that chunk records number 0, 1, ... and cover consecutive items."""
    start = 0
    for ordinal, record in enumerate(chunks):
        expected = chunk_file(ordinal, parameters.item_kind, parameters.format_version)
        if record.ordinal != ordinal or record.file != expected:
            raise _MalformedError(f"chunk record {ordinal} is numbered or named out of order")
        if record.start != start:
            raise _MalformedError(f"chunk {ordinal} starts at item {record.start}, not {start}")
        if len(record.labels) != record.count or len(record.names) != record.count:
            raise _MalformedError(f"chunk {ordinal} does not have one label and name per item")
        if record.captions is not None and len(record.captions) != record.count:
            raise _MalformedError(f"chunk {ordinal} does not have one caption per item")
        if record.profiles is not None and len(record.profiles) != record.count:
            raise _MalformedError(f"chunk {ordinal} does not have one icc entry per item")
        start += record.count
        if start > parameters.n_items:
            raise _MalformedError(f"chunks go past the run's {parameters.n_items} items")


class JournalAppender:
    """Appends records to a journal, all or nothing: a failed append is cut off again."""

    def __init__(self, path: Path, valid_bytes: int) -> None:
        """Use the journal ``path`` whose first ``valid_bytes`` are complete records."""
        self._path = path
        self._size = valid_bytes

    def cut_torn_tail(self) -> None:
        """Remove whatever follows the last complete record (a torn write), durably."""
        if self._path.stat().st_size != self._size:
            self._truncate()

    def append(self, value: dict[str, Value]) -> None:
        """Append one record and fsync it; on any failure the journal is as before."""
        data = frame(value)
        fd = os.open(self._path, os.O_WRONLY)
        try:
            os.lseek(fd, self._size, os.SEEK_SET)
            files.write_all(fd, data)
            os.fsync(fd)
        except BaseException:
            os.close(fd)
            self._truncate()
            raise
        os.close(fd)
        self._size += len(data)

    def _truncate(self) -> None:
        fd = os.open(self._path, os.O_WRONLY)
        try:
            os.ftruncate(fd, self._size)
            os.fsync(fd)
        finally:
            os.close(fd)


def _exact(value: dict[str, Value], keys: frozenset[str], what: str) -> dict[str, Value]:
    missing, extra = keys - value.keys(), value.keys() - keys
    if missing or extra:
        raise _MalformedError(f"{what} keys: missing {sorted(missing)}, unexpected {sorted(extra)}")
    return value


def _text(value: Value, what: str) -> str:
    if not isinstance(value, str):
        raise _MalformedError(f"{what} must be a text string")
    return value


def _digest(value: Value, what: str) -> bytes:
    if not isinstance(value, bytes) or len(value) != 32:
        raise _MalformedError(f"{what} must be 32 bytes")
    return value


def _index(value: Value, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise _MalformedError(f"{what} must be a non-negative integer")
    return value


def _count(value: Value, what: str) -> int:
    if _index(value, what) < 1:
        raise _MalformedError(f"{what} must be at least 1")
    assert isinstance(value, int)
    return value


def _label(value: Value) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < MAX_LABEL:
        raise _MalformedError(f"label {value!r} is not null or an integer in [0, {MAX_LABEL})")
    return value


def _name(value: Value) -> str:
    if not isinstance(value, str) or not 1 <= len(value.encode("utf-8")) <= MAX_NAME_BYTES:
        raise _MalformedError(f"an item name must be 1..{MAX_NAME_BYTES} UTF-8 bytes")
    return value
