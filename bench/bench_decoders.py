"""Decoder amplification: the worst time and memory per input byte of every decoder.

Run with ``python -m bench.bench_decoders`` (or ``python -m bench decoders``;
``python -m bench.bench_decoders --replies`` runs the reply parsers only). Issue #22
D2: one owner made the verifier spend 24 s and 555 MiB on a 3.8 MiB array of empty
maps. Each decoder an arbiter, an owner or a checker runs on bytes from someone else
is fed the worst inputs we could construct for it (valid ones at its size cap too),
and two figures are taken per input:

- seconds per MiB of input, from one untraced run (best of three for inputs below
  64 KiB, whose time is mostly the call's fixed cost: a signature check, parsing);
- peak memory per input byte: ``tracemalloc``'s peak during a second run, above what
  was allocated before it (the input itself is not counted), divided by the input's
  length. Tracing slows allocation, so it is kept out of the timing.

An input is refused or accepted as its decoder decides; both are measured, since a
refusal must be as cheap as an acceptance. The table ends with the worst of each
decoder; the target is at most 10x memory and 1 s per MiB (docs/benchmarks.md). The
inputs of the canonical decoder are about 2 MiB, far above MAX_SIZED_VALUES's fixed
allowance of 8192 sized values (spec §3.3), which alone may cost up to about 1.5 MiB
on any input; the escrow messages are capped at 512 to 8192 bytes, so their fixed
per-call costs dominate their per-byte figures (the absolute peak is printed too).

Issue #40 N3 adds the parsers of a model server's replies (:mod:`bench.reply_cases`):
the OIP REST and gRPC replies, the OpenAI-compatible completions reply and the
``twinaudit.oracle.v1`` replies. protobuf's C parser allocates outside Python's
allocator, which ``tracemalloc`` does not see: for the gRPC replies the peak resident
memory above the start (Linux's ``VmHWM``, reset through ``/proc/self/clear_refs``) is
taken too, and the larger of the two is reported.
"""

from __future__ import annotations

import base64
import ctypes
import json
import os
import platform
import struct
import sys
import time
import tracemalloc
from collections.abc import Callable, Iterator

import numpy as np
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from bench.reply_cases import NATIVE, reply_cases
from twinaudit.protocol import limits
from twinaudit.protocol.claim.transcript import chain_head
from twinaudit.protocol.claim.verdict import VERDICT_KIND, check_verdict
from twinaudit.protocol.encoding import decode, encode
from twinaudit.protocol.envelope import (
    MAX_ENVELOPE_JSON_BYTES,
    Envelope,
    payload_type,
    sign_envelope,
)
from twinaudit.protocol.errors import TwinauditError
from twinaudit.protocol.escrow_messages import (
    CHECKPOINT_KIND,
    MAX_CHECKPOINT_ENVELOPE_BYTES,
    MAX_CHECKPOINT_PAYLOAD_BYTES,
    MAX_RECEIPT_ENVELOPE_BYTES,
    MAX_RECEIPT_PAYLOAD_BYTES,
    RECEIPT_KIND,
    Checkpoint,
    decode_checkpoint,
    decode_receipt,
    open_receipt,
    verify_checkpoint,
)
from twinaudit.protocol.items import ImageItem, TextItem, decode_item, encode_item
from twinaudit.protocol.keys import key_id

#: The canonical decoder's inputs are about this long.
SIZE = 2 * 2**20
KEY = Ed25519PrivateKey.from_private_bytes(bytes(range(32)))
PUBLIC = KEY.public_key()
TARGET_MEMORY = 10.0
TARGET_SECONDS_PER_MIB = 1.0

Case = tuple[str, str, bytes, Callable[[bytes], object]]


def _array(count: int, body: bytes) -> bytes:
    """The canonical array header of ``count`` items, then ``body`` (their encodings)."""
    if count < 16:
        head = bytes([0x90 | count])
    elif count < 1 << 16:
        head = b"\xdc" + struct.pack(">H", count)
    else:
        head = b"\xdd" + struct.pack(">I", count)
    return head + body


def _map_head(count: int) -> bytes:
    if count < 16:
        return bytes([0x80 | count])
    return (
        (b"\xde" + struct.pack(">H", count))
        if count < 1 << 16
        else b"\xdf" + struct.pack(">I", count)
    )


def _repeat(unit: bytes, items_per_unit: int, size: int = SIZE) -> bytes:
    """An array of ``unit`` repeated to about ``size`` bytes."""
    times = size // len(unit)
    return _array(times * items_per_unit, unit * times)


def _uint16s(size: int = SIZE, signed: bool = False) -> bytes:
    """Distinct uint16 values (256..65535, then again), or int16 (-32768..-129).

    Each would decode to a new int of 28 bytes; the decoder shares one per value.
    """
    count = size // 3
    if signed:
        values = np.arange(count, dtype=np.int64) % (32768 - 128) - 32768 + (1 << 16)
    else:
        values = np.arange(count, dtype=np.int64) % (65536 - 256) + 256
    body = np.empty((count, 3), np.uint8)
    body[:, 0] = 0xD1 if signed else 0xCD
    body[:, 1] = values >> 8
    body[:, 2] = values & 0xFF
    return _array(count, body.tobytes())


def _sized_at_cap(unit: bytes, sized_per_unit: int, items_per_unit: int) -> bytes:
    """``unit`` (holding ``sized_per_unit`` sized values) padded with nils to the cap's density.

    MAX_SIZED_VALUES allows one sized value per 64 bytes beyond 8192: each unit gets
    64 bytes per sized value it holds, the rest nil.
    """
    pad = 64 * sized_per_unit - len(unit)
    block = unit + b"\xc0" * pad
    times = SIZE // len(block)
    return _array(times * (items_per_unit + pad), block * times)


def _distinct_keys(count: int) -> bytes:
    """A map of ``count`` distinct 3-letter keys, each with an array of 121 nils.

    Each entry is 128 bytes and two sized values (the key and the array): the cap's
    density exactly.
    """
    letters = [chr(c) for c in range(0x21, 0x7F)]
    keys = sorted(a + b + c for a in letters for b in letters for c in letters)[:count]
    value = _array(121, b"\xc0" * 121)
    return _map_head(count) + b"".join(b"\xa3" + k.encode() + value for k in keys)


def canonical_cases() -> Iterator[Case]:
    name = "canonical decode"
    yield name, "array of nil (1 byte each)", _repeat(b"\xc0", 1), decode
    yield name, "array of negative fixints -32", _repeat(b"\xe0", 1), decode
    yield name, "array of int8 -33", _repeat(b"\xd0\xdf", 1), decode
    yield name, "array of distinct uint16", _uint16s(), decode
    yield name, "array of distinct int16", _uint16s(signed=True), decode
    yield name, "array of uint32", _repeat(b"\xce\x00\x01\x00\x00", 1), decode
    yield name, "array of float64", _repeat(b"\xcb" + struct.pack(">d", 1.5), 1), decode
    yield name, "nil and uint8 alternating", _repeat(b"\xc0\xcc\x80", 2), decode
    yield name, "nil and uint16 alternating", _repeat(b"\xc0\xcd\x01\x01", 2), decode
    yield name, "nil and int16 alternating", _repeat(b"\xc0\xd1\xff\x00", 2), decode
    yield name, "empty maps at the sized cap, nil between", _sized_at_cap(b"\x80", 1, 1), decode
    yield (
        name,
        "{'': 0} at the sized cap, nil between",
        _sized_at_cap(b"\x81\xa0\x00", 2, 1),
        decode,
    )
    yield name, "[nil] at the sized cap, nil between", _sized_at_cap(b"\x91\xc0", 1, 1), decode
    yield name, "'ab' at the sized cap, nil between", _sized_at_cap(b"\xa2ab", 1, 1), decode
    yield (
        name,
        "map of 3-letter keys at the sized cap, 121 nils each",
        _distinct_keys(SIZE // 128),
        decode,
    )
    d2 = _repeat(b"\x80", 1, 4_000_000)
    yield name, "3.8 MiB array of empty maps (D2, refused)", d2, decode
    text = "\U0001f600" + "a" * (limits.MAX_STR_BYTES - 4)
    yield name, "1 MiB text: one emoji, then ASCII", encode(text), decode
    yield name, "48 MiB byte string", encode(bytes(limits.MAX_BIN_BYTES)), decode
    deep = b"\x91" * limits.MAX_NESTING_DEPTH + _repeat(b"\xc0", 1)
    yield name, "nil array 32 deep", deep, decode
    header = b"\xdd" + struct.pack(">I", limits.MAX_CONTAINER_ITEMS) + b"\xc0" * 1024
    yield name, "array32 of 2^24 with 1 KiB left (refused)", header, decode


def item_cases() -> Iterator[Case]:
    name = "item decode"
    # The largest image an item holds (4096 a side, colour: MAX_BIN_BYTES of pixels).
    big = ImageItem(np.zeros((4096, 4096, 3), np.uint8), 7)
    yield name, "image 4096x4096x3, 48 MiB (valid)", encode_item(big), decode_item
    text = TextItem("\U0001f600" + "a" * (65536 - 4))
    yield name, "text of 64 KiB: one emoji, then ASCII", encode_item(text), decode_item
    d2 = _repeat(b"\x80", 1, 4_000_000)
    yield name, "3.8 MiB array of empty maps (D2)", d2, decode_item
    fields = b"\xa8channels\x01\xa6height\x01\xa4kind\xa5image\xa6pixels"
    pixels = _repeat(b"\xc0", 1)
    yield (
        name,
        "image whose pixels are an array of nil",
        b"\x85" + fields + pixels + (b"\xa5width\x01"),
        decode_item,
    )
    yield (
        name,
        "image with pixels short by one",
        encode(
            {"kind": "image", "height": 4096, "width": 4096, "channels": 3, "pixels": bytes(2**20)}
        ),
        decode_item,
    )
    many = encode({"kind": "image", **{f"k{i:06d}": i for i in range(8000)}})
    yield name, "image map with 8,000 unknown fields", many, decode_item


def envelope_cases() -> Iterator[Case]:
    name = "envelope JSON"
    payload = bytes(limits.MAX_ENVELOPE_PAYLOAD_BYTES)
    full = sign_envelope(payload, payload_type("verdict"), KEY).to_json()
    yield name, "16 MiB payload (valid)", full, Envelope.from_json
    size = MAX_ENVELOPE_JSON_BYTES
    yield name, "'[' nested (refused)", b"[" * size, Envelope.from_json
    yield name, "'[]' repeated (refused)", b"[]," * (size // 3), Envelope.from_json
    yield name, "strings repeated (refused)", b'"a",' * (size // 4), Envelope.from_json
    yield name, "one string of the whole size", b'"' + b"a" * (size - 2) + b'"', Envelope.from_json
    stray = full[:-3] + b"x" + full[-2:]
    yield name, "16 MiB payload, one byte wrong", stray, Envelope.from_json


def _signed(kind: str, payload: bytes) -> bytes:
    return sign_envelope(payload, payload_type(kind), KEY).to_json()


def _fill(cap: int, unit: bytes) -> bytes:
    """An array of ``unit`` filling ``cap`` bytes at most."""
    times = (cap - 5) // len(unit)
    return _array(times, unit * times)


def _open_receipt(data: bytes) -> object:
    return open_receipt(data, PUBLIC)


def _open_checkpoint(data: bytes) -> object:
    return verify_checkpoint(data, PUBLIC)


def escrow_cases() -> Iterator[Case]:
    """The payload decoders at their caps (2048 and 512 bytes), then the envelopes."""
    for name, cap, envelope_cap, kind, decoder, opener in (
        (
            "receipt",
            MAX_RECEIPT_PAYLOAD_BYTES,
            MAX_RECEIPT_ENVELOPE_BYTES,
            RECEIPT_KIND,
            decode_receipt,
            _open_receipt,
        ),
        (
            "checkpoint",
            MAX_CHECKPOINT_PAYLOAD_BYTES,
            MAX_CHECKPOINT_ENVELOPE_BYTES,
            CHECKPOINT_KIND,
            decode_checkpoint,
            _open_checkpoint,
        ),
    ):
        for what, payload in (
            ("empty maps", _fill(cap, b"\x80")),
            ("nil", _fill(cap, b"\xc0")),
            ("two-letter strings", _fill(cap, b"\xa2ab")),
        ):
            yield f"{name} payload", f"{cap} bytes of {what}", payload, decoder
        signed = _signed(kind, _fill(cap, b"\x80"))
        yield f"{name} envelope", "signed, payload of empty maps", signed, opener
        garbage = b"[" * envelope_cap
        yield f"{name} envelope", f"{envelope_cap} bytes of '['", garbage, opener
    checkpoint = Checkpoint(key_id(PUBLIC), 5, bytes(32), "2026-11-21T20:40:05Z")
    valid = _signed(CHECKPOINT_KIND, checkpoint.encode())
    yield "checkpoint envelope", "valid", valid, _open_checkpoint


def verdict_cases() -> Iterator[Case]:
    name = "verdict"

    def checker(data: bytes) -> object:
        return check_verdict(data, PUBLIC)

    cap = limits.MAX_ENVELOPE_PAYLOAD_BYTES - 64
    opened = list(range(1 << 20, (1 << 20) + cap // 5 - 64))
    verdict_like = {"opened": opened, "spec": "0.2"}
    yield (
        name,
        "signed, 3.3M opened pair indices",
        _signed(VERDICT_KIND, encode(verdict_like)),
        checker,
    )
    yield name, "signed, payload of nil", _signed(VERDICT_KIND, _fill(cap, b"\xc0")), checker
    at_cap = _sized_at_cap(b"\x80", 1, 1)
    yield name, "signed, empty maps at the sized cap", _signed(VERDICT_KIND, at_cap), checker
    unsigned = Envelope(payload_type(VERDICT_KIND), _fill(cap, b"\x80"), ())
    forged = json.loads(unsigned.to_json())
    forged["signatures"] = [{"keyid": "x", "sig": base64.b64encode(bytes(64)).decode()}]
    data = json.dumps(forged, sort_keys=True, separators=(",", ":")).encode()
    yield name, "forged signature, 16 MiB payload", data, checker


def _frames(records: list[bytes]) -> bytes:
    return b"".join(struct.pack(">I", len(r)) + r for r in records)


def transcript_cases() -> Iterator[Case]:
    name = "transcript records"

    def reader(data: bytes) -> object:
        return chain_head(data)

    yield (
        name,
        "one record: a map of an array of nil",
        _frames([_map_head(1) + b"\xa1a" + _repeat(b"\xc0", 1)]),
        reader,
    )
    yield (
        name,
        "one record: floats",
        _frames([_map_head(1) + b"\xa1a" + _repeat(b"\xcb" + struct.pack(">d", 0.5), 1)]),
        reader,
    )
    yield (
        name,
        "one record at the sized cap",
        _frames([_map_head(1) + b"\xa1a" + _sized_at_cap(b"\x81\xa0\x00", 2, 1)]),
        reader,
    )
    yield name, "419,430 records of {}", _frames([b"\x80"] * (SIZE // 5)), reader
    yield name, "records of {'a': nil}", _frames([b"\x81\xa1a\xc0"] * (SIZE // 8)), reader


def cases() -> Iterator[Case]:
    yield from reply_cases()
    yield from canonical_cases()
    yield from item_cases()
    yield from envelope_cases()
    yield from escrow_cases()
    yield from verdict_cases()
    yield from transcript_cases()


def _run(decoder: Callable[[bytes], object], data: bytes) -> str:
    try:
        decoder(data)
    except TwinauditError as exc:
        return exc.code
    return "accepted"


def _status_kib(field: str) -> int:
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise LookupError(field)


def resident_peak(decoder: Callable[[bytes], object], data: bytes) -> int:
    """Return the peak resident memory above the start during one run, in bytes (Linux)."""
    ctypes.CDLL("libc.so.6").malloc_trim(0)  # freed memory leaves, so that new memory shows
    with open("/proc/self/clear_refs", "w", encoding="ascii") as clear:
        clear.write("5")  # the peak (VmHWM) starts again from the current size
    base = _status_kib("VmRSS")
    _run(decoder, data)
    return max(0, _status_kib("VmHWM") - base) * 1024


def measure(
    decoder: Callable[[bytes], object], data: bytes, native: bool = False
) -> tuple[str, float, int]:
    """Return (outcome, seconds, peak traced bytes above the start) for one input.

    With ``native`` the peak is the larger of the traced peak and the resident one.
    """
    runs = 3 if len(data) < 64 * 1024 else 1
    seconds = float("inf")
    for _ in range(runs):
        start = time.perf_counter()
        outcome = _run(decoder, data)
        seconds = min(seconds, time.perf_counter() - start)
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        _run(decoder, data)
        peak = tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()
    if native:
        peak = max(peak, resident_peak(decoder, data))
    return outcome, seconds, peak


def main(groups: tuple[Callable[[], Iterator[Case]], ...] | None = None) -> None:
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} cores, Python "
        f"{platform.python_version()}, {platform.system()} {platform.release()}"
    )
    header = "| decoder | input | bytes | outcome | peak MiB | memory/byte | s/MiB |"
    print(header)
    print("|---|---|---:|---|---:|---:|---:|")
    worst: dict[str, tuple[float, float]] = {}
    chosen = cases() if groups is None else (case for group in groups for case in group())
    for decoder_name, what, data, decoder in chosen:
        outcome, seconds, peak = measure(decoder, data, decoder_name in NATIVE)
        per_byte = peak / len(data)
        per_mib = seconds / (len(data) / 2**20)
        memory, rate = worst.get(decoder_name, (0.0, 0.0))
        worst[decoder_name] = (max(memory, per_byte), max(rate, per_mib))
        print(
            f"| {decoder_name} | {what} | {len(data):,} | {outcome} | {peak / 2**20:.2f} "
            f"| {per_byte:.2f}x | {per_mib:.3f} |",
            flush=True,
        )
    print(
        f"\nworst per decoder (target: memory/byte <= {TARGET_MEMORY:g}x, "
        f"<= {TARGET_SECONDS_PER_MIB:g} s/MiB)"
    )
    print("| decoder | worst memory/byte | worst s/MiB | target |")
    print("|---|---:|---:|---|")
    for decoder_name, (memory, rate) in worst.items():
        over = memory > TARGET_MEMORY or rate > TARGET_SECONDS_PER_MIB
        print(f"| {decoder_name} | {memory:.2f}x | {rate:.3f} | {'over' if over else 'met'} |")


if __name__ == "__main__":
    main((reply_cases,) if "--replies" in sys.argv[1:] else None)
