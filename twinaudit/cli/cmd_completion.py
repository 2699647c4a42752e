"""``twinaudit completion bash|zsh``: the shell code that completes ``twinaudit`` commands.

Completion is argcomplete's (the ``completion`` extra): the script printed here asks
``twinaudit`` itself, with argcomplete's environment set, for the words that can follow
what is typed, so it completes every command, option and choice, and file names where
an option takes a path.
"""

from __future__ import annotations

import argparse
import os
from typing import Any

from .helptext import paragraphs

SHELLS = ("bash", "zsh")


def register(commands: Any) -> None:
    """Add the ``completion`` command."""
    parser = commands.add_parser(
        "completion",
        help="print the shell code that completes twinaudit commands (bash or zsh)",
        description=paragraphs(
            "Print the shell code that makes the shell complete twinaudit's commands, "
            "options and choices (argcomplete, installed by the 'completion' extra: "
            "pip install 'twinaudit[completion]' -c constraints.txt). Load it in the "
            "shell's start-up file, or write it where the shell looks for completions.",
        ),
        epilog=paragraphs(
            "exit status: 0 the code was printed; 2 bad usage, or argcomplete is not "
            "installed (the error names the pip install)"
        ),
    )
    parser.add_argument("shell", choices=SHELLS, help="the shell to complete in")
    parser.set_defaults(handler=_completion)


def _completion(args: argparse.Namespace) -> int:
    # The optional 'completion' extra: imported here, so that without it only this
    # command fails (ModuleNotFoundError, which the CLI turns into the pip install line).
    # shellcode is defined in argcomplete.shell_integration (the package re-exports it).
    from argcomplete.shell_integration import shellcode

    print(shellcode(["twinaudit"], shell=args.shell), end="")
    return 0


def autocomplete(parser: argparse.ArgumentParser) -> None:
    """Answer a completion request (argcomplete's environment set) and exit; else nothing.

    Without argcomplete installed there is nothing to answer, and nothing happens; an
    ordinary run (no ``_ARGCOMPLETE`` in the environment) does not import it.
    """
    if "_ARGCOMPLETE" not in os.environ:
        return
    try:
        from argcomplete import autocomplete as answer
    except ModuleNotFoundError:
        return
    answer(parser)
