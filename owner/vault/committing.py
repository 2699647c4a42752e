"""The commitments of every pair of a vault, recomputed from its chunk files."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from .chunks import commit_chunks
from .journal import ChunkRecord
from .text_chunks import read_text_chunk, text_commitments


def commit_records(
    vault: Path, secret: bytes, records: Sequence[ChunkRecord], item_kind: str, format_version: int
) -> bytearray:
    """Read every chunk of ``item_kind`` items (checking each SHA-256); return the commitments.

    ``format_version`` is the vault's: every pixel chunk must be one that format writes.

    One chunk is in memory at a time; the result holds 32 bytes per pair, in pair order.
    """
    if item_kind != "text":
        return commit_chunks(vault, secret, records, format_version)
    packed = bytearray()
    for record in records:
        for commitment in text_commitments(secret, record.start, read_text_chunk(vault, record)):
            packed += commitment
    return packed
