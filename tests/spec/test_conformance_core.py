"""Run every core vector (encoding, hashing, PRG, envelope) against the implementation.

Each case is interpreted from its JSON alone, as a second implementation would; the
last test checks that the committed files are exactly what the builders produce, so
code and vectors cannot drift apart.
"""

import json
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from spec.tools import vectors_core
from spec.tools.typed_json import from_typed
from tests.support.vectors import raises_its_error
from twinaudit.protocol.commitment import PairOpening, commit_pair, verify_opening, version_digest
from twinaudit.protocol.encoding import decode, encode
from twinaudit.protocol.envelope import Envelope, open_envelope, pae, sign_envelope
from twinaudit.protocol.escrow_messages import open_receipt, verify_checkpoint
from twinaudit.protocol.hashing import tagged_hash
from twinaudit.protocol.items import CaptionedImageItem, decode_pair
from twinaudit.protocol.keys import key_id, public_key_from_raw, raw_public_key
from twinaudit.protocol.prg import Prg, bit_stream, stream_key, without_replacement
from twinaudit.protocol.seeds import audit_seed, publication_bits, publication_seed

VECTORS = Path(__file__).resolve().parents[2] / "spec" / "vectors"


def _cases(topic):
    doc = json.loads((VECTORS / f"{topic}.json").read_text(encoding="utf-8"))
    return [pytest.param(case, id=case["name"]) for case in doc["cases"]]


def _bits(bits):
    return "".join("1" if b else "0" for b in bits)


@pytest.mark.parametrize("case", _cases("encoding"))
def test_encoding(case):
    if case["valid"]:
        value = from_typed(case["input"]["value"])
        assert encode(value).hex() == case["expected"]["hex"]
        assert encode(decode(bytes.fromhex(case["expected"]["hex"]))) == encode(value)
    else:
        raises_its_error(case, lambda: decode(bytes.fromhex(case["input"]["hex"])))


def _hashing(case):
    kind, inp = case["kind"], case["input"]
    if kind == "tagged-hash":
        return {"hex": tagged_hash(inp["tag"], from_typed(inp["value"])).hex()}
    if kind == "commitment":
        v0, v1 = bytes.fromhex(inp["version0"]), bytes.fromhex(inp["version1"])
        c, _ = commit_pair(v0, v1, bytes.fromhex(inp["salt"]))
        return {
            "digest0": version_digest(v0).hex(),
            "digest1": version_digest(v1).hex(),
            "commitment": c.hex(),
        }
    if kind == "opening":
        opening = PairOpening(
            bytes.fromhex(inp["salt"]),
            bytes.fromhex(inp["version0"]),
            bytes.fromhex(inp["version1"]),
        )
        return verify_opening(bytes.fromhex(inp["commitment"]), opening)
    if kind == "item-pair":
        first, _ = decode_pair(
            bytes.fromhex(inp["version0"]), bytes.fromhex(inp["version1"]), inp["item_kind"]
        )
        assert isinstance(first, CaptionedImageItem)
        return {"caption_bytes": len(first.caption.encode())}
    root, rho = bytes.fromhex(inp["root"]), bytes.fromhex(inp["rho"])
    if kind == "publication":
        return {
            "seed": publication_seed(root, rho).hex(),
            "bits": _bits(publication_bits(root, rho, inp["n_pairs"])),
        }
    if kind == "audit-seed":
        return {"seed": audit_seed(root, rho, bytes.fromhex(inp["claim_nonce"])).hex()}
    raise AssertionError(kind)


@pytest.mark.parametrize("case", _cases("hashing"))
def test_hashing(case):
    if case["valid"]:
        assert _hashing(case) == case["expected"]
    else:
        raises_its_error(case, lambda: _hashing(case))


def _prg(case):
    kind, inp = case["kind"], case["input"]
    seed = bytes.fromhex(inp["seed"])
    if kind == "stream":
        return {
            "key": stream_key(seed, inp["label"]).hex(),
            "first_bytes": Prg(seed, inp["label"]).read(100).hex(),
        }
    if kind == "randbelow":
        prg = Prg(seed, inp["label"])
        values = [str(prg.randbelow(int(inp["bound"]))) for _ in range(inp["count"])]
        return {"values": values, "bytes_consumed": prg.consumed}
    if kind == "uniform":
        prg = Prg(seed, inp["label"])
        return {"values": [prg.uniform().hex() for _ in range(inp["count"])]}
    if kind == "coin":
        prg = Prg(seed, inp["label"])
        return {"bits": _bits([prg.coin() for _ in range(inp["count"])])}
    if kind == "permutation":
        return {"order": list(without_replacement(seed, inp["n"], inp["label"]))}
    if kind == "permutation-prefix":
        it = without_replacement(seed, inp["n"], inp["label"])
        return {"order": [next(it) for _ in range(inp["count"])]}
    if kind == "bit-stream":
        return {"bits": _bits(bit_stream(seed, inp["label"], inp["start"], inp["count"]))}
    raise AssertionError(kind)


@pytest.mark.parametrize("case", _cases("prg"))
def test_prg(case):
    if case["valid"]:
        assert _prg(case) == case["expected"]
    else:
        raises_its_error(case, lambda: _prg(case))


@pytest.mark.parametrize("case", _cases("envelope"))
def test_envelope(case):
    inp = case["input"]
    if case["kind"] == "key":
        key = Ed25519PrivateKey.from_private_bytes(bytes.fromhex(inp["private_seed"]))
        assert raw_public_key(key.public_key()).hex() == case["expected"]["public_key"]
        assert key_id(key.public_key()) == case["expected"]["key_id"]
    elif case["kind"] == "envelope":
        key = Ed25519PrivateKey.from_private_bytes(bytes.fromhex(inp["private_seed"]))
        body = bytes.fromhex(inp["payload"])
        assert pae(inp["payload_type"], body).hex() == case["expected"]["pae"]
        env = sign_envelope(body, inp["payload_type"], key)
        assert env.signatures[0].sig.hex() == case["expected"]["signature"]
        assert env.to_json().decode("utf-8") == case["expected"]["json"]
        parsed = Envelope.from_json(case["expected"]["json"].encode("utf-8"))
        key.public_key().verify(parsed.signatures[0].sig, pae(parsed.payload_type, parsed.payload))
    elif case["kind"] in ("receipt", "checkpoint"):
        pub = public_key_from_raw(bytes.fromhex(inp["public_key"]))
        signed = inp["json"].encode("utf-8")
        verify = open_receipt if case["kind"] == "receipt" else verify_checkpoint
        if case["valid"]:
            assert verify(signed, pub).encode().hex() == case["expected"]["payload"]
        else:
            raises_its_error(case, lambda: verify(signed, pub))
    else:
        pub = public_key_from_raw(bytes.fromhex(inp["public_key"]))
        kind = inp["expected_type"].split(".")[2]

        def run():
            return open_envelope(Envelope.from_json(inp["json"].encode("utf-8")), pub, kind)

        if case["valid"]:
            assert encode(run()).hex() == case["expected"]["payload"]
        else:
            raises_its_error(case, run)


@pytest.mark.parametrize(
    "topic",
    [  # encoding's builder alone takes seconds
        pytest.param(t, marks=[pytest.mark.slow] if t == "encoding" else [])
        for t in sorted(vectors_core.BUILDERS)
    ],
)
def test_vector_files_match_the_builders(topic):
    text = (VECTORS / f"{topic}.json").read_text(encoding="utf-8")
    assert text == vectors_core.render(vectors_core.BUILDERS[topic]()), (
        f"spec/vectors/{topic}.json is stale: run python -m spec.tools.vectors_core"
    )
