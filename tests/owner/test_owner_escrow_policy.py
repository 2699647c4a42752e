"""``owner escrow`` against a real arbiter: the key before the commit, one record per root.

Issue #22: with the wrong ``--arbiter-key`` the command was refused only after the
arbiter had committed, so the public log held a record the owner never kept; and
the same root could be escrowed again and again, each time with a new rho (D10).
Each refusal here is one line on stderr, exit 1, and the log is checked through
the arbiter's own signed checkpoint.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from tests.support.arbiter import sqlite_arbiter
from tests.support.keys import KEY, OTHER
from twinaudit.cli.main import main
from twinaudit.owner.escrow_client import fetch_checkpoint
from twinaudit.owner.vault import Vault, write_vault
from twinaudit.protocol.keys import key_id, public_key_pem
from twinaudit.wire.transport import make_channel


def _vault(path: Path) -> Path:
    """A small image vault (no marking needed: two fixed versions per item)."""
    v0 = np.random.default_rng(4).integers(0, 256, (6, 4, 4, 1), dtype=np.uint8)
    write_vault(
        path, "image", v0, v0 ^ 0x08, list(range(6)), [f"i{n}" for n in range(6)],
        source={"s": 1}, config={"c": 1}, secret=bytes(32), batch_items=3,
    )  # fmt: skip
    return path


def _log_size(address: str) -> int:
    with make_channel(address) as channel:
        return fetch_checkpoint(channel, arbiter_public_key=KEY.public_key())[0].size


def _escrow(vault: Path, address: str, key: Path, capsys: pytest.CaptureFixture[str]):
    code = main(["owner", "escrow", str(vault), "--arbiter", address, "--arbiter-key", str(key)])
    captured = capsys.readouterr()
    return code, [line for line in captured.err.splitlines() if line.strip()], captured.out


def test_the_key_is_checked_before_anything_is_committed(tmp_path, capsys):
    vault = _vault(tmp_path / "v")
    (tmp_path / "other.pub").write_bytes(public_key_pem(OTHER.public_key()))
    with sqlite_arbiter(tmp_path, KEY) as address:
        code, err, _ = _escrow(vault, address, tmp_path / "other.pub", capsys)
        assert code == 1 and len(err) == 1 and "invalid-signature" in err[0]
        # It says that another key signed the receipt, and names both key ids.
        signer, given = key_id(KEY.public_key()), key_id(OTHER.public_key())
        assert f"labelled with key id {signer}, the key given has key id {given}" in err[0]
        assert _log_size(address) == 0  # nothing public for a refused escrow
        assert Vault.open(vault).receipt is None
        code, _, out = _escrow(vault, address, tmp_path / "arbiter.key.pub", capsys)
        assert code == 0 and "as record 0" in out
        assert _log_size(address) == 1


def test_a_root_already_in_the_log_is_refused(tmp_path, capsys):
    """A vault copied before its escrow holds the same root: the arbiter refuses it."""
    vault = _vault(tmp_path / "v")
    shutil.copytree(vault, tmp_path / "copy")
    with sqlite_arbiter(tmp_path, KEY) as address:
        assert _escrow(vault, address, tmp_path / "arbiter.key.pub", capsys)[0] == 0
        code, err, _ = _escrow(tmp_path / "copy", address, tmp_path / "arbiter.key.pub", capsys)
        assert code == 1 and len(err) == 1
        # The arbiter's typed error: its code, its words, and the next step it states.
        assert err[0].startswith("twinaudit: error: [invalid-state] root ")
        assert "already escrowed as record 0; a root is escrowed once" in err[0]
        assert _log_size(address) == 1
        assert Vault.open(tmp_path / "copy").receipt is None
