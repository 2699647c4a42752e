"""A request's openings on the claim stream, split by bytes (spec §10.2 step 4, transport).

An owner answers an ``OpeningRequest`` with the requested pairs in order, in one
``Openings`` message or in several, each under the message cap
(:data:`twinaudit.wire.transport.MAX_MESSAGE_BYTES`). A pair too large for one message is sent
in parts: a ``PairOpening`` that declares its versions' sizes (``version0_size``,
``version1_size``) and ends its message, then ``OpeningPart`` messages that carry the
bytes of version 0 and then version 1, in order. How a request is split changes no
check, record or verdict: the verifier reassembles exactly the pairs the owner sent.

:func:`opening_messages` is the owner's side (it splits), :func:`collect_openings` the
verifier's (it reassembles, checking every size before it buffers anything). The
older form, one ``Openings`` message per request with every version whole, is the
case of a request that fits one message, and stays valid.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Final

from twinaudit.protocol import limits
from twinaudit.protocol.errors import InputError, LimitExceededError
from twinaudit.wire.transport import MAX_MESSAGE_BYTES
from twinaudit.wire.verifier.v1 import verifier_pb2 as pb

#: Room kept in every message for its framing (message tags and lengths).
MESSAGE_SLACK: Final = 64 * 1024
#: Most bytes of a message an owner fills with openings or parts.
MESSAGE_BUDGET: Final = MAX_MESSAGE_BYTES - MESSAGE_SLACK
#: Longest version (an item's canonical encoding, spec §6.3): the decoder's cap.
MAX_VERSION_BYTES: Final = limits.MAX_ENCODED_BYTES
#: Fewest bytes of an OpeningPart that is not its pair's last: a pair's 128 MiB cannot be
#: dripped a few bytes a message (each message costs the verifier a call and a copy).
MIN_PART_BYTES: Final = 1024 * 1024
#: Most bytes of one request's openings (salts, versions and proofs of all its pairs)
#: that a verifier buffers (spec §10.2 step 4): above it, ``limit-exceeded``.
MAX_REQUEST_OPENING_BYTES: Final = 2 * 1024 * 1024 * 1024


@dataclass(frozen=True)
class ReceivedPair:
    """One pair of a request as the owner sent it, its versions whole."""

    index: int
    salt: bytes
    version0: bytes
    version1: bytes
    proof: list[bytes]


def opening_bytes(pair: ReceivedPair) -> int:
    """Return the bytes a pair's opening holds (what MAX_REQUEST_OPENING_BYTES counts)."""
    return len(pair.salt) + len(pair.version0) + len(pair.version1) + sum(map(len, pair.proof))


def opening_messages(
    pairs: Sequence[ReceivedPair], budget: int = MESSAGE_BUDGET
) -> Iterator[pb.ClaimMessage]:
    """Yield the claim messages that carry ``pairs`` in order, each under ``budget`` bytes.

    Pairs go whole into ``Openings`` messages, as many in each as fit; a pair that does
    not fit a message of its own is sent in parts (its header ends a message, then
    ``OpeningPart`` messages of at most ``budget`` bytes each).
    """
    if budget < 1024:
        raise InputError(f"a message budget of {budget} bytes is too small")
    if not pairs:
        raise InputError("a request's openings hold at least one pair")
    current = pb.Openings()
    for position, pair in enumerate(pairs):
        whole = pb.PairOpening(
            index=pair.index,
            salt=pair.salt,
            version0=pair.version0,
            version1=pair.version1,
            proof=pair.proof,
        )
        if whole.ByteSize() + 16 <= budget:
            if current.ByteSize() + whole.ByteSize() + 16 > budget:
                yield _more(current)
                current = pb.Openings()
            current.pairs.append(whole)
            continue
        header = pb.PairOpening(
            index=pair.index,
            salt=pair.salt,
            proof=pair.proof,
            version0_size=len(pair.version0),
            version1_size=len(pair.version1),
        )
        if current.pairs and current.ByteSize() + header.ByteSize() + 16 > budget:
            yield _more(current)
            current = pb.Openings()
        current.pairs.append(header)
        current.more = position < len(pairs) - 1
        yield pb.ClaimMessage(openings=current)
        current = pb.Openings()
        yield from _parts((pair.version0, pair.version1), budget)
    if current.pairs:
        yield pb.ClaimMessage(openings=current)


def _more(openings: pb.Openings) -> pb.ClaimMessage:
    """Return ``openings`` as a message that more of its request's follow."""
    openings.more = True
    return pb.ClaimMessage(openings=openings)


def _parts(versions: tuple[bytes, bytes], budget: int) -> Iterator[pb.ClaimMessage]:
    """Yield OpeningPart messages carrying ``versions`` in order, ``budget`` bytes at most."""
    size = budget - 16
    carry = b""
    for version in versions:
        view = memoryview(version)
        start = 0
        if carry:
            start = size - len(carry)
            yield pb.ClaimMessage(part=pb.OpeningPart(data=carry + bytes(view[:start])))
            carry = b""
        while start < len(view):
            chunk = bytes(view[start : start + size])
            start += len(chunk)
            if len(chunk) == size:
                yield pb.ClaimMessage(part=pb.OpeningPart(data=chunk))
            else:
                carry = chunk
    if carry:
        yield pb.ClaimMessage(part=pb.OpeningPart(data=carry))


def collect_openings(
    first: pb.ClaimMessage | None,
    receive: Callable[[], pb.ClaimMessage | None],
    count: int,
    *,
    max_request_bytes: int = MAX_REQUEST_OPENING_BYTES,
    min_part_bytes: int = MIN_PART_BYTES,
) -> list[ReceivedPair]:
    """Reassemble the ``count`` pairs of one request from ``first`` and the messages after it.

    ``receive()`` returns the stream's next message (None when it ended). Raises
    ``InputError`` for a message out of place (not ``Openings`` where pairs are due, not
    ``OpeningPart`` where a pair's parts are due, an empty message, more pairs than
    requested, parts that overrun their pair, a pair in parts that is not its message's
    last, a part under ``min_part_bytes`` that is not its pair's last) and
    ``LimitExceededError`` for a version above MAX_VERSION_BYTES or a request above
    ``max_request_bytes``, each checked before the bytes are buffered.
    """
    pairs: list[ReceivedPair] = []
    total = 0
    message = first
    while len(pairs) < count:
        if message is None:
            message = receive()
        if message is None:
            raise InputError(f"the stream ended after {len(pairs)} of {count} requested openings")
        if message.WhichOneof("kind") != "openings":
            raise InputError("expected the requested openings")
        got, more = message.openings.pairs, message.openings.more
        if not got:
            raise InputError("an Openings message holds no pair")
        sent_count = len(pairs) + len(got)
        if sent_count > count or (sent_count == count) == more or (not more and sent_count < count):
            raise InputError(
                f"openings for {sent_count} pairs{' and more' if more else ''}, "
                f"{count} requested in that order"
            )
        for position, sent in enumerate(got):
            split = bool(sent.version0_size or sent.version1_size)
            if split and position != len(got) - 1:
                raise InputError("a pair sent in parts must end its Openings message")
            if split:
                declared = len(sent.salt) + sum(map(len, sent.proof))
                declared += int(sent.version0_size) + int(sent.version1_size)
                if total + declared > max_request_bytes:
                    raise LimitExceededError(
                        "bytes of a request's openings", total + declared, max_request_bytes
                    )
            pair = (
                _reassemble(sent, receive, min_part_bytes)
                if split
                else ReceivedPair(
                    int(sent.index),
                    bytes(sent.salt),
                    bytes(sent.version0),
                    bytes(sent.version1),
                    [bytes(h) for h in sent.proof],
                )
            )
            for version in (pair.version0, pair.version1):
                if len(version) > MAX_VERSION_BYTES:
                    raise LimitExceededError("bytes of a version", len(version), MAX_VERSION_BYTES)
            total += opening_bytes(pair)
            if total > max_request_bytes:
                raise LimitExceededError("bytes of a request's openings", total, max_request_bytes)
            pairs.append(pair)
        message = None
    return pairs


def _reassemble(
    header: pb.PairOpening, receive: Callable[[], pb.ClaimMessage | None], min_part_bytes: int
) -> ReceivedPair:
    """Read the OpeningPart messages of the pair ``header`` announces; return it whole."""
    sizes = (int(header.version0_size), int(header.version1_size))
    if header.version0 or header.version1:
        raise InputError("a pair sent in parts carries its versions in OpeningPart messages")
    if min(sizes) < 1:
        raise InputError("a pair sent in parts declares both versions' sizes")
    for size in sizes:
        if size > MAX_VERSION_BYTES:
            raise LimitExceededError("bytes of a version", size, MAX_VERSION_BYTES)
    data = bytearray()
    want = sizes[0] + sizes[1]
    while len(data) < want:
        message = receive()
        if message is None:
            raise InputError(f"the stream ended inside pair {int(header.index)}'s parts")
        if message.WhichOneof("kind") != "part":
            raise InputError(f"expected the parts of pair {int(header.index)}")
        chunk = message.part.data
        if not chunk:
            raise InputError("an OpeningPart message holds no bytes")
        if len(data) + len(chunk) > want:
            raise InputError(f"pair {int(header.index)}'s parts overrun its declared sizes")
        if len(chunk) < min_part_bytes and len(data) + len(chunk) < want:
            raise InputError(
                f"a part of {len(chunk)} bytes that is not pair {int(header.index)}'s last: "
                f"parts hold at least {min_part_bytes} bytes"
            )
        data += chunk
    return ReceivedPair(
        int(header.index),
        bytes(header.salt),
        bytes(data[: sizes[0]]),
        bytes(data[sizes[0] :]),
        [bytes(h) for h in header.proof],
    )
