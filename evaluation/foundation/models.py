"""The three small foundation models the evaluation trains: encoder, language model, CLIP.

Each is what an oracle of :mod:`twinaudit.verifier.oracles` serves as it is:

- :class:`ConvEncoder` — a SimCLR backbone for 28×28 grey images: two convolutions
  with max-pooling and a fully connected layer to a ``dim``-dimensional
  representation; :class:`SimClr` puts the projection head on top for training only
  (the deployed encoder is the backbone, as in SimCLR and the paper §6.1). Served by
  :class:`~twinaudit.practitioner.torch_encoder.TorchEncoderOracle`.
- :class:`ByteGru` — a byte-level causal language model (one GRU layer) over the
  vocabulary of :class:`~twinaudit.practitioner.tokenizer.ByteTokenizer` (bytes and a BOS
  id, 257 ids): token ids (B, T) → next-token logits (B, T, 257). Served by
  :class:`~twinaudit.practitioner.torch_lm.TorchLanguageModelOracle`.
- :class:`DualEncoder` — a CLIP-style model: a :class:`ConvEncoder` image tower and a
  text tower that averages word embeddings and projects them, both into one space
  (``encode_image``, ``encode_text``). Served by
  :class:`~twinaudit.practitioner.torch_encoder.TorchImageTextOracle` with
  :class:`evaluation.foundation.captions.WordTokenizer`.

Inputs are float32 NCHW images in [0, 1] (what the oracles send, unnormalised).
"""

from __future__ import annotations

import torch
from torch import nn

from demo.models import conv_layers

#: Side of the images (Fashion-MNIST).
SIDE = 28
#: Vocabulary of the byte-level language model: 256 byte values and BOS (id 256).
BYTE_VOCABULARY = 257


class ConvEncoder(nn.Module):
    """Conv 3×3 (``width``) → pool → conv 3×3 (2·``width``) → pool → linear to ``dim``."""

    def __init__(self, dim: int = 128, width: int = 16) -> None:
        """Build the layers (1 input channel, 28×28 images)."""
        super().__init__()
        self.features = nn.Sequential(*conv_layers(width), nn.Flatten())
        self.fc = nn.Linear(2 * width * (SIDE // 4) ** 2, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Return the (N, dim) representations of an (N, 1, 28, 28) batch."""
        return torch.relu(self.fc(self.features(x)))


class SimClr(nn.Module):
    """A :class:`ConvEncoder` backbone and the MLP projection head SimCLR trains through."""

    def __init__(self, dim: int = 512, width: int = 16, projection: int = 64) -> None:
        """Build the backbone and a one-hidden-layer head."""
        super().__init__()
        self.encoder = ConvEncoder(dim, width)
        self.head = nn.Sequential(nn.Linear(dim, dim), nn.ReLU(), nn.Linear(dim, projection))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Return the projections the contrastive loss compares."""
        out: torch.Tensor = self.head(self.encoder(x))
        return out


class ByteGru(nn.Module):
    """Byte embeddings → one GRU layer → logits over the 257 ids."""

    def __init__(self, width: int = 256, embedding: int = 64) -> None:
        """Build the layers."""
        super().__init__()
        self.embed = nn.Embedding(BYTE_VOCABULARY, embedding)
        self.rnn = nn.GRU(embedding, width, batch_first=True)
        self.out = nn.Linear(width, BYTE_VOCABULARY)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        """Return next-token logits (B, T, 257) for token ids (B, T)."""
        hidden, _ = self.rnn(self.embed(ids))
        logits: torch.Tensor = self.out(hidden)
        return logits


class DualEncoder(nn.Module):
    """CLIP-style: a convolutional image tower and a bag-of-words text tower, ``dim``-d each."""

    def __init__(self, vocabulary: int, dim: int = 64, width: int = 16, words: int = 64) -> None:
        """Build both towers (``vocabulary`` word ids, id 0 for unknown words)."""
        super().__init__()
        self.image = ConvEncoder(128, width)
        self.image_out = nn.Linear(128, dim)
        self.tokens = nn.Embedding(vocabulary, words)
        self.text = nn.Sequential(nn.Linear(words, words), nn.ReLU(), nn.Linear(words, dim))

    def encode_image(self, x: torch.Tensor) -> torch.Tensor:
        """Return the (N, dim) image embeddings of an (N, 1, 28, 28) batch."""
        out: torch.Tensor = self.image_out(self.image(x))
        return out

    def encode_text(self, ids: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """Return the (B, dim) embeddings of word ids (B, T); ``mask`` marks real words."""
        vectors = self.tokens(ids)
        if mask is None:
            pooled = vectors.mean(dim=1)
        else:
            weights = mask.to(vectors.dtype).unsqueeze(2)
            pooled = (vectors * weights).sum(dim=1) / weights.sum(dim=1).clamp(min=1.0)
        out: torch.Tensor = self.text(pooled)
        return out

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Return the image embeddings (what a plain image query gets)."""
        return self.encode_image(x)
