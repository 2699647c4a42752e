"""Claims and verdicts as log entries (spec §9.6), in the store: every backend.

A claim filed with ``log`` appends its claim-start entry in the transaction that files
it; a verdict stored with ``log`` appends its verdict entry. The counts a client
recomputes from the entries are the ones the store reports, escrows go on as before
around them, and the full store check accepts the mixed log.
"""

from __future__ import annotations

import pytest

from tests.support.keys import KEY
from tests.verifier.test_escrow_store import (  # noqa: F401 - the fixtures
    _lease,
    _request,
    backend,
    store,
)
from twinaudit.protocol.errors import UnknownRecordError
from twinaudit.protocol.escrow_messages import LogEntry, open_receipt
from twinaudit.protocol.log_entries import (
    ClaimStartEntry,
    VerdictEntry,
    claim_digest,
    count_earlier_claims,
    decode_log_leaf,
)
from twinaudit.protocol.merkle import MerkleTree, verify_inclusion
from twinaudit.verifier.escrow.log_check import check_log
from twinaudit.verifier.escrow.store import ClaimStartFields, VerdictFields

MAP_DIGEST = bytes(range(32))


def _file(store, claim_id: str, record: int, key: bytes | None = None) -> None:  # noqa: F811 - the fixture
    store.create_claim(
        claim_id,
        record,
        "open",
        b"state",
        lease=_lease(claim_id),
        log=ClaimStartFields(MAP_DIGEST, key),
    )


def test_claims_and_verdicts_are_appended_and_counted(store):  # noqa: F811 - the fixture
    store.commit(_request(0))
    store.commit(_request(1))
    _file(store, "a", 0)
    _file(store, "b", 1)
    _file(store, "c", 0)
    store.finish_claim("a", b"{}", b"", lease=_lease("a"), log=VerdictFields(bytes(32), "detected"))
    receipt = open_receipt(store.commit(_request(2)), KEY.public_key())
    assert receipt.entry.index == 6  # escrows take the next index after claim entries
    leaves = [decode_log_leaf(data) for data in store.leaves(0, 100)]
    assert [type(leaf).__name__ for leaf in leaves] == [
        "LogEntry",
        "LogEntry",
        "ClaimStartEntry",
        "ClaimStartEntry",
        "ClaimStartEntry",
        "VerdictEntry",
        "LogEntry",
    ]
    a, b, c, verdict = leaves[2], leaves[3], leaves[4], leaves[5]
    assert isinstance(a, ClaimStartEntry) and isinstance(c, ClaimStartEntry)
    assert (a.record, a.claim, a.claim_map) == (0, claim_digest("a"), MAP_DIGEST)
    assert isinstance(verdict, VerdictEntry)
    assert (verdict.claim_entry, verdict.decision, verdict.claim) == (2, "detected", a.claim)
    for name, entry in (("a", a), ("b", b), ("c", c)):
        position = store.claim_position(name)
        assert position is not None and position.index == entry.index
        assert isinstance(entry, ClaimStartEntry)
        # The count anyone recomputes from the entries is the store's.
        assert count_earlier_claims(leaves, entry) == position.earlier
        # The root the verdict binds is the root of the entries up to this one.
        assert MerkleTree(store.leaves(0, entry.index + 1)).root() == position.log_root
    assert [store.claim_position(n).earlier for n in "abc"] == [0, 0, 1]
    with pytest.raises(UnknownRecordError, match="not an escrow record"):
        store.entry(2)
    assert isinstance(store.entry(6).entry, LogEntry)
    assert check_log(store.db, store.public_key).entries == 7


def test_a_claim_filed_without_log_has_no_position(store):  # noqa: F811 - the fixture
    store.commit(_request(0))
    store.create_claim("old", 0, "open", b"s", lease=_lease("old"))
    assert store.claim_position("old") is None
    store.finish_claim(
        "old", b"{}", b"", lease=_lease("old"), log=VerdictFields(bytes(32), "detected")
    )
    assert store.size() == 1  # no claim-start entry, so no verdict entry either


def test_leaves_are_capped_and_checked(store):  # noqa: F811 - the fixture
    for n in range(3):
        store.commit(_request(n))
    assert len(store.leaves(1, 1)) == 1
    assert len(store.leaves(1, 50)) == 2
    with pytest.raises(UnknownRecordError):
        store.leaves(3, 1)
    data = store.leaves(0, 3)
    latest = store.latest_checkpoint().checkpoint
    for index, leaf in enumerate(data):
        proof = store.inclusion_proof(index, latest.size)
        verify_inclusion(
            leaf_data=leaf, index=index, size=latest.size, proof=proof, root=latest.root
        )


def test_a_keyed_claim_entry_names_the_filing_key(store):  # noqa: F811 - the fixture
    key = KEY.public_key().public_bytes_raw()
    store.commit(_request(0))
    _file(store, "k", 0, key)
    entry = decode_log_leaf(store.leaves(1, 1)[0])
    assert isinstance(entry, ClaimStartEntry) and entry.claim_key == key


def test_reopened_store_keeps_positions(backend):  # noqa: F811 - the fixture
    opened = backend.open()
    try:
        opened.commit(_request(0))
        _file(opened, "a", 0)
    finally:
        opened.close()
    again = backend.open()
    try:
        position = again.claim_position("a")
        assert position is not None and position.index == 1
        assert again.size() == 2
        _file(again, "b", 0)
        assert again.claim_position("b").earlier == 1
    finally:
        again.close()


def test_a_schema_5_store_is_upgraded_and_its_claims_stay_unlogged(backend):  # noqa: F811 - the fixture
    opened = backend.open()
    try:
        opened.commit(_request(0))
        opened.create_claim("before", 0, "open", b"s", lease=_lease("before"))
    finally:
        opened.close()
    backend.raw("DROP TABLE escrow_claim_entries")
    backend.raw("UPDATE escrow_meta SET value = '5' WHERE name = 'schema'")
    again = backend.open()
    try:
        assert backend.scalar("SELECT value FROM escrow_meta WHERE name = 'schema'") == "6"
        assert again.claim_position("before") is None
        _file(again, "after", 0)
        position = again.claim_position("after")
        assert position is not None and position.earlier == 0  # the log knows one claim less
        assert [c.claim_id for c in again.claims_for_record(0)] == ["before", "after"]
        assert check_log(again.db, again.public_key).entries == 2
    finally:
        again.close()
