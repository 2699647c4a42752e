"""In-process encoder and image-text oracles around torch modules (CPU, eval, no grad).

:class:`TorchEncoderOracle` serves an image encoder: a module mapping an NCHW
float32 batch (:class:`~twinaudit.practitioner.torch_images.ImageInput`) to (N, D)
embeddings. :class:`TorchImageTextOracle` serves a CLIP-style dual encoder: one
module with ``encode_image(NCHW batch) → (N, D)`` and ``encode_text(token ids
(1, T) int64) → (1, D)``, and a :class:`~twinaudit.practitioner.tokenizer.Tokenizer` for
its texts. Embeddings are returned in float64 as the model computed them (no
normalisation: the score's cosine normalises). The model digest is
:func:`~twinaudit.practitioner.torch_oracle.state_dict_digest`. Either model may come as a
:class:`~twinaudit.practitioner.formats.LoadedModel`, whose digest, format and framework the
description then reports. Calls are serialised by a lock, so one oracle may back a
multi-threaded server.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt
import torch

from twinaudit.protocol.errors import InputError, OracleError, ParameterError
from twinaudit.protocol.oracles.base import F32Images, OracleInfo, check_images
from twinaudit.protocol.oracles.embedding import EmbeddingAnswer, EncoderOracle, check_embeddings
from twinaudit.protocol.oracles.image_text import ImageTextAnswer, ImageTextOracle
from twinaudit.protocol.oracles.language import check_texts

from .formats import LoadedModel
from .tokenizer import Tokenizer, encode_checked
from .torch_images import (
    ImageInput,
    check_max_batch,
    probe,
    run_fixed,
    run_model,
    weight_dtypes,
)
from .torch_oracle import DEFAULT_MAX_BATCH, input_shape_of, state_dict_digest


def _eval(model: torch.nn.Module) -> torch.nn.Module:
    if not isinstance(model, torch.nn.Module):
        raise ParameterError("the model must be a torch.nn.Module")
    model = model.to("cpu")
    with contextlib.suppress(NotImplementedError):  # torch.export modules refuse eval()
        model.eval()
    return model


def _describe(
    model: torch.nn.Module,
    name: str,
    capability: str,
    max_batch: int,
    *,
    loaded: LoadedModel | None = None,
    input_shape: tuple[int, int, int] | None = None,
) -> OracleInfo:
    digest = loaded.digest if loaded is not None else None
    try:
        return OracleInfo(
            name,
            digest if digest is not None else state_dict_digest(model),
            (capability,),
            "",
            0,
            max_batch,
            framework=loaded.framework if loaded is not None else "",
            model_format=loaded.model_format if loaded is not None else "",
            input_shape=input_shape or (),
        )
    except OracleError as exc:
        raise ParameterError(f"invalid oracle description: {exc}") from None


def _matrix(out: object, rows: int, what: str) -> npt.NDArray[np.float64]:
    if not isinstance(out, torch.Tensor) or out.dim() != 2 or out.shape[0] != rows:
        shape = tuple(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__
        raise OracleError("invalid-answer", f"{what} returned {shape}, not ({rows}, D)")
    if not out.is_floating_point():
        raise OracleError("invalid-answer", f"{what} returned a non-float tensor")
    return check_embeddings(out.detach().to(torch.float64).numpy().copy(), rows, what)


class TorchEncoderOracle(EncoderOracle):
    """Serve a ``torch.nn.Module`` image encoder as an :class:`EncoderOracle`.

    ``model`` is a module or a :class:`~twinaudit.practitioner.formats.LoadedModel` (whose
    fixed batch, if any, is honoured). With a ``probe_shape`` (H, W, C), or an input
    shape the file declares, the encoder is run once at start on zero images and must
    answer finite float (N, D) embeddings for one image and for two
    (:func:`~twinaudit.practitioner.torch_images.probe`; a
    :class:`~twinaudit.protocol.errors.ModelMismatchError` otherwise).
    """

    def __init__(
        self,
        model: torch.nn.Module | LoadedModel,
        *,
        model_name: str = "torch-encoder",
        mean: Sequence[float] | None = None,
        std: Sequence[float] | None = None,
        max_batch: int = DEFAULT_MAX_BATCH,
        probe_shape: tuple[int, int, int] | None = None,
    ) -> None:
        """Wrap ``model`` (set to eval mode), probe it if a shape is known, describe it."""
        loaded = model if isinstance(model, LoadedModel) else None
        self._model = _eval(model.module if isinstance(model, LoadedModel) else model)
        self._input = ImageInput(mean, std)
        check_max_batch(max_batch)
        self._fixed_batch = loaded.fixed_batch if loaded is not None else None
        self._max_batch = min(max_batch, self._fixed_batch or max_batch)
        self._lock = threading.Lock()
        shape = input_shape_of(loaded, probe_shape)
        if shape is not None:
            probe(
                self._raw,
                shape,
                fixed_batch=self._fixed_batch,
                max_batch=max_batch,
                what="dimensions",
                weights=weight_dtypes(self._model),
            )
        self._info = _describe(
            self._model, model_name, "embed-images", max_batch, loaded=loaded, input_shape=shape
        )

    def _raw(self, images: F32Images) -> object:
        """Run the encoder on a batch (padded to a fixed batch)."""
        return run_fixed(self._model, self._input.tensor(images), self._fixed_batch, "a batch")

    @property
    def info(self) -> OracleInfo:
        """Return the oracle's self-description."""
        return self._info

    def embed_images(self, images: F32Images) -> EmbeddingAnswer:
        """Embed float32 (N, H, W, C) images in [0, 1], in batches of at most max_batch."""
        images = check_images(images)
        parts: list[EmbeddingAnswer] = []
        with self._lock:
            for start in range(0, images.shape[0], self._max_batch):
                chunk = images[start : start + self._max_batch]
                out = self._raw(chunk)
                parts.append(EmbeddingAnswer(_matrix(out, chunk.shape[0], "the encoder")))
        return EmbeddingAnswer.concatenate(parts).validate(images.shape[0])


class TorchImageTextOracle(ImageTextOracle):
    """Serve a CLIP-style module (``encode_image``, ``encode_text``) as an oracle."""

    def __init__(
        self,
        model: torch.nn.Module | LoadedModel,
        tokenizer: Tokenizer,
        *,
        model_name: str = "torch-image-text",
        mean: Sequence[float] | None = None,
        std: Sequence[float] | None = None,
        max_batch: int = DEFAULT_MAX_BATCH,
        max_tokens: int | None = None,
    ) -> None:
        """Wrap ``model`` and ``tokenizer``; texts longer than ``max_tokens`` are refused."""
        loaded = model if isinstance(model, LoadedModel) else None
        module = model.module if isinstance(model, LoadedModel) else model
        for method in ("encode_image", "encode_text"):
            if not callable(getattr(module, method, None)):
                raise ParameterError(f"an image-text model needs a {method}() method")
        self._model = _eval(module)
        self._tokenizer = tokenizer
        self._max_tokens = max_tokens
        self._input = ImageInput(mean, std)
        self._max_batch = check_max_batch(max_batch)
        self._lock = threading.Lock()
        self._info = _describe(
            self._model, model_name, "embed-image-text", max_batch, loaded=loaded
        )

    @property
    def info(self) -> OracleInfo:
        """Return the oracle's self-description."""
        return self._info

    def embed_image_text(self, images: F32Images | None, texts: list[str]) -> ImageTextAnswer:
        """Embed the images in batches and each text on its own (either may be empty)."""
        if images is None and not texts:
            raise InputError("embed at least one image or text")
        if images is not None:
            images = check_images(images)
        if texts:
            texts = check_texts(texts)
        image_rows: list[npt.NDArray[np.float64]] = []
        text_rows: list[npt.NDArray[np.float64]] = []
        encode_image = getattr(self._model, "encode_image")  # noqa: B009 - checked callable
        encode_text = getattr(self._model, "encode_text")  # noqa: B009 - checked callable
        n_images = 0 if images is None else images.shape[0]
        with self._lock:
            for start in range(0, n_images, self._max_batch):
                assert images is not None
                chunk = images[start : start + self._max_batch]
                out = run_model(encode_image, self._input.tensor(chunk), "a batch")
                image_rows.append(_matrix(out, chunk.shape[0], "encode_image"))
            for text in texts:
                ids = encode_checked(self._tokenizer, text, self._max_tokens)
                tokens = torch.tensor([ids], dtype=torch.int64)
                out = run_model(encode_text, tokens, "a text")
                text_rows.append(_matrix(out, 1, "encode_text"))
        dim = (image_rows or text_rows)[0].shape[1]
        empty = np.zeros((0, dim), dtype=np.float64)
        answer = ImageTextAnswer(
            np.concatenate(image_rows) if image_rows else empty,
            np.concatenate(text_rows) if text_rows else empty,
        )
        return answer.validate(n_images, len(texts))
