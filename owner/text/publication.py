"""Publishing a text vault: the published version of every text, as JSON Lines.

The output folder holds one file, ``texts.jsonl``: one line per vaulted text in the
input's order, ``{"name": "<file>:<line>", "text": "<published version>"}`` (keys
sorted, UTF-8, no ASCII escaping). Version ``b_i`` comes from the escrow receipt (spec
§5.5), so nothing can be published before the vault holds one. Texts left out as
unmarkable are not in the vault and are not published. Only the published versions and
names are written: no originals, hidden versions, bits or salts.

The file is written into a hidden staging folder beside ``out_dir``, flushed to disk,
and the folder renamed to ``out_dir`` only when complete: a folder named ``out_dir``
is always a whole publication, and a failure leaves nothing that looks like one.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Final

from protocol.errors import InputError, NotFoundError, StateError

from ..progress import Progress
from ..vault import Vault

#: The published texts' file name.
PUBLISHED_TEXTS: Final = "texts.jsonl"


def publish_texts(vault: Vault, out_dir: Path, *, show_progress: bool = True) -> list[Path]:
    """Write the published version of every text of ``vault`` into the new ``out_dir``.

    Raises:
        StateError: the vault holds no receipt yet, or no texts.
        InputError: ``out_dir`` exists (a publication goes into a new folder).
        NotFoundError: the parent of ``out_dir`` does not exist.

    """
    if vault.item_kind != "text":
        raise StateError(f"{vault.path} holds {vault.item_kind} items, not texts")
    if vault.receipt is None:
        raise StateError(
            f"{vault.path} has no escrow receipt: escrow it first (twinaudit owner escrow); "
            "which version of each pair is published is derived from the receipt"
        )
    out_dir = Path(out_dir)
    staging = _staging(out_dir)
    progress = Progress("publishing", vault.n_pairs) if show_progress else None
    try:
        with (staging / PUBLISHED_TEXTS).open("x", encoding="utf-8", newline="\n") as stream:
            for _, published, names in vault.published_texts():
                for name, text in zip(names, published, strict=True):
                    record = {"name": name, "text": text}
                    stream.write(json.dumps(record, ensure_ascii=False, sort_keys=True) + "\n")
                if progress is not None:
                    progress.update(len(names))
            stream.flush()
            os.fsync(stream.fileno())
        _fsync(staging)
        staging.chmod(0o755)
        if out_dir.exists() or out_dir.is_symlink():
            raise InputError(f"{out_dir} appeared while the publication was written")
        staging.rename(out_dir)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    _fsync(out_dir.parent)
    if progress is not None:
        progress.finish()
    return [out_dir / PUBLISHED_TEXTS]


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


def _fsync(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
