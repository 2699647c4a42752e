"""The console script: plan, keygen, verdict check and replay, with their exit codes."""

import json
import subprocess
import sys

import pytest

from tests.support.claims import make_pairset, run_session, signed_verdict
from twinaudit.cli.main import main
from twinaudit.protocol.keys import load_private_key, write_keypair


def test_plan_reports_both_tests(capsys):
    assert main(["plan", "--pairs", "1000", "--fdr", "0.05"]) == 0
    out = capsys.readouterr().out
    assert "threshold T = 562" in out
    assert "pprm-chernoff" in out and "mixture-e" in out
    assert "exact" in out and "0.99" in out


def test_plan_names_the_claims_default_test(capsys):
    """Issue #44: plan showed pprm-chernoff and mixture-e, not owner claim's default."""
    assert main(["plan", "--pairs", "200", "--rates", "0.8"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "owner claim's default test, mixture-graded," in out
    assert "without a tie margin its figures are the mixture-e columns'" in out
    assert main(["plan", "--pairs", "200", "--rates", "0.8", "--json"]) == 0
    figures = json.loads(capsys.readouterr().out)
    assert (figures["default_test"], figures["default_test_as"]) == ("mixture-graded", "mixture-e")
    coin = ["plan", "--pairs", "200", "--ties", "0.5", "--tie-rule", "coin", "--json"]
    assert main(coin) == 0
    assert json.loads(capsys.readouterr().out)["default_test_as"] is None
    assert main(coin[:-1]) == 0
    assert "coin-decided ties (half bets)" in " ".join(capsys.readouterr().out.split())


def test_plan_rejects_bad_parameters(capsys):
    assert main(["plan", "--pairs", "10", "--fdr", "0.05"]) == 2  # too few pairs for the paper's T
    assert "pairs" in capsys.readouterr().err
    assert main(["plan", "--pairs", "100", "--fdr", "1.5"]) == 2


@pytest.fixture(scope="module")
def verdict_files(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("cli")
    write_keypair(tmp / "arbiter.key")
    key = load_private_key(tmp / "arbiter.key")
    session = run_session(make_pairset())
    (tmp / "verdict.json").write_bytes(signed_verdict(session, key))
    (tmp / "transcript.bin").write_bytes(session.transcript.to_bytes())
    return tmp


def test_check_valid_and_invalid(verdict_files, capsys):
    pub = str(verdict_files / "arbiter.key.pub")
    verdict = verdict_files / "verdict.json"
    assert main(["verifier", "check", str(verdict), "--pubkey", pub]) == 0
    assert "VALID verdict" in capsys.readouterr().out
    tampered = verdict_files / "tampered.json"
    data = bytearray(verdict.read_bytes())
    data[len(data) // 2] ^= 0x02
    tampered.write_bytes(bytes(data))
    assert main(["verifier", "check", str(tampered), "--pubkey", pub]) == 1
    assert "INVALID" in capsys.readouterr().err
    other = verdict_files / "other.key"
    write_keypair(other)
    assert main(["verifier", "check", str(verdict), "--pubkey", str(other) + ".pub"]) == 1
    assert main(["verifier", "check", str(verdict_files / "missing.json"), "--pubkey", pub]) == 2


def test_replay_reproduces_and_rejects(verdict_files, capsys):
    args = ["verifier", "replay", str(verdict_files / "verdict.json"), "--transcript"]
    assert (
        main(
            [
                *args,
                str(verdict_files / "transcript.bin"),
                "--pubkey",
                str(verdict_files / "arbiter.key.pub"),
            ]
        )
        == 0
    )
    assert "identical to the verdict" in capsys.readouterr().out
    broken = verdict_files / "broken.bin"
    data = bytearray((verdict_files / "transcript.bin").read_bytes())
    data[-2] ^= 0x10
    broken.write_bytes(bytes(data))
    assert main([*args, str(broken)]) == 1


def test_usage_errors_exit_2():
    result = subprocess.run(
        [sys.executable, "-m", "twinaudit", "verifier", "check"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 2


def test_keygen_never_overwrites(tmp_path):
    assert main(["verifier", "keygen", "--key", str(tmp_path / "k")]) == 0
    assert main(["verifier", "keygen", "--key", str(tmp_path / "k")]) == 2


@pytest.mark.parametrize("flag", ["--version", "-V"])
def test_version_names_the_package_and_the_spec(flag, capsys):
    from importlib import metadata

    from twinaudit.protocol import SPEC_VERSION

    with pytest.raises(SystemExit) as exit_info:
        main([flag])
    assert exit_info.value.code == 0
    printed = capsys.readouterr().out.strip()
    assert printed == f"twinaudit {metadata.version('twinaudit')} (spec {SPEC_VERSION})"


def test_keygen_into_a_missing_folder_names_the_folder(tmp_path, capsys):
    key = tmp_path / "missing" / "arbiter.key"
    assert main(["verifier", "keygen", "--key", str(key)]) == 2
    err = capsys.readouterr().err
    assert f"{key.parent} is not a folder" in err and ".tmp" not in err
    assert not key.parent.exists()


def test_plan_takes_the_bound_as_p_like_claim_and_as_fdr(capsys):
    assert main(["plan", "--pairs", "200", "--p", "0.01", "--rates", "0.9"]) == 0
    assert "false-detection bound p = 0.01" in capsys.readouterr().out
    assert main(["plan", "--pairs", "200", "--fdr", "0.02", "--rates", "0.9"]) == 0
    assert "false-detection bound p = 0.02" in capsys.readouterr().out


def test_help_states_the_exit_codes(capsys):
    with pytest.raises(SystemExit):
        main(["--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "Exit status, every command: 0 success; 1 a check that ran and failed" in out
    assert "2 bad usage or unusable input" in out


def test_a_missing_optional_extra_names_the_install_not_a_traceback(monkeypatch, capsys):
    import twinaudit.cli.cmd_plan as cmd_plan

    def needs_torch(args):
        raise ModuleNotFoundError("No module named 'torch'", name="torch")

    monkeypatch.setattr(cmd_plan, "_plan", needs_torch)
    assert main(["plan", "--pairs", "100"]) == 2
    err = capsys.readouterr().err
    assert "pip install 'twinaudit[ml]' -c constraints.txt" in err and "Traceback" not in err


def test_every_option_of_every_command_has_help():
    import argparse

    from twinaudit.cli.main import build_parser

    lacking = []

    def walk(parser, path):
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    walk(sub, [*path, name])
            elif action.help is None:
                lacking.append(" ".join([*path, *action.option_strings, action.dest]))

    walk(build_parser(), ["twinaudit"])
    assert lacking == []


def test_every_option_with_a_default_states_it(monkeypatch):
    """Help on every option that has a default says what it is (issue #24 item 4).

    A default that means "not given" is exempt: None, False, an empty string or list,
    and the 0 of a counter such as -v. Defaults from the environment are left unset.
    """
    import argparse

    from twinaudit.cli import conventions
    from twinaudit.cli.main import build_parser

    for variable in set(conventions.ENVIRONMENT.values()):
        monkeypatch.delenv(variable, raising=False)
    silent = []

    def walk(parser, path):
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    walk(sub, [*path, name])
                continue
            if isinstance(action, (argparse._HelpAction, argparse._VersionAction)):
                continue
            default = action.default
            if default is None or default is False or default is argparse.SUPPRESS:
                continue
            if default in ("", []) or isinstance(action, argparse._CountAction):
                continue
            text = parser._get_formatter()._expand_help(action)  # %(default)s filled in
            if "default" not in text.lower():
                silent.append(f"{' '.join(path)} {'/'.join(action.option_strings)}")

    walk(build_parser(), ["twinaudit"])
    assert silent == [], f"options whose help does not state their default: {silent}"


def test_plan_help_is_plain_text_with_an_example(capsys):
    with pytest.raises(SystemExit):
        main(["plan", "--help"])
    out = capsys.readouterr().out
    assert "``" not in out and "example: twinaudit plan --pairs 1000" in out


def test_the_arbiter_address_and_key_come_from_the_environment(monkeypatch, tmp_path, capsys):
    from twinaudit.cli.main import build_parser

    vault = str(tmp_path / "vault")
    with pytest.raises(SystemExit):
        build_parser().parse_args(["owner", "escrow", vault])
    assert "--arbiter" in capsys.readouterr().err
    monkeypatch.setenv("TWINAUDIT_ARBITER", "arbiter.example:7000")
    monkeypatch.setenv("TWINAUDIT_ARBITER_KEY", str(tmp_path / "arbiter.key.pub"))
    args = build_parser().parse_args(["owner", "escrow", vault])
    assert args.arbiter == "arbiter.example:7000"
    assert args.arbiter_key == tmp_path / "arbiter.key.pub"
    given = build_parser().parse_args(["owner", "escrow", vault, "--arbiter", "other:1"])
    assert given.arbiter == "other:1"  # an option given wins


def test_threads_holds_torch_to_the_count_and_refuses_zero(tmp_path, capsys):
    import torch

    from twinaudit.cli.threads import use_threads

    before = torch.get_num_threads()
    try:
        use_threads(1)
        assert torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(before)
    out = str(tmp_path / "p.pt")
    assert main(["owner", "proxy", str(tmp_path), "--out", out, "--threads", "0"]) == 2
    assert "--threads must be at least 1" in capsys.readouterr().err
