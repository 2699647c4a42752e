"""The HTML verdict report (``verifier check/replay --html``): content, escaping, refusals.

The report is made from real signed verdicts and transcripts: the whole claims of
spec/vectors/verdicts.json (a memorising model detected by the mixture test, and a
paper's-test claim, signed with the test key of appendix B) and an in-process claim
(tests/support/claims.py). It is rendered in headless Chromium (Debian package
``chromium``; the test skips without it) and the screenshot is checked to be a PNG of
the window's size with the page's colours on it. A verdict that fails to check or to
replay gets no report, and nothing half-written is left.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from tests.support.chromium import needs_chromium, png_size, screenshot
from tests.support.keys import KEY
from twinaudit.cli import report_html
from twinaudit.cli.main import main
from twinaudit.cli.report_html import Checked, render_report, write_report
from twinaudit.protocol.claim.scores.classifier import ScoreSpec
from twinaudit.protocol.claim.verdict import Verdict, check_verdict
from twinaudit.protocol.encoding import decode, encode
from twinaudit.protocol.envelope import Envelope, payload_type, sign_envelope
from twinaudit.protocol.errors import InputError
from twinaudit.protocol.keys import key_id, public_key_from_raw, public_key_pem

ROOT = Path(__file__).resolve().parents[2]
VECTORS = json.loads((ROOT / "spec" / "vectors" / "verdicts.json").read_text(encoding="utf-8"))
VECTOR_KEY = public_key_from_raw(bytes.fromhex(VECTORS["description"].split("public key ")[1][:64]))
#: Window of the screenshots: a page width a reader uses, tall enough for the plots.
WINDOW = (1100, 2600)


def _vector_claim(test: str, decision: str) -> tuple[bytes, bytes]:
    """Return the envelope and transcript of the first valid vector claim of that kind."""
    for case in VECTORS["cases"]:
        if case["valid"] and case["kind"] == "claim":
            envelope = case["input"]["envelope"].encode()
            verdict = check_verdict(envelope, VECTOR_KEY)
            if verdict.claim.test_name == test and verdict.decision == decision:
                return envelope, bytes.fromhex(case["input"]["transcript"])
    raise LookupError(f"no {test} {decision} claim in the vectors")


def _files(folder: Path, envelope: bytes, transcript: bytes, pub: bytes) -> dict[str, Path]:
    folder.mkdir(parents=True, exist_ok=True)
    files = {
        "verdict": folder / "verdict.json",
        "transcript": folder / "transcript.bin",
        "pub": folder / "arbiter.key.pub",
    }
    files["verdict"].write_bytes(envelope)
    files["transcript"].write_bytes(transcript)
    files["pub"].write_bytes(pub)
    return files


@pytest.fixture(scope="module")
def detected(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A memorising model's claim, DETECTED by the mixture test (spec vectors)."""
    envelope, transcript = _vector_claim("mixture-e", "detected")
    folder = tmp_path_factory.mktemp("detected")
    return _files(folder, envelope, transcript, public_key_pem(VECTOR_KEY))


@pytest.fixture(scope="module")
def paper(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A claim under the paper's PPRM test (spec vectors)."""
    envelope, transcript = _vector_claim("pprm-chernoff", "not-detected")
    folder = tmp_path_factory.mktemp("paper")
    return _files(folder, envelope, transcript, public_key_pem(VECTOR_KEY))


@pytest.fixture(scope="module")
def in_process(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A 40-pair claim run in-process against a model that never saw the data.

    Salts, rho and claim nonce are fixed, so that the claim is the same every run and
    ends NOT-DETECTED (with fresh ones it could detect with probability up to p).
    """
    from tests.support.claims import make_pairset, run_session, signed_verdict

    key = KEY
    pairs = make_pairset(salt_seed=b"report, in process")
    session = run_session(pairs, rho=bytes(32), claim_nonce=bytes(range(32)))
    assert session.stop != "detected"
    folder = tmp_path_factory.mktemp("in-process")
    return _files(
        folder,
        signed_verdict(session, key),
        session.transcript.to_bytes(),
        public_key_pem(key.public_key()),
    )


@pytest.fixture(scope="module")
def graded(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A memorising model's claim, DETECTED by the graded mixture test (spec vectors)."""
    envelope, transcript = _vector_claim("mixture-graded", "detected")
    folder = tmp_path_factory.mktemp("graded")
    return _files(folder, envelope, transcript, public_key_pem(VECTOR_KEY))


def _check(files: dict[str, Path], *extra: str) -> int:
    return main(["verifier", "check", str(files["verdict"]), "--pubkey", str(files["pub"]), *extra])


def _replay(files: dict[str, Path], *extra: str) -> int:
    return main(
        [
            "verifier",
            "replay",
            str(files["verdict"]),
            "--transcript",
            str(files["transcript"]),
            "--pubkey",
            str(files["pub"]),
            *extra,
        ]
    )


def _text(page: str) -> str:
    """Return the page's visible text, tags dropped, entities left as they are."""
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", page))


def _self_contained(page: str) -> None:
    assert "<script" not in page.lower()
    assert not re.search(r"\s(src|href|xlink:href)\s*=", page, re.IGNORECASE)
    assert "url(" not in page and "@import" not in page
    assert set(re.findall(r"https?://[^\s\"'<>]+", page)) <= {"http://www.w3.org/2000/svg"}


# --- content -------------------------------------------------------------------------------


def test_replay_report_of_a_detection_says_what_it_establishes(detected, tmp_path, capsys):
    report = tmp_path / "verdict.html"
    assert _replay(detected, "--html", str(report)) == 0
    assert f"wrote the HTML report {report}" in capsys.readouterr().out
    page = report.read_text(encoding="utf-8")
    _self_contained(page)
    text = _text(page)
    verdict = check_verdict(detected["verdict"].read_bytes(), VECTOR_KEY)
    assert "Data-use audit verdict: DETECTED" in text
    assert "at most p = 0.05" in text
    assert "first claim on this record" in text  # earlier_claims 0: the bound stays p
    assert "It was replayed from its transcript" in text
    assert "could have answered with another model" in text
    assert verdict.claim.model_name in text
    assert f"record {verdict.claim.record_index} of the arbiter" in text
    assert verdict.claim.record_root.hex() in text
    # Both plots of the mixture test, as inline SVG.
    assert page.count("<svg") == 2
    assert "Confidence sequence" in text and "log e-value" in text
    assert "detected at pair" in text
    # The transcript's table: one row per opened pair, with the published version's score.
    rows = re.findall(r"<tbody>(.*)</tbody>", page, re.S)[0].count("<tr>")
    assert rows == len(verdict.opened)
    assert "score published" in text
    assert "version 0" in text or "version 1" in text


def test_check_report_shows_what_the_verdict_holds(paper, tmp_path, capsys):
    report = tmp_path / "paper.html"
    assert _check(paper, "--html", str(report), "--json") == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["valid"] is True and printed["html"] == str(report)
    page = report.read_text(encoding="utf-8")
    _self_contained(page)
    text = _text(page)
    verdict = check_verdict(paper["verdict"].read_bytes(), VECTOR_KEY)
    assert "NOT DETECTED" in text
    assert "not proof that the data was not used" in text
    assert "It was not replayed" in text
    assert "PPRM confidence sequence" in text and page.count("<svg") == 1
    assert "<polygon" in page  # the confidence sequence's band
    assert f"threshold T = {verdict.claim.test_params['threshold']}" in text
    assert "score published" not in text  # no transcript: the verdict's own table
    assert "tie; the tie coin counted it" in text  # coin ties, in words


def test_a_graded_verdict_is_plotted_from_its_transcript_only(graded, tmp_path):
    """The graded test's path needs each pair's gap (spec §7.5): replay draws it, check says so."""
    replayed, checked = tmp_path / "replayed.html", tmp_path / "checked.html"
    assert _replay(graded, "--html", str(replayed)) == 0
    text = _text(replayed.read_text(encoding="utf-8"))
    assert "graded mixture e-value" in text and "detected at pair" in text
    assert replayed.read_text(encoding="utf-8").count("<svg") == 1
    assert _check(graded, "--html", str(checked)) == 0
    page = checked.read_text(encoding="utf-8")
    assert "<svg" not in page and 'class="warn"' not in page
    assert "the scores are in the transcript, not in the verdict" in _text(page)


def test_earlier_claims_scale_the_bound():
    envelope, _ = _vector_claim("mixture-e", "detected")
    key = KEY
    payload: Any = decode(Envelope.from_json(envelope).payload)
    payload.update(arbiter=key_id(key.public_key()), earlier_claims=3)
    signed = sign_envelope(encode(payload), payload_type("verdict"), key).to_json()
    verdict = check_verdict(signed, key.public_key())
    page = render_report(verdict, Checked(verdict.arbiter, False, "v.json", "00"))
    assert "3 earlier claims" in page and "(earlier claims + 1) × p = 0.2" in page


def test_a_claim_whose_pairs_all_tied_says_so():
    """As the quick demo's tiny models do: every opened pair tied and was skipped."""
    envelope, _ = _vector_claim("mixture-e", "detected")
    key = KEY
    payload: Any = decode(Envelope.from_json(envelope).payload)
    payload.update(
        arbiter=key_id(key.public_key()),
        indicators="s" * len(payload["opened"]),
        final={"draws": 0, "successes": 0, "interval": None, "log_statistic": None},
        decision="not-detected",
        stop="exhausted",
    )
    signed = sign_envelope(encode(payload), payload_type("verdict"), key).to_json()
    verdict = check_verdict(signed, key.public_key())
    text = _text(render_report(verdict, Checked(verdict.arbiter, False, "v.json", "00")))
    assert f"the {len(payload['opened'])} pairs opened all tied" in text
    assert "no pair was fed to the test" in text and "NOT DETECTED" in text


def test_a_host_that_answers_both_versions_alike_is_remarked(tmp_path, capsys):
    """PairDetect around the model: every pair scored alike, and replay says so.

    The same claim against the model itself (a model of random weights, answering
    probabilities) scores no pair alike and gets no remark.
    """
    from tests.support.claims import make_pairset, run_session, signed_verdict
    from tests.support.fake_oracle import LinearOracle
    from twinaudit.practitioner.defences import wrap
    from twinaudit.protocol.claim.scores.classifier import ScoreSpec

    key = KEY
    pairs = make_pairset(n=24, epsilon=16)
    score = ScoreSpec(k=1, perturbation="dither", knowledge="C1")
    hosts = {"honest": LinearOracle(), "pairdetect": wrap(LinearOracle(), ["pairdetect:16"])}
    remark = "got exactly the same score for both versions"
    for name, oracle in hosts.items():
        session = run_session(pairs, oracle, score=score)
        files = _files(
            tmp_path / name,
            signed_verdict(session, key),
            session.transcript.to_bytes(),
            public_key_pem(key.public_key()),
        )
        page = tmp_path / name / "verdict.html"
        assert _replay(files, "--html", str(page)) == 0
        printed = capsys.readouterr().out
        assert (remark in printed) == (name == "pairdetect"), printed
        assert (remark in _text(page.read_text())) == (name == "pairdetect")
        assert _replay(files, "--json") == 0
        figures = json.loads(capsys.readouterr().out)
        # Every pair the claim opened was scored (the honest claim may stop early: the
        # arbiter's randomness is fresh in each run); PairDetect's are all alike.
        scored = figures["pairs_scored"]
        assert scored == figures["pairs_replayed"] and scored >= 1
        assert figures["pairs_scored_alike"] == (scored if name == "pairdetect" else 0)
        assert (figures["scored_alike_note"] is not None) == (name == "pairdetect")


def test_label_only_scores_tie_without_a_remark():
    """C3 compares labels: equal labels are the rule, so identical scores say nothing."""
    checked = check_verdict(_vector_claim("mixture-e", "detected")[0], VECTOR_KEY)

    def scored(knowledge: str) -> Verdict:
        score = ScoreSpec(k=1, perturbation="none", knowledge=knowledge)
        return replace(checked, claim=replace(checked.claim, score=score))

    verdict = scored("C3")
    alike = [report_html.OpenedPair(i, "s", 0, 1, (1.0, 1.0)) for i in range(10)]
    assert report_html.identical_answers(alike) == (10, 10)
    assert report_html.identical_answers_note(verdict, alike) is None
    verdict = scored("C1")
    assert report_html.identical_answers_note(verdict, alike) is not None
    # Under a tenth of the pairs alike: no remark.
    mixed = alike[:1] + [report_html.OpenedPair(i, "1", 0, 1, (0.2, 0.9)) for i in range(10)]
    assert report_html.identical_answers_note(verdict, mixed) is None


# --- escaping and refusals -----------------------------------------------------------------

EVIL = '<script>alert("x")</script>&amp;'


def _evil_verdict(tmp_path: Path) -> dict[str, Path]:
    """A verdict whose every free text field holds markup, signed again (by KEY)."""
    envelope, transcript = _vector_claim("mixture-e", "detected")
    key = KEY
    payload: Any = decode(Envelope.from_json(envelope).payload)
    payload["arbiter"] = key_id(key.public_key())
    payload["claim_id"] = "<b>claim</b>"
    payload["claim"]["model"]["name"] = EVIL
    payload["claim"]["model"]["endpoint"] = "x\"><img onerror='1'>"
    payload["environment"] = {"<th>": "</td></table><iframe>"}
    signed = sign_envelope(encode(payload), payload_type("verdict"), key).to_json()
    return _files(tmp_path, signed, transcript, public_key_pem(key.public_key()))


def test_every_text_from_the_verdict_is_escaped(tmp_path):
    files = _evil_verdict(tmp_path)
    report = tmp_path / "evil.html"
    assert _check(files, "--html", str(report)) == 0
    page = report.read_text(encoding="utf-8")
    _self_contained(page)
    for raw in ("<script>", "<b>claim</b>", "<img", "<iframe>", "<th>&lt;", "onerror='"):
        assert raw not in page
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;&amp;amp;" in page
    assert "&lt;b&gt;claim&lt;/b&gt;" in page and "&lt;iframe&gt;" in page
    assert "x&quot;&gt;&lt;img onerror=&#x27;1&#x27;&gt;" in page


def test_the_escape_helper_escapes_quotes_and_writes_bytes_as_hex():
    assert report_html._e("<a href='x'>&\"") == "&lt;a href=&#x27;x&#x27;&gt;&amp;&quot;"
    assert report_html._e(b"\x00\xff") == "00ff"
    assert report_html._plain({"<k>": [b"\x01", "<v>"]}) == (
        '&lt;k&gt;: [<span class="mono">01</span>, &lt;v&gt;]'
    )


def test_a_render_refuses_a_check_by_another_key(detected):
    verdict = check_verdict(detected["verdict"].read_bytes(), VECTOR_KEY)
    with pytest.raises(InputError, match="another key"):
        render_report(verdict, Checked("someone-else", True, "verdict.json", "00"))


def _no_leftovers(folder: Path) -> None:
    assert not [p.name for p in folder.iterdir() if p.name.startswith(".")]


def test_an_invalid_verdict_gets_no_report(detected, tmp_path, capsys):
    tampered = dict(detected)
    tampered["verdict"] = tmp_path / "tampered.json"
    data = bytearray(detected["verdict"].read_bytes())
    data[len(data) // 2] ^= 0x02
    tampered["verdict"].write_bytes(bytes(data))
    report = tmp_path / "report.html"
    assert _check(tampered, "--html", str(report)) == 1
    err = capsys.readouterr().err
    assert err.startswith("twinaudit: error: [") and "] INVALID: " in err and err.count("\n") == 1
    assert not report.exists()
    # An earlier report at that path is left as it was, not half-overwritten.
    report.write_text("earlier")
    assert _check(tampered, "--html", str(report)) == 1
    assert report.read_text() == "earlier"
    _no_leftovers(tmp_path)


def test_a_transcript_that_does_not_replay_gets_no_report(detected, tmp_path, capsys):
    broken = dict(detected)
    broken["transcript"] = tmp_path / "broken.bin"
    data = bytearray(detected["transcript"].read_bytes())
    data[-2] ^= 0x10
    broken["transcript"].write_bytes(bytes(data))
    report = tmp_path / "report.html"
    assert _replay(broken, "--html", str(report)) == 1
    err = capsys.readouterr().err
    assert err.startswith("twinaudit: error: [") and "] REPLAY FAILED: " in err
    assert not report.exists()
    _no_leftovers(tmp_path)


def test_replay_writes_a_report_only_with_the_signature_checked(detected, tmp_path, capsys):
    report = tmp_path / "report.html"
    args = ["verifier", "replay", str(detected["verdict"]), "--transcript"]
    assert main([*args, str(detected["transcript"]), "--html", str(report)]) == 2
    assert "--html needs --pubkey" in capsys.readouterr().err
    assert not report.exists()


def test_a_report_path_that_cannot_be_written_is_refused_before_checking(detected, tmp_path):
    assert _check(detected, "--html", str(tmp_path / "missing" / "r.html")) == 2
    assert not (tmp_path / "missing").exists()
    assert _check(detected, "--html", str(tmp_path)) == 2  # a folder
    before = detected["verdict"].read_bytes()
    assert _check(detected, "--html", str(detected["verdict"])) == 2  # its own input
    assert detected["verdict"].read_bytes() == before


def test_write_report_leaves_nothing_half_written(tmp_path, monkeypatch):
    target = tmp_path / "r.html"
    target.write_text("earlier")

    def fail(_: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", fail)
    with pytest.raises(OSError, match="No space"):
        write_report(target, "<p>new</p>")
    assert target.read_text() == "earlier"
    assert [p.name for p in tmp_path.iterdir()] == ["r.html"]
    monkeypatch.undo()
    write_report(target, "<p>new</p>")
    assert target.read_text() == "<p>new</p>" and target.stat().st_mode & 0o777 == 0o644


# --- rendered in headless Chromium ---------------------------------------------------------


def _colour_share(png: Path, colour: tuple[int, int, int], box: tuple[int, ...]) -> float:
    """Return the share of pixels within 24 of ``colour`` (each channel) inside ``box``."""
    import numpy as np
    from PIL import Image

    with Image.open(png) as image:
        pixels = np.asarray(image.convert("RGB").crop(box), dtype=np.int16)
    close = (np.abs(pixels - np.array(colour, dtype=np.int16)) <= 24).all(axis=2)
    return float(close.mean())


@needs_chromium
@pytest.mark.slow
@pytest.mark.parametrize(
    ("fixture", "command", "banner"),
    [
        ("detected", "replay", (0xFD, 0xF1, 0xE6)),  # the detection's banner
        ("paper", "check", (0xEE, 0xF3, 0xF8)),  # not detected: the other banner
        ("in_process", "replay", (0xEE, 0xF3, 0xF8)),
    ],
)
def test_the_report_renders_in_headless_chromium(fixture, command, banner, tmp_path, request):
    files = request.getfixturevalue(fixture)
    report = tmp_path / f"{fixture}.html"
    assert (_replay if command == "replay" else _check)(files, "--html", str(report)) == 0
    png = tmp_path / f"{fixture}.png"
    data = screenshot(report, png, WINDOW)
    assert png_size(data) == WINDOW
    pytest.importorskip("PIL")
    from PIL import Image

    with Image.open(png) as image:
        colours = image.convert("RGB").getcolors(maxcolors=1 << 20)
    assert colours is not None and len(colours) > 50  # text, plots, tables: not blank
    assert max(count for count, _ in colours) < 0.9 * WINDOW[0] * WINDOW[1]
    # The decision banner near the top, in its colour, and the plot's line further down.
    assert _colour_share(png, banner, (0, 0, WINDOW[0], 400)) > 0.02
    assert _colour_share(png, (0x1F, 0x5F, 0xA8), (0, 1000, *WINDOW)) > 0.0002
