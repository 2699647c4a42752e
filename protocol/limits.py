"""Named size caps (spec §2.3). Every input the protocol accepts is bounded by one of these.

A cap is part of the protocol: a conforming implementation MUST reject inputs above
it, so that two implementations agree on which inputs are acceptable.
"""

from __future__ import annotations

from typing import Final

from .errors import InputError, LimitExceededError

#: Length in bytes of every protocol hash (SHA-256).
HASH_BYTES: Final = 32

#: Length in bytes of a commitment salt.
SALT_BYTES: Final = 32

#: Length in bytes of arbiter randomness (rho) carried in an escrow receipt.
RHO_BYTES: Final = 32

#: Largest canonical encoding accepted by a decoder unless the caller says less.
MAX_ENCODED_BYTES: Final = 64 * 1024 * 1024

#: Deepest nesting of arrays/maps in a canonical encoding.
MAX_NESTING_DEPTH: Final = 32

#: Longest text string (in UTF-8 bytes) in a canonical encoding.
MAX_STR_BYTES: Final = 1024 * 1024

#: Longest byte string in a canonical encoding: the pixels of the largest image an item
#: may hold (4096 × 4096 × 3 intensities, spec §6.3).
MAX_BIN_BYTES: Final = 48 * 1024 * 1024

#: Most elements of one array, or entries of one map, in a canonical encoding.
MAX_CONTAINER_ITEMS: Final = 1 << 24

#: Sized values (arrays, maps, text strings and byte strings, map keys included) that any
#: encoding may hold, whatever its length: see :func:`max_sized_values`.
SIZED_VALUES_BASE: Final = 8192

#: Beyond :data:`SIZED_VALUES_BASE`, one more sized value per this many encoded bytes.
BYTES_PER_SIZED_VALUE: Final = 64


def max_sized_values(size: int) -> int:
    """Return MAX_SIZED_VALUES for an encoding of ``size`` bytes (spec §2.3, §3.3).

    A decoder builds an object for every sized value, of some tens of bytes even when
    the value takes one byte (an empty array) or three (a two-letter string); this cap
    keeps those objects to a small multiple of the input. Every message of the protocol
    stays far below it.
    """
    return SIZED_VALUES_BASE + size // BYTES_PER_SIZED_VALUE


#: Most pairs one escrow record (one Merkle tree of commitments) may hold.
MAX_PAIRS: Final = 1 << 24

#: Most hashes in one Merkle inclusion or consistency proof (trees up to 2**64 leaves).
MAX_PROOF_HASHES: Final = 65

#: Longest PRG label in UTF-8 bytes.
MAX_PRG_LABEL_BYTES: Final = 256

#: Most bytes one PRG stream may produce (ChaCha20 block counter stays far from wrap).
MAX_PRG_STREAM_BYTES: Final = 1 << 36

#: Longest envelope payload type in UTF-8 bytes.
MAX_PAYLOAD_TYPE_BYTES: Final = 256

#: Largest signed envelope payload.
MAX_ENVELOPE_PAYLOAD_BYTES: Final = 16 * 1024 * 1024

#: Most signatures one envelope may carry.
MAX_SIGNATURES: Final = 16


def utf8_length(text: str, what: str, limit: int) -> int:
    """Return the UTF-8 length of ``text``, refusing text above ``limit`` bytes.

    Raises:
        InputError: ``text`` is not valid Unicode (it holds a lone surrogate).
        LimitExceededError: it encodes to more than ``limit`` bytes.

    """
    try:
        size = len(text.encode("utf-8"))
    except UnicodeEncodeError:
        raise InputError(f"{what} is not valid Unicode text") from None
    if size > limit:
        raise LimitExceededError(f"{what} length in UTF-8 bytes", size, limit)
    return size
