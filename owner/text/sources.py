"""Reading the owner's texts: JSON Lines (a field), CSV (a column) or plain text (a line each).

The format comes from ``text_format`` or else the file's suffix: ``.jsonl`` /
``.ndjson`` are JSON Lines, ``.csv`` is CSV, anything else plain text. Files are
UTF-8 (a leading byte-order mark is dropped).

- ``jsonl``: one JSON object per line, the text under ``field`` (default ``text``).
  Blank lines are skipped.
- ``csv``: a header row naming the columns, the text in ``column`` (default ``text``);
  quoted fields may span lines.
- ``text``: one text per line. The newline ending the last line does not start
  another text, but a blank line in between is an empty text (and refused).

Each text is named ``<file>:<line>`` after the line it starts on (1-based), and that
name is how every later error, the vault and the publication refer to it.

Every text must be valid as a protocol text item: not empty (nor only white space)
and at most :data:`~twinaudit.protocol.items.MAX_TEXT_BYTES` UTF-8 bytes. All bad texts are
reported together, by name, in one :class:`~twinaudit.protocol.errors.InputError`; a file that
is not in its format (bad JSON, a missing field or column) is reported at its first
bad line.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from twinaudit.protocol.encoding import Value
from twinaudit.protocol.errors import InputError, LimitExceededError, NotFoundError, ParameterError
from twinaudit.protocol.items import MAX_TEXT_BYTES
from twinaudit.protocol.limits import MAX_PAIRS

#: The text input formats.
TEXT_FORMATS: Final = ("jsonl", "csv", "text")
#: Largest text input file accepted.
MAX_TEXT_FILE_BYTES: Final = 1024 * 1024 * 1024
#: Field (JSON Lines) or column (CSV) read unless told otherwise.
DEFAULT_FIELD: Final = "text"
#: Bad texts named in one error message (the count says how many there are).
SHOWN_PROBLEMS: Final = 20

_SUFFIXES: Final = {".jsonl": "jsonl", ".ndjson": "jsonl", ".csv": "csv"}


@dataclass(frozen=True)
class TextSource:
    """The texts of one input file, in file order, with their names."""

    path: Path
    format: str
    field: str | None
    texts: list[str]
    names: list[str]
    sha256: str

    def __len__(self) -> int:
        """Return the number of texts."""
        return len(self.texts)

    def describe(self) -> dict[str, Value]:
        """Return the source entry recorded in the vault (format, count, file, hash, field)."""
        return {
            "format": self.format,
            "count": len(self.texts),
            "file": self.path.name,
            "sha256": self.sha256,
            "field": self.field,
        }


def open_text_source(
    path: Path, *, text_format: str | None = None, field: str | None = None
) -> TextSource:
    """Read every text of ``path``.

    Args:
        path: the input file.
        text_format: ``"jsonl"``, ``"csv"`` or ``"text"``; by default from the suffix.
        field: the JSON field or CSV column holding the text (default ``"text"``);
            plain text takes none.

    Raises:
        NotFoundError: ``path`` does not exist.
        ParameterError: an unknown format, or a field given for plain text.
        LimitExceededError: the file or the number of texts is above its limit.
        InputError: the file is not UTF-8 or not in its format, or texts are empty or
            too long (all of them are named).

    """
    path = Path(path)
    kind = text_format if text_format is not None else _SUFFIXES.get(path.suffix.lower(), "text")
    if kind not in TEXT_FORMATS:
        raise ParameterError(f"unknown text format {kind!r}; choose one of {TEXT_FORMATS}")
    if kind == "text" and field is not None:
        raise ParameterError(f"{path}: a plain-text input has one text per line and no fields")
    data, content = read_utf8_file(path, MAX_TEXT_FILE_BYTES)
    name = path.name
    used_field = None if kind == "text" else (field or DEFAULT_FIELD)
    if kind == "jsonl":
        rows = _jsonl_rows(content, used_field or DEFAULT_FIELD, path)
    elif kind == "csv":
        rows = _csv_rows(content, used_field or DEFAULT_FIELD, path)
    else:
        rows = _plain_rows(content)
    if not rows:
        raise InputError(f"{path}: holds no texts")
    if len(rows) > MAX_PAIRS:
        raise LimitExceededError(f"number of texts in {path}", len(rows), MAX_PAIRS)
    names = [f"{name}:{line}" for line, _ in rows]
    texts = [text for _, text in rows]
    check_texts(texts, names, where=str(path))
    return TextSource(path, kind, used_field, texts, names, sha256=hashlib.sha256(data).hexdigest())


def text_problem(text: str) -> str | None:
    """Return why ``text`` cannot be marked as a protocol text item, or None if it can."""
    if not text.strip():
        return "empty"
    size = len(text.encode("utf-8"))
    if size > MAX_TEXT_BYTES:
        return f"{size} UTF-8 bytes, above the limit of {MAX_TEXT_BYTES}"
    return None


def text_problems(texts: Sequence[str], names: Sequence[str]) -> list[str]:
    """Return ``name (problem)`` for every text that is empty or too long, in order."""
    return [
        f"{name} ({problem})"
        for name, text in zip(names, texts, strict=True)
        if (problem := text_problem(text)) is not None
    ]


def check_texts(texts: Sequence[str], names: Sequence[str], *, where: str) -> None:
    """Raise one InputError naming every text that is empty or too long."""
    problems = text_problems(texts, names)
    if problems:
        raise InputError(f"{where}: {len(problems)} text(s) cannot be marked: {listed(problems)}")


def listed(items: Sequence[str]) -> str:
    """Return the first :data:`SHOWN_PROBLEMS` items, comma-separated, and how many more."""
    shown = ", ".join(items[:SHOWN_PROBLEMS])
    more = len(items) - SHOWN_PROBLEMS
    return shown + (f" and {more} more" if more > 0 else "")


def _jsonl_rows(content: str, key: str, path: Path) -> list[tuple[int, str]]:
    rows = []
    for number, line in enumerate(content.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except json.JSONDecodeError as exc:
            raise InputError(f"{path}:{number}: not JSON ({exc.msg})") from None
        if not isinstance(value, dict):
            raise InputError(f"{path}:{number}: a JSON Lines record must be an object")
        text = value.get(key)
        if not isinstance(text, str):
            problem = "has no" if key not in value else "has a non-string"
            raise InputError(f"{path}:{number}: the record {problem} field {key!r}")
        rows.append((number, text))
    return rows


def _csv_rows(content: str, key: str, path: Path) -> list[tuple[int, str]]:
    reader = csv.reader(io.StringIO(content, newline=""), strict=True)
    try:
        header = next(reader, None)
        if header is None:
            raise InputError(f"{path}: empty CSV file (a header row is needed)")
        if key not in header:
            raise InputError(f"{path}: no column {key!r} in the header {header!r}")
        column = header.index(key)
        rows = []
        start = reader.line_num + 1
        for record in reader:
            if record:
                if len(record) != len(header):
                    raise InputError(
                        f"{path}:{start}: {len(record)} fields, the header has {len(header)}"
                    )
                rows.append((start, record[column]))
            start = reader.line_num + 1
    except csv.Error as exc:
        raise InputError(f"{path}:{reader.line_num}: malformed CSV ({exc})") from None
    return rows


def _plain_rows(content: str) -> list[tuple[int, str]]:
    lines = content.split("\n")
    if lines and lines[-1] == "":
        lines.pop()  # the newline that ends the last line
    return [(number, line.rstrip("\r")) for number, line in enumerate(lines, start=1)]


def read_utf8_file(path: Path, limit: int, what: str = "file") -> tuple[bytes, str]:
    """Read a UTF-8 file of at most ``limit`` bytes; return its bytes and its text (no BOM).

    Raises:
        NotFoundError: no file at ``path`` (``what`` names it in the message).
        LimitExceededError: the file is larger than ``limit``.
        InputError: the file is not UTF-8.

    """
    if not path.is_file():
        raise NotFoundError(f"{path}: no such {what}")
    size = path.stat().st_size
    if size > limit:
        raise LimitExceededError(f"size of {path}", size, limit)
    data = path.read_bytes()
    try:
        return data, data.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError as exc:
        raise InputError(f"{path}: not UTF-8 (byte {exc.start})") from None
