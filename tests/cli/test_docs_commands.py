"""The commands of README.md and docs/*.md: every one parses, the cheap ones run.

**Parsed.** Every fenced ``sh``/``bash`` block of the README and of ``docs/*.md`` is
read as a script: each command line (``\\``-continued lines joined, ``#`` comments
dropped) is checked without running it, and so is every ``twinaudit`` command quoted in
a table. A ``twinaudit`` command must parse with the console script's own parser
(:func:`twinaudit.cli.build_parser`, environment variables set by the block's
``export`` lines included); ``python -m demo``, ``demo.practitioner``,
``evaluation`` and ``bench`` and the scripts under ``docs/examples/`` must parse with
theirs (their ``parse_args`` is stopped before the command would run; ``--help`` is
all it does); ``make`` targets must exist in the Makefile. A command of any other kind
fails the test, so a new kind of command in the docs needs a check here. Every
relative link and every repository path quoted in code must exist.

**Run.** These commands are also executed, in-process through
:func:`twinaudit.cli.main`, each in its own ``tmp_path`` (its working directory), with
only the ``TWINAUDIT_`` variables its document exported above it (a document's blocks
are one shell session), and must exit 0, or with the status a ``# exit N`` comment
states:

- every ``twinaudit plan`` command (pure computation; it must print its figures);
- every ``twinaudit verifier check`` and ``verifier replay`` command (README, verdicts,
  unlearning, demo, walkthrough), against a real signed verdict: the spec vectors'
  first valid whole claim (spec/vectors/verdicts.json, signed with the test key of
  appendix B) and its transcript. A name ending ``verdict.json``, ``transcript.bin`` or
  ``.pub`` is that verdict's file, wherever the document put it; ``check`` must print
  VALID, ``replay`` identical, ``--json`` JSON saying so, ``--html`` must write a page;
- every ``twinaudit verifier keygen --key …`` (the key 0600, the ``.pub`` a PEM key)
  and ``verifier model list --models …`` (on an empty folder), the path moved into
  ``tmp_path``;
- ``twinaudit --version``, ``-V`` and ``--help``, and the ``twinaudit completion
  bash|zsh`` quoted in owner.md's prose.

The README's quick start is then run end to end, in its own order, on 12 random 8×8
labelled images, with the proxy trained for 24 steps instead of thousands (slow).

Everything else, outside the quick start, is only parsed, because running it needs
what a test cannot afford or does not have: a server that runs until stopped
(``verifier serve``, ``oracle serve``), an arbiter and an oracle to talk to (``owner
escrow``, ``claim``, ``openings``), the owner's photos and a marking or training run
(``owner mark``, ``proxy``, ``estimate``, ``inspect``, ``publish``, ``python -m
demo.practitioner``, ``make demo``, ``python -m evaluation``, ``make bench``), a model
file or an external model (``verifier model add``, ``reexecute``, ``--hf``,
``--openai-url``, ``oip+`` addresses), PostgreSQL, TLS certificates, or the whole
tool chain (``make test``, ``lint``, ``fuzz``…).
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import importlib
import importlib.util
import json
import os
import re
import runpy
import shlex
import socket
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

import owner.marking.proxy as proxy_module
from tests.support.cli_processes import ROOT, serve, stop
from tests.support.threads import one_thread  # noqa: F401 - the fixture
from twinaudit.cli import build_parser
from twinaudit.cli import main as cli_main

#: The documents whose commands and links are checked.
DOCUMENTS = (ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")))
#: Python modules whose command lines the docs may show (each parses with argparse).
PYTHON_MODULES = ("demo", "demo.practitioner", "evaluation", "bench")
#: Scripts the docs may run with ``python PATH``.
PYTHON_SCRIPTS = ("docs/examples/stand_in_model.py",)
#: Shell built-ins and helpers a block may use around the commands.
SHELL_WORDS = (".", "source", "mkdir", "export", "kill", "cd")
#: Top-level folders a path quoted in code (``like/this``) must exist under.
TRACKED_TOPS = (
    ".ci",
    "bench",
    "demo",
    "docs",
    "evaluation",
    "owner",
    "proto",
    "protocol",
    "scripts",
    "spec",
    "tests",
    "twinaudit",
    "verifier",
    "wire",
)
#: The environment variables a block's ``export`` lines may set for later commands.
ENV_PREFIX = "TWINAUDIT_"


@dataclass(frozen=True)
class Command:
    """One command line of a fenced block: where it is and its words."""

    path: Path
    line: int
    text: str
    words: tuple[str, ...]

    @property
    def where(self) -> str:
        """Return ``file:line`` for messages."""
        return f"{self.path.relative_to(ROOT)}:{self.line}"


def blocks(path: Path) -> list[list[Command]]:
    """Return the commands of each ``sh``/``bash`` fenced block of ``path``, block by block."""
    found: list[list[Command]] = []
    inside = False  # within a fenced block of any language
    pending: list[str] = []
    start = 0
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        fence = re.match(r"^\s*```(\w*)\s*$", line)
        if fence:
            inside = not inside
            if inside and fence.group(1) in ("sh", "bash"):
                found.append([])
            elif inside:
                found.append(_OTHER)
            continue
        if not inside or found[-1] is _OTHER:
            continue
        stripped = line.strip()
        if not pending and (not stripped or stripped.startswith("#")):
            continue
        if not pending:
            start = number
        pending.append(stripped.removesuffix("\\").strip())
        if not stripped.endswith("\\"):
            text = " ".join(pending)
            found[-1].append(Command(path, start, text, tuple(shlex.split(text, comments=True))))
            pending = []
    return [block for block in found if block is not _OTHER]


#: Stands for a fenced block in another language (or none): its lines are not commands.
_OTHER: list[Command] = []


def table_commands(path: Path) -> list[Command]:
    """Return the ``twinaudit`` commands quoted in the cells of ``path``'s tables.

    A table row is a line starting with ``|`` outside fenced blocks; each inline code
    span of it that starts with ``twinaudit `` and gives an option (``--…``) is a command
    (one without, such as ``twinaudit oracle serve``, names a command in prose).
    """
    found: list[Command] = []
    inside = False
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if line.lstrip().startswith("```"):
            inside = not inside
        elif not inside and line.lstrip().startswith("|"):
            for text in re.findall(r"`(twinaudit [^`]*)`", line):
                words = tuple(shlex.split(text))
                if any(word.startswith("--") for word in words):
                    found.append(Command(path, number, text, words))
    return found


def test_the_documents_have_commands_to_check():
    readme = [c for block in blocks(ROOT / "README.md") for c in block]
    assert any(c.words[:3] == ("twinaudit", "owner", "mark") for c in readme)
    assert sum(len(block) for path in DOCUMENTS for block in blocks(path)) > 50


def test_the_readme_stays_an_entry_point():
    """At most 150 lines (issue #24): what does not fit goes to docs/."""
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 150, f"README.md has {len(lines)} lines; move some to docs/"


class _ParsedError(Exception):
    """Raised by the stopped ``parse_args``: the arguments parsed, nothing ran."""


@contextlib.contextmanager
def _parse_only(monkeypatch: pytest.MonkeyPatch, argv: list[str]):
    """Let a module's ``main`` parse ``argv`` and stop it there (raising :class:`_ParsedError`)."""
    original = argparse.ArgumentParser.parse_args

    def parse(self, args=None, namespace=None):
        original(self, args, namespace)
        raise _ParsedError

    with monkeypatch.context() as patch:
        patch.setattr(argparse.ArgumentParser, "parse_args", parse)
        patch.setattr(sys, "argv", argv)
        yield


def _run_parse_only(monkeypatch, command: Command, argv: list[str], run) -> None:
    with _parse_only(monkeypatch, argv):
        try:
            run()
        except _ParsedError:
            return
        except SystemExit as exc:
            code = exc.code
        else:
            pytest.fail(f"{command.where}: {command.text!r} ran without parsing its arguments")
    assert code in (0, None), f"{command.where}: {command.text!r} does not parse"


def _check_twinaudit(command: Command, args: list[str], env: dict[str, str], monkeypatch) -> None:
    with monkeypatch.context() as patch:
        for name in [n for n in os.environ if n.startswith(ENV_PREFIX)]:
            patch.delenv(name)
        for name, value in env.items():
            patch.setenv(name, value)
        parser = build_parser()  # reads the environment (defaults of --arbiter, …)
        code: object = 0
        try:
            parser.parse_args(args)
        except SystemExit as exc:  # --help exits 0; a usage error exits 2
            code = exc.code
        assert code == 0, f"{command.where}: {command.text!r} does not parse"


def _check_python(command: Command, words: list[str], env, monkeypatch) -> None:
    if words[:2] == ["-m", "twinaudit"]:
        _check_twinaudit(command, words[2:], env, monkeypatch)
    elif words[0] == "-m":
        module = words[1]
        assert module in PYTHON_MODULES, f"{command.where}: no check for python -m {module}"
        _run_parse_only(monkeypatch, command, [module, *words[2:]], _main_of(module, words[2:]))
    else:
        script = words[0]
        assert script in PYTHON_SCRIPTS, f"{command.where}: no check for python {script}"
        _run_parse_only(
            monkeypatch,
            command,
            [script, *words[1:]],
            lambda: runpy.run_path(str(ROOT / script), run_name="__main__"),
        )


def _main_of(module: str, argv: list[str]):
    """Return a call of ``module``'s ``main`` (its ``__main__``'s for a package) on ``argv``."""
    spec = importlib.util.find_spec(module)
    assert spec is not None, f"no module {module}"
    entry = importlib.import_module(
        f"{module}.__main__" if spec.submodule_search_locations else module
    )
    return lambda: entry.main(argv)


def _make_targets() -> set[str]:
    text = (ROOT / "Makefile").read_text(encoding="utf-8")
    return set(re.findall(r"^([A-Za-z][\w-]*):", text, flags=re.MULTILINE))


def _check_make(command: Command, words: list[str], monkeypatch) -> None:
    targets = [w for w in words if "=" not in w]
    assert targets, f"{command.where}: make without a target"
    for target in targets:
        assert target in _make_targets(), f"{command.where}: no make target {target!r}"
    for word in words:
        name, _, value = word.partition("=")
        if name == "DEMO_ARGS":
            argv = shlex.split(value)
            _run_parse_only(monkeypatch, command, ["demo", *argv], _main_of("demo", argv))


#: Shell redirections of a stream to a file (``2> FILE``, ``> FILE``), and of one stream
#: to another (``2>&1``): not arguments of the command.
_TO_FILE = (">", "2>", ">>", "2>>")


def command_words(words: tuple[str, ...] | list[str]) -> list[str]:
    """Return ``words`` without ``&`` and without redirections (a redirection's file too)."""
    kept: list[str] = []
    skip = False
    for word in words:
        if skip:
            skip = False
        elif word in _TO_FILE:
            skip = True
        elif word not in ("&", "2>&1"):
            kept.append(word)
    return kept


def _check(command: Command, env: dict[str, str], monkeypatch) -> None:
    words = command_words(command.words)
    program, rest = words[0], words[1:]
    if program == "twinaudit":
        _check_twinaudit(command, rest, env, monkeypatch)
    elif program in ("python", ".venv/bin/python"):
        _check_python(command, rest, env, monkeypatch)
    elif program == "make":
        _check_make(command, rest, monkeypatch)
    elif program == "export":
        for assignment in rest:
            name, _, value = assignment.partition("=")
            env[name] = value
    elif program in (".", "source"):
        assert rest == [".venv/bin/activate"], f"{command.where}: no check for {command.text!r}"
    else:
        assert program in SHELL_WORDS, f"{command.where}: no check for {program!r}"


@pytest.mark.parametrize(
    ("path", "index"),
    [(p, i) for p in DOCUMENTS for i, b in enumerate(blocks(p)) if b],
    ids=lambda v: v.name if isinstance(v, Path) else str(v),
)
def test_every_command_of_the_block_parses(path, index, monkeypatch, capsys):
    env: dict[str, str] = {}
    for command in blocks(path)[index]:
        _check(command, env, monkeypatch)
    capsys.readouterr()


@pytest.mark.parametrize("path", [p for p in DOCUMENTS if table_commands(p)], ids=lambda p: p.name)
def test_every_command_of_a_table_parses(path, monkeypatch, capsys):
    for command in table_commands(path):
        _check(command, {}, monkeypatch)
    capsys.readouterr()


def test_the_practitioner_table_serves_every_format():
    """One row per format of ``--format`` (torch.export twice: dynamic and fixed batch).

    One per kind of Hugging Face model ``--hf`` serves (classifier, lm, clip). And one
    for a model on an Open Inference Protocol server, which the owner's claim
    names by its ``oip+`` address (the OIP options table has no commands), and one for a
    file handed to the arbiter, which it stores (``verifier model add``) and a claim
    names by its SHA-256 (``held:sha256:``).
    """
    commands = [c.words for c in table_commands(ROOT / "docs" / "practitioner.md")]
    served = [words for words in commands if words[:3] == ("twinaudit", "oracle", "serve")]
    claims = [words for words in commands if words[:3] == ("twinaudit", "owner", "claim")]
    held = [words for words in commands if words[:4] == ("twinaudit", "verifier", "model", "add")]
    assert len(served) + len(claims) + len(held) == len(commands) and len(held) == 1
    oracles = [words[words.index("--oracle") + 1][:9] for words in claims]
    assert oracles == ["held:sha2", "oip+http:"]
    hf = [words for words in served if "--hf" in words]
    files = [words for words in served if "--hf" not in words]
    suffixes = {Path(words[words.index("--model") + 1]).suffix for words in files}
    assert suffixes == {".ts", ".pt2", ".pt", ".safetensors", ".onnx"}
    assert sum("--trust-pickle" in words for words in files) == 1
    assert sum("--arch" in words for words in files) == 2
    assert len(files) == 7
    kinds = [
        words[words.index("--kind") + 1] if "--kind" in words else "classifier" for words in hf
    ]
    assert sorted(kinds) == ["classifier", "clip", "lm"]


def _slug(heading: str) -> str:
    """Return GitHub's anchor for a heading: lower case, punctuation dropped, spaces to -."""
    text = re.sub(r"[`*_]", "", heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    """Return the anchors of ``path``'s headings (lines in fenced blocks are not headings)."""
    anchors, inside = set(), False
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.lstrip().startswith("```"):
            inside = not inside
        elif not inside and (heading := re.match(r"^#+\s+(.*)$", line)):
            anchors.add(_slug(heading.group(1)))
    return anchors


@pytest.mark.parametrize("path", DOCUMENTS, ids=lambda p: p.name)
def test_every_link_and_quoted_path_exists(path):
    text = path.read_text(encoding="utf-8")
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"^[a-z]+:", target):
            continue  # a URL
        file, _, anchor = target.partition("#")
        linked = (path.parent / file).resolve() if file else path
        assert linked.exists(), f"{path.name}: the link {target!r} points nowhere"
        if anchor and linked.suffix == ".md":
            assert anchor in _anchors(linked), f"{path.name}: no heading for {target!r}"
    tops = "|".join(re.escape(t) for t in TRACKED_TOPS)
    for quoted in re.findall(r"`([^`\s]+)`", text):
        if re.fullmatch(rf"(?:{tops})/[\w.*/-]*", quoted):
            assert list(ROOT.glob(quoted.rstrip("/"))), f"{path.name}: `{quoted}` does not exist"


# -- The README's quick start, run end to end ---------------------------------------------

#: The README's quick-start heading (its first shell block is the quick start).
QUICK_START = "## Quick start"


def _quick_start() -> list[Command]:
    """Return the commands of the README's first shell block under its quick-start heading."""
    readme = ROOT / "README.md"
    lines = readme.read_text(encoding="utf-8").splitlines()
    heading = next(n for n, line in enumerate(lines, start=1) if line.startswith(QUICK_START))
    return next(block for block in blocks(readme) if block[0].line > heading)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _photos(folder: Path, labels: Path, n: int = 12) -> None:
    from PIL import Image

    folder.mkdir()
    rng = np.random.default_rng(24)
    with labels.open("w", newline="") as stream:
        rows = csv.writer(stream)
        rows.writerow(["filename", "label"])
        for index in range(n):
            name = f"photo-{index:02d}.png"
            pixels = rng.integers(0, 256, (8, 8, 3), dtype=np.uint8)
            Image.fromarray(pixels, "RGB").save(folder / name)
            rows.writerow([name, index % 3])


@pytest.mark.slow
@pytest.mark.usefixtures("one_thread")
@pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated:DeprecationWarning")
def test_the_readme_quick_start_runs(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(proxy_module, "OWN_STEPS", 24)
    _photos(tmp_path / "photos", tmp_path / "photos.csv")
    names = {
        "~/photos.csv": str(tmp_path / "photos.csv"),
        "~/photos": str(tmp_path / "photos"),
        "runs/try": str(tmp_path / "try"),
        "127.0.0.1:7443": f"127.0.0.1:{_free_port()}",
        "127.0.0.1:7500": f"127.0.0.1:{_free_port()}",
    }
    pattern = re.compile("|".join(re.escape(k) for k in sorted(names, key=len, reverse=True)))
    servers = []
    ran = []
    try:
        for command in _quick_start():
            words = [pattern.sub(lambda m: names[m.group()], w) for w in command.words]
            program, rest = words[0], words[1:]
            if program == ".":
                continue  # the virtual environment: this test runs in it
            if program == "mkdir":
                for folder in (w for w in rest if not w.startswith("-")):
                    Path(folder).mkdir(parents=True, exist_ok=True)
            elif program == "export":
                for assignment in rest:
                    name, _, value = assignment.partition("=")
                    monkeypatch.setenv(name, value)
            elif program == "twinaudit" and rest[-1] == "&":
                ready = "serving on" if rest[0] == "verifier" else "listening on"
                # Its log goes to the test's pipe (serve waits for the ready line there),
                # not to the file the README redirects it to.
                process, _ = serve(*command_words(rest), ready=ready)
                servers.append(process)
            elif program == "twinaudit":
                assert cli_main(rest) == 0, f"{command.where}: {command.text}"
            elif program == "python":
                _run_script(monkeypatch, rest)
            elif program == "kill":
                while servers:
                    stop(servers.pop())
            else:
                pytest.fail(f"{command.where}: the test cannot run {command.text!r}")
            ran.append(" ".join(command.words[:3]))
    finally:
        for process in servers:
            stop(process)
    out = capsys.readouterr().out
    assert ran[-2:] == ["twinaudit verifier check", "kill %1 %2"]
    assert "VALID verdict" in out
    assert (tmp_path / "try" / "claim" / "transcript.bin").is_file()


def _run_script(monkeypatch, words: list[str]) -> None:
    script, *args = words
    assert script in PYTHON_SCRIPTS
    with monkeypatch.context() as patch:
        patch.setattr(sys, "argv", [script, *args])
        with pytest.raises(SystemExit) as stopped:
            runpy.run_path(str(ROOT / script), run_name="__main__")
    assert stopped.value.code == 0


# -- The commands run on their own, in tmp_path -------------------------------------------

#: The verdict of the commands that check or replay one: the spec vectors' first valid
#: whole claim, signed with the test key of appendix B, and its transcript.
VECTORS = ROOT / "spec" / "vectors" / "verdicts.json"


def _signed_verdict(folder: Path) -> dict[str, Path]:
    """Write a real signed verdict, its transcript and the key that signed it into ``folder``."""
    from protocol.keys import public_key_from_raw, public_key_pem

    vectors = json.loads(VECTORS.read_text(encoding="utf-8"))
    key = public_key_from_raw(bytes.fromhex(vectors["description"].split("public key ")[1][:64]))
    case = next(c for c in vectors["cases"] if c["valid"] and c["kind"] == "claim")
    files = {
        "verdict.json": folder / "verdict.json",
        "transcript.bin": folder / "transcript.bin",
        ".pub": folder / "arbiter.key.pub",
    }
    files["verdict.json"].write_bytes(case["input"]["envelope"].encode())
    files["transcript.bin"].write_bytes(bytes.fromhex(case["input"]["transcript"]))
    files[".pub"].write_bytes(public_key_pem(key))
    return files


#: The options whose value names a file or folder that a run writes (or lists): mapped to
#: the same name directly under tmp_path.
_WRITTEN = ("--key", "--html", "--models")


def _local(words: list[str], files: dict[str, Path], folder: Path) -> list[str]:
    """Return ``words`` with the documents' paths mapped to files in ``folder``.

    A verdict, a transcript and a public key (by how the name ends) become the signed
    vector verdict's files; the value of ``--key``, ``--html`` or ``--models`` becomes
    the same name in ``folder`` (``models/`` an empty folder there).
    """
    out: list[str] = []
    for index, word in enumerate(words):
        ending = next((e for e in files if word.endswith(e)), None)
        if ending is not None:
            out.append(str(files[ending]))
        elif index and words[index - 1] in _WRITTEN:
            local = folder / Path(word).name
            if words[index - 1] == "--models":
                local.mkdir(exist_ok=True)
            out.append(str(local))
        else:
            out.append(word)
    return out


#: What each command the tests run is recognised by (its first words).
RUN = {
    "plan": ("twinaudit", "plan"),
    "check": ("twinaudit", "verifier", "check"),
    "replay": ("twinaudit", "verifier", "replay"),
    "keygen": ("twinaudit", "verifier", "keygen"),
    "model list": ("twinaudit", "verifier", "model", "list"),
}
#: The commands about the tool itself that run too (kind ``about``).
ABOUT = (("twinaudit", "--version"), ("twinaudit", "-V"), ("twinaudit", "--help"))


def _kind(words: list[str]) -> str | None:
    """Return what ``words`` are (a key of :data:`RUN`, or ``about``); None: only parsed."""
    if tuple(words) in ABOUT:
        return "about"
    return next((k for k, start in RUN.items() if tuple(words[: len(start)]) == start), None)


def run_commands() -> list[tuple[Command, dict[str, str]]]:
    """Return every command the tests run, each with the exports in force before it.

    A document's blocks are one shell session, so a command sees the ``export`` lines of
    the blocks above it too (walkthrough step 8 replays with the key step 4 exported);
    a table's commands see none.
    """
    found: list[tuple[Command, dict[str, str]]] = []
    for path in DOCUMENTS:
        env: dict[str, str] = {}
        for block in blocks(path):
            for command in block:
                words = command_words(command.words)
                if words[0] == "export":
                    for assignment in words[1:]:
                        name, _, value = assignment.partition("=")
                        env[name] = value
                elif _kind(words):
                    found.append((command, dict(env)))
        found += [(c, {}) for c in table_commands(path) if _kind(command_words(c.words))]
    return found


def completion_commands() -> list[Command]:
    """Return the ``twinaudit completion SHELL`` commands quoted in the documents' prose.

    ``eval "$(twinaudit completion bash)"`` quotes one too; fenced blocks are skipped
    (their commands are :func:`blocks`').
    """
    found: list[Command] = []
    for path in DOCUMENTS:
        inside = False
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            if line.lstrip().startswith("```"):
                inside = not inside
            elif not inside:
                for span in re.findall(r"`([^`]*)`", line):
                    for text in re.findall(r"twinaudit completion \w+", span):
                        found.append(Command(path, number, text, tuple(text.split())))
    return found


def _documented_status(command: Command) -> int:
    """Return the exit status the command's comment states (``# exit 1 …``), else 0."""
    stated = re.search(r"#\s*exits?\s+(\d+)", command.text)
    return int(stated.group(1)) if stated else 0


def _run_cli(args: list[str], env: dict[str, str], monkeypatch) -> int:
    """Run ``twinaudit args`` in-process with only ``env``'s TWINAUDIT_ variables set."""
    with monkeypatch.context() as patch:
        for name in [n for n in os.environ if n.startswith(ENV_PREFIX)]:
            patch.delenv(name)
        for name, value in env.items():
            patch.setenv(name, value)
        try:
            return cli_main(args)
        except SystemExit as exc:  # --version and --help exit from the parser
            return 0 if exc.code is None else int(exc.code)


def test_the_documents_have_commands_to_run():
    """Guards the extraction: each document's runnable commands are found, by kind."""
    kinds: dict[tuple[str, str], int] = {}
    for command, _ in run_commands():
        key = (command.path.name, str(_kind(command_words(command.words))))
        kinds[key] = kinds.get(key, 0) + 1
    assert kinds[("README.md", "plan")] >= 1 and kinds[("owner.md", "plan")] >= 2
    assert kinds[("demo.md", "plan")] >= 2
    assert kinds[("README.md", "check")] >= 1 and kinds[("README.md", "replay")] >= 1
    assert kinds[("verdicts.md", "check")] >= 2 and kinds[("verdicts.md", "replay")] >= 3
    assert kinds[("README.md", "keygen")] >= 1 and kinds[("arbiter.md", "keygen")] >= 1
    assert kinds[("walkthrough.md", "about")] == 3
    assert {c.words[2] for c in completion_commands()} == {"bash", "zsh"}


@pytest.mark.parametrize(
    ("command", "env"), run_commands(), ids=[c.where for c, _ in run_commands()]
)
def test_a_documented_command_runs(command, env, tmp_path, monkeypatch, capsys):
    """Each command runs in tmp_path, its paths there; it exits as documented (0 unless said)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "signed").mkdir()  # apart from what the command writes (keygen's .pub)
    files = _signed_verdict(tmp_path / "signed")
    words = _local(command_words(command.words), files, tmp_path)
    env = {name: _local([value], files, tmp_path)[0] for name, value in env.items()}
    code = _run_cli(words[1:], env, monkeypatch)
    out = capsys.readouterr().out
    assert code == _documented_status(command), f"{command.where}: {command.text!r} exit {code}"
    kind = _kind(words)
    if kind in ("plan", "about"):
        assert out.strip(), f"{command.where}: {command.text!r} printed nothing"
    if kind == "about" and words[1] != "--help":
        assert re.fullmatch(r"twinaudit \S+ \(spec \S+\)\n", out)
    if kind == "check" and "--json" not in words:
        assert out.startswith("VALID verdict")
    if kind == "replay" and "--json" not in words:
        assert out.startswith("REPLAYED") and "identical to the verdict" in out
    if "--json" in words:
        assert json.loads(out)["valid" if kind == "check" else "identical"] is True
    if "--html" in words:
        page = Path(words[words.index("--html") + 1])
        assert page.is_file() and "</html>" in page.read_text(encoding="utf-8").lower()
    if kind == "keygen":
        key = Path(words[words.index("--key") + 1])
        assert key.stat().st_mode & 0o777 == 0o600
        assert Path(f"{key}.pub").read_bytes().startswith(b"-----BEGIN PUBLIC KEY-----")


@pytest.mark.parametrize("command", completion_commands(), ids=lambda c: c.where)
def test_a_documented_completion_command_runs(command, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert _run_cli(list(command.words[1:]), {}, monkeypatch) == 0, command.where
    assert "twinaudit" in capsys.readouterr().out
