"""A verdict a person can read: one self-contained HTML page (``twinaudit verify --html``).

The page says what the decision is and, in words a judge reads, what it does and does
not establish (a detection bounds the false-detection probability by p for this
claim, earlier claims on the same record scale that bound, "not detected" is never a
finding of innocence); the record, model, score and test in plain terms; the test's
path over the pairs it was fed (the confidence sequence, and the e-value where the
test has one), recomputed from the verdict by :mod:`twinaudit.cli.verdict_plots`; and a
table of the opened pairs, from the transcript when ``replay`` was given one, else
from what the verdict itself holds.

A page is rendered only for a verdict that has been checked: the caller passes a
:class:`Checked` that says how (the signature, and whether the transcript replayed),
and ``twinaudit verifier`` makes one only after
:func:`twinaudit.protocol.claim.verdict.check_verdict` succeeded. Every piece of text
from the verdict is escaped; the page loads nothing (inline CSS, inline SVG, no script,
a Content-Security-Policy that forbids fetching), and :func:`write_report` writes it
atomically (temporary file, then rename).
"""

from __future__ import annotations

import html
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from twinaudit.protocol.atomic_file import write_atomically
from twinaudit.protocol.claim.functions import SCORE_FUNCTIONS, AnyScoreSpec
from twinaudit.protocol.claim.scores.classifier import ScoreSpec
from twinaudit.protocol.claim.scores.encoder import EncoderSpec
from twinaudit.protocol.claim.transcript import iter_records
from twinaudit.protocol.claim.verdict import Verdict, is_int
from twinaudit.protocol.encoding import Value, canonical
from twinaudit.protocol.errors import InputError
from twinaudit.protocol.stats.graded import grade_of

from .report_labels import (
    LabelAnswers,
    label_answers,
    label_note,
    label_only_knowledge,
    label_words,
)
from .results import answers_line, authentication_line, claims_authenticated
from .verdict_plots import (
    GradesNeededError,
    Trajectory,
    bound_trajectory,
    svg_plot,
    trajectory,
)

#: Most rows of the opened-pairs table (the rest are counted, not listed).
MAX_TABLE_ROWS: Final = 2000

#: What each indicator character of a verdict (spec §10.2 step 7) means, in words.
OUTCOME_WORDS: Final[Mapping[str, str]] = {
    "1": "published version scored higher",
    "0": "hidden version scored higher",
    "h": "tie; the tie coin counted it for the published version",
    "t": "tie; the tie coin counted it for the hidden version",
    "s": "tie; skipped (not fed to the test)",
    "": "opened after the decision (not fed to the test)",
}
_STOP_WORDS: Final = {
    "detected": "the test reached its threshold",
    "exhausted": "every pair the claim could open was used, or the test could no longer "
    "reach its threshold",
    "budget": "the claim's query budget or pair limit ran out before the test could decide",
}
_KNOWLEDGE_WORDS: Final = {
    "C1": "C1: the model's probabilities and the item's label",
    "C2": "C2: the model's probabilities, no label",
    "C3": "C3: the model's top label only, and the item's label",
    "C4": "C4: the model's top label only, no label",
}
_TEST_WORDS: Final = {
    "mixture-e": "a mixture e-value test (spec §7.3): the evidence (the e-value) grows as the "
    "published versions win more pairs than chance; the test detects when it reaches 1/p",
    "mixture-graded": "a graded mixture e-value test (spec §7.5): like the mixture test, "
    "but each pair's bet grows with how far apart its two scores are, so the pairs the "
    "model tells apart clearly count most; the test detects when the evidence reaches 1/p",
    "pprm-chernoff": "the paper's test (spec §7.2): a PPRM confidence sequence for how many of "
    "the record's pairs the published version wins; it detects when the sequence's lower end "
    "reaches the threshold T",
}
_TIE_WORDS: Final = {
    "skip": "tied pairs are skipped (not fed to the test)",
    "coin": "a tie is decided by a fair coin from the protocol's random generator",
}
_CSS: Final = """
body{font:15px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif;
color:#1d2125;background:#f5f6f7;margin:0}
main{max-width:980px;margin:0 auto;padding:24px 28px 40px;background:#fff}
h1{font-size:24px;margin:0 0 4px}h2{font-size:19px;margin:28px 0 8px;
border-bottom:1px solid #dde1e5;padding-bottom:4px}
.sub{color:#5a636c;margin:0 0 16px}
.decision{border-radius:6px;padding:14px 18px;margin:12px 0 18px;border:2px solid}
.decision b{font-size:22px;letter-spacing:.04em}
.detected{background:#fdf1e6;border-color:#c0601a}.detected b{color:#9c4a0e}
.not-detected{background:#eef3f8;border-color:#3f6d98}.not-detected b{color:#2c5378}
.checks{background:#f1f7f1;border-left:4px solid #3b8b45;padding:8px 14px;margin:12px 0}
.warn{background:#fdecea;border-left:4px solid #b3261e;padding:8px 14px;margin:12px 0}
ul{margin:6px 0;padding-left:22px}li{margin:3px 0}
table{border-collapse:collapse;width:100%;margin:8px 0;font-size:14px}
th,td{border:1px solid #dde1e5;padding:4px 8px;text-align:left;vertical-align:top}
th{background:#f0f2f4;font-weight:600}
table.facts th{width:24%}
td.num{text-align:right;font-variant-numeric:tabular-nums}
code,.mono{font-family:"DejaVu Sans Mono",Menlo,Consolas,monospace;font-size:13px;
overflow-wrap:anywhere}
figure{margin:10px 0 18px}figure svg{max-width:100%;height:auto;border:1px solid #e4e7ea}
figcaption{color:#4a535c;font-size:14px;margin-top:4px}
.won{color:#9c4a0e}.lost{color:#2c5378}.muted{color:#6b747c}
footer{margin-top:28px;color:#5a636c;font-size:13px}
@media print{body{background:#fff}main{padding:0}}
"""
_CSP: Final = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"


@dataclass(frozen=True)
class Checked:
    """How a verdict was checked before its report is rendered.

    ``key_id`` is the arbiter key whose signature
    :func:`twinaudit.protocol.claim.verdict.check_verdict` verified; ``replayed`` is true
    when :func:`twinaudit.verifier.replay.replay` also arrived at the verdict's decision
    from its transcript. ``file_name`` and ``file_sha256`` name
    the verdict file, so a reader can tie the page to it. ``agreement_note`` says, for
    a replayed claim of the rule before ``basic-v1``, how its recorded scores agreed
    with the recomputed ones (within the tolerance of spec §1.2, or bit for bit).
    """

    key_id: str
    replayed: bool
    file_name: str
    file_sha256: str
    agreement_note: str | None = None


@dataclass(frozen=True)
class OpenedPair:
    """One opened pair as the report's table shows it.

    ``outcome`` is the indicator character ("" for a pair opened after the decision);
    ``window``, ``published`` and ``scores`` (score of version 0, of version 1) come
    from a transcript and are None when only the verdict was read; so does ``labels``,
    the labels a label-only classifier score read (None for any other score).
    """

    index: int
    outcome: str
    window: int | None = None
    published: int | None = None
    scores: tuple[float, float] | None = None
    labels: LabelAnswers | None = None


def pairs_from_verdict(verdict: Verdict) -> list[OpenedPair]:
    """Return the opened pairs as the verdict alone records them (index and outcome)."""
    indicators = verdict.indicators
    return [
        OpenedPair(index, indicators[n] if n < len(indicators) else "")
        for n, index in enumerate(verdict.opened)
    ]


def pairs_from_transcript(verdict: Verdict, transcript: bytes) -> list[OpenedPair]:
    """Return the opened pairs of ``verdict``'s transcript, which replayed (spec §12).

    Call it only on a transcript :func:`twinaudit.verifier.replay.replay` accepted against
    ``verdict``: the records' form is taken as checked, and their header's claim map is
    the verdict's, whose score says whether the answers were labels.
    """
    pairs = []
    knowledge = label_only_knowledge(verdict.claim.score)
    for record in iter_records(transcript):
        if record.get("type") != "pair":
            continue
        scores: Any = record["scores"]
        pairs.append(
            OpenedPair(
                _replayed_int(record["index"]),
                str(record["outcome"]),
                _replayed_int(record["window"]),
                _replayed_int(record["published"]),
                (float(scores[0]), float(scores[1])),
                label_answers(record, knowledge) if knowledge else None,
            )
        )
    return pairs


def _replayed_int(value: Value) -> int:
    """Return a pair record's integer field, which replay has checked (spec §12)."""
    if not is_int(value):
        raise InputError("the transcript's pair records are not the ones replay checked")
    return value


#: The share of opened pairs with identical scores from which the report remarks on
#: it: honest models answering probabilities gave none in the evaluation (docs/results.md,
#: the ladders' ablation rows without a margin: 0% tied), a PairDetect host all of them.
IDENTICAL_SHARE: Final = 0.1


def identical_answers(pairs: Sequence[OpenedPair]) -> tuple[int, int]:
    """Return (pairs whose two versions scored exactly alike, pairs with scores)."""
    scored = [pair.scores for pair in pairs if pair.scores is not None]
    return sum(1 for first, second in scored if first == second), len(scored)


def identical_answers_note(verdict: Verdict, pairs: Sequence[OpenedPair]) -> str | None:
    """Return a remark when many pairs scored exactly alike from continuous answers.

    A score read from probabilities, embeddings or log-probabilities (not from labels
    alone: the classifier in C3 and C4) almost never gives two different items exactly
    the same value, unless the model's host recognises the two versions of a pair and
    answers both alike (the paper's PairDetect). None when the score reads labels, the
    pairs carry no scores (a verdict without its transcript), or fewer than
    :data:`IDENTICAL_SHARE` of them scored alike.
    """
    if label_only_knowledge(verdict.claim.score) is not None:
        return None
    identical, scored = identical_answers(pairs)
    if not scored or identical < IDENTICAL_SHARE * scored:
        return None
    return (
        f"{identical} of the {scored} opened pairs got exactly the same score for both "
        "versions. A model answering with numbers (here probabilities, embeddings or "
        "log-probabilities) almost never does that for two different items: in the "
        "project's evaluation, honest models did it for none of their pairs, and a host "
        "that recognises the two versions of a pair and answers both alike (PairDetect) "
        "for all of them (docs/results.md, the ladders' ablation rows without a margin and "
        "the attacks table's pairdetect rows). The verdict stands as signed; an arbiter "
        "who holds the model can query it directly (twinaudit verifier reexecute)."
    )


def _e(value: object) -> str:
    """Return ``value`` as escaped HTML text (byte strings as hex)."""
    if isinstance(value, bytes | bytearray):
        value = bytes(value).hex()
    return html.escape(str(value), quote=True)


def _number(value: float) -> str:
    return f"{value:.6g}"


def _plain(value: object) -> str:
    """Return a claim-map value as escaped text: maps as ``key: value`` lists."""
    if isinstance(value, dict):
        return ", ".join(f"{_e(k)}: {_plain(v)}" for k, v in value.items())
    if isinstance(value, list):
        return "[" + ", ".join(_plain(v) for v in value) + "]"
    if isinstance(value, bytes | bytearray):
        return f'<span class="mono">{_e(value)}</span>'
    return _e(value)


def _facts(rows: Iterable[tuple[str, str]]) -> str:
    """Return a two-column table; the labels are escaped here, the values must be HTML."""
    body = "".join(f"<tr><th>{_e(label)}</th><td>{cell}</td></tr>" for label, cell in rows)
    return f'<table class="facts">{body}</table>'


def _bullets(items: Iterable[str]) -> str:
    return "<ul>" + "".join(f"<li>{item}</li>" for item in items) + "</ul>"


@dataclass(frozen=True, slots=True)
class _Counts:
    """What became of a verdict's opened pairs, counted from its indicators (spec §11)."""

    opened: int
    draws: int
    successes: int
    failures: int
    coin_ties: int
    skipped: int
    #: Pairs opened after the test decided (they carry no indicator).
    after: int


def _counts(verdict: Verdict) -> _Counts:
    indicators, final = verdict.indicators, verdict.final
    return _Counts(
        opened=len(verdict.opened),
        draws=final.draws,
        successes=final.successes,
        failures=final.draws - final.successes,
        coin_ties=indicators.count("h") + indicators.count("t"),
        skipped=indicators.count("s"),
        after=len(verdict.opened) - len(indicators),
    )


def _headline(verdict: Verdict) -> str:
    p = verdict.p
    c = _counts(verdict)
    share = f" ({100 * c.successes / c.draws:.1f}%)" if c.draws else ""
    tally = (
        f"Of the {c.draws} pairs fed to the test, the published version scored higher in "
        f"{c.successes}{share}; a model that never saw the published data would win "
        "about half."
    )
    if not c.draws:
        tally = "No pair was opened."
        if c.opened:
            tally = (
                f"No pair was fed to the test: the {c.opened} pairs opened all tied (the "
                "model answered both versions alike) and were skipped."
            )
    if verdict.detected:
        earlier = verdict.earlier_claims
        bound = verdict.record_bound()
        claims = f"{earlier + 1} claim{'s' if earlier else ''}"
        who = (
            ""
            if claims_authenticated(verdict)
            else " Claims on this record are not authenticated: anyone could have filed the "
            "earlier ones."
        )
        return (
            '<div class="decision detected"><b>DETECTED</b><p>False-detection bound '
            f"{_e(_number(bound))} across the record's {_e(claims)} ((earlier claims + 1) × p "
            f"= ({earlier} + 1) × {_e(_number(p))}).{_e(who)} The model under audit answered "
            "the owner's published versions more favourably than their hidden twins more "
            "often than a model that never saw them would. "
            f"{_e(tally)}</p></div>"
        )
    return (
        '<div class="decision not-detected"><b>NOT DETECTED</b><p>The test did not reach its '
        f"threshold: {_e(_STOP_WORDS.get(verdict.stop, verdict.stop))}. "
        f"{_e(tally)} This is not a finding that the data was not used.</p></div>"
    )


def _identical_warning(verdict: Verdict, pairs: Sequence[OpenedPair] | None) -> str:
    note = None if pairs is None else identical_answers_note(verdict, pairs)
    return "" if note is None else f'<div class="warn"><p>{_e(note)}</p></div>'


def _checks(checked: Checked) -> str:
    items = [
        "The arbiter's Ed25519 signature over this verdict, its format and its spec version "
        f'were verified with the key <span class="mono">{_e(checked.key_id)}</span>.'
    ]
    if checked.replayed:
        items.append(
            "It was replayed from its transcript: every score, tie coin and step of the test "
            "was recomputed from the model's recorded answers, without the model, and "
            "arrived at this decision exactly."
        )
        if checked.agreement_note is not None:
            items.append(_e(checked.agreement_note[0].upper() + checked.agreement_note[1:]) + ".")
    else:
        items.append(
            "It was not replayed: checking a verdict does not recompute the decision. The "
            "plots below are recomputed from the verdict's signed indicators; "
            "<code>twinaudit verify</code> with the claim's transcript recomputes the "
            "decision from the model's recorded answers."
        )
    return '<div class="checks">' + _bullets(items) + "</div>"


def _meaning(verdict: Verdict) -> str:
    p = verdict.p
    earlier = verdict.earlier_claims
    if earlier:
        scaled = (
            f"This record had {earlier} earlier claim{'s' if earlier != 1 else ''}. Each had its "
            "own chance of a false detection, so across all "
            f"{earlier + 1} claims on it the bound is (earlier claims + 1) × p = "
            f"{_number(verdict.record_bound())}."
        )
    else:
        scaled = (
            "This is the first claim on this record, so the bound stays p. Every further "
            "claim on the same record adds p to it."
        )
    who = authentication_line(verdict)
    scaled += f" {who[0].upper()}{who[1:]}."
    answers = answers_line(verdict)
    oracle = (
        "It concerns the model that answered at the oracle endpoint, as it described itself "
        "(below). If the practitioner runs that endpoint, it could have answered with "
        "another model: the verdict binds only what the arbiter could bind. "
        f"{answers[0].upper()}{answers[1:]}."
    )
    chosen = (
        "The owner chose the score, its perturbations and the test when filing the claim; "
        "trying several and keeping the best would multiply the false-detection bound by "
        "the number of tries. The choices are recorded below."
    )
    if verdict.detected:
        does = [
            scaled,
            "If the model had never been trained on the owner's published versions, the "
            f"chance that this claim alone would say DETECTED is at most p = {_number(p)}.",
        ]
        does_not = [
            "Which or how many of the owner's items were used, nor when, by whom or why.",
            oracle,
            chosen,
        ]
    else:
        does = [
            f"That this test, with these settings, did not reach its threshold within the "
            f"{len(verdict.opened)} pairs opened.",
        ]
        does_not = [
            "NOT DETECTED is not proof that the data was not used: a model that generalises "
            "well, a score that does not match how the model was trained, or too few pairs "
            "can all leave use undetected.",
            oracle,
            "After unlearning, NOT DETECTED is not proof that the owner's data was removed: "
            "it says only that this test did not reach its threshold on the pairs it opened. "
            "A model that still holds the data, or an oracle that answers with another model, "
            "can leave it undetected.",
            _earlier_words(verdict),
        ]
    return (
        "<h2>What this verdict establishes</h2>"
        + _bullets(_e(s) for s in does)
        + "<h2>What it does not establish</h2>"
        + _bullets(_e(s) for s in does_not)
    )


def _earlier_words(verdict: Verdict) -> str:
    """Say how the earlier claims on the record weigh on this verdict (spec §10.2, §11)."""
    earlier = verdict.earlier_claims
    excluded = len(verdict.claim.excluded)
    words = (
        f"Earlier claims on this record: {earlier}; across all {earlier + 1} claims on it, "
        f"the chance of a false detection is at most (earlier claims + 1) × p = "
        f"{_number(verdict.record_bound())}."
    )
    if excluded:
        words += (
            f" This claim opened none of the {excluded} pairs that earlier claims opened: "
            "its pairs had never been shown to anyone."
        )
    elif earlier:
        words += " This claim did not exclude the pairs earlier claims opened."
    return words


def _score_words(score: AnyScoreSpec) -> str:
    known = SCORE_FUNCTIONS.get(score.function)
    parts = [_e(known.explanation if known is not None else score.function)]
    if isinstance(score, ScoreSpec | EncoderSpec):
        copies = "copy" if score.k == 1 else "copies"
        parts.append(f"K = {_e(score.k)} {copies} per version")
        parts.append(f"perturbation family {_e(score.perturbation)}")
    if isinstance(score, ScoreSpec):
        parts.append(_e(_KNOWLEDGE_WORDS.get(score.knowledge, score.knowledge)))
    recorded = _plain(canonical(score.to_value()))  # its keys in the verdict's order
    return "; ".join(parts) + f'<br><span class="muted">as recorded: {recorded}</span>'


def _audit(verdict: Verdict, checked: Checked) -> str:
    claim, final = verdict.claim, verdict.final
    c = _counts(verdict)
    if final.interval is not None:
        low, high = final.interval
        figure = f"final PPRM interval [{_e(low)}, {_e(high)}] of {_e(claim.n_pairs)} pairs"
        figure += f"; threshold T = {_e(claim.test_params.get('threshold'))}"
    elif final.log_statistic is not None:
        log_e = final.log_statistic
        figure = (
            f"final log e-value {_e(_number(log_e))} (e-value {_e(_number(math.exp(log_e)))}); "
            f"detection needs log(1/p) = {_e(_number(-math.log(verdict.p)))}"
        )
    else:
        figure = "no pair was fed to the test"
    limits = (f"at most {_e(claim.max_pairs)} pairs" if claim.max_pairs else "no pair limit") + (
        f"; query budget {_e(claim.query_budget)}" if claim.query_budget else "; no budget"
    )
    rows = [
        ("Claim", f'<span class="mono">{_e(verdict.claim_id)}</span>'),
        ("Verdict signed", f"{_e(verdict.time)} (spec {_e(verdict.spec)})"),
        ("Arbiter key", f'<span class="mono">{_e(verdict.arbiter)}</span>'),
        (
            "Escrow record",
            f"record {_e(claim.record_index)} of the arbiter's escrow log: "
            f"{_e(claim.n_pairs)} pairs committed by the owner before publication, "
            f"escrowed {_e(verdict.receipt_time)}; Merkle root "
            f'<span class="mono">{_e(claim.record_root)}</span>',
        ),
        (
            "Model",
            f'“{_e(claim.model_name)}” at endpoint <span class="mono">{_e(claim.endpoint)}</span>',
        ),
        ("Model as the oracle described it", _plain(claim.oracle)),
        ("Answers", _e(answers_line(verdict))),
        ("Score", _score_words(claim.score)),
        (
            "Test",
            f"{_e(_TEST_WORDS.get(claim.test_name, claim.test_name))}"
            f'<br><span class="muted">{_e(claim.test_name)}: {_plain(claim.test_params)}</span>',
        ),
        ("Ties", _e(_TIE_WORDS.get(claim.tie_rule.value, claim.tie_rule.value))),
        ("Limits", limits),
        (
            "Result",
            f"{c.opened} pairs opened, {c.draws} fed to the test: published version "
            f'higher in <span class="won">{c.successes}</span>, hidden version higher in '
            f'<span class="lost">{c.failures}</span> (ties decided by coin: '
            f"{c.coin_ties}; ties skipped: {c.skipped}; opened after the decision: "
            f"{c.after}); {_e(verdict.queries)} model queries; {figure}",
        ),
        ("Stopped because", _e(_STOP_WORDS.get(verdict.stop, verdict.stop))),
        ("Earlier claims on the record", _e(verdict.earlier_claims)),
        (
            "Transcript",
            f'{_e(verdict.transcript.records)} records, hash <span class="mono">'
            f"{_e(verdict.transcript.hash)}</span>",
        ),
        ("Arbiter's environment", _plain(dict(verdict.environment))),
        (
            "Verdict file",
            f'{_e(checked.file_name)}, SHA-256 <span class="mono">{_e(checked.file_sha256)}</span>',
        ),
    ]
    return "<h2>The audit</h2>" + _facts(rows)


def _figure(path: Trajectory, title: str, caption: str) -> str:
    return f"<figure>{svg_plot(path, title)}<figcaption>{_e(caption)}</figcaption></figure>"


def fed_grades(verdict: Verdict, pairs: Sequence[OpenedPair]) -> list[int]:
    """Return the grade of each bit fed to a graded test (spec §7.5.1), from the transcript.

    ``pairs`` must come from :func:`pairs_from_transcript`: a decided pair's grade is its
    gap's over the score's margin, a coin tie's is 1; skipped ties feed nothing.
    """
    margin = verdict.claim.score.tie_margin
    grades = []
    for pair in pairs:
        if pair.outcome in ("h", "t"):
            grades.append(1)
        elif pair.outcome in ("1", "0") and pair.scores is not None and pair.published in (0, 1):
            b = int(pair.published)
            grades.append(grade_of(pair.scores[b] - pair.scores[1 - b], margin))
    return grades


def _plots(verdict: Verdict, pairs: Sequence[OpenedPair] | None) -> str:
    out = ["<h2>The test, pair by pair</h2>"]
    try:
        graded = verdict.claim.test_name == "mixture-graded"
        path = trajectory(verdict, fed_grades(verdict, pairs) if graded and pairs else None)
    except GradesNeededError:
        final = verdict.final.log_statistic
        threshold = -math.log(verdict.p)
        return out[0] + (
            "<p>The graded test sizes each pair's bet by how far apart its two scores are "
            "(spec §7.5); the scores are in the transcript, not in the verdict, so its path "
            "is drawn by <code>twinaudit verify … --transcript … --html</code>. Its final log "
            f"e-value is {_e(_number(final) if isinstance(final, float) else final)}, "
            f"against log(1/p) = {_e(_number(threshold))}.</p>"
        )
    except ValueError as exc:
        return (
            out[0] + '<div class="warn">The verdict\'s signed indicators do not lead to its '
            f"signed final figures ({_e(exc)}). Do not rely on this verdict before "
            "<code>twinaudit verify</code> with its transcript succeeds.</div>"
        )
    fed = "Horizontal axis: pairs opened, in the order the arbiter opened them."
    c = _counts(verdict)
    if c.after:
        decided = c.opened - c.after
        fed += (
            f" The axis ends at pair {decided}, where the test decided; the other "
            f"{c.after} of the {c.opened} pairs opened came in the same request, "
            "after the decision, and were not fed to the test."
        )
    if path.test == "mixture-graded":
        out.append(
            _figure(
                path,
                "Evidence: log e-value against log(1/p)",
                "The test statistic: the log of the graded mixture e-value, whose bets grow "
                "with the gap between a pair's two scores. Under no data use it exceeds "
                f"log(1/p) with probability at most p, ever; the test detects the first "
                f"time it does. {fed}",
            )
        )
    elif path.mixture is not None:
        out.append(
            _figure(
                bound_trajectory(path),
                "Confidence sequence: lower bound on the published version's win rate q",
                "The lower end of the confidence sequence for q, the rate at which the model "
                "prefers the published version (display only, on a 1/1024 grid). A model that "
                "never saw the data has q = ½; the bound reaches ½ exactly when the test "
                f"detects. {fed}",
            )
        )
        out.append(
            _figure(
                path,
                "Evidence: log e-value against log(1/p)",
                "The test statistic: the log of the mixture e-value. Under no data use it "
                "exceeds log(1/p) with probability at most p, ever; the test detects the "
                f"first time it does. {fed}",
            )
        )
    else:
        out.append(
            _figure(
                path,
                "PPRM confidence sequence for the pairs the published version wins",
                "The shaded band is the confidence sequence for how many of the record's "
                "pairs the published version wins; the line is its lower end. The test "
                f"detects when the lower end reaches the threshold T. {fed}",
            )
        )
    return "".join(out)


def _score_cell(pair: OpenedPair, version: int) -> str:
    """Return one version's score cell: its labels in words for a label-only score."""
    assert pair.scores is not None
    number = _e(_number(pair.scores[version]))
    if pair.labels is None:
        return f'<td class="num">{number}</td>'
    words = _e(label_words(pair.labels.copies[version], pair.labels.committed))
    return f'<td>{words} <span class="muted">(score {number})</span></td>'


def _table(pairs: Sequence[OpenedPair], from_transcript: bool) -> str:
    head = ["#", "pair", "outcome"]
    labelled = next((pair.labels for pair in pairs if pair.labels is not None), None)
    if from_transcript:
        scored = ("published version's labels", "hidden version's labels")
        if labelled is None:
            scored = ("score published", "score hidden")
        head = ["#", "pair", "request", "published", *scored, "outcome"]
    rows = []
    for n, pair in enumerate(pairs[:MAX_TABLE_ROWS], start=1):
        words = _e(OUTCOME_WORDS.get(pair.outcome, pair.outcome))
        mark = ' class="won"' if pair.outcome in ("1", "h") else ""
        mark = ' class="lost"' if pair.outcome in ("0", "t") else mark
        cells = [f'<td class="num">{n}</td>', f'<td class="num">{pair.index}</td>']
        if from_transcript and pair.scores is not None and pair.published in (0, 1):
            b = int(pair.published)
            cells += [
                f'<td class="num">{pair.window}</td>',
                f"<td>version {b}</td>",
                _score_cell(pair, b),
                _score_cell(pair, 1 - b),
            ]
        cells.append(f"<td{mark}>{words}</td>")
        rows.append("<tr>" + "".join(cells) + "</tr>")
    source = (
        "from the transcript (publication bits and scores as the replay recomputed them)"
        if from_transcript
        else "as the verdict records them (replay with the transcript to see the scores)"
    )
    more = ""
    if len(pairs) > MAX_TABLE_ROWS:
        more = f"<p>… and {len(pairs) - MAX_TABLE_ROWS} more pairs, not listed.</p>"
    header = "".join(f"<th>{_e(h)}</th>" for h in head)
    note = ""
    if labelled is not None:
        note = f"<p>{_e(label_note(labelled.knowledge, len(labelled.copies[0])))}</p>"
    return (
        f"<h2>Opened pairs</h2><p>{len(pairs)} pairs, in the order they were opened, {source}."
        f"</p>{note}<table><thead><tr>{header}</tr></thead>"
        f"<tbody>{''.join(rows)}</tbody></table>" + more
    )


def render_report(
    verdict: Verdict,
    checked: Checked,
    pairs: Sequence[OpenedPair] | None = None,
    *,
    generator: str = "twinaudit",
) -> str:
    """Return the HTML page of a checked ``verdict``.

    ``checked`` says how it was checked (make one only after
    :func:`twinaudit.protocol.claim.verdict.check_verdict` succeeded, and set
    ``replayed`` only after :func:`twinaudit.verifier.replay.replay` did); ``pairs`` is
    the transcript's table (:func:`pairs_from_transcript`), or None for the verdict's
    own (:func:`pairs_from_verdict`). Raises :class:`~twinaudit.protocol.errors.InputError` when
    ``checked`` names another key than the verdict's arbiter.
    """
    if checked.key_id != verdict.arbiter:
        raise InputError("the report's check names another key than the verdict's arbiter")
    decision = "DETECTED" if verdict.detected else "NOT DETECTED"
    title = f"Verdict {verdict.claim_id}: {decision}"
    body = [
        f"<h1>Data-use audit verdict: {_e(decision)}</h1>",
        f'<p class="sub">Claim <span class="mono">{_e(verdict.claim_id)}</span> against '
        f"the model “{_e(verdict.claim.model_name)}”, signed {_e(verdict.time)}"
        "</p>",
        _headline(verdict),
        _identical_warning(verdict, pairs),
        _checks(checked),
        _meaning(verdict),
        _audit(verdict, checked),
        _plots(verdict, pairs),
        _table(
            pairs if pairs is not None else pairs_from_verdict(verdict),
            pairs is not None,
        ),
        "<footer><p>This page is a rendering of the signed verdict file named above; the "
        "file, not this page, is what the arbiter signed. Anyone holding the arbiter's "
        "public key can check it offline and replay its decision: <code>twinaudit verify "
        "verdict.json --transcript transcript.bin --pubkey arbiter.key.pub</code>.</p>"
        f"<p>Made by {_e(generator)}.</p></footer>",
    ]
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{_CSP}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{_e(title)}</title><style>{_CSS}</style></head>\n<body><main>\n"
        + "\n".join(body)
        + "\n</main></body></html>\n"
    )


def write_report(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` atomically (:mod:`twinaudit.protocol.atomic_file`).

    The page is readable by everyone (0644): it is meant to be shared. On any failure
    the temporary file is removed and ``path`` is left as it was.
    """
    write_atomically(path, text.encode("utf-8"))
