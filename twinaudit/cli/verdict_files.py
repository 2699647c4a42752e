"""Checking a verdict file offline and replaying its transcript (spec §11, §12).

The one path of ``twinaudit verify`` and of the older ``verifier check`` and
``verifier replay``: read the files (an unreadable one is an :class:`InputError`),
check the signature and the verdict (:func:`checked_verdict`), replay the transcript
and compare the openings (:func:`replayed`), say what the replay found
(:func:`replay_lines`), and write the HTML report of a verdict that has checked
(:func:`write_verdict_report`, its target refused first by :func:`check_report_target`).

The commands import it when they run: it loads the verifier's replay and the report.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from twinaudit.cli.main import package_version
from twinaudit.protocol.claim.verdict import Verdict, check_verdict, parse_verdict
from twinaudit.protocol.encoding import decode
from twinaudit.protocol.envelope import Envelope
from twinaudit.protocol.errors import InputError
from twinaudit.verifier.reexecute import check_openings
from twinaudit.verifier.replay import ReplayResult, ScoreAgreement, replay

from .report_html import (
    Checked,
    identical_answers,
    identical_answers_note,
    pairs_from_transcript,
    render_report,
    write_report,
)


def read_input(path: Path, what: str) -> bytes:
    """Return the bytes of ``path``, or raise :class:`InputError` naming ``what`` it is."""
    try:
        return path.read_bytes()
    except OSError as exc:
        raise InputError(f"cannot read {what} {path}: {exc.strerror}") from None


def check_report_target(target: Path | None, *inputs: Path | None) -> None:
    """Refuse an ``--html`` FILE that cannot be written, before any checking is done."""
    if target is None:
        return
    if not target.parent.is_dir():
        raise InputError(f"--html: {target.parent} is not a folder: create it first (mkdir -p)")
    if target.is_dir():
        raise InputError(f"--html: {target} is a folder; name the report file")
    if target.exists() and any(s is not None and s.exists() and target.samefile(s) for s in inputs):
        raise InputError(f"--html: {target} is an input of this command, not a report")


def checked_verdict(data: bytes, pubkey: Ed25519PublicKey | None) -> Verdict:
    """Return the verdict of envelope ``data``, its signature checked when ``pubkey`` is given.

    Without a key only the payload's form is checked (``verifier replay`` without
    ``--pubkey``). Raises a :class:`twinaudit.protocol.errors.TwinauditError` for a verdict that
    does not check.
    """
    if pubkey is not None:
        return check_verdict(data, pubkey)
    return parse_verdict(decode(Envelope.from_json(data).payload))


@dataclass(frozen=True)
class Replayed:
    """What replaying a checked verdict's transcript found (all of it identical).

    ``openings_checked`` is the number of pairs whose records were compared with their
    openings, None when no openings were given.
    """

    result: ReplayResult
    openings_checked: int | None


def replayed(verdict: Verdict, transcript: bytes, openings: bytes | None) -> Replayed:
    """Replay ``transcript`` against ``verdict`` and check it against ``openings`` if given.

    Raises a :class:`twinaudit.protocol.errors.TwinauditError` at the first difference.
    """
    result = replay(verdict, transcript)
    if openings is None:
        return Replayed(result, None)
    return Replayed(result, check_openings(verdict, transcript, openings))


def replay_status(done: Replayed) -> str:
    """Return how the replay agreed, in a few words: ``replay identical`` or within §1.2.

    ``replay identical`` only when every recorded score is the recomputed one bit for
    bit; a claim of the rule before ``basic-v1`` whose recorded scores were accepted
    within the tolerance of spec §1.2 says so, and how many.
    """
    agreement = done.result.agreement
    if agreement.bit_identical:
        return "replay identical"
    return (
        f"replay within the spec §1.2 tolerance ({agreement.within_tolerance} of "
        f"{agreement.recomputed} scores differ from the recomputed in their last bits)"
    )


def agreement_line(agreement: ScoreAgreement) -> str | None:
    """Say how a claim's scores agreed under the tolerance of spec §1.2; None under basic-v1.

    A claim of the rule before ``basic-v1`` (an image-classifier score map without
    ``arithmetic``) replays its recorded scores within a tolerance: the line says
    whether any score used it, by how much, and that the outcomes, and so the decision,
    are the recorded scores' exactly.
    """
    if not agreement.tolerance_rule:
        return None
    if agreement.bit_identical:
        return (
            f"scores: all {agreement.recomputed} recomputed bit for bit (a claim before the "
            "arithmetic basic-v1, which spec §1.2 replays within a tolerance; none was needed)"
        )
    return (
        f"scores: {agreement.within_tolerance} of {agreement.recomputed} recorded scores "
        "are not the recomputed ones bit for bit, and were accepted within the tolerance "
        "spec §1.2 allows verdicts before the arithmetic basic-v1 (largest relative "
        f"difference {agreement.largest_relative_difference:.2g}, "
        f"{agreement.largest_share_of_tolerance:.2%} of the tolerance); the outcomes "
        "follow from the recorded scores, so the decision, indicators and final state "
        "are identical"
    )


def agreement_figures(agreement: ScoreAgreement) -> dict[str, Any]:
    """Return the JSON ``score_agreement`` object of a replay (spec §1.2, §12)."""
    return {
        "arithmetic": agreement.arithmetic,
        "scores": agreement.recomputed,
        "bit_identical": agreement.bit_identical,
        "tolerance_rule": agreement.tolerance_rule,
        "within_tolerance": agreement.within_tolerance,
        "largest_relative_difference": agreement.largest_relative_difference,
        "largest_share_of_tolerance": agreement.largest_share_of_tolerance,
    }


def replay_lines(done: Replayed) -> list[str]:
    """Return the lines that say what a replay recomputed, and what it could not."""
    final = done.result.final
    interval = final.interval
    log_e = final.log_statistic
    shown = [
        f"final {final.successes!r}/{final.draws!r}",
        *([f"interval [{interval[0]!r}, {interval[1]!r}]"] if interval is not None else []),
        *([f"log e-value {log_e!r}"] if log_e is not None else []),
    ]
    lines = [
        f"REPLAYED {done.result.pairs} pairs: decision {done.result.decision.upper()}, "
        f"{', '.join(shown)}; identical to the verdict"
    ]
    if (agreed := agreement_line(done.result.agreement)) is not None:
        lines.append(agreed)
    signed = done.result.answers_signed
    if done.openings_checked is not None:
        lines.append(
            f"the items of its {done.openings_checked} pairs are the openings': their "
            "digests, and what an image score records of them (labels, shapes, copy "
            "parameters, query digests)"
            + ("; and every query the oracle signed an answer to is the claim's" if signed else "")
        )
    else:
        lines.append(
            "not recomputed without --openings: what the items fix (their digests; an image "
            "score's labels, shapes, copy parameters and query digests"
            + ("; the digests of the queries the oracle signed" if signed else "")
            + "), which the signature binds"
        )
    return lines


def replay_figures(verdict: Verdict, transcript: bytes, done: Replayed) -> dict[str, Any]:
    """Return the JSON fields of a replay: pairs replayed, pairs scored alike, openings."""
    pairs = pairs_from_transcript(verdict, transcript)
    alike, scored = identical_answers(pairs)
    return {
        "pairs_replayed": done.result.pairs,
        "pairs_scored_alike": alike,
        "pairs_scored": scored,
        "scored_alike_note": identical_answers_note(verdict, pairs),
        "openings_checked": done.openings_checked,
        "score_agreement": agreement_figures(done.result.agreement),
    }


def write_verdict_report(
    target: Path,
    verdict_file: Path,
    verdict: Verdict,
    data: bytes,
    transcript: bytes | None,
    *,
    done: Replayed | None = None,
) -> None:
    """Render the HTML report of a verdict that has checked (and replayed) and write it.

    ``done`` is the replay of ``transcript``; the page says how its scores agreed.
    """
    agreement = done.result.agreement if done is not None else None
    checked = Checked(
        key_id=verdict.arbiter,
        replayed=transcript is not None,
        file_name=verdict_file.name,
        file_sha256=hashlib.sha256(data).hexdigest(),
        agreement_note=agreement_line(agreement) if agreement is not None else None,
    )
    pairs = pairs_from_transcript(verdict, transcript) if transcript is not None else None
    page = render_report(verdict, checked, pairs, generator=f"twinaudit {package_version()}")
    try:
        write_report(target, page)
    except OSError as exc:
        raise InputError(f"cannot write the report {target}: {exc.strerror or exc}") from None
