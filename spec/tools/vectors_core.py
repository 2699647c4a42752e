"""Build the core test vectors: encoding, hashing/commitments/seeds, PRG, envelopes.

Run ``python -m spec.tools.vectors_core`` to rewrite the four files in spec/vectors;
the conformance tests fail if the files differ from what this module builds.
"""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from twinaudit.protocol import SPEC_VERSION, limits
from twinaudit.protocol.commitment import commit_pair, version_digest
from twinaudit.protocol.encoding import encode
from twinaudit.protocol.envelope import Envelope, pae, payload_type, sign_envelope
from twinaudit.protocol.errors import TwinauditError
from twinaudit.protocol.escrow_messages import (
    Checkpoint,
    EscrowRequest,
    Receipt,
    format_time,
    make_entry,
    sign_checkpoint,
    sign_receipt,
)
from twinaudit.protocol.hashing import tagged_hash
from twinaudit.protocol.keys import key_id, raw_public_key
from twinaudit.protocol.merkle import EMPTY_ROOT, MerkleTree
from twinaudit.protocol.prg import Prg, bit_stream, stream_key, without_replacement
from twinaudit.protocol.seeds import audit_seed, publication_bits, publication_seed

from .typed_json import to_typed
from .vectors_items import item_pair_cases

VECTOR_DIR = Path(__file__).resolve().parent.parent / "vectors"

#: The fixed test key of spec appendix B (NEVER use it for anything else).
TEST_KEY_SEED = bytes(range(32))
OTHER_KEY_SEED = bytes(range(100, 132))


def _doc(topic: str, description: str, cases: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "spec_version": SPEC_VERSION,
        "topic": topic,
        "description": description,
        "cases": cases,
    }


def _bits(bits: list[bool]) -> str:
    return "".join("1" if b else "0" for b in bits)


def build_encoding() -> dict[str, Any]:
    """Canonical encodings of typed values, and byte strings that must be rejected."""
    valid_values: list[tuple[str, Any]] = [
        ("nil", None),
        ("true", True),
        ("zero", 0),
        ("largest positive fixint", 127),
        ("smallest uint8", 128),
        ("largest uint64", (1 << 64) - 1),
        ("negative fixint", -32),
        ("smallest int8", -33),
        ("smallest int64", -(1 << 63)),
        ("float one and a half", 1.5),
        ("negative zero", -0.0),
        ("smallest subnormal", 5e-324),
        ("ascii text", "twinaudit"),
        ("non-ascii text", "Prüfung ✓"),
        ("32-byte text uses str8", "a" * 32),
        ("empty bytes", b""),
        ("bytes", bytes(range(8))),
        ("nested array", [1, [2, [3]], []]),
        ("map sorted by utf-8 bytes", {"z": 1, "é": 2, "a": 3, "aa": 4, "B": 5}),
        (
            "claim-like record",
            {"test": "pprm-chernoff", "p": 0.05, "n_pairs": 1000, "root": bytes(32)},
        ),
    ]
    cases: list[dict[str, Any]] = [
        {
            "name": name,
            "kind": "encode",
            "valid": True,
            "input": {"value": to_typed(value)},
            "expected": {"hex": encode(value).hex()},
        }
        for name, value in valid_values
    ]
    invalid = [
        ("uint8 used for a fixint", "cc05"),
        ("uint16 used for a uint8 value", "cd0080"),
        ("int8 used for a non-negative value", "d005"),
        ("int16 used for a negative fixint", "d1ffff"),
        ("float32", "ca3fc00000"),
        ("str8 used for a fixstr", "d90161"),
        ("bin16 used for a short byte string", "c5000161"),
        ("array16 used for a fixarray", "dc000101"),
        ("map16 used for a fixmap", "de0001a16101"),
        ("map keys out of order", "82a16201a16102"),
        ("duplicate map key", "82a16101a16101"),
        ("integer map key", "810101"),
        ("byte-string map key", "81c4016101"),
        ("extension type", "d40100"),
        ("NaN", "cb7ff8000000000000"),
        ("positive infinity", "cb7ff0000000000000"),
        ("invalid UTF-8 in text", "a2fffe"),
        ("trailing byte", "0102"),
        ("truncated array", "9201"),
        ("reserved byte 0xc1", "c1"),
        ("empty input", ""),
    ]
    cases += [
        {
            "name": name,
            "kind": "decode",
            "valid": False,
            "input": {"hex": hex_},
            "error": "non-canonical-encoding",
        }
        for name, hex_ in invalid
    ]
    deep = "91" * 40 + "90"
    cases.append(
        {
            "name": "nesting deeper than 32",
            "kind": "decode",
            "valid": False,
            "input": {"hex": deep},
            "error": "limit-exceeded",
        }
    )
    # The boundary (§2.3): the top-level value is at depth 0, each element one deeper.
    # 32 arrays around an integer put the integer at depth 32: accepted. An empty array
    # at depth 32 is accepted too; anything at depth 33 is not.
    for name, hex_ in [
        ("an integer at depth 32 (32 arrays around it)", "91" * 32 + "01"),
        ("an empty array at depth 32 (33 arrays in all)", "91" * 32 + "90"),
    ]:
        value: Any = 1 if hex_.endswith("01") else []
        for _ in range(32):
            value = [value]
        assert encode(value).hex() == hex_
        cases.append(
            {
                "name": name,
                "kind": "encode",
                "valid": True,
                "input": {"value": to_typed(value)},
                "expected": {"hex": hex_},
            }
        )
    cases.append(
        {
            "name": "an integer at depth 33 (33 arrays around it)",
            "kind": "decode",
            "valid": False,
            "input": {"hex": "91" * 33 + "01"},
            "error": "limit-exceeded",
        }
    )
    cases += _sized_value_cases()
    return _doc("encoding", "Canonical MessagePack (spec §3).", cases)


def _sized_value_cases() -> list[dict[str, Any]]:
    """One more sized value than MAX_SIZED_VALUES(n) allows (§2.3, §3.3), two ways.

    Each is the smallest encoding of its kind above the cap: an array of empty arrays,
    and a map of two-letter keys with nil values (keys count, nil values do not). With
    one item fewer, each is accepted.
    """
    letters = [chr(c) for c in range(0x21, 0x7F)]
    keys = sorted(a + b for a in letters for b in letters)
    builders = [
        ("empty arrays in one array", lambda count: [[] for _ in range(count)]),
        ("two-letter keys of one map (keys count)", lambda count: dict.fromkeys(keys[:count])),
    ]
    cases = []
    for name, build in builders:
        count = limits.SIZED_VALUES_BASE  # the container and its items: count + 1 sized values
        while count + 1 <= limits.max_sized_values(len(data := encode(build(count)))):
            count += 1  # the least count above the cap
        cap = limits.max_sized_values(len(data))
        cases.append(
            {
                "name": f"{count} {name}: {count + 1} sized values in {len(data)} bytes, "
                f"above MAX_SIZED_VALUES = 8192 + floor({len(data)}/64) = {cap}",
                "kind": "decode",
                "valid": False,
                "input": {"hex": data.hex()},
                "error": "limit-exceeded",
            }
        )
    return cases


def build_hashing() -> dict[str, Any]:
    """Tagged hashes, version digests, pair commitments, publication bits and audit seeds."""
    cases: list[dict[str, Any]] = []
    for name, value in [
        ("key-id", b""),
        ("version-digest", b"abc"),
        ("audit-seed", [bytes(32), bytes(32), bytes(32)]),
    ]:
        cases.append(
            {
                "name": f"tagged hash {name}",
                "kind": "tagged-hash",
                "valid": True,
                "input": {"tag": name, "value": to_typed(value)},
                "expected": {"hex": tagged_hash(name, value).hex()},
            }
        )
    salt = bytes(range(32))
    for v0, v1 in [(b"", b""), (b"version zero", b"version one"), (bytes(1000), bytes([1]) * 1000)]:
        commitment, _ = commit_pair(v0, v1, salt)
        cases.append(
            {
                "name": f"pair commitment ({len(v0)}-byte versions)",
                "kind": "commitment",
                "valid": True,
                "input": {"salt": salt.hex(), "version0": v0.hex(), "version1": v1.hex()},
                "expected": {
                    "digest0": version_digest(v0).hex(),
                    "digest1": version_digest(v1).hex(),
                    "commitment": commitment.hex(),
                },
            }
        )
    good, _ = commit_pair(b"version zero", b"version one", salt)
    for name, s, a, b in [
        ("salt off by one bit", bytes([1]) + salt[1:], b"version zero", b"version one"),
        ("versions swapped", salt, b"version one", b"version zero"),
        ("hidden version changed", salt, b"version zero", b"version onE"),
    ]:
        cases.append(
            {
                "name": name,
                "kind": "opening",
                "valid": False,
                "input": {
                    "commitment": good.hex(),
                    "salt": s.hex(),
                    "version0": a.hex(),
                    "version1": b.hex(),
                },
                "error": "commitment-mismatch",
            }
        )
    cases.append(
        {
            "name": "31-byte salt",
            "kind": "commitment",
            "valid": False,
            "input": {"salt": salt[:31].hex(), "version0": "", "version1": ""},
            "error": "invalid-input",
        }
    )
    root, rho = bytes.fromhex("ab" * 32), bytes.fromhex("cd" * 32)
    cases.append(
        {
            "name": "publication bits",
            "kind": "publication",
            "valid": True,
            "input": {"root": root.hex(), "rho": rho.hex(), "n_pairs": 300},
            "expected": {
                "seed": publication_seed(root, rho).hex(),
                "bits": _bits(publication_bits(root, rho, 300)),
            },
        }
    )
    nonce = bytes.fromhex("ef" * 32)
    cases.append(
        {
            "name": "audit seed",
            "kind": "audit-seed",
            "valid": True,
            "input": {"root": root.hex(), "rho": rho.hex(), "claim_nonce": nonce.hex()},
            "expected": {"seed": audit_seed(root, rho, nonce).hex()},
        }
    )
    cases.extend(item_pair_cases())
    return _doc(
        "hashing",
        "Tagged hashes, commitments and derived seeds (spec §4-§6). 'item-pair': both "
        "versions of a pair decoded as items of the record's item kind (§6.3), which must "
        "differ only in their marked content; expected: the caption's length in UTF-8 bytes.",
        cases,
    )


def build_prg() -> dict[str, Any]:
    """PRG streams, integers, floats, coins, permutations and bit streams."""
    seed = bytes.fromhex("0f" * 32)
    cases: list[dict[str, Any]] = []
    for label in ["order", "tie/17", "augment/3/1", "Prüfung"]:
        cases.append(
            {
                "name": f"stream {label!r}",
                "kind": "stream",
                "valid": True,
                "input": {"seed": seed.hex(), "label": label},
                "expected": {
                    "key": stream_key(seed, label).hex(),
                    "first_bytes": Prg(seed, label).read(100).hex(),
                },
            }
        )
    for bound in [1, 2, 6, 1000, 3 * (1 << 62), 1 << 64]:
        prg = Prg(seed, "randbelow")
        cases.append(
            {
                "name": f"randbelow {bound}",
                "kind": "randbelow",
                "valid": True,
                "input": {
                    "seed": seed.hex(),
                    "label": "randbelow",
                    "bound": str(bound),
                    "count": 20,
                },
                "expected": {
                    "values": [str(prg.randbelow(bound)) for _ in range(20)],
                    "bytes_consumed": prg.consumed,
                },
            }
        )
    prg = Prg(seed, "uniform")
    cases.append(
        {
            "name": "uniform floats",
            "kind": "uniform",
            "valid": True,
            "input": {"seed": seed.hex(), "label": "uniform", "count": 10},
            "expected": {"values": [prg.uniform().hex() for _ in range(10)]},
        }
    )
    prg = Prg(seed, "coins")
    cases.append(
        {
            "name": "coins",
            "kind": "coin",
            "valid": True,
            "input": {"seed": seed.hex(), "label": "coins", "count": 64},
            "expected": {"bits": _bits([prg.coin() for _ in range(64)])},
        }
    )
    for n in [1, 2, 10, 100]:
        cases.append(
            {
                "name": f"permutation of {n}",
                "kind": "permutation",
                "valid": True,
                "input": {"seed": seed.hex(), "label": "order", "n": n},
                "expected": {"order": list(without_replacement(seed, n))},
            }
        )
    big = without_replacement(seed, 1_000_000)
    cases.append(
        {
            "name": "first 20 of a permutation of 10**6",
            "kind": "permutation-prefix",
            "valid": True,
            "input": {"seed": seed.hex(), "label": "order", "n": 1_000_000, "count": 20},
            "expected": {"order": [next(big) for _ in range(20)]},
        }
    )
    for start, count in [(0, 64), (1000, 37), (513 * 8 + 3, 20)]:
        cases.append(
            {
                "name": f"bit stream [{start}, {start + count})",
                "kind": "bit-stream",
                "valid": True,
                "input": {"seed": seed.hex(), "label": "bits", "start": start, "count": count},
                "expected": {"bits": _bits(bit_stream(seed, "bits", start, count))},
            }
        )
    for name, inp, err in [
        (
            "seed of 31 bytes",
            {"seed": seed[:31].hex(), "label": "x", "bound": "2", "count": 1},
            "invalid-input",
        ),
        (
            "bound zero",
            {"seed": seed.hex(), "label": "x", "bound": "0", "count": 1},
            "invalid-parameter",
        ),
        (
            "bound above 2**64",
            {"seed": seed.hex(), "label": "x", "bound": str((1 << 64) + 1), "count": 1},
            "invalid-parameter",
        ),
        (
            "label of 257 bytes",
            {"seed": seed.hex(), "label": "x" * 257, "bound": "2", "count": 1},
            "limit-exceeded",
        ),
    ]:
        cases.append(
            {"name": name, "kind": "randbelow", "valid": False, "input": inp, "error": err}
        )
    return _doc("prg", "The ChaCha20-based PRG (spec §5).", cases)


def build_envelope() -> dict[str, Any]:
    """PAE bytes, key ids, signatures under the fixed test key, and broken envelopes."""
    key = Ed25519PrivateKey.from_private_bytes(TEST_KEY_SEED)
    other = Ed25519PrivateKey.from_private_bytes(OTHER_KEY_SEED)
    pub = raw_public_key(key.public_key())
    verdict_type = payload_type("verdict")
    cases: list[dict[str, Any]] = [
        {
            "name": "test key",
            "kind": "key",
            "valid": True,
            "input": {"private_seed": TEST_KEY_SEED.hex()},
            "expected": {"public_key": pub.hex(), "key_id": key_id(key.public_key())},
        },
    ]
    for type_, body in [
        (verdict_type, encode({"decision": "detected"})),
        ("application/vnd.twinaudit.prüfung.v1+msgpack", b"\x80"),
        ("", b""),
    ]:
        env = sign_envelope(body, type_, key)
        cases.append(
            {
                "name": f"signed envelope, type {type_!r}",
                "kind": "envelope",
                "valid": True,
                "input": {
                    "private_seed": TEST_KEY_SEED.hex(),
                    "payload_type": type_,
                    "payload": body.hex(),
                },
                "expected": {
                    "pae": pae(type_, body).hex(),
                    "signature": env.signatures[0].sig.hex(),
                    "json": env.to_json().decode("utf-8"),
                },
            }
        )
    good = sign_envelope(encode({"decision": "detected"}), verdict_type, key)
    good_json = json.loads(good.to_json())

    def broken(
        name: str, doc: dict[str, Any], error: str, expected_type: str = verdict_type
    ) -> None:
        cases.append(
            {
                "name": name,
                "kind": "verify",
                "valid": False,
                "input": {
                    "public_key": pub.hex(),
                    "expected_type": expected_type,
                    "json": json.dumps(doc, sort_keys=True, separators=(",", ":")),
                },
                "error": error,
            }
        )

    sig = bytearray(good.signatures[0].sig)
    sig[0] ^= 1
    broken(
        "flipped signature bit",
        {
            **good_json,
            "signatures": [
                {"keyid": good.signatures[0].keyid, "sig": base64.b64encode(bytes(sig)).decode()}
            ],
        },
        "invalid-signature",
    )
    broken(
        "payload changed after signing",
        {**good_json, "payload": base64.b64encode(encode({"decision": "not-detected"})).decode()},
        "invalid-signature",
    )
    broken(
        "payload type not the expected one", good_json, "invalid-signature", payload_type("receipt")
    )
    by_other = json.loads(sign_envelope(good.payload, verdict_type, other).to_json())
    broken("signed by another key", by_other, "invalid-signature")
    broken(
        "base64 without padding",
        {**good_json, "payload": good_json["payload"].rstrip("=")},
        "non-canonical-encoding",
    )
    broken("unknown field", {**good_json, "extra": 1}, "non-canonical-encoding")
    broken("no signatures", {**good_json, "signatures": []}, "non-canonical-encoding")
    noncanon = json.loads(sign_envelope(bytes.fromhex("cc05"), verdict_type, key).to_json())
    broken("signed but non-canonical payload", noncanon, "non-canonical-encoding")

    def broken_text(name: str, text: str, error: str = "non-canonical-encoding") -> None:
        cases.append(
            {
                "name": name,
                "kind": "verify",
                "valid": False,
                "input": {"public_key": pub.hex(), "expected_type": verdict_type, "json": text},
                "error": error,
            }
        )

    text = good.to_json().decode()
    broken_text("pretty-printed JSON", json.dumps(good_json, sort_keys=True, indent=2))
    broken_text(
        "members in another order",
        json.dumps(
            {
                "signatures": good_json["signatures"],
                "payloadType": verdict_type,
                "payload": good_json["payload"],
            },
            separators=(",", ":"),
        ),
    )
    broken_text(
        "a character escaped", text.replace('"payloadType":"a', '"payloadType":"\\u0061', 1)
    )
    broken_text("a trailing newline", text + "\n")
    broken_text("a member twice", text.replace("{", '{"payload":"AA==",', 1))
    # The bounds on the text itself (§8.2): each case breaks one rule only.
    signatures = text.index('"signatures":[') + len('"signatures":[')
    broken_text(
        "signatures nested 2,000 deep",
        text[:signatures] + "[" * 2000 + "]" * 2000 + "," + text[signatures:],
    )
    broken_text(
        "more arrays than the form holds",
        text[:signatures] + "[]," * (limits.MAX_SIGNATURES + 1) + text[signatures:],
        "limit-exceeded",
    )
    cases += _keyid_lengths(good, pub, verdict_type)
    cases += _escrow_envelopes(key, other)
    return _doc(
        "envelope",
        "DSSE-style signed envelopes with Ed25519 (spec §8); signed escrow receipts and log "
        "checkpoints (§9.3 steps 1-3, §9.4), valid and with their key id or signatures "
        "changed after signing.",
        cases,
    )


def _keyid_lengths(good: Envelope, pub: bytes, verdict_type: str) -> list[dict[str, Any]]:
    """``verify`` cases whose keyid is 128 or 129 characters (§8.2: code points, not bytes).

    A valid case verifies the envelope JSON under ``public_key`` (key ids are hints, so
    the label does not matter) and expects the payload's bytes.
    """
    cases = []
    for name, keyid in (
        ("a keyid of 128 'é' (256 UTF-8 bytes) is 128 characters", "é" * 128),
        ("a keyid of 128 ASCII letters", "a" * 128),
        ("a keyid of 129 ASCII letters", "a" * 129),
        ("a keyid of 129 'é'", "é" * 129),
    ):
        doc = json.loads(good.to_json())
        doc["signatures"][0]["keyid"] = keyid
        text = json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        inp = {"public_key": pub.hex(), "expected_type": verdict_type, "json": text}
        entry: dict[str, Any] = {"name": name, "kind": "verify", "input": inp}
        if len(keyid) <= 128:
            entry |= {"valid": True, "expected": {"payload": good.payload.hex()}}
        else:
            entry |= {"valid": False, "error": "non-canonical-encoding"}
        cases.append(entry)
    return cases


def _escrow_envelopes(key: Ed25519PrivateKey, other: Ed25519PrivateKey) -> list[dict[str, Any]]:
    """A receipt and a checkpoint signed with the test key, then each edited after signing.

    A ``receipt`` or ``checkpoint`` case verifies the envelope JSON under ``public_key``
    as §9.3 steps 1-3 and §9.4 say, and expects its payload's bytes; the broken ones
    change the key id (one character, or another key's id) or add a second signature,
    and must fail with ``invalid-signature`` (§8.2: one signature, labelled with the
    arbiter's key id).
    """
    arbiter = key_id(key.public_key())
    when = datetime(2026, 11, 21, 20, 40, 5, tzinfo=UTC)
    request = EscrowRequest(root=bytes(range(32)), n_pairs=8, item_kind="image", owner="alice")
    entry = make_entry(request, index=0, time=when, rho=bytes(range(100, 132)))
    receipt = Receipt(
        arbiter=arbiter,
        entry=entry,
        rho=bytes(range(100, 132)),
        log_size=1,
        log_root=MerkleTree([entry.encode()]).root(),
    )
    checkpoint = Checkpoint(arbiter=arbiter, size=0, root=EMPTY_ROOT, time=format_time(when))
    pub = raw_public_key(key.public_key()).hex()
    cases: list[dict[str, Any]] = []
    for kind, payload, signed in [
        ("receipt", receipt.encode(), sign_receipt(receipt, key)),
        ("checkpoint", checkpoint.encode(), sign_checkpoint(checkpoint, key)),
    ]:
        text = signed.decode("utf-8")
        cases.append(
            {
                "name": f"signed {kind}",
                "kind": kind,
                "valid": True,
                "input": {"public_key": pub, "json": text},
                "expected": {"payload": payload.hex()},
            }
        )
        doc = json.loads(text)
        second = json.loads(sign_envelope(payload, doc["payloadType"], other).to_json())
        for name, changed in [
            (
                "key id's first character changed",
                _keyid(doc, ("0" if arbiter[0] != "0" else "1") + arbiter[1:]),
            ),
            (
                "key id's last character changed",
                _keyid(doc, arbiter[:-1] + ("0" if arbiter[-1] != "0" else "1")),
            ),
            ("key id of another key", _keyid(doc, key_id(other.public_key()))),
            (
                "a second signature, by another key",
                {**doc, "signatures": doc["signatures"] + second["signatures"]},
            ),
            ("the signature twice", {**doc, "signatures": doc["signatures"] * 2}),
        ]:
            cases.append(
                {
                    "name": f"{kind} with its {name}"
                    if name.startswith("key")
                    else f"{kind} with {name}",
                    "kind": kind,
                    "valid": False,
                    "input": {
                        "public_key": pub,
                        "json": json.dumps(changed, separators=(",", ":")),
                    },
                    "error": "invalid-signature",
                }
            )
    return cases


def _keyid(doc: dict[str, Any], keyid: str) -> dict[str, Any]:
    """The envelope ``doc`` with its one signature's key id replaced by ``keyid``."""
    (signature,) = doc["signatures"]
    return {**doc, "signatures": [{**signature, "keyid": keyid}]}


BUILDERS = {
    "encoding": build_encoding,
    "hashing": build_hashing,
    "prg": build_prg,
    "envelope": build_envelope,
}


def error_fields(exc: TwinauditError) -> dict[str, str]:
    """An invalid case's ``error`` (the code) and, where the error names one, ``rule``."""
    return {"error": exc.code} | ({"rule": exc.rule} if exc.rule else {})


def case(name: str, kind: str, inp: dict[str, Any], compute: Any) -> dict[str, Any]:
    """A valid case with ``compute()``'s result, or an invalid one with its error code."""
    name = f"{kind}: {name}"
    try:
        expected = compute()
    except TwinauditError as exc:
        return {"name": name, "kind": kind, "valid": False, "input": inp} | error_fields(exc)
    return {"name": name, "kind": kind, "valid": True, "input": inp, "expected": expected}


def render(doc: dict[str, Any]) -> str:
    """Return the exact text of a vector file."""
    return json.dumps(doc, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def main() -> None:
    """Rewrite the core vector files."""
    for topic, builder in BUILDERS.items():
        (VECTOR_DIR / f"{topic}.json").write_text(render(builder()), encoding="utf-8")


if __name__ == "__main__":
    main()
