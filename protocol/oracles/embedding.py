"""Image-encoder oracles (capability ``embed-images``) and their answers.

An :class:`EncoderOracle` maps float32 (N, H, W, C) images in [0, 1] to one
embedding each, answered as an :class:`EmbeddingAnswer`: a float64 (N, D) matrix.
Answers come from a party the arbiter does not trust: :meth:`EmbeddingAnswer.validate`
checks the shape, the dimension (``1..MAX_EMBEDDING_DIM``) and every entry (finite,
at most :data:`MAX_EMBEDDING_ABS` in absolute value), and
reports every defect as ``OracleError("invalid-answer")``. In a transcript an
embedding matrix is recorded as ``{"dim": D, "values": <N·D float64 little-endian>}``
(:meth:`EmbeddingAnswer.to_value`), exact and compact. numpy only.
"""

from __future__ import annotations

import abc
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

import numpy as np
import numpy.typing as npt

from twinaudit.protocol.encoding import Value
from twinaudit.protocol.errors import OracleError

from .base import F32Images, Oracle

#: Largest embedding dimension accepted.
MAX_EMBEDDING_DIM: Final = 8192
#: Largest absolute value of an entry (2^64), so that no cosine can overflow.
MAX_EMBEDDING_ABS: Final = float(1 << 64)

F64Matrix = npt.NDArray[np.float64]


def _invalid(message: str) -> OracleError:
    return OracleError("invalid-answer", message)


def check_embeddings(values: object, rows: int, what: str = "embeddings") -> F64Matrix:
    """Return ``values`` if it is a valid float64 (rows, D) embedding matrix, else raise.

    ``1 ≤ D ≤ MAX_EMBEDDING_DIM``; every entry finite with ``|x| ≤ MAX_EMBEDDING_ABS``.
    Any defect is ``OracleError("invalid-answer")``.
    """
    if not isinstance(values, np.ndarray) or values.dtype != np.float64 or values.ndim != 2:
        raise _invalid(f"{what} must be a float64 matrix (N, D)")
    if values.shape[0] != rows:
        raise _invalid(f"{what} have {values.shape[0]} rows, expected {rows}")
    if rows == 0 and values.shape[1] == 0:
        raise _invalid(f"{what}: an empty answer still has a dimension")
    if not 1 <= values.shape[1] <= MAX_EMBEDDING_DIM:
        raise _invalid(f"{what} have dimension {values.shape[1]}, not 1..{MAX_EMBEDDING_DIM}")
    if not bool(np.all(np.isfinite(values))):
        raise _invalid(f"{what} contain NaN or infinity")
    if not bool(np.all(np.abs(values) <= MAX_EMBEDDING_ABS)):
        raise _invalid(f"{what} have an entry above {MAX_EMBEDDING_ABS:g} in absolute value")
    return values


def matrix_to_value(values: F64Matrix) -> dict[str, Value]:
    """Return ``{"dim": D, "values": <row-major float64 little-endian bytes>}``."""
    return {"dim": int(values.shape[1]), "values": np.ascontiguousarray(values, "<f8").tobytes()}


def matrix_from_value(value: object, rows: int, what: str = "embeddings") -> F64Matrix:
    """Rebuild and validate a matrix recorded by :func:`matrix_to_value`."""
    if not isinstance(value, dict) or set(value) != {"dim", "values"}:
        raise _invalid(f"recorded {what} are a map with exactly dim and values")
    dim, data = value["dim"], value["values"]
    if not isinstance(dim, int) or isinstance(dim, bool) or not 1 <= dim <= MAX_EMBEDDING_DIM:
        raise _invalid(f"recorded {what} have dimension {dim!r}")
    if not isinstance(data, bytes) or len(data) != 8 * rows * dim:
        raise _invalid(f"recorded {what} are not {rows} x {dim} float64 values")
    matrix = np.frombuffer(data, dtype="<f8").astype(np.float64).reshape(rows, dim)
    return check_embeddings(matrix, rows, what)


@dataclass(frozen=True)
class EmbeddingAnswer:
    """The answer to one ``embed_images`` call: float64 (N, D), row ``n`` for image ``n``."""

    embeddings: F64Matrix

    def __post_init__(self) -> None:
        """Require a float64 matrix (the full checks are in :meth:`validate`)."""
        values = self.embeddings
        if not isinstance(values, np.ndarray) or values.dtype != np.float64 or values.ndim != 2:
            raise _invalid("embeddings must be a float64 matrix (N, D)")

    def __len__(self) -> int:
        """Return the number of images answered."""
        return int(self.embeddings.shape[0])

    @property
    def dim(self) -> int:
        """Return the embedding dimension D."""
        return int(self.embeddings.shape[1])

    def validate(self, n_images: int) -> EmbeddingAnswer:
        """Check the answer for ``n_images`` images (see :func:`check_embeddings`); return it."""
        check_embeddings(self.embeddings, n_images)
        return self

    def to_value(self) -> dict[str, Value]:
        """Return the answer as recorded in a transcript (:func:`matrix_to_value`)."""
        return matrix_to_value(self.embeddings)

    @classmethod
    def from_value(cls, value: object, n_images: int) -> EmbeddingAnswer:
        """Rebuild and validate a recorded answer of ``n_images`` rows."""
        return cls(matrix_from_value(value, n_images))

    @classmethod
    def concatenate(cls, parts: Sequence[EmbeddingAnswer]) -> EmbeddingAnswer:
        """Join the answers of consecutive batches (all of one dimension)."""
        if not parts:
            raise _invalid("no answers to join")
        if len({part.dim for part in parts}) != 1:
            raise _invalid("batches answered embeddings of different dimensions")
        return cls(np.concatenate([part.embeddings for part in parts], axis=0))


class EncoderOracle(Oracle):
    """A black-box image encoder the verifier may query (capability ``embed-images``)."""

    @abc.abstractmethod
    def embed_images(self, images: F32Images) -> EmbeddingAnswer:
        """Embed float32 (N, H, W, C) images in [0, 1]; the answer has N rows.

        Raises :class:`~twinaudit.protocol.errors.InputError` for a malformed batch and
        :class:`~twinaudit.protocol.errors.OracleError` when the model cannot answer.
        """
