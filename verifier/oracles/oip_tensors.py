"""Open Inference Protocol tensors: from a model's metadata to the verifier's queries.

An OIP model declares its input and output tensors in its metadata (name, datatype,
shape with ``-1`` for a free dimension). :func:`plan_model` reads that metadata with
the address's options (:class:`~twinaudit.verifier.oracles.oip_address.OipOptions`) into an
:class:`OipPlan`: which input and output tensor, the input's layout and image shape,
its fixed batch if it has one, what the output holds and how many classes, and the
oracle's description (:class:`~twinaudit.protocol.oracles.base.OracleInfo`). Nothing is guessed
where the metadata is silent or ambiguous: the plan is refused with a
:class:`~twinaudit.protocol.errors.ParameterError` naming the option that would settle it.

:meth:`OipPlan.encode` turns a batch of float32 (N, H, W, C) images in [0, 1] into
the input tensor (normalised, in the model's layout and datatype, padded to a fixed
batch with blank images); :meth:`OipPlan.classify_answer` and
:meth:`OipPlan.embedding_answer` turn the output tensor into the verifier's answers,
strictly: a wrong name, datatype, shape or count, and any value the answer types
refuse, is ``OracleError("invalid-answer")``. Logits become probabilities by a softmax
in binary64. numpy only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from twinaudit.protocol.errors import InputError, OracleError, ParameterError
from twinaudit.protocol.oracles.base import (
    MAX_CLASSES,
    MAX_ORACLE_BATCH,
    ClassifyAnswer,
    F32Images,
    OracleInfo,
)
from twinaudit.protocol.oracles.embedding import MAX_EMBEDDING_DIM, EmbeddingAnswer

from .oip_address import DEFAULT_MAX_BATCH, KINDS, OipAddress

#: Numpy dtypes (little-endian) of the OIP datatypes this client reads or writes.
DTYPES: Final = {
    "BOOL": np.dtype("?"),
    "UINT8": np.dtype("<u1"),
    "UINT16": np.dtype("<u2"),
    "UINT32": np.dtype("<u4"),
    "UINT64": np.dtype("<u8"),
    "INT8": np.dtype("<i1"),
    "INT16": np.dtype("<i2"),
    "INT32": np.dtype("<i4"),
    "INT64": np.dtype("<i8"),
    "FP16": np.dtype("<f2"),
    "FP32": np.dtype("<f4"),
    "FP64": np.dtype("<f8"),
}
#: Input datatypes images can be sent as (UINT8: the intensities 0..255).
INPUT_TYPES: Final = ("FP32", "FP64", "FP16", "UINT8")
FLOAT_TYPES: Final = ("FP16", "FP32", "FP64")
INT_TYPES: Final = ("UINT8", "UINT16", "UINT32", "UINT64", "INT8", "INT16", "INT32", "INT64")
#: Most dimensions of a tensor, and most tensors in a model's metadata.
MAX_RANK: Final = 8
MAX_TENSORS: Final = 64
#: Longest tensor or model name, platform or server text read from a server (bytes).
MAX_META_TEXT: Final = 256
#: The model digest recorded when the address gives none: none can be had remotely.
UNVERIFIED_DIGEST: Final = "unverified: remote OIP endpoint"


def _invalid(message: str) -> OracleError:
    return OracleError("invalid-answer", message)


@dataclass(frozen=True)
class TensorMeta:
    """One tensor of a model's metadata: name, datatype and shape (``-1``: any size)."""

    name: str
    datatype: str
    shape: tuple[int, ...]


@dataclass(frozen=True)
class ModelMeta:
    """A model's metadata (OIP ``GET /v2/models/NAME``, gRPC ``ModelMetadata``)."""

    name: str
    versions: tuple[str, ...]
    platform: str
    inputs: tuple[TensorMeta, ...]
    outputs: tuple[TensorMeta, ...]


@dataclass(frozen=True)
class Tensor:
    """A tensor on the wire: name, datatype, shape and its elements (flat, row-major)."""

    name: str
    datatype: str
    shape: tuple[int, ...]
    data: npt.NDArray[Any]


def _text(value: object, what: str, *, empty: bool = True) -> str:
    if (
        not isinstance(value, str)
        or len(value.encode()) > MAX_META_TEXT
        or (not empty and not value)
    ):
        raise _invalid(f"{what} is not text of {0 if empty else 1}..{MAX_META_TEXT} bytes")
    return value


def check_shape(value: object, what: str, *, free: bool) -> tuple[int, ...]:
    """Return a tensor shape: at most MAX_RANK integers ≥ 0 (or ``-1`` where ``free``)."""
    if not isinstance(value, list | tuple) or len(value) > MAX_RANK:
        raise _invalid(f"{what} shape is not a list of at most {MAX_RANK} integers")
    low = -1 if free else 0
    shape = []
    for dim in value:
        if isinstance(dim, bool) or not isinstance(dim, int) or not low <= dim < (1 << 40):
            raise _invalid(f"{what} shape {list(value)!r} has a dimension out of range")
        shape.append(int(dim))
    return tuple(shape)


def tensor_meta(name: object, datatype: object, shape: object, what: str) -> TensorMeta:
    """Return a checked :class:`TensorMeta` (from JSON or protobuf fields)."""
    return TensorMeta(
        _text(name, f"{what} name", empty=False),
        _text(datatype, f"{what} datatype", empty=False),
        check_shape(shape, what, free=True),
    )


def model_meta(
    name: object,
    versions: object,
    platform: object,
    inputs: list[TensorMeta],
    outputs: list[TensorMeta],
) -> ModelMeta:
    """Return checked model metadata (at most :data:`MAX_TENSORS` inputs and outputs)."""
    if not isinstance(versions, list | tuple) or len(versions) > MAX_TENSORS:
        raise _invalid("the model's versions are not a short list")
    if len(inputs) > MAX_TENSORS or len(outputs) > MAX_TENSORS:
        raise _invalid(f"the model has more than {MAX_TENSORS} inputs or outputs")
    return ModelMeta(
        _text(name, "the model name", empty=False),
        tuple(_text(v, "a model version") for v in versions),
        _text(platform, "the model platform"),
        tuple(inputs),
        tuple(outputs),
    )


def model_meta_from_json(value: object) -> ModelMeta:
    """Read the REST metadata object ``{"name", "versions"?, "platform", "inputs", "outputs"}``."""
    if not isinstance(value, dict):
        raise _invalid("the model metadata is not a JSON object")

    def tensors(key: str) -> list[TensorMeta]:
        items = value.get(key, [])
        if not isinstance(items, list) or len(items) > MAX_TENSORS:
            raise _invalid(f"the model metadata's {key} are not a list")
        out = []
        for item in items:
            if not isinstance(item, dict):
                raise _invalid(f"an entry of the model metadata's {key} is not an object")
            out.append(
                tensor_meta(item.get("name"), item.get("datatype"), item.get("shape"), key[:-1])
            )
        return out

    return model_meta(
        value.get("name"),
        value.get("versions", []),
        value.get("platform", ""),
        tensors("inputs"),
        tensors("outputs"),
    )


def _pick(tensors: tuple[TensorMeta, ...], wanted: str | None, what: str) -> TensorMeta:
    names = [t.name for t in tensors]
    if wanted is not None:
        for tensor in tensors:
            if tensor.name == wanted:
                return tensor
        raise ParameterError(f"the model has no {what} tensor {wanted!r} (it has {names})")
    if not tensors:
        raise ParameterError(
            f"the model's metadata declares no {what} tensor: the OIP oracle maps tensors "
            "from the metadata, so the server must declare them"
        )
    if len(tensors) > 1:
        raise ParameterError(f"the model has {what} tensors {names}: name one with {what}=NAME")
    return tensors[0]


def _layout(shape: tuple[int, ...], given: str | None) -> str:
    """Return the input layout: the one given, else the only one the shape fits."""
    if len(shape) == 2:
        fits = ["flat"]
    elif len(shape) == 4:
        fits = [
            name
            for name, channels in (("nhwc", shape[3]), ("nchw", shape[1]))
            if channels in (-1, 1, 3)
        ]
    else:
        raise ParameterError(
            f"the model's input shape {list(shape)} is neither images with a batch dimension "
            "(N, H, W, C) or (N, C, H, W) nor flat (N, D)"
        )
    if given is not None:
        if given not in fits:
            raise ParameterError(f"layout={given} does not fit the input shape {list(shape)}")
        return given
    if len(fits) != 1:
        raise ParameterError(
            f"the input shape {list(shape)} fits layouts {fits or ['none']}: name one with layout="
        )
    return fits[0]


def _image_pattern(
    shape: tuple[int, ...], layout: str, given: tuple[int, int, int] | None
) -> tuple[int, int, int]:
    """Return the image shape (H, W, C) the input takes, ``-1`` where any size will do."""
    if layout == "flat":
        if given is None:
            raise ParameterError(
                f"a flat input {list(shape)} does not say the image shape: add shape=H,W,C"
            )
        if shape[1] not in (-1, given[0] * given[1] * given[2]):
            raise ParameterError(f"shape={given} does not have the input's {shape[1]} values")
        return given
    dims = shape[1:] if layout == "nhwc" else (shape[2], shape[3], shape[1])
    pattern = (int(dims[0]), int(dims[1]), int(dims[2]))
    if given is not None:
        if any(d not in (-1, g) for d, g in zip(pattern, given, strict=True)):
            raise ParameterError(f"shape={given} does not fit the input shape {list(shape)}")
        return given
    if pattern[2] not in (-1, 1, 3) or 0 in pattern:
        raise ParameterError(f"the input shape {list(shape)} does not take images")
    return pattern


@dataclass(frozen=True)
class OipPlan:
    """How one OIP model is queried, and what it answers (see the module)."""

    model: str
    version: str
    input: TensorMeta
    output: TensorMeta
    layout: str
    #: (H, W, C) of the images the input takes; ``-1`` where any size will do.
    image: tuple[int, int, int]
    #: The input's fixed batch size, or 0 when it is free.
    fixed_batch: int
    #: ``probabilities``, ``logits``, ``labels`` or ``embedding``.
    answers: str
    n_classes: int
    mean: npt.NDArray[np.float32] | None
    std: npt.NDArray[np.float32] | None
    info: OracleInfo

    @property
    def max_batch(self) -> int:
        """Return the most images of one request."""
        return self.info.max_batch

    def answer_values(self, rows: int) -> int:
        """Return the most numbers the answer to a request of ``rows`` images may hold."""
        if self.answers == "labels":
            width = 1
        elif self.answers == "embedding":
            declared = self.output.shape[1] if len(self.output.shape) == 2 else -1
            width = declared if declared > 0 else MAX_EMBEDDING_DIM
        else:
            width = self.n_classes
        return rows * width

    def check_images(self, images: F32Images) -> None:
        """Refuse images whose shape the model's input does not take (``InputError``)."""
        shape = tuple(int(d) for d in images.shape[1:])
        if any(p not in (-1, d) for p, d in zip(self.image, shape, strict=True)):
            raise InputError(f"the model takes images of shape {self.image}, not {shape}")
        if self.mean is not None and self.mean.size not in (1, shape[2]):
            raise InputError(f"normalisation has {self.mean.size} channels, images {shape[2]}")

    def encode(self, images: F32Images) -> Tensor:
        """Return the input tensor of a batch (at most ``max_batch`` checked images)."""
        n = images.shape[0]
        x: npt.NDArray[Any] = images
        if self.mean is not None and self.std is not None:
            x = ((x - self.mean) / self.std).astype(np.float32)
        if self.fixed_batch and n < self.fixed_batch:
            pad = np.zeros((self.fixed_batch - n, *x.shape[1:]), dtype=x.dtype)
            x = np.concatenate([x, pad])
        if self.layout == "nchw":
            x = x.transpose(0, 3, 1, 2)
        elif self.layout == "flat":
            x = x.reshape(x.shape[0], -1)
        if self.input.datatype == "UINT8":
            x = np.rint(x * np.float32(255.0))
        data = np.ascontiguousarray(x, dtype=DTYPES[self.input.datatype])
        return Tensor(self.input.name, self.input.datatype, tuple(data.shape), data.reshape(-1))

    def _matrix(self, tensor: Tensor, n: int, width: int | None, kinds: tuple[str, ...]) -> Any:
        """Return the output's first ``n`` rows as float64 (rows, width) or int64 (rows,)."""
        if tensor.name != self.output.name:
            raise _invalid(f"the model answered tensor {tensor.name!r}, not {self.output.name!r}")
        if tensor.datatype not in kinds:
            raise _invalid(f"output {tensor.name!r} is {tensor.datatype}, expected one of {kinds}")
        sent = max(n, self.fixed_batch)
        shape = tensor.shape
        count = int(np.prod(shape)) if shape else 1
        if count != tensor.data.size:
            raise _invalid(
                f"output shape {list(shape)} does not hold its {tensor.data.size} values"
            )
        if width is None:  # labels: (N,) or (N, 1)
            if shape not in ((sent,), (sent, 1)):
                raise _invalid(f"labels have shape {list(shape)}, expected [{sent}] or [{sent}, 1]")
            return tensor.data.reshape(sent)[:n]
        if len(shape) != 2 or shape[0] != sent or (width > 0 and shape[1] != width):
            expected = f"[{sent}, {width if width > 0 else 'D'}]"
            raise _invalid(f"output {tensor.name!r} has shape {list(shape)}, expected {expected}")
        return tensor.data.reshape(shape)[:n]

    def classify_answer(self, tensor: Tensor, n: int) -> ClassifyAnswer:
        """Return the validated answer for ``n`` images from the output tensor."""
        if self.answers == "labels":
            labels = self._matrix(tensor, n, None, (*INT_TYPES, *FLOAT_TYPES))
            if tensor.datatype in FLOAT_TYPES:
                values = labels.astype(np.float64)
                if not bool(np.all(np.isfinite(values) & (values == np.rint(values)))):
                    raise _invalid("labels are not whole numbers")
                labels = values
            if not bool(np.all((labels >= 0) & (labels < self.n_classes))):
                raise _invalid(f"labels outside 0..{self.n_classes - 1}")
            answer = ClassifyAnswer(labels=np.asarray(labels, dtype=np.int64).reshape(n))
        else:
            values = self._matrix(tensor, n, self.n_classes, FLOAT_TYPES).astype(np.float64)
            if self.answers == "logits":
                values = softmax64(values)
            elif not bool(np.all(np.isfinite(values))) or not np.allclose(
                values.sum(axis=1), 1.0, rtol=0.0, atol=1e-3
            ):
                raise _invalid(
                    "the output is not probability vectors (if the model answers logits, add "
                    "outputs=logits to the oracle address)"
                )
            answer = ClassifyAnswer(probabilities=np.ascontiguousarray(values))
        return answer.validate(n, self.n_classes)

    def embedding_answer(self, tensor: Tensor, n: int) -> EmbeddingAnswer:
        """Return the validated embeddings of ``n`` images from the output tensor."""
        width = self.output.shape[1] if len(self.output.shape) == 2 else -1
        values = self._matrix(tensor, n, width, FLOAT_TYPES).astype(np.float64)
        return EmbeddingAnswer(np.ascontiguousarray(values)).validate(n)


def softmax64(logits: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """Return the row-wise softmax of finite logits, in binary64 (non-finite: invalid)."""
    if not bool(np.all(np.isfinite(logits))):
        raise _invalid("logits contain NaN or infinity")
    shifted = np.exp(logits - logits.max(axis=1, keepdims=True))
    result: npt.NDArray[np.float64] = shifted / shifted.sum(axis=1, keepdims=True)
    return result


def _classes(output: TensorMeta, answers: str, given: int | None) -> int:
    """Return the number of classes of a classifier's output."""
    shape = output.shape
    if answers == "labels":
        if len(shape) not in (1, 2) or (len(shape) == 2 and shape[1] not in (-1, 1)):
            raise ParameterError(f"a label output has shape [N] or [N, 1], not {list(shape)}")
        if given is None:
            raise ParameterError("a label output does not say how many classes: add classes=N")
        return given
    if len(shape) != 2:
        raise ParameterError(f"a classifier's output has shape [N, classes], not {list(shape)}")
    if shape[1] == -1:
        if given is None:
            raise ParameterError(
                f"the output shape {list(shape)} has no class count: add classes=N"
            )
        return given
    if given is not None and given != shape[1]:
        raise ParameterError(f"classes={given}, where the output has {shape[1]} classes")
    if not 2 <= shape[1] <= MAX_CLASSES:
        raise ParameterError(f"the output has {shape[1]} classes, not 2..{MAX_CLASSES}")
    return int(shape[1])


def _batch(input_shape: tuple[int, ...], output: TensorMeta, given: int | None) -> tuple[int, int]:
    """Return the fixed batch (0 if free) and the most images per request."""
    fixed = input_shape[0] if input_shape[0] != -1 else 0
    if fixed and output.shape and output.shape[0] not in (-1, fixed):
        raise ParameterError(
            f"the input's batch is {fixed} and the output's {output.shape[0]}: they must agree"
        )
    if fixed:
        if not 1 <= fixed <= MAX_ORACLE_BATCH:
            raise ParameterError(
                f"the input's fixed batch {fixed} is outside 1..{MAX_ORACLE_BATCH}"
            )
        if given is not None and given != fixed:
            raise ParameterError(f"max-batch={given}, where the input's batch is fixed at {fixed}")
        return fixed, fixed
    return 0, given or DEFAULT_MAX_BATCH


def plan_model(address: OipAddress, meta: ModelMeta, framework: str = "") -> OipPlan:
    """Read the model's metadata with the address's options into an :class:`OipPlan`.

    ``framework`` is what the server says it is (its name and version, from the server
    metadata), recorded with the model's platform in the description.
    """
    options = address.options
    inp = _pick(meta.inputs, options.input, "input")
    out = _pick(meta.outputs, options.output, "output")
    if inp.datatype not in INPUT_TYPES:
        raise ParameterError(f"input {inp.name!r} is {inp.datatype}; images go as {INPUT_TYPES}")
    if inp.datatype == "UINT8" and options.mean is not None:
        raise ParameterError("a UINT8 input takes the intensities 0..255: no mean= or std=")
    layout = _layout(inp.shape, options.layout)
    image = _image_pattern(inp.shape, layout, options.shape)
    fixed, max_batch = _batch(inp.shape, out, options.max_batch)
    if options.kind == "encoder":
        answers, n_classes = "embedding", 0
        if out.datatype not in FLOAT_TYPES or len(out.shape) != 2:
            raise ParameterError(
                f"an encoder's output is floating [N, D]; {out.name!r} is {out.datatype} "
                f"{list(out.shape)}"
            )
        if out.shape[1] > MAX_EMBEDDING_DIM:
            raise ParameterError(f"embeddings of {out.shape[1]} values, above {MAX_EMBEDDING_DIM}")
    else:
        default = "labels" if out.datatype in INT_TYPES else "probabilities"
        answers = options.outputs or default
        if answers != "labels" and out.datatype not in FLOAT_TYPES:
            raise ParameterError(f"output {out.name!r} is {out.datatype}, not {answers}")
        if answers == "labels" and out.datatype not in (*INT_TYPES, *FLOAT_TYPES):
            raise ParameterError(f"output {out.name!r} is {out.datatype}, not labels")
        n_classes = _classes(out, answers, options.classes)
    version = address.version or (meta.versions[0] if len(meta.versions) == 1 else "")
    platform = f", {meta.platform}" if meta.platform else ""
    try:
        info = OracleInfo(
            model_name=meta.name + (f"/versions/{version}" if version else ""),
            model_digest=options.digest or UNVERIFIED_DIGEST,
            capabilities=(KINDS[options.kind],),
            classify_output=""
            if n_classes == 0
            else ("label" if answers == "labels" else "probabilities"),
            n_classes=n_classes,
            max_batch=max_batch,
            framework=(framework + platform).lstrip(", "),
            input_shape=image if -1 not in image else (),
        )
    except OracleError as exc:
        raise _invalid(f"the model's metadata gives no valid description: {exc}") from None

    def channels(values: tuple[float, ...] | None) -> npt.NDArray[np.float32] | None:
        return None if values is None else np.asarray(values, dtype=np.float32)

    return OipPlan(
        model=address.model,
        version=address.version,
        input=inp,
        output=out,
        layout=layout,
        image=image,
        fixed_batch=fixed,
        answers=answers,
        n_classes=n_classes,
        mean=channels(options.mean),
        std=channels(options.std),
        info=info,
    )
