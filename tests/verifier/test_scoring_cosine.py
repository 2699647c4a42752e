"""Exactly rounded sums (spec §10.4): the vectorised path gives ``math.fsum``'s bits."""

from __future__ import annotations

import math
import types

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from twinaudit.protocol.errors import OracleError
from twinaudit.verifier.scoring import cosine
from twinaudit.verifier.scoring.cosine import (
    exact_row_sums,
    pairwise_cosine_sum,
    pairwise_cosine_sum_by_definition,
)


def fsum_rows(terms: np.ndarray) -> list[float]:
    return [math.fsum(row.tolist()) for row in terms]


@pytest.mark.parametrize(
    "row",
    [
        [1.0, 2.0**-53],  # an exact tie: round half to even gives 1.0
        [1.0, 2.0**-53, 2.0**-106],  # just above the tie: rounds up
        [1.0, -(2.0**-54), 2.0**-108],  # near the midpoint below a power of two
        [1e300, -1e300, 1.0],  # total cancellation of the large terms
        [0.0, 0.0, 0.0],
        [5e-324, 5e-324, -1e-323],  # subnormals cancelling to zero
        [3e-320, 7e-321],  # a subnormal sum
        [1.0, -1.0, 2.0**-1074],
        [2.0**60, 1.0, -(2.0**60), 2.0**-60],
        [],
        [-7.25],
    ],
)
def test_hard_rows_match_fsum(row: list[float]) -> None:
    terms = np.array([row], dtype=np.float64).reshape(1, len(row))
    assert exact_row_sums(terms).tolist() == fsum_rows(terms)


finite = st.floats(min_value=-(2.0**64), max_value=2.0**64, allow_nan=False, allow_infinity=False)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.lists(finite, min_size=0, max_size=40), min_size=1, max_size=6).map(
        lambda rows: [r + [0.0] * (max(map(len, rows)) - len(r)) for r in rows]
    )
)
def test_any_rows_match_fsum(rows: list[list[float]]) -> None:
    terms = np.array(rows, dtype=np.float64).reshape(len(rows), -1)
    assert exact_row_sums(terms).tolist() == fsum_rows(terms)


def test_cancelling_rows_match_fsum() -> None:
    rng = np.random.default_rng(7)
    for _ in range(500):
        width = int(rng.integers(1, 40))
        x = rng.standard_normal(width) * 2.0 ** rng.integers(-60, 60, width)
        x = np.concatenate([x, -x[: rng.integers(0, width + 1)], rng.standard_normal(2) * 2.0**-80])
        rng.shuffle(x)
        assert exact_row_sums(x[None, :]).tolist() == fsum_rows(x[None, :])


@pytest.mark.parametrize("shape", [(2, 1), (5, 3), (17, 100), (64, 512), (40, 1000)])
def test_pairwise_sum_matches_the_definition(shape: tuple[int, int]) -> None:
    rng = np.random.default_rng(shape[0] * shape[1])
    rows = rng.standard_normal(shape) * 10.0 ** rng.integers(-50, 50)
    assert pairwise_cosine_sum(rows) == pairwise_cosine_sum_by_definition(rows)
    positive = np.abs(rows) + 3.0  # nearly parallel rows: cosines close to 1
    assert pairwise_cosine_sum(positive) == pairwise_cosine_sum_by_definition(positive)


def test_pairwise_sum_in_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    rows = np.random.default_rng(3).standard_normal((12, 30))
    whole = pairwise_cosine_sum(rows)
    monkeypatch.setattr(cosine, "_CHUNK_ENTRIES", 50)  # one or two pairs a chunk
    assert pairwise_cosine_sum(rows) == whole == pairwise_cosine_sum_by_definition(rows)


def test_typical_rows_take_the_fast_path(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []

    def counting_fsum(values: list[float]) -> float:
        calls.append(len(values))
        return math.fsum(values)

    monkeypatch.setattr(cosine, "math", types.SimpleNamespace(fsum=counting_fsum))
    rows = np.random.default_rng(11).standard_normal((64, 512))
    products = rows[:-1] * rows[1:]
    expected = fsum_rows(products)
    assert exact_row_sums(products).tolist() == expected
    assert calls == []  # every row certified: no fallback
    monkeypatch.undo()
    tie = np.array([[1.0, 2.0**-53]])
    monkeypatch.setattr(cosine, "math", types.SimpleNamespace(fsum=counting_fsum))
    assert exact_row_sums(tie).tolist() == [1.0]
    assert calls == [2]  # the tie cannot be certified: fsum decides it


# -- binary32 embeddings: the exact limb products -------------------------------------

f32 = st.floats(width=32, min_value=-1e6, max_value=1e6, allow_nan=False, allow_infinity=False)


def reference_gram(rows: np.ndarray) -> np.ndarray:
    return np.array([[math.fsum((a * b).tolist()) for b in rows] for a in rows])


@settings(max_examples=200, deadline=None)
@given(
    st.integers(1, 6).flatmap(
        lambda width: st.lists(
            st.lists(f32, min_size=width, max_size=width), min_size=1, max_size=6
        )
    )
)
def test_gram_of_binary32_rows_matches_fsum(rows: list[list[float]]) -> None:
    matrix = np.array(rows, dtype=np.float64)
    gram = cosine.exact_gram(matrix)
    if gram is not None:  # None only for too wide a span of exponents
        assert gram.tolist() == reference_gram(matrix).tolist()


def test_gram_takes_binary32_rows_and_leaves_others() -> None:
    rng = np.random.default_rng(5)
    rows = (rng.standard_normal((20, 300)) * 2.0 ** rng.integers(-12, 12, (20, 300))).astype(
        np.float32
    )
    rows[rng.random(rows.shape) < 0.3] = 0.0  # ReLU zeros need no bits
    matrix = rows.astype(np.float64)
    gram = cosine.exact_gram(matrix)
    assert gram is not None and gram.tolist() == reference_gram(matrix).tolist()
    assert pairwise_cosine_sum(matrix) == pairwise_cosine_sum_by_definition(matrix)
    # Four limbs of 20 bits: entries from 2^-30 to 2^20 (74 bits) still take the fast path.
    spread = matrix.copy()
    spread[0, 0], spread[1, 1] = 2.0**-30 + 2.0**-53, 2.0**20
    gram = cosine.exact_gram(spread)
    assert gram is not None and gram.tolist() == reference_gram(spread).tolist()
    assert pairwise_cosine_sum(spread) == pairwise_cosine_sum_by_definition(spread)
    # Too wide a span, or a value that is not binary32: the general path, same bits.
    wide = matrix.copy()
    wide[0, 0] = 2.0**-90
    assert cosine.exact_gram(wide) is None
    assert pairwise_cosine_sum(wide) == pairwise_cosine_sum_by_definition(wide)
    double = matrix.copy()
    double[2, 3] = 0.1  # not a binary32 value
    assert cosine.exact_gram(double) is None
    assert pairwise_cosine_sum(double) == pairwise_cosine_sum_by_definition(double)
    assert cosine.exact_gram(np.zeros((3, 4))) is not None


def test_zero_rows_are_invalid_on_both_paths() -> None:
    for matrix in (np.array([[1.0, 2.0], [0.0, 0.0]]), np.array([[0.1, 2.0], [0.0, 0.0]])):
        with pytest.raises(OracleError, match="embedding 1 has no direction"):
            pairwise_cosine_sum(matrix)
