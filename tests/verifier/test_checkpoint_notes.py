"""The arbiter serves each checkpoint as a signed note too (spec §9.5.4), and the owner checks it.

Over real sockets on 127.0.0.1: ``GetCheckpoint`` answers the envelope of §9.4 and the
same checkpoint as a C2SP ``tlog-checkpoint`` note signed by the arbiter's key, in
process or by its signer process, which signs no other note text. The owner's
``fetch_checkpoint`` refuses a note of another tree or another key, and accepts an
answer without a note, as an arbiter before §9.5 gives.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from tests.support.keys import KEY, OTHER
from twinaudit.owner.escrow_client import escrow_root, fetch_checkpoint
from twinaudit.protocol.checkpoint_note import (
    CheckpointText,
    arbiter_origin,
    arbiter_text,
    checkpoint_note_from_signature,
    sign_checkpoint_note,
    verify_checkpoint_note,
)
from twinaudit.protocol.errors import InputError, SignatureError, VerificationError
from twinaudit.protocol.escrow_messages import CHECKPOINT_KIND, Checkpoint, verify_checkpoint
from twinaudit.protocol.keys import key_id, load_public_key, raw_public_key, write_keypair
from twinaudit.protocol.merkle import EMPTY_ROOT
from twinaudit.protocol.signer import KeySigner, NoteSigner
from twinaudit.verifier.escrow.service import serve_escrow
from twinaudit.verifier.escrow.sqlite_store import SqliteEscrowStore
from twinaudit.verifier.escrow.store import SignedCheckpoint
from twinaudit.verifier.signer_process import ProcessSigner
from twinaudit.verifier.signing import SIGNED_KINDS, check_signable
from twinaudit.wire.escrow.v1 import escrow_pb2, escrow_pb2_grpc
from twinaudit.wire.transport import make_channel

TIMEOUT_S = 10.0
CLAIM_KEY = raw_public_key(OTHER.public_key())


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SqliteEscrowStore]:
    with SqliteEscrowStore(tmp_path / "escrow.db", KEY) as opened:
        yield opened


@pytest.fixture
def channel(store: SqliteEscrowStore) -> Iterator[grpc.Channel]:
    server, port = serve_escrow(store, "127.0.0.1:0", max_workers=2, rate_limit=None)
    opened = make_channel(f"127.0.0.1:{port}")
    try:
        yield opened
    finally:
        opened.close()
        server.stop(None)


def _answer(channel: grpc.Channel) -> escrow_pb2.GetCheckpointResponse:
    stub = escrow_pb2_grpc.EscrowStub(channel)  # type: ignore[no-untyped-call]
    return stub.GetCheckpoint(escrow_pb2.GetCheckpointRequest(), timeout=TIMEOUT_S)


def _escrow(channel: grpc.Channel, first: int) -> None:
    escrow_root(
        channel,
        arbiter_public_key=KEY.public_key(),
        root=bytes(range(first, first + 32)),
        n_pairs=4,
        item_kind="image",
        owner="alice",
        claim_key=CLAIM_KEY,
    )


def test_get_checkpoint_answers_the_note_of_the_same_tree(channel, store):
    for size in (0, 1, 2):
        if size:
            _escrow(channel, size)
        answer = _answer(channel)
        envelope = verify_checkpoint(answer.checkpoint, KEY.public_key())
        note = verify_checkpoint_note(answer.checkpoint_note, KEY.public_key())
        assert (note.origin, note.size, note.root) == (
            arbiter_origin(KEY.public_key()),
            size,
            envelope.root,
        )
        note.require_same_tree(envelope)
        # Signed once per size: the same bytes again, and those of an in-process signature.
        assert _answer(channel).checkpoint_note == answer.checkpoint_note
        assert answer.checkpoint_note == sign_checkpoint_note(size, envelope.root, KEY)
    assert fetch_checkpoint(channel, arbiter_public_key=KEY.public_key())[0].size == 2


def _serve_note(store: SqliteEscrowStore, note: bytes | None) -> None:
    """Make ``store`` answer ``note`` as the checkpoint note of any checkpoint."""

    def fixed(checkpoint: SignedCheckpoint) -> bytes | None:
        del checkpoint
        return note

    store.checkpoint_note = fixed  # type: ignore[method-assign]


def test_the_owner_refuses_a_note_of_another_tree_or_key(channel, store):
    _escrow(channel, 1)
    size, root = (
        store.latest_checkpoint().checkpoint.size,
        store.latest_checkpoint().checkpoint.root,
    )
    _serve_note(store, sign_checkpoint_note(size + 1, root, KEY))
    with pytest.raises(VerificationError, match="different trees"):
        fetch_checkpoint(channel, arbiter_public_key=KEY.public_key())
    _serve_note(store, sign_checkpoint_note(size, root, OTHER))
    with pytest.raises(SignatureError):
        fetch_checkpoint(channel, arbiter_public_key=KEY.public_key())
    _serve_note(store, b"not a note")
    with pytest.raises(InputError):
        fetch_checkpoint(channel, arbiter_public_key=KEY.public_key())
    # An arbiter from before §9.5 sends no note; the envelope is checked as before.
    _serve_note(store, None)
    assert _answer(channel).checkpoint_note == b""
    assert fetch_checkpoint(channel, arbiter_public_key=KEY.public_key())[0].size == size


def test_a_signer_that_signs_no_notes_serves_the_envelope_alone(tmp_path):
    class EnvelopesOnly:
        """A Signer without ``sign_note``, such as one written before §9.5."""

        def __init__(self) -> None:
            self._inner = KeySigner(KEY, kinds=SIGNED_KINDS, check=check_signable)
            self.public_key = self._inner.public_key
            self.key_id = self._inner.key_id
            self.sign = self._inner.sign

    signer = EnvelopesOnly()
    assert not isinstance(signer, NoteSigner)
    store = SqliteEscrowStore(tmp_path / "escrow.db", signer)  # type: ignore[arg-type]
    try:
        assert store.checkpoint_note(store.latest_checkpoint()) is None
    finally:
        store.close()


def test_the_signer_process_signs_only_the_arbiters_checkpoint_texts(tmp_path):
    key_path = tmp_path / "arbiter.key"
    write_keypair(key_path)
    public = load_public_key(tmp_path / "arbiter.key.pub")
    signer = ProcessSigner.start(key_path)
    try:
        assert isinstance(signer, NoteSigner)
        text = arbiter_text(3, bytes(32), public).encode()
        note = checkpoint_note_from_signature(3, bytes(32), public, signer.sign_note(text))
        assert verify_checkpoint_note(note, public).size == 3
        origin = arbiter_origin(public)
        refused = [
            CheckpointText("example.com/log", 3, bytes(32)).text().encode(),  # another origin
            CheckpointText(origin, 3, bytes(32), ("extension",)).text().encode(),
            CheckpointText(origin, 0, bytes(32)).text().encode(),  # the empty log, not H()
            text.replace(b"\n3\n", b"\n03\n"),
            b"DSSEv1 22 application/vnd.twinaudit.x 1 x",
            b"cosignature/v1\ntime 1\n" + text,
            text + b"\n",
            b"\xff",
        ]
        for bad in refused:
            with pytest.raises(InputError):
                signer.sign_note(bad)
        # Still signing envelopes, and notes, after the refusals.
        checkpoint = Checkpoint(key_id(public), 0, EMPTY_ROOT, "2026-01-02T03:04:05Z")
        envelope = signer.sign(checkpoint.encode(), CHECKPOINT_KIND).to_json()
        assert verify_checkpoint(envelope, public) == checkpoint
        assert signer.sign_note(text) == signer.sign_note(text)
    finally:
        signer.close()


def test_an_in_process_signer_refuses_other_note_texts():
    signer = KeySigner(KEY)
    text = arbiter_text(1, bytes(32), KEY.public_key()).encode()
    KEY.public_key().verify(signer.sign_note(text), text)
    with pytest.raises(InputError):
        signer.sign_note(arbiter_text(1, bytes(32), OTHER.public_key()).encode())
