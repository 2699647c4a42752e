"""The openings file: the opened pairs of a verdict, for re-executing its queries (spec §12.1).

A transcript records each opened pair's version digests, not its versions, so a
replay needs no item (spec §12). Re-executing the model on the claim's queries
(``verifier reexecute``) needs the items: the owner, who holds the vault, gives the
openings of the verdict's opened pairs in an openings file, the canonical encoding
(spec §3) of

    {"type": "openings", "spec": "0.2", "root": <32 bytes>,
     "pairs": [{"index": i, "salt": <32 bytes>, "version0": <bytes>, "version1": <bytes>,
                "proof": [<32 bytes>, …]}, …]}

``root`` is the escrowed root, ``pairs`` the openings in the verdict's order. Its
openings are checked against the verdict's root (commitment and inclusion proof,
§6.1, §6.2) and against the version digests its transcript records, so a file that
does not hold the very items the claim queried is refused. Reading is strict and
bounded (:data:`MAX_OPENINGS_BYTES`); every failure is ``invalid-input``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from twinaudit.protocol import SPEC_VERSION, limits
from twinaudit.protocol.commitment import PairOpening
from twinaudit.protocol.encoding import Value, decode, encode
from twinaudit.protocol.errors import InputError, LimitExceededError

#: Largest openings file read (the transcript's cap).
MAX_OPENINGS_BYTES: Final = 256 * 1024 * 1024
#: Keys of the file's map and of each pair.
OPENINGS_KEYS: Final = frozenset({"type", "spec", "root", "pairs"})
PAIR_KEYS: Final = frozenset({"index", "salt", "version0", "version1", "proof"})


@dataclass(frozen=True)
class OpenedPair:
    """One pair's opening and its inclusion proof."""

    index: int
    opening: PairOpening
    proof: list[bytes]


def encode_openings(root: bytes, pairs: list[OpenedPair]) -> bytes:
    """Return the openings file of ``pairs`` under ``root`` (canonical bytes)."""
    value: dict[str, Value] = {
        "type": "openings",
        "spec": SPEC_VERSION,
        "root": root,
        "pairs": [
            {
                "index": pair.index,
                "salt": pair.opening.salt,
                "version0": pair.opening.version0,
                "version1": pair.opening.version1,
                "proof": list[Value](pair.proof),
            }
            for pair in pairs
        ],
    }
    return encode(value)


def decode_openings(data: bytes) -> tuple[bytes, dict[int, OpenedPair]]:
    """Read an openings file strictly; return its root and its pairs by index."""
    if len(data) > MAX_OPENINGS_BYTES:
        raise LimitExceededError("openings file size", len(data), MAX_OPENINGS_BYTES)
    value = decode(data, max_bytes=MAX_OPENINGS_BYTES)
    if not isinstance(value, dict) or set(value) != OPENINGS_KEYS:
        raise InputError(f"an openings file is a map with the keys {sorted(OPENINGS_KEYS)}")
    if value["type"] != "openings" or value["spec"] != SPEC_VERSION:
        raise InputError(f"not an openings file of spec {SPEC_VERSION}")
    root, pairs = value["root"], value["pairs"]
    if not isinstance(root, bytes) or len(root) != limits.HASH_BYTES:
        raise InputError("the openings file's root must be 32 bytes")
    if not isinstance(pairs, list):
        raise InputError("the openings file's pairs must be a list")
    found: dict[int, OpenedPair] = {}
    for pair in pairs:
        if not isinstance(pair, dict) or set(pair) != PAIR_KEYS:
            raise InputError(f"an opened pair is a map with the keys {sorted(PAIR_KEYS)}")
        index, salt, proof = pair["index"], pair["salt"], pair["proof"]
        versions = pair["version0"], pair["version1"]
        if (
            not isinstance(index, int)
            or isinstance(index, bool)
            or index < 0
            or index in found
            or not isinstance(salt, bytes)
            or not all(isinstance(v, bytes) for v in versions)
            or not isinstance(proof, list)
            or not all(isinstance(h, bytes) and len(h) == limits.HASH_BYTES for h in proof)
        ):
            raise InputError(f"opened pair {index!r} is malformed (or given twice)")
        opening = PairOpening(salt, versions[0], versions[1])  # type: ignore[arg-type]
        found[index] = OpenedPair(index, opening, list(proof))  # type: ignore[arg-type]
    return root, found
