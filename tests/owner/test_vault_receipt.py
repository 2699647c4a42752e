"""Escrow receipts in the vault: real signed receipts, every failed check, publication bits."""

from __future__ import annotations

import base64
import errno
import hashlib
import json
import os
import stat
from itertools import chain
from pathlib import Path

import numpy as np
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

import twinaudit.owner.vault.files as vault_files
from demo.seeded import SeededEntropy
from tests.support.keys import KEY, OTHER
from twinaudit.owner.vault import (
    Vault,
    write_vault,
)
from twinaudit.protocol.encoding import decode, encode
from twinaudit.protocol.errors import (
    InputError,
    ProofError,
    RootMismatchError,
    SignatureError,
    StateError,
    VaultIntegrityError,
    VaultStorageError,
    VerificationError,
)
from twinaudit.protocol.escrow_messages import EscrowRequest, open_receipt
from twinaudit.protocol.keys import load_public_key
from twinaudit.protocol.seeds import publication_bits
from twinaudit.verifier.escrow.sqlite_store import SqliteEscrowStore

OWNER = "vault tests"
N = 12


@pytest.fixture(autouse=True)
def _no_fsync(monkeypatch):
    """Skip the disk flushes (97% of the run time); test_fsync_order checks where they go."""
    monkeypatch.setattr(os, "fsync", lambda fd: None)


def items():
    rng = np.random.default_rng(3)
    v0 = rng.integers(0, 256, (N, 5, 5, 1), dtype=np.uint8)
    v1 = v0 ^ 0x10
    return v0, v1, list(range(N)), [f"n{i}" for i in range(N)]


def make_vault(path: Path) -> Vault:
    return write_vault(
        path, "image", *items(), source={"s": 1}, config={"c": 2}, secret=bytes(32), batch_items=5
    )


def snapshot(path: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(path)): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()
    }


class Arbiter:
    """An in-process escrow store that signs real receipts."""

    def __init__(self, path: Path, key: Ed25519PrivateKey) -> None:
        self.store = SqliteEscrowStore(path, key, entropy=SeededEntropy(path.name.encode()))
        for filler in range(3):  # a log of several entries: the proofs are not empty
            root = bytes([0xF0 + filler]) * 32  # roots no test escrows (one record per root)
            self.store.commit(EscrowRequest(root, 1, "image", "someone else"))

    def escrow(self, root, n_pairs=N, item_kind="image", owner=OWNER):
        receipt = self.store.commit(EscrowRequest(root, n_pairs, item_kind, owner))
        position = open_receipt(receipt, self.store.public_key)
        return receipt, self.store.inclusion_proof(position.entry.index, position.log_size)


def escrowed(vault, db: Path) -> None:
    """Escrow ``vault`` with a fresh in-process arbiter at ``db`` and store its receipt."""
    arbiter = Arbiter(db, KEY)
    try:
        envelope, proof = arbiter.escrow(vault.root, n_pairs=vault.n_pairs)
    finally:
        arbiter.store.close()
    vault.store_receipt(envelope, KEY.public_key(), proof)


@pytest.fixture
def arbiter(tmp_path):
    arbiter = Arbiter(tmp_path / "escrow.db", KEY)
    yield arbiter
    arbiter.store.close()


def test_store_and_reopen_a_receipt(tmp_path, arbiter):
    vault = make_vault(tmp_path / "v")
    with pytest.raises(StateError, match="no receipt"):
        vault.publication_bits()
    with pytest.raises(StateError, match="no receipt"):
        next(vault.published_chunks())
    envelope, proof = arbiter.escrow(vault.root)
    assert proof  # a real, non-empty inclusion proof
    receipt = vault.store_receipt(envelope, KEY.public_key(), proof, expected_owner=OWNER)
    assert vault.receipt == receipt and vault.receipt_bytes == envelope
    assert (tmp_path / "v" / "receipt.json").read_bytes() == envelope
    stored_key = load_public_key(tmp_path / "v" / "arbiter.pub")
    assert stored_key.public_bytes_raw() == KEY.public_key().public_bytes_raw()
    for name in ("receipt.json", "arbiter.pub", "manifest.msgpack"):
        assert stat.S_IMODE((tmp_path / "v" / name).stat().st_mode) == 0o600
    manifest = decode((tmp_path / "v" / "manifest.msgpack").read_bytes())
    assert isinstance(manifest, dict) and manifest["receipt"] == {"inclusion_proof": proof}

    reopened = Vault.open(tmp_path / "v")
    assert reopened.receipt == receipt and reopened.receipt_bytes == envelope
    assert reopened.arbiter_public_key is not None
    bits = publication_bits(vault.root, receipt.rho, N)
    assert reopened.publication_bits() == vault.publication_bits() == bits
    assert 0 < sum(bits) < N
    v0, v1, labels, names = items()
    published = list(reopened.published_chunks())
    assert [start for start, *_ in published] == [0, 5, 10]
    pixels = np.concatenate([chunk for _, chunk, _, _ in published])
    assert np.array_equal(pixels, np.where(np.array(bits)[:, None, None, None], v1, v0))
    assert list(chain.from_iterable(chunk_labels for *_, chunk_labels, _ in published)) == labels
    assert list(chain.from_iterable(chunk_names for *_, chunk_names in published)) == names

    with pytest.raises(StateError, match="already holds a receipt"):
        reopened.store_receipt(envelope, KEY.public_key(), proof)
    with pytest.raises(StateError, match="already holds a receipt"):
        vault.store_receipt(envelope, KEY.public_key(), proof)


def _tamper_payload(envelope: bytes) -> bytes:
    document = json.loads(envelope)
    payload = bytearray(base64.b64decode(document["payload"]))
    payload[-1] ^= 1
    document["payload"] = base64.b64encode(bytes(payload)).decode()
    return json.dumps(document, sort_keys=True, separators=(",", ":")).encode()


def _with(arbiter, root, *, envelope=None, proof=None, **escrow):
    good_envelope, good_proof = arbiter.escrow(root, **escrow)
    return (good_envelope if envelope is None else envelope(good_envelope)), (
        good_proof if proof is None else proof(good_proof)
    )


PUBLIC = KEY.public_key()
BAD_RECEIPTS = [
    ("another root", lambda a, o, r: (*a.escrow(bytes(32)), PUBLIC, {}), VerificationError, "root"),
    ("other n_pairs", lambda a, o, r: (*a.escrow(r, N + 1), PUBLIC, {}), VerificationError, "13"),
    (
        "other kind",
        lambda a, o, r: (*a.escrow(r, item_kind="text"), PUBLIC, {}),
        VerificationError,
        "text",
    ),
    (
        "tampered",
        lambda a, o, r: (*_with(a, r, envelope=_tamper_payload), PUBLIC, {}),
        SignatureError,
        None,
    ),
    ("not json", lambda a, o, r: (b"{", a.escrow(r)[1], PUBLIC, {}), InputError, None),
    ("other signer", lambda a, o, r: (*o.escrow(r), PUBLIC, {}), SignatureError, None),
    (
        "wrong key given",
        lambda a, o, r: (*a.escrow(r), OTHER.public_key(), {}),
        SignatureError,
        None,
    ),
    (
        "wrong proof",
        lambda a, o, r: (*_with(a, r, proof=lambda p: [bytes(32), *p[1:]]), PUBLIC, {}),
        RootMismatchError,
        None,
    ),
    (
        "short proof",
        lambda a, o, r: (*_with(a, r, proof=lambda p: p[:-1]), PUBLIC, {}),
        ProofError,
        None,
    ),
    (
        "other owner",
        lambda a, o, r: (*a.escrow(r), PUBLIC, {"expected_owner": "me"}),
        VerificationError,
        "'me'",
    ),
    (
        "envelope as text",
        lambda a, o, r: (*_with(a, r, envelope=bytes.decode), PUBLIC, {}),
        InputError,
        "bytes",
    ),
    ("key as bytes", lambda a, o, r: (*a.escrow(r), b"k" * 32, {}), InputError, "Ed25519"),
]


@pytest.fixture
def arbiters(tmp_path):
    # Fresh logs for each case: every case escrows the same vault root, once per log.
    ours, theirs = Arbiter(tmp_path / "ours.db", KEY), Arbiter(tmp_path / "theirs.db", OTHER)
    yield ours, theirs
    ours.store.close()
    theirs.store.close()


@pytest.mark.parametrize(
    ("case", "build", "error", "match"), BAD_RECEIPTS, ids=[c[0] for c in BAD_RECEIPTS]
)
def test_a_failed_receipt_check_writes_nothing(tmp_path, arbiters, case, build, error, match):
    vault = make_vault(tmp_path / "v")
    before = snapshot(tmp_path / "v")
    envelope, proof, key, kwargs = build(*arbiters, vault.root)
    with pytest.raises(error, match=match):
        vault.store_receipt(envelope, key, proof, **kwargs)
    assert snapshot(tmp_path / "v") == before and vault.receipt is None
    assert Vault.open(tmp_path / "v").receipt is None


def test_disk_full_while_storing_a_receipt(tmp_path, arbiter, monkeypatch):
    vault = make_vault(tmp_path / "v")
    before = snapshot(tmp_path / "v")
    envelope, proof = arbiter.escrow(vault.root)
    original = vault_files.write_all
    calls = []

    def write_all(fd, data):
        calls.append(1)
        if len(calls) == 3:  # receipt.json, arbiter.pub, then the manifest
            raise OSError(errno.ENOSPC, "No space left on device")
        original(fd, data)

    monkeypatch.setattr(vault_files, "write_all", write_all)
    with pytest.raises(VaultStorageError, match="store the receipt: the disk is full"):
        vault.store_receipt(envelope, KEY.public_key(), proof)
    monkeypatch.undo()
    assert snapshot(tmp_path / "v") == before and vault.receipt is None
    reopened = Vault.open(tmp_path / "v")
    reopened.store_receipt(envelope, KEY.public_key(), proof)
    assert Vault.open(tmp_path / "v").receipt == reopened.receipt


def _rehash(vault: Path, name: str) -> None:
    manifest = decode((vault / "manifest.msgpack").read_bytes())
    assert isinstance(manifest, dict) and isinstance(manifest["files"], dict)
    manifest["files"][name] = hashlib.sha256((vault / name).read_bytes()).digest()
    body = {key: value for key, value in manifest.items() if key != "checksum"}
    checksum = hashlib.sha256(encode(body)).digest()
    (vault / "manifest.msgpack").write_bytes(encode(body | {"checksum": checksum}))


def test_open_reverifies_the_stored_receipt(tmp_path, arbiter):
    make_vault(tmp_path / "v")
    vault = Vault.open(tmp_path / "v")
    envelope, proof = arbiter.escrow(vault.root)
    vault.store_receipt(envelope, KEY.public_key(), proof)
    path = tmp_path / "v"
    original = snapshot(path)

    def restore():
        for name, data in original.items():
            (path / name).write_bytes(data)

    # A byte changed in the receipt or the key: the manifest's hash names the file.
    for name in ("receipt.json", "arbiter.pub"):
        (path / name).write_bytes(original[name][:-2] + b"\n\n")
        with pytest.raises(VaultIntegrityError, match=name):
            Vault.open(path)
        restore()
    # A consistent swap (new file, new hash): the receipt no longer verifies.
    other_envelope, _ = arbiter.escrow(bytes(32))
    (path / "receipt.json").write_bytes(other_envelope)
    _rehash(path, "receipt.json")
    with pytest.raises(VaultIntegrityError, match=r"receipt.json: does not verify"):
        Vault.open(path)
    restore()
    from twinaudit.protocol.keys import public_key_pem

    (path / "arbiter.pub").write_bytes(public_key_pem(OTHER.public_key()))
    _rehash(path, "arbiter.pub")
    with pytest.raises(VaultIntegrityError, match=r"receipt.json: does not verify"):
        Vault.open(path)
    restore()
    (path / "arbiter.pub").write_bytes(b"not a key")
    _rehash(path, "arbiter.pub")
    with pytest.raises(VaultIntegrityError, match=r"arbiter.pub"):
        Vault.open(path)
    restore()
    (path / "receipt.json").unlink()
    with pytest.raises(VaultIntegrityError, match=r"receipt.json: is missing"):
        Vault.open(path)
    restore()
    assert Vault.open(path).receipt == vault.receipt


def test_a_vault_changed_since_opening_refuses_a_receipt(tmp_path, arbiter):
    first = make_vault(tmp_path / "v")
    second = Vault.open(tmp_path / "v")
    envelope, proof = arbiter.escrow(first.root)
    first.store_receipt(envelope, KEY.public_key(), proof)
    with pytest.raises(StateError, match="changed since it was opened"):
        second.store_receipt(envelope, KEY.public_key(), proof)
