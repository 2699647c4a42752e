"""``twinaudit witness keygen | vkey | serve``: keys, vkeys and refusals before serving."""

from __future__ import annotations

from tests.support.keys import KEY
from twinaudit.cli.main import main
from twinaudit.protocol.checkpoint_note import arbiter_key
from twinaudit.protocol.keys import load_private_key, public_key_pem
from twinaudit.protocol.note import COSIGNATURE_V1, VerifierKey, parse_vkey


def test_keygen_and_vkey(tmp_path, capsys) -> None:
    key = tmp_path / "w1.key"
    assert main(["witness", "keygen", "--key", str(key), "--name", "w1.example"]) == 0
    printed = parse_vkey(capsys.readouterr().out.strip())
    assert key.stat().st_mode & 0o077 == 0
    public = load_private_key(key).public_key()
    assert printed == VerifierKey.of("w1.example", COSIGNATURE_V1, public)
    assert main(["witness", "vkey", "--key", str(key), "--name", "w1.example"]) == 0
    assert parse_vkey(capsys.readouterr().out.strip()) == printed
    pub = tmp_path / "arbiter.key.pub"
    pub.write_bytes(public_key_pem(KEY.public_key()))
    assert main(["witness", "vkey", "--arbiter-pubkey", str(pub)]) == 0
    assert capsys.readouterr().out.strip() == arbiter_key(KEY.public_key()).vkey()
    # Refusals: a name with a space, a key written twice, --key without --name.
    assert main(["witness", "keygen", "--key", str(tmp_path / "x"), "--name", "a b"]) == 2
    assert main(["witness", "keygen", "--key", str(key), "--name", "w1.example"]) != 0
    assert main(["witness", "vkey", "--key", str(key)]) == 2


def test_serve_refuses_bad_options_before_listening(tmp_path, capsys) -> None:
    key = tmp_path / "w.key"
    assert main(["witness", "keygen", "--key", str(key), "--name", "w"]) == 0
    base = ["witness", "serve", "--listen", "127.0.0.1:0", "--key", str(key), "--name", "w"]
    base += ["--db", str(tmp_path / "w.db")]
    assert main(base) == 2  # no log to witness
    assert "--log VKEY or --arbiter-pubkey" in capsys.readouterr().err
    assert main([*base, "--log", "not-a-vkey"]) == 2
    vkey = arbiter_key(KEY.public_key()).vkey()
    assert main([*base, "--log", vkey, "--prefix", "witness"]) == 2
    assert not (tmp_path / "w.db").exists()  # nothing created for a refused start
