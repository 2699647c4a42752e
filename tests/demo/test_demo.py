"""The Fashion-MNIST demo's machinery: data discovery, splits, report math, plots, a quick run.

The quick run (``python -m demo --quick``) drives every stage through the CLI with
tiny sizes; its decisions are not checked (the models are far too small), but both
verdicts must verify and replay, and the report's trajectories must end exactly in
the verdicts' final states.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import xml.etree.ElementTree as ET
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from demo import data as demo_data
from demo.report import ClaimOutcome
from demo.run import QUICK, problems_of, run_demo, with_overrides
from tests.support.chromium import CHROMIUM, png_size, screenshot
from twinaudit.cli.verdict_plots import mixture_lower_bounds, svg_plot, trajectory
from twinaudit.protocol.claim.verdict import FinalState, Verdict, check_verdict
from twinaudit.protocol.keys import public_key_from_raw
from twinaudit.protocol.stats.mixture import log_e_value
from twinaudit.protocol.stats.paper_test import PaperTest
from twinaudit.protocol.stats.registry import make_test
from twinaudit.verifier.replay import replay

ROOT = Path(__file__).resolve().parents[2]
DEBIAN = Path("/usr/share/datasets/fashion-mnist")


def _fake_folder(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name in demo_data.FILES:
        (folder / name).write_bytes(b"")
    return folder


def _no_fetch(url: str, target: Path) -> None:
    raise OSError("network unreachable (test)")


def test_locate_prefers_the_explicit_path_then_the_environment(tmp_path):
    explicit, env = _fake_folder(tmp_path / "a"), _fake_folder(tmp_path / "b")
    debian = _fake_folder(tmp_path / "debian")
    environ = {demo_data.ENV_VAR: str(env)}
    kwargs = {"debian_dir": debian, "cache": tmp_path / "cache", "fetch": _no_fetch}
    assert demo_data.locate(explicit, environ=environ, **kwargs) == explicit
    assert demo_data.locate(None, environ=environ, **kwargs) == env
    assert demo_data.locate(None, environ={}, **kwargs) == debian


def test_an_explicit_path_without_the_files_is_an_error_not_a_fallback(tmp_path):
    debian = _fake_folder(tmp_path / "debian")
    (tmp_path / "typo").mkdir()
    with pytest.raises(demo_data.DataNotFoundError) as error:
        demo_data.locate(tmp_path / "typo", environ={}, debian_dir=debian, fetch=_no_fetch)
    message = str(error.value)
    assert "explicit path" in message and "train-images-idx3-ubyte.gz" in message
    assert "dataset-fashion-mnist" in message and "--data" in message


def test_the_error_names_all_three_sources_when_nothing_works(tmp_path):
    lines: list[str] = []
    with pytest.raises(demo_data.DataNotFoundError) as error:
        demo_data.locate(
            None,
            environ={},
            debian_dir=tmp_path / "no-debian",
            cache=tmp_path / "cache",
            fetch=_no_fetch,
            log=lines.append,
        )
    message = str(error.value)
    assert "explicit path: none given" in message
    assert "Debian package dataset-fashion-mnist" in message and "no-debian" in message
    assert "download into" in message and "network unreachable" in message
    assert lines and "downloading" in lines[0]


def test_download_checks_the_official_md5_and_keeps_good_files(tmp_path, monkeypatch):
    contents = {name: name.encode() * 3 for name in demo_data.FILES}
    sums = {name: hashlib.md5(data).hexdigest() for name, data in contents.items()}
    monkeypatch.setattr(demo_data, "FILES", sums)
    calls: list[str] = []

    def fetch(url: str, target: Path) -> None:
        calls.append(url)
        name = url.rsplit("/", 1)[1]
        # The first mirror serves corrupt bytes; the second the right ones.
        bad = url.startswith(demo_data.MIRRORS[0])
        target.write_bytes(b"corrupt" if bad else contents[name])

    folder = demo_data.locate(
        None, environ={}, debian_dir=tmp_path / "none", cache=tmp_path / "c", fetch=fetch
    )
    assert folder == tmp_path / "c"
    assert all((folder / name).read_bytes() == data for name, data in contents.items())
    assert len(calls) == 8 and not list(folder.glob("*.part"))
    calls.clear()
    demo_data.download(folder, fetch)  # all present with the right sums: nothing fetched
    assert calls == []


def _idx(array: np.ndarray) -> bytes:
    header = bytes([0, 0, 8, array.ndim]) + b"".join(d.to_bytes(4, "big") for d in array.shape)
    return header + array.astype(np.uint8).tobytes()


def test_read_idx_plain_and_gzipped(tmp_path):
    array = np.arange(2 * 3 * 4, dtype=np.uint8).reshape(2, 3, 4)
    (tmp_path / "x-idx3-ubyte").write_bytes(_idx(array))
    (tmp_path / "x-idx3-ubyte.gz").write_bytes(gzip.compress(_idx(array)))
    for name in ("x-idx3-ubyte", "x-idx3-ubyte.gz"):
        np.testing.assert_array_equal(demo_data.read_idx(tmp_path / name), array)
    (tmp_path / "bad").write_bytes(_idx(array)[:-1])
    with pytest.raises(ValueError, match="data bytes"):
        demo_data.read_idx(tmp_path / "bad")


def test_split_is_disjoint_and_sized(tmp_path):
    rng = np.random.default_rng(0)
    n = 500
    # Every image is unique (its index is written into its first pixels).
    images = rng.integers(0, 256, (n, 28, 28), dtype=np.uint8)
    images[:, 0, :2] = np.stack([np.arange(n) // 256, np.arange(n) % 256], axis=1)
    labels = rng.integers(0, 10, n, dtype=np.uint8)
    fake = demo_data.FashionMnist(images, labels, images[:20], labels[:20])
    split = demo_data.write_split(fake, tmp_path, n_train=300, seed=1, n_test=20)
    assert split.n_owner == 30
    owner = np.load(split.owner_images)
    shared, clean = np.load(split.shared_images), np.load(split.clean_images)
    assert (len(owner), len(shared), len(clean)) == (30, 270, 30)
    ids = [{int(a) * 256 + int(b) for a, b in part[:, 0, :2]} for part in (owner, shared, clean)]
    assert not (ids[0] & ids[1] or ids[0] & ids[2] or ids[1] & ids[2])
    owner_labels = json.loads(split.owner_labels.read_text())
    assert owner_labels == [int(labels[i]) for i in sorted(ids[0])]


def _a_checked_verdict() -> Verdict:
    """The first valid verdict of spec/vectors/verdicts.json, checked with its key."""
    doc = json.loads((ROOT / "spec" / "vectors" / "verdicts.json").read_text(encoding="utf-8"))
    key = public_key_from_raw(bytes.fromhex(doc["description"].split("public key ")[1][:64]))
    case = next(c for c in doc["cases"] if c["valid"])
    return check_verdict(case["input"]["envelope"].encode(), key)


def _verdict(test: str, indicators: str, n_pairs: int = 50, p: float = 0.05) -> Verdict:
    """A checked verdict changed to carry ``test`` and ``indicators``, its final state computed.

    The indicator string is cut where the test decides, as a real verdict's is.
    """
    reference = make_test(test, n_pairs, p)
    params = reference.parameters()
    for position, char in enumerate(indicators):
        if reference.decision.value != "continue":
            indicators = indicators[:position]
            break
        if char != "s":
            reference.update(char in "1h")
    bits = [c in "1h" for c in indicators if c != "s"]
    draws, successes = len(bits), sum(bits)
    if test == "mixture-e":
        final = FinalState(draws, successes, None, log_e_value(draws, successes))
    else:
        from twinaudit.protocol.stats.pprm import pprm_interval

        interval = pprm_interval(n_pairs, draws, successes, params["alpha"])
        final = FinalState(draws, successes, interval, None)
    decision = "detected" if reference.decision.value == "detected" else "not-detected"
    verdict = _a_checked_verdict()
    claim = replace(verdict.claim, n_pairs=n_pairs, test_name=test, test_params=params, excluded=())
    return replace(verdict, claim=claim, indicators=indicators, final=final, decision=decision)


def test_mixture_trajectory_ends_in_the_verdicts_final_state():
    indicators = "1101s11h1011t1111s1111111"
    path = trajectory(_verdict("mixture-e", indicators))
    assert path.threshold == pytest.approx(np.log(20))
    assert path.detected_at is not None and path.detected_at < len(indicators)
    assert path.detected_at == len(path.values)
    assert path.values[path.detected_at - 1] >= path.threshold
    assert all(v < path.threshold for v in path.values[: path.detected_at - 1])
    # A skipped tie leaves the statistic where it was.
    assert path.values[4] == path.values[3]


def test_pprm_trajectory_is_the_lower_bound_against_t():
    indicators = "10" * 20 + "s"
    path = trajectory(_verdict("pprm-chernoff", indicators))
    assert path.threshold == PaperTest(50).threshold
    assert path.detected_at is None and path.label == "PPRM lower bound"
    assert path.values[-1] == path.final["interval"][0]


def test_a_trajectory_that_disagrees_with_the_verdict_is_refused():
    verdict = _verdict("mixture-e", "1111011")
    final = replace(verdict.final, successes=verdict.final.successes - 1)
    with pytest.raises(ValueError, match="successes"):
        trajectory(replace(verdict, final=final))
    with pytest.raises(ValueError, match="decision"):
        trajectory(replace(verdict, decision="detected"))


def test_svg_plot_is_well_formed():
    path = trajectory(_verdict("mixture-e", "1" * 12))
    root = ET.fromstring(svg_plot(path, "a <title> & more"))
    assert root.tag.endswith("svg")
    texts = "".join(e.text or "" for e in root.iter() if e.tag.endswith("text"))
    assert "log(1/p)" in texts and "detected at pair" in texts and "a <title> & more" in texts


def test_problems_name_what_went_wrong():
    def outcome(name: str, verified: bool) -> ClaimOutcome:
        return ClaimOutcome(name, _a_checked_verdict(), verified, "", 100, "")

    ok = [outcome("used", True), outcome("clean", True)]
    good = {"used": "DETECTED", "clean": "NOT-DETECTED"}
    assert problems_of(good, ok, check_decisions=True) == []
    bad = problems_of({"used": "NOT-DETECTED", "clean": "DETECTED"}, ok, check_decisions=True)
    assert len(bad) == 2 and "used model" in bad[0] and "clean model" in bad[1]
    assert problems_of({}, ok, check_decisions=False) == []
    broken = [outcome("used", False), outcome("clean", True)]
    assert problems_of(good, broken, check_decisions=True) == [
        "twinaudit verify of the used verdict failed",
    ]


def test_missing_data_stops_the_demo_with_a_clear_error(tmp_path):
    out = io.StringIO()
    status = run_demo(tmp_path / "run", QUICK, data_path=tmp_path / "nowhere", out=out)
    assert status == 2
    assert "Fashion-MNIST not found" in out.getvalue()
    assert "dataset-fashion-mnist" in out.getvalue()


@pytest.mark.slow
@pytest.mark.skipif(not DEBIAN.is_dir(), reason="needs the Debian Fashion-MNIST package")
def test_quick_demo_runs_every_stage(tmp_path):
    out = io.StringIO()
    run_dir = tmp_path / "run"
    settings = with_overrides(QUICK, epochs=1, n_train=100)
    assert run_demo(run_dir, settings, out=out) == 0, out.getvalue()
    text = out.getvalue()
    for stage in (
        "data",
        "owner: mark",
        "practitioners: train (in parallel)",
        "anyone: twinaudit verify",
    ):
        assert f"== {stage}" in text
    assert "OK: all stages ran" in text
    report = (run_dir / "report.md").read_text()
    assert "![" in report and "plot-used.svg" in report and "plot-clean.svg" in report
    # The quick run does not check decisions, and its report says so instead of "met".
    assert "decisions are NOT checked at this size" in report
    assert "all expectations met" not in report
    for name in ("used", "clean"):
        ET.parse(run_dir / f"plot-{name}.svg")
        folder = run_dir / "claims" / name
        # The verdict's report for people, written by `twinaudit verify --html`, and
        # rendered as a reader's browser would (where Chromium is installed).
        assert "Data-use audit verdict" in (folder / "verdict.html").read_text()
        if CHROMIUM is not None:
            shot = screenshot(folder / "verdict.html", tmp_path / f"{name}.png", (1100, 1600))
            assert png_size(shot) == (1100, 1600) and len(shot) > 20_000  # not a blank page
        verdict = json.loads((folder / "verdict.json").read_text())
        assert verdict  # an envelope
        from twinaudit.protocol.claim.verdict import check_verdict
        from twinaudit.protocol.keys import load_public_key

        parsed = check_verdict(
            (folder / "verdict.json").read_bytes(),
            load_public_key(run_dir / "arbiter" / "arbiter.key.pub"),
        )
        replayed = replay(parsed, (folder / "transcript.bin").read_bytes())
        path = trajectory(parsed)
        assert path.final["draws"] == replayed.final.draws
        assert path.final["successes"] == replayed.final.successes
        if "log_statistic" in path.final:  # absent when every opened pair tied
            assert path.final["log_statistic"] == pytest.approx(replayed.final.log_statistic)
    # Every server was stopped.
    assert "interrupted" not in text


def test_the_mixture_bound_reaches_one_half_exactly_when_the_test_detects():
    from twinaudit.protocol.stats.mixture import reaches

    counts = [
        (d, k) for d in (0, 1, 5, 6, 10, 40, 118, 200) for k in range(0, d + 1, max(1, d // 9))
    ]
    bounds = mixture_lower_bounds(counts, 0.05)
    for (draws, successes), bound in zip(counts, bounds, strict=True):
        assert (bound >= 0.5) == reaches(draws, successes, 0.05), (draws, successes, bound)
        assert 0.0 <= bound < 1.0
    # More successes at the same draws never lower the bound; a stricter p lowers it.
    row = mixture_lower_bounds([(100, k) for k in range(101)], 0.05)
    assert row == sorted(row)
    assert mixture_lower_bounds([(100, 70)], 0.001)[0] < mixture_lower_bounds([(100, 70)], 0.05)[0]
