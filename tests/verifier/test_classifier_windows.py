"""The image-classifier score's windows (spec §10.3): the copies drawn, a model's preference."""

import numpy as np
import pytest

from twinaudit.protocol.claim.scores.classifier import ScoreSpec
from twinaudit.protocol.items import ImageItem
from twinaudit.protocol.prg import Prg
from twinaudit.verifier.windows.classifier import ClassifierWindows


def test_a_versions_copies_are_a_function_of_its_stream():
    item = ImageItem(np.random.default_rng(0).integers(0, 256, (12, 10, 3), dtype=np.uint8), 1)
    windows = ClassifierWindows(ScoreSpec(k=6, perturbation="random-resized-crop", knowledge="C1"))
    params, images = windows.draw(item, Prg(bytes(32), "augment/0/0"))
    again, images2 = windows.draw(item, Prg(bytes(32), "augment/0/0"))
    assert params == again
    assert np.array_equal(images, images2)
    assert images.shape == (6, 12, 10, 3)
    assert images.dtype == np.float32
    _, other = windows.draw(item, Prg(bytes(32), "augment/0/1"))
    assert not np.array_equal(images, other)


@pytest.mark.slow
def test_trained_model_prefers_its_published_versions():
    """Tiny setup: trained on the published versions q ≈ 0.75 (C1, no perturbation), else ≈ 0.5."""
    torch = pytest.importorskip("torch")
    from tests.support.audit_sim import success_rate
    from tests.support.data import synthetic_pairs
    from tests.support.models import train_classifier
    from twinaudit.practitioner.torch_oracle import TorchClassifierOracle

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny convolutions: one thread is fastest on the 2-core runners
    try:
        pairs = synthetic_pairs(200, seed=0, epsilon=32)
        bits = np.random.default_rng(100).integers(0, 2, 200)
        used = train_classifier(pairs.version(bits), pairs.labels, epochs=60, seed=0)
        other = synthetic_pairs(200, seed=1000, epsilon=32)
        clean = train_classifier(other.version0, other.labels, epochs=60, seed=0)
    finally:
        torch.set_num_threads(threads)
    spec = ScoreSpec(k=1, perturbation="none", knowledge="C1")
    trained = success_rate(TorchClassifierOracle(used, n_classes=10), pairs, bits, spec)
    control = success_rate(TorchClassifierOracle(clean, n_classes=10), pairs, bits, spec)
    assert trained.q >= 0.68, trained
    assert 0.38 <= control.q <= 0.62, control
