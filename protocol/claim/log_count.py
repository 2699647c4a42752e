"""A verdict's ``earlier_claims`` recounted from the arbiter's log (spec §9.6.3).

A verdict whose claim is a log entry carries ``claim_entry``: the claim-start entry's
index ``i`` and the root of the log of ``i + 1`` entries, under the arbiter's
signature. Whoever holds those ``i + 1`` entries (fetched with ``GetEntries``, or from
an exported log) checks, with :func:`recount_earlier_claims`, that they hash to that
root, that entry ``i`` is this claim's claim-start entry (its record, claim, claim map
and filing key), and that the claim-start entries on the record before it are exactly
``earlier_claims``. Nothing of the arbiter's database is needed.

That the log of ``i + 1`` entries is a prefix of the log the arbiter publishes is a
separate check, a consistency proof to a checkpoint the reader trusts (§9.4, §9.6.3),
which the caller makes (it needs the network or an exported proof).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from twinaudit.protocol.errors import RootMismatchError, VerificationError
from twinaudit.protocol.log_entries import (
    ClaimStartEntry,
    LogLeaf,
    claim_digest,
    claim_map_digest,
    count_earlier_claims,
    decode_log_leaf,
)
from twinaudit.protocol.merkle import MerkleTree

from .verdict import ClaimEntryRef, Verdict


@dataclass(frozen=True, slots=True)
class LogCount:
    """A verdict's claim found in the log: its claim-start entry and the claims before it."""

    position: ClaimEntryRef
    entry: ClaimStartEntry
    earlier_claims: int


def recount_earlier_claims(verdict: Verdict, leaves: Sequence[bytes]) -> LogCount:
    """Recount ``verdict.earlier_claims`` from the log's first entries (spec §9.6.3).

    ``leaves`` are the leaf data of entries ``0 .. claim_entry.index`` at least (more
    are ignored). Raises :class:`VerificationError` for a verdict that binds no log
    position; otherwise as :func:`check_claim_count`.
    """
    position = verdict.claim_entry
    if position is None:
        raise VerificationError(
            "the verdict binds no log position (signed before claims were log entries, or"
            " on a claim filed before): its earlier_claims cannot be recounted from the log"
        )
    expected = ClaimStartEntry(
        index=position.index,
        record=verdict.claim.record_index,
        claim=claim_digest(verdict.claim_id),
        claim_map=claim_map_digest(verdict.payload["claim"]),
        time="1970-01-01T00:00:00Z",  # not compared
        claim_key=verdict.filing.claim_key if verdict.filing is not None else None,
    )
    return check_claim_count(leaves, position, expected, verdict.earlier_claims)


def check_claim_count(
    leaves: Sequence[bytes], position: ClaimEntryRef, expected: ClaimStartEntry, earlier: int
) -> LogCount:
    """Check a claim's log position and count (spec §9.6.3); return what the log says.

    The first ``position.log_size`` of ``leaves`` must hash to ``position.log_root``
    (:class:`RootMismatchError`), entry ``position.index`` must be a claim-start entry
    with ``expected``'s record, claim, claim map and claim key (its time is not
    compared), and the claim-start entries on that record before it must number
    ``earlier`` (:class:`VerificationError` for either); a leaf that does not decode is
    ``invalid-input``.
    """
    size = position.log_size
    if len(leaves) < size:
        raise VerificationError(
            f"recounting needs the log's first {size} entries; {len(leaves)} were given"
        )
    prefix = [bytes(leaf) for leaf in leaves[:size]]
    root = MerkleTree(prefix).root()
    if root != position.log_root:
        raise RootMismatchError(
            expected=position.log_root, computed=root, what=f"the log's first {size} entries"
        )
    decoded: list[LogLeaf] = [decode_log_leaf(leaf) for leaf in prefix]
    entry = decoded[position.index]
    if not isinstance(entry, ClaimStartEntry):
        raise VerificationError(f"log entry {position.index} is not a claim-start entry")
    fields = ("record", "claim", "claim_map", "claim_key")
    for name in fields:
        if getattr(entry, name) != getattr(expected, name):
            raise VerificationError(
                f"log entry {position.index} is another claim's claim-start entry: its"
                f" {name} differs"
            )
    count = count_earlier_claims(decoded, entry)
    if count != earlier:
        raise VerificationError(
            f"the log holds {count} claim(s) on record {entry.record} before this one, but"
            f" the verdict says earlier_claims = {earlier}"
        )
    return LogCount(position, entry, count)
