"""The tiny CNN and its trainer, now public in :mod:`demo.tiny_cnn` (re-exported here).

The tests' ``--arch tests.support.models:TinyCNN`` (and ``:tiny_cnn_16``) load the
same class as ``demo.tiny_cnn:TinyCNN``.
"""

from demo.synthetic import N_CLASSES, SyntheticPairs, synthetic_pairs
from demo.tiny_cnn import TinyCNN, accuracy, tiny_cnn_16, train_classifier

__all__ = [
    "N_CLASSES",
    "SyntheticPairs",
    "TinyCNN",
    "accuracy",
    "synthetic_pairs",
    "tiny_cnn_16",
    "train_classifier",
]
