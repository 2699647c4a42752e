"""Command-line conventions every ``twinaudit`` command shares, applied to the whole parser.

:func:`apply` walks the parser after every sub-command has registered and gives each
command (each leaf of the tree):

- ``-v/--verbose`` (repeatable) and ``-q/--quiet``, where it has none of its own: ``-q``
  drops progress lines, ``-v`` adds the traceback to an error and more log events
  (a server's ``--log-level`` moves one step; see :func:`verbosity`);
- environment variables for the flags a user repeats in every command of a dispute
  (:data:`ENVIRONMENT`): the option's default, shown in its help and named after its
  usage line (an option marked required there is not when its variable is set), an
  option given wins;
- its ``--json`` help says what a failure prints (:data:`JSON_ON_FAILURE`);
- its exit status in its help: the command's own paragraph where it has one, else
  :data:`EXIT_STATUS`, what :func:`twinaudit.cli.main.main` returns for every command;
- the examples of :data:`EXAMPLES` at the end of its help, and a formatter that wraps
  prose but keeps example lines as written.
"""

from __future__ import annotations

import argparse
import logging
import os
import textwrap
from collections.abc import Iterator
from typing import Final

#: Option → the environment variable that supplies its default.
ENVIRONMENT: Final = {
    "--arbiter": "TWINAUDIT_ARBITER",
    "--arbiter-key": "TWINAUDIT_ARBITER_KEY",
    "--pubkey": "TWINAUDIT_ARBITER_KEY",
    "--models": "TWINAUDIT_MODELS",
    "--threads": "TWINAUDIT_THREADS",
}

#: Examples shown at the end of each command's help (each one parses: tests/cli/test_cli.py).
EXAMPLES: Final[dict[str, tuple[str, ...]]] = {
    "verify": (
        "twinaudit verify verdict.json --pubkey arbiter.key.pub",
        "twinaudit verify verdict.json --transcript transcript.bin --pubkey arbiter.key.pub "
        "--html verdict.html",
        "twinaudit verify verdict.json --transcript transcript.bin --openings openings.bin "
        "--pubkey arbiter.key.pub --json",
    ),
    "monitor": (
        "twinaudit monitor --arbiter HOST:7443 --arbiter-key arbiter.key.pub "
        "--from monitor.json --init --record 12",
        "TWINAUDIT_ARBITER=HOST:7443 TWINAUDIT_ARBITER_KEY=arbiter.key.pub "
        "twinaudit monitor --from monitor.json --record 12 --json --exit-code",
    ),
    "plan": ("twinaudit plan --pairs 1000 --false-detection 0.05 --rates 0.6 0.7 --ties 0.9",),
    "owner mark": (
        "twinaudit owner mark photos/ --labels labels.csv --out vault/",
        "twinaudit owner mark photos/ --out vault/ --threads 2",
        "twinaudit owner mark reviews.jsonl --field text --out text-vault/",
    ),
    "owner proxy": ("twinaudit owner proxy public/ --labels public.csv --out proxy.pt",),
    "owner estimate": ("twinaudit owner estimate vault/ --public public/ --labels public.csv",),
    "owner escrow": (
        "twinaudit owner escrow vault/ --arbiter HOST:7443 --arbiter-key arbiter.key.pub",
        "TWINAUDIT_ARBITER=HOST:7443 TWINAUDIT_ARBITER_KEY=arbiter.key.pub "
        "twinaudit owner escrow vault/",
    ),
    "owner publish": ("twinaudit owner publish vault/ --out published/",),
    "owner inspect": ("twinaudit owner inspect vault/ --input photos/ --sheet sheet.png",),
    "owner claim": (
        "twinaudit owner claim vault/ --arbiter HOST:7443 --arbiter-key arbiter.key.pub "
        "--oracle MODEL_HOST:7500 --out claim/",
        "export TWINAUDIT_ARBITER=HOST:7443 TWINAUDIT_ARBITER_KEY=arbiter.key.pub",
        "twinaudit owner claim vault/ --oracle MODEL_HOST:7500 --out claim/ --json --exit-code",
    ),
    "owner openings": (
        "twinaudit owner openings vault/ --verdict claim/verdict.json "
        "--arbiter-key arbiter.key.pub --out openings.bin",
    ),
    "owner vault-migrate": ("twinaudit owner vault-migrate vault/",),
    "verifier keygen": ("twinaudit verifier keygen --key keys/arbiter.key",),
    "witness keygen": ("twinaudit witness keygen --key w1.key --name w1.example",),
    "witness vkey": (
        "twinaudit witness vkey --arbiter-pubkey arbiter.key.pub",
        "twinaudit witness vkey --key w1.key --name w1.example",
    ),
    "witness serve": (
        "twinaudit witness serve --listen 127.0.0.1:7480 --key w1.key --name w1.example "
        "--db w1.db --arbiter-pubkey arbiter.key.pub",
    ),
    "verifier store-check": ("twinaudit verifier store-check --db escrow.db --key arbiter.key",),
    "verifier serve": (
        "twinaudit verifier serve --listen 127.0.0.1:7443 --db escrow.db --key arbiter.key",
        "twinaudit verifier serve --listen 0.0.0.0:7443 --db escrow.db --key arbiter.key "
        "--tls-cert server.pem --tls-key server.key --metrics-listen 127.0.0.1:9100",
    ),
    "verifier model add": ("twinaudit verifier model add model.pt --models models/",),
    "verifier model list": ("twinaudit verifier model list --models models/",),
    "verifier check": (
        "twinaudit verifier check verdict.json --pubkey arbiter.key.pub",
        "twinaudit verifier check verdict.json --pubkey arbiter.key.pub --html verdict.html",
        "twinaudit verifier check verdict.json --pubkey arbiter.key.pub "
        "--witness-policy witnesses.policy",
    ),
    "verifier replay": (
        "twinaudit verifier replay verdict.json --transcript transcript.bin "
        "--pubkey arbiter.key.pub",
    ),
    "verifier reexecute": (
        "twinaudit verifier reexecute verdict.json --transcript transcript.bin "
        "--openings openings.bin --model model.pt --pubkey arbiter.key.pub",
    ),
    "oracle serve": (
        "twinaudit oracle serve --model model.pt --listen 127.0.0.1:7500 --label-only",
        "twinaudit oracle serve --model weights.pt --arch mypackage.models:make_net "
        "--input-shape 28,28,1 --listen 0.0.0.0:7500 --tls-cert oracle.pem --tls-key oracle.key",
        "twinaudit oracle serve --model model.pt --listen 127.0.0.1:7500 --label-only "
        "--answer-key keys/answers.key",
    ),
    "oracle keygen": ("twinaudit oracle keygen --key keys/answers.key",),
    "completion": (
        "twinaudit completion bash > ~/.local/share/bash-completion/completions/twinaudit",
        'eval "$(twinaudit completion zsh)"',
    ),
}

#: The exit status of a command whose help states none of its own (twinaudit.cli.main.main).
EXIT_STATUS: Final = (
    "exit status: 0 success; 1 the work ran and failed (a failed check, a refused or "
    "unreachable remote call, a disk error); 2 bad usage or unusable input, or a missing "
    "optional extra (one line on stderr says which, and how to fix it)"
)

_EXAMPLE_INDENT: Final = "  "


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Wraps each paragraph of a description or epilog; keeps indented lines as written.

    A paragraph (text between blank lines) whose lines start with two spaces, such as
    the examples, is printed verbatim; any other is re-filled to the terminal's width,
    words never broken at hyphens (``--pairs`` stays whole).
    """

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        out = []
        for paragraph in text.split("\n\n"):
            lines = paragraph.splitlines()
            if any(line.startswith(_EXAMPLE_INDENT) for line in lines):
                out.append("\n".join(indent + line for line in lines))
            else:
                out.append(
                    textwrap.fill(
                        " ".join(paragraph.split()),
                        width,
                        initial_indent=indent,
                        subsequent_indent=indent,
                        break_on_hyphens=False,
                        break_long_words=False,
                    )
                )
        return "\n\n".join(out)


def commands(
    parser: argparse.ArgumentParser, path: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    """Yield ``(words, parser)`` of every command below ``parser`` that has no sub-commands."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                below = list(commands(sub, (*path, name)))
                yield from below or [((*path, name), sub)]


def _options(parser: argparse.ArgumentParser) -> set[str]:
    return {name for action in parser._actions for name in action.option_strings}


def _add_verbosity(parser: argparse.ArgumentParser) -> None:
    present = _options(parser)
    if "-v" not in present and "--verbose" not in present:
        parser.add_argument(
            "-v",
            "--verbose",
            action="count",
            default=0,
            help="more detail: log events, and an error's traceback (-vv: debug events)",
        )
    if "-q" not in present and "--quiet" not in present:
        parser.add_argument(
            "-q", "--quiet", action="store_true", help="no progress lines, only results and errors"
        )


def _add_environment(parser: argparse.ArgumentParser, environ: dict[str, str]) -> None:
    for action in parser._actions:
        for option in action.option_strings:
            variable = ENVIRONMENT.get(option)
            if variable is None:
                continue
            if action.help and variable not in action.help:
                action.help = f"{action.help} (default: ${variable} when set)"
            value = environ.get(variable)
            if value:
                action.default = value  # converted by the option's type, as if given
                action.required = False


#: What every ``--json`` help adds: the object a failure prints (docs/cli.md).
JSON_ON_FAILURE: Final = 'on failure too, with "error": {code, message, hint}'


def _add_json_failure(parser: argparse.ArgumentParser) -> None:
    for action in parser._actions:
        if "--json" in action.option_strings and action.help and "failure" not in action.help:
            action.help = f"{action.help} ({JSON_ON_FAILURE})"


def _add_exit_status(parser: argparse.ArgumentParser) -> None:
    if "exit status" in (parser.epilog or "").lower():
        return
    parser.epilog = f"{parser.epilog}\n\n{EXIT_STATUS}" if parser.epilog else EXIT_STATUS


def _add_examples(words: tuple[str, ...], parser: argparse.ArgumentParser) -> None:
    parser.formatter_class = HelpFormatter
    examples = EXAMPLES.get(" ".join(words))
    if not examples:
        return
    block = "examples:\n" + "\n".join(_EXAMPLE_INDENT + e for e in examples)
    parser.epilog = f"{parser.epilog}\n\n{block}" if parser.epilog else block


def _usage_environment(parser: argparse.ArgumentParser) -> None:
    """End the usage line with the environment variables that stand for its options.

    An option that a variable can supply is marked required when the variable is not
    set; the line after the usage says which variable would do instead.
    """
    named: dict[str, str] = {}  # variable -> the option it stands for (its first name)
    for action in parser._actions:
        variables = [ENVIRONMENT[o] for o in action.option_strings if o in ENVIRONMENT]
        if variables and variables[0] not in named:
            named[variables[0]] = action.option_strings[0]
    if not named:
        return
    usage = parser.format_usage().removeprefix("usage: ").rstrip("\n")
    note = "or set " + ", ".join(f"${variable} for {option}" for variable, option in named.items())
    indent = " " * len("usage: ")
    lines = textwrap.wrap(note, _USAGE_WIDTH - len(indent), break_on_hyphens=False)
    parser.usage = (usage + "".join(f"\n{indent}{line}" for line in lines)).replace("%", "%%")


#: The width the environment line after a usage line is wrapped to.
_USAGE_WIDTH: Final = 79


def apply(parser: argparse.ArgumentParser, environ: dict[str, str] | None = None) -> None:
    """Give every command of ``parser`` the shared options, environment, exit status, examples."""
    env = dict(os.environ if environ is None else environ)
    for words, command in commands(parser):
        _add_verbosity(command)
        _add_environment(command, env)
        _add_json_failure(command)
        _add_exit_status(command)
        _add_examples(words, command)
        _usage_environment(command)
        command.set_defaults(command_prog=command.prog)  # a failure's hint names its help


def verbosity(args: argparse.Namespace) -> int:
    """Apply ``-v``/``-q`` to logging; return the verbosity (−1 quiet, 0, 1, 2 …).

    Commands without a logging set-up of their own get Python logging at WARNING (quiet:
    ERROR, -v: INFO, -vv: DEBUG) on stderr; a server's ``--log-level`` left at its
    default ``info`` becomes ``warning`` with -q and ``debug`` with -v.
    """
    level = -1 if getattr(args, "quiet", False) else int(getattr(args, "verbose", 0) or 0)
    if getattr(args, "log_level", None) == "info" and level:
        args.log_level = "warning" if level < 0 else "debug"
    elif not hasattr(args, "log_level"):
        chosen = {-1: logging.ERROR, 0: logging.WARNING, 1: logging.INFO}.get(level, logging.DEBUG)
        logging.basicConfig(level=chosen, format="twinaudit: %(levelname)s: %(name)s: %(message)s")
    return level
