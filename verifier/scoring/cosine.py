"""Exactly specified cosine similarities of embeddings (spec §10.4), binary64 on the CPU.

Every sum here is *exactly rounded*: the real sum of the binary64 terms, rounded once
to the nearest binary64 (Python's :func:`math.fsum`). Unlike a BLAS dot product,
whose summation order (and use of fused multiply-adds) depends on the library and
the CPU, an exactly rounded sum has one correct answer, so a replay on any machine,
or a second implementation, gets the same bits. The rules, for binary64 vectors
``u`` and ``v`` of one length ``D``:

- ``dot(u, v) = fsum(u_d · v_d for d in 0..D−1)``, each product rounded to binary64;
- ``cos(u, v) = dot(u, v) / (sqrt(dot(u, u)) · sqrt(dot(v, v)))``, each square
  root, product and quotient rounded to binary64 (IEEE 754 ``sqrt`` is correctly
  rounded).

An embedding whose ``dot(u, u)`` is 0 (all zeros, or so small that every square
underflows) has no direction: it is an invalid answer of the oracle,
``OracleError("invalid-answer")``. Entries are bounded by
:data:`~twinaudit.protocol.oracles.embedding.MAX_EMBEDDING_ABS` (checked when an answer is
validated), so no product or sum can overflow.

The rules fix the bits, not the method; two faster ways to the same bits are used.
Embeddings whose entries are all binary32 values (what a float32 model answers) have
exact products, so every dot product is an exact integer combination: the entries are
scaled to integers, cut into limbs narrow enough that a BLAS matrix product of limbs
is exact in any order, and the limb products are combined by an exactly rounded sum
(:func:`exact_gram`). Other sums (:func:`exact_row_sums`) are computed with
error-free transformations into a rounded value and a rigorous bound on its distance
from the exact sum; the value is used only when the bound proves it is the exactly
rounded sum, and any other row (heavy cancellation, a sum near a rounding midpoint,
underflow) is summed again with :func:`math.fsum`. Either way the result is ``fsum``'s,
bit for bit (tests compare them).
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

from twinaudit.protocol.errors import OracleError

F64Matrix = npt.NDArray[np.float64]


#: The unit roundoff of binary64 (half the gap between 1.0 and the next float).
_U = 2.0**-53
#: Below this magnitude a certified row is summed again with fsum (subnormal territory).
_TINY = 2.0**-960
#: Most limbs :func:`exact_gram` cuts an entry into (beyond: the general path).
_MAX_LIMBS = 4
#: Products held at once by :func:`pairwise_cosine_sum` (32 MiB of binary64).
_CHUNK_ENTRIES = 1 << 22


def _two_sum(
    a: npt.NDArray[np.float64], b: npt.NDArray[np.float64]
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """Return ``(s, e)`` with ``s = fl(a + b)`` and ``a + b = s + e`` exactly (Knuth's TwoSum)."""
    s = a + b
    bb = s - a
    return s, (a - (s - bb)) + (b - bb)


def exact_row_sums(terms: F64Matrix) -> npt.NDArray[np.float64]:
    """Return the exactly rounded sum of each row of a (R, D) binary64 matrix.

    The same values as ``[math.fsum(row) for row in terms]`` (finite entries whose sums
    cannot overflow). Fast path, per row: a pairwise tree of TwoSums leaves the
    rounded partial sum ``hi`` and its error terms ``e`` (``hi + Σe`` is the exact
    sum); ``c = fl(Σe)`` is off by at most ``γ·Σ|e|``; ``(r, t) = TwoSum(hi, c)``.
    The exact sum is then within ``|t| + bound`` of ``r``, and when that is less than
    half the gap from ``r`` to either neighbouring float, ``r`` is its nearest float
    (no tie is possible). Rows that fail the check are summed with ``fsum``.
    """
    rows, width = terms.shape
    if rows == 0:
        return np.zeros(0)
    padded = 1 << max(0, width - 1).bit_length()  # a power of two: halves pair up evenly
    level = np.zeros((rows, padded))
    level[:, :width] = terms
    c, magnitude = np.zeros(rows), np.zeros(rows)
    n_errors = 0
    while level.shape[1] > 1:
        half = level.shape[1] // 2
        level, error = _two_sum(level[:, :half], level[:, half:])
        c += error.sum(axis=1)
        magnitude += np.abs(error).sum(axis=1)
        n_errors += half
    hi = level[:, 0]
    # |fl(Σe) − Σe| ≤ γ_{n−1}·Σ|e| in any order, and the computed Σ|e| is within a
    # factor (1 − γ_n) of the true one: 2(n + 2)u covers both with room to spare.
    bound = 2.0 * (n_errors + 2) * _U * magnitude
    r, t = _two_sum(hi, c)
    above = np.nextafter(r, np.inf) - r
    below = r - np.nextafter(r, -np.inf)
    half_gap = 0.5 * np.minimum(above, below)
    certain = (np.abs(t) + bound) * (1.0 + 4 * _U) < half_gap
    certain &= np.abs(r) > _TINY  # zero, subnormal and near-subnormal sums: fsum decides
    certain &= np.isfinite(r)
    out = r.copy()
    for row in np.flatnonzero(~certain):
        out[row] = math.fsum(terms[row].tolist())
    return out


def exact_gram(embeddings: F64Matrix) -> F64Matrix | None:
    """Return ``dot(e_a, e_b)`` for every pair of rows (a K × K matrix), or None.

    The fast path for rows of binary32 values (None when any entry is not one, or when
    the entries span too many bits for :data:`_MAX_LIMBS` limbs). A binary32 value is a
    multiple of ``2^(e − 24)`` where ``2^e`` bounds it, so scaled by ``2^−low`` every
    entry is an integer below ``2^span``; products of binary32 values are exact in
    binary64, so the spec's dot product is the exactly rounded value of
    ``Σ_ij (A_i · A_jᵀ) · 2^(w(i+j) + 2·low)`` for the limbs ``A_i`` (``w`` bits each).
    With ``2w + log2(D) ≤ 50`` every partial sum of a limb product is an integer below
    2^53, so BLAS computes it exactly in any order, with or without fused multiply-adds.
    """
    rows, width = embeddings.shape
    with np.errstate(over="ignore"):  # beyond binary32's range: not one, the general path
        narrowed = embeddings.astype(np.float32).astype(np.float64)
    if not np.array_equal(narrowed, embeddings):
        return None
    nonzero = embeddings[embeddings != 0.0]
    if nonzero.size == 0:
        return np.zeros((rows, rows))
    _, exponents = np.frexp(nonzero)
    low = int(exponents.min()) - 24
    span = int(exponents.max()) - low
    limb_bits = (50 - max(0, width - 1).bit_length()) // 2
    n_limbs = -(-span // limb_bits)
    if n_limbs > _MAX_LIMBS:
        return None
    integers = np.ldexp(embeddings, -low)
    sign, magnitude = np.sign(integers), np.abs(integers)
    limbs = [
        sign * np.fmod(np.floor(np.ldexp(magnitude, -limb_bits * i)), 2.0**limb_bits)
        for i in range(n_limbs)
    ]
    stacked = np.concatenate(limbs)  # (n_limbs·K, D): one matrix product for every limb pair
    blocks = (stacked @ stacked.T).reshape(n_limbs, rows, n_limbs, rows).transpose(1, 3, 0, 2)
    shifts = limb_bits * (np.arange(n_limbs)[:, None] + np.arange(n_limbs)[None, :])
    terms = np.ldexp(blocks, shifts).reshape(rows * rows, n_limbs * n_limbs)
    return np.ldexp(exact_row_sums(terms), 2 * low).reshape(rows, rows)


def dot(u: npt.NDArray[np.float64], v: npt.NDArray[np.float64]) -> float:
    """Return the exactly rounded sum of the binary64 products ``u_d · v_d``."""
    if u.shape != v.shape or u.ndim != 1:
        raise OracleError("invalid-answer", f"embeddings of shapes {u.shape} and {v.shape}")
    return math.fsum((u * v).tolist())


def norms(embeddings: F64Matrix) -> list[float]:
    """Return ``sqrt(dot(e, e))`` of every row; a zero norm is an invalid answer."""
    squared = exact_row_sums(embeddings * embeddings)
    _check_norms(squared)
    return np.sqrt(squared).tolist()  # type: ignore[no-any-return]


def _check_norms(squared: npt.NDArray[np.float64]) -> None:
    """Raise ``OracleError("invalid-answer")`` for the first row whose ``dot(e, e)`` is 0."""
    for row, value in enumerate(squared.tolist()):
        if not value > 0.0:
            raise OracleError("invalid-answer", f"embedding {row} has no direction (norm 0)")


def cosine(u: npt.NDArray[np.float64], v: npt.NDArray[np.float64]) -> float:
    """Return ``cos(u, v)`` by the module's rules."""
    if u.shape != v.shape or u.ndim != 1:
        raise OracleError("invalid-answer", f"embeddings of shapes {u.shape} and {v.shape}")
    nu, nv = norms(np.stack([u, v]))
    return dot(u, v) / (nu * nv)


def pairwise_cosine_sum(embeddings: F64Matrix) -> float:
    """Return ``fsum(cos(e_a, e_b) for a < b)`` over the rows of a (K, D) matrix.

    The K(K−1)/2 cosines of distinct rows, each computed by the module's rules with
    the rows' norms, summed exactly rounded. A matrix of one row sums nothing: 0.0.
    """
    if embeddings.ndim != 2:
        raise OracleError("invalid-answer", f"embeddings of shape {embeddings.shape}")
    first, second = np.triu_indices(embeddings.shape[0], k=1)
    gram = exact_gram(embeddings)
    if gram is not None:
        squared = np.diagonal(gram)
        _check_norms(squared)
        lengths = np.sqrt(squared)
        dots = gram[first, second]
        return math.fsum((dots / (lengths[first] * lengths[second])).tolist())
    lengths = np.array(norms(embeddings))
    step = max(1, _CHUNK_ENTRIES // max(1, embeddings.shape[1]))
    terms: list[float] = []
    for start in range(0, len(first), step):
        a, b = first[start : start + step], second[start : start + step]
        dots = exact_row_sums(embeddings[a] * embeddings[b])
        terms += (dots / (lengths[a] * lengths[b])).tolist()
    return math.fsum(terms)


def pairwise_cosine_sum_by_definition(embeddings: F64Matrix) -> float:
    """Return :func:`pairwise_cosine_sum` computed term by term, one ``fsum`` per sum.

    The spec's rules read literally, for checking the fast paths (tests, ``bench``);
    about ten times slower. Rows must have non-zero norms.
    """
    lengths = [math.sqrt(math.fsum((v * v).tolist())) for v in embeddings]
    terms = [
        math.fsum((embeddings[a] * embeddings[b]).tolist()) / (lengths[a] * lengths[b])
        for a in range(len(embeddings) - 1)
        for b in range(a + 1, len(embeddings))
    ]
    return math.fsum(terms)
