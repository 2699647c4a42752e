"""Text chunk files: the original and both versions of a batch of consecutive texts.

A text chunk file is the canonical encoding (spec §3) of one map::

    {"originals": [x_0, ..., x_{B-1}], "versions": [[v0_0, ...], [v1_0, ...]]}

so the same texts always give the same bytes. The originals stay in the private vault
so that ``owner inspect`` can measure how close each version stays to its original;
they are never committed or published. Names live in the chunk's journal record.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from twinaudit.protocol.commitment import commit_pair
from twinaudit.protocol.encoding import Value, decode, encode
from twinaudit.protocol.errors import InputError, ParameterError, VaultIntegrityError
from twinaudit.protocol.hashing import sha256
from twinaudit.protocol.items import TextItem, encode_item

from .chunks import check_names
from .journal import ChunkRecord
from .layout import MAX_CHUNK_BYTES
from .secret import pair_salt


@dataclass(frozen=True)
class TextChunk:
    """The texts of one chunk: per item, its original and its two versions."""

    originals: list[str]
    versions0: list[str]
    versions1: list[str]

    def __len__(self) -> int:
        """Return the number of items."""
        return len(self.originals)


def check_text_batch(
    originals: object, versions0: object, versions1: object, names: object
) -> tuple[TextChunk, list[str]]:
    """Check one batch of texts; return it as a chunk, and its names.

    Every text must be a valid :class:`~twinaudit.protocol.items.TextItem` (1..65,536 UTF-8
    bytes) and the two versions of an item must differ. Raises InputError (or
    ParameterError for counts) naming the item.
    """
    lists: list[list[str]] = []
    for what, texts in (
        ("originals", originals),
        ("versions0", versions0),
        ("versions1", versions1),
    ):
        if isinstance(texts, str | bytes) or not isinstance(texts, Sequence):
            raise InputError(f"{what} must be a sequence of strings")
        for text in texts:
            TextItem(text)  # type and length
        lists.append(list(texts))
    count = len(lists[0])
    if count < 1:
        raise ParameterError("a batch must hold at least one item")
    if len(lists[1]) != count or len(lists[2]) != count:
        raise ParameterError(
            f"{count} originals, {len(lists[1])} versions0 and {len(lists[2])} versions1"
        )
    name_list = check_names(names, count)
    for offset, (first, second) in enumerate(zip(lists[1], lists[2], strict=True)):
        if first == second:
            raise InputError(f"item {name_list[offset]!r}: its two versions are identical")
    chunk = TextChunk(*lists)
    if len(encode_text_chunk(chunk)) > MAX_CHUNK_BYTES:
        raise ParameterError(f"a batch holds at most {MAX_CHUNK_BYTES} bytes of texts")
    return chunk, name_list


def encode_text_chunk(chunk: TextChunk) -> bytes:
    """Return the chunk file's bytes."""
    versions: list[Value] = [list[Value](chunk.versions0), list[Value](chunk.versions1)]
    return encode({"originals": list[Value](chunk.originals), "versions": versions})


def read_text_chunk(vault: Path, record: ChunkRecord) -> TextChunk:
    """Read a text chunk file, check its SHA-256 and contents; return its texts."""
    try:
        with (vault / record.file).open("rb") as handle:
            data = handle.read(MAX_CHUNK_BYTES + 1)
    except OSError as exc:
        raise VaultIntegrityError(vault, record.file, f"cannot be read: {exc.strerror}") from None
    if len(data) > MAX_CHUNK_BYTES:
        raise VaultIntegrityError(vault, record.file, f"is larger than {MAX_CHUNK_BYTES} bytes")
    if sha256(data) != record.sha256:
        raise VaultIntegrityError(vault, record.file, "was modified (SHA-256 differs)")
    try:
        value = decode(data, max_bytes=MAX_CHUNK_BYTES, limit_sized=False)  # the owner's own file
        chunk = _parse(value, record.count)
    except InputError as exc:
        raise VaultIntegrityError(vault, record.file, f"is not a text chunk: {exc}") from None
    return chunk


def _parse(value: Value, count: int) -> TextChunk:
    if not isinstance(value, dict) or set(value) != {"originals", "versions"}:
        raise InputError("a text chunk is a map of exactly originals and versions")
    originals, versions = value["originals"], value["versions"]
    if not isinstance(versions, list) or len(versions) != 2:
        raise InputError("versions must hold two arrays")
    lists: list[list[str]] = []
    for texts in (originals, versions[0], versions[1]):
        if not isinstance(texts, list) or len(texts) != count:
            raise InputError(f"every array must hold {count} texts")
        lists.append([TextItem(_string(text)).text for text in texts])
    return TextChunk(*lists)


def _string(value: Value) -> str:
    if not isinstance(value, str):
        raise InputError("a text must be a text string")
    return value


def text_commitments(secret: bytes, start: int, chunk: TextChunk) -> list[bytes]:
    """Return the commitments of the pairs of one text chunk."""
    commitments = []
    for offset, (first, second) in enumerate(zip(chunk.versions0, chunk.versions1, strict=True)):
        commitment, _ = commit_pair(
            encode_item(TextItem(first)),
            encode_item(TextItem(second)),
            pair_salt(secret, start + offset),
        )
        commitments.append(commitment)
    return commitments
