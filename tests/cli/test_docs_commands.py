"""The commands of README.md and docs/*.md: every one parses, the cheap ones run.

**Parsed.** Every fenced ``sh``/``bash`` block of the README and of ``docs/*.md`` is
read as a script: each command line (``\\``-continued lines joined, ``#`` comments
dropped) is checked without running it, and so is every ``twinaudit`` command quoted in
a table. A ``twinaudit`` command must parse with the console script's own parser
(:func:`twinaudit.cli.main.build_parser`, environment variables set by the block's
``export`` lines included); ``python -m demo``, ``demo.practitioner``,
``evaluation`` and ``bench`` and the scripts under ``docs/examples/`` must parse with
theirs (their ``parse_args`` is stopped before the command would run; ``--help`` is
all it does); ``make`` targets must exist in the Makefile. A command of any other kind
fails the test, so a new kind of command in the docs needs a check here. Every
relative link and every repository path quoted in code must exist.

**Run.** These commands are also executed, in-process through
:func:`twinaudit.cli.main.main`, each in its own ``tmp_path`` (its working directory), with
only the ``TWINAUDIT_`` variables its document exported above it (a document's blocks
are one shell session), and must exit 0, or with the status a ``# exit N`` comment
states:

- every ``twinaudit plan`` command (pure computation; it must print its figures);
- every ``twinaudit verify``, ``verifier check`` and ``verifier replay`` command
  (README, verdicts, unlearning, demo, walkthrough), against a real signed verdict: the
  spec vectors' first valid whole claim (spec/vectors/verdicts.json, signed with the
  test key of appendix B) and its transcript. A name ending ``verdict.json``,
  ``transcript.bin`` or ``.pub`` is that verdict's file, wherever the document put it;
  ``verify`` must print VERIFIED (VALID without a transcript), ``check`` VALID,
  ``replay`` identical, ``--json`` JSON saying so, ``--html`` must write a page;
- every ``twinaudit verifier keygen --key …`` (the key 0600, the ``.pub`` a PEM key)
  and ``verifier model list --models …`` (on an empty folder), the path moved into
  ``tmp_path``;
- ``twinaudit --version``, ``-V`` and ``--help``, and the ``twinaudit completion
  bash|zsh`` quoted in owner.md's prose.

The README's quick start is then run end to end, in its own order, on 12 random 8×8
labelled images, with the proxy trained for 24 steps instead of thousands (slow).

**Sessions.** The rest runs too, block by block, in the documents' own order, as a
shell would run it (:data:`SESSIONS`): each session in its own ``tmp_path``, against
real ``verifier serve`` and ``oracle serve`` processes on free ports of 127.0.0.1 (the
documents' own serve lines start them), an MLServer for the Open Inference Protocol
claims, and a world of tiny inputs named as the documents name them
(:data:`WORLD`: 28×28 grey photos, the tiny CNN in every format, tiny Hugging Face
models, certificates, an escrowed vault). Only addresses, the run folders, a user's
``--arch``, the printed ``held:sha256:`` address and the README table's ``FILE`` and
``DIR`` are substituted (:data:`ADDRESSES`, :data:`NAMES`, :data:`PLACEHOLDERS`), and
the trainings made tiny (:data:`FAST`). Each command must exit as
documented and leave what it says (a vault, a receipt, a valid verdict, a report…).

What cannot run here is listed in :data:`PARSE_ONLY` with the reason (Fashion-MNIST
training, the whole tool chain, hours of evaluation, PostgreSQL, the walkthrough's
console steps), and :func:`test_every_documented_command_runs_or_says_why_not` keeps
that list honest: a new command in the docs either runs or gets a reason.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import importlib
import importlib.util
import json
import os
import queue
import re
import runpy
import shlex
import signal
import socket
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from bench.bench_readme import quick_start_localiser
from tests.support import docs_world
from tests.support.cli_processes import ROOT, serve, stop
from tests.support.proxy import short_own_proxy
from tests.support.threads import one_thread  # noqa: F401 - the fixture
from twinaudit.cli.main import build_parser
from twinaudit.cli.main import main as cli_main
from twinaudit.owner.vault.layout import MANIFEST_FILE

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


def quick_start_in(folder: Path) -> list[tuple[Command, list[str]]]:
    """Return the quick start's commands, their words made to run in ``folder``.

    Twelve small photos and their labels stand in for the reader's, the runs folder is in
    ``folder`` and the servers listen on free ports.
    """
    _photos(folder / "photos", folder / "photos.csv")
    localise = quick_start_localiser(folder)
    return [(command, [localise(w) for w in command.words]) for command in _quick_start()]


@pytest.mark.slow
@pytest.mark.usefixtures("one_thread")
@pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated:DeprecationWarning")
def test_the_readme_quick_start_runs(tmp_path, monkeypatch, capsys):
    short_own_proxy(monkeypatch, 24)
    servers = []
    ran = []
    try:
        for command, words in quick_start_in(tmp_path):
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
    assert ran[-2:] == ["twinaudit verify runs/try/claim/verdict.json", "kill %1 %2"]
    assert "VERIFIED verdict" in out
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
    from twinaudit.protocol.keys import public_key_from_raw, public_key_pem

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
    "verify": ("twinaudit", "verify"),
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
    assert kinds[("README.md", "verify")] >= 2 and kinds[("verdicts.md", "verify")] >= 5
    assert kinds[("verdicts.md", "check")] >= 1 and kinds[("walkthrough.md", "replay")] >= 1
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
    if kind == "verify" and "--json" not in words:
        assert out.startswith("VERIFIED verdict" if "--transcript" in words else "VALID verdict")
    if kind == "replay" and "--json" not in words:
        assert out.startswith("REPLAYED") and "identical to the verdict" in out
    if "--json" in words and kind == "plan":
        assert json.loads(out)["rates"], f"{command.where}: {command.text!r} has no figures"
    elif "--json" in words:
        field = {"check": "valid", "verify": "verified"}.get(str(kind), "identical")
        assert json.loads(out)[field] is True
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


# -- The documents' sessions: their blocks run in order, against real servers --------------
#
# A session is a document's blocks (or table) run in order as one shell session, in its
# own tmp_path (the working directory, of the servers too), against real processes:
# ``verifier serve`` and ``oracle serve`` lines start ``python -m twinaudit`` servers on
# 127.0.0.1 (each must print its ready line; a server started on the address another
# one holds stops that one first, as a foreground server is stopped before the next is
# typed), and every other ``twinaudit`` command runs in-process through
# :func:`twinaudit.cli.main.main` and must exit as documented and leave what it says it
# leaves (:func:`_expect`). Only :data:`ADDRESSES` and :data:`NAMES` are substituted;
# the world a session starts from (:data:`WORLD`: tiny photos, model files, certificates,
# a running arbiter and oracle, an escrowed vault) is made with the names the document
# gives those files, and :data:`FAST` makes the trainings tiny.

#: The documents' addresses, each the role of a server on a free port of 127.0.0.1 (one
#: per role and session). A role a ``--listen 127.0.0.1:0`` server took is the address it
#: printed (demo.md quotes what its servers printed).
ADDRESSES = {
    "0.0.0.0:7443": "arbiter",
    "127.0.0.1:7443": "arbiter",
    "arbiter.example:7443": "arbiter",
    "HOST:PORT": "arbiter",
    "127.0.0.1:37327": "arbiter",
    "0.0.0.0:7500": "oracle",
    "127.0.0.1:7500": "oracle",
    "MODEL_HOST:PORT": "oracle",
    "127.0.0.1:40387": "oracle",
    "127.0.0.1:9464": "metrics",
    "10.0.0.5:8080": "oip http",
    "HOST:8080": "oip http",
    "10.0.0.5:8081": "oip grpc",
}
#: The documents' other stand-ins: a user's architecture, the address ``verifier model
#: add`` printed (``{held}``), and the places of a run (under the session's folder).
NAMES = {
    "mypackage.models:make_net": "tests.support.docs_world:make_net",
    "held:sha256:HEX": "{held}",
    "/tmp/walk/": "walk/",
    "RUN/": "run/",
}
#: Whole words the README's formats table leaves to the reader: its model file (the
#: pickled module in the row with ``--trust-pickle``, else the ONNX file, which declares
#: the input shape ``verifier model add`` needs) and a Hugging Face model folder.
PLACEHOLDERS = {"FILE": "model.onnx", "DIR": "my-vit"}
PICKLED_FILE = "whole.pt"
#: The trainings a session runs, made tiny: (module, constant, value).
FAST = (
    ("twinaudit.owner.marking.proxy", "OWN_STEPS", 24),
    ("twinaudit.owner.marking.proxy", "OWN_EPOCHS", 1),
    ("twinaudit.owner.marking.proxy", "EPOCHS", 2),
    ("twinaudit.cli.cmd_estimate", "STEPS", 24),
)


@dataclass(frozen=True)
class Session:
    """Blocks of one document run in order (indices among its shell blocks; -1: its table)."""

    document: str
    blocks: tuple[int, ...]
    world: tuple[str, ...] = ()
    slow: bool = False


#: The sessions run, by id. What a block has that no session runs is listed, with the
#: reason, in :data:`PARSE_ONLY`.
SESSIONS = {
    "README owner": Session("README.md", (2,), ("photos", "public", "arbiter", "oracle"), True),
    "README arbiter": Session("README.md", (3,), ("tls",)),
    "README practitioner": Session("README.md", (4,), ("models",), slow=True),
    "README formats": Session("README.md", (-1,), ("models", "hf"), True),
    "arbiter keys": Session("docs/arbiter.md", (0,)),
    "arbiter held": Session(
        "docs/arbiter.md", (1, 2), ("models", "photos", "arbiter", "vault"), slow=True
    ),
    "arbiter tls": Session("docs/arbiter.md", (3,), ("tls", "photos", "arbiter key", "marked")),
    "arbiter limits": Session("docs/arbiter.md", (6, 7, 8), ("arbiter key",)),
    "owner": Session("docs/owner.md", (0,), ("photos", "public", "arbiter", "oracle"), True),
    "owner texts": Session("docs/owner.md", (1,), ("texts", "pictures", "arbiter"), True),
    "owner dry run": Session(
        "docs/owner.md", (2,), ("photos", "arbiter", "oracle", "vault"), slow=True
    ),
    "owner paper": Session(
        "docs/owner.md", (3,), ("photos", "arbiter", "oracle", "vault"), slow=True
    ),
    "demo": Session("docs/demo.md", (0, 1)),
    "evaluation plan": Session("docs/evaluation.md", (0,)),
    # The practitioner (block 4) serves before the owner's claim (block 3) needs it.
    "demo roles": Session("docs/demo.md", (2, 4, 3, 5), ("demo data",), True),
    "practitioner": Session(
        "docs/practitioner.md", (0, 1), ("models", "encoder", "hf", "api key", "tls"), True
    ),
    "practitioner formats": Session(
        "docs/practitioner.md", (-1,), ("models", "pickle", "hf", "vault", "oip"), True
    ),
    "practitioner oip": Session("docs/practitioner.md", (2,), ("vault", "oip"), True),
    "unlearning": Session(
        "docs/unlearning.md", (0, 1, 2, 3), ("photos", "arbiter", "vault", "used oracle"), True
    ),
    "verdicts": Session(
        "docs/verdicts.md", (2,), ("photos", "arbiter", "oracle", "vault"), slow=True
    ),
}


#: Seconds a session's server gets to print its ready line, and a command to finish. A
#: server that fails exits at once; one that starts is waited for: with a load of 7-9 on
#: the 2-core machine, loading torch and a Hugging Face model took over 60 s (issue #44).
SERVER_READY_S = 180
COMMAND_S = 120


def _serve_here(folder: Path, args: list[str], env: dict[str, str]) -> tuple[object, str]:
    """Start ``twinaudit args`` (a server) in ``folder``; return it and its ready line."""
    ready = "serving on" if args[0] == "verifier" else "listening on"
    process = subprocess.Popen(
        [sys.executable, "-m", "twinaudit", *args],
        cwd=folder,
        env=_process_env(env),
        stdout=subprocess.PIPE,
        text=True,
    )
    lines: queue.Queue[str | None] = queue.Queue()

    def read() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            lines.put(line)
        lines.put(None)

    threading.Thread(target=read, daemon=True).start()
    try:
        while (line := lines.get(timeout=SERVER_READY_S)) is not None:
            if ready in line:
                return process, line.strip()
    except queue.Empty:
        process.kill()
        process.wait()
        raise AssertionError(
            f"twinaudit {' '.join(args)} printed no {ready!r} line in {SERVER_READY_S} s"
        ) from None
    process.wait(timeout=30)
    raise AssertionError(f"twinaudit {' '.join(args)} did not start (exit {process.returncode})")


def _process_env(env: dict[str, str]) -> dict[str, str]:
    """Return this process's environment with only ``env``'s TWINAUDIT_ variables.

    The repository is on ``PYTHONPATH``: ``--arch tests.support.docs_world:make_net``.
    """
    kept = {name: value for name, value in os.environ.items() if not name.startswith(ENV_PREFIX)}
    path = os.pathsep.join(p for p in (str(ROOT), kept.get("PYTHONPATH", "")) if p)
    return {**kept, **env, "PYTHONPATH": path}


class _Run:
    """One session's state: its folder, exports, servers by address, and roles' addresses."""

    def __init__(self, folder: Path, monkeypatch, capsys) -> None:
        self.folder = folder
        self.monkeypatch = monkeypatch
        self.capsys = capsys
        self.env: dict[str, str] = {}
        self.servers: dict[str, object] = {}  # listen address -> process
        self.roles: dict[str, str] = {}  # role -> 127.0.0.1:PORT
        self.held = ""  # the address the session's first `verifier model add` printed
        self.provided: set[str] = set()
        self.stack = contextlib.ExitStack()  # servers started as context managers
        self.ran: list[str] = []

    # -- substitution ---------------------------------------------------------------------

    def address(self, role: str) -> str:
        if role not in self.roles:
            self.roles[role] = f"127.0.0.1:{_free_port()}"
        return self.roles[role]

    def local(self, word: str) -> str:
        """Return ``word`` with :data:`ADDRESSES` and :data:`NAMES` substituted."""
        table = {**{k: ADDRESSES[k] for k in ADDRESSES}, **NAMES}
        pattern = re.compile("|".join(re.escape(k) for k in sorted(table, key=len, reverse=True)))

        def one(match: re.Match[str]) -> str:
            found = match.group()
            if found in ADDRESSES:
                return self.address(ADDRESSES[found])
            return NAMES[found].format(held=self.held)

        return pattern.sub(one, word)

    # -- servers ----------------------------------------------------------------------------

    def serve(self, args: list[str]) -> str:
        """Start a server (after stopping one on its address); return its ready line."""
        listen = args[args.index("--listen") + 1]
        if listen in self.servers:
            stop(self.servers.pop(listen))
        process, line = _serve_here(self.folder, args, self.env)
        printed = line.split()[-1]
        if listen.endswith(":0"):  # a role's address is what the server printed
            self.roles.setdefault("arbiter" if args[0] == "verifier" else "oracle", printed)
        self.servers[printed if listen.endswith(":0") else listen] = process
        return line

    def stop_all(self) -> None:
        while self.servers:
            stop(self.servers.popitem()[1])
        self.stack.close()

    # -- in-process commands ----------------------------------------------------------------

    def cli(self, args: list[str]) -> tuple[int, str, str]:
        """Run ``twinaudit args``; return its status, stdout and stderr.

        In-process, but for a command that imports a user's ``--arch``: that runs in a
        ``python -m twinaudit`` process of its own (the import of code it does not know,
        and torchvision's shim, are the console script's).
        """
        if "--arch" in args:
            done = subprocess.run(
                [sys.executable, "-m", "twinaudit", *args],
                cwd=self.folder,
                env=_process_env(self.env),
                capture_output=True,
                text=True,
                timeout=COMMAND_S,
                check=False,
            )
            return done.returncode, done.stdout, done.stderr
        self.capsys.readouterr()
        code = _run_cli(args, self.env, self.monkeypatch)
        captured = self.capsys.readouterr()
        return code, captured.out, captured.err

    # -- the world a session starts from ----------------------------------------------------

    def provide(self, what: str) -> None:
        """Make ``what`` (a key of :data:`WORLD`) exist in the folder, with what it needs."""
        if what in self.provided:
            return
        self.provided.add(what)
        folder = self.folder
        if what == "photos":
            docs_world.grey_photos(folder / "photos", folder / "labels.csv")
        elif what == "public":
            docs_world.grey_photos(folder / "public", folder / "public.csv", n=24, seed=25)
        elif what == "models":
            docs_world.model_files(folder)
        elif what == "pickle":
            docs_world.model_files(folder / "pickled", pickle_as_model_pt=True)
            (folder / "pickled" / "model.pt").replace(folder / "model.pt")
        elif what == "encoder":
            docs_world.encoder_file(folder / "encoder.pt")
        elif what == "hf":
            from tests.support import hf_models

            hf_models.image_classifier(folder / "my-vit")
            hf_models.causal_lm(folder / "my-lm")
            hf_models.causal_lm(folder / "models" / "my-lm")
            hf_models.clip(folder / "my-clip")
        elif what == "texts":
            docs_world.reviews(folder / "reviews.jsonl")
        elif what == "pictures":
            docs_world.captioned_pictures(folder / "pictures", folder / "captions.csv")
        elif what == "tls":
            docs_world.tls_files(folder)
        elif what == "arbiter key":
            assert self.cli(["verifier", "keygen", "--key", "arbiter.key"])[0] == 0
        elif what == "arbiter":
            self.provide("arbiter key")
            (folder / "models").mkdir(exist_ok=True)
            listen = ["--listen", self.address("arbiter")]
            self.serve(["verifier", "serve", *listen, "--db", "escrow.db", "--key", "arbiter.key",
                        "--models", "models"])  # fmt: skip
        elif what == "oracle":
            self.provide("models")
            self.serve(["oracle", "serve", "--model", "model.ts", "--input-shape", "28,28,1",
                        "--threads", "1", "--listen", self.address("oracle")])  # fmt: skip
        elif what == "used oracle":  # the oracle of a model trained on the vault's photos
            self.provide("vault")
            assert self.cli(["owner", "publish", "vault", "--out", "world-published"])[0] == 0
            docs_world.used_model(self.folder / "world-published", self.folder / "used.ts")
            self.serve(["oracle", "serve", "--model", "used.ts", "--input-shape", "28,28,1",
                        "--threads", "1", "--listen", self.address("oracle")])  # fmt: skip
        elif what == "demo data":  # the files make demo writes under RUN/data and RUN/practitioners
            from tests.support.data import synthetic_images

            data, used = folder / "run" / "data", folder / "run" / "practitioners" / "used"
            for made in (data, used, folder / "run" / "arbiter"):
                made.mkdir(parents=True)
            for name, n, seed in (("owner", 40, 21), ("train", 40, 22), ("test", 20, 23)):
                images, labels = synthetic_images(n, seed=seed)
                if name == "owner":
                    np.save(data / "owner-photos.npy", images)
                    (data / "owner-labels.json").write_text(json.dumps(labels.tolist()))
                else:
                    into = used if name == "train" else data
                    np.save(into / f"{name}-images.npy", images)
                    np.save(into / f"{name}-labels.npy", labels)
        elif what == "api key":  # the practitioner's key of an OpenAI-compatible endpoint
            self.env["LM_API_KEY"] = "docs-test-key"
        elif what == "oip":  # an MLServer serving memorisers of the photos: fashion, NAME
            from PIL import Image

            from tests.support.oip_server import OipModel, mlserver_process

            self.provide("photos")
            with (folder / "labels.csv").open(newline="") as stream:
                rows = list(csv.reader(stream))[1:]
            images = np.stack(
                [np.asarray(Image.open(folder / "photos" / n))[..., None] for n, _ in rows]
            )
            labels = np.array([int(label) for _, label in rows])
            models = [
                OipModel("fashion", images, labels, version="3"),
                OipModel("NAME", images, labels),
            ]
            server = self.stack.enter_context(mlserver_process(folder / "oip", models))
            self.roles["oip http"], self.roles["oip grpc"] = server.http, server.grpc
        elif what == "marked":
            self.provide("photos")
            mark = ["owner", "mark", "photos", "--labels", "labels.csv", "--out", "vault"]
            fixed = ["--marker", "bernoulli", "--epsilon", "48", "--seed", "docs"]
            assert self.cli([*mark, *fixed, "--quiet"])[0] == 0
        elif what == "vault":
            self.provide("marked")
            self.provide("arbiter")
            escrow = ["owner", "escrow", "vault", "--arbiter", self.address("arbiter")]
            assert self.cli([*escrow, "--arbiter-key", "arbiter.key.pub", "--quiet"])[0] == 0
        else:
            pytest.fail(f"no world item {what!r}")

    # -- the commands ----------------------------------------------------------------------

    def run(self, command: Command) -> None:
        """Run one documented command as the session's shell would; check what it did."""
        if _why_not_run(command):
            return
        pickled = "--trust-pickle" in command.words
        words = command_words(
            [
                PICKLED_FILE if pickled and word == "FILE" else PLACEHOLDERS.get(word, word)
                for word in map(self.local, command.words)
            ]
        )
        program, rest = words[0], words[1:]
        if program == "twinaudit" and rest[1:2] == ["serve"]:
            line = self.serve(rest)
            assert re.search(r"(serving|listening) on 127\.0\.0\.1:\d+$", line), command.where
        elif program == "twinaudit":
            kind = _kind(words)
            verdict = rest[1] if kind == "verify" else rest[2]
            if kind in ("check", "replay", "verify") and not (self.folder / verdict).exists():
                # A verdict this session did not make: test_a_documented_command_runs runs
                # the command against a signed one.
                self.ran.append(command.where)
                return
            self.set_aside(command, rest)
            code, out, err = self.cli(rest)
            _expect(self, command, rest, code, out, err)
        elif program == "export":
            for assignment in rest:
                name, _, value = assignment.partition("=")
                self.env[name] = value
        elif program == "mkdir":
            for path in (w for w in rest if not w.startswith("-")):
                (self.folder / path).mkdir(parents=True, exist_ok=True)
        elif program in ("python", ".venv/bin/python"):
            self.python(command, rest)
        elif program == "kill":
            self.stop_all()
        elif program not in (".", "source"):
            pytest.fail(f"{command.where}: a session cannot run {command.text!r}")
        self.ran.append(command.where)

    def set_aside(self, command: Command, args: list[str]) -> None:
        """Move aside the ``--out`` an earlier command of the session wrote.

        Such a command is an alternative to the earlier one (owner.md's ``# or:``, the rows
        of a table), not a second run into the same folder (a vault marked otherwise, or
        a verdict, is refused there).
        """
        out = _option(args, "--out")
        if out is not None and (self.folder / out).exists():
            (self.folder / out).rename(self.folder / f"{out.name}.before-line-{command.line}")

    def python(self, command: Command, words: list[str]) -> None:
        """Run a documented script or module in-process; it must exit 0, print, write --out."""
        self.capsys.readouterr()
        with self.monkeypatch.context() as patch:
            if words[0] == "-m":
                patch.setattr(sys, "argv", [words[1], *words[2:]])
                try:
                    code = _main_of(words[1], words[2:])()
                except SystemExit as exc:
                    code = exc.code
            else:
                patch.setattr(sys, "argv", words)
                with pytest.raises(SystemExit) as stopped:
                    runpy.run_path(str(ROOT / words[0]), run_name="__main__")
                code = stopped.value.code
        assert code in (0, None), f"{command.where}: {command.text!r} exit {code}"
        assert self.capsys.readouterr().out.strip(), f"{command.where}: printed nothing"
        if "--out" in words:
            assert (self.folder / words[words.index("--out") + 1]).exists(), command.where


def _option(args: list[str], name: str) -> Path | None:
    return Path(args[args.index(name) + 1]) if name in args else None


def _expect(run: _Run, command: Command, args: list[str], code: int, out: str, err: str) -> None:
    """Check a session's in-process command: its exit status and what it printed or wrote."""
    where = f"{command.where}: {command.text!r}"
    status = _documented_status(command)
    if "--exit-code" in args:  # exit 3 for NOT-DETECTED (README)
        status = 3 if json.loads(out)["decision"] == "not-detected" else 0
    assert code == status, f"{where} exit {code}\n{out}{err}"
    out_path = _option(args, "--out")
    kind = " ".join(args[:2])
    if kind == "owner mark":
        assert re.search(r"^marked \d+ ", out, re.MULTILINE), where
        assert (out_path / MANIFEST_FILE).is_file(), where
    elif kind == "owner escrow":
        assert re.search(r"^escrowed \d+ pairs as record \d+", out, re.MULTILINE), where
    elif kind == "owner publish":
        assert "published " in out and any(out_path.iterdir()), where
    elif kind == "owner inspect":
        assert "epsilon check: " in out and "holds" in out, where
        assert _option(args, "--sheet").is_file(), where
    elif kind == "owner estimate":
        assert re.search(r"\bC1\b", out) and re.search(r"\bC3\b", out), where
    elif kind == "owner proxy":
        assert out_path.is_file() and f"wrote {out_path}" in out, where
    elif kind == "owner claim" and "--dry-run" in args:
        assert out.startswith("DRY RUN of a claim") and "every check holds" in out, where
        assert out_path is None or not (out_path / "verdict.json").exists(), where
    elif kind == "owner claim":
        if "--json" in args:
            report = json.loads(out)
            assert Path(report["verdict_file"]).resolve() == (out_path / "verdict.json").resolve()
        else:
            assert re.match(r"(NOT-)?DETECTED \(stop: ", out), f"{where}\n{out}"
        pub = _option(args, "--arbiter-key") or Path(run.env[f"{ENV_PREFIX}ARBITER_KEY"])
        check = ["verifier", "check", str(out_path / "verdict.json"), "--pubkey", str(pub)]
        checked, printed, _ = run.cli(check)
        assert checked == 0 and printed.startswith("VALID verdict"), f"{where}\n{printed}"
    elif kind == "owner openings":
        assert out_path.is_file() and out_path.stat().st_size > 0, where
    elif kind == "verifier model" and args[2] == "add":
        held = re.search(r"held:sha256:[0-9a-f]{64}", out)
        assert held, f"{where}\n{out}"
        run.held = run.held or held.group()
    elif kind == "verifier model" and args[2] == "list":
        assert run.held and run.held in out, f"{where}\n{out}"
    elif kind == "verifier reexecute":
        assert out.startswith("REEXECUTED "), f"{where}\n{out}"
    elif kind == "verifier keygen":
        key = _option(args, "--key")
        assert key.stat().st_mode & 0o777 == 0o600 and Path(f"{key}.pub").is_file(), where
    elif args[0] == "verify" and "--json" in args:
        assert json.loads(out)["verified"], where
    elif args[0] == "verify":
        replayed = "--transcript" in args
        assert out.startswith("VERIFIED verdict" if replayed else "VALID verdict"), where
        assert not replayed or "identical to the verdict" in out, where
    elif kind == "verifier check":
        assert json.loads(out)["valid"] if "--json" in args else out.startswith("VALID"), where
    elif kind == "verifier replay":
        assert "identical to the verdict" in out, where
    elif args[0] == "plan":
        assert out.strip(), where
    else:
        pytest.fail(f"{where}: no check of what it did")


#: What a session's world holds before its first command (made by :meth:`_Run.provide`).
WORLD = {
    "photos": "photos/: 40 random grey 28x28 PNGs; labels.csv: their labels",
    "public": "public/: 24 other such photos; public.csv: their labels",
    "models": "the tiny CNN (28x28x1) as model.ts, model.pt (TorchScript), model.pt2, "
    "fixed.pt2, weights.pt, weights.safetensors, model.onnx",
    "pickle": "model.pt: the tiny CNN pickled (the formats table's --trust-pickle row)",
    "encoder": "encoder.pt: a TorchScript image encoder",
    "hf": "tiny Hugging Face models, built offline: my-vit, my-lm, models/my-lm, my-clip",
    "texts": "reviews.jsonl: six JSON Lines reviews",
    "pictures": "pictures/: six RGB pictures; captions.csv: their captions",
    "tls": "a CA (arbiter-ca.pem, clients.pem, oracles.pem), server.pem/.key, oracle.pem/.key, "
    "owner.pem/.key",
    "arbiter key": "arbiter.key and arbiter.key.pub (verifier keygen)",
    "arbiter": "verifier serve on the arbiter's address, --db escrow.db --models models/",
    "oracle": "oracle serve --model model.ts on the oracle's address",
    "used oracle": "instead, oracle serve of the tiny CNN trained on vault/'s published photos",
    "demo data": "run/arbiter/, and what make demo downloads and splits: "
    "run/data/owner-photos.npy, "
    "owner-labels.json, test-images.npy, test-labels.npy and "
    "run/practitioners/used/train-images.npy, train-labels.npy: synthetic 28x28 images",
    "api key": "LM_API_KEY set (the key of an OpenAI-compatible endpoint)",
    "oip": "an MLServer (tests/support/oip_server.py) on the OIP addresses serving "
    "memorisers of the photos as fashion (version 3) and NAME",
    "marked": "vault/: photos/ marked (bernoulli, no training), not escrowed",
    "vault": "vault/ escrowed with the arbiter",
}


#: Seconds a whole session may take: a command that hangs fails its session instead.
SESSION_S = 600


@contextlib.contextmanager
def _time_limit(seconds: int, what: str):
    """Raise TimeoutError in the test's thread after ``seconds`` (a hung lock is interrupted)."""

    def expired(*_: object) -> None:
        raise TimeoutError(f"{what} took more than {seconds} s")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def _session_commands(session: Session) -> list[Command]:
    path = ROOT / session.document
    found = blocks(path)
    return [c for i in session.blocks for c in (table_commands(path) if i < 0 else found[i])]


@pytest.mark.usefixtures("one_thread")
@pytest.mark.filterwarnings("ignore::DeprecationWarning")
@pytest.mark.parametrize(
    "name",
    [pytest.param(n, marks=[pytest.mark.slow] if s.slow else []) for n, s in SESSIONS.items()],
)
def test_a_documented_session_runs(name, tmp_path, monkeypatch, capsys):
    session = SESSIONS[name]
    monkeypatch.chdir(tmp_path)
    for module, constant, value in FAST:
        monkeypatch.setattr(importlib.import_module(module), constant, value)
    run = _Run(tmp_path, monkeypatch, capsys)
    try:
        with _time_limit(SESSION_S, f"the session {name!r}"):
            for what in session.world:
                run.provide(what)
            for command in _session_commands(session):
                run.run(command)
    finally:
        run.stop_all()
    runs = [c.where for c in _session_commands(session) if not _why_not_run(c)]
    assert runs and run.ran == runs, name


#: The documented commands no test runs, each with the reason: (document, how the command
#: starts) -> why. Everything else in a shell block or table runs: in the quick start, in
#: test_a_documented_command_runs or in a session (which skips what is listed here).
PARSE_ONLY = {
    ("README.md", "make demo"): "minutes of training on Fashion-MNIST (docs/demo.md)",
    ("README.md", "make test"): "the whole tool chain and test suite (it runs this test)",
    ("docs/demo.md", "make demo"): "minutes of training on Fashion-MNIST",
    ("docs/development.md", "make test"): "the whole tool chain and test suite",
    ("docs/development.md", "make lint"): "ruff and lint-imports over the whole repository",
    ("docs/development.md", "make typecheck"): "mypy --strict over the whole repository",
    ("docs/development.md", "make pytest"): "the whole test suite (it runs this test)",
    ("docs/development.md", "make test-fast"): "the test suite (it runs this test)",
    ("docs/development.md", "make vectors"): "rewrites the tracked spec/vectors",
    ("docs/development.md", "make fuzz"): "the fuzz suite at length",
    ("docs/development.md", "make clean"): "deletes .venv, the environment running the tests",
    ("docs/benchmarks.md", "make bench"): "every benchmark: minutes of measurement",
    ("docs/benchmarks.md", ".venv/bin/python -m bench"): "benchmarks: minutes of measurement",
    ("docs/evaluation.md", ".venv/bin/python -m evaluation main"): "hours of training",
    ("docs/evaluation.md", ".venv/bin/python -m evaluation encoder"): "hours of training",
    ("docs/evaluation.md", ".venv/bin/python -m evaluation report"): (
        "rewrites the tracked docs/results.md (--out's default) from the tracked records"
    ),
    ("docs/unlearning.md", "python -m evaluation"): "hours of training",
    ("docs/arbiter.md", "twinaudit verifier serve --listen 0.0.0.0:7443 --db postgresql:"): (
        "a PostgreSQL server (db.example); tests/support/postgres.py needs one configured"
    ),
    ("docs/arbiter.md", "twinaudit verifier serve --listen 127.0.0.1:7444 --db postgresql:"): (
        "a PostgreSQL server (db.example)"
    ),
    ("docs/arbiter.md", "twinaudit verifier serve --listen 127.0.0.1:7445 --db postgresql:"): (
        "a PostgreSQL server (db.example)"
    ),
    ("docs/owner.md", "twinaudit monitor "): (
        "follows a serving arbiter's log on a schedule; tests/cli/test_monitor.py runs it"
        " against an arbiter that serves two forks"
    ),
    ("docs/arbiter.md", "twinaudit witness "): (
        "witness servers beside an arbiter: tests/e2e/test_e2e_witnessed.py runs these commands"
    ),
    (
        "docs/arbiter.md",
        "twinaudit verifier serve --listen 127.0.0.1:7443 --db escrow.db --key "
        "arbiter.key --witness",
    ): "its witnesses (vkeys elided): tests/e2e/test_e2e_witnessed.py",
}
#: The walkthrough is one recorded session on the author's photos, with console steps
#: between its commands (a cut-out flattened, a grey/colour copy made) that its commands'
#: refusals call for; the README quick start test runs the same commands (its checks and
#: replays run in test_a_documented_command_runs).
_WALKTHROUGH = "a recorded session on the author's photos, with console steps between"
PARSE_ONLY.update(
    {
        ("docs/walkthrough.md", start): _WALKTHROUGH
        for start in (
            "twinaudit owner ",
            "twinaudit verifier serve ",
            "twinaudit oracle serve ",
            "python docs/examples/",
            "export ",
            "kill ",
        )
    }
)


def _why_not_run(command: Command) -> str | None:
    """Return why ``command`` is only parsed (:data:`PARSE_ONLY`), or None: it runs."""
    document = str(command.path.relative_to(ROOT))
    return next(
        (why for (doc, start), why in PARSE_ONLY.items() if doc == document
         and command.text.startswith(start)),
        None,
    )  # fmt: skip


def _documented_commands() -> list[Command]:
    return [
        command
        for path in DOCUMENTS
        for command in [*(c for block in blocks(path) for c in block), *table_commands(path)]
    ]


def test_every_documented_command_runs_or_says_why_not():
    """Each command runs in some test, or :data:`PARSE_ONLY` says why it cannot."""
    alone = {c.where for c, _ in run_commands()} | {c.where for c in _quick_start()}
    in_sessions = {c.where for s in SESSIONS.values() for c in _session_commands(s)}
    for command in _documented_commands():
        why = _why_not_run(command)
        assert not (why and command.where in alone), f"{command.where} runs: drop its reason"
        assert why or command.where in alone | in_sessions, (
            f"{command.where}: {command.text!r} neither runs nor says why (PARSE_ONLY)"
        )
    documented = _documented_commands()
    for doc, start in PARSE_ONLY:
        assert any(c.path == ROOT / doc and c.text.startswith(start) for c in documented), (
            f"PARSE_ONLY: {doc} has no command {start!r} any more"
        )
