"""Build spec/vectors/witness.json: the witness protocol and the client's policy (spec §9.7).

Run ``python -m spec.tools.vectors_witness`` to rewrite the file; the conformance test
fails if the file differs from what :func:`build` returns. Three kinds of case:

- ``add-checkpoint``: a witness (its key's seed, name and clock), the log key it trusts,
  the state it holds for the log (size and root, or none) and a request body; the
  answer's status, media type and body byte for byte (a 200's cosignature line is
  exact: Ed25519 is deterministic and the time is given), and the state after it;
- ``policy``: a policy file's text; the threshold and the witnesses' vkeys, or the
  error (§9.7.3);
- ``log-evidence``: log evidence (a checkpoint note, an entry, an inclusion proof), the
  arbiter's public key, a policy, the record named, ``not_before`` and ``now``; the
  tree and the witnesses counted, or the error (§9.7.3).

The log is a tree of ten leaves ``leaf 0`` … ``leaf 9`` signed with the test key of
appendix B; a fork is a tree of other leaves of the same sizes, signed with that key.
"""

from __future__ import annotations

import hashlib
import tempfile
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from twinaudit.protocol import SPEC_VERSION
from twinaudit.protocol.checkpoint_note import add_signatures, arbiter_key, sign_checkpoint_note
from twinaudit.protocol.escrow_messages import LogEntry, rho_digest
from twinaudit.protocol.keys import public_key_from_raw, raw_public_key
from twinaudit.protocol.log_evidence import LogEvidence, check_log_evidence, parse_log_evidence
from twinaudit.protocol.merkle import EMPTY_ROOT, MerkleTree
from twinaudit.protocol.note import (
    COSIGNATURE_V1,
    Note,
    NoteSignature,
    VerifierKey,
    cosign,
    parse_note,
    parse_vkey,
)
from twinaudit.protocol.tlog_witness import AddCheckpoint
from twinaudit.protocol.witness_policy import parse_policy
from twinaudit.witness.cosigner import Cosigner, logs_by_origin
from twinaudit.witness.state import NEVER_COSIGNED, LogState, WitnessState

from .vectors_core import TEST_KEY_SEED, case, render

VECTOR_FILE = Path(__file__).resolve().parent.parent / "vectors" / "witness.json"

ARBITER = Ed25519PrivateKey.from_private_bytes(TEST_KEY_SEED)
WITNESS_SEEDS = {
    "w1.example": hashlib.sha256(b"witness vectors 1").digest(),
    "w2.example": hashlib.sha256(b"witness vectors 2").digest(),
}
WITNESSES = {n: Ed25519PrivateKey.from_private_bytes(s) for n, s in WITNESS_SEEDS.items()}
NOW = 1_796_000_000


def _vkey(name: str) -> VerifierKey:
    return VerifierKey.of(name, COSIGNATURE_V1, WITNESSES[name].public_key())


def _entries(tag: str) -> list[bytes]:
    """Ten log entries (§9.2) whose roots differ between the log and its fork."""
    return [
        LogEntry(
            index=i,
            root=hashlib.sha256(f"{tag} {i}".encode()).digest(),
            n_pairs=4,
            item_kind="image",
            owner="o",
            time="2026-11-28T12:00:00Z",
            rho_digest=rho_digest(bytes(32)),
        ).encode()
        for i in range(10)
    ]


LOG = MerkleTree(_entries("log"))
FORK = MerkleTree(_entries("fork"))


def _note(tree: MerkleTree, size: int) -> bytes:
    return sign_checkpoint_note(size, tree.root(size), ARBITER)


# --- What each kind of case computes, from its input alone (the conformance test too) -----


def run_add_checkpoint(given: dict[str, Any]) -> dict[str, Any]:
    """An ``add-checkpoint`` case: the witness's answer and its state after it."""
    key = Ed25519PrivateKey.from_private_bytes(bytes.fromhex(given["witness_seed"]))
    log = parse_vkey(given["log_vkey"])
    with tempfile.TemporaryDirectory() as folder:
        state = WitnessState(Path(folder) / "w.db")
        held = given["state"]
        if held is not None:
            stored = LogState(int(held["size"]), bytes.fromhex(held["root"]), b"held")
            state.advance(log.name, NEVER_COSIGNED, stored)
        witness = Cosigner(
            given["witness_name"], key, logs_by_origin([log]), state, clock=lambda: given["time"]
        )
        answer = witness.add_checkpoint(given["body"].encode("utf-8"))
        after = state.get(log.name)
    return {
        "status": answer.status,
        "content_type": answer.content_type,
        "body": answer.body.decode("utf-8") if answer.status in (200, 409) else None,
        "state": {"size": str(after.size), "root": after.root.hex()},
    }


def run_policy(given: dict[str, Any]) -> dict[str, Any]:
    """A ``policy`` case: the threshold and the witnesses of a policy file."""
    policy = parse_policy(given["text"].encode("utf-8")).policy
    return {"threshold": policy.threshold, "witnesses": [w.vkey() for w in policy.witnesses]}


def run_log_evidence(given: dict[str, Any]) -> dict[str, Any]:
    """A ``log-evidence`` case: the cosigned tree that holds the record, or the error."""
    checked = check_log_evidence(
        parse_log_evidence(given["evidence"].encode("utf-8")),
        public_key_from_raw(bytes.fromhex(given["arbiter_public_key"])),
        parse_policy(given["policy"].encode("utf-8")).policy,
        record_index=given["record_index"],
        record_root=bytes.fromhex(given["record_root"]),
        not_before=given["not_before"],
        now=given["now"],
    )
    return {
        "size": str(checked.checkpoint.size),
        "root": checked.checkpoint.root.hex(),
        "counted": [c.name for c in checked.checkpoint.counted],
        "stale": [c.name for c in checked.checkpoint.stale],
    }


RUNNERS = {
    "add-checkpoint": run_add_checkpoint,
    "policy": run_policy,
    "log-evidence": run_log_evidence,
}


def _case(name: str, kind: str, given: dict[str, Any]) -> dict[str, Any]:
    return case(name, kind, given, lambda: RUNNERS[kind](given))


# --- The cases ------------------------------------------------------------------------


def _request(old: int, tree: MerkleTree, size: int, proof: list[bytes] | None = None) -> str:
    if proof is None:
        proof = tree.consistency_proof(old, size) if 0 < old < size else []
    return AddCheckpoint(old, tuple(proof), _note(tree, size)).encode().decode("utf-8")


def _add_input(body: str, state: tuple[int, bytes] | None) -> dict[str, Any]:
    return {
        "witness_seed": WITNESS_SEEDS["w1.example"].hex(),
        "witness_name": "w1.example",
        "time": NOW,
        "log_vkey": arbiter_key(ARBITER.public_key()).vkey(),
        "state": None if state is None else {"size": str(state[0]), "root": state[1].hex()},
        "body": body,
    }


def _add_checkpoint_cases() -> list[dict[str, Any]]:
    at4 = (4, LOG.root(4))
    proof = LOG.consistency_proof(4, 7)
    other = Ed25519PrivateKey.from_private_bytes(hashlib.sha256(b"another log").digest())
    rows = [
        ("the first checkpoint, from size 0", _request(0, LOG, 4), None),
        ("a consistent larger tree, with its proof", _request(4, LOG, 7), at4),
        ("the same tree again", _request(4, LOG, 4), at4),
        ("a stale old size", _request(0, LOG, 7), at4),
        ("a bad proof", _request(4, LOG, 7, [proof[0][::-1], *proof[1:]]), at4),
        ("a proof one hash short", _request(4, LOG, 7, proof[:-1]), at4),
        ("a proof from size 0", _request(0, LOG, 4, [LOG.root(2)]), None),
        ("a fork of the same size", _request(4, FORK, 4), at4),
        ("a larger fork with its own proof", _request(4, FORK, 7), at4),
        ("an old size above the checkpoint's", _request(7, LOG, 4, []), (7, LOG.root(7))),
        (
            "an unknown log",
            AddCheckpoint(0, (), sign_checkpoint_note(3, LOG.root(3), other)).encode().decode(),
            None,
        ),
        ("malformed: no old size line", "new 0\n\n" + _note(LOG, 3).decode(), None),
        ("malformed: a leading zero", "old 04\n\n" + _note(LOG, 7).decode(), at4),
        (
            "no signature of the log's key",
            "old 0\n\n" + _only_a_cosignature(_note(LOG, 3)).decode(),
            None,
        ),
        (
            "the empty tree",
            AddCheckpoint(0, (), sign_checkpoint_note(0, EMPTY_ROOT, ARBITER)).encode().decode(),
            None,
        ),
    ]
    return [_case(n, "add-checkpoint", _add_input(body, s)) for n, body, s in rows]


def _cosign_of(note: bytes, name: str, when: int) -> NoteSignature:
    return cosign(parse_note(note).text, name, WITNESSES[name], when)


def _only_a_cosignature(note: bytes) -> bytes:
    """``note``'s text with w2's cosignature and no line of the log's key."""
    text = parse_note(note).text
    return Note(text, (_cosign_of(note, "w2.example", NOW),)).encode()


def _policy_text(k: str, *names: str) -> str:
    lines = [f"witness {n} {_vkey(n).vkey()}" for n in WITNESSES]
    return "\n".join([*lines, f"group g {k} {' '.join(names)}", "quorum g", ""])


def _policy_cases() -> list[dict[str, Any]]:
    rows = [
        ("2 of 2", _policy_text("2", "w1.example", "w2.example")),
        ("all", _policy_text("all", "w1.example", "w2.example")),
        ("any", _policy_text("any", "w1.example", "w2.example")),
        ("quorum none", "quorum none\n"),
        (
            "one witness as the quorum",
            f"witness w1.example {_vkey('w1.example').vkey()}\nquorum w1.example\n",
        ),
        (
            "comments, blank lines, tabs and a URL",
            f"# mine\n\n\twitness  A {_vkey('w1.example').vkey()} https://w1.example/\nquorum A\n",
        ),
        ("3 of 2", _policy_text("3", "w1.example", "w2.example")),
        ("no quorum", f"witness A {_vkey('w1.example').vkey()}\n"),
        ("a name used before it is defined", f"quorum A\nwitness A {_vkey('w1.example').vkey()}\n"),
        (
            "one key twice",
            f"witness A {_vkey('w1.example').vkey()}\nwitness B {_vkey('w1.example').vkey()}\n"
            "quorum A\n",
        ),
        (
            "a group of groups",
            _policy_text("1", "w1.example") + "group h 1 g\nquorum h\n",
        ),
        (
            "a log key as a witness",
            f"witness A {arbiter_key(ARBITER.public_key()).vkey()}\nquorum A\n",
        ),
        ("an unknown line", "witnesses\nquorum none\n"),
    ]
    return [_case(n, "policy", {"text": text}) for n, text in rows]


def _evidence(note: bytes, tree: MerkleTree, index: int, size: int) -> str:
    entry = _entries("log" if tree is LOG else "fork")[index]
    proof = tuple(tree.inclusion_proof(index, size))
    return LogEvidence(note, entry, proof).encode().decode("utf-8")


def _evidence_input(
    evidence: str, index: int, root_tag: str = "log", not_before: int = NOW - 60
) -> dict[str, Any]:
    return {
        "evidence": evidence,
        "arbiter_public_key": raw_public_key(ARBITER.public_key()).hex(),
        "policy": _policy_text("2", "w1.example", "w2.example"),
        "record_index": index,
        "record_root": hashlib.sha256(f"{root_tag} {index}".encode()).digest().hex(),
        "not_before": not_before,
        "now": NOW,
    }


def _log_evidence_cases() -> list[dict[str, Any]]:
    note = _note(LOG, 7)
    both = add_signatures(
        note, [_cosign_of(note, "w1.example", NOW), _cosign_of(note, "w2.example", NOW)]
    )
    one = add_signatures(note, [_cosign_of(note, "w1.example", NOW)])
    stale = add_signatures(
        note, [_cosign_of(note, "w1.example", NOW), _cosign_of(note, "w2.example", NOW - 3600)]
    )
    fork = _note(FORK, 7)
    pasted = add_signatures(
        fork, [_cosign_of(note, "w1.example", NOW), _cosign_of(note, "w2.example", NOW)]
    )
    small = _note(LOG, 3)
    small_both = add_signatures(
        small, [_cosign_of(small, "w1.example", NOW), _cosign_of(small, "w2.example", NOW)]
    )
    rows = [
        ("2 of 2 cosigned", _evidence_input(_evidence(both, LOG, 5, 7), 5)),
        ("w2's cosignature missing", _evidence_input(_evidence(one, LOG, 5, 7), 5)),
        ("w2's cosignature stale", _evidence_input(_evidence(stale, LOG, 5, 7), 5)),
        ("the fork, not cosigned", _evidence_input(_evidence(fork, FORK, 5, 7), 5, "fork")),
        (
            "the fork with the log's cosignatures pasted",
            _evidence_input(_evidence(pasted, FORK, 5, 7), 5, "fork"),
        ),
        ("another record than the one named", _evidence_input(_evidence(both, LOG, 4, 7), 5)),
        (
            "a cosigned tree that does not hold the record",
            _evidence_input(
                LogEvidence(small_both, _entries("log")[5], ()).encode().decode("utf-8"), 5
            ),
        ),
    ]
    return [_case(n, "log-evidence", given) for n, given in rows]


def build() -> dict[str, Any]:
    """Return the vector document of §9.7."""
    return {
        "spec_version": SPEC_VERSION,
        "topic": "witness",
        "description": (
            "The witness protocol (C2SP tlog-witness add-checkpoint: request bodies and "
            "answers), witness policy files (C2SP tlog-policy) and log evidence under a "
            "policy (spec §9.7). Bodies, notes and policies are JSON strings (UTF-8); "
            "sizes are decimal strings; keys, roots and seeds lowercase hex; times integers."
        ),
        "cases": [*_add_checkpoint_cases(), *_policy_cases(), *_log_evidence_cases()],
    }


def main() -> None:
    """Rewrite spec/vectors/witness.json."""
    VECTOR_FILE.write_text(render(build()), encoding="utf-8")


if __name__ == "__main__":
    main()
