"""Image-text (CLIP-style) oracles (capability ``embed-image-text``) and their answers.

An :class:`ImageTextOracle` embeds a batch of float32 (N, H, W, C) images in [0, 1]
with its image encoder and a batch of M texts with its text encoder, into one shared
space of dimension D; either batch may be empty (no images: ``None``), not both. The
answer, an :class:`ImageTextAnswer`, holds a float64 (N, D) and a float64 (M, D)
matrix; :meth:`ImageTextAnswer.validate` checks both as
:func:`~twinaudit.protocol.oracles.embedding.check_embeddings` does, and that they share D.
numpy only.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass

from twinaudit.protocol.errors import OracleError

from .base import F32Images, Oracle
from .embedding import F64Matrix, check_embeddings


@dataclass(frozen=True)
class ImageTextAnswer:
    """The answer to one ``embed_image_text`` call: image and text embeddings, in order."""

    images: F64Matrix
    texts: F64Matrix

    def validate(self, n_images: int, n_texts: int) -> ImageTextAnswer:
        """Check both matrices and that they have one dimension; return the answer."""
        check_embeddings(self.images, n_images, "image embeddings")
        check_embeddings(self.texts, n_texts, "text embeddings")
        if self.images.shape[1] != self.texts.shape[1]:
            raise OracleError(
                "invalid-answer",
                f"image embeddings have dimension {self.images.shape[1]}, "
                f"text embeddings {self.texts.shape[1]}",
            )
        return self


class ImageTextOracle(Oracle):
    """A black-box image-text model the verifier may query (``embed-image-text``)."""

    @abc.abstractmethod
    def embed_image_text(self, images: F32Images | None, texts: list[str]) -> ImageTextAnswer:
        """Embed float32 (N, H, W, C) images in [0, 1] and M texts into one space.

        ``images`` may be None and ``texts`` empty, not both; the answer then has an
        empty (0, D) matrix for that kind.

        Raises :class:`~twinaudit.protocol.errors.InputError` for a malformed batch and
        :class:`~twinaudit.protocol.errors.OracleError` when the model cannot answer.
        """
