"""Build what the audits need: data splits, the owner's vaults, and trained models.

Everything lives under one work directory and is built once: a split, a vault or a
model that is already there is reused, so an interrupted evaluation resumes where it
stopped. Each artefact is written under a temporary name and renamed into place when
complete, so nothing half-built is ever taken for finished.

- ``data/s<seed>-n<n>/``: :func:`demo.data.write_split` of that seed;
- ``vaults/<vault name>/``: ``owner mark`` of the owner's share (in-process), with a
  secret derived from the experiment (reproducible; see
  :func:`twinaudit.owner.mark.secret_from_seed`);
- ``models/<model name>/model.pt`` and ``model.json``: :func:`demo.practitioner.train`
  (one torch thread; models are trained ``jobs`` at a time in worker processes).
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import hashlib
import json
import multiprocessing
import os
import platform
import shutil
import signal
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import asdict
from pathlib import Path
from typing import Final

import numpy as np
import numpy.typing as npt
import torch

from demo import data as demo_data
from demo.models import make_net
from demo.practitioner import accuracy, train
from twinaudit.owner.images.sources import open_source
from twinaudit.owner.mark import mark, secret_from_seed
from twinaudit.owner.marking import MarkingConfig
from twinaudit.owner.marking.clusters import cluster_labels
from twinaudit.owner.marking.config import PROXY_EPOCHS, pgd_defaults
from twinaudit.owner.marking.proxy import (
    OWN_STEPS,
    SmallCNN,
    train_own_proxy,
    train_proxy,
    write_proxy,
)
from twinaudit.owner.vault import Vault
from twinaudit.protocol.seeds import publication_bits

from . import photos
from .specs import (
    CLUSTERS_PROXY_MARKER,
    OWN_FIT_PROXY_MARKER,
    OWN_FIT_STEPS_MARKER,
    OWN_PROXY_MARKER,
    OWNER_PERCENT,
    PROXY_MARKER,
    RANDOM_PROXY_MARKER,
    ModelSpec,
    VaultSpec,
    split_name,
)
from .standard import SCALE_BATCH, SCALE_LR, make_resnet, make_resnet18, train_standard


def rho_of(vault: Vault, draw: int = 0) -> bytes:
    """Return the evaluation's arbiter randomness for ``vault`` (an arbiter draws it).

    ``draw`` 0 is the one the vault was published with; n ≥ 1 is the n-th fresh draw,
    as if the owner had escrowed the same root again (the ``null`` table).
    """
    if draw == 0:
        return hashlib.sha256(b"twinaudit evaluation rho\x00" + vault.root).digest()
    return hashlib.sha256(
        f"twinaudit evaluation rho draw {draw}\x00".encode() + vault.root
    ).digest()


def published_versions(vault: Vault) -> tuple[npt.NDArray[np.uint8], npt.NDArray[np.int64]]:
    """Return what the owner of ``vault`` published: version b_i of pair i, and the labels.

    The publication bits are those of :func:`rho_of` the vault (the evaluation's arbiter
    randomness); a pair without a label has label −1.
    """
    bits = np.array(publication_bits(vault.root, rho_of(vault), len(vault)), dtype=bool)
    images: list[npt.NDArray[np.uint8]] = []
    labels: list[int] = []
    for start, v0, v1, chunk_labels, _ in vault.chunks():
        chosen = bits[start : start + len(v0)]
        images.append(np.where(chosen[:, None, None, None], v1, v0))
        labels.extend(int(y) if y is not None else -1 for y in chunk_labels)
    return np.concatenate(images)[..., 0], np.array(labels, dtype=np.int64)


def _publish_atomically(build: Callable[[Path], None], target: Path) -> Path:
    """Run ``build(tmp)`` and rename ``tmp`` to ``target``; return ``target``.

    A ``target`` already there is kept (another run published it), unless it is an
    empty folder — what is left of a model whose files were removed by hand, which is
    no result — and is then replaced.
    """
    if target.is_dir() and not any(target.iterdir()):
        with contextlib.suppress(OSError):  # filled meanwhile by another run: kept below
            target.rmdir()
    if target.exists():
        return target
    tmp = target.with_name(f".{target.name}.tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        build(tmp)
        tmp.rename(target)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return target


#: The marks made by PGD on a proxy's hidden layer.
PROXY_MARKERS: Final = (
    PROXY_MARKER,
    OWN_PROXY_MARKER,
    OWN_FIT_PROXY_MARKER,
    OWN_FIT_STEPS_MARKER,
    CLUSTERS_PROXY_MARKER,
    RANDOM_PROXY_MARKER,
)


class Workspace:
    """The evaluation's work directory and the Fashion-MNIST it draws from."""

    def __init__(self, root: Path, data_folder: Path, *, proxy_epochs: int = PROXY_EPOCHS) -> None:
        """Use ``root`` (created) and the idx files in ``data_folder``.

        ``proxy_epochs`` is how long the owner's proxy trains (fewer for smoke runs).
        """
        self.root = root
        self.data_folder = data_folder
        self.proxy_epochs = proxy_epochs
        self._data: demo_data.FashionMnist | None = None
        root.mkdir(parents=True, exist_ok=True)  # its folders come with what is built in them

    def fashion_mnist(self) -> demo_data.FashionMnist:
        """Return the whole dataset (read once)."""
        if self._data is None:
            self._data = demo_data.load(self.data_folder)
        return self._data

    def split(self, seed: int, n_train: int, owner_percent: int = OWNER_PERCENT) -> demo_data.Split:
        """Return the data split of experiment ``seed`` (written on first use).

        The owner's share is ``owner_percent`` of ``n_train`` images (the demo's 10%
        unless a table says otherwise).
        """
        folder = self.root / "data" / split_name(seed, n_train, owner_percent)
        if not folder.exists():

            def build(tmp: Path) -> None:
                demo_data.write_split(
                    self.fashion_mnist(),
                    tmp,
                    n_train=n_train,
                    seed=seed,
                    owner_percent=owner_percent,
                )

            _publish_atomically(build, folder)
        return demo_data.split_in(folder, n_train, owner_percent)

    def split_of(self, spec: ModelSpec | VaultSpec) -> demo_data.Split:
        """Return the data split ``spec``'s experiment draws from (its seed, M and her share)."""
        return self.split(spec.seed, spec.n_train, spec.owner_percent)

    def vault(self, spec: VaultSpec) -> Vault:
        """Return the owner's vault of ``spec`` (marked on first use)."""
        target = self.root / "vaults" / spec.name
        if not target.exists() and photos.is_photo_marker(spec.marker):
            folder = self.photo_folder(spec)
            secret = secret_from_seed(f"twinaudit evaluation photos s{spec.seed}-n{spec.n_train}")
            neutral = photos.PHOTO_MARKERS[spec.marker]
            proxies = self.root / "proxy"  # the seed's two vaults share their proxy

            def build_photos(tmp: Path) -> None:
                photos.mark_photos(
                    folder, tmp / "vault", neutral=neutral, secret=secret, proxies=proxies
                )

            _publish_atomically(build_photos, target)
        if not target.exists():
            split = self.split_of(spec)
            config = self.marking_config(spec)

            def build(tmp: Path) -> None:
                source = open_source(split.owner_images, labels=split.owner_labels)
                secret = secret_from_seed(f"twinaudit evaluation {spec.name}")
                mark(source, tmp / "vault", config, secret=secret, show_progress=False)

            _publish_atomically(build, target)
        return Vault.open(target / "vault")

    def photo_folder(self, spec: VaultSpec) -> Path:
        """Return the folder of the owner's photos of ``spec``'s seed (made on first use).

        :func:`evaluation.photos.write_photos` of her share of the split: ``photos/``
        and ``labels.json``, shared by every photo vault of the seed.
        """
        folder = self.root / "photos" / split_name(spec.seed, spec.n_train, spec.owner_percent)
        if not folder.exists():
            split = self.split_of(spec)
            items = np.load(split.owner_images)
            labels = json.loads(split.owner_labels.read_text())

            def build(tmp: Path) -> None:
                photos.write_photos(
                    items.reshape(items.shape[:3]),
                    np.array(labels),
                    tmp,
                    seed=spec.seed,
                    side=photos.PHOTO_SIDE,
                )

            _publish_atomically(build, folder)
        return folder

    def mark_sizes(self, spec: VaultSpec) -> dict[str, object]:
        """Return the marks' size of photo vault ``spec``, full size and resized.

        Measured once (:func:`evaluation.photos.mark_sizes`) and kept, keyed by the
        vault's name, in ``photo-marks.jsonl`` (archived with the other records).
        """
        path = self.root / photos.MARK_SIZES_FILE
        known = photos.load_mark_sizes(path)
        if spec.name not in known:
            vault = self.vault(spec)
            folder = self.photo_folder(spec) / "photos"
            quality = photos.publication_quality(spec.marker)
            sizes = photos.mark_sizes(vault, folder, rho_of(vault), quality)
            record: dict[str, object] = {"key": spec.name, **sizes}
            with path.open("a") as stream:
                stream.write(json.dumps(record, sort_keys=True) + "\n")
            known[spec.name] = record
        return known[spec.name]

    def marking_config(self, spec: VaultSpec) -> MarkingConfig:
        """Return how ``spec``'s vault is marked: its marker, or PGD on the proxy (``pgdproxy``)."""
        if spec.marker not in PROXY_MARKERS:
            return MarkingConfig(marker=spec.marker, epsilon=spec.epsilon)
        pgd = pgd_defaults("proxy-cnn", spec.epsilon)  # what owner mark uses for a proxy
        weights = self.proxy() if spec.marker == PROXY_MARKER else self.own_proxy(spec)
        return MarkingConfig(
            marker="pgd",
            epsilon=spec.epsilon,
            extractor="proxy-cnn",
            extractor_weights=str(weights),
            steps=int(pgd["steps"]),
            step_size=float(pgd["step_size"]),
            batch_size=int(pgd["batch_size"]),
            input_size=28,
        )

    def proxy(self) -> Path:
        """Return the owner's proxy (trained on first use; ``twinaudit owner proxy``'s code).

        A :class:`~twinaudit.owner.marking.proxy.SmallCNN` trained :data:`PROXY_EPOCHS` epochs (seed
        99) on the 10,000 Fashion-MNIST test images, public data no practitioner here
        trains on: what an owner who holds labelled public images of her domain would train.
        """
        epochs = self.proxy_epochs
        target = self.root / "proxy" / f"fmnist-test-e{epochs}-s99.pt"
        if not target.exists():
            data = self.fashion_mnist()
            torch.set_num_threads(1)
            model = train_proxy(data.test_images, data.test_labels, epochs=epochs, seed=99)
            target.parent.mkdir(parents=True, exist_ok=True)
            write_proxy(model, target)
        return target

    def own_proxy(self, spec: VaultSpec) -> Path:
        """Return the proxy trained on the owner's own labelled items of ``spec`` (seed 0).

        :func:`~twinaudit.owner.marking.proxy.train_own_proxy` on her share of the split, what
        ``owner mark`` trains when she gives labels and no extractor: every step for
        ``pgdown`` and ``pgdclusters`` (what it did when their tables ran), until it fits
        her items for ``pgdownfit`` (``MarkingConfig.proxy_converge``, its default since),
        and until it fits them on the schedule of 3,160 steps in whole epochs, without
        the epoch floor, for ``pgdownfitsteps`` (what it trained before the floor).
        """
        steps = OWN_STEPS * self.proxy_epochs // PROXY_EPOCHS  # fewer in smoke runs
        smoke = "" if steps == OWN_STEPS else f"-t{steps}"
        kind = {
            OWN_PROXY_MARKER: "own",
            OWN_FIT_PROXY_MARKER: "ownfit",
            OWN_FIT_STEPS_MARKER: "ownfitsteps",
            CLUSTERS_PROXY_MARKER: "clusters",
        }.get(spec.marker, "untrained")
        name = split_name(spec.seed, spec.n_train, spec.owner_percent)
        target = self.root / "proxy" / f"{kind}-{name}{smoke}.pt"
        if not target.exists():
            split = self.split_of(spec)
            images = np.load(split.owner_images)
            labels = np.array(json.loads(split.owner_labels.read_text()), dtype=np.int64)
            if spec.marker == CLUSTERS_PROXY_MARKER:
                labels = cluster_labels(images)
            if spec.marker == RANDOM_PROXY_MARKER:
                with torch.random.fork_rng(devices=[]):
                    torch.manual_seed(0)
                    model = SmallCNN()
            else:
                converge = spec.marker in {OWN_FIT_PROXY_MARKER, OWN_FIT_STEPS_MARKER}
                # At full length, the schedule owner mark trains: None, not the steps, so that
                # its epoch floor applies as there (:func:`own_proxy_epochs`); the steps
                # alone for the schedule before the floor.
                fixed = smoke or spec.marker == OWN_FIT_STEPS_MARKER
                model = train_own_proxy(
                    images, labels, seed=0, steps=steps if fixed else None, converge=converge
                )
            target.parent.mkdir(parents=True, exist_ok=True)
            write_proxy(model, target)
        return target

    def published(self, spec: VaultSpec) -> tuple[npt.NDArray[np.uint8], npt.NDArray[np.int64]]:
        """Return what the owner published from ``spec``'s vault (version b_i of pair i).

        Photos come as the practitioner trains on them: decoded from the JPEG the owner
        published where she published JPEGs, resized to her model's input
        (:func:`evaluation.photos.published_resized`).
        """
        if photos.is_photo_marker(spec.marker):
            vault = self.vault(spec)
            quality = photos.publication_quality(spec.marker)
            return photos.published_resized(vault, rho_of(vault), quality)
        return published_versions(self.vault(spec))

    def used_mask(self, spec: ModelSpec) -> npt.NDArray[np.bool_]:
        """Return which of the owner's items ``spec`` trained on (a seeded random subset)."""
        n_owner = self.split_of(spec).n_owner
        used = np.zeros(n_owner, dtype=bool)
        n_used = round(spec.fraction * n_owner)
        used[np.random.default_rng([spec.seed, 7]).permutation(n_owner)[:n_used]] = True
        return used

    def training_set(
        self,
        spec: ModelSpec,
        owner: tuple[npt.NDArray[np.uint8], npt.NDArray[np.int64]] | None = None,
    ) -> tuple[npt.NDArray[np.uint8], npt.NDArray[np.int64]]:
        """Return the practitioner's training set of ``spec`` (always ``n_train`` images).

        The shared 90%, then the published versions of a ``fraction`` of the owner's
        items (:meth:`used_mask`; ``owner``, when the caller has :meth:`owner_items`
        already), then other images in place of the rest.
        """
        split = self.split_of(spec)
        shared = np.load(split.shared_images), np.load(split.shared_labels)
        extra = np.load(split.clean_images), np.load(split.clean_labels)
        used = self.used_mask(spec)
        parts = [shared, owner if owner is not None else self.owner_items(spec)]
        parts.append((extra[0][~used], extra[1][~used]))
        return (
            np.concatenate([p[0] for p in parts]),
            np.concatenate([np.asarray(p[1], dtype=np.int64) for p in parts]),
        )

    def owner_items(self, spec: ModelSpec) -> tuple[npt.NDArray[np.uint8], npt.NDArray[np.int64]]:
        """Return the owner's published images (and labels) ``spec`` trained on; none if clean."""
        used = self.used_mask(spec)
        if not used.any():
            split = self.split_of(spec)
            side = np.load(split.shared_images).shape[1:]
            return np.zeros((0, *side), dtype=np.uint8), np.zeros(0, dtype=np.int64)
        images, labels = self.published(spec.vault())
        return images[used], labels[used]

    def load_model(self, spec: ModelSpec) -> torch.nn.Module:
        """Return ``spec``'s trained model (on the CPU, in eval mode)."""
        model = architecture(spec)
        state = torch.load(self.model_dir(spec) / "model.pt", weights_only=True)
        model.load_state_dict(state)
        return model.eval()

    def model_dir(self, spec: ModelSpec) -> Path:
        """Return where ``spec``'s model is (or will be)."""
        return self.root / "models" / spec.name

    def model_info(self, spec: ModelSpec) -> dict[str, object] | None:
        """Return the training summary of ``spec``'s model, or None if it is not trained yet."""
        path = self.model_dir(spec) / "model.json"
        return json.loads(path.read_text()) if path.exists() else None

    def train_missing(
        self,
        specs: Sequence[ModelSpec],
        *,
        jobs: int,
        log: Callable[[str], None],
        device: str = "cpu",
        again: Sequence[ModelSpec] = (),
    ) -> None:
        """Train every model of ``specs`` that is not there yet, ``jobs`` at a time.

        ``device`` is the torch device the training steps run on (``"cuda"`` where an
        accelerator is lent); the jobs share it. Models in ``again`` are trained even
        though their summary is here: their folder (a summary without weights, from an
        archive) is cleared first.
        """
        todo = [s for s in dict.fromkeys(specs) if self.model_info(s) is None or s in again]
        if not todo:
            return
        for spec in again:
            if spec in todo and not (self.model_dir(spec) / "model.pt").exists():
                shutil.rmtree(self.model_dir(spec))
        log(f"training {len(todo)} models, {jobs} at a time on {device_name(device)}")
        inputs = []
        for spec in todo:  # data and vaults are built here, once, before the workers start
            owner = self.owner_items(spec)
            images, labels = self.training_set(spec, owner)
            split = self.split_of(spec)
            inputs.append((spec, images, labels, owner, split.test_images, split.test_labels))
        options = {spec: self.attack_options(spec) for spec in todo}
        context = multiprocessing.get_context("spawn")
        began = time.monotonic()
        with ProcessPoolExecutor(
            max_workers=jobs, mp_context=context, initializer=die_with_parent
        ) as pool:
            futures = {
                pool.submit(
                    train_one,
                    self.model_dir(spec),
                    spec,
                    images=images,
                    labels=labels,
                    owner=owner,
                    test_images=test_images,
                    test_labels=test_labels,
                    device=device,
                    options=options[spec],
                ): spec
                for spec, images, labels, owner, test_images, test_labels in inputs
            }
            for done, future in enumerate(as_completed(futures), start=1):
                info = future.result()
                elapsed = (time.monotonic() - began) / 60
                log(
                    f"  [{done}/{len(todo)}] {futures[future].name}: train accuracy "
                    f"{info['train_accuracy']}, test accuracy {info['test_accuracy']}, "
                    f"{info['train_seconds']} s ({elapsed:.1f} min so far)"
                )

    def attack_options(self, spec: ModelSpec) -> dict[str, object]:
        """Return what ``spec``'s training attack needs besides its training set (or nothing).

        ``advreg``: a reference set of non-members, Fashion-MNIST test images the
        accuracy does not use (2,000 from index 2,000 on); ``markperturb``: its proxy's
        steps (fewer in smoke runs, as the owner's).
        """
        if spec.attack == "advreg":
            test = self.fashion_mnist().test_images
            return {"reference": test[ADVREG_REFERENCE]}
        if spec.attack == "markperturb":
            return {"proxy_steps": OWN_STEPS * self.proxy_epochs // PROXY_EPOCHS}
        return {}


#: ``advreg``'s reference images: test images after those the accuracy is measured on.
ADVREG_REFERENCE: Final = slice(2000, 4000)
#: ``prctl`` options (linux/prctl.h): set and get the signal a process gets when its
#: parent ends.
PR_SET_PDEATHSIG: Final = 1
PR_GET_PDEATHSIG: Final = 2


def die_with_parent() -> None:
    """In a worker process: ask Linux to end it when the process that started it ends.

    A stopped evaluation (``kill``, ``pkill``) must take its workers with it: one that
    went on training after its command was stopped wrote a model nobody asked for.
    ``prctl(PR_SET_PDEATHSIG, SIGTERM)``; nothing elsewhere than Linux.
    """
    if not sys.platform.startswith("linux"):
        return
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG) failed")


def device_name(device: str) -> str:
    """Return how a model's summary names the torch ``device``: ``"cpu"``, or the GPU's name."""
    if device == "cpu":
        return "cpu"
    if not torch.cuda.is_available():
        raise ValueError(f"device {device!r} asked for, but torch sees no accelerator")
    return f"{device} ({torch.cuda.get_device_name(torch.device(device))})"


def deterministic_on(device: str) -> None:
    """Hold torch to deterministic algorithms on an accelerator ``device`` (CPU: nothing).

    Called in a training worker before its first step: a model trained again on a
    fresh machine of the same kind (a lent machine's work directory goes with it) then
    comes out the same.
    """
    if device != "cpu":
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
        torch.backends.cudnn.benchmark = False
        torch.use_deterministic_algorithms(True)


def describe_machine(device: str = "cpu") -> str:
    """Return this machine as the results name it: processor, system, cores, accelerator."""
    accelerator = "no accelerator" if device == "cpu" else device_name(device)
    return (
        f"{platform.machine()} {platform.system()}, Python {platform.python_version()}, "
        f"torch {torch.__version__}, {os.cpu_count()} CPU cores, {accelerator}"
    )


def architecture(spec: ModelSpec) -> torch.nn.Module:
    """Return an untrained network of ``spec``'s trainer (what its weights load into)."""
    makers = {"resnet-sgd": make_resnet, "resnet18-sgd": make_resnet18}
    return makers.get(spec.trainer, make_net)()


def _trainer(spec: ModelSpec) -> Callable[..., torch.nn.Module]:
    """Return the training function of ``spec``'s trainer (keyword arguments fixed here)."""
    if spec.attack:
        from .attack_training import train_attacked  # noqa: PLC0415 - torch.func, owner marking

        return functools.partial(train_attacked, attack=spec.attack)
    if spec.trainer == "resnet18-sgd":
        return functools.partial(
            train_standard, make=make_resnet18, batch=SCALE_BATCH, lr=SCALE_LR, mixed=True
        )
    return train_standard if spec.trainer == "resnet-sgd" else train


def train_one(
    target: Path,
    spec: ModelSpec,
    *,
    images: npt.NDArray[np.uint8],
    labels: npt.NDArray[np.int64],
    owner: tuple[npt.NDArray[np.uint8], npt.NDArray[np.int64]] | None = None,
    test_images: Path,
    test_labels: Path,
    device: str = "cpu",
    options: Mapping[str, object] | None = None,
) -> dict[str, object]:
    """Train ``spec``'s model on the given set (one torch thread); write it to ``target``.

    ``options`` go to the trainer as keywords (a training attack's extra inputs,
    :meth:`Workspace.attack_options`).

    The steps run on ``device``, and so do the accuracies' forward passes. On an
    accelerator torch is held to deterministic algorithms, so a model that has to be
    trained again (its work directory lost with a lent machine) comes out the same on
    the same kind of accelerator.

    Runs in a worker process; the model and its summary appear at ``target`` together.
    """
    torch.set_num_threads(1)
    deterministic_on(device)
    began = time.monotonic()
    model = _trainer(spec)(
        images,
        labels,
        epochs=spec.epochs,
        seed=spec.training_seed,
        recipe=spec.recipe,
        device=device,
        **(options or {}),
    )
    seconds = time.monotonic() - began
    info: dict[str, object] = {
        "spec": asdict(spec),
        "images": len(images),
        "train_accuracy": round(accuracy(model, images, labels, device=device), 4),
        "test_accuracy": round(
            accuracy(model, np.load(test_images), np.load(test_labels), device=device), 4
        ),
        **(
            {"owner_accuracy": round(accuracy(model, *owner, device=device), 4)}
            if owner is not None and len(owner[0])
            else {}
        ),
        "train_seconds": round(seconds, 1),
        "weights": sum(p.numel() for p in model.parameters()),
        "torch": torch.__version__,
        "device": device_name(device),
    }

    def build(tmp: Path) -> None:
        torch.save(model.state_dict(), tmp / "model.pt")
        (tmp / "model.json").write_text(json.dumps(info, indent=2))

    _publish_atomically(build, target)
    return info
