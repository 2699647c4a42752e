"""``twinaudit verify``: check, replay and report in one command (issue #44, Build 1).

Every case of spec/vectors/verdicts.json goes through the console script as a court
would run it (``verify --json``, appendix B's key): the valid ones are VERIFIED with
the decision and figures the vector states, each invalid one fails at the stage its
kind names (``check``: the signature or the verdict, §11; ``replay`` and
``openings``: the transcript or the openings, §12) with exit 1 and one JSON object.
Then the text output, the report, the usage errors (exit 2), and that ``verify``
says what ``verifier check`` and ``verifier replay`` say about the same files.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from twinaudit.cli.main import main
from twinaudit.protocol.claim.verdict import check_verdict
from twinaudit.protocol.keys import (
    key_id,
    load_public_key,
    public_key_from_raw,
    public_key_pem,
    write_keypair,
)

VECTOR_FILE = Path(__file__).resolve().parents[2] / "spec" / "vectors" / "verdicts.json"
DOC = json.loads(VECTOR_FILE.read_text(encoding="utf-8"))
KEY = public_key_from_raw(bytes.fromhex(DOC["description"].split("public key ")[1][:64]))
FIRST_CLAIM = next(c for c in DOC["cases"] if c["valid"] and c["kind"] == "claim")


def _files(case: dict[str, Any], folder: Path) -> dict[str, Path]:
    """Write a vector case's verdict, transcript and openings, and appendix B's key."""
    files = {"verdict": folder / "verdict.json", "pub": folder / "arbiter.key.pub"}
    files["verdict"].write_bytes(case["input"]["envelope"].encode())
    files["pub"].write_bytes(public_key_pem(KEY))
    for name, file in (("transcript", "transcript.bin"), ("openings", "openings.bin")):
        if name in case["input"]:
            files[name] = folder / file
            files[name].write_bytes(bytes.fromhex(case["input"][name]))
    return files


def _verify(files: dict[str, Path], *extra: str) -> list[str]:
    args = ["verify", str(files["verdict"]), "--pubkey", str(files["pub"])]
    for name in ("transcript", "openings"):
        if name in files:
            args += [f"--{name}", str(files[name])]
    return [*args, *extra]


@pytest.mark.parametrize("case", [pytest.param(c, id=c["name"]) for c in DOC["cases"]])
def test_every_spec_vector_verdict_verifies_or_fails_at_its_stage(case, tmp_path, capsys):
    files = _files(case, tmp_path)
    code = main(_verify(files, "--json"))
    captured = capsys.readouterr()
    report = json.loads(captured.out)
    if case["valid"]:
        assert code == 0 and report["verified"] and report["replayed"] and report["identical"]
        if case["kind"] == "claim":
            expected = case["expected"]
            assert report["decision"] == expected["decision"]
            assert (report["draws"], report["successes"]) == (
                expected["draws"],
                expected["successes"],
            )
            assert report["pairs_replayed"] == len(expected["opened"])
            if "score_agreement" in expected:
                agreement = report["score_agreement"]
                assert {k: agreement[k] for k in expected["score_agreement"]} == (
                    expected["score_agreement"]
                )
        else:
            assert report["openings_checked"] == case["expected"]["pairs"]
        return
    stage = "check" if case["kind"] == "check" else "replay"
    assert code == 1, captured.err
    assert report == {
        "verified": False,
        "valid": stage == "replay",
        "replayed": False,
        "stage": stage,
        "error": report["error"],
    }
    assert set(report["error"]) == {"code", "message", "hint"} and "Traceback" not in captured.err
    label = "INVALID: " if stage == "check" else "REPLAY FAILED: "
    error = report["error"]
    assert error["message"].startswith(label)
    assert captured.err == (
        f"twinaudit: error: [{error['code']}] {error['message']}; {error['hint']}\n"
    )


def test_the_text_says_verified_or_valid_on_its_first_line(tmp_path, capsys):
    files = _files(FIRST_CLAIM, tmp_path)
    assert main(_verify(files)) == 0
    out = capsys.readouterr().out.splitlines()
    claim_id = check_verdict(files["verdict"].read_bytes(), KEY).claim_id
    assert out[0].startswith(f"VERIFIED verdict {claim_id}: NOT-DETECTED (stop: exhausted; ")
    # A claim of the rule before basic-v1: one of its 48 scores is a last bit off the
    # recomputed one, accepted within the tolerance of spec 1.2, which the line says.
    assert out[0].endswith(
        "signature checked, replay within the spec §1.2 tolerance (1 of 48 scores differ "
        "from the recomputed in their last bits)"
    )
    assert any(line.startswith("  REPLAYED 24 pairs: ") for line in out)
    alone = {k: v for k, v in files.items() if k != "transcript"}
    assert main(_verify(alone)) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert first.startswith("VALID verdict ") and first.endswith("not replayed (no --transcript)")


def test_verify_reports_what_check_and_replay_report(tmp_path, capsys):
    files = _files(FIRST_CLAIM, tmp_path)
    assert main(_verify(files, "--json")) == 0
    verified = json.loads(capsys.readouterr().out)
    old = ["verifier", "check", str(files["verdict"]), "--pubkey", str(files["pub"]), "--json"]
    assert main(old) == 0
    checked = json.loads(capsys.readouterr().out)
    assert main(["verifier", "replay", *old[2:], "--transcript", str(files["transcript"])]) == 0
    replayed = json.loads(capsys.readouterr().out)
    for key, value in checked.items():
        assert verified[key] == value, key
    for key, value in replayed.items():
        assert verified[key] == value, key


def test_the_report_is_written_only_for_a_verdict_that_verified(tmp_path, capsys):
    files = _files(FIRST_CLAIM, tmp_path)
    page = tmp_path / "verdict.html"
    assert main(_verify(files, "--html", str(page))) == 0
    text = page.read_text(encoding="utf-8")
    assert "</html>" in text and "replayed" in text.lower()
    assert f"wrote the HTML report {page}" in capsys.readouterr().out
    page.unlink()
    broken = bytearray(files["transcript"].read_bytes())
    broken[-2] ^= 0x10
    files["transcript"].write_bytes(bytes(broken))
    assert main(_verify(files, "--html", str(page))) == 1
    assert not page.exists()
    assert "REPLAY FAILED" in capsys.readouterr().err


def test_another_arbiters_key_is_invalid(tmp_path, capsys):
    files = _files(FIRST_CLAIM, tmp_path)
    write_keypair(tmp_path / "other.key")
    files["pub"] = tmp_path / "other.key.pub"
    assert main(_verify(files)) == 1
    err = capsys.readouterr().err
    # Both key ids named: the verdict's signer and the key given.
    assert err.startswith(
        "twinaudit: error: [invalid-signature] INVALID: the verdict was signed by another "
        f"key than the one given: its signature is labelled with key id {key_id(KEY)}, the "
        f"key given has key id {key_id(load_public_key(files['pub']))}; check that the key "
        "given (--pubkey or --arbiter-key) is the public key of the arbiter"
    ), err


#: Usage errors: (what is changed, extra arguments) -> exit 2, nothing on stdout.
USAGE = {
    "openings without a transcript": ("no transcript", ["--openings", "verdict.json"]),
    "a missing verdict": ("no verdict", []),
    "a missing key": ("no key", []),
    "a report into a missing folder": ("", ["--html", "missing/verdict.html"]),
    "a report over the verdict": ("", ["--html", "verdict.json"]),
}


@pytest.mark.parametrize("name", list(USAGE))
def test_usage_errors_exit_2(name, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    files = _files(FIRST_CLAIM, tmp_path)
    change, extra = USAGE[name]
    if change == "no transcript":
        del files["transcript"]
    elif change == "no verdict":
        files["verdict"].unlink()
    elif change == "no key":
        files["pub"].unlink()
    before = files["verdict"].read_bytes() if files["verdict"].exists() else None
    assert main(_verify(files, *extra)) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.startswith("twinaudit: error: ")
    if before is not None:
        assert files["verdict"].read_bytes() == before


def test_the_key_may_come_from_the_environment(tmp_path, monkeypatch, capsys):
    files = _files(FIRST_CLAIM, tmp_path)
    monkeypatch.setenv("TWINAUDIT_ARBITER_KEY", str(files["pub"]))
    assert main(["verify", str(files["verdict"])]) == 0
    assert capsys.readouterr().out.startswith("VALID verdict ")
    monkeypatch.delenv("TWINAUDIT_ARBITER_KEY")
    with pytest.raises(SystemExit) as stopped:
        main(["verify", str(files["verdict"])])
    assert stopped.value.code == 2
