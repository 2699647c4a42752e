"""An owner's committed pairs in memory: versions, salts, commitments and the Merkle tree.

This is the minimal owner-side state a claim needs: it can produce the escrow root
and the opening (salt, both versions, inclusion proof) of any pair. It saves to and
loads from one canonical file, checked on load against the root it recorded.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from protocol import SPEC_VERSION, limits
from protocol.commitment import PairOpening, commit_pair, new_salt
from protocol.encoding import decode, encode
from protocol.errors import InputError, VerificationError
from protocol.items import ITEM_KINDS
from protocol.merkle import MerkleTree
from protocol.seeds import publication_bits
from protocol.versioning import require_supported

from .claim_client import Opening

#: Largest pair-set file accepted.
MAX_PAIRSET_BYTES = 2 * 1024 * 1024 * 1024


@dataclass
class PairSet:
    """Committed pairs of one escrow record (versions as canonical item bytes)."""

    item_kind: str
    versions: list[tuple[bytes, bytes]]
    salts: list[bytes]
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

    def save(self, path: Path) -> None:
        """Write the set atomically (temp file, fsync, rename), readable by the owner only."""
        data = encode(
            {
                "spec": SPEC_VERSION,
                "item_kind": self.item_kind,
                "root": self.root,
                "salts": self.salts,
                "versions": [list(v) for v in self.versions],
            }
        )
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
        try:
            os.fchmod(fd, 0o600)
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(tmp, path)
        except BaseException:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise

    @classmethod
    def load(cls, path: Path) -> PairSet:
        """Load a saved set and check it still has the root it was saved with."""
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise InputError(f"cannot read pair set {path}: {exc.strerror}") from None
        value = decode(data, max_bytes=MAX_PAIRSET_BYTES)
        if not isinstance(value, dict) or set(value) != {
            "spec",
            "item_kind",
            "root",
            "salts",
            "versions",
        }:
            raise InputError(f"{path} is not a pair set")
        require_supported(value["spec"], "pair set")
        versions = value["versions"]
        salts = value["salts"]
        kind = value["item_kind"]
        if not (isinstance(versions, list) and isinstance(salts, list) and isinstance(kind, str)):
            raise InputError(f"{path} is not a pair set")
        pairs = []
        for pair in versions:
            if not (
                isinstance(pair, list)
                and len(pair) == 2
                and all(isinstance(v, bytes) for v in pair)
            ):
                raise InputError(f"{path}: every pair must be two byte strings")
            first, second = pair
            assert isinstance(first, bytes)
            assert isinstance(second, bytes)
            pairs.append((first, second))
        if not all(isinstance(s, bytes) for s in salts):
            raise InputError(f"{path}: salts must be byte strings")
        pair_set = cls(kind, pairs, [bytes(s) for s in salts if isinstance(s, bytes)])
        if pair_set.root != value["root"]:
            raise VerificationError(
                f"{path} was modified: its pairs no longer give the recorded root"
            )
        return pair_set
