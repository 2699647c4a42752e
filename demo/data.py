"""Fashion-MNIST for the demo: find it, read it, and split it between owner and practitioners.

Where the data comes from, in this order (:func:`locate`):

1. an explicit folder: ``--data PATH`` or the ``TWINAUDIT_FASHION_MNIST`` environment
   variable (when one is given, only it is used: a typo must not silently pick up
   other files);
2. the Debian package ``dataset-fashion-mnist`` (:data:`DEBIAN_DIR`);
3. a download of the official files (:data:`MIRRORS`, checked against the official
   MD5 sums) into a cache folder, where there is internet.

If none works, :class:`DataNotFoundError` says what was tried, for all three.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import shutil
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import numpy as np
import numpy.typing as npt

#: Environment variable naming a folder with the four Fashion-MNIST idx files.
ENV_VAR: Final = "TWINAUDIT_FASHION_MNIST"
#: Where the Debian package ``dataset-fashion-mnist`` installs them.
DEBIAN_DIR: Final = Path("/usr/share/datasets/fashion-mnist")
#: The official files and their official MD5 sums (of the ``.gz`` files).
FILES: Final = {
    "train-images-idx3-ubyte.gz": "8d4fb7e6c68d591d4c3dfef9ec88bf0d",
    "train-labels-idx1-ubyte.gz": "25c81989df183df01b3e8a0aad5dffbe",
    "t10k-images-idx3-ubyte.gz": "bef4ecab320f06d8554ea6380940ec79",
    "t10k-labels-idx1-ubyte.gz": "bb300cfdad3c16e7a12a480ee83cd310",
}
#: Official download locations, tried in order.
MIRRORS: Final = (
    "http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/",
    "https://raw.githubusercontent.com/zalandoresearch/fashion-mnist/master/data/fashion/",
)
#: Seconds to wait for a mirror before deciding there is no internet.
DOWNLOAD_TIMEOUT_S: Final = 30.0
#: The ten Fashion-MNIST classes, by label.
CLASS_NAMES: Final = (
    "T-shirt/top",
    "Trouser",
    "Pullover",
    "Dress",
    "Coat",
    "Sandal",
    "Shirt",
    "Sneaker",
    "Bag",
    "Ankle boot",
)


class DataNotFoundError(RuntimeError):
    """No usable copy of Fashion-MNIST was found or could be downloaded."""


def default_cache() -> Path:
    """Return the download folder: ``$XDG_CACHE_HOME/twinaudit/fashion-mnist`` (or ``~/.cache``)."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "twinaudit" / "fashion-mnist"


def _file_in(folder: Path, name: str) -> Path | None:
    """Return ``folder/name`` or its uncompressed twin, whichever exists."""
    for candidate in (folder / name, folder / name.removesuffix(".gz")):
        if candidate.is_file():
            return candidate
    return None


def missing_files(folder: Path) -> list[str]:
    """Return the Fashion-MNIST files ``folder`` lacks (``.gz`` or not); [] when complete."""
    return [name for name in FILES if _file_in(folder, name) is None]


def _why_not(folder: Path) -> str | None:
    """Return why ``folder`` is not usable, or None when it has all four files."""
    if not folder.is_dir():
        return f"{folder} is not a folder"
    missing = missing_files(folder)
    return f"{folder} lacks {', '.join(missing)}" if missing else None


def _md5(path: Path) -> str:
    digest = hashlib.md5(usedforsecurity=False)
    with path.open("rb") as stream:
        for block in iter(lambda: stream.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


Fetch = Callable[[str, Path], None]


def _fetch(url: str, target: Path) -> None:
    """Download ``url`` to ``target`` (plain urllib; raises OSError/URLError on failure)."""
    with (
        urllib.request.urlopen(url, timeout=DOWNLOAD_TIMEOUT_S) as response,
        target.open("wb") as out,
    ):
        shutil.copyfileobj(response, out)


def download(cache: Path, fetch: Fetch = _fetch) -> Path:
    """Download the four official files into ``cache`` and check their MD5 sums.

    Files already there with the right sum are kept. Raises :class:`OSError` (e.g.
    :class:`urllib.error.URLError` without internet) or :class:`DataNotFoundError`
    when no mirror delivers a file with the official sum.
    """
    cache.mkdir(parents=True, exist_ok=True)
    for name, md5 in FILES.items():
        target = cache / name
        if target.is_file() and _md5(target) == md5:
            continue
        errors = []
        for mirror in MIRRORS:
            partial = target.with_name(target.name + ".part")
            try:
                fetch(mirror + name, partial)
            except (OSError, urllib.error.URLError) as exc:
                errors.append(f"{mirror}: {exc}")
                continue
            if _md5(partial) == md5:
                partial.replace(target)
                break
            partial.unlink(missing_ok=True)
            errors.append(f"{mirror}: MD5 mismatch")
        else:
            raise OSError(f"cannot download {name}: " + "; ".join(errors))
    return cache


def locate(
    explicit: Path | None = None,
    *,
    environ: Mapping[str, str] | None = None,
    debian_dir: Path = DEBIAN_DIR,
    cache: Path | None = None,
    fetch: Fetch = _fetch,
    log: Callable[[str], None] = print,
) -> Path:
    """Return a folder holding the four Fashion-MNIST idx files (module docstring order).

    ``explicit`` (the ``--data`` option) wins over ``environ[ENV_VAR]``; when either is
    given it is the only candidate. Raises :class:`DataNotFoundError` naming what was
    tried (explicit path, Debian package, download) when nothing works.
    """
    env = os.environ if environ is None else environ
    chosen = explicit
    if chosen is None and env.get(ENV_VAR):
        chosen = Path(env[ENV_VAR])
    hint = (
        f"Give a folder with the four files ({', '.join(FILES)}) with --data PATH or "
        f"{ENV_VAR}=PATH; or install the Debian package dataset-fashion-mnist "
        f"(files in {debian_dir}); or run where {MIRRORS[0]} can be reached."
    )
    if chosen is not None:
        reason = _why_not(chosen)
        if reason is None:
            return chosen
        raise DataNotFoundError(f"Fashion-MNIST not found: explicit path {reason}. {hint}")
    tried = ["explicit path: none given (--data, $" + ENV_VAR + ")"]
    reason = _why_not(debian_dir)
    if reason is None:
        return debian_dir
    tried.append(f"Debian package dataset-fashion-mnist: {reason}")
    folder = cache if cache is not None else default_cache()
    if not missing_files(folder):
        return folder
    log(f"downloading Fashion-MNIST into {folder} ...")
    try:
        return download(folder, fetch)
    except (OSError, DataNotFoundError) as exc:
        tried.append(f"download into {folder}: {exc}")
    raise DataNotFoundError(
        "Fashion-MNIST not found; tried\n  - " + "\n  - ".join(tried) + "\n" + hint
    )


def read_idx(path: Path) -> npt.NDArray[np.uint8]:
    """Read an idx file (``.gz`` or not) of unsigned bytes into an array of its shape."""
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rb") as stream:
        raw = stream.read()
    if len(raw) < 4 or raw[0] != 0 or raw[1] != 0 or raw[2] != 0x08:
        raise ValueError(f"{path}: not an idx file of unsigned bytes")
    ndim = raw[3]
    dims = [int.from_bytes(raw[4 + 4 * i : 8 + 4 * i], "big") for i in range(ndim)]
    offset = 4 + 4 * ndim
    if len(raw) != offset + int(np.prod(dims)):
        raise ValueError(f"{path}: {len(raw) - offset} data bytes for shape {dims}")
    return np.frombuffer(raw, dtype=np.uint8, offset=offset).reshape(dims)


@dataclass(frozen=True)
class FashionMnist:
    """The 60k training and 10k test images (uint8, N×28×28) with their labels."""

    train_images: npt.NDArray[np.uint8]
    train_labels: npt.NDArray[np.uint8]
    test_images: npt.NDArray[np.uint8]
    test_labels: npt.NDArray[np.uint8]


def load(folder: Path) -> FashionMnist:
    """Read the four files of ``folder`` (see :func:`locate`)."""
    arrays = []
    for name in FILES:
        path = _file_in(folder, name)
        if path is None:
            raise DataNotFoundError(f"{folder} lacks {name}")
        arrays.append(read_idx(path))
    data = FashionMnist(*arrays)
    for images, labels in ((data.train_images, data.train_labels),):
        if images.shape[1:] != (28, 28) or len(images) != len(labels):
            raise ValueError(f"{folder}: unexpected shapes {images.shape}, {labels.shape}")
    return data


@dataclass(frozen=True)
class Split:
    """Where :func:`write_split` put each part of the experiment (all relative to one folder).

    ``owner_images`` (N images, .npy) with ``owner_labels`` (JSON list) are the owner's
    raw photos, a share of a practitioner's training set (10% unless told).
    ``shared_images``/``shared_labels`` (.npy) are the rest of it, which both
    practitioners have. ``clean_images``/``clean_labels`` are N further images the clean
    practitioner has in place of the owner's. ``test_images``/``test_labels`` (.npy)
    measure accuracy.
    """

    owner_images: Path
    owner_labels: Path
    shared_images: Path
    shared_labels: Path
    clean_images: Path
    clean_labels: Path
    test_images: Path
    test_labels: Path
    n_train: int
    n_owner: int


def split_in(folder: Path, n_train: int, owner_percent: int = 10) -> Split:
    """Return the :class:`Split` whose files :func:`write_split` writes into ``folder``."""
    return Split(
        owner_images=folder / "owner-photos.npy",
        owner_labels=folder / "owner-labels.json",
        shared_images=folder / "shared-images.npy",
        shared_labels=folder / "shared-labels.npy",
        clean_images=folder / "clean-extra-images.npy",
        clean_labels=folder / "clean-extra-labels.npy",
        test_images=folder / "test-images.npy",
        test_labels=folder / "test-labels.npy",
        n_train=n_train,
        n_owner=n_train * owner_percent // 100,
    )


def write_split(
    data: FashionMnist,
    out: Path,
    *,
    n_train: int,
    seed: int,
    n_test: int = 2000,
    owner_percent: int = 10,
) -> Split:
    """Draw disjoint random subsets of the training images and save them under ``out``.

    A practitioner's training set has ``n_train`` images; the owner's share is
    ``n_train · owner_percent // 100`` of them (``n_owner``). Subsets are drawn with
    numpy's PCG64 seeded by ``seed`` (the demo's data split is not part of the protocol).
    """
    if not 1 <= owner_percent <= 50:
        raise ValueError(f"owner_percent must be in 1..50, got {owner_percent}")
    n_owner = n_train * owner_percent // 100
    if n_owner < 1 or n_train + n_owner > len(data.train_images):
        raise ValueError(
            f"{n_train} training images with an owner's share of {owner_percent}% do not fit "
            f"in {len(data.train_images)} (the owner's share must be at least one image)"
        )
    order = np.random.default_rng(seed).permutation(len(data.train_images))
    owner = np.sort(order[:n_owner])
    shared = np.sort(order[n_owner:n_train])
    clean = np.sort(order[n_train : n_train + n_owner])
    out.mkdir(parents=True, exist_ok=True)
    split = split_in(out, n_train, owner_percent)
    np.save(split.owner_images, data.train_images[owner])
    split.owner_labels.write_text(json.dumps([int(y) for y in data.train_labels[owner]]))
    np.save(split.shared_images, data.train_images[shared])
    np.save(split.shared_labels, data.train_labels[shared].astype(np.int64))
    np.save(split.clean_images, data.train_images[clean])
    np.save(split.clean_labels, data.train_labels[clean].astype(np.int64))
    np.save(split.test_images, data.test_images[:n_test])
    np.save(split.test_labels, data.test_labels[:n_test].astype(np.int64))
    return split


def read_published(folder: Path, name: str = "owner-photos.npy") -> tuple[np.ndarray, np.ndarray]:
    """Read what ``owner publish`` wrote for an ``.npy`` input: images and ``labels.csv``.

    The CSV has a ``filename,label`` header and rows with names ``<file>#<index>``; rows
    are returned in index order.
    """
    images = np.load(folder / name)
    rows = (folder / "labels.csv").read_text().splitlines()
    labels: dict[int, int] = {}
    for row in rows:
        key, _, value = row.rpartition(",")
        if "#" not in key:
            continue  # the header
        labels[int(key.rpartition("#")[2])] = int(value)
    if sorted(labels) != list(range(len(images))):
        raise ValueError(f"{folder}/labels.csv does not label every published image")
    return images, np.array([labels[i] for i in range(len(images))], dtype=np.int64)
