"""A request's openings split by bytes and reassembled (spec §10.2 step 4, wire.openings)."""

from __future__ import annotations

import pytest

from twinaudit.protocol.errors import InputError, LimitExceededError
from twinaudit.wire.openings import (
    MAX_VERSION_BYTES,
    ReceivedPair,
    collect_openings,
    opening_messages,
)
from twinaudit.wire.verifier.v1 import verifier_pb2 as pb


def _pair(index: int, size: int) -> ReceivedPair:
    version0 = bytes((index + n) % 251 for n in range(size))
    version1 = bytes((index + 7 * n) % 253 for n in range(size + 3))
    return ReceivedPair(index, bytes([index]) * 32, version0, version1, [bytes(32)] * 3)


def _collect(messages: list[pb.ClaimMessage], count: int, **kwargs: int) -> list[ReceivedPair]:
    stream = iter(messages)
    kwargs.setdefault("min_part_bytes", 512)  # the budgets here are far below 1 MiB
    pairs = collect_openings(None, lambda: next(stream, None), count, **kwargs)
    assert next(stream, None) is None, "messages left after the request"
    return pairs


@pytest.mark.parametrize("sizes", [[10, 10, 10], [5000, 10, 9000, 3], [3000], [1, 20000, 1]])
@pytest.mark.parametrize("budget", [1024, 4096, 1 << 20])
def test_any_split_reassembles_the_pairs_in_order(sizes: list[int], budget: int) -> None:
    pairs = [_pair(i, size) for i, size in enumerate(sizes)]
    messages = list(opening_messages(pairs, budget))
    assert all(m.ByteSize() <= budget for m in messages)
    assert _collect(messages, len(pairs)) == pairs
    if budget == 1 << 20:  # everything fits one message: the older, single-message form
        assert len(messages) == 1 and not messages[0].openings.more
    elif max(sizes) > budget:
        assert any(m.WhichOneof("kind") == "part" for m in messages)


def test_the_single_message_form_of_older_clients_is_valid() -> None:
    pairs = [_pair(i, 50) for i in range(3)]
    message = pb.ClaimMessage(
        openings=pb.Openings(
            pairs=[
                pb.PairOpening(
                    index=p.index,
                    salt=p.salt,
                    version0=p.version0,
                    version1=p.version1,
                    proof=p.proof,
                )
                for p in pairs
            ]
        )
    )
    assert _collect([message], 3) == pairs


def _header(**fields: object) -> pb.ClaimMessage:
    base: dict[str, object] = {
        "index": 0,
        "salt": bytes(32),
        "version0_size": 4,
        "version1_size": 4,
    }
    base.update(fields)
    return pb.ClaimMessage(openings=pb.Openings(pairs=[pb.PairOpening(**base)]))  # type: ignore[arg-type]


def _part(data: bytes) -> pb.ClaimMessage:
    return pb.ClaimMessage(part=pb.OpeningPart(data=data))


BROKEN = {
    "fewer pairs, no more": ([pb.ClaimMessage(openings=pb.Openings(pairs=[pb.PairOpening()]))], 2),
    "all pairs, more announced": (
        [pb.ClaimMessage(openings=pb.Openings(pairs=[pb.PairOpening()], more=True))],
        1,
    ),
    "more pairs than requested": (
        [pb.ClaimMessage(openings=pb.Openings(pairs=[pb.PairOpening()] * 3))],
        2,
    ),
    "an empty Openings": ([pb.ClaimMessage(openings=pb.Openings())], 1),
    "a part where pairs are due": ([_part(b"x")], 1),
    "a start where parts are due": ([_header(), pb.ClaimMessage(start=pb.ClaimStart())], 1),
    "an empty part": ([_header(), _part(b"")], 1),
    "parts that overrun": ([_header(), _part(b"123456789")], 1),
    "parts that stop short": ([_header(), _part(b"1234")], 1),
    "a small part before the pair's last": ([_header(), _part(b"1234"), _part(b"5678")], 1),
    "a split pair with bytes inline": ([_header(version0=b"ab"), _part(b"12345678")], 1),
    "a split pair with a zero size": ([_header(version1_size=0), _part(b"1234")], 1),
    "a split pair before another": (
        [
            pb.ClaimMessage(
                openings=pb.Openings(
                    pairs=[pb.PairOpening(version0_size=1, version1_size=1), pb.PairOpening()]
                )
            )
        ],
        2,
    ),
}


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_a_malformed_request_is_invalid_input(case: str) -> None:
    messages, count = BROKEN[case]
    stream = iter(messages)
    with pytest.raises(InputError) as info:
        collect_openings(None, lambda: next(stream, None), count)
    assert info.value.code == "invalid-input"


def test_sizes_are_refused_before_anything_is_buffered() -> None:
    asked = []

    def receive() -> pb.ClaimMessage | None:
        asked.append(1)
        return None

    huge = _header(version0_size=MAX_VERSION_BYTES + 1)
    with pytest.raises(LimitExceededError):
        collect_openings(huge, receive, 1)
    with pytest.raises(LimitExceededError):
        collect_openings(
            _header(version0_size=600, version1_size=600), receive, 1, max_request_bytes=1000
        )
    assert not asked, "a part was read before the sizes were checked"
    pairs = [_pair(i, 400) for i in range(3)]
    with pytest.raises(LimitExceededError):
        _collect(list(opening_messages(pairs)), 3, max_request_bytes=2000)
