"""A MyThes thesaurus (the format of OpenOffice/LibreOffice and Debian ``mythes-*``).

The data file (``th_en_US_v2.dat``) starts with its character encoding on a line of
its own; then each entry is a header line ``word|n`` followed by ``n`` sense lines
``(pos)|term|term|...``. A term may carry an annotation in parentheses:
``(similar term)``, ``(related term)``, ``(generic term)`` (a hypernym) or
``(antonym)``. The index file (``.idx``) has the encoding, the entry count, then one
``word|byte offset`` line per entry, the offset of the entry's header line in the
data file.

Only plain terms and similar terms are taken as synonyms: hypernyms ("film" →
"medium"), related terms and antonyms change the meaning. Only single words are
kept (letters with inner hyphens or apostrophes), so a replacement never changes
the number of words. Lookups are case-insensitive and read the entry lazily at its
indexed offset; a malformed entry or index is an :class:`~twinaudit.protocol.errors.InputError`
naming the file and the line or offset.
"""

from __future__ import annotations

import codecs
import hashlib
import re
from pathlib import Path
from typing import Final

from twinaudit.protocol.errors import InputError, LimitExceededError, NotFoundError

#: Where Debian's ``mythes-en-us`` package installs the English thesaurus.
DEFAULT_THESAURUS: Final = Path("/usr/share/mythes/th_en_US_v2.dat")
#: Largest thesaurus data or index file accepted.
MAX_THESAURUS_BYTES: Final = 256 * 1024 * 1024
#: Most sense lines one entry may have.
MAX_SENSES: Final = 1000

_SINGLE_WORD: Final = re.compile(r"[^\W\d_]+(?:['’-][^\W\d_]+)*")
_KEPT_ANNOTATIONS: Final = ("", "(similar term)")


class Thesaurus:
    """Synonyms from a MyThes data file and its index."""

    def __init__(self, data_path: Path, index_path: Path | None = None) -> None:
        """Read the index (``data_path`` with ``.idx`` for ``.dat`` unless given).

        Raises:
            NotFoundError: a file is missing (install ``mythes-en-us``, or give a path).
            InputError: a file is not in the MyThes format, or its encoding is unknown.
            LimitExceededError: a file is larger than :data:`MAX_THESAURUS_BYTES`.

        """
        self.path = Path(data_path)
        self.index_path = (
            Path(index_path) if index_path is not None else self.path.with_suffix(".idx")
        )
        self._data = _read(self.path)
        self._encoding = _encoding(self._data.split(b"\n", 1)[0], self.path)
        self._offsets = _parse_index(_read(self.index_path), self.index_path)
        self._cache: dict[str, tuple[str, ...]] = {}
        self._sha256: str | None = None

    def __len__(self) -> int:
        """Return the number of entries."""
        return len(self._offsets)

    def __contains__(self, word: object) -> bool:
        """Tell whether ``word`` (any case) has an entry."""
        return isinstance(word, str) and word.lower() in self._offsets

    def describe(self) -> dict[str, str]:
        """Return the data file's name and SHA-256 (recorded with a marking run)."""
        if self._sha256 is None:
            self._sha256 = hashlib.sha256(self._data).hexdigest()
        return {"file": self.path.name, "sha256": self._sha256}

    def synonyms(self, word: str) -> tuple[str, ...]:
        """Return the single-word synonyms of ``word`` in the thesaurus's order, unique.

        The word itself (any case) is left out; an unknown word has none.
        """
        key = word.lower()
        if key not in self._cache:
            offset = self._offsets.get(key)
            self._cache[key] = () if offset is None else self._entry(key, offset)
        return self._cache[key]

    def _entry(self, key: str, offset: int) -> tuple[str, ...]:
        where = f"{self.path}: entry {key!r} at byte {offset}"
        if offset >= len(self._data):
            raise InputError(f"{where}: the offset is past the end of the file")
        lines = iter(self._data[offset:].split(b"\n", MAX_SENSES + 1))
        header = self._decode(next(lines), where)
        head, _, count_text = header.rpartition("|")
        if head.lower() != key or not count_text.isdigit():
            raise InputError(f"{where}: expected the header '{key}|<count>', found {header!r}")
        count = int(count_text)
        if count > MAX_SENSES:
            raise LimitExceededError(f"{where}: senses", count, MAX_SENSES)
        found: dict[str, None] = {}
        for _ in range(count):
            line = self._decode(next(lines, b""), where)
            fields = line.split("|")
            if len(fields) < 2 or not fields[0].startswith("("):
                raise InputError(f"{where}: malformed sense line {line!r}")
            for term in fields[1:]:
                synonym = _synonym(term)
                if synonym is not None and synonym.lower() != key:
                    found.setdefault(synonym, None)
        return tuple(found)

    def _decode(self, line: bytes, where: str) -> str:
        try:
            return line.decode(self._encoding).rstrip("\r")
        except UnicodeDecodeError:
            raise InputError(f"{where}: a line is not {self._encoding}") from None


def _synonym(term: str) -> str | None:
    """Return the term if it is a plain or similar single word, else None."""
    text = term.strip()
    annotation = ""
    if text.endswith(")") and "(" in text:
        cut = text.rindex("(")
        text, annotation = text[:cut].strip(), text[cut:]
    if annotation not in _KEPT_ANNOTATIONS or not _SINGLE_WORD.fullmatch(text):
        return None
    return text


def _read(path: Path) -> bytes:
    if not path.is_file():
        hint = " (apt-get install mythes-en-us)" if path.parent == DEFAULT_THESAURUS.parent else ""
        raise NotFoundError(f"{path}: no such thesaurus file{hint}")
    size = path.stat().st_size
    if size > MAX_THESAURUS_BYTES:
        raise LimitExceededError(f"size of {path}", size, MAX_THESAURUS_BYTES)
    return path.read_bytes()


def _encoding(line: bytes, path: Path) -> str:
    name = line.strip().decode("ascii", errors="replace")
    try:
        return codecs.lookup(name).name
    except LookupError:
        raise InputError(f"{path}: the first line must name an encoding, found {name!r}") from None


def _parse_index(data: bytes, path: Path) -> dict[str, int]:
    lines = data.split(b"\n")
    encoding = _encoding(lines[0], path)
    if len(lines) < 2 or not lines[1].strip().isdigit():
        raise InputError(f"{path}: line 2 must be the number of entries")
    offsets: dict[str, int] = {}
    for number, raw in enumerate(lines[2:], start=3):
        if not raw.strip():
            continue
        try:
            line = raw.decode(encoding).rstrip("\r")
        except UnicodeDecodeError:
            raise InputError(f"{path}: line {number} is not {encoding}") from None
        word, _, offset = line.rpartition("|")
        if not word or not offset.isdigit():
            raise InputError(f"{path}: line {number} is not 'word|offset': {line!r}")
        offsets.setdefault(word.lower(), int(offset))
    return offsets


def load_thesaurus(path: Path | None = None) -> Thesaurus:
    """Open the thesaurus at ``path`` (default: Debian's ``mythes-en-us``)."""
    return Thesaurus(DEFAULT_THESAURUS if path is None else path)
