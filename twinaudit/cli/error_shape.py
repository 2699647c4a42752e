"""The one shape of every command-line failure, and the next step for each error code.

Every failure a command reports is one line on stderr (docs/cli.md, spec §2.2.1)::

    twinaudit: error: [CODE] what happened; what to do

and, with ``--json``, one object on stdout whose ``error`` holds the same three parts
(:meth:`Failure.to_json`). ``CODE`` is one of the taxonomy's codes
(:mod:`twinaudit.protocol.errors`) or a local code of the command line
(:data:`LOCAL_CODES`). :data:`HINTS` says, for each code, what the person who ran the
command does next; :func:`hint_for` fills in the command's own help page.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

#: Codes only the command line reports, for failures that are not a twinaudit error
#: (spec §2.2.1): an optional extra not installed, the operating system refusing a file
#: operation, and an exception twinaudit did not expect (a bug).
MISSING_EXTRA: Final = "missing-extra"
IO_ERROR: Final = "io-error"
INTERNAL_ERROR: Final = "internal-error"
LOCAL_CODES: Final = (MISSING_EXTRA, IO_ERROR, INTERNAL_ERROR)

#: The next step for each error code. ``{help}`` is the command's help page
#: (``'twinaudit owner claim --help'``). A code missing here gets :data:`DEFAULT_HINT`.
HINTS: Final[dict[str, str]] = {
    "invalid-input": "fix the input or option named; {help} lists the options",
    "non-canonical-encoding": (
        "the file or message is not in twinaudit's exact form: use it as twinaudit wrote "
        "it, unedited, from its source"
    ),
    "limit-exceeded": (
        "send less at once, or smaller items; docs/security.md lists each limit and why it is there"
    ),
    "invalid-parameter": "choose a value in the range named; {help} gives each option's range",
    "unsupported-version": (
        "use a twinaudit that speaks that version ('twinaudit --version' names the spec "
        "version this one speaks), or a file made by this one"
    ),
    "not-found": "check the path, id or index named; {help} lists the options",
    "verification-failed": (
        "the file does not match what was signed or committed: get an unaltered copy "
        "from its source"
    ),
    "invalid-proof": (
        "get an unaltered copy of the proof or receipt from the arbiter that issued it"
    ),
    "root-mismatch": (
        "the data is not the data committed to: get an unaltered copy of the file named "
        "from its source"
    ),
    "commitment-mismatch": (
        "the opening does not belong to this commitment: use the vault or openings file "
        "escrowed with this record"
    ),
    "invalid-signature": (
        "check that the key given (--pubkey or --arbiter-key) is the public key of the "
        "arbiter that signed the file, and that the file is unaltered"
    ),
    "invalid-state": "the operation does not fit what has happened so far: {help} says the order",
    "claim-busy": "another run holds this claim: wait a minute and run the same command again",
    "oracle-failed": (
        "check that the model's oracle (--oracle) is running and that the arbiter can "
        "reach it, then file the claim again"
    ),
    "vault-integrity": (
        "restore the file named from a backup of the vault (or, where the message names a "
        "JPEG decoder, read it with the Pillow it names); a vault is never edited by hand "
        "('twinaudit owner vault-migrate' rewrites it in another format)"
    ),
    "vault-storage": "free space or fix the permissions, then run the same command to resume",
    "paraphraser-failed": (
        "check the paraphraser named in the message (running, reachable, answering), then "
        "run the same command to resume"
    ),
    "model-mismatch": (
        "fix the model file, or the options that describe it (--input-shape, --n-classes, "
        "--max-batch, --mean, --std: {help})"
    ),
    "remote-failed": (
        "the server failed without saying why: its operator's log has the reason; try again later"
    ),
    "unavailable": (
        "check that the server is running and listening at the address given (--arbiter "
        "HOST:PORT), and that TLS matches: --ca for a TLS server, none for plaintext"
    ),
    "deadline-exceeded": (
        "the server or the network is slow or overloaded: run the same command again later"
    ),
    "unauthenticated": (
        "check TLS: --ca must be the CA that signed the server's certificate, and with "
        "mTLS --cert and --cert-key a client certificate the server accepts"
    ),
    "permission-denied": (
        "ask the server's operator to accept this client (its certificate, --cert)"
    ),
    "unimplemented": (
        "check that the address names the right service (an arbiter, not an oracle) and "
        "that both sides run the same twinaudit ('twinaudit --version')"
    ),
    "cancelled": "the call was cancelled before it ended: run the same command again",
    MISSING_EXTRA: "install the extra named, then run the command again",
    IO_ERROR: ("check the path, the free space and the permissions, then run the command again"),
    INTERNAL_ERROR: (
        "this is a bug in twinaudit: run the command again with -v for the traceback and "
        "report it with the command and its output"
    ),
}

#: The next step for a code that a server's typed error carries, where it differs from
#: the same code raised here (:data:`HINTS`): a record or claim the arbiter lacks.
REMOTE_HINTS: Final[dict[str, str]] = {
    "not-found": (
        "check the record index or claim id, and that --arbiter names the arbiter that holds it"
    ),
}

#: The next step of a code that :data:`HINTS` does not list.
DEFAULT_HINT: Final = "{help} lists what the command needs"


def own_hint(text: str) -> tuple[str, str | None]:
    """Split an error's text into what happened and its own next step, if it has one.

    Errors that say what to do say it after ``; `` (``… transparent pixels; flatten it
    onto a background …``): the text before the first ``; `` is what happened, the rest
    the next step. Returns ``(text, None)`` for an error that says no next step.
    """
    what, sep, then = text.partition("; ")
    return (what, then) if sep and what.strip() and then.strip() else (text, None)


def hint_for(code: str, prog: str = "twinaudit", *, remote: bool = False) -> str:
    """Return the next step for ``code``, naming the help page of ``prog`` (the command).

    ``remote``: the code came in a server's typed error (:data:`REMOTE_HINTS` first).
    """
    hint = (REMOTE_HINTS.get(code) if remote else None) or HINTS.get(code, DEFAULT_HINT)
    return hint.format(help=f"'{prog} --help'")


@dataclass(frozen=True)
class Failure:
    """One failure as a command reports it: code, what happened, what to do, exit status."""

    code: str
    message: str
    hint: str
    #: The command's exit status (1 the work failed, 2 bad usage or unusable input).
    status: int

    def line(self) -> str:
        """Return the one line on stderr: ``twinaudit: error: [code] message; hint``."""
        return f"twinaudit: error: [{self.code}] {_one_line(self.message)}; {_one_line(self.hint)}"

    def to_json(self) -> dict[str, str]:
        """Return the ``error`` member of the command's JSON object on failure."""
        return {"code": self.code, "message": _one_line(self.message), "hint": _one_line(self.hint)}


def _one_line(text: str) -> str:
    r"""Return ``text`` on one line of printable characters, without a closing . or ;.

    A server's words reach this line: a control character (a terminal escape, say) is
    shown as ``\x1b``, never sent to the terminal.
    """
    plain = "".join(c if c.isprintable() or c.isspace() else ascii(c)[1:-1] for c in text)
    return " ".join(plain.split()).rstrip(".;")
