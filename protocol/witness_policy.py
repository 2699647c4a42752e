"""A client's witness policy file, in C2SP ``tlog-policy`` form (spec §9.7.3).

The file is lines of ASCII-separated words (spaces and tabs); blank lines and lines
starting with ``#`` are ignored. The lines this implementation reads:

- ``log <vkey> [<url>]``: a log the policy accepts (the arbiter's note key, type
  ``0x01``, named after its origin). Optional: with none, the arbiter's key comes
  from elsewhere (``--arbiter-key``); with some, the arbiter's key must be one.
- ``witness <name> <vkey> [<url>]``: a witness and its cosignature key (type ``0x04``).
- ``group <name> <k>|all|any <member>...``: ``k`` of the members, which are witnesses.
- ``quorum <name>|none``: exactly one, naming a witness (1 of 1), a group, or ``none``.

A group of groups, which the C2SP text allows, is refused here (``invalid-parameter``):
a policy is one threshold over one set of witnesses (:class:`WitnessPolicy`). Every
other rule of the C2SP text is kept: names defined before use, each name once, each
member once, no two witnesses (or logs) with one public key, ``1 <= k <= n``.
"""

from __future__ import annotations

import re
from collections.abc import Container
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from .checkpoint_note import WitnessPolicy, arbiter_key
from .errors import InputError, LimitExceededError, ParameterError
from .note import COSIGNATURE_V1, ED25519, VerifierKey, parse_vkey

#: Largest policy file read, in bytes.
MAX_POLICY_BYTES: Final = 64 * 1024
#: Most logs, witnesses or groups a policy may define (the C2SP text asks for 32).
MAX_POLICY_ENTRIES: Final = 32

_SPLIT: Final = re.compile(r"[ \t]+")
_K: Final = re.compile(r"\A[1-9][0-9]{0,2}\Z")


@dataclass(frozen=True)
class PolicyFile:
    """A parsed policy: the logs it names (maybe none) and the witness policy."""

    logs: tuple[VerifierKey, ...]
    policy: WitnessPolicy

    def require_log(self, arbiter_public_key: Ed25519PublicKey) -> None:
        """Refuse an arbiter the policy's ``log`` lines do not name (where it has any).

        Raises:
            ParameterError: the policy names logs and the arbiter's key is not one.

        """
        if self.logs and arbiter_key(arbiter_public_key) not in self.logs:
            raise ParameterError("the witness policy's log lines do not name this arbiter's key")


def parse_policy(text: bytes) -> PolicyFile:
    """Read a policy file strictly (see the module); return the policy it states.

    Raises:
        LimitExceededError: above :data:`MAX_POLICY_BYTES` or :data:`MAX_POLICY_ENTRIES`.
        ParameterError: a line, name, key or threshold breaks a rule (the message names
            the line), or a group of groups.

    """
    if len(text) > MAX_POLICY_BYTES:
        raise LimitExceededError("witness policy in bytes", len(text), MAX_POLICY_BYTES)
    if any((b < 0x20 and b not in (0x09, 0x0A)) or b == 0x7F for b in text):
        raise ParameterError("a witness policy holds no control character but tab and newline")
    logs: list[VerifierKey] = []
    witnesses: dict[str, VerifierKey] = {}
    groups: dict[str, tuple[int, tuple[str, ...]]] = {}
    quorum: str | None = None
    for number, raw in enumerate(text.decode("utf-8", errors="replace").split("\n"), 1):
        words = [w for w in _SPLIT.split(raw.strip(" \t")) if w]
        if not words or words[0].startswith("#"):
            continue
        where = f"witness policy line {number}"
        keyword, args = words[0], words[1:]
        if keyword == "log" and len(args) in (1, 2):
            key = _vkey(args[0], ED25519, where)
            if any(k.public == key.public for k in logs):
                raise ParameterError(f"{where}: a log is listed twice")
            logs.append(key)
        elif keyword == "witness" and len(args) in (2, 3):
            name, key = args[0], _vkey(args[1], COSIGNATURE_V1, where)
            _new_name(name, witnesses, groups, where)
            if any(k.public == key.public for k in witnesses.values()):
                raise ParameterError(f"{where}: a witness's public key is listed twice")
            witnesses[name] = key
        elif keyword == "group" and len(args) >= 3:
            name, k_word, members = args[0], args[1], tuple(args[2:])
            _new_name(name, witnesses, groups, where)
            groups[name] = (_threshold(k_word, members, witnesses, groups, where), members)
        elif keyword == "quorum" and len(args) == 1:
            if quorum is not None:
                raise ParameterError(f"{where}: a policy has exactly one quorum line")
            if args[0] != "none" and args[0] not in witnesses and args[0] not in groups:
                raise ParameterError(f"{where}: quorum {args[0]!r} is not defined above")
            quorum = args[0]
        else:
            raise ParameterError(f"{where}: not a log, witness, group or quorum line")
        if max(len(logs), len(witnesses), len(groups)) > MAX_POLICY_ENTRIES:
            raise LimitExceededError("policy entries", MAX_POLICY_ENTRIES + 1, MAX_POLICY_ENTRIES)
    if quorum is None:
        raise ParameterError("a witness policy has a quorum line ('quorum none' for none)")
    if quorum == "none":
        chosen: tuple[str, ...] = ()
        k = 0
    elif quorum in witnesses:
        chosen, k = (quorum,), 1
    else:
        k, chosen = groups[quorum]
    return PolicyFile(tuple(logs), WitnessPolicy(tuple(witnesses[n] for n in chosen), k))


def read_policy(path: Path) -> PolicyFile:
    """Read and parse the policy file at ``path`` (bounded before it is read whole).

    Raises:
        InputError: it cannot be read; the errors of :func:`parse_policy`.

    """
    try:
        with path.open("rb") as handle:
            data = handle.read(MAX_POLICY_BYTES + 1)
    except OSError as exc:
        raise InputError(f"cannot read the witness policy {path}: {exc.strerror}") from None
    return parse_policy(data)


def _vkey(text: str, sig_type: int, where: str) -> VerifierKey:
    try:
        key = parse_vkey(text)
    except InputError as exc:
        raise ParameterError(f"{where}: {exc}") from None
    if key.sig_type != sig_type:
        raise ParameterError(f"{where}: the key's signature type is not 0x{sig_type:02x}")
    return key


def _new_name(name: str, witnesses: Container[str], groups: Container[str], where: str) -> None:
    if name == "none" or name in witnesses or name in groups:
        raise ParameterError(f"{where}: name {name!r} is reserved or defined twice")


def _threshold(
    word: str,
    members: tuple[str, ...],
    witnesses: dict[str, VerifierKey],
    groups: dict[str, tuple[int, tuple[str, ...]]],
    where: str,
) -> int:
    if len(set(members)) != len(members):
        raise ParameterError(f"{where}: a group lists a member twice")
    for member in members:
        if member in groups:
            raise ParameterError(f"{where}: groups of groups are not supported here")
        if member not in witnesses:
            raise ParameterError(f"{where}: member {member!r} is not a witness defined above")
    if word in ("all", "any"):
        return len(members) if word == "all" else 1
    if not _K.match(word) or not 1 <= int(word) <= len(members):
        raise ParameterError(f"{where}: threshold {word!r} is not all, any or 1..{len(members)}")
    return int(word)


__all__ = ["MAX_POLICY_BYTES", "MAX_POLICY_ENTRIES", "PolicyFile", "parse_policy", "read_policy"]
