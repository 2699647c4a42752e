"""``proxy-clusters``: PGD on a proxy trained on the owner's unlabelled images' clusters."""

from __future__ import annotations

import numpy as np
import pytest

from tests.support.extractors import proxy_config
from tests.support.proxy import short_own_proxy
from tests.support.threads import one_thread  # noqa: F401 - the fixture
from twinaudit.owner.images.sources import open_source
from twinaudit.owner.mark import mark
from twinaudit.owner.marking import MarkingConfig
from twinaudit.owner.marking.clusters import cluster_count, cluster_labels, kmeans
from twinaudit.owner.marking.config import CLUSTERS_PROXY, MIN_CLUSTERED
from twinaudit.owner.vault import Vault
from twinaudit.protocol.errors import InputError

pytestmark = pytest.mark.usefixtures("one_thread")

SECRET = bytes(range(32))


@pytest.fixture(autouse=True)
def few_steps(monkeypatch):
    """Train the proxy 24 steps instead of thousands: the rules, not the proxy, are tested."""
    short_own_proxy(monkeypatch, 24)


def _blobs(seed=0, per=30, centres=((0, 0), (10, 0), (0, 10))):
    rng = np.random.default_rng(seed)
    points = np.concatenate([rng.normal(c, 0.5, (per, 2)) for c in centres])
    truth = np.repeat(np.arange(len(centres)), per)
    order = rng.permutation(len(points))
    return points[order], truth[order]


def _photos(tmp_path, n=24, side=8):
    """Unlabelled grey images of two kinds: dark ones with a bright square, and bright ones."""
    rng = np.random.default_rng(3)
    images = rng.integers(0, 60, (n, side, side, 1), dtype=np.uint8)
    images[::2] += 150
    images[1::2, 2:6, 2:6] = 250
    np.save(tmp_path / "photos.npy", images)
    return open_source(tmp_path / "photos.npy")


def _config(side=8, **changes):
    return proxy_config(CLUSTERS_PROXY, side, **changes)


def test_kmeans_finds_separated_groups_and_numbers_them_by_first_appearance():
    points, truth = _blobs()
    found = kmeans(points, 3, seed=0)
    assert found[0] == 0 and set(found.tolist()) == {0, 1, 2}
    # One cluster per group: the labelling is the truth up to a renaming.
    pairs = set(zip(found.tolist(), truth.tolist(), strict=True))
    assert len(pairs) == 3
    # Seeded: the same answer again, and whatever the seed on groups this clear.
    assert np.array_equal(kmeans(points, 3, seed=0), found)
    assert np.array_equal(kmeans(points, 3, seed=7), found)


def test_kmeans_survives_repeated_points_and_refuses_impossible_k():
    same = np.ones((12, 4))
    labels = kmeans(same, 3)
    assert labels.shape == (12,) and labels.min() >= 0 and labels.max() < 3
    with pytest.raises(InputError, match="clusters"):
        kmeans(same, 13)
    with pytest.raises(InputError, match="clusters"):
        kmeans(same, 0)


def test_the_number_of_clusters_keeps_ten_images_a_cluster():
    assert cluster_count(MIN_CLUSTERED) == 2
    assert cluster_count(55) == 5
    assert cluster_count(200) == 10
    assert cluster_count(100_000) == 10
    with pytest.raises(InputError, match=f"at least {MIN_CLUSTERED}"):
        cluster_count(MIN_CLUSTERED - 1)


def test_cluster_labels_are_seeded_and_follow_what_the_images_show(tmp_path):
    source = _photos(tmp_path, n=40)
    images = np.concatenate([batch.pixels for batch in source.batches(64)])
    labels = cluster_labels(images, k=2)
    assert np.array_equal(cluster_labels(images, k=2), labels)
    # The two kinds of images land in two clusters.
    assert len(set(labels[::2].tolist())) == 1 and len(set(labels[1::2].tolist())) == 1
    assert labels[0] != labels[1]


def test_unlabelled_images_mark_on_the_clusters_proxy_within_epsilon(tmp_path):
    source = _photos(tmp_path)
    assert not source.has_labels
    vault = mark(source, tmp_path / "v", _config(), secret=SECRET, show_progress=False).vault
    assert MarkingConfig.from_value(vault.config).extractor == CLUSTERS_PROXY
    assert all(label is None for label in vault.labels())
    for index in range(vault.n_pairs):
        first, second = vault.pair(index)
        gap = np.abs(first.pixels.astype(int) - second.pixels.astype(int))
        assert 0 < int(gap.max()) <= 20  # each version within ε = 10 of the image


def test_too_few_images_to_cluster_are_refused_before_anything_is_written(tmp_path):
    source = _photos(tmp_path, n=MIN_CLUSTERED - 1)
    with pytest.raises(InputError, match=f"at least {MIN_CLUSTERED} images"):
        mark(source, tmp_path / "v", _config(), secret=SECRET, show_progress=False)
    assert not (tmp_path / "v").exists()


def test_inspect_measures_a_clusters_vault_in_the_default_extractor(tmp_path):
    from twinaudit.owner.inspect import inspect_vault

    source = _photos(tmp_path)
    vault = mark(source, tmp_path / "v", _config(), secret=SECRET, show_progress=False).vault
    report = inspect_vault(Vault.open(vault.path), source=source, distance_pairs=4)
    assert report.feature_distance is not None
    assert report.feature_distance.extractor == "efficientnet-lite0"
    fallback = report.to_value()["feature_distance"]["fallback"]
    assert isinstance(fallback, str)
    assert "measured in efficientnet-lite0, not in proxy-clusters" in fallback
