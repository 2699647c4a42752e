"""Build spec/vectors/notes.json: signed notes, checkpoint notes and cosignatures (spec §9.5).

Run ``python -m spec.tools.vectors_notes`` to rewrite the file; the conformance test
fails if the file differs from what :func:`build` returns. Six kinds of case:

- ``key-id``: a key name, a signature type and a raw public key; the 4-byte key id;
- ``vkey``: a verifier key text; its name, type, public key and id, or the error;
- ``sign``: an Ed25519 seed, a key name and a text, and for a cosignature (type 4) a
  time; the signed message and the note, byte for byte;
- ``open``: a note and the vkeys a client knows; the text, the verified lines and the
  number of ignored ones, or the error (§9.5.1);
- ``checkpoint-text``: a note text; its origin, size, root and extension lines, or the
  error (§9.5.2);
- ``checkpoint-note``: an arbiter's checkpoint note, the arbiter's public key and a
  witness policy with the client's time; the tree and the cosignatures counted and too
  old, or the error (§9.5.4).

Two published examples are among them: the note of the C2SP ``signed-note`` text under
its vkey, and a real checkpoint of the staging CT log
``arche2025h1.staging.ct.transparency.dev`` with the cosignature of the public witness
``remora.n621.de`` (its vkey as published in transparency-dev/formats), beside lines of
keys the case does not know. Everything else is signed with the test key of appendix B
and witness keys from fixed seeds.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from twinaudit.protocol import SPEC_VERSION, cosignature
from twinaudit.protocol.checkpoint_note import (
    CheckpointText,
    WitnessPolicy,
    add_signatures,
    arbiter_key,
    arbiter_origin,
    parse_checkpoint_text,
    sign_checkpoint_note,
    verify_checkpoint_note,
)
from twinaudit.protocol.keys import public_key_from_raw, raw_public_key
from twinaudit.protocol.merkle import EMPTY_ROOT, MAX_TREE_SIZE
from twinaudit.protocol.note import (
    COSIGNATURE_V1,
    ED25519,
    MAX_NOTE_SIGNATURES,
    Note,
    NoteSignature,
    VerifierKey,
    cosign,
    encode_base64,
    key_id,
    open_note,
    parse_note,
    parse_vkey,
    sign_ed25519,
)

from .vectors_core import TEST_KEY_SEED, case, render

VECTOR_FILE = Path(__file__).resolve().parent.parent / "vectors" / "notes.json"

ARBITER = Ed25519PrivateKey.from_private_bytes(TEST_KEY_SEED)
ARBITER_PUBLIC = raw_public_key(ARBITER.public_key())
WITNESS_SEEDS = {
    "w1.example/witness": hashlib.sha256(b"notes witness 1").digest(),
    "w2.example/witness": hashlib.sha256(b"notes witness 2").digest(),
    "w3.example/witness": hashlib.sha256(b"notes witness 3").digest(),
}
WITNESSES = {n: Ed25519PrivateKey.from_private_bytes(s) for n, s in WITNESS_SEEDS.items()}
ROOT = hashlib.sha256(b"notes log root").digest()
SIZE = 1000
NOW = 1_796_000_000  # 2026-11-30T00:53:20Z

C2SP_VKEY = "example.com/foo+530d903a+AekyeRrm56hApGFkyQR4ZCbV54Id2LKaANYcrnKv3U2k"
C2SP_NOTE = (
    "This is an example message.\n\n"
    "— example.com/foo Uw2QOkn8srV1yJGh2VYRlL1Tnagv1YEq6TfXppzi2ONncAlTgK7Ztg1ERYNZXsYjOBH3mF"
    "XmRKuwHjG1Yu72IneyaQM=\n"
)
REMORA_VKEY = "remora.n621.de+da77ade7+BOvN63jn/bLvkieywe8R6UYAtVtNbZpXh34x7onlmtw2"
ARCHE_VKEY = (
    "arche2025h1.staging.ct.transparency.dev+ba2f06c0+AU0vHmlGCS/PdN8b2OaGmKprLI8HKM+dJ472xgFYh15f"
)
ARCHE_NOTE = (
    "arche2025h1.staging.ct.transparency.dev\n1432088532\n"
    "U7WM79jrzyhGZ5/GUBTpM7NzwdyfFx61t3RovgcC4Ro=\n"
    "\n— arche2025h1.staging.ct.transparency.dev zTM8sQAAAZ5W0WdjBAMARjBEAiBjW5IQf9pvsYLfQFX6"
    "hoGREPMHbdQ3urbllzalApkptQIgIpwtEroeW2BXaHAI4kJXFbon5Ch9MNL5zRNZ55lvGt0=\n"
    "— arche2025h1.staging.ct.transparency.dev ui8GwCF1+kWqZrxGdhj4aX3gcw7XUlXQQabg/27lefwhUk"
    "zbC3NygNI75MdhL1bfTW9g8Ei59RA23oHP7Ry1k3ZFWwQ=\n"
    "— transparency.dev/DEV:witness-little-garden 2AQqhwAAAABqEiEgzgFIqqhbUoDwjMWE6UP8nd8/KYTz"
    "wZ2rhIgcqoXHAwVkjZr4AscylP3v7sEodkRAErumC2q44vdgJY096st5BQ==\n"
    "— witness1.smartit.nu/witness1 pIyCDwAAAABqEiEghIp82KWebrw7/oHQwlTAm3g2RKS4+eebl8eO0WH+/i"
    "EcxZ75W3u5hNI7TOQtmJbqmNWVuE0tgh0XwzdZsDsUAQ==\n"
    "— remora.n621.de 2net5wAAAABqEiEgPlfF3V06o0Y+fHM+J5J9s27wgxxcOVSpZ/2g/KSiXCg9DEZI+aVCIobW"
    "X9sXTynk5XeU/zZ0WBxtqB0DrAWfBw==\n"
    "— witness.stagemole.eu Z/euoAAAAABqEiEgw0i+7g2ENfDAWHmtRzCfKTHSDwYDJA2NmKeGi9Y8FtEyOUvVr+A"
    "JmIY/2TUFucgKi7lI7cUiOvKFYe/TmN9DAg==\n"
)


def _witness_key(name: str) -> VerifierKey:
    return VerifierKey.of(name, COSIGNATURE_V1, WITNESSES[name].public_key())


def _signed_note() -> str:
    return sign_checkpoint_note(SIZE, ROOT, ARBITER).decode("utf-8")


def _cosigned(note: str, *cosigners: tuple[str, int]) -> str:
    text = parse_note(note.encode()).text
    lines = [cosign(text, name, WITNESSES[name], when) for name, when in cosigners]
    return add_signatures(note.encode(), lines).decode("utf-8")


def _line(name: str, ident: int, signature: bytes) -> str:
    return NoteSignature(name, ident, signature).line()


# --- What each kind of case computes, from its input alone (the conformance test too) -----


def run_key_id(given: dict[str, Any]) -> dict[str, Any]:
    """A ``key-id`` case: the key id of a name, a type and a public key."""
    ident = key_id(given["name"], given["type"], bytes.fromhex(given["public_key"]))
    return {"key_id": f"{ident:08x}"}


def run_vkey(given: dict[str, Any]) -> dict[str, Any]:
    """A ``vkey`` case: the key a vkey text names."""
    key = parse_vkey(given["vkey"])
    return {
        "name": key.name,
        "type": key.sig_type,
        "public_key": key.public.hex(),
        "key_id": f"{key.key_id:08x}",
    }


def run_sign(given: dict[str, Any]) -> dict[str, Any]:
    """A ``sign`` case: the message signed and the one-line note, type 1 or a cosignature."""
    key = Ed25519PrivateKey.from_private_bytes(bytes.fromhex(given["seed"]))
    text: str = given["text"]
    if given["type"] == ED25519:
        line, message = sign_ed25519(text, given["name"], key), text.encode()
    else:
        when = int(given["time"])
        line = cosign(text, given["name"], key, when)
        message = cosignature.signed_message(text.encode(), when)
    return {"message": message.hex(), "note": Note(text, (line,)).encode().decode("utf-8")}


def run_open(given: dict[str, Any]) -> dict[str, Any]:
    """An ``open`` case: the note verified against the vkeys a client knows."""
    got = open_note(given["note"].encode("utf-8"), [parse_vkey(k) for k in given["keys"]])
    verified = [[k.name, f"{k.key_id:08x}"] for k, _ in got.verified]
    return {"text": got.text, "verified": verified, "ignored": len(got.unknown)}


def run_checkpoint_text(given: dict[str, Any]) -> dict[str, Any]:
    """A ``checkpoint-text`` case: the lines of a checkpoint text."""
    got = parse_checkpoint_text(given["text"])
    return {
        "origin": got.origin,
        "size": str(got.size),
        "root": got.root.hex(),
        "extensions": list(got.extensions),
    }


def run_checkpoint_note(given: dict[str, Any]) -> dict[str, Any]:
    """A ``checkpoint-note`` case: the arbiter's note under a witness policy at ``now``."""
    max_age = given["max_age"]
    policy = WitnessPolicy(
        tuple(parse_vkey(v) for v in given["witnesses"]),
        given["threshold"],
        None if max_age is None else int(max_age),
        int(given["max_skew"]),
    )
    got = verify_checkpoint_note(
        given["note"].encode("utf-8"),
        public_key_from_raw(bytes.fromhex(given["arbiter_public_key"])),
        policy,
        now=int(given["now"]),
    )
    return {
        "origin": got.origin,
        "size": str(got.size),
        "root": got.root.hex(),
        "counted": [[c.name, str(c.timestamp)] for c in got.counted],
        "stale": [[c.name, str(c.timestamp)] for c in got.stale],
    }


#: Each kind of case and what it computes.
RUNNERS: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
    "key-id": run_key_id,
    "vkey": run_vkey,
    "sign": run_sign,
    "open": run_open,
    "checkpoint-text": run_checkpoint_text,
    "checkpoint-note": run_checkpoint_note,
}


def _case(name: str, kind: str, given: dict[str, Any]) -> dict[str, Any]:
    return case(name, kind, given, lambda: RUNNERS[kind](given))


# --- The cases --------------------------------------------------------------------------------


def _key_id_cases() -> list[dict[str, Any]]:
    arbiter = arbiter_key(ARBITER.public_key())
    rows = [
        ("the C2SP example key", parse_vkey(C2SP_VKEY)),
        ("a witness's cosignature key (type 4)", parse_vkey(REMORA_VKEY)),
        ("the arbiter's note key of the test key", arbiter),
        ("a witness key of the vectors", _witness_key("w1.example/witness")),
        (
            "the test key as a cosignature key: another id",
            VerifierKey(arbiter.name, COSIGNATURE_V1, arbiter.public),
        ),
    ]
    return [
        _case(name, "key-id", {"name": k.name, "type": k.sig_type, "public_key": k.public.hex()})
        for name, k in rows
    ]


def _vkey_cases() -> list[dict[str, Any]]:
    good = arbiter_key(ARBITER.public_key()).vkey()
    name, ident, blob = good.split("+", 2)
    rows = [
        ("the C2SP example", C2SP_VKEY),
        ("a witness's cosignature key", REMORA_VKEY),
        ("the arbiter's note key", good),
        ("wrong key id", f"{name}+{(int(ident, 16) ^ 1):08x}+{blob}"),
        ("upper-case key id", f"{name}+{ident.upper()}+{blob}"),
        ("unknown signature type", f"{name}+{ident}+{encode_base64(bytes([5]) + ARBITER_PUBLIC)}"),
        (
            "key of 31 bytes",
            f"{name}+{ident}+{encode_base64(bytes([ED25519]) + ARBITER_PUBLIC[:31])}",
        ),
        ("bad base64", f"{name}+{ident}+{blob[:-1]}!"),
        ("no key", f"{name}+{ident}"),
        ("a space in the name", f"a b+{ident}+{blob}"),
    ]
    return [_case(n, "vkey", {"vkey": v}) for n, v in rows]


def _sign_cases() -> list[dict[str, Any]]:
    text = CheckpointText(arbiter_origin(ARBITER.public_key()), SIZE, ROOT).text()
    name = arbiter_key(ARBITER.public_key()).name
    arbiter = {"seed": TEST_KEY_SEED.hex(), "name": name, "type": ED25519, "text": text}
    cases = [_case("the arbiter's checkpoint note (type 1)", "sign", arbiter)]
    witness = "w1.example/witness"
    for when in (NOW, 0, cosignature.MAX_TIMESTAMP, cosignature.MAX_TIMESTAMP + 1):
        given = {
            "seed": WITNESS_SEEDS[witness].hex(),
            "name": witness,
            "type": COSIGNATURE_V1,
            "text": text,
            "time": str(when),
        }
        cases.append(_case(f"a witness's cosignature at {when}", "sign", given))
    return cases


def _open_cases() -> list[dict[str, Any]]:
    arbiter = arbiter_key(ARBITER.public_key()).vkey()
    w1 = _witness_key("w1.example/witness").vkey()
    note = _signed_note()
    text, lines = note.split("\n\n")
    cosigned = _cosigned(note, ("w1.example/witness", NOW))
    sig_line = lines.rstrip("\n")
    prefix, b64 = sig_line.rsplit(" ", 1)
    wrong_id = _line(arbiter_key(ARBITER.public_key()).name, 0, b"\x00" * 64)
    flipped_sig = prefix + " " + encode_base64(_flip(_b64(b64), 10))
    rows: list[tuple[str, str, list[str]]] = [
        ("the C2SP example", C2SP_NOTE, [C2SP_VKEY]),
        (
            "a real checkpoint: the log's line and a witness's",
            ARCHE_NOTE,
            [ARCHE_VKEY, REMORA_VKEY],
        ),
        ("a real checkpoint: the witness alone", ARCHE_NOTE, [REMORA_VKEY]),
        ("the arbiter's note", note, [arbiter]),
        ("a cosigned note, both keys known", cosigned, [arbiter, w1]),
        ("an unknown key's line is ignored", cosigned, [arbiter]),
        ("no known key signed", note, [w1]),
        ("a line with the known name and another key id is ignored", note + wrong_id, [arbiter]),
        ("only a line with a wrong key id", text + "\n\n" + wrong_id, [arbiter]),
        ("a known key's signature does not verify", text + "\n\n" + flipped_sig + "\n", [arbiter]),
        ("text changed after signing", note.replace(f"\n{SIZE}\n", f"\n{SIZE + 1}\n"), [arbiter]),
        ("bad base64", note.replace(b64, b64[:-2] + "!="), [arbiter]),
        ("non-canonical base64", note.replace(b64, _nonzero_tail(b64)), [arbiter]),
        ("unpadded base64", note.replace(b64, b64.rstrip("=")), [arbiter]),
        ("extra blank line between the signatures", _blank_before_last(cosigned), [arbiter, w1]),
        ("extra blank line after the signatures", note + "\n", [arbiter]),
        ("trailing data after the signatures", note + "trailing\n", [arbiter]),
        ("no final newline", note[:-1], [arbiter]),
        ("no blank line", text + "\n" + lines, [arbiter]),
        ("a hyphen for the em dash", note.replace("\u2014", "-"), [arbiter]),
        ("a carriage return", note.replace("\n", "\r\n", 1), [arbiter]),
        (
            "a key id alone",
            text + "\n\n" + prefix + " " + encode_base64(b"\x00\x00\x00\x01") + "\n",
            [arbiter],
        ),
        (
            f"{MAX_NOTE_SIGNATURES} signatures",
            text + "\n\n" + lines * MAX_NOTE_SIGNATURES,
            [arbiter],
        ),
        (
            f"{MAX_NOTE_SIGNATURES + 1} signatures: too many",
            text + "\n\n" + lines * (MAX_NOTE_SIGNATURES + 1),
            [arbiter],
        ),
    ]
    return [_case(name, "open", {"note": n, "keys": k}) for name, n, k in rows]


def _b64(text: str) -> bytes:
    return base64.b64decode(text)


def _flip(data: bytes, byte: int) -> bytes:
    out = bytearray(data)
    out[byte] ^= 1
    return bytes(out)


def _blank_before_last(note: str) -> str:
    """``note`` with a blank line before its last signature line."""
    cut = note.rfind("\n\u2014")
    return note[:cut] + "\n" + note[cut:]


def _nonzero_tail(b64: str) -> str:
    """``b64`` (ending in one ``=``) with non-zero trailing bits: same bytes, other text."""
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
    last = alphabet.index(b64[-2])
    return b64[:-2] + alphabet[last | 1] + "="


def _text_cases() -> list[dict[str, Any]]:
    root = encode_base64(ROOT)
    rows = [
        ("three lines", f"example.com/log\n{SIZE}\n{root}\n"),
        ("the empty tree", f"example.com/log\n0\n{encode_base64(EMPTY_ROOT)}\n"),
        ("an extension line", f"example.com/log\n{SIZE}\n{root}\nextension\n"),
        ("the largest size", f"example.com/log\n{MAX_TREE_SIZE}\n{root}\n"),
        ("size above 2^64 - 1", f"example.com/log\n{MAX_TREE_SIZE + 1}\n{root}\n"),
        ("non-canonical size: a leading zero", f"example.com/log\n0{SIZE}\n{root}\n"),
        ("size with a sign", f"example.com/log\n+{SIZE}\n{root}\n"),
        ("size in full-width digits", "example.com/log\n\uff11\n" + root + "\n"),
        ("root of 31 bytes", f"example.com/log\n{SIZE}\n{encode_base64(ROOT[:31])}\n"),
        ("root not base64", f"example.com/log\n{SIZE}\n{root[:-2]}!=\n"),
        ("root without padding", f"example.com/log\n{SIZE}\n{root.rstrip('=')}\n"),
        ("two lines", f"example.com/log\n{SIZE}\n"),
        ("an empty origin", f"\n{SIZE}\n{root}\n"),
        ("an empty extension line", f"example.com/log\n{SIZE}\n{root}\n\nextension\n"),
        ("16 extension lines", f"example.com/log\n{SIZE}\n{root}\n" + "e\n" * 16),
        ("17 extension lines: too many", f"example.com/log\n{SIZE}\n{root}\n" + "e\n" * 17),
    ]
    return [_case(n, "checkpoint-text", {"text": t}) for n, t in rows]


def _policy_input(
    note: str, witnesses: Sequence[str], k: int, *, max_age: int | None = None, skew: int = 300
) -> dict[str, Any]:
    return {
        "note": note,
        "arbiter_public_key": ARBITER_PUBLIC.hex(),
        "witnesses": [_witness_key(w).vkey() for w in witnesses],
        "threshold": k,
        "now": str(NOW),
        "max_age": None if max_age is None else str(max_age),
        "max_skew": str(skew),
    }


def _checkpoint_note_cases() -> list[dict[str, Any]]:
    w1, w2, w3 = WITNESSES
    note = _signed_note()
    both = _cosigned(note, (w1, NOW - 60), (w2, NOW - 30))
    other = sign_checkpoint_note(5, ROOT, Ed25519PrivateKey.from_private_bytes(bytes(32)))
    origin = arbiter_origin(ARBITER.public_key())
    name = arbiter_key(ARBITER.public_key())

    def signed_text(text: str) -> str:
        line = NoteSignature(name.name, name.key_id, ARBITER.sign(text.encode()))
        return Note(text, (line,)).encode().decode("utf-8")

    bad_time = cosign(parse_note(note.encode()).text, w1, WITNESSES[w1], NOW)
    huge = NoteSignature(
        bad_time.name, bad_time.key_id, (1 << 63).to_bytes(8, "big") + bad_time.signature[8:]
    )
    rows: list[tuple[str, dict[str, Any]]] = [
        ("the arbiter's signature alone, no witness policy", _policy_input(note, [], 0)),
        ("2 of 2 witnesses", _policy_input(both, [w1, w2], 2)),
        ("1 of 2 witnesses, both cosigned", _policy_input(both, [w1, w2], 1)),
        ("1 of w1 and w3: w2's line is an unknown key's", _policy_input(both, [w1, w3], 1)),
        ("2 of 2: one cosignature missing", _policy_input(_cosigned(note, (w1, NOW)), [w1, w2], 2)),
        (
            "2 of 2: one witness cosigned twice",
            _policy_input(_cosigned(note, (w1, NOW), (w1, NOW - 1)), [w1, w2], 2),
        ),
        (
            "2 of 2 within an hour: one too old",
            _policy_input(_cosigned(note, (w1, NOW - 3601), (w2, NOW)), [w1, w2], 2, max_age=3600),
        ),
        (
            "1 of 2 within an hour: one too old, one counted",
            _policy_input(_cosigned(note, (w1, NOW - 3601), (w2, NOW)), [w1, w2], 1, max_age=3600),
        ),
        (
            "a cosignature from the future",
            _policy_input(_cosigned(note, (w1, NOW + 301), (w2, NOW)), [w1, w2], 1),
        ),
        (
            "a cosignature at the edge of the skew",
            _policy_input(_cosigned(note, (w1, NOW + 300)), [w1, w2], 1),
        ),
        (
            "a cosignature time above 2^63 - 1",
            _policy_input(add_signatures(note.encode(), [huge]).decode(), [w1], 0),
        ),
        (
            "a witness's cosignature of another tree",
            _policy_input(
                add_signatures(
                    note.encode(),
                    [cosign(CheckpointText(origin, SIZE + 1, ROOT).text(), w1, WITNESSES[w1], NOW)],
                ).decode(),
                [w1],
                0,
            ),
        ),
        (
            "witnesses alone, no arbiter signature",
            _policy_input(_cosigned(note, (w1, NOW)).replace(note.split("\n\n")[1], ""), [w1], 1),
        ),
        ("another arbiter's note", _policy_input(other.decode(), [], 0)),
        (
            "the arbiter's key over another origin",
            _policy_input(signed_text(CheckpointText("example.com/log", SIZE, ROOT).text()), [], 0),
        ),
        (
            "an extension line",
            _policy_input(
                signed_text(CheckpointText(origin, SIZE, ROOT, ("time 1",)).text()), [], 0
            ),
        ),
        (
            "the empty log with another root",
            _policy_input(signed_text(CheckpointText(origin, 0, ROOT).text()), [], 0),
        ),
        (
            "the empty log",
            _policy_input(sign_checkpoint_note(0, EMPTY_ROOT, ARBITER).decode(), [], 0),
        ),
        (
            "non-canonical size",
            _policy_input(signed_text(f"{origin}\n0{SIZE}\n{encode_base64(ROOT)}\n"), [], 0),
        ),
        ("a policy of 3 of 2", _policy_input(both, [w1, w2], 3)),
    ]
    return [_case(n, "checkpoint-note", given) for n, given in rows]


def build() -> dict[str, Any]:
    """Return the vector document of §9.5."""
    cases = [
        *_key_id_cases(),
        *_vkey_cases(),
        *_sign_cases(),
        *_open_cases(),
        *_text_cases(),
        *_checkpoint_note_cases(),
    ]
    return {
        "spec_version": SPEC_VERSION,
        "topic": "notes",
        "description": (
            "Signed notes (C2SP signed-note), checkpoint texts (tlog-checkpoint) and "
            "timestamped Ed25519 cosignatures (tlog-cosignature), and the arbiter's "
            "checkpoint note under witness policies (spec §9.5). Notes, texts and vkeys "
            "are JSON strings (UTF-8); sizes and times are decimal strings; keys, roots "
            "and messages lowercase hex."
        ),
        "cases": cases,
    }


def main() -> None:
    """Rewrite spec/vectors/notes.json."""
    VECTOR_FILE.write_text(render(build()), encoding="utf-8")


if __name__ == "__main__":
    main()
