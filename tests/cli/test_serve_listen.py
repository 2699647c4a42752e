"""``verifier serve`` and ``oracle serve`` refuse plaintext beyond loopback and open TLS keys.

Issue #40 N10: on main a non-loopback ``--listen`` served plaintext gRPC with no warning,
and a TLS key at mode 0644 was accepted while the signing key at 0644 was refused. Now
such a listen needs TLS or ``--insecure-plaintext``, and the TLS key is checked as the
signing key is (one function, ``twinaudit.protocol.keys.require_owner_only``). Each refusal is one
line, exit 2, before the store is opened or the model loaded.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric import ec

from tests.support import pki
from twinaudit.cli.main import main as cli_main
from twinaudit.cli.serve_options import check_listen, is_loopback
from twinaudit.protocol.errors import InputError
from twinaudit.protocol.keys import write_keypair
from twinaudit.wire.transport import TlsFiles, make_server


def _tls_files(folder: Path, key_mode: int) -> list[str]:
    """A certificate and key for the servers' TLS options, the key at ``key_mode``."""
    key = ec.generate_private_key(ec.SECP256R1())
    cert = pki.certificate("twinaudit test server", key, None, server=True)
    (folder / "server.pem").write_bytes(pki.certificate_pem(cert))
    (folder / "server.key").write_bytes(pki.key_pem(key))
    (folder / "server.key").chmod(key_mode)
    return ["--tls-cert", str(folder / "server.pem"), "--tls-key", str(folder / "server.key")]


def _verifier(tmp_path: Path, listen: str, *extra: str) -> list[str]:
    return ["verifier", "serve", "--listen", listen, "--db", str(tmp_path / "escrow.db"),
            "--key", str(tmp_path / "arbiter.key"), *extra]  # fmt: skip


def _oracle(tmp_path: Path, listen: str, *extra: str) -> list[str]:
    return ["oracle", "serve", "--model", str(tmp_path / "absent.pt"), "--listen", listen,
            "--n-classes", "10", *extra]  # fmt: skip


def _error(capfd: pytest.CaptureFixture[str]) -> str:
    lines = [line for line in capfd.readouterr().err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("twinaudit: error: [invalid-input]"), lines
    return lines[0]


@pytest.mark.parametrize("command", [_verifier, _oracle], ids=["verifier", "oracle"])
@pytest.mark.parametrize("listen", ["0.0.0.0:0", "[::]:0", "10.0.0.5:7443", "arbiter.example:1"])
def test_issue_40_n10_plaintext_beyond_loopback_is_refused(tmp_path, capfd, command, listen):
    write_keypair(tmp_path / "arbiter.key")
    assert cli_main(command(tmp_path, listen)) == 2
    assert "is not a loopback address" in _error(capfd)
    assert not (tmp_path / "escrow.db").exists()
    # --insecure-plaintext lets it past the check: it fails later, on the model file.
    if command is _oracle:
        assert cli_main(command(tmp_path, listen, "--insecure-plaintext")) == 2
        assert "loopback" not in _error(capfd)


@pytest.mark.parametrize("command", [_verifier, _oracle], ids=["verifier", "oracle"])
def test_issue_40_n10_a_tls_key_readable_by_others_is_refused(tmp_path, capfd, command):
    write_keypair(tmp_path / "arbiter.key")
    tls = _tls_files(tmp_path, 0o644)
    assert cli_main(command(tmp_path, "0.0.0.0:0", *tls)) == 2
    error = _error(capfd)
    assert "TLS key" in error and "accessible by other users (mode 644)" in error
    assert not (tmp_path / "escrow.db").exists()
    # The signing key at 0644 gives the same refusal, from the same function.
    (tmp_path / "arbiter.key").chmod(0o644)
    (tmp_path / "server.key").chmod(0o600)
    assert cli_main(_verifier(tmp_path, "127.0.0.1:0", *tls)) == 2
    assert "accessible by other users (mode 644)" in _error(capfd)


def test_a_server_built_in_process_refuses_an_open_tls_key(tmp_path):
    _tls_files(tmp_path, 0o640)
    tls = TlsFiles(cert=tmp_path / "server.pem", key=tmp_path / "server.key")
    with pytest.raises(InputError, match="accessible by other users"):
        make_server("127.0.0.1:0", lambda server: None, tls=tls)


@pytest.mark.parametrize(
    ("host", "loopback"),
    [("localhost", True), ("LOCALHOST", True), ("127.0.0.1", True), ("127.8.9.10", True),
     ("[::1]", True), ("0.0.0.0", False), ("[::]", False), ("10.0.0.5", False),
     ("[::ffff:127.0.0.1]", False), ("localhost.example", False), ("arbiter", False)],
)  # fmt: skip
def test_loopback_hosts(host, loopback):
    assert is_loopback(host) is loopback


def test_check_listen_rules(tmp_path):
    tls = _tls_files(tmp_path, 0o600)
    cert, key = Path(tls[1]), Path(tls[3])

    def args(**given: object) -> argparse.Namespace:
        return argparse.Namespace(
            **({"tls_cert": None, "tls_key": None, "insecure_plaintext": False} | given)
        )

    check_listen(args(), "127.0.0.1")
    check_listen(args(insecure_plaintext=True), "0.0.0.0")
    check_listen(args(tls_cert=cert, tls_key=key), "0.0.0.0")
    with pytest.raises(InputError, match="go together"):
        check_listen(args(tls_key=key), "0.0.0.0")
    with pytest.raises(InputError, match="not a loopback address"):
        check_listen(args(), "0.0.0.0")
