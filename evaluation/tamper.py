"""What an arbiter that alters a transcript and signs the verdict again can get past.

Issue #42 reported, from an outside implementation, that flipping one bit of a
transcript record and re-signing the verdict with the arbiter's key passes every
check for some bits (probability bits that leave a score unchanged, publication bits
of pairs opened after the decision). This measures it with the project's own code,
given a verdict, its transcript, the owner's openings of its pairs (``owner
openings``) and the arbiter's signing key:

1. every leaf value of every record (map keys are not altered) is a field of a class
   named ``<record type>.<top-level key>`` (``pair.answers``, ``pair.published``,
   ``answers.signature``, ``header.claim``, ...); a float has its 64 IEEE bits, an
   integer the 64 bits of its two's complement, bytes and text 8 bits a byte, a
   boolean one; nil none;
2. each flip of one such bit is written as the forger would: the record encoded
   canonically again, the hash chain rebuilt, the verdict's ``transcript`` head
   replaced and the payload signed again with the arbiter's key (nothing else of the
   verdict changes, so a flip that passes cannot change the decision, which replay
   recomputes and compares with the signed one);
3. the checks anyone can run then decide: ``check_verdict`` and ``replay`` (what
   ``twinaudit verify --transcript`` runs), then ``check_openings`` (``--openings``).

Each flip ends in one of: ``replay`` (the verdict check or replay refuses it),
``openings`` (only the openings check does), ``passes`` (neither), or
``unencodable`` (the altered value has no canonical encoding: a NaN, text that is not
UTF-8, an integer out of range; no forger can write it without failing decoding).
Every bit is tried unless ``--per-class N`` is given: then at most N bits of each
class, drawn without replacement by ``random.Random(--seed)``, and the JSON says how
many bits each class has in all.

Run: ``python -m evaluation.tamper VERDICT TRANSCRIPT OPENINGS ARBITER_KEY``
(``--record FILE`` appends the result as one JSON line; see docs/security.md).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import shlex
import struct
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from twinaudit.protocol.claim.transcript import iter_records, link
from twinaudit.protocol.claim.verdict import check_verdict
from twinaudit.protocol.encoding import Value, decode, encode
from twinaudit.protocol.envelope import Envelope, payload_type, sign_envelope
from twinaudit.protocol.errors import TwinauditError
from twinaudit.protocol.keys import load_private_key
from twinaudit.verifier.reexecute import check_openings
from twinaudit.verifier.replay import replay

#: The ways a flip can end (module docstring).
OUTCOMES = ("replay", "openings", "passes", "unencodable")
_FRAME = struct.Struct(">I")
_GENESIS = bytes(32)

#: A leaf's place in a record: the keys and list positions leading to it.
Path_ = tuple[str | int, ...]


@dataclass(frozen=True)
class Flip:
    """One bit of one leaf value of one record."""

    record: int
    path: Path_
    bit: int


def _leaves(value: Value, path: Path_ = ()) -> Iterator[tuple[Path_, Value]]:
    """Yield every leaf of a decoded record with its path (map keys are not leaves)."""
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _leaves(item, (*path, key))
    elif isinstance(value, list):
        for n, item in enumerate(value):
            yield from _leaves(item, (*path, n))
    else:
        yield path, value


def bit_count(value: Value) -> int:
    """Return how many bits a leaf has to flip (module docstring, step 1)."""
    if isinstance(value, bool):
        return 1
    if isinstance(value, int | float):
        return 64
    if isinstance(value, bytes | str):
        return 8 * len(value if isinstance(value, bytes) else value.encode())
    return 0


def flipped(value: Value, bit: int) -> Value:
    """Return ``value`` with bit ``bit`` flipped; raise ValueError where it has no value."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, float):
        (raw,) = struct.unpack(">Q", struct.pack(">d", value))
        (result,) = struct.unpack(">d", struct.pack(">Q", raw ^ (1 << bit)))
        return float(result)
    if isinstance(value, int):
        raw = (value & (2**64 - 1)) ^ (1 << bit)
        return raw - 2**64 if raw >= 2**63 else raw
    data = bytearray(value if isinstance(value, bytes) else value.encode())  # type: ignore[union-attr]
    data[bit // 8] ^= 0x80 >> (bit % 8)
    return bytes(data) if isinstance(value, bytes) else data.decode()


def field_class(record: dict[str, Value], path: Path_) -> str:
    """Return the class a leaf is tallied under: ``<record type>.<top-level key>``."""
    kind = record.get("type")
    return f"{kind if isinstance(kind, str) else '?'}.{path[0]}"


def _replace(record: Value, path: Path_, value: Value) -> Value:
    """Return a copy of ``record`` with the leaf at ``path`` replaced by ``value``."""
    if not path:
        return value
    head, rest = path[0], path[1:]
    if isinstance(record, dict):
        return {k: (_replace(v, rest, value) if k == head else v) for k, v in record.items()}
    assert isinstance(record, list)
    assert isinstance(head, int)
    return [_replace(v, rest, value) if n == head else v for n, v in enumerate(record)]


def _leaf(record: Value, path: Path_) -> Value:
    for step in path:
        record = record[step]  # type: ignore[index]
    return record


@dataclass
class Tamperer:
    """A verdict, its transcript and openings, and the arbiter's key: tries flips."""

    signed: bytes
    transcript: bytes
    openings: bytes
    key: Ed25519PrivateKey

    def __post_init__(self) -> None:
        self.verdict = check_verdict(self.signed, self.key.public_key())
        self.records = list(iter_records(self.transcript))
        self.encoded = [encode(r) for r in self.records]
        self.heads = [_GENESIS]
        for data in self.encoded:
            self.heads.append(link(self.heads[-1], data))
        payload = decode(Envelope.from_json(self.signed).payload)
        assert isinstance(payload, dict)
        self.payload: dict[str, Value] = payload
        replay(self.verdict, self.transcript)  # the original passes every check
        check_openings(self.verdict, self.transcript, self.openings)

    def flips(self) -> dict[str, list[Flip]]:
        """Return every flip, by class."""
        classes: dict[str, list[Flip]] = {}
        for number, record in enumerate(self.records):
            for path, value in _leaves(record):
                group = classes.setdefault(field_class(record, path), [])
                group.extend(Flip(number, path, bit) for bit in range(bit_count(value)))
        return classes

    def forge(self, flip: Flip) -> tuple[bytes, bytes] | None:
        """Return the re-signed verdict and the altered transcript (None: unencodable)."""
        record = self.records[flip.record]
        try:
            value = flipped(_leaf(record, flip.path), flip.bit)
            data = encode(_replace(record, flip.path, value))
        except (ValueError, UnicodeDecodeError, TwinauditError, OverflowError):
            return None
        encoded = [*self.encoded[: flip.record], data, *self.encoded[flip.record + 1 :]]
        head = self.heads[flip.record]
        for item in encoded[flip.record :]:
            head = link(head, item)
        payload = dict(self.payload)
        payload["transcript"] = {"hash": head, "records": len(encoded)}
        envelope = sign_envelope(encode(payload), payload_type("verdict"), self.key)
        transcript = b"".join(_FRAME.pack(len(item)) + item for item in encoded)
        return envelope.to_json(), transcript

    def outcome(self, flip: Flip) -> str:
        """Return how ``flip`` ends: one of :data:`OUTCOMES`."""
        forged = self.forge(flip)
        if forged is None:
            return "unencodable"
        signed, transcript = forged
        try:
            verdict = check_verdict(signed, self.key.public_key())
            replay(verdict, transcript)
        except TwinauditError:
            return "replay"
        try:
            check_openings(verdict, transcript, self.openings)
        except TwinauditError:
            return "openings"
        return "passes"


def tally(tamperer: Tamperer, per_class: int | None, seed: int) -> dict[str, dict[str, int]]:
    """Return, per class, its bits in all, the bits tried and each outcome's count."""
    rng = random.Random(seed)
    result: dict[str, dict[str, int]] = {}
    for name, flips in sorted(tamperer.flips().items()):
        chosen = (
            flips if per_class is None or len(flips) <= per_class else rng.sample(flips, per_class)
        )
        counts = Counter(tamperer.outcome(flip) for flip in chosen)
        result[name] = {"bits": len(flips), "tried": len(chosen)} | {
            outcome: counts[outcome] for outcome in OUTCOMES
        }
    return result


def _commit() -> str:
    """Return the short commit of the checkout this module runs from."""
    here = Path(__file__).resolve().parent
    try:
        return subprocess.run(
            ["git", "-C", str(here), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def main(argv: list[str] | None = None) -> int:
    """Tally the flips of one verdict's transcript; print (and optionally record) them."""
    parser = argparse.ArgumentParser(
        prog="python -m evaluation.tamper",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("verdict", type=Path, help="the verdict (verdict.json)")
    parser.add_argument("transcript", type=Path, help="its transcript (transcript.bin)")
    parser.add_argument("openings", type=Path, help="the openings of its pairs (owner openings)")
    parser.add_argument("key", type=Path, help="the arbiter's private key (verifier keygen)")
    parser.add_argument("--per-class", type=int, help="at most N bits per class, drawn at random")
    parser.add_argument("--seed", type=int, default=0, help="the draw's seed (default 0)")
    parser.add_argument("--label", default="", help="a name for this verdict in the record")
    parser.add_argument("--record", type=Path, help="append the result as a JSON line here")
    args = parser.parse_args(argv)
    tamperer = Tamperer(
        args.verdict.read_bytes(),
        args.transcript.read_bytes(),
        args.openings.read_bytes(),
        load_private_key(args.key),
    )
    began, cpu = time.monotonic(), time.process_time()
    classes = tally(tamperer, args.per_class, args.seed)
    totals = Counter[str]()
    for counts in classes.values():
        totals.update(counts)
    verdict = tamperer.verdict
    line = {
        "label": args.label,
        "commit": _commit(),
        "machine": f"{platform.machine()} {platform.system()}, Python "
        f"{platform.python_version()}, {os.cpu_count()} CPU cores (shared)",
        "command": shlex.join(["python", "-m", "evaluation.tamper", *(argv or sys.argv[1:])]),
        "answers_signed": bool(verdict.claim.oracle_info.answer_key),
        "decision": verdict.decision,
        "pairs": len(verdict.opened),
        "records": len(tamperer.records),
        "per_class": args.per_class,
        "seed": args.seed,
        "totals": dict(totals),
        "classes": classes,
        "wall_s": round(time.monotonic() - began, 1),
        "cpu_s": round(time.process_time() - cpu, 1),
    }
    text = json.dumps(line, sort_keys=True)
    print(text)
    if args.record is not None:
        with args.record.open("a") as out:
            out.write(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
