"""``twinaudit verifier store-check``: the full check of an escrow log, from the CLI."""

from __future__ import annotations

import sqlite3

from twinaudit.cli.main import main
from twinaudit.protocol.escrow_messages import EscrowRequest
from twinaudit.protocol.keys import write_keypair
from twinaudit.verifier.escrow.sqlite_store import SqliteEscrowStore


def test_store_check_passes_a_sound_log_and_names_a_corrupt_one(tmp_path, capsys):
    key_path, db = tmp_path / "arbiter.key", tmp_path / "escrow.db"
    key = write_keypair(key_path)
    with SqliteEscrowStore(db, key) as store:
        for n in range(5):
            store.commit(EscrowRequest(n.to_bytes(32, "big"), 10, "image", owner=f"o{n}"))
        store.checkpoint()
    args = ["verifier", "store-check", "--db", str(db), "--key", str(key_path)]
    assert main(args) == 0
    assert "escrow log sound: 5 entries, 8 tree nodes and 1 checkpoints" in capsys.readouterr().out
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("UPDATE escrow_tree SET hash = ? WHERE height = 0 AND idx = 1", (bytes(32),))
    conn.close()
    assert main(args) == 1  # the store still opens: the node is not one an open reads
    err = capsys.readouterr().err
    assert "tree nodes of entries 0..4" in err and "corrupt" in err and "Traceback" not in err
