"""Names, modes and size caps of the files in a vault directory (see the package docstring)."""

from __future__ import annotations

import re
from typing import Final

#: The vault format these modules write; ``FORMAT_VERSION`` bumps on any change. Format 5
#: is format 4 whose chunk files (magic ``TWPAIRS5``) may store a photo's mark as the
#: small field it was carried back from, and only what that field's prediction misses
#: (:mod:`twinaudit.owner.vault.mark_fields`); format 4 is format 3 whose chunk records
#: may carry the ICC colour profile each photo was read with, which publication writes
#: back (:mod:`twinaudit.owner.vault.journal`), and whose chunk files may keep a photo
#: read from a HEIF file as that file; format 3 keeps a photo read from a JPEG as that
#: JPEG plus a correction where that is smaller (:mod:`twinaudit.owner.vault.jpeg_pairs`);
#: format 2 stores the pixels of image chunks compactly
#: (:mod:`twinaudit.owner.vault.pair_codec`); format 1 stored them raw (``.npy``). All are
#: read; an unfinished run continues in its format.
FORMAT_NAME: Final = "twinaudit-vault"
FORMAT_VERSION: Final = 5
#: The vault formats these modules read (and a resumed marking run continues in).
READABLE_FORMAT_VERSIONS: Final = (1, 2, 3, 4, 5)
#: The first vault format whose chunk files may keep a photo as its HEIF file.
HEIF_FROM_FORMAT: Final = 4
#: The first vault format whose chunk files' items may carry a mark field.
FIELDS_FROM_FORMAT: Final = 5

#: The 32-byte vault secret (salts and the marking seed derive from it).
SECRET_FILE: Final = "secret.key"
#: The append-only journal: a header record, then one record per durable chunk.
JOURNAL_FILE: Final = "journal"
#: The manifest, written when the marking run finishes (its presence = finished).
MANIFEST_FILE: Final = "manifest.msgpack"
#: The arbiter's signed escrow receipt, exactly as received (DSSE JSON).
RECEIPT_FILE: Final = "receipt.json"
#: The arbiter's public key (SubjectPublicKeyInfo PEM) the receipt verifies under.
ARBITER_KEY_FILE: Final = "arbiter.pub"
#: The directory of chunk files.
CHUNKS_DIR: Final = "chunks"

#: Mode of every file of a vault, and of its directories.
FILE_MODE: Final = 0o600
DIR_MODE: Final = 0o700

#: Prefix of the temporary files of an atomic write (leftovers of a crash are removed).
TEMP_PREFIX: Final = ".tmp-"

#: Length of the vault secret, in bytes.
SECRET_BYTES: Final = 32
#: Largest manifest accepted.
MAX_MANIFEST_BYTES: Final = 64 * 1024 * 1024
#: Largest journal record accepted (a chunk's labels and names dominate it).
MAX_RECORD_BYTES: Final = 16 * 1024 * 1024
#: Largest chunk file (both versions of a batch): bounds the memory any read needs.
MAX_CHUNK_BYTES: Final = 512 * 1024 * 1024
#: Largest encoded ``source`` or ``config`` map.
MAX_PARAMETERS_BYTES: Final = 1024 * 1024
#: Longest item name, in UTF-8 bytes.
MAX_NAME_BYTES: Final = 1024
#: Largest ICC colour profile an item carries (display and camera profiles take a few
#: KiB; a printer's, with large tables, a few hundred).
MAX_PROFILE_BYTES: Final = 1024 * 1024
#: Largest receipt file (the protocol's cap on receipt envelopes is smaller).
MAX_RECEIPT_FILE_BYTES: Final = 64 * 1024
#: Read files in pieces of this size when hashing them.
READ_BLOCK_BYTES: Final = 1024 * 1024

#: Suffix of the pixel chunks of format 1 (raw ``.npy``) and of formats 2 and 3 (compact).
RAW_CHUNK_SUFFIX: Final = "npy"
COMPACT_CHUNK_SUFFIX: Final = "pairs"

_CHUNK_NAME_RE: Final = re.compile(r"\Achunks/[0-9]{6,}\.(npy|pairs|msgpack)\Z")


def chunk_file(ordinal: int, item_kind: str = "image", format_version: int = FORMAT_VERSION) -> str:
    """Return the relative path of chunk number ``ordinal`` (0, 1, 2, ...).

    Image and captioned-image chunks hold pixels (``.pairs`` in formats 2 and 3, ``.npy``
    in format 1); text chunks hold the canonical encoding of their texts (``.msgpack``).
    """
    suffix = COMPACT_CHUNK_SUFFIX if format_version >= 2 else RAW_CHUNK_SUFFIX
    if item_kind == "text":
        suffix = "msgpack"
    return f"{CHUNKS_DIR}/{ordinal:06d}.{suffix}"


def is_chunk_file(relative: str) -> bool:
    """Tell whether ``relative`` has the shape of a chunk file's path."""
    return bool(_CHUNK_NAME_RE.match(relative))
