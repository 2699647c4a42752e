"""Hugging Face ``transformers`` models as oracles: classifiers, causal LMs, CLIP-style models.

``oracle serve --hf DIR`` serves a model directory written by ``save_pretrained`` (its
``config.json``, its weights, and the tokenizer or image processor saved beside them).
Everything is read from the directory (``local_files_only``: nothing is downloaded,
and no code the directory names is run: ``trust_remote_code`` stays off). The model
runs in float32 on the CPU in eval mode.

- :func:`load_hf_classifier`: ``AutoModelForImageClassification`` with its own image
  processor (``AutoImageProcessor``). The oracle's images, float32 in [0, 1], go to the
  processor as they are (its 1/255 rescaling is skipped: they are already in [0, 1]);
  it resizes and normalises them as the model was trained to see them, and the oracle
  answers the softmax of the model's ``logits``. A grey image given to a model of three
  channels is repeated over them, as Hugging Face's pipelines convert images to RGB.
  At start the processor's output size is found on one image, and the oracle is
  probed there (:func:`~twinaudit.practitioner.torch_images.probe`): a model that does not
  answer (N, classes) logits is refused with a
  :class:`~twinaudit.protocol.errors.ModelMismatchError`, before anything is
  served. Describe reports that size as the input shape (the processor resizes every
  image to it).
- :func:`load_hf_language_model`: ``AutoModelForCausalLM`` and ``AutoTokenizer``,
  served as :class:`~twinaudit.practitioner.torch_lm.TorchLanguageModelOracle`. The
  tokenizer's BOS token, when it has one, leads every text, so every token of the text
  is scored; the model's ``max_position_embeddings`` bounds the tokens (longer texts
  are refused, never truncated).
- :func:`load_hf_image_text`: a CLIP-style dual encoder (``AutoModel`` with
  ``get_image_features`` and ``get_text_features``, such as ``CLIPModel``), with its
  image processor and its tokenizer, served as
  :class:`~twinaudit.practitioner.torch_encoder.TorchImageTextOracle`. A text is tokenised
  with the special tokens the model pools at (CLIP's end token). It is probed at start
  on one zero image and one text.

Describe reports ``framework`` ``"transformers <version> on torch <version>"``,
``model_format`` :data:`HF_FORMAT`, and as digest
:func:`~twinaudit.practitioner.torch_oracle.state_dict_digest` of the model's float32
weights. A directory that is not a Hugging Face model, holds another kind of model
than the one asked for, or lacks weights the model needs (which ``transformers``
would fill with random values, so the oracle would not answer as the trained model
does), is an :class:`~twinaudit.protocol.errors.InputError` with one line. ``transformers``'
own loading report is kept off the server's log: what it says is in that error.

``transformers`` imports torchvision whenever it is installed, so it is imported only
through :func:`import_transformers`, after
:func:`twinaudit.wire.torchvision_shim.import_torchvision`
(torchvision's CUDA-built wheel does not import on the CPU torch without it), and
only when a model is loaded; without ``transformers`` the loaders raise
:class:`~twinaudit.protocol.errors.ParameterError`.
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import Any, Final

import numpy as np
import torch

from twinaudit.protocol.errors import InputError, ModelMismatchError, OracleError, ParameterError
from twinaudit.wire.torchvision_shim import import_torchvision

from .formats import LoadedModel, first_line
from .torch_encoder import TorchImageTextOracle
from .torch_lm import TorchLanguageModelOracle
from .torch_oracle import DEFAULT_MAX_BATCH, TorchClassifierOracle, state_dict_digest

#: The ``model_format`` Describe reports for a Hugging Face model directory.
HF_FORMAT: Final = "huggingface"
#: The side of the square image the processor's output size is found on, when the
#: model's configuration names no ``image_size``.
_PROBE_SIDE: Final = 32
#: The text a causal LM and a CLIP-style model are probed on at start (short: one token
#: for most tokenizers, so any --max-tokens fits it).
_PROBE_TEXT: Final = "a"


def import_transformers() -> ModuleType:
    """Return the ``transformers`` module, imported after the torchvision shim.

    Raises :class:`~twinaudit.protocol.errors.ParameterError` when it is not installed.
    """
    if importlib.util.find_spec("torchvision") is not None:
        try:
            import_torchvision()
        except Exception as exc:  # a broken install raises anything
            raise ParameterError(
                f"cannot import torchvision, which transformers imports: {first_line(exc)}"
            ) from None
    try:
        transformers = importlib.import_module("transformers")
    except ImportError:
        raise ParameterError(
            "serving a Hugging Face model needs the 'transformers' package "
            "(pip install -c constraints.txt '.[hf]')"
        ) from None
    transformers.utils.logging.disable_progress_bar()  # no bars on the server's stderr
    return transformers


def hf_framework(transformers: ModuleType) -> str:
    """Return the framework text Describe reports: transformers' and torch's versions."""
    return f"transformers {transformers.__version__} on torch {torch.__version__}"


def _directory(path: str | Path, what: str) -> Path:
    """Return ``path`` if it is a model directory (with a ``config.json``)."""
    directory = Path(path)
    if not directory.is_dir():
        raise InputError(
            f"cannot load {what} from {str(directory)!r}: not a directory (give a model "
            "directory written by save_pretrained)"
        )
    if not (directory / "config.json").is_file():
        raise InputError(
            f"cannot load {what} from {str(directory)!r}: not a Hugging Face model "
            "directory (no config.json)"
        )
    return directory


def _pretrained(loader: Any, directory: Path, what: str) -> Any:
    """``loader.from_pretrained(directory)``, from local files only; failures are InputError."""
    try:
        return loader.from_pretrained(str(directory), local_files_only=True)
    except Exception as exc:  # transformers, safetensors and torch raise many types
        raise InputError(f"cannot load {what} from {str(directory)!r}: {first_line(exc)}") from None


@contextmanager
def _quiet(transformers: ModuleType) -> Iterator[None]:
    """Keep ``transformers``' warnings (its loading report) off the log while loading."""
    verbosity = transformers.utils.logging.get_verbosity()
    transformers.utils.logging.set_verbosity_error()
    try:
        yield
    finally:
        transformers.utils.logging.set_verbosity(verbosity)


def _pretrained_model(
    loader: Any, directory: Path, what: str, transformers: ModuleType
) -> tuple[torch.nn.Module, list[str]]:
    """Load a model; return it in float32 eval mode and the weights the checkpoint lacks.

    The lacking weights are those ``transformers`` reports missing or of a mismatched
    shape: it would initialise them at random.
    """
    with _quiet(transformers):
        try:
            model, info = loader.from_pretrained(
                str(directory), local_files_only=True, output_loading_info=True
            )
        except Exception as exc:  # transformers, safetensors and torch raise many types
            raise InputError(
                f"cannot load {what} from {str(directory)!r}: {first_line(exc)}"
            ) from None
    lacking = set(info.get("missing_keys", ())) | {k[0] for k in info.get("mismatched_keys", ())}
    return _float_eval(model), sorted(lacking)


def _refuse_lacking(lacking: list[str], directory: Path, what: str) -> None:
    """Raise InputError when the checkpoint lacks weights the model needs."""
    if lacking:
        shown = ", ".join(lacking[:3]) + (", ..." if len(lacking) > 3 else "")
        raise InputError(
            f"cannot load {what} from {str(directory)!r}: the checkpoint lacks "
            f"{len(lacking)} of its weights ({shown}), which would be drawn at random; "
            "save the whole trained model with save_pretrained"
        )


def _float_eval(model: Any) -> torch.nn.Module:
    if not isinstance(model, torch.nn.Module):
        raise InputError(f"the directory holds {type(model).__name__}, not a torch model")
    return model.float().eval()


def _loaded(
    model: torch.nn.Module, module: torch.nn.Module, transformers: ModuleType
) -> LoadedModel:
    """Describe ``module`` (what the oracle runs) as the Hugging Face ``model`` it wraps."""
    return LoadedModel(
        module,
        HF_FORMAT,
        hf_framework(transformers),
        digest=state_dict_digest(model),
    )


def _channels(config: Any) -> int:
    """Return the image channels a model's configuration names (its vision part's), or 3."""
    for part in (config, getattr(config, "vision_config", None)):
        channels = getattr(part, "num_channels", None)
        if isinstance(channels, int) and not isinstance(channels, bool) and channels >= 1:
            return channels
    return 3


def _image_side(config: Any) -> int:
    """Return the square side a model's configuration names, or :data:`_PROBE_SIDE`."""
    for part in (config, getattr(config, "vision_config", None)):
        side = getattr(part, "image_size", None)
        if isinstance(side, int) and not isinstance(side, bool) and 1 <= side <= 4096:
            return side
    return _PROBE_SIDE


class HfPixels(torch.nn.Module):
    """A model's image processor as a module: NCHW float32 in [0, 1] to ``pixel_values``."""

    def __init__(self, processor: Any, channels: int) -> None:
        """Use ``processor`` for a model of ``channels`` input channels."""
        super().__init__()
        self._processor = processor
        self._channels = channels

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Return the processor's ``pixel_values`` for the batch ``x``."""
        if x.shape[1] == 1 and self._channels == 3:
            x = x.expand(-1, 3, -1, -1)
        out = self._processor(
            images=x.contiguous(),
            return_tensors="pt",
            do_rescale=False,
            input_data_format="channels_first",
        )
        pixels = out["pixel_values"]
        if not isinstance(pixels, torch.Tensor):
            raise TypeError(f"the image processor returned {type(pixels).__name__}")
        return pixels.to(torch.float32)


def _output_tensor(out: object, field: str) -> object:
    """Return ``out`` if it is a tensor, else its ``field`` (a ``ModelOutput``'s)."""
    if isinstance(out, torch.Tensor):
        return out
    value = getattr(out, field, None)
    return value if value is not None else out


class HfImageClassifier(torch.nn.Module):
    """An image classifier and its processor: NCHW float32 in [0, 1] to (N, classes) logits."""

    def __init__(self, model: torch.nn.Module, pixels: HfPixels) -> None:
        """Run ``model`` on what ``pixels`` makes of a batch."""
        super().__init__()
        self.model = model
        self.pixels = pixels

    def forward(self, x: torch.Tensor) -> object:
        """Return the model's ``logits`` (or whatever it returned, for the probe to name)."""
        return _output_tensor(self.model(pixel_values=self.pixels(x)), "logits")


class HfImageText(torch.nn.Module):
    """A CLIP-style model seen as ``encode_image`` and ``encode_text`` (projected embeddings)."""

    def __init__(self, model: torch.nn.Module, pixels: HfPixels) -> None:
        """Wrap ``model`` (with ``get_image_features``, ``get_text_features``)."""
        super().__init__()
        self.model = model
        self.pixels = pixels

    def encode_image(self, x: torch.Tensor) -> object:
        """Return the (N, D) image embeddings of an NCHW batch in [0, 1]."""
        out = self.model.get_image_features(pixel_values=self.pixels(x))  # type: ignore[operator]
        return _output_tensor(out, "pooler_output")

    def encode_text(self, ids: torch.Tensor) -> object:
        """Return the (1, D) embedding of token ids (1, T)."""
        out = self.model.get_text_features(input_ids=ids)  # type: ignore[operator]
        return _output_tensor(out, "pooler_output")


class HfTokenizer:
    """A ``transformers`` tokenizer as a :class:`~twinaudit.practitioner.tokenizer.Tokenizer`.

    With ``special`` false (a causal LM), ``encode`` gives the text's ids without
    special tokens and ``bos_id`` the tokenizer's BOS (the oracle puts it first). With
    ``special`` (a CLIP-style model), ``encode`` gives the ids with the special tokens
    the tokenizer adds (CLIP's start and end tokens), and ``bos_id`` is None.
    """

    def __init__(self, tokenizer: Any, *, special: bool = False) -> None:
        """Wrap ``tokenizer`` (anything callable like a ``PreTrainedTokenizer``)."""
        self._tokenizer = tokenizer
        self._special = special

    @property
    def bos_id(self) -> int | None:
        """Return the tokenizer's BOS id (None when it has none, or with ``special``)."""
        if self._special:
            return None
        bos = getattr(self._tokenizer, "bos_token_id", None)
        return bos if isinstance(bos, int) and not isinstance(bos, bool) else None

    def encode(self, text: str) -> list[int]:
        """Return the text's ids (with the special tokens only with ``special``)."""
        ids = self._tokenizer(text, add_special_tokens=self._special)["input_ids"]
        return [int(i) for i in ids]


class LogitsOnly(torch.nn.Module):
    """Call a ``transformers`` causal LM on ids and return only its ``logits``."""

    def __init__(self, model: torch.nn.Module) -> None:
        """Wrap ``model``."""
        super().__init__()
        self.model = model

    def forward(self, ids: torch.Tensor) -> object:
        """Return the (1, T, V) next-token logits."""
        return _output_tensor(self.model(input_ids=ids), "logits")


def _context_length(config: Any, given: int | None) -> int | None:
    """Return the most tokens a text may have: the model's context, or less if given."""
    limit = getattr(config, "max_position_embeddings", None)
    limit = limit if isinstance(limit, int) and not isinstance(limit, bool) and limit >= 2 else None
    if given is None:
        return limit
    return given if limit is None else min(given, limit)


def _model_name(directory: Path, model_name: str | None) -> str:
    return model_name or directory.resolve().name or "hf-model"


def _auto(transformers: ModuleType, name: str) -> Any:
    auto = getattr(transformers, name, None)
    if auto is None:
        raise ParameterError(f"this transformers has no {name}")
    return auto


def _image_processor(transformers: ModuleType, directory: Path) -> Any:
    if not (directory / "preprocessor_config.json").is_file():
        raise InputError(
            f"{str(directory)!r} has no image processor (preprocessor_config.json): save the "
            "model's processor with it (processor.save_pretrained(DIR))"
        )
    return _pretrained(_auto(transformers, "AutoImageProcessor"), directory, "an image processor")


def _processed_shape(pixels: HfPixels, config: Any) -> tuple[int, int, int]:
    """Return the (H, W, C) the processor makes of one image (the shape the model takes)."""
    side, channels = _image_side(config), _channels(config)
    try:
        with torch.inference_mode():
            out = pixels(torch.zeros(1, channels, side, side))
    except Exception as exc:  # a processor raises many types for what it refuses
        raise ModelMismatchError(
            "input", f"the image processor refused a {side}x{side} image: {first_line(exc)}"
        ) from None
    if out.dim() != 4 or out.shape[0] != 1:
        raise ModelMismatchError(
            "output-shape",
            f"the image processor returned pixel values of shape {tuple(out.shape)}, "
            "not (1, C, H, W)",
        )
    _, c, h, w = (int(d) for d in out.shape)
    return (h, w, c)


def load_hf_classifier(
    path: str | Path,
    *,
    model_name: str | None = None,
    n_classes: int | None = None,
    label_only: bool = False,
    max_batch: int = DEFAULT_MAX_BATCH,
) -> TorchClassifierOracle:
    """Load an ``AutoModelForImageClassification`` directory as a probed classifier oracle."""
    directory = _directory(path, "an image classifier")
    transformers = import_transformers()
    auto = _auto(transformers, "AutoModelForImageClassification")
    model, lacking = _pretrained_model(auto, directory, "an image classifier", transformers)
    _refuse_lacking(lacking, directory, "an image classifier")
    pixels = HfPixels(_image_processor(transformers, directory), _channels(model.config))
    shape = _processed_shape(pixels, model.config)
    return TorchClassifierOracle(
        _loaded(model, HfImageClassifier(model, pixels), transformers),
        n_classes=n_classes,
        probe_shape=shape,
        model_name=_model_name(directory, model_name),
        max_batch=max_batch,
        label_only=label_only,
    )


def load_hf_language_model(
    path: str | Path,
    *,
    model_name: str | None = None,
    max_batch: int = DEFAULT_MAX_BATCH,
    max_tokens: int | None = None,
) -> TorchLanguageModelOracle:
    """Load an ``AutoModelForCausalLM`` directory and its tokenizer as an oracle."""
    directory = _directory(path, "a causal LM")
    transformers = import_transformers()
    auto = _auto(transformers, "AutoModelForCausalLM")
    model, lacking = _pretrained_model(auto, directory, "a causal LM", transformers)
    _refuse_lacking(lacking, directory, "a causal LM")
    tokenizer = _pretrained(_auto(transformers, "AutoTokenizer"), directory, "a tokenizer")
    oracle = TorchLanguageModelOracle(
        _loaded(model, LogitsOnly(model), transformers),
        HfTokenizer(tokenizer),
        model_name=_model_name(directory, model_name),
        max_batch=max_batch,
        max_tokens=_context_length(model.config, max_tokens),
    )
    _probe(lambda: oracle.token_logprobs([_PROBE_TEXT]), "a causal LM")
    return oracle


def load_hf_image_text(
    path: str | Path,
    *,
    model_name: str | None = None,
    max_batch: int = DEFAULT_MAX_BATCH,
    max_tokens: int | None = None,
) -> TorchImageTextOracle:
    """Load a CLIP-style ``AutoModel`` directory, its processor and tokenizer, as an oracle."""
    directory = _directory(path, "a CLIP-style model")
    transformers = import_transformers()
    auto = _auto(transformers, "AutoModel")
    model, lacking = _pretrained_model(auto, directory, "a CLIP-style model", transformers)
    missing = [
        name
        for name in ("get_image_features", "get_text_features")
        if not callable(getattr(model, name, None))
    ]
    if missing:
        raise InputError(
            f"{str(directory)!r} holds a {type(model).__name__}, not a CLIP-style model "
            f"(it has no {' or '.join(missing)})"
        )
    _refuse_lacking(lacking, directory, "a CLIP-style model")
    pixels = HfPixels(_image_processor(transformers, directory), _channels(model.config))
    tokenizer = _pretrained(_auto(transformers, "AutoTokenizer"), directory, "a tokenizer")
    text_config = getattr(model.config, "text_config", model.config)
    oracle = TorchImageTextOracle(
        _loaded(model, HfImageText(model, pixels), transformers),
        HfTokenizer(tokenizer, special=True),
        model_name=_model_name(directory, model_name),
        max_batch=max_batch,
        max_tokens=_context_length(text_config, max_tokens),
    )
    side, channels = _image_side(model.config), _channels(model.config)
    probe_images = np.zeros((1, side, side, channels), dtype=np.float32)
    _probe(lambda: oracle.embed_image_text(probe_images, [_PROBE_TEXT]), "a CLIP-style model")
    return oracle


def _probe(call: Callable[[], object], what: str) -> None:
    """Run one query at start; a model that cannot answer it is a ModelMismatchError."""
    try:
        call()
    except ModelMismatchError:
        raise
    except InputError as exc:
        raise ModelMismatchError("input", f"{what} refused its probe at start: {exc}") from None
    except OracleError as exc:
        raise ModelMismatchError(
            "output-shape", f"{what} answered its probe at start wrongly: {exc}"
        ) from None
