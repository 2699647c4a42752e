"""Publishing a text vault: the published version of every text, as JSON Lines.

The output folder holds one file, ``texts.jsonl``: one line per vaulted text in the
input's order, ``{"name": "<file>:<line>", "text": "<published version>"}`` (keys
sorted, UTF-8, no ASCII escaping). Version ``b_i`` comes from the escrow receipt (spec
§5.5), so nothing can be published before the vault holds one. Texts left out as
unmarkable are not in the vault and are not published. Only the published versions and
names are written: no originals, hidden versions, bits or salts.

Given the JSON Lines file the vault was marked from (``original``, checked against the
SHA-256 the vault recorded), the publication keeps that file's records instead: the
file of the same name holds each vaulted record as it was, with every other field and
in its key order, and its text field holding the published version.

The file is written into a hidden staging folder beside ``out_dir``, flushed to disk,
and the folder renamed to ``out_dir`` only when complete: a folder named ``out_dir``
is always a whole publication, and a failure leaves nothing that looks like one.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from twinaudit.protocol.atomic_file import fsync_directory
from twinaudit.protocol.errors import InputError, NotFoundError, StateError

from ..progress import Progress
from ..vault import Vault
from .sources import MAX_TEXT_FILE_BYTES, read_utf8_file

#: The published texts' file name.
PUBLISHED_TEXTS: Final = "texts.jsonl"


def publish_texts(
    vault: Vault, out_dir: Path, *, original: Path | None = None, show_progress: bool = True
) -> list[Path]:
    """Write the published version of every text of ``vault`` into the new ``out_dir``.

    With ``original`` (the JSON Lines file the vault was marked from), each record
    keeps its other fields (see the module docstring).

    Raises:
        StateError: the vault holds no receipt yet, or no texts.
        InputError: ``out_dir`` exists (a publication goes into a new folder), or
            ``original`` is not the JSON Lines file the vault was marked from.
        NotFoundError: the parent of ``out_dir`` does not exist, or ``original`` does
            not exist.

    """
    if vault.item_kind != "text":
        raise StateError(f"{vault.path} holds {vault.item_kind} items, not texts")
    if vault.receipt is None:
        raise StateError(
            f"{vault.path} has no escrow receipt: escrow it first (twinaudit owner escrow); "
            "which version of each pair is published is derived from the receipt"
        )
    records = None if original is None else _original_records(vault, Path(original))
    file_name = PUBLISHED_TEXTS if original is None else Path(original).name
    out_dir = Path(out_dir)
    staging = _staging(out_dir)
    progress = Progress("publishing", vault.n_pairs) if show_progress else None
    try:
        with (staging / file_name).open("x", encoding="utf-8", newline="\n") as stream:
            for _, published, names in vault.published_texts():
                for name, text in zip(names, published, strict=True):
                    if records is None:
                        record = {"name": name, "text": text}
                        line = json.dumps(record, ensure_ascii=False, sort_keys=True)
                    else:
                        line = json.dumps(records.kept(name, text), ensure_ascii=False)
                    stream.write(line + "\n")
                if progress is not None:
                    progress.update(len(names))
            stream.flush()
            os.fsync(stream.fileno())
        fsync_directory(staging)
        staging.chmod(0o755)
        if out_dir.exists() or out_dir.is_symlink():
            raise InputError(f"{out_dir} appeared while the publication was written")
        staging.rename(out_dir)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    fsync_directory(out_dir.parent)
    if progress is not None:
        progress.finish()
    return [out_dir / file_name]


@dataclass(frozen=True)
class _OriginalRecords:
    """The JSON Lines records a text vault was marked from, by line, and its text field."""

    field: str
    file: str
    by_line: dict[int, dict[str, Any]]

    def kept(self, name: str, text: str) -> dict[str, Any]:
        """Return the record of vault item ``name`` with ``text`` in its text field."""
        file, _, line = name.rpartition(":")
        record = self.by_line.get(int(line)) if file == self.file and line.isdigit() else None
        if record is None:
            raise InputError(f"the vault's item {name!r} is not a record of {self.file}")
        return {**record, self.field: text}


def _original_records(vault: Vault, original: Path) -> _OriginalRecords:
    """Read ``original`` once it is shown to be the JSON Lines file ``vault`` was marked from."""
    source = vault.source
    if source.get("format") != "jsonl":
        raise InputError(
            f"--input keeps the other fields of a JSON Lines input; {vault.path} was marked "
            f"from a {source.get('format')!r} file"
        )
    if not original.is_file():
        raise NotFoundError(f"{original}: no such file")
    data, content = read_utf8_file(original, MAX_TEXT_FILE_BYTES)
    recorded_file = source.get("file")
    if original.name != recorded_file or hashlib.sha256(data).hexdigest() != source.get("sha256"):
        raise InputError(
            f"{original} is not the file {vault.path} was marked from "
            f"({recorded_file!r}, whose SHA-256 the vault recorded)"
        )
    by_line = {}
    for number, line in enumerate(content.splitlines(), start=1):
        if line.strip():
            by_line[number] = json.loads(line)  # the file the vault read: valid JSON objects
    field = source.get("field")
    assert isinstance(field, str)
    return _OriginalRecords(field, original.name, by_line)


def read_published_texts(path: Path) -> list[tuple[str, str]]:
    """Return the ``(name, text)`` records of a published ``texts.jsonl``, in order."""
    records = []
    with Path(path).open(encoding="utf-8") as stream:
        for number, line in enumerate(stream, start=1):
            try:
                value = json.loads(line)
            except json.JSONDecodeError:
                raise InputError(f"{path}:{number}: not JSON") from None
            if not (
                isinstance(value, dict)
                and set(value) == {"name", "text"}
                and isinstance(value["name"], str)
                and isinstance(value["text"], str)
            ):
                raise InputError(f"{path}:{number}: not a {{name, text}} record")
            records.append((value["name"], value["text"]))
    return records


def _staging(out_dir: Path) -> Path:
    if out_dir.exists() or out_dir.is_symlink():
        raise InputError(f"{out_dir} already exists; a publication goes into a new folder")
    parent = out_dir.parent
    if not parent.is_dir():
        raise NotFoundError(f"{parent}: no such folder (the parent of {out_dir})")
    return Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.", suffix=".partial", dir=parent))
