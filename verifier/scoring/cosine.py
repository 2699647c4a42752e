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
:data:`~verifier.oracles.embedding.MAX_EMBEDDING_ABS` (checked when an answer is
validated), so no product or sum can overflow.
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

from protocol.errors import OracleError

F64Matrix = npt.NDArray[np.float64]


def dot(u: npt.NDArray[np.float64], v: npt.NDArray[np.float64]) -> float:
    """Return the exactly rounded sum of the binary64 products ``u_d · v_d``."""
    if u.shape != v.shape or u.ndim != 1:
        raise OracleError("invalid-answer", f"embeddings of shapes {u.shape} and {v.shape}")
    return math.fsum((u * v).tolist())


def norms(embeddings: F64Matrix) -> list[float]:
    """Return ``sqrt(dot(e, e))`` of every row; a zero norm is an invalid answer."""
    out = []
    for row, vector in enumerate(embeddings):
        squared = math.fsum((vector * vector).tolist())
        if not squared > 0.0:
            raise OracleError("invalid-answer", f"embedding {row} has no direction (norm 0)")
        out.append(math.sqrt(squared))
    return out


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
    lengths = norms(embeddings)
    terms: list[float] = []
    for a in range(embeddings.shape[0] - 1):
        products = embeddings[a] * embeddings[a + 1 :]
        for offset, row in enumerate(products):
            b = a + 1 + offset
            terms.append(math.fsum(row.tolist()) / (lengths[a] * lengths[b]))
    return math.fsum(terms)
