"""``verify`` says whether a replay was bit for bit or within the tolerance of spec §1.2.

A verdict signed before the arithmetic ``basic-v1`` (its score map has no
``arithmetic``) replays when each recorded score is within ``S·2^−40 + 2^−1000`` of the
score recomputed with the protocol's logarithms; its outcomes come from the recorded
scores. Its scores were computed with correctly rounded logarithms, so a few differ
from the recomputed ones in the last bit: ``verify`` then says "replay within the spec
§1.2 tolerance" with the count, and "replay identical" only when every score is
bit-identical; ``--json`` and the HTML report say the same. The verdicts are the
vector file's (spec/vectors/verdicts.json): real claims of the rule before, and one
under ``basic-v1``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from twinaudit.cli.main import main
from twinaudit.protocol.keys import public_key_from_raw, public_key_pem
from twinaudit.verifier.replay import ScoreAgreement
from twinaudit.verifier.windows import AgreedScores

VECTORS = Path(__file__).resolve().parents[2] / "spec" / "vectors" / "verdicts.json"
DOC = json.loads(VECTORS.read_text(encoding="utf-8"))
CASES = {case["name"]: case for case in DOC["cases"]}
#: A real claim of the rule before: K = 2, 48 scores, one a last-bit from the recomputed.
OLD = "mixture-e, skip, C1 pad-shift-flip-dither K=2"
#: A claim of the rule before whose 8 scores all recompute bit for bit.
OLD_EXACT = "mixture-e, skip, C1 dither K=1, max_pairs 4"
BASIC = "mixture-e, skip, C1 dither K=1, max_pairs 4, arithmetic basic-v1"


def _files(tmp_path: Path, name: str) -> list[str]:
    """Write case ``name``'s verdict, transcript and the test key; return verify's args."""
    case = CASES[name]
    key = public_key_from_raw(bytes.fromhex(DOC["description"].split("public key ")[1][:64]))
    (tmp_path / "arbiter.pub").write_bytes(public_key_pem(key))
    (tmp_path / "verdict.json").write_text(case["input"]["envelope"], encoding="utf-8")
    (tmp_path / "transcript.bin").write_bytes(bytes.fromhex(case["input"]["transcript"]))
    return [
        str(tmp_path / "verdict.json"),
        "--pubkey",
        str(tmp_path / "arbiter.pub"),
        "--transcript",
        str(tmp_path / "transcript.bin"),
    ]


def _verify(args: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    assert main(["verify", *args]) == 0
    return capsys.readouterr().out


def _json(args: list[str], capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    report: dict[str, Any] = json.loads(_verify([*args, "--json"], capsys))
    assert report["verified"] and report["replayed"] and report["identical"]
    return report


def test_an_old_rule_verdict_replays_within_the_tolerance_and_says_so(tmp_path, capsys):
    args = _files(tmp_path, OLD)
    out = _verify([*args, "--html", str(tmp_path / "report.html")], capsys)
    first = out.splitlines()[0]
    assert first.startswith("VERIFIED verdict ")
    assert first.endswith(
        "signature checked, replay within the spec §1.2 tolerance (1 of 48 scores differ "
        "from the recomputed in their last bits)"
    )
    assert "replay identical" not in out
    assert "  scores: 1 of 48 recorded scores are not the recomputed ones bit for bit" in out
    assert "the decision, indicators and final state are identical" in out
    page = (tmp_path / "report.html").read_text(encoding="utf-8")
    assert "Scores: 1 of 48 recorded scores are not the recomputed ones bit for bit" in page
    agreement = _json(args, capsys)["score_agreement"]
    assert agreement["arithmetic"] is None and agreement["tolerance_rule"]
    assert (agreement["scores"], agreement["within_tolerance"]) == (48, 1)
    assert not agreement["bit_identical"]
    # One ulp of a score near 1: a relative difference of a few 2^-53, far inside 2^-40.
    assert 2.0**-54 < agreement["largest_relative_difference"] < 2.0**-51
    assert 0 < agreement["largest_share_of_tolerance"] < 2.0**-10


def test_verifier_replay_says_the_same(tmp_path, capsys):
    args = _files(tmp_path, OLD)
    assert main(["verifier", "replay", *args]) == 0
    assert "scores: 1 of 48 recorded scores" in capsys.readouterr().out
    assert main(["verifier", "replay", *args, "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["identical"] and report["score_agreement"]["within_tolerance"] == 1


@pytest.mark.parametrize("name", [BASIC, OLD_EXACT])
def test_a_verdict_whose_scores_all_recompute_bit_for_bit_replays_identical(name, tmp_path, capsys):
    args = _files(tmp_path, name)
    out = _verify(args, capsys)
    assert out.splitlines()[0].endswith("signature checked, replay identical")
    assert "tolerance (" not in out
    agreement = _json(args, capsys)["score_agreement"]
    assert agreement["bit_identical"] and agreement["within_tolerance"] == 0
    assert agreement["scores"] == 8
    if name == BASIC:
        assert agreement["arithmetic"] == "basic-v1" and not agreement["tolerance_rule"]
        assert "scores:" not in out
    else:
        assert agreement["arithmetic"] is None and agreement["tolerance_rule"]
        assert "  scores: all 8 recomputed bit for bit" in out


def test_the_agreement_counts_signed_zeros_and_keeps_the_largest_difference():
    agreement = ScoreAgreement(None, 0)
    agreement = agreement.add(AgreedScores([-0.0, 1.0], [0.0, 1.0], [2.0**-1000, 1.0]))
    assert agreement.within_tolerance == 1 and agreement.largest_relative_difference == 0.0
    agreement = agreement.add(AgreedScores([2.0], [2.0 + 2.0**-51], [2.0**-30]))
    agreement = agreement.add(AgreedScores([4.0], [4.0 + 2.0**-50], [2.0**-20]))
    assert (agreement.recomputed, agreement.within_tolerance) == (4, 3)
    assert agreement.largest_relative_difference == pytest.approx(2.0**-52)
    assert agreement.largest_share_of_tolerance == pytest.approx(2.0**-21)
    assert not agreement.bit_identical and agreement.tolerance_rule
    exact = ScoreAgreement("basic-v1", 0).add(AgreedScores([1.5, 2.5], [1.5, 2.5]))
    assert exact.bit_identical and not exact.tolerance_rule and exact.recomputed == 2
