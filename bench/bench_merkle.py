"""Merkle tree benchmark: build 10**6 leaves, then generate and verify 1,000 proofs.

Run with ``python -m bench.bench_merkle`` (or ``python -m bench merkle``). Leaf data
are 32-byte values (the size of a pair commitment) from a fixed-seed generator, and
the proof indices come from the same generator, so every run does the same work.
Memory is measured twice: the process's peak resident set size (``getrusage``) before
and after the timed build, which includes what the allocator keeps around while the
level buffers grow; and ``tracemalloc``'s peak during a second, untimed build, which is
what the tree itself holds (tracing slows allocation, so it is kept out of the timing).
"""

from __future__ import annotations

import random
import resource
import time
import tracemalloc
from collections.abc import Iterable

from twinaudit.protocol.merkle import MerkleTree, verify_consistency, verify_inclusion

N_LEAVES = 1_000_000
N_PROOFS = 1_000
LEAF_BYTES = 32
SEED = 6962


def _peak_rss_mib() -> float:
    """Peak resident set size of this process so far, in MiB (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _traced_peak_mib(leaves: Iterable[memoryview]) -> float:
    """Peak bytes allocated by Python while building a tree of ``leaves``, in MiB."""
    tracemalloc.start()
    try:
        MerkleTree(leaves)
        return tracemalloc.get_traced_memory()[1] / 2**20
    finally:
        tracemalloc.stop()


def main() -> None:
    rng = random.Random(SEED)
    data = memoryview(rng.randbytes(N_LEAVES * LEAF_BYTES))

    def leaf(i: int) -> memoryview:
        return data[i * LEAF_BYTES : (i + 1) * LEAF_BYTES]

    rss_before = _peak_rss_mib()
    start = time.perf_counter()
    tree = MerkleTree(leaf(i) for i in range(N_LEAVES))
    root = tree.root()
    build_s = time.perf_counter() - start
    rss_after = _peak_rss_mib()

    indices = [rng.randrange(N_LEAVES) for _ in range(N_PROOFS)]
    start = time.perf_counter()
    for i in indices:
        proof = tree.inclusion_proof(i)
        verify_inclusion(leaf_data=leaf(i), index=i, size=N_LEAVES, proof=proof, root=root)
    inclusion_s = time.perf_counter() - start

    old_sizes = [rng.randrange(1, N_LEAVES) for _ in range(N_PROOFS)]
    start = time.perf_counter()
    for old in old_sizes:
        old_root = tree.root(old)
        proof = tree.consistency_proof(old)
        verify_consistency(
            old_size=old, new_size=N_LEAVES, old_root=old_root, new_root=root, proof=proof
        )
    consistency_s = time.perf_counter() - start

    print(
        f"build {N_LEAVES:,} leaves of {LEAF_BYTES} bytes + root: {build_s:.2f} s "
        f"({build_s / N_LEAVES * 1e6:.2f} us/leaf)"
    )
    print(f"root {root.hex()}")
    print(
        f"{N_PROOFS:,} inclusion proofs, generate + verify: {inclusion_s:.3f} s "
        f"({inclusion_s / N_PROOFS * 1e3:.3f} ms each)"
    )
    print(
        f"{N_PROOFS:,} historical roots + consistency proofs, generate + verify: "
        f"{consistency_s:.3f} s ({consistency_s / N_PROOFS * 1e3:.3f} ms each)"
    )
    del tree
    traced = _traced_peak_mib(leaf(i) for i in range(N_LEAVES))
    print(
        f"tracemalloc peak while building: {traced:.1f} MiB "
        f"({traced * 2**20 / N_LEAVES:.0f} bytes/leaf, of which 64 are hashes)"
    )
    print(
        f"peak RSS {rss_after:.0f} MiB; the build added {rss_after - rss_before:.0f} MiB "
        f"({(rss_after - rss_before) * 2**20 / N_LEAVES:.0f} bytes/leaf)"
    )


if __name__ == "__main__":
    main()
