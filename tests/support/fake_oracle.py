"""A deterministic numpy "model" for tests that need answers but no training.

Its probabilities are a fixed random linear map of the pixels through a softmax, so
answers depend on every pixel (the two versions of a pair get different scores) and
are identical on every run. ``label_only`` returns the argmax only.
"""

from __future__ import annotations

import hashlib

import numpy as np

from twinaudit.protocol.errors import OracleError
from twinaudit.protocol.oracles.base import (
    ClassifierOracle,
    ClassifyAnswer,
    OracleInfo,
    check_images,
)


class LinearOracle(ClassifierOracle):
    """softmax(W · flatten(image)) for a fixed seeded W."""

    def __init__(self, shape=(28, 28, 1), n_classes=10, seed=0, label_only=False, scale=40.0):
        rng = np.random.default_rng(seed)
        self._w = (
            rng.standard_normal((int(np.prod(shape)), n_classes)) * scale / np.prod(shape) ** 0.5
        )
        self._info = OracleInfo(
            "linear-test-oracle",
            f"seed-{seed}",
            ("classify",),
            "label" if label_only else "probabilities",
            n_classes,
            512,
        )
        self.calls = 0

    @property
    def info(self) -> OracleInfo:
        return self._info

    def classify(self, images):
        images = check_images(images)
        self.calls += 1
        logits = images.reshape(images.shape[0], -1).astype(np.float64) @ self._w
        logits -= logits.max(axis=1, keepdims=True)
        probs = np.exp(logits)
        probs /= probs.sum(axis=1, keepdims=True)
        if self._info.classify_output == "label":
            return ClassifyAnswer(labels=probs.argmax(axis=1).astype(np.int64))
        return ClassifyAnswer(probabilities=probs)


class FlakyOracle(LinearOracle):
    """A :class:`LinearOracle` whose next ``failures`` calls fail (set it to fail again).

    ``seen`` lists the SHA-256 of every request's images, in the order they came.
    """

    def __init__(self, failures: int = 1, **kwargs):
        super().__init__(**kwargs)
        self.failures = failures
        self.seen: list[str] = []

    def classify(self, images):
        self.seen.append(hashlib.sha256(np.ascontiguousarray(images).tobytes()).hexdigest())
        if self.failures > 0:
            self.failures -= 1
            raise OracleError("unreachable", "the model's host is overloaded (failing on cue)")
        return super().classify(images)
