"""Committed pairs in memory, for benchmarks and tests of the claim machinery.

The minimal owner-side state a claim needs — the escrow root and the opening (salt,
both versions, inclusion proof) of any pair — without marking or a vault on disk. The
owner's real store is :class:`twinaudit.owner.vault.Vault`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from twinaudit.owner.claim_client import Opening
from twinaudit.owner.escrow_client import escrow_root
from twinaudit.protocol import limits
from twinaudit.protocol.commitment import PairOpening, commit_pair, new_salt
from twinaudit.protocol.errors import InputError
from twinaudit.protocol.escrow_messages import Receipt
from twinaudit.protocol.items import ITEM_KINDS
from twinaudit.protocol.keys import raw_public_key
from twinaudit.protocol.merkle import MerkleTree
from twinaudit.protocol.seeds import publication_bits


@dataclass
class PairSet:
    """Committed pairs of one escrow record (versions as canonical item bytes)."""

    item_kind: str
    versions: list[tuple[bytes, bytes]]
    salts: list[bytes]
    #: The owner's claim key: the record binds it and it signs her claims (spec §10.7).
    claim_key: Ed25519PrivateKey = field(default_factory=Ed25519PrivateKey.generate)
    commitments: list[bytes] = field(init=False)
    tree: MerkleTree = field(init=False)

    def __post_init__(self) -> None:
        """Check the inputs and compute the commitments and the tree."""
        if self.item_kind not in ITEM_KINDS:
            raise InputError(f"unknown item kind {self.item_kind!r}")
        if not self.versions or len(self.versions) != len(self.salts):
            raise InputError("a pair set needs one salt per pair and at least one pair")
        if len(self.versions) > limits.MAX_PAIRS:
            raise InputError(f"at most {limits.MAX_PAIRS} pairs per record")
        self.commitments = [
            commit_pair(v0, v1, salt)[0]
            for (v0, v1), salt in zip(self.versions, self.salts, strict=True)
        ]
        self.tree = MerkleTree(self.commitments)

    @classmethod
    def commit(cls, item_kind: str, versions: Sequence[tuple[bytes, bytes]]) -> PairSet:
        """Commit to new pairs with fresh salts from the OS CSPRNG."""
        return cls(item_kind, list(versions), [new_salt() for _ in versions])

    def claim_public_key(self) -> bytes:
        """Return the raw public half of the claim key, as an escrow request binds it."""
        return raw_public_key(self.claim_key.public_key())

    @property
    def root(self) -> bytes:
        """The Merkle root to escrow."""
        return self.tree.root()

    def __len__(self) -> int:
        """Return the number of pairs."""
        return len(self.versions)

    def opening(self, index: int) -> Opening:
        """Return the opening of pair ``index`` with its inclusion proof."""
        if not 0 <= index < len(self):
            raise InputError(f"no pair {index} in a set of {len(self)}")
        v0, v1 = self.versions[index]
        return Opening(index, self.salts[index], v0, v1, self.tree.inclusion_proof(index))

    def pair_opening(self, index: int) -> PairOpening:
        """Return the commitment opening (without the proof) of pair ``index``."""
        v0, v1 = self.versions[index]
        return PairOpening(self.salts[index], v0, v1)

    def published(self, rho: bytes) -> list[bytes]:
        """Return the version of each pair to publish, from the receipt's ``rho``."""
        bits = publication_bits(self.root, rho, len(self))
        return [pair[int(bit)] for pair, bit in zip(self.versions, bits, strict=True)]

    def escrow(self, channel: Any, arbiter_public_key: Ed25519PublicKey, owner: str) -> Receipt:
        """Escrow the root with the arbiter on ``channel``; return the verified receipt."""
        return escrow_root(
            channel,
            root=self.root,
            n_pairs=len(self),
            item_kind=self.item_kind,
            owner=owner,
            claim_key=self.claim_public_key(),
            arbiter_public_key=arbiter_public_key,
        ).receipt
