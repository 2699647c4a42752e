"""The protocol's deterministic pseudo-random generator (spec §5).

Every random choice the verifier replays — the without-replacement order of pairs,
tie-breaking coins, augmentation parameters, query shuffles, publication bits — is
drawn from a :class:`Prg` stream. A stream is named by a 32-byte seed and a text
label and is the RFC 8439 ChaCha20 keystream under

    key   = tagged_hash("prg-key", [seed, label])
    nonce = 12 zero bytes, initial block counter = 0.

Numbers are drawn from the stream's bytes in order (spec §5.2). No numpy, torch or
Python global RNG is ever involved, so any implementation with ChaCha20 and SHA-256
reproduces the same draws.
"""

from __future__ import annotations

from collections.abc import Iterator, MutableSequence
from typing import TypeVar

from cryptography.hazmat.primitives.ciphers import Cipher, algorithms

from . import limits
from .errors import InputError, LimitExceededError, ParameterError
from .hashing import tagged_hash

T = TypeVar("T")

_U64 = 1 << 64
_CHUNK = 4096
_BLOCK = 64


def _check_seed(seed: bytes) -> bytes:
    if not isinstance(seed, bytes) or len(seed) != limits.HASH_BYTES:
        raise InputError(f"PRG seed must be {limits.HASH_BYTES} bytes")
    return seed


def _check_label(label: str) -> str:
    if not isinstance(label, str):
        raise InputError("PRG label must be a text string")
    if len(label.encode("utf-8")) > limits.MAX_PRG_LABEL_BYTES:
        raise LimitExceededError(
            "PRG label length", len(label.encode("utf-8")), limits.MAX_PRG_LABEL_BYTES
        )
    return label


def stream_key(seed: bytes, label: str) -> bytes:
    """Return the ChaCha20 key of the stream named by ``seed`` and ``label``."""
    return tagged_hash("prg-key", [_check_seed(seed), _check_label(label)])


def _keystream(key: bytes, block_counter: int) -> Cipher[None]:
    # cryptography's 16-byte ChaCha20 "nonce" is the RFC 8439 state words 12..15:
    # a 32-bit little-endian block counter followed by the 96-bit nonce (here zero).
    iv = block_counter.to_bytes(4, "little") + bytes(12)
    return Cipher(algorithms.ChaCha20(key, iv), mode=None)


class Prg:
    """A named deterministic stream of bytes, integers, floats and coins."""

    def __init__(self, seed: bytes, label: str) -> None:
        """Open the stream named by ``seed`` (32 bytes) and ``label``."""
        self.label = label
        self._encryptor = _keystream(stream_key(seed, label), 0).encryptor()
        self._buffer = b""
        self._pos = 0
        self.consumed = 0

    def read(self, n: int) -> bytes:
        """Return the next ``n`` bytes of the keystream."""
        if n < 0:
            raise ParameterError("cannot read a negative number of bytes")
        if self.consumed + n > limits.MAX_PRG_STREAM_BYTES:
            raise LimitExceededError(
                "PRG stream length", self.consumed + n, limits.MAX_PRG_STREAM_BYTES
            )
        while len(self._buffer) - self._pos < n:
            self._buffer = self._buffer[self._pos :] + self._encryptor.update(bytes(max(_CHUNK, n)))
            self._pos = 0
        out = self._buffer[self._pos : self._pos + n]
        self._pos += n
        self.consumed += n
        return out

    def u64(self) -> int:
        """Return the next 8 bytes as a little-endian unsigned integer."""
        return int.from_bytes(self.read(8), "little")

    def randbelow(self, n: int) -> int:
        """Return an unbiased integer in ``[0, n)`` for ``1 <= n <= 2**64`` (spec §5.2).

        Draws ``x = u64()`` and rejects it while ``x >= 2**64 - (2**64 mod n)``;
        returns ``x mod n``.
        """
        if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= _U64:
            raise ParameterError(f"randbelow bound must be in [1, 2**64], got {n!r}")
        limit = _U64 - (_U64 % n)
        while True:
            x = self.u64()
            if x < limit:
                return x % n

    def randint(self, low: int, high: int) -> int:
        """Return an unbiased integer in ``[low, high]`` (inclusive)."""
        if high < low:
            raise ParameterError(f"empty range [{low}, {high}]")
        return low + self.randbelow(high - low + 1)

    def coin(self) -> bool:
        """Return a fair coin: ``randbelow(2) == 1``."""
        return self.randbelow(2) == 1

    def uniform(self) -> float:
        """Return a float64 in ``[0, 1)``: ``(u64() >> 11) * 2**-53`` (exact)."""
        return (self.u64() >> 11) * (1.0 / (1 << 53))

    def uniform_range(self, low: float, high: float) -> float:
        """Return ``low + (high - low) * uniform()`` evaluated in IEEE 754 binary64."""
        if not low <= high:
            raise ParameterError(f"empty range [{low}, {high}]")
        return low + (high - low) * self.uniform()

    def shuffle(self, items: MutableSequence[T]) -> None:
        """Shuffle ``items`` in place by the forward Fisher–Yates of spec §5.3."""
        n = len(items)
        for t in range(n - 1):
            j = t + self.randbelow(n - t)
            items[t], items[j] = items[j], items[t]


def without_replacement(seed: bytes, n: int, label: str = "order") -> Iterator[int]:
    """Yield a uniformly random permutation of ``0..n-1`` lazily (spec §5.3).

    Forward Fisher–Yates: at step ``t`` draw ``j = t + randbelow(n - t)``, swap
    positions ``t`` and ``j`` of the identity array, and emit position ``t``. The
    first ``k`` outputs depend only on the first ``k`` draws, and memory grows with
    the number of outputs consumed, not with ``n``.
    """
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise ParameterError(f"population size must be a non-negative integer, got {n!r}")
    if n > limits.MAX_PAIRS:
        raise LimitExceededError("population size", n, limits.MAX_PAIRS)
    prg = Prg(seed, label)
    moved: dict[int, int] = {}
    for t in range(n):
        j = t + prg.randbelow(n - t)
        value_j = moved.get(j, j)
        moved[j] = moved.get(t, t)
        moved.pop(t, None)
        yield value_j


def bit_stream(seed: bytes, label: str, start: int, count: int) -> list[bool]:
    """Return bits ``start .. start+count-1`` of a stream read as a bit string (spec §5.4).

    Bit ``i`` is ``(K[i // 8] >> (i % 8)) & 1`` where ``K`` is the keystream of the
    stream named by ``seed``/``label``; any bit can be computed without the ones
    before it (random access through the ChaCha20 block counter).
    """
    if start < 0 or count < 0:
        raise ParameterError("bit positions must be non-negative")
    if count == 0:
        return []
    end = start + count
    if (end + 7) // 8 > limits.MAX_PRG_STREAM_BYTES:
        raise LimitExceededError("PRG stream length", (end + 7) // 8, limits.MAX_PRG_STREAM_BYTES)
    first_byte, last_byte = start // 8, (end - 1) // 8
    block = first_byte // _BLOCK
    skip = first_byte - block * _BLOCK
    encryptor = _keystream(stream_key(seed, label), block).encryptor()
    raw = encryptor.update(bytes(skip + last_byte - first_byte + 1))[skip:]
    return [bool((raw[i // 8 - first_byte] >> (i % 8)) & 1) for i in range(start, end)]
