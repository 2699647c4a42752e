"""The manifest: what a finished vault holds, with the SHA-256 of every other file.

The manifest is the canonical encoding (spec §3) of one map, read strictly: exactly
the keys below, the vault format and spec versions checked first. It records the
item kind, the number of pairs, the source and marking configuration (copied from the
journal header), the Merkle root of the pair commitments, the SHA-256 of every file of
the vault but itself, and, once a receipt is stored, the arbiter's inclusion proof of
the receipt's log entry. It holds no time: the same run gives the same bytes.

The map carries its own ``checksum``, the SHA-256 of the canonical encoding of the map
without it. The checksum is not a secret-keyed MAC; it only tells a damaged or hand-
edited manifest apart from the files it lists, so that an error names the right file.
"""

from __future__ import annotations

import hmac
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Final

from twinaudit.protocol import SPEC_VERSION, limits
from twinaudit.protocol.encoding import Value, decode, encode
from twinaudit.protocol.errors import InputError, VaultIntegrityError
from twinaudit.protocol.hashing import sha256
from twinaudit.protocol.versioning import require_supported

from . import files
from .journal import require_format
from .layout import FORMAT_NAME, FORMAT_VERSION, MANIFEST_FILE, MAX_MANIFEST_BYTES

_KEYS: Final = frozenset(
    {
        "format",
        "format_version",
        "spec",
        "item_kind",
        "n_pairs",
        "source",
        "config",
        "root",
        "files",
        "receipt",
        "checksum",
    }
)


@dataclass(frozen=True)
class Manifest:
    """The parsed manifest of a finished vault."""

    item_kind: str
    n_pairs: int
    source: dict[str, Value]
    config: dict[str, Value]
    root: bytes
    files: dict[str, bytes]
    receipt_proof: list[bytes] | None = None
    format_version: int = FORMAT_VERSION

    def to_value(self) -> dict[str, Value]:
        """Return the manifest map."""
        receipt: Value = None
        if self.receipt_proof is not None:
            receipt = {"inclusion_proof": list[Value](self.receipt_proof)}
        return {
            "format": FORMAT_NAME,
            "format_version": self.format_version,
            "spec": SPEC_VERSION,
            "item_kind": self.item_kind,
            "n_pairs": self.n_pairs,
            "source": self.source,
            "config": self.config,
            "root": self.root,
            "files": dict[str, Value](self.files),
            "receipt": receipt,
        }

    def with_receipt(self, added: dict[str, bytes], proof: list[bytes]) -> Manifest:
        """Return this manifest with the receipt's files and inclusion proof added."""
        return replace(self, files={**self.files, **added}, receipt_proof=list(proof))

    def encode(self) -> bytes:
        """Return the manifest file's bytes (the map and its checksum)."""
        body = self.to_value()
        return encode(body | {"checksum": sha256(encode(body))})

    def write(self, vault: Path) -> None:
        """Write the manifest into ``vault`` atomically."""
        files.write_atomic(vault / MANIFEST_FILE, self.encode())


def read_manifest(vault: Path) -> Manifest:
    """Read and strictly parse the manifest of ``vault``.

    Raises VersionError for another format or spec version, VaultIntegrityError for
    anything else that is not a manifest this code wrote.
    """
    try:
        data = files.read_bounded(vault / MANIFEST_FILE, MAX_MANIFEST_BYTES)
    except OSError as exc:
        raise VaultIntegrityError(vault, MANIFEST_FILE, f"cannot be read: {exc.strerror}") from None
    if len(data) > MAX_MANIFEST_BYTES:
        raise VaultIntegrityError(vault, MANIFEST_FILE, f"is larger than {MAX_MANIFEST_BYTES}")
    try:
        value = decode(data, max_bytes=MAX_MANIFEST_BYTES, limit_sized=False)  # not a message
    except InputError as exc:
        raise VaultIntegrityError(vault, MANIFEST_FILE, f"is not canonical: {exc}") from None
    if not isinstance(value, dict):
        raise VaultIntegrityError(vault, MANIFEST_FILE, "is not a map")
    # A later format may lay out (and check) its manifest differently: refuse it first.
    version = require_format(
        value.get("format"), value.get("format_version"), f"{vault}/{MANIFEST_FILE}"
    )
    checksum = value.get("checksum")
    body = {key: item for key, item in value.items() if key != "checksum"}
    if not isinstance(checksum, bytes) or not hmac.compare_digest(checksum, sha256(encode(body))):
        raise VaultIntegrityError(vault, MANIFEST_FILE, "was modified (its checksum differs)")
    require_supported(value.get("spec"), f"{vault}/{MANIFEST_FILE}")
    try:
        return replace(_parse(value), format_version=version)
    except ValueError as exc:
        raise VaultIntegrityError(vault, MANIFEST_FILE, str(exc)) from None


def _parse(value: dict[str, Value]) -> Manifest:
    missing, extra = _KEYS - value.keys(), value.keys() - _KEYS
    if missing or extra:
        raise ValueError(f"keys: missing {sorted(missing)}, unexpected {sorted(extra)}")
    item_kind, n_pairs = value["item_kind"], value["n_pairs"]
    source, config, root = value["source"], value["config"], value["root"]
    if not isinstance(item_kind, str):
        raise ValueError("item_kind must be a text string")
    if isinstance(n_pairs, bool) or not isinstance(n_pairs, int) or n_pairs < 1:
        raise ValueError("n_pairs must be a positive integer")
    if not isinstance(source, dict) or not isinstance(config, dict):
        raise ValueError("source and config must be maps")
    return Manifest(
        item_kind=item_kind,
        n_pairs=n_pairs,
        source=source,
        config=config,
        root=_hash(root, "root"),
        files=_files(value["files"]),
        receipt_proof=_receipt(value["receipt"]),
    )


def _hash(value: Value, what: str) -> bytes:
    if not isinstance(value, bytes) or len(value) != limits.HASH_BYTES:
        raise ValueError(f"{what} must be a {limits.HASH_BYTES}-byte hash")
    return value


def _files(value: Value) -> dict[str, bytes]:
    if not isinstance(value, dict):
        raise ValueError("files must be a map from file name to SHA-256")
    return {name: _hash(digest, f"the SHA-256 of {name}") for name, digest in value.items()}


def _receipt(value: Value) -> list[bytes] | None:
    if value is None:
        return None
    if not isinstance(value, dict) or set(value) != {"inclusion_proof"}:
        raise ValueError("receipt must be null or a map with exactly inclusion_proof")
    proof = value["inclusion_proof"]
    if not isinstance(proof, list) or len(proof) > limits.MAX_PROOF_HASHES:
        raise ValueError(f"the inclusion proof must be at most {limits.MAX_PROOF_HASHES} hashes")
    return [_hash(element, "an inclusion proof hash") for element in proof]
