"""Witnesses on 127.0.0.1 for tests, policy files, and edits of cosigned notes."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from twinaudit.protocol.checkpoint_note import arbiter_key
from twinaudit.protocol.note import Note, NoteSignature, VerifierKey, cosign, parse_note
from twinaudit.witness.cosigner import Cosigner, logs_by_origin
from twinaudit.witness.server import start_witness
from twinaudit.witness.state import WitnessState


@dataclass(frozen=True)
class RunningWitness:
    """A witness serving on 127.0.0.1: its URL, name, key and vkey."""

    url: str
    name: str
    key: Ed25519PrivateKey
    vkey: VerifierKey

    @property
    def option(self) -> str:
        """The ``--witness URL=VKEY`` value of ``verifier serve``."""
        return f"{self.url}={self.vkey.vkey()}"


@contextmanager
def in_process_witness(
    directory: Path, name: str, seed: int, arbiter: Ed25519PublicKey
) -> Iterator[RunningWitness]:
    """Serve a witness named ``name`` (key from ``seed``) for the log of ``arbiter``."""
    key = Ed25519PrivateKey.from_private_bytes(bytes((seed + i) % 256 for i in range(32)))
    cosigner = Cosigner(
        name,
        key,
        logs_by_origin([arbiter_key(arbiter)]),
        WitnessState(directory / f"{name}.db"),
    )
    server, thread = start_witness(cosigner, "127.0.0.1", 0)
    try:
        yield RunningWitness(f"http://127.0.0.1:{server.port}/", name, key, cosigner.vkey)
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def policy_file(
    path: Path, witnesses: Sequence[tuple[str, VerifierKey]], k: int, *, log: str | None = None
) -> Path:
    """Write a C2SP tlog-policy file: the witnesses, a group of ``k`` of them, the quorum."""
    lines = [f"log {log}"] if log else []
    lines += [f"witness {name} {key.vkey()}" for name, key in witnesses]
    names = " ".join(name for name, _ in witnesses)
    lines += [f"group chosen {k} {names}", "quorum chosen"]
    path.write_text("# test policy\n" + "\n".join(lines) + "\n", encoding="utf-8")
    return path


def without_lines_of(note: bytes, name: str) -> bytes:
    """Return ``note`` without the signature lines of key name ``name``."""
    parsed = parse_note(note)
    return Note(parsed.text, tuple(s for s in parsed.signatures if s.name != name)).encode()


def recosigned(note: bytes, name: str, key: Ed25519PrivateKey, timestamp: int) -> bytes:
    """Return ``note`` with ``name``'s cosignature made again at ``timestamp``."""
    parsed = parse_note(note)
    kept: list[NoteSignature] = [s for s in parsed.signatures if s.name != name]
    return Note(parsed.text, (*kept, cosign(parsed.text, name, key, timestamp))).encode()
