"""The audited model as a black box: what an oracle is, and what a classifier may answer.

Every :class:`Oracle` describes itself (:class:`OracleInfo`, recorded in the claim),
listing the queries it answers as capabilities. A :class:`ClassifierOracle`
(capability ``classify``) classifies batches of float32 (N, H, W, C) images in
[0, 1], answering a :class:`ClassifyAnswer`: one probability vector or one label
per image. The other kinds of oracle — image encoders, language models, image-text
models — live in :mod:`.embedding`, :mod:`.language` and :mod:`.image_text`. Answers
come from a party the arbiter does not trust, so they are validated strictly and
every defect is reported as ``OracleError("invalid-answer", ...)``. This module is
numpy only (no torch).
"""

from __future__ import annotations

import abc
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

import numpy as np
import numpy.typing as npt

from twinaudit.protocol.encoding import Value
from twinaudit.protocol.errors import InputError, LimitExceededError, OracleError, ParameterError
from twinaudit.protocol.items import MAX_IMAGE_SIDE, MAX_LABEL

#: What ``Classify`` may answer.
CLASSIFY_OUTPUTS: Final = ("probabilities", "label")
#: Largest ``max_batch`` an oracle may announce.
MAX_ORACLE_BATCH: Final = 4096
#: Largest number of classes (labels are below :data:`twinaudit.protocol.items.MAX_LABEL`).
MAX_CLASSES: Final = MAX_LABEL
#: Most images in one :meth:`ClassifierOracle.classify` call (the client splits it).
MAX_CLASSIFY_IMAGES: Final = 1 << 16
#: Longest model name or digest, in UTF-8 bytes.
MAX_DESCRIPTION_TEXT_BYTES: Final = 256
#: Most capabilities one oracle lists.
MAX_CAPABILITIES: Final = 16
#: A probability vector must sum to 1 within this (exactly rounded sum); no renormalising.
PROBABILITY_SUM_TOLERANCE: Final = 1e-3

#: The keys every Describe map has (spec §10.1).
DESCRIBE_KEYS: Final = frozenset(
    {"model_name", "model_digest", "capabilities", "classify_output", "n_classes", "max_batch"}
)
#: The keys a Describe map has when the oracle reports them (spec §10.1): what the model is,
#: and the key that signs the oracle's answers (spec §10.8).
DESCRIBE_MODEL_KEYS: Final = frozenset({"framework", "model_format", "input_shape", "answer_key"})
#: Bytes of a raw Ed25519 public key (the Describe map's ``answer_key``).
ANSWER_KEY_BYTES: Final = 32

_CAPABILITY = re.compile(r"[a-z][a-z0-9-]{0,63}")

F32Images = npt.NDArray[np.float32]


def _invalid(message: str) -> OracleError:
    return OracleError("invalid-answer", message)


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


@dataclass(frozen=True)
class OracleInfo:
    """An oracle's self-description (the ``Describe`` answer, spec draft §10.1).

    A description that breaks these rules is an invalid answer: ``model_name`` and
    ``model_digest`` are text of 1..256 UTF-8 bytes; ``capabilities`` are distinct
    lower-case names (``classify``, ``embed-images``, ``token-logprobs``,
    ``embed-image-text``, or others this verifier ignores; at most 16); for an oracle
    offering ``classify``, ``classify_output`` is ``"probabilities"`` or ``"label"``
    and ``n_classes`` is in ``2..MAX_CLASSES``, for any other both are empty (``""``
    and 0, what the proto's unset fields read as); ``max_batch`` is in
    ``1..MAX_ORACLE_BATCH``.

    Three optional fields say what the model is, as the oracle reports it (spec §10.1;
    the arbiter cannot check them): ``framework`` (text of 1..256 bytes, such as
    ``"torch 2.13.0+cpu"`` or ``"onnxruntime 1.31.1"``), ``model_format`` (a
    lower-case name, such as ``"torchscript"``, ``"torch-export"``, ``"state-dict"``,
    ``"safetensors"``, ``"pickle"`` or ``"onnx"``) and ``input_shape`` (the image
    shape ``(H, W, C)`` the model takes, H and W in 1..4096, C 1 or 3). An unreported
    field is empty (``""``, ``()``) and absent from the Describe map.

    ``answer_key`` is the raw 32-byte Ed25519 public key with which the oracle signs
    every answer batch (spec §10.8), or empty for an oracle whose answers are unsigned.
    """

    model_name: str
    model_digest: str
    capabilities: tuple[str, ...]
    classify_output: str
    n_classes: int
    max_batch: int
    framework: str = ""
    model_format: str = ""
    input_shape: tuple[int, ...] = ()
    answer_key: bytes = b""

    def __post_init__(self) -> None:
        """Validate every field (``OracleError("invalid-answer")``)."""
        for name in ("model_name", "model_digest"):
            text = getattr(self, name)
            if not isinstance(text, str) or not 1 <= len(text.encode()) <= (
                MAX_DESCRIPTION_TEXT_BYTES
            ):
                raise _invalid(f"{name} must be 1..{MAX_DESCRIPTION_TEXT_BYTES} bytes of text")
        caps = self.capabilities
        if not isinstance(caps, tuple) or len(caps) > MAX_CAPABILITIES:
            raise _invalid(f"capabilities must be a tuple of at most {MAX_CAPABILITIES} names")
        if not all(isinstance(c, str) and _CAPABILITY.fullmatch(c) for c in caps) or len(
            set(caps)
        ) != len(caps):
            raise _invalid(f"capabilities {caps!r} are not distinct lower-case names")
        if "classify" in caps:
            if not isinstance(self.classify_output, str) or (
                self.classify_output not in CLASSIFY_OUTPUTS
            ):
                raise _invalid(
                    f"classify_output {self.classify_output!r} not in {CLASSIFY_OUTPUTS}"
                )
            if not _is_int(self.n_classes) or not 2 <= self.n_classes <= MAX_CLASSES:
                raise _invalid(f"n_classes {self.n_classes!r} outside 2..{MAX_CLASSES}")
        elif self.classify_output != "" or not _is_int(self.n_classes) or self.n_classes != 0:
            raise _invalid("an oracle without 'classify' has no classify_output and no n_classes")
        if not _is_int(self.max_batch) or not 1 <= self.max_batch <= MAX_ORACLE_BATCH:
            raise _invalid(f"max_batch {self.max_batch!r} outside 1..{MAX_ORACLE_BATCH}")
        self._check_model_fields()

    def _check_model_fields(self) -> None:
        """Validate the optional ``framework``, ``model_format`` and ``input_shape``."""
        if not isinstance(self.framework, str) or (
            len(self.framework.encode()) > MAX_DESCRIPTION_TEXT_BYTES
        ):
            raise _invalid(f"framework must be at most {MAX_DESCRIPTION_TEXT_BYTES} bytes of text")
        if not isinstance(self.model_format, str) or (
            self.model_format and not _CAPABILITY.fullmatch(self.model_format)
        ):
            raise _invalid(f"model_format {self.model_format!r} is not a lower-case name")
        shape = self.input_shape
        if not isinstance(shape, tuple) or not all(_is_int(d) for d in shape):
            raise _invalid("input_shape must be a tuple of integers")
        if shape and not (
            len(shape) == 3
            and 1 <= shape[0] <= MAX_IMAGE_SIDE
            and 1 <= shape[1] <= MAX_IMAGE_SIDE
            and shape[2] in (1, 3)
        ):
            raise _invalid(
                f"input_shape {shape!r} is not (H, W, C) with sides in 1..{MAX_IMAGE_SIDE}"
                " and C 1 or 3"
            )
        if not isinstance(self.answer_key, bytes) or len(self.answer_key) not in (
            0,
            ANSWER_KEY_BYTES,
        ):
            raise _invalid(f"answer_key must be a raw {ANSWER_KEY_BYTES}-byte Ed25519 public key")

    def check_offers(self, capability: str) -> None:
        """Raise ``ParameterError`` unless the oracle offers ``capability`` (a claim needs it).

        Unlike :meth:`require` (an oracle's answer that breaks its description), the
        fault here is the claim's: it names a score this oracle cannot serve.
        """
        if capability not in self.capabilities:
            raise ParameterError(f"oracle {self.model_name!r} does not offer {capability!r}")

    def to_value(self) -> dict[str, Value]:
        """Return the canonical Describe map (capabilities sorted; empty model fields left out)."""
        value: dict[str, Value] = {
            "model_name": self.model_name,
            "model_digest": self.model_digest,
            "capabilities": list(sorted(self.capabilities)),
            "classify_output": self.classify_output,
            "n_classes": self.n_classes,
            "max_batch": self.max_batch,
        }
        if self.framework:
            value["framework"] = self.framework
        if self.model_format:
            value["model_format"] = self.model_format
        if self.input_shape:
            value["input_shape"] = list(self.input_shape)
        if self.answer_key:
            value["answer_key"] = self.answer_key
        return value

    @classmethod
    def from_value(cls, value: object) -> OracleInfo:
        """Parse a Describe map strictly, raising ``invalid-answer``.

        The map has exactly :data:`DESCRIBE_KEYS` and any of
        :data:`DESCRIBE_MODEL_KEYS`; an optional key that is present is not empty
        (:meth:`to_value` leaves empty ones out, so each description has one map).
        """
        if (
            not isinstance(value, dict)
            or not set(value) >= DESCRIBE_KEYS
            or not set(value) <= DESCRIBE_KEYS | DESCRIBE_MODEL_KEYS
        ):
            raise _invalid(
                f"a description is a map with exactly the keys {sorted(DESCRIBE_KEYS)} "
                f"and optionally {sorted(DESCRIBE_MODEL_KEYS)}"
            )
        caps = value["capabilities"]
        if not isinstance(caps, list):
            raise _invalid("capabilities must be a list")
        if not all(isinstance(c, str) for c in caps) or caps != sorted(caps):
            raise _invalid("a Describe map lists its capabilities sorted (spec §10.1)")
        shape = value.get("input_shape", [])
        if not isinstance(shape, list):
            raise _invalid("input_shape must be a list")
        for key in DESCRIBE_MODEL_KEYS & set(value):
            if value[key] in ("", [], b""):
                raise _invalid(f"{key} is present but empty (an unreported field is left out)")
        return cls(
            value["model_name"],
            value["model_digest"],
            tuple(caps),
            value["classify_output"],
            value["n_classes"],
            value["max_batch"],
            value.get("framework", ""),
            value.get("model_format", ""),
            tuple(shape),
            value.get("answer_key", b""),
        )

    def require_classify(self) -> None:
        """Raise ``invalid-answer`` unless the oracle lists the ``classify`` capability."""
        self.require("classify")

    def require(self, capability: str) -> None:
        """Raise ``invalid-answer`` unless the oracle lists ``capability``."""
        if capability not in self.capabilities:
            raise _invalid(f"oracle {self.model_name!r} does not offer {capability!r}")


@dataclass(frozen=True)
class ClassifyAnswer:
    """The answer to one ``classify`` call: exactly one of ``probabilities``, ``labels``.

    ``probabilities`` is float64 (N, C), row ``n`` the model's probability vector for
    image ``n``; ``labels`` is int64 (N,), the top class of each image. The answer is
    only trusted after :meth:`validate`.
    """

    probabilities: npt.NDArray[np.float64] | None = None
    labels: npt.NDArray[np.int64] | None = None

    def __post_init__(self) -> None:
        """Require exactly one of the two fields, as a numpy array of the right dtype."""
        if (self.probabilities is None) == (self.labels is None):
            raise _invalid("an answer carries exactly one of probabilities and labels")
        if self.probabilities is not None and not (
            isinstance(self.probabilities, np.ndarray) and self.probabilities.dtype == np.float64
        ):
            raise _invalid("probabilities must be a float64 array")
        if self.labels is not None and not (
            isinstance(self.labels, np.ndarray) and self.labels.dtype == np.int64
        ):
            raise _invalid("labels must be an int64 array")

    @property
    def output(self) -> str:
        """Return ``"probabilities"`` or ``"label"``."""
        return "probabilities" if self.probabilities is not None else "label"

    def __len__(self) -> int:
        """Return the number of images answered."""
        data = self.probabilities if self.probabilities is not None else self.labels
        assert data is not None
        return int(data.shape[0]) if data.ndim >= 1 else 0

    def validate(self, n_images: int, n_classes: int) -> ClassifyAnswer:
        """Check the answer for ``n_images`` images of an ``n_classes`` model; return it.

        Probabilities: shape (n_images, n_classes), every entry finite and in [0, 1],
        every row's exactly rounded sum (``math.fsum``) within
        :data:`PROBABILITY_SUM_TOLERANCE` of 1. They are *not* renormalised: the
        score uses the answer as recorded. Labels: shape (n_images,), each in
        ``0..n_classes-1``. Any defect is ``OracleError("invalid-answer")``.
        """
        if self.probabilities is not None:
            probs = self.probabilities
            if probs.shape != (n_images, n_classes):
                raise _invalid(
                    f"probabilities have shape {probs.shape}, expected {(n_images, n_classes)}"
                )
            if not bool(np.all(np.isfinite(probs))):
                raise _invalid("probabilities contain NaN or infinity")
            if not bool(np.all((probs >= 0.0) & (probs <= 1.0))):
                raise _invalid("probabilities outside [0, 1]")
            for row, vector in enumerate(probs):
                total = math.fsum(vector.tolist())
                if abs(total - 1.0) > PROBABILITY_SUM_TOLERANCE:
                    raise _invalid(f"probability vector {row} sums to {total!r}, not 1")
        else:
            labels = self.labels
            assert labels is not None
            if labels.shape != (n_images,):
                raise _invalid(f"labels have shape {labels.shape}, expected {(n_images,)}")
            # min and max rather than a mask: no array of the answer's size is made.
            if labels.size and not 0 <= int(labels.min()) <= int(labels.max()) < n_classes:
                raise _invalid(f"labels outside 0..{n_classes - 1}")
        return self

    def to_value(self) -> list[Value]:
        """Return the answer as recorded in a transcript: rows of floats, or ints."""
        if self.probabilities is not None:
            return [[float(x) for x in row] for row in self.probabilities]
        assert self.labels is not None
        return [int(x) for x in self.labels]

    @classmethod
    def from_value(cls, value: object, output: str) -> ClassifyAnswer:
        """Rebuild a recorded answer (:meth:`to_value`) of the given ``output`` kind."""
        if not isinstance(value, list):
            raise _invalid("a recorded answer is a list")
        if output == "probabilities":
            if not all(
                isinstance(row, list) and all(isinstance(x, float) for x in row) for row in value
            ):
                raise _invalid("recorded probabilities must be lists of floats")
            width = len(value[0]) if value else 0
            if any(len(row) != width for row in value):
                raise _invalid("recorded probability rows differ in length")
            return cls(probabilities=np.array(value, dtype=np.float64).reshape(len(value), width))
        if output == "label":
            if not all(_is_int(x) and 0 <= x < MAX_CLASSES for x in value):
                raise _invalid(f"recorded labels must be integers in 0..{MAX_CLASSES - 1}")
            return cls(labels=np.array(value, dtype=np.int64).reshape(len(value)))
        raise _invalid(f"unknown output kind {output!r}")

    @classmethod
    def concatenate(cls, parts: Sequence[ClassifyAnswer]) -> ClassifyAnswer:
        """Join the answers of consecutive batches (all of the same kind)."""
        if not parts:
            raise _invalid("no answers to join")
        kinds = {part.output for part in parts}
        if len(kinds) != 1:
            raise _invalid("batches answered in different output kinds")
        if parts[0].probabilities is not None:
            rows = [p.probabilities for p in parts if p.probabilities is not None]
            return cls(probabilities=np.concatenate(rows, axis=0))
        labels = [p.labels for p in parts if p.labels is not None]
        return cls(labels=np.concatenate(labels, axis=0))


def check_images(images: object) -> F32Images:
    """Validate a classify batch: float32 (N, H, W, C), C in {1, 3}, finite, in [0, 1].

    ``1 ≤ N ≤ MAX_CLASSIFY_IMAGES`` and ``1 ≤ H, W ≤ MAX_IMAGE_SIDE``. Raises
    :class:`~twinaudit.protocol.errors.InputError` (``LimitExceededError`` for too many images).
    """
    if not isinstance(images, np.ndarray) or images.dtype != np.float32 or images.ndim != 4:
        raise InputError("images must be a float32 array of shape (N, H, W, C)")
    n, height, width, channels = images.shape
    if n < 1:
        raise InputError("a classify batch needs at least one image")
    if n > MAX_CLASSIFY_IMAGES:
        raise LimitExceededError("images per classify call", n, MAX_CLASSIFY_IMAGES)
    if not (1 <= height <= MAX_IMAGE_SIDE and 1 <= width <= MAX_IMAGE_SIDE and channels in (1, 3)):
        shape = images.shape[1:]
        raise InputError(f"image shape {shape} outside 1..{MAX_IMAGE_SIDE} x C in {{1, 3}}")
    if not bool(np.all((images >= 0.0) & (images <= 1.0))):  # also rejects NaN
        raise InputError("image intensities must be finite and in [0, 1]")
    return images


class Oracle(abc.ABC):
    """A black-box model the verifier may query; what it answers is in its capabilities."""

    @property
    @abc.abstractmethod
    def info(self) -> OracleInfo:
        """Return the oracle's self-description."""

    def describe(self) -> dict[str, Value]:
        """Return the canonical Describe map recorded in the claim (spec §10.1)."""
        return self.info.to_value()

    def queries_per_request(self, shape: tuple[int, int, int], capability: str) -> int:
        """Return how many image queries of ``shape`` one request for ``capability`` holds.

        The claim cuts a window's queries into requests of at most this many (spec
        §10.2 step 5): the description's ``max_batch`` here; a client whose protocol
        caps a request's bytes says less (raising ``limit-exceeded`` when not even one
        query fits).
        """
        return self.info.max_batch


class ClassifierOracle(Oracle):
    """A black-box image classifier the verifier may query (capability ``classify``)."""

    @abc.abstractmethod
    def classify(self, images: F32Images) -> ClassifyAnswer:
        """Classify float32 (N, H, W, C) images in [0, 1]; the answer has N rows.

        Raises :class:`~twinaudit.protocol.errors.InputError` for a malformed batch and
        :class:`~twinaudit.protocol.errors.OracleError` when the model cannot answer.
        """
