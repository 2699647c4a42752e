"""Model oracles: the audited model as a black box the verifier queries.

- :mod:`verifier.oracles.base` — :class:`Oracle`, :class:`OracleInfo`, and the
  classifier interface :class:`ClassifierOracle` with :class:`ClassifyAnswer`;
- :mod:`verifier.oracles.embedding`, :mod:`verifier.oracles.language`,
  :mod:`verifier.oracles.image_text` — the image-encoder, language-model and
  image-text interfaces and their strictly validated answers (numpy only);
- :mod:`verifier.oracles.torch_oracle`, :mod:`verifier.oracles.torch_encoder`,
  :mod:`verifier.oracles.torch_lm` — in-process adapters for torch modules (import
  torch; import them explicitly), with :mod:`verifier.oracles.tokenizer` and
  :mod:`verifier.oracles.hf` (Hugging Face ``transformers`` classifiers, causal LMs
  and CLIP-style models, optional), and
  :mod:`verifier.oracles.formats`, which loads a model file in any format ``oracle
  serve`` takes (TorchScript, ``torch.export``, state dict, safetensors, pickle, ONNX);
- :mod:`verifier.oracles.openai_lm` — an OpenAI-compatible completions endpoint;
- :mod:`verifier.oracles.grpc_server` / :mod:`verifier.oracles.grpc_client` — any
  oracle served as, or reached through, ``twinaudit.oracle.v1.Oracle``.
- :mod:`verifier.oracles.oip_oracle` (with :mod:`.oip_address`, :mod:`.oip_tensors`,
  :mod:`.oip_transport`) — a classifier or encoder on an Open Inference Protocol
  (KServe v2) server, REST or gRPC; :mod:`verifier.oracles.dial` reaches whichever
  oracle an address names.
"""

from .base import ClassifierOracle, ClassifyAnswer, Oracle, OracleInfo, check_images
from .embedding import EmbeddingAnswer, EncoderOracle
from .image_text import ImageTextAnswer, ImageTextOracle
from .language import LanguageModelOracle, LogprobAnswer

__all__ = [
    "ClassifierOracle",
    "ClassifyAnswer",
    "EmbeddingAnswer",
    "EncoderOracle",
    "ImageTextAnswer",
    "ImageTextOracle",
    "LanguageModelOracle",
    "LogprobAnswer",
    "Oracle",
    "OracleInfo",
    "check_images",
]
