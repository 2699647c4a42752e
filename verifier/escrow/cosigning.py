"""The arbiter collects witness cosignatures on its checkpoint notes (spec §9.7.2).

For each checkpoint it publishes (its log grew, or a client asked ``GetCheckpoint``),
the arbiter sends C2SP ``add-checkpoint`` to each configured witness
(:class:`WitnessEndpoint`: a submission URL and the witness's cosignature key) with a
consistency proof from the size that witness last cosigned. It learns that size from
the witness's own answers: 200 (it now holds this size) or 409 (it names the size it
holds; the request is sent once more from there). Each call has one deadline
(:data:`DEFAULT_TIMEOUT_S`) and a byte cap on the answer, the witnesses are asked in
parallel, and an answer's lines are kept only if they verify under that witness's
key. A witness that is down, slow or wrong costs the note its cosignature, never the
arbiter an escrow: commits only wake a background collection, and ``GetCheckpoint``
serves whatever cosignatures came back (none, at worst). A witness that failed is
not asked again for :data:`RETRY_AFTER_S` seconds.

The cosigned note of one tree is kept and served until it is :data:`REFRESH_S`
seconds old, then collected again (a witness cosigns the same tree again, with a new
time), so that a client who needs a recent cosignature (§9.7.3) finds one.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Final

from twinaudit.protocol.checkpoint_note import add_signatures
from twinaudit.protocol.errors import InputError, ParameterError, TwinauditError
from twinaudit.protocol.note import (
    COSIGNATURE_V1,
    NoteSignature,
    VerifierKey,
    open_note,
    parse_vkey,
)
from twinaudit.protocol.tlog_witness import (
    MAX_COSIGNATURE_REPLY_BYTES,
    AddCheckpoint,
    parse_cosignatures,
    parse_size,
)
from twinaudit.wire.http_call import Deadline, http_call

from .store import EscrowLog, SignedCheckpoint

#: Seconds one witness call may take, connection to last byte.
DEFAULT_TIMEOUT_S: Final = 5.0
#: Seconds a cosigned note is served before its cosignatures are collected again.
REFRESH_S: Final = 60.0
#: Seconds a witness that failed is left alone.
RETRY_AFTER_S: Final = 30.0
#: Most witnesses an arbiter may be configured with (a note holds 16 lines, one its own).
MAX_WITNESSES: Final = 15

_log = logging.getLogger(__name__)


@dataclass(frozen=True)
class WitnessEndpoint:
    """A witness the arbiter asks: its submission URL prefix and cosignature key."""

    url: str
    key: VerifierKey

    def __post_init__(self) -> None:
        """Refuse a URL that is not http(s) or a key that is not a cosignature key."""
        if not self.url.startswith(("http://", "https://")):
            raise ParameterError(f"a witness URL is http:// or https://, got {self.url!r}")
        if self.key.sig_type != COSIGNATURE_V1:
            raise ParameterError("a witness's key is a cosignature key (type 0x04)")

    @property
    def add_checkpoint_url(self) -> str:
        """The URL of the witness's ``add-checkpoint``."""
        return self.url.rstrip("/") + "/add-checkpoint"


def parse_witness_option(text: str) -> WitnessEndpoint:
    """Read ``URL=VKEY`` (the ``--witness`` option of ``verifier serve``).

    Raises:
        InputError: it is not a URL, ``=`` and a cosignature vkey.

    """
    url, equals, vkey = text.rpartition("=")
    if not equals or not url:
        raise InputError(f"--witness is URL=VKEY, got {text!r}")
    return WitnessEndpoint(url, parse_vkey(vkey))


class _RefusalError(Exception):
    """A witness answered, but not with cosignatures (its status and message)."""


class CheckpointCosigning:
    """Collects cosignatures for an :class:`EscrowLog`'s checkpoint notes."""

    def __init__(
        self,
        store: EscrowLog,
        witnesses: Sequence[WitnessEndpoint],
        *,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """Collect for ``store`` from ``witnesses`` (distinct keys, at most 15)."""
        if len(witnesses) > MAX_WITNESSES:
            raise ParameterError(f"an arbiter asks at most {MAX_WITNESSES} witnesses")
        if len({w.key.public for w in witnesses}) != len(witnesses):
            raise ParameterError("each witness key is named once")
        self._store = store
        self._witnesses = tuple(witnesses)
        self._timeout_s = timeout_s
        self._clock = clock
        self._lock = threading.Lock()
        self._sizes: dict[WitnessEndpoint, int] = {}
        self._failed: dict[WitnessEndpoint, float] = {}
        self._kept: tuple[int, bytes, bytes, float] | None = None
        self._pool = ThreadPoolExecutor(max(1, len(witnesses)), thread_name_prefix="cosign")
        self._wake = threading.Event()
        self._closed = False
        self._worker = threading.Thread(target=self._background, name="cosign-bg", daemon=True)
        self._worker.start()

    def cosigned_note(self, checkpoint: SignedCheckpoint, note: bytes) -> bytes:
        """Return ``note`` (the arbiter's note of ``checkpoint``) with the cosignatures got.

        A note collected less than :data:`REFRESH_S` seconds ago for the same tree is
        returned as it is; otherwise every witness not in its back-off is asked.
        """
        size, root = checkpoint.checkpoint.size, checkpoint.checkpoint.root
        with self._lock:
            kept = self._kept
            if kept is not None and kept[:2] == (size, root) and self._clock() < kept[3]:
                return kept[2]
            asked = [w for w in self._witnesses if self._clock() >= self._failed.get(w, 0.0)]
            lines: list[NoteSignature] = []
            for witness, got in zip(
                asked, self._pool.map(lambda w: self._ask(w, size, note), asked), strict=True
            ):
                if got is None:
                    self._failed[witness] = self._clock() + RETRY_AFTER_S
                else:
                    self._failed.pop(witness, None)
                    lines += got
            cosigned = add_signatures(note, lines) if lines else note
            self._kept = (size, root, cosigned, self._clock() + REFRESH_S)
            return cosigned

    def publish_soon(self) -> None:
        """Collect cosignatures for the current checkpoint in the background (a commit)."""
        self._wake.set()

    def close(self) -> None:
        """Stop the background collection and the calls' threads."""
        self._closed = True
        self._wake.set()
        self._worker.join(timeout=self._timeout_s * 2)
        self._pool.shutdown(wait=False, cancel_futures=True)

    def _background(self) -> None:
        while True:
            self._wake.wait()
            self._wake.clear()
            if self._closed:
                return
            try:
                latest = self._store.latest_checkpoint()
                note = self._store.checkpoint_note(latest)
                if note is not None:
                    self.cosigned_note(latest, note)
            except Exception:  # a background refresh: the next GetCheckpoint asks again
                _log.exception("collecting witness cosignatures failed")

    def _ask(self, witness: WitnessEndpoint, size: int, note: bytes) -> list[NoteSignature] | None:
        """Return ``witness``'s verified cosignature lines on ``note``, or None (logged)."""
        try:
            old = self._sizes.get(witness, 0)
            for _ in range(2):  # once from what we knew, once from what a 409 told us
                if old > size:
                    raise _RefusalError(f"it cosigned size {old}, above this log's {size}")
                try:
                    lines = self._call(witness, old, size, note)
                except _SizeConflictError as conflict:
                    old = conflict.size
                    continue
                self._sizes[witness] = size
                return lines
            raise _RefusalError("it answered 409 twice")
        except (TwinauditError, _RefusalError) as exc:
            _log.warning("witness %s gave no cosignature: %s", witness.url, exc)
            return None

    def _call(
        self, witness: WitnessEndpoint, old: int, size: int, note: bytes
    ) -> list[NoteSignature]:
        proof = self._store.consistency_proof(old, size) if 0 < old < size else []
        body = AddCheckpoint(old, tuple(proof), note).encode()
        reply = http_call(
            witness.add_checkpoint_url,
            deadline=Deadline(self._timeout_s),
            max_bytes=MAX_COSIGNATURE_REPLY_BYTES,
            what=f"witness {witness.url}",
            body=body,
            headers={"Accept": "text/plain", "Content-Type": "text/plain"},
        )
        if reply.status == 409:
            raise _SizeConflictError(parse_size(reply.body))
        if reply.status != 200:
            message = reply.body.decode("utf-8", "replace").strip()[:200]
            raise _RefusalError(f"HTTP {reply.status}: {message}")
        lines = parse_cosignatures(reply.body)
        # Keep only its lines that verify under its key (others are ignored, §9.7.2).
        opened = open_note(add_signatures(note, lines), [witness.key])
        return [line for key, line in opened.verified if key == witness.key]


class _SizeConflictError(Exception):
    """A 409: the witness holds another size."""

    def __init__(self, size: int) -> None:
        super().__init__(f"the witness holds size {size}")
        self.size = size


__all__ = [
    "DEFAULT_TIMEOUT_S",
    "MAX_WITNESSES",
    "REFRESH_S",
    "RETRY_AFTER_S",
    "CheckpointCosigning",
    "WitnessEndpoint",
    "parse_witness_option",
]
