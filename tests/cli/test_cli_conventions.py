"""The conventions every command shares (issue #24 item 4): -v/-q, environment variables,
examples in help that parse, shell completion, threads with a passive wait policy."""

from __future__ import annotations

import argparse
import builtins
import re
import shlex
import subprocess
import sys

import pytest

from twinaudit.cli import conventions
from twinaudit.cli.main import build_parser, main
from twinaudit.cli.threads import MAX_DEFAULT_THREADS, default_threads, passive_wait


def _commands():
    return list(conventions.commands(build_parser()))


def _options(parser: argparse.ArgumentParser) -> set[str]:
    return {o for action in parser._actions for o in action.option_strings}


def test_every_command_has_verbose_and_quiet():
    for words, parser in _commands():
        assert {"-v", "--verbose", "-q", "--quiet"} <= _options(parser), words


def test_every_command_has_an_example_that_parses(monkeypatch, capsys):
    """Each example parses; ``VAR=value`` words and ``export`` lines set the environment."""
    for words, parser in _commands():
        name = " ".join(words)
        assert conventions.EXAMPLES.get(name), f"twinaudit {name} has no example"
        assert "examples:" in parser.format_help(), name
        with monkeypatch.context() as patch:
            for variable in set(conventions.ENVIRONMENT.values()):
                patch.delenv(variable, raising=False)
            for example in conventions.EXAMPLES[name]:
                start = example.find("twinaudit ")
                prefix = example if start < 0 else example[:start]
                for variable, value in re.findall(r"([A-Z_]+)=(\S+)", prefix):
                    patch.setenv(variable, value)
                if start < 0:
                    continue
                command = re.split(r"[>|)]", example[start:])[0]  # shell syntax after it
                argv = shlex.split(command)
                assert argv[1 : len(words) + 1] == list(words), example
                try:
                    build_parser().parse_args(argv[1:])
                except SystemExit:  # pragma: no cover - the assertion says which
                    err = capsys.readouterr().err
                    raise AssertionError(f"{example!r} does not parse: {err}") from None
    assert set(conventions.EXAMPLES) == {" ".join(w) for w, _ in _commands()}


def test_every_command_states_its_exit_status():
    for words, parser in _commands():
        text = " ".join(parser.format_help().split())
        assert "exit status: 0 " in text, words
    # A command with a paragraph of its own keeps it; one without gets the shared one.
    by_name = {" ".join(w): p for w, p in _commands()}
    assert " ".join(conventions.EXIT_STATUS.split()) in " ".join(
        by_name["owner mark"].format_help().split()
    )
    assert conventions.EXIT_STATUS not in (by_name["verifier check"].epilog or "")


#: The longest help page, in lines at 100 columns (issue #44: 110-150 lines were too
#: long to read; details belong in the docs each page names).
MAX_HELP_LINES = 110


def test_every_help_page_fits_about_two_screens(monkeypatch):
    monkeypatch.setenv("COLUMNS", "100")
    lengths = {" ".join(w): len(p.format_help().splitlines()) for w, p in _commands()}
    assert max(lengths.values()) <= MAX_HELP_LINES, sorted(lengths.items(), key=lambda i: -i[1])[:3]


def test_examples_keep_their_lines_and_prose_is_wrapped():
    parser = dict((" ".join(w), p) for w, p in _commands())["owner claim"]
    text = parser.format_help()
    for example in conventions.EXAMPLES["owner claim"]:
        assert f"  {example}" in text
    assert max(len(line) for line in text.split("examples:")[0].splitlines()) <= 100


def test_the_arbiter_key_comes_from_the_environment_for_check_too(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("TWINAUDIT_ARBITER_KEY", raising=False)
    with pytest.raises(SystemExit):
        build_parser().parse_args(["verifier", "check", "verdict.json"])
    assert "--pubkey" in capsys.readouterr().err
    monkeypatch.setenv("TWINAUDIT_ARBITER_KEY", str(tmp_path / "arbiter.key.pub"))
    args = build_parser().parse_args(["verifier", "check", "verdict.json"])
    assert str(args.pubkey) == str(tmp_path / "arbiter.key.pub")
    monkeypatch.setenv("TWINAUDIT_THREADS", "3")
    args = build_parser().parse_args(["owner", "proxy", "in", "--out", "p.pt"])
    assert args.threads == 3


def test_quiet_drops_progress_and_verbose_adds_the_traceback(tmp_path, capsys):
    missing = str(tmp_path / "nothing")
    assert main(["owner", "publish", missing, "--out", str(tmp_path / "out")]) == 2
    plain = capsys.readouterr().err
    assert "Traceback" not in plain
    assert main(["owner", "publish", missing, "--out", str(tmp_path / "out"), "-v"]) == 2
    verbose = capsys.readouterr().err
    assert "Traceback" in verbose and verbose.strip().endswith(plain.strip())
    # Run quiet, then again with -v added as an internal error's message says: -v wins.
    assert main(["owner", "publish", missing, "--out", str(tmp_path / "out"), "-q", "-v"]) == 2
    assert "Traceback" in capsys.readouterr().err
    serve = ["verifier", "serve", "--listen", "h:1", "--db", "d", "--key", "k", "-q"]
    args = build_parser().parse_args(serve)
    conventions.verbosity(args)
    assert args.log_level == "warning"


def test_completion_prints_the_shell_code(capsys):
    assert main(["completion", "bash"]) == 0
    out = capsys.readouterr().out
    assert "twinaudit" in out and "complete" in out
    assert main(["completion", "zsh"]) == 0
    assert "#compdef twinaudit" in capsys.readouterr().out


def test_completion_without_argcomplete_names_the_install(monkeypatch, capsys):
    real_import = builtins.__import__

    def no_argcomplete(name, *args, **kwargs):
        if name.split(".")[0] == "argcomplete":
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_argcomplete)
    assert main(["completion", "bash"]) == 2
    err = capsys.readouterr().err
    assert "pip install 'twinaudit[completion]' -c constraints.txt" in err
    assert "Traceback" not in err


def test_completion_answers_a_request(tmp_path):
    """The shell asks twinaudit itself, with argcomplete's variables set."""
    line = "twinaudit verifier ch"
    answer = tmp_path / "answer"
    env = {
        "_ARGCOMPLETE": "1",
        "_ARGCOMPLETE_IFS": "\n",
        "_ARGCOMPLETE_STDOUT_FILENAME": str(answer),
        "COMP_LINE": line,
        "COMP_POINT": str(len(line)),
        "PATH": "/usr/bin:/bin",
    }
    result = subprocess.run(
        [sys.executable, "-m", "twinaudit"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert "check" in answer.read_text().split(), answer.read_text()


def test_threads_default_to_the_available_cpus_and_wait_passively(monkeypatch):
    assert 1 <= default_threads() <= MAX_DEFAULT_THREADS
    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    passive_wait()
    import os

    assert os.environ["OMP_WAIT_POLICY"] == "PASSIVE"
    monkeypatch.setenv("OMP_WAIT_POLICY", "ACTIVE")
    passive_wait()
    assert os.environ["OMP_WAIT_POLICY"] == "ACTIVE"  # an explicit setting wins
