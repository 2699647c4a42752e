"""The model oracle interfaces: the audited model as a black box (spec §10.1, §10.3).

Both sides implement them: the arbiter's clients (:mod:`twinaudit.verifier.oracles`) and
the practitioner's in-process adapters (:mod:`twinaudit.practitioner`). numpy only.

- :mod:`.base` — :class:`Oracle`, :class:`OracleInfo` (the ``Describe`` map and its
  parser), and the classifier interface :class:`ClassifierOracle` with
  :class:`ClassifyAnswer`;
- :mod:`.embedding`, :mod:`.language`, :mod:`.image_text` — the image-encoder,
  language-model and image-text interfaces and their strictly validated answers;
- :mod:`.model_inputs` — the caps on a model's declared input (one image's side and
  elements), which the arbiter checks on a file it holds and the practitioner's loader
  on every model it loads.
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
