"""The smaller command-line defects of issue #44 (Build 6).

A bare ``--arbiter`` host is refused (gRPC dialled it on port 443), and an ``--oracle``
the arbiter could not dial before the vault is read; the one-letter
long options ``--p`` and ``--k`` have readable names, the old ones kept; usage lines
name the environment variables that stand for their options.
"""

from __future__ import annotations

import numpy as np
import pytest

from tests.support.keys import KEY
from twinaudit.cli import conventions
from twinaudit.cli.main import build_parser, main
from twinaudit.owner.vault import Vault, write_vault
from twinaudit.protocol.keys import public_key_pem


def _vault(tmp_path):
    """A small unescrowed image vault (two fixed versions per item)."""
    path = tmp_path / "vault"
    v0 = np.random.default_rng(4).integers(0, 256, (6, 4, 4, 1), dtype=np.uint8)
    write_vault(
        path, "image", v0, v0 ^ 0x08, list(range(6)), [f"i{n}" for n in range(6)],
        source={"s": 1}, config={"c": 1}, secret=bytes(32), batch_items=3,
    )  # fmt: skip
    (tmp_path / "arbiter.key.pub").write_bytes(public_key_pem(KEY.public_key()))
    return path


#: --arbiter values that are not HOST:PORT, each refused before anything is dialled.
BARE = ("localhost", "arbiter.example", "127.0.0.1", "[::1]", "localhost:", "localhost:https")


@pytest.mark.parametrize("address", BARE)
def test_a_bare_arbiter_host_is_refused(address, tmp_path, capsys):
    vault = _vault(tmp_path)
    key = str(tmp_path / "arbiter.key.pub")
    assert main(["owner", "escrow", str(vault), "--arbiter", address, "--arbiter-key", key]) == 2
    err = capsys.readouterr().err
    assert err.startswith("twinaudit: error: [invalid-input] --arbiter must be HOST:PORT, e.g. ")
    assert len(err.splitlines()) == 1
    assert Vault.open(vault).receipt is None


def test_a_bare_arbiter_host_from_the_environment_is_refused(tmp_path, monkeypatch, capsys):
    vault = _vault(tmp_path)
    monkeypatch.setenv("TWINAUDIT_ARBITER", "localhost")
    monkeypatch.setenv("TWINAUDIT_ARBITER_KEY", str(tmp_path / "arbiter.key.pub"))
    assert main(["owner", "escrow", str(vault)]) == 2
    assert "--arbiter must be HOST:PORT" in capsys.readouterr().err


#: --oracle values the arbiter could not dial, and what the refusal says.
BAD_ORACLES = (
    ("localhost", "--oracle must be HOST:PORT"),
    ("oracle.example", "--oracle must be HOST:PORT"),
    ("held:sha256:abc", "held:sha256:<64 lowercase hex digits>"),
    ("oip+ftp://host:1/m", "starts with one of oip+http://"),
)


@pytest.mark.parametrize(("address", "says"), BAD_ORACLES)
def test_an_oracle_the_arbiter_cannot_dial_is_refused_before_anything(
    address, says, tmp_path, capsys
):
    vault = _vault(tmp_path)
    args = ["owner", "claim", str(vault), "--oracle", address, "--out", str(tmp_path / "out")]
    args += ["--arbiter", "127.0.0.1:1", "--arbiter-key", str(tmp_path / "arbiter.key.pub")]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.startswith("twinaudit: error: [invalid-input] ") and says in err, err
    assert len(err.splitlines()) == 1
    assert not (tmp_path / "out").exists()


#: (command, readable option, one-letter option, value, the attribute both set).
NAMES = (
    (["plan", "--pairs", "100"], "--false-detection", "--p", "0.01", "fdr"),
    (["plan", "--pairs", "100"], "--false-detection", "--fdr", "0.01", "fdr"),
    (["owner", "estimate", "vault", "--public", "p"], "--false-detection", "--p", "0.01", "p"),
    (["owner", "estimate", "vault", "--public", "p"], "--copies", "--k", "4", "k"),
    (["owner", "claim", "vault", "--oracle", "h:1", "--out", "o"], "--copies", "--k", "4", "k"),
    (
        ["owner", "claim", "vault", "--oracle", "h:1", "--out", "o"],
        "--false-detection",
        "--p",
        "0.01",
        "p",
    ),
)


@pytest.mark.parametrize(("words", "readable", "short", "value", "dest"), NAMES)
def test_the_readable_and_the_old_option_names_set_the_same_value(
    words, readable, short, value, dest, monkeypatch
):
    monkeypatch.setenv("TWINAUDIT_ARBITER", "h:2")
    monkeypatch.setenv("TWINAUDIT_ARBITER_KEY", "arbiter.key.pub")
    parser = build_parser()
    one = getattr(parser.parse_args([*words, readable, value]), dest)
    other = getattr(parser.parse_args([*words, short, value]), dest)
    assert one == other == type(one)(value)
    help_text = " ".join(_help(words).split())
    assert f"{readable} " in help_text and f"{short} " in help_text


def _help(words: list[str]) -> str:
    for found, parser in conventions.commands(build_parser()):
        if list(found) == [w for w in words if not w.startswith("-")][: len(found)]:
            return parser.format_help()
    raise AssertionError(words)


def test_no_long_option_is_one_letter_alone():
    for words, parser in conventions.commands(build_parser()):
        for action in parser._actions:
            longs = [o for o in action.option_strings if o.startswith("--")]
            if longs and all(len(o) == 3 for o in longs):
                pytest.fail(f"twinaudit {' '.join(words)} {longs[0]} has no readable name")


def test_usage_lines_name_the_environment_variables(monkeypatch):
    for variable in set(conventions.ENVIRONMENT.values()):
        monkeypatch.delenv(variable, raising=False)
    seen = set()
    for words, parser in conventions.commands(build_parser()):
        usage = parser.format_usage()
        for action in parser._actions:
            for option in action.option_strings:
                if option in conventions.ENVIRONMENT:
                    variable = conventions.ENVIRONMENT[option]
                    assert f"${variable}" in usage, f"twinaudit {' '.join(words)}: {variable}"
                    seen.add(variable)
    assert seen == set(conventions.ENVIRONMENT.values())


def test_an_option_its_variable_supplies_is_not_marked_required(monkeypatch, capsys):
    monkeypatch.delenv("TWINAUDIT_ARBITER", raising=False)
    monkeypatch.delenv("TWINAUDIT_ARBITER_KEY", raising=False)
    with pytest.raises(SystemExit):
        main(["owner", "escrow", "vault"])
    err = capsys.readouterr().err
    assert " --arbiter HOST:PORT " in err and "or set $TWINAUDIT_ARBITER for --arbiter" in err
    monkeypatch.setenv("TWINAUDIT_ARBITER", "h:1")
    usage = " ".join(_help(["owner", "escrow"]).split())
    assert "[--arbiter HOST:PORT]" in usage and "--arbiter-key KEY" in usage
