"""The witness's add-checkpoint checks (C2SP tlog-witness, spec §9.7.1), without HTTP.

Each status the C2SP text requires, on a real log (a Merkle tree of a few leaves) and
its arbiter's signed checkpoint notes: 200 with a cosignature that verifies, 409 with
the size last cosigned, 422 for a bad proof or a fork, 403/404 for an unknown key or
log, 400 for a malformed body or an old size above the new one; and the state's
compare-and-swap, which lets only one of two racing requests advance.
"""

from __future__ import annotations

import threading

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from tests.support.keys import KEY, OTHER
from twinaudit.protocol.checkpoint_note import (
    WitnessPolicy,
    add_signatures,
    arbiter_key,
    sign_checkpoint_note,
    verify_checkpoint_note,
)
from twinaudit.protocol.merkle import MerkleTree
from twinaudit.protocol.note import COSIGNATURE_V1, Note, NoteSignature, VerifierKey, cosign
from twinaudit.protocol.tlog_witness import (
    SIZE_MEDIA_TYPE,
    AddCheckpoint,
    parse_cosignatures,
    parse_size,
)
from twinaudit.witness.cosigner import Cosigner, logs_by_origin
from twinaudit.witness.state import LogState, WitnessState

WITNESS = Ed25519PrivateKey.from_private_bytes(bytes(range(2, 34)))
NOW = 1_800_000_000


def tree(n: int, tag: bytes = b"e") -> MerkleTree:
    return MerkleTree(tag + str(i).encode() for i in range(n))


def note_of(t: MerkleTree, key: Ed25519PrivateKey = KEY) -> bytes:
    return sign_checkpoint_note(t.size, t.root(), key)


def request(old: int, t: MerkleTree) -> bytes:
    """An add-checkpoint body from ``old`` with ``t``'s own consistency proof."""
    proof = t.consistency_proof(old, t.size) if 0 < old < t.size else []
    return AddCheckpoint(old, tuple(proof), note_of(t)).encode()


@pytest.fixture
def cosigner(tmp_path) -> Cosigner:
    logs = logs_by_origin([arbiter_key(KEY.public_key())])
    return Cosigner("w1.example", WITNESS, logs, WitnessState(tmp_path / "w.db"), clock=lambda: NOW)


def test_the_first_checkpoint_is_cosigned_and_verifies_under_a_policy(cosigner) -> None:
    t = tree(5)
    answer = cosigner.add_checkpoint(request(0, t))
    assert answer.status == 200, answer.body
    lines = parse_cosignatures(answer.body)
    cosigned = add_signatures(note_of(t), lines)
    policy = WitnessPolicy((cosigner.vkey,), 1)
    checked = verify_checkpoint_note(cosigned, KEY.public_key(), policy, now=NOW)
    assert checked.size == 5
    assert [(c.name, c.timestamp) for c in checked.counted] == [("w1.example", NOW)]
    # The monitoring view holds the log's line and the witness's.
    assert verify_checkpoint_note(
        cosigner.latest(checked.origin), KEY.public_key(), policy, now=NOW
    )


def test_a_consistent_larger_checkpoint_is_cosigned_with_its_proof(cosigner) -> None:
    t = tree(9)
    assert cosigner.add_checkpoint(request(0, tree(4))).status == 200
    assert cosigner.add_checkpoint(request(4, t)).status == 200
    # The same tree again, with old = size: cosigned again (a fresh time).
    assert cosigner.add_checkpoint(request(9, t)).status == 200


def test_a_stale_old_size_gets_409_with_the_size_last_cosigned(cosigner) -> None:
    assert cosigner.add_checkpoint(request(0, tree(4))).status == 200
    answer = cosigner.add_checkpoint(request(0, tree(7)))
    assert (answer.status, answer.content_type, answer.body) == (409, SIZE_MEDIA_TYPE, b"4\n")
    assert parse_size(answer.body) == 4


def test_a_fork_is_refused_422_and_never_cosigned(cosigner) -> None:
    assert cosigner.add_checkpoint(request(0, tree(4))).status == 200
    fork = tree(4, b"x")  # the same size, another root: a split view
    assert cosigner.add_checkpoint(request(4, fork)).status == 422
    # A larger fork, with its own (valid for itself) proof from size 4.
    big_fork = tree(8, b"x")
    assert cosigner.add_checkpoint(request(4, big_fork)).status == 422
    assert cosigner.add_checkpoint(request(4, tree(8))).status == 200


def test_a_bad_proof_and_a_proof_from_zero_are_422(cosigner) -> None:
    assert cosigner.add_checkpoint(request(0, tree(4))).status == 200
    t = tree(6)
    proof = t.consistency_proof(4, 6)
    bad = AddCheckpoint(4, (proof[0][::-1], *proof[1:]), note_of(t)).encode()
    assert cosigner.add_checkpoint(bad).status == 422
    short = AddCheckpoint(4, tuple(proof[:-1]), note_of(t)).encode()
    assert cosigner.add_checkpoint(short).status == 422


def test_a_non_empty_proof_from_size_zero_is_422(cosigner) -> None:
    t = tree(6)
    body = AddCheckpoint(0, (b"\x00" * 32,), note_of(t)).encode()
    assert cosigner.add_checkpoint(body).status == 422


def test_an_unknown_log_is_404_and_a_bad_signature_403(cosigner) -> None:
    t = tree(3)
    assert cosigner.add_checkpoint(AddCheckpoint(0, (), note_of(t, OTHER)).encode()).status == 404
    # A line under the arbiter's key name and id that does not verify: 403.
    text = note_of(t).split(b"\n\n")[0].decode() + "\n"
    signer = arbiter_key(KEY.public_key())
    forged = Note(text, (NoteSignature(signer.name, signer.key_id, OTHER.sign(text.encode())),))
    assert cosigner.add_checkpoint(AddCheckpoint(0, (), forged.encode()).encode()).status == 403
    # Only a cosignature of another witness, no line of the log's key: 403.
    other_witness = Ed25519PrivateKey.from_private_bytes(bytes(range(3, 35)))
    note = Note(text, (cosign(text, "w2.example", other_witness, NOW),)).encode()
    assert cosigner.add_checkpoint(AddCheckpoint(0, (), note).encode()).status == 403


@pytest.mark.parametrize(
    "body",
    [
        b"",
        b"old 1\n",  # no empty line
        b"new 0\n\nx\n",
        b"old 01\n\n",
        b"old 0\nnot base64\n\n",
    ],
)
def test_malformed_bodies_are_400(cosigner, body) -> None:
    assert cosigner.add_checkpoint(body + note_of(tree(1))).status == 400


def test_an_old_size_above_the_checkpoint_is_400(cosigner) -> None:
    assert cosigner.add_checkpoint(AddCheckpoint(9, (), note_of(tree(3))).encode()).status == 400


def test_an_empty_tree_with_another_root_is_refused(cosigner) -> None:
    text = f"{arbiter_key(KEY.public_key()).name}\n0\n{'A' * 43}=\n"
    signer = arbiter_key(KEY.public_key())
    line = NoteSignature(signer.name, signer.key_id, KEY.sign(text.encode()))
    answer = cosigner.add_checkpoint(AddCheckpoint(0, (), Note(text, (line,)).encode()).encode())
    assert answer.status == 422


def test_the_state_advances_by_compare_and_swap(tmp_path) -> None:
    state = WitnessState(tmp_path / "s.db")
    start = state.get("o")
    a, b = LogState(3, b"a" * 32, b"n"), LogState(5, b"b" * 32, b"n")
    assert state.advance("o", start, a) is None
    # A second writer that read the old state loses, and learns the winner's size.
    lost = state.advance("o", start, b)
    assert lost is not None and lost.size == 3
    assert state.get("o").size == 3


def test_racing_requests_cannot_both_advance(tmp_path) -> None:
    """The C2SP rollback race: of requests from one old size, exactly one is cosigned."""
    logs = logs_by_origin([arbiter_key(KEY.public_key())])
    state = WitnessState(tmp_path / "r.db")
    witness = Cosigner("w1.example", WITNESS, logs, state, clock=lambda: NOW)
    bodies = [request(0, tree(n)) for n in (3, 4, 5, 6, 7, 8)]
    statuses: list[int] = []
    barrier = threading.Barrier(len(bodies))

    def send(body: bytes) -> None:
        barrier.wait()
        statuses.append(witness.add_checkpoint(body).status)

    threads = [threading.Thread(target=send, args=(b,)) for b in bodies]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(statuses).count(200) == 1
    assert set(statuses) <= {200, 409}


def test_a_log_key_must_not_be_a_cosignature_key() -> None:
    with pytest.raises(Exception, match="cosignature key"):
        logs_by_origin([VerifierKey.of("o", COSIGNATURE_V1, WITNESS.public_key())])
