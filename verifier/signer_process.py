"""The arbiter's signer process: the only process that reads the signing key.

``verifier serve`` starts it before anything else (:meth:`ProcessSigner.start`):
``python -m twinaudit.verifier.signer_process``, a child with no arguments, over its stdin and
stdout. The key file's path is its first message (never on a command line or in an
environment), it reads the key and answers with the raw public key; the serving
process then holds only the public key. Each later request is ``{"kind", "payload"}``;
the signer runs :func:`twinaudit.verifier.signing.check_signable` (one of the three kinds the
arbiter signs, decoded strictly, naming this key) and answers ``{"signature"}`` or
``{"error"}``. The server builds the envelope and checks the signature
(:func:`twinaudit.protocol.signer.signed_envelope`). A request ``{"note"}`` asks for the
signature of a checkpoint note text (spec §9.5.4), which the signer gives only for the
arbiter's own three-line checkpoint text
(:func:`twinaudit.protocol.checkpoint_note.require_arbiter_text`); the server checks it too
(:func:`twinaudit.protocol.checkpoint_note.checkpoint_note_from_signature`).

The signer runs no model code and starts no process: held models are children of the
serving process, in their sandbox (:mod:`twinaudit.verifier.oracles.sandbox`), and neither see
the signer nor can ask it for anything. Frames are a 4-byte big-endian length and a
canonical map (:mod:`twinaudit.protocol.encoding`), each at most :data:`MAX_FRAME_BYTES`.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import IO, Final

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from twinaudit.protocol.encoding import Value, decode, encode
from twinaudit.protocol.envelope import Envelope
from twinaudit.protocol.errors import InputError, StateError, TwinauditError
from twinaudit.protocol.keys import load_private_key, public_key_from_raw, raw_public_key
from twinaudit.protocol.limits import MAX_ENVELOPE_PAYLOAD_BYTES
from twinaudit.protocol.signer import PublicKeyHolder, signed_envelope

from .children import stop_child
from .signing import arbiter_signer

#: Largest frame either side reads (a payload at its cap, and the map around it).
MAX_FRAME_BYTES: Final = MAX_ENVELOPE_PAYLOAD_BYTES + 4096
#: Seconds the server waits for the signer to stop once its stdin is closed.
STOP_TIMEOUT_S: Final = 10.0


def _write(stream: IO[bytes], value: Value) -> None:
    data = encode(value)
    stream.write(len(data).to_bytes(4, "big") + data)
    stream.flush()


def _read(stream: IO[bytes]) -> dict[str, Value] | None:
    """Return the next frame's map, or None at the end of the stream."""
    head = stream.read(4)
    if not head:
        return None
    size = int.from_bytes(head, "big") if len(head) == 4 else -1
    if not 0 < size <= MAX_FRAME_BYTES:
        raise StateError("a signer frame of a bad size")
    data = stream.read(size)
    if len(data) != size:
        raise StateError("a signer frame ended early")
    value = decode(data)
    if not isinstance(value, dict):
        raise StateError("a signer frame is not a map")
    return value


class ProcessSigner(PublicKeyHolder):
    """A :class:`~twinaudit.protocol.signer.Signer` whose key lives in a child signer process."""

    def __init__(self, process: subprocess.Popen[bytes], public: Ed25519PublicKey) -> None:
        """Use the started signer ``process`` whose public key is ``public``."""
        super().__init__(public)
        self._process = process
        self._lock = threading.Lock()

    @classmethod
    def start(cls, key_path: Path) -> ProcessSigner:
        """Start a signer process on the key file ``key_path``; return its signer.

        A key the signer cannot load is an :class:`InputError` with its message.
        """
        # -P: the working folder is not put first on sys.path, so the process holding the
        # key imports the installed package, never a `twinaudit/` planted where the
        # arbiter was started.
        process = subprocess.Popen(
            [sys.executable, "-P", "-m", "twinaudit.verifier.signer_process"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            close_fds=True,
        )
        try:
            reply = cls._ask(process, {"key": str(Path(key_path).absolute())})
            public = reply.get("public_key")
            if not isinstance(public, bytes):
                raise StateError("the signer process did not answer with a public key")
            return cls(process, public_key_from_raw(public))
        except BaseException:
            _stop(process)
            raise

    @staticmethod
    def _ask(process: subprocess.Popen[bytes], request: dict[str, Value]) -> dict[str, Value]:
        assert process.stdin is not None
        assert process.stdout is not None
        try:
            _write(process.stdin, request)
            reply = _read(process.stdout)
        except (OSError, ValueError):
            reply = None
        if reply is None:
            raise StateError("the signer process is gone")
        error = reply.get("error")
        if isinstance(error, str):
            raise InputError(error)
        return reply

    def sign(self, payload: bytes, kind: str) -> Envelope:
        """Have the signer process check and sign ``payload`` as ``kind``."""
        with self._lock:
            reply = self._ask(self._process, {"kind": kind, "payload": payload})
        signature = reply.get("signature")
        if not isinstance(signature, bytes):
            raise StateError("the signer process answered without a signature")
        return signed_envelope(payload, kind, signature, self._public)

    def sign_note(self, text: bytes) -> bytes:
        """Have the signer process sign the checkpoint note ``text`` (spec §9.5.4)."""
        with self._lock:
            reply = self._ask(self._process, {"note": text})
        signature = reply.get("signature")
        if not isinstance(signature, bytes):
            raise StateError("the signer process answered without a signature")
        return signature

    def check_alive(self) -> None:
        """Raise :class:`StateError` if the signer process has ended (the health probe's)."""
        code = self._process.poll()
        if code is not None:
            raise StateError(f"the signer process ended (exit status {code}): nothing is signed")

    def close(self) -> None:
        """Stop the signer process (idempotent)."""
        with self._lock:
            _stop(self._process)


def _stop(process: subprocess.Popen[bytes]) -> None:
    stop_child(process, STOP_TIMEOUT_S)  # the signer stops at the end of its input


def serve(requests: IO[bytes], replies: IO[bytes]) -> int:
    """Run the signer on ``requests``/``replies`` until the end of ``requests``; return 0."""
    first = _read(requests)
    if first is None:
        return 0
    path = first.get("key")
    try:
        if not isinstance(path, str):
            raise InputError("the signer's first message names the key file")
        signer = arbiter_signer(load_private_key(Path(path)))
    except TwinauditError as exc:
        _write(replies, {"error": str(exc)})
        return 0
    del path, first
    _write(replies, {"public_key": raw_public_key(signer.public_key)})
    while (request := _read(requests)) is not None:
        kind, payload, note = request.get("kind"), request.get("payload"), request.get("note")
        try:
            if isinstance(note, bytes) and len(request) == 1:
                _write(replies, {"signature": signer.sign_note(note)})
                continue
            if not isinstance(kind, str) or not isinstance(payload, bytes) or len(request) != 2:
                raise InputError("a signing request is {kind, payload} or {note}")
            _write(replies, {"signature": signer.signature(payload, kind)})
        except TwinauditError as exc:
            _write(replies, {"error": str(exc)})
    return 0


def main() -> int:
    """Serve on this process's stdin and stdout; anything else printed goes to stderr."""
    replies = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # a stray print cannot corrupt the replies
    return serve(sys.stdin.buffer, replies)


if __name__ == "__main__":
    sys.exit(main())
