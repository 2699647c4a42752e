"""The finished vault, opened read-mostly: pairs, openings, the receipt, publication.

:meth:`Vault.open` checks the whole vault every time (see the package docstring) and
keeps only what is small in memory: 32 bytes per pair commitment, the Merkle tree
(about 64 bytes per pair), labels and names. Pixels are read back one chunk at a time,
and every read checks the chunk's SHA-256 again.
"""

from __future__ import annotations

import bisect
import hmac
import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Final

import numpy as np
import numpy.typing as npt
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from twinaudit.owner.claim_client import Opening
from twinaudit.protocol.commitment import PairOpening
from twinaudit.protocol.encoding import Value, encode
from twinaudit.protocol.errors import (
    InputError,
    ParameterError,
    StateError,
    TwinauditError,
    VaultIntegrityError,
    VaultStorageError,
    VerificationError,
)
from twinaudit.protocol.escrow_messages import Receipt, verify_receipt
from twinaudit.protocol.hashing import sha256
from twinaudit.protocol.items import Item, TextItem, encode_item
from twinaudit.protocol.keys import (
    load_public_key,
    public_key_pem,
    raw_public_key,
    require_owner_only,
)
from twinaudit.protocol.merkle import MerkleTree
from twinaudit.protocol.seeds import publication_bits

from . import files
from .chunks import StoredChunk, pixel_item, read_record
from .committing import commit_records
from .journal import ChunkRecord, read_journal
from .layout import (
    ARBITER_KEY_FILE,
    CHUNKS_DIR,
    JOURNAL_FILE,
    MANIFEST_FILE,
    MAX_RECEIPT_FILE_BYTES,
    RECEIPT_FILE,
    SECRET_FILE,
    TEMP_PREFIX,
)
from .manifest import Manifest, read_manifest
from .secret import claim_key as secret_claim_key
from .secret import marking_seed, pair_salt, read_secret, secret_check
from .text_chunks import TextChunk, read_text_chunk

Pixels = npt.NDArray[np.uint8]

#: The item kinds a vault can hold: image and captioned-image chunks hold pixels (and
#: captions in their journal records), text chunks hold texts.
VAULT_ITEM_KINDS: Final = frozenset({"image", "text", "captioned-image"})
#: The kinds whose chunks hold pixels.
PIXEL_ITEM_KINDS: Final = frozenset({"image", "captioned-image"})
_RECEIPT_FILES: Final = frozenset({RECEIPT_FILE, ARBITER_KEY_FILE})


class Vault:
    """A finished vault: every pair, its salt and commitment, and the escrow receipt."""

    path: Path
    format_version: int
    item_kind: str
    n_pairs: int
    root: bytes
    config: dict[str, Value]
    source: dict[str, Value]
    receipt: Receipt | None
    receipt_bytes: bytes | None
    arbiter_public_key: Ed25519PublicKey | None

    def __init__(
        self,
        path: Path,
        manifest: Manifest,
        secret: bytes,
        records: Sequence[ChunkRecord],
        commitments: bytearray,
        *,
        tree: MerkleTree | None = None,
    ) -> None:
        """Build a vault from checked parts; use :meth:`open` (or the writer's finish)."""
        self.path = path
        self.format_version = manifest.format_version
        self.item_kind = manifest.item_kind
        self.n_pairs = manifest.n_pairs
        self.root = manifest.root
        self.config = manifest.config
        self.source = manifest.source
        self.receipt = None
        self.receipt_bytes = None
        self.arbiter_public_key = None
        self._manifest = manifest
        self._secret = secret
        self._records = list(records)
        self._starts = [record.start for record in self._records]
        self._commitments = commitments
        self._tree = commitment_tree(commitments) if tree is None else tree
        self._bits: list[bool] | None = None
        self._cached: tuple[int, StoredChunk | TextChunk] | None = None

    # --- Opening and checking -------------------------------------------------------------

    @classmethod
    def open(cls, path: Path) -> Vault:
        """Open the finished vault at ``path``, checking all of it.

        Raises:
            InputError: ``path`` is not a vault directory, or its secret is readable by
                other users.
            StateError: the vault is not finished (resume its marking run).
            VersionError: the vault was written in another format or spec version.
            VaultIntegrityError: a file is missing, unexpected or modified (it is named),
                the recomputed root differs, or the stored receipt does not verify.

        """
        path = Path(path)
        _require_vault_directory(path)
        manifest = read_manifest(path)
        _check_listing(path, manifest)
        _check_secret_mode(path)
        for name in sorted(manifest.files):
            if not name.startswith(f"{CHUNKS_DIR}/"):
                _check_file_hash(path, name, manifest.files[name])
        secret = read_secret(path)
        records = _check_journal(path, manifest, secret)
        commitments = commit_records(
            path, secret, records, manifest.item_kind, manifest.format_version
        )
        vault = cls(path, manifest, secret, records, commitments)
        if not hmac.compare_digest(vault._tree.root(), manifest.root):
            raise VaultIntegrityError(path, MANIFEST_FILE, "its root is not the chunks' root")
        if manifest.receipt_proof is not None:
            vault._load_receipt(manifest.receipt_proof)
        return vault

    def _load_receipt(self, proof: list[bytes]) -> None:
        try:
            key = load_public_key(self.path / ARBITER_KEY_FILE)
        except InputError as exc:
            raise VaultIntegrityError(self.path, ARBITER_KEY_FILE, str(exc)) from None
        data = files.read_bounded(self.path / RECEIPT_FILE, MAX_RECEIPT_FILE_BYTES)
        try:
            receipt = self._verify_receipt(data, key, proof, None)
        except TwinauditError as exc:
            raise VaultIntegrityError(
                self.path, RECEIPT_FILE, f"does not verify: {exc.diagnostics()}"
            ) from None
        self.receipt, self.receipt_bytes, self.arbiter_public_key = receipt, data, key

    def _verify_receipt(
        self,
        envelope_json: bytes,
        key: Ed25519PublicKey,
        proof: Sequence[bytes],
        expected_owner: str | None,
    ) -> Receipt:
        receipt = verify_receipt(
            envelope_json,
            key,
            expected_root=self.root,
            expected_n_pairs=self.n_pairs,
            expected_item_kind=self.item_kind,
            inclusion_proof=list(proof),
            expected_owner=expected_owner,
        )
        # A record escrowed before claim keys binds none; one since binds this vault's.
        bound = receipt.entry.claim_key
        if bound is not None and not hmac.compare_digest(bound, self.claim_public_key()):
            raise VerificationError(
                "the receipt's record binds another claim key than this vault's: it is not "
                "this vault's record"
            )
        return receipt

    # --- Pairs ---------------------------------------------------------------------------

    def __len__(self) -> int:
        """Return the number of pairs."""
        return self.n_pairs

    def claim_key(self) -> Ed25519PrivateKey:
        """Return the owner's claim key, derived from the vault's secret (spec §10.7)."""
        return secret_claim_key(self._secret)

    def claim_public_key(self) -> bytes:
        """Return the raw public half of the claim key, as an escrow request binds it (§9.1)."""
        return raw_public_key(self.claim_key().public_key())

    @property
    def record_binds_claim_key(self) -> bool:
        """Whether the escrowed record binds this vault's claim key (False: escrowed before keys).

        Claims on a record that binds it must be signed with it; a record escrowed
        before claim keys binds none, and anyone can file claims on it (spec §11).
        """
        if self.receipt is None:
            raise StateError(f"vault {self.path} holds no receipt: escrow its root first")
        return self.receipt.entry.claim_key is not None

    @property
    def marking_seed(self) -> bytes:
        """The seed the marking run drew its randomness from (derived from the secret)."""
        return marking_seed(self._secret)

    def names(self) -> list[str]:
        """Return the name of every item, in pair order."""
        return [name for record in self._records for name in record.names]

    def labels(self) -> list[int | None]:
        """Return the label of every item (None where it has none), in pair order."""
        return [label for record in self._records for label in record.labels]

    def colour_profiles(self) -> list[bytes | None]:
        """Return the ICC colour profile every item was read with (None: none), in pair order.

        Vaults before format 4 recorded none.
        """
        return [
            profile
            for record in self._records
            for profile in (record.profiles or [None] * record.count)
        ]

    @property
    def manifest(self) -> Manifest:
        """The manifest as this vault read (or last wrote) it."""
        return self._manifest

    def packed_commitments(self) -> bytes:
        """Return every pair's commitment, 32 bytes each, in pair order."""
        return bytes(self._commitments)

    def commitment(self, index: int) -> bytes:
        """Return the commitment of pair ``index`` (leaf ``index`` of the tree)."""
        offset = 32 * self._check_index(index)
        return bytes(self._commitments[offset : offset + 32])

    def salt(self, index: int) -> bytes:
        """Return the salt of pair ``index``."""
        return pair_salt(self._secret, self._check_index(index))

    def inclusion_proof(self, index: int) -> list[bytes]:
        """Return the inclusion proof of pair ``index`` in the tree of all pairs."""
        return self._tree.inclusion_proof(self._check_index(index))

    def captions(self) -> list[str]:
        """Return the caption of every item of a captioned-image vault, in pair order."""
        if self.item_kind != "captioned-image":
            raise StateError(
                f"vault {self.path} holds {self.item_kind} items, not captioned images"
            )
        return [caption for record in self._records for caption in record.captions or []]

    def item_shapes(self) -> dict[tuple[int, int, int], int]:
        """Return each image shape ``(H, W, C)`` of the vault with its number of items.

        Empty for a text vault. The most common shape comes first.
        """
        shapes: dict[tuple[int, int, int], int] = {}
        for record in self._records:
            if record.shape is not None:
                shapes[record.shape] = shapes.get(record.shape, 0) + record.count
        return dict(sorted(shapes.items(), key=lambda item: -item[1]))

    def largest_opening_bytes(self) -> int:
        """Return the size of the largest pair opening: salt, both versions and the proof.

        One pair of each image chunk's shape is encoded (every item of a chunk has its
        size, up to its label and caption); for texts, every pair.
        """
        proof = 32 * len(self.inclusion_proof(0))
        starts: list[int] = []
        seen: set[tuple[int, int, int]] = set()
        for record in self._records:
            if record.shape is None:
                starts.extend(range(record.start, record.start + record.count))
            elif record.shape not in seen:
                seen.add(record.shape)
                starts.append(record.start)
        largest = 0
        for index in starts:
            opening = self.pair_opening(index)
            largest = max(largest, len(opening.version0) + len(opening.version1))
        return largest + len(self.salt(0)) + proof

    def pair(self, index: int) -> tuple[Item, Item]:
        """Return both versions of pair ``index`` as items of the vault's kind.

        Images carry the item's label; captioned images the item's caption; texts
        their version's text.
        """
        record, content = self._chunk_of(self._check_index(index))
        offset = index - record.start
        if isinstance(content, TextChunk):
            return TextItem(content.versions0[offset]), TextItem(content.versions1[offset])
        label = record.labels[offset]
        caption = None if record.captions is None else record.captions[offset]
        pixels = content.item(offset)
        return pixel_item(pixels[0], label, caption), pixel_item(pixels[1], label, caption)

    def pair_opening(self, index: int) -> PairOpening:
        """Return the commitment opening (salt, both encoded versions) of pair ``index``.

        The opening is checked against the pair's commitment before it is returned.
        """
        first, second = self.pair(index)
        opening = PairOpening(self.salt(index), encode_item(first), encode_item(second))
        if not hmac.compare_digest(opening.commitment(), self.commitment(index)):
            record, _ = self._chunk_of(index)
            raise VaultIntegrityError(self.path, record.file, f"pair {index} no longer opens")
        return opening

    def opening(self, index: int) -> Opening:
        """Return what a claim needs to open pair ``index``: salt, versions, inclusion proof."""
        pair = self.pair_opening(index)
        return Opening(index, pair.salt, pair.version0, pair.version1, self.inclusion_proof(index))

    def chunk_spans(self) -> list[tuple[int, int]]:
        """Return ``(start, stop)`` of every chunk, in order (the batches it was marked in)."""
        return [(record.start, record.start + record.count) for record in self._records]

    def chunks(self) -> Iterator[tuple[int, Pixels, Pixels, list[int | None], list[str]]]:
        """Yield ``(start, versions0, versions1, labels, names)`` chunk by chunk.

        One chunk is in memory at a time; each is checked against its SHA-256. Image
        and captioned-image vaults only (:meth:`texts` reads a text vault).
        """
        for record in self._records:
            pixels = self._read(record)
            yield record.start, pixels[0], pixels[1], list(record.labels), list(record.names)

    # --- Receipt and publication -----------------------------------------------------------

    def store_receipt(
        self,
        envelope_json: bytes,
        arbiter_public_key: Ed25519PublicKey,
        inclusion_proof: Sequence[bytes],
        *,
        expected_owner: str | None = None,
    ) -> Receipt:
        """Check the arbiter's receipt for this vault fully, then store it.

        Every owner check of spec §9.3 runs against this vault's root, number of pairs
        and item kind (and ``expected_owner`` when given). Only then are the receipt
        (exactly as received) and the arbiter's public key written, and the manifest
        rewritten atomically to record them and the inclusion proof.

        Raises:
            StateError: a receipt is already stored.
            InputError, VerificationError: the receipt is malformed or fails a check;
                nothing is written.
            VaultStorageError: writing failed; the vault is as it was.

        """
        if self.receipt is not None:
            raise StateError(f"vault {self.path} already holds a receipt")
        if not isinstance(arbiter_public_key, Ed25519PublicKey):
            raise InputError("the arbiter's public key must be an Ed25519PublicKey")
        if not isinstance(envelope_json, bytes):
            raise InputError("the receipt envelope must be bytes")
        proof = [bytes(element) for element in inclusion_proof]
        receipt = self._verify_receipt(envelope_json, arbiter_public_key, proof, expected_owner)
        pem = public_key_pem(arbiter_public_key)
        with files.DirectoryLock(self.path):
            if read_manifest(self.path) != self._manifest:
                raise StateError(f"vault {self.path} changed since it was opened; open it again")
            written: list[Path] = []
            try:
                for name, data in ((RECEIPT_FILE, envelope_json), (ARBITER_KEY_FILE, pem)):
                    written.append(self.path / name)
                    files.write_atomic(self.path / name, data)
                added = {RECEIPT_FILE: sha256(envelope_json), ARBITER_KEY_FILE: sha256(pem)}
                manifest = self._manifest.with_receipt(added, proof)
                manifest.write(self.path)
            except BaseException as exc:
                for leftover in written:
                    files.remove_quietly(leftover)
                if isinstance(exc, OSError):
                    raise VaultStorageError(self.path, "store the receipt", exc) from exc
                raise
        self._manifest = manifest
        self.receipt, self.receipt_bytes = receipt, envelope_json
        self.arbiter_public_key = arbiter_public_key
        return receipt

    def publication_bits(self) -> list[bool]:
        """Return b_i for every pair (True: version 1 is published), from the receipt's rho."""
        if self.receipt is None:
            raise StateError(f"vault {self.path} holds no receipt: escrow its root first")
        if self._bits is None:
            self._bits = publication_bits(self.root, self.receipt.rho, self.n_pairs)
        return list(self._bits)

    def texts(self) -> Iterator[tuple[int, TextChunk, list[str]]]:
        """Yield ``(start, texts, names)`` chunk by chunk of a text vault (each checked)."""
        if self.item_kind != "text":
            raise StateError(f"vault {self.path} holds {self.item_kind} items, not texts")
        for record in self._records:
            yield record.start, read_text_chunk(self.path, record), list(record.names)

    def published_texts(self) -> Iterator[tuple[int, list[str], list[str]]]:
        """Yield ``(start, published, names)``: version b_i of each text, by chunk."""
        bits = self.publication_bits()
        for start, chunk, names in self.texts():
            published = [
                second if bits[start + offset] else first
                for offset, (first, second) in enumerate(
                    zip(chunk.versions0, chunk.versions1, strict=True)
                )
            ]
            yield start, published, names

    def published_chunks(self) -> Iterator[tuple[int, Pixels, list[int | None], list[str]]]:
        """Yield ``(start, published, labels, names)``: version b_i of each item, by chunk."""
        bits = np.array(self.publication_bits(), dtype=bool)
        for record in self._records:
            pixels = self._read(record)
            chosen = bits[record.start : record.start + record.count]
            published = np.where(chosen[:, None, None, None], pixels[1], pixels[0])
            yield record.start, published, list(record.labels), list(record.names)

    # --- Helpers ---------------------------------------------------------------------------

    def _check_index(self, index: int) -> int:
        if isinstance(index, bool) or not isinstance(index, int | np.integer):
            raise ParameterError(f"a pair index must be an integer, got {type(index).__name__}")
        if not 0 <= index < self.n_pairs:
            raise ParameterError(f"pair {index} is not in [0, {self.n_pairs})")
        return int(index)

    def _chunk_of(self, index: int) -> tuple[ChunkRecord, StoredChunk | TextChunk]:
        ordinal = bisect.bisect_right(self._starts, index) - 1
        record = self._records[ordinal]
        if self._cached is None or self._cached[0] != ordinal:
            content: StoredChunk | TextChunk = (
                read_text_chunk(self.path, record)
                if self.item_kind == "text"
                else read_record(self.path, record, self.format_version)
            )
            self._cached = (ordinal, content)
        return record, self._cached[1]

    def _read(self, record: ChunkRecord) -> Pixels:
        if self.item_kind not in PIXEL_ITEM_KINDS:
            raise StateError(f"vault {self.path} holds {self.item_kind} items, not images")
        return read_record(self.path, record, self.format_version).pixels()


def commitment_tree(commitments: bytearray) -> MerkleTree:
    """Return the Merkle tree whose leaves are the packed 32-byte commitments, in order."""
    view = memoryview(commitments)
    return MerkleTree(view[offset : offset + 32] for offset in range(0, len(view), 32))


# --- The checks of Vault.open ----------------------------------------------------------------


def _require_vault_directory(path: Path) -> None:
    if not path.exists():
        raise InputError(f"there is no vault at {path}")
    if not path.is_dir():
        raise InputError(f"{path} is a file, not a vault directory")
    if not (path / MANIFEST_FILE).exists():
        if (path / JOURNAL_FILE).exists():
            raise StateError(f"vault {path} is not finished: resume its marking run")
        raise InputError(f"{path} is not a vault (it has no {MANIFEST_FILE})")


def _check_listing(path: Path, manifest: Manifest) -> None:
    """Every recorded file is present, and nothing else is."""
    present, directories, others = files.list_tree(path)
    if others:
        raise VaultIntegrityError(path, others[0], "is not a regular file or directory")
    if extra_directories := sorted(directories - {CHUNKS_DIR}):
        raise VaultIntegrityError(path, extra_directories[0], "is an unexpected directory")
    expected = set(manifest.files) | {MANIFEST_FILE}
    if missing := sorted(expected - present):
        raise VaultIntegrityError(path, missing[0], "is missing")
    if extra := sorted(present - expected):
        raise VaultIntegrityError(path, extra[0], _unexpected(extra[0], manifest))


def _unexpected(name: str, manifest: Manifest) -> str:
    if name in _RECEIPT_FILES and manifest.receipt_proof is None:
        return (
            "is not recorded in the manifest (left by an interrupted store_receipt, or "
            "added); remove receipt.json and arbiter.pub and store the receipt again"
        )
    if os.path.basename(name).startswith(TEMP_PREFIX):
        return "is a temporary file left by an interrupted write; remove it"
    return "is not recorded in the manifest"


def _check_secret_mode(path: Path) -> None:
    require_owner_only(path / SECRET_FILE, "the vault secret")


def _check_file_hash(path: Path, name: str, expected: bytes) -> None:
    try:
        digest = files.sha256_file(path / name)
    except OSError as exc:
        raise VaultIntegrityError(path, name, f"cannot be read: {exc.strerror}") from None
    if not hmac.compare_digest(digest, expected):
        raise VaultIntegrityError(path, name, "was modified (SHA-256 differs)")


def _check_journal(path: Path, manifest: Manifest, secret: bytes) -> list[ChunkRecord]:
    """Check the journal against the manifest and the secret; return its chunk records."""
    journal = read_journal(path)
    parameters = journal.parameters
    if journal.torn_bytes:
        raise VaultIntegrityError(path, JOURNAL_FILE, "ends in a torn record")
    if not hmac.compare_digest(secret_check(secret), parameters.secret_check):
        raise VaultIntegrityError(path, SECRET_FILE, "is not the secret the run started with")
    if parameters.item_kind not in VAULT_ITEM_KINDS:
        raise VaultIntegrityError(path, JOURNAL_FILE, f"item kind {parameters.item_kind!r}")
    recorded = (
        manifest.format_version,
        manifest.item_kind,
        manifest.n_pairs,
        encode(manifest.source),
    )
    started = (
        parameters.format_version,
        parameters.item_kind,
        parameters.n_items,
        encode(parameters.source),
    )
    if recorded != started or encode(manifest.config) != encode(parameters.config):
        raise VaultIntegrityError(path, MANIFEST_FILE, "disagrees with the journal's header")
    if journal.completed != manifest.n_pairs:
        raise VaultIntegrityError(path, JOURNAL_FILE, "does not cover every pair")
    expected = {SECRET_FILE, JOURNAL_FILE} | {record.file for record in journal.chunks}
    if manifest.receipt_proof is not None:
        expected |= _RECEIPT_FILES
    if set(manifest.files) != expected:
        raise VaultIntegrityError(path, MANIFEST_FILE, "lists other files than the journal")
    for record in journal.chunks:
        if manifest.files[record.file] != record.sha256:
            raise VaultIntegrityError(
                path, MANIFEST_FILE, f"records another SHA-256 for {record.file} than the journal"
            )
    return journal.chunks
