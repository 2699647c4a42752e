"""Results a script can read (issue #22 item 6): ``--json``, exit codes, no overwritten verdict.

A real dispute through the console script on 44 small images: ``owner mark``, ``owner
escrow --json``, ``owner publish``, then claims against a model that memorised the
published versions (DETECTED) and one that never saw them (NOT-DETECTED), each with
``--json`` and ``--exit-code``; ``verifier check --json`` and ``verifier replay
--json`` on the verdicts, valid and broken; ``plan --json``. With ``--json`` stdout
holds exactly one JSON object and the progress goes to stderr. A second claim into
an ``--out`` that holds a verdict is refused before anything reaches the arbiter.
"""

from __future__ import annotations

import contextlib
import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.support.arbiter import sqlite_arbiter
from tests.support.data import synthetic_images
from tests.support.fake_oracle import LinearOracle
from tests.support.keys import KEY
from twinaudit.cli.main import main
from twinaudit.cli.results import EXIT_NOT_DETECTED
from twinaudit.practitioner.grpc_server import serve_oracle
from twinaudit.protocol.claim.verdict import check_verdict
from twinaudit.protocol.oracles.base import (
    ClassifierOracle,
    ClassifyAnswer,
    OracleInfo,
    check_images,
)
from twinaudit.verifier.escrow.sqlite_store import SqliteEscrowStore

N_IMAGES = 44


class Memoriser(ClassifierOracle):
    """A model that learned the published images by heart, and nothing else.

    An image within half a grey level of a published one gets its label with
    near-certainty; any other image gets the uniform answer.
    """

    def __init__(self, published: np.ndarray, labels: np.ndarray) -> None:
        self._bank = published.reshape(len(published), -1).astype(np.float32) / 255.0
        self._labels = labels
        self._info = OracleInfo("memoriser", "test", ("classify",), "probabilities", 10, 512)

    @property
    def info(self) -> OracleInfo:
        return self._info

    def classify(self, images: Any) -> ClassifyAnswer:
        images = check_images(images)
        flat = images.reshape(len(images), -1)
        answers = np.full((len(images), 10), 0.1)
        for row, image in enumerate(flat):
            distance = np.abs(self._bank - image).max(axis=1)
            nearest = int(distance.argmin())
            if distance[nearest] < 0.5 / 255:
                answers[row] = 0.001
                answers[row, self._labels[nearest]] = 1 - 0.009
        return ClassifyAnswer(probabilities=answers)


def _json_out(capsys: pytest.CaptureFixture[str]) -> tuple[dict[str, Any], str]:
    """Return the one JSON object on stdout, and stderr."""
    captured = capsys.readouterr()
    lines = captured.out.splitlines()
    assert len(lines) == 1, captured.out
    value = json.loads(lines[0])
    assert isinstance(value, dict)
    return value, captured.err


@pytest.fixture(scope="module")
def escrowed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """An arbiter; a vault marked, escrowed (``--json``, its stdout kept) and published; two
    served models, one that memorised the published images and one that never saw them.
    """
    tmp = tmp_path_factory.mktemp("json")
    raw, labels = synthetic_images(N_IMAGES, seed=7)
    np.save(tmp / "photos.npy", raw)
    (tmp / "labels.json").write_text(json.dumps([int(y) for y in labels]))
    servers = []
    with sqlite_arbiter(tmp, KEY) as address:
        try:
            mark = [
                *("owner", "mark", str(tmp / "photos.npy"), "--labels", str(tmp / "labels.json")),
                *("--out", str(tmp / "vault"), "--marker", "gaussian", "--epsilon", "10"),
                *("--seed", "json results", "--quiet"),
            ]
            assert main(mark) == 0
            stdout = io.StringIO()
            with contextlib.redirect_stdout(stdout):
                escrow_code = main(
                    [
                        *("owner", "escrow", str(tmp / "vault"), "--arbiter", address),
                        *("--arbiter-key", str(tmp / "arbiter.key.pub"), "--json"),
                    ]
                )
            publish = ["owner", "publish", str(tmp / "vault"), "--out", str(tmp / "pub")]
            assert main([*publish, "--quiet"]) == 0
            published = np.load(tmp / "pub" / "photos.npy")
            used, used_port = serve_oracle(Memoriser(published, labels), "127.0.0.1:0")
            servers.append(used)
            clean, clean_port = serve_oracle(LinearOracle(), "127.0.0.1:0")
            servers.append(clean)
            yield {
                "tmp": tmp,
                "address": address,
                "escrow code": escrow_code,
                "escrow stdout": stdout.getvalue(),
                "used": f"127.0.0.1:{used_port}",
                "clean": f"127.0.0.1:{clean_port}",
            }
        finally:
            for server in servers:
                server.stop(None)


def _claim(d: dict[str, Any], model: str, out: str, *options: str) -> int:
    return main(
        [
            *("owner", "claim", str(d["tmp"] / "vault"), "--arbiter", d["address"]),
            *("--arbiter-key", str(d["tmp"] / "arbiter.key.pub"), "--oracle", d[model]),
            *("--knowledge", "C1", "--perturbation", "none", "--k", "1"),
            "--allow-published-queries",
            *("--out", str(d["tmp"] / out), *options),
        ]
    )


def _claims_filed(d: dict[str, Any]) -> int:
    with SqliteEscrowStore(d["tmp"] / "escrow.db", KEY) as store:
        return len(store.claims_for_record(0))


# --- owner escrow, owner claim ----------------------------------------------------------


def test_escrow_json_is_one_object_with_the_record(escrowed):
    assert escrowed["escrow code"] == 0
    lines = escrowed["escrow stdout"].splitlines()
    assert len(lines) == 1
    result = json.loads(lines[0])
    assert result["escrowed"] is True and result["record"] == 0
    assert result["n_pairs"] == N_IMAGES and result["item_kind"] == "image"
    assert result["log_size"] == 1 and len(bytes.fromhex(result["root"])) == 32
    assert result["receipt"] is None and result["vault"] == str(escrowed["tmp"] / "vault")
    assert "rho" not in result


def test_claim_json_and_exit_code_tell_detected_from_not_detected(escrowed, capsys):
    capsys.readouterr()
    assert _claim(escrowed, "used", "used", "--json", "--exit-code") == 0
    used, err = _json_out(capsys)
    assert used["decision"] == "detected" and used["detected"] is True
    assert used["stop"] == "detected" and "pairs" in err  # progress lines on stderr
    verdict = check_verdict(Path(used["verdict_file"]).read_bytes(), KEY.public_key())
    assert used["claim_id"] == verdict.claim_id and used["draws"] == verdict.final.draws
    assert used["pairs_opened"] == len(verdict.opened) and used["record"] == 0
    assert used["score"]["knowledge"] == "C1" and used["test"] == "mixture-graded"
    assert Path(used["transcript_file"]).is_file()

    assert _claim(escrowed, "clean", "clean", "--json", "--exit-code") == EXIT_NOT_DETECTED
    clean, _ = _json_out(capsys)
    assert clean["decision"] == "not-detected" and clean["detected"] is False
    assert clean["earlier_claims"] == used["earlier_claims"] + 1
    # Without --exit-code a verdict either way exits 0; the text line names the decision.
    assert _claim(escrowed, "clean", "clean-text") == 0
    assert capsys.readouterr().out.startswith("NOT-DETECTED")


def test_a_second_claim_into_an_out_holding_a_verdict_is_refused_before_sending(escrowed, capsys):
    out = escrowed["tmp"] / "again"
    assert _claim(escrowed, "used", "again") == 0
    verdict = (out / "verdict.json").read_bytes()
    filed = _claims_filed(escrowed)
    capsys.readouterr()
    assert _claim(escrowed, "used", "again", "--json") == 2
    captured = capsys.readouterr()
    assert "refusing to overwrite a signed verdict" in captured.err
    # --json: one object on stdout on failure too, with the error's code, message and hint.
    refused = json.loads(captured.out)
    assert list(refused) == ["error"] and refused["error"]["code"] == "invalid-input"
    assert refused["error"]["message"] in captured.err
    assert (out / "verdict.json").read_bytes() == verdict
    assert _claims_filed(escrowed) == filed  # nothing reached the arbiter
    (out / "verdict.json").unlink()  # a transcript alone is refused as well
    assert _claim(escrowed, "used", "again") == 2
    assert "transcript.bin" in capsys.readouterr().err
    (escrowed["tmp"] / "a-file").write_text("x")
    assert _claim(escrowed, "used", "a-file") == 2
    assert "not a folder" in capsys.readouterr().err
    assert _claims_filed(escrowed) == filed


# --- verifier check, verifier replay --------------------------------------------------------


def test_a_claim_that_would_send_published_files_is_refused_unless_allowed(escrowed, capsys):
    before = _claims_filed(escrowed)
    capsys.readouterr()
    code = main(
        [
            *("owner", "claim", str(escrowed["tmp"] / "vault"), "--arbiter", escrowed["address"]),
            *("--arbiter-key", str(escrowed["tmp"] / "arbiter.key.pub")),
            *("--oracle", escrowed["used"], "--perturbation", "none"),
            *("--out", str(escrowed["tmp"] / "refused-none")),
        ]
    )
    assert code == 2
    err = capsys.readouterr().err
    assert "--allow-published-queries" in err and "dither" in err
    assert _claims_filed(escrowed) == before
    assert not (escrowed["tmp"] / "refused-none").exists()


def test_check_and_replay_json(escrowed, capsys):
    out = escrowed["tmp"] / "checked"
    assert _claim(escrowed, "used", "checked") == 0
    pub = str(escrowed["tmp"] / "arbiter.key.pub")
    verdict, transcript = out / "verdict.json", out / "transcript.bin"
    capsys.readouterr()
    assert main(["verifier", "check", str(verdict), "--pubkey", pub, "--json"]) == 0
    checked, _ = _json_out(capsys)
    assert checked["valid"] is True and checked["decision"] == "detected"
    assert checked["detected"] is True and checked["interval"] is None
    replay = ["verifier", "replay", str(verdict), "--transcript", str(transcript)]
    assert main([*replay, "--pubkey", pub, "--json"]) == 0
    replayed, _ = _json_out(capsys)
    assert replayed["identical"] is True and replayed["signature_checked"] is True
    assert replayed["decision"] == "detected" and replayed["pairs_replayed"] > 0
    assert {k: replayed[k] for k in checked if k != "valid"} == {
        k: v for k, v in checked.items() if k != "valid"
    }

    tampered = out / "tampered.json"
    data = bytearray(verdict.read_bytes())
    data[len(data) // 2] ^= 0x02
    tampered.write_bytes(bytes(data))
    assert main(["verifier", "check", str(tampered), "--pubkey", pub, "--json"]) == 1
    refused, err = _json_out(capsys)
    assert refused["valid"] is False and "] INVALID: " in err
    assert err.startswith(f"twinaudit: error: [{refused['error']['code']}] ")
    broken = out / "broken.bin"
    data = bytearray(transcript.read_bytes())
    data[-2] ^= 0x10
    broken.write_bytes(bytes(data))
    assert main(["verifier", "replay", str(verdict), "--transcript", str(broken), "--json"]) == 1
    failed, _ = _json_out(capsys)
    assert failed["identical"] is False and set(failed["error"]) == {"code", "message", "hint"}


# --- plan, and the exit codes in --help ------------------------------------------------------


def test_plan_json_has_the_threshold_and_the_figures(capsys):
    assert main(["plan", "--pairs", "1000", "--p", "0.05", "--rates", "0.7", "0.9", "--json"]) == 0
    plan, _ = _json_out(capsys)
    assert plan["threshold"] == 562 and plan["pairs"] == 1000 and plan["alpha"] == 0.025
    assert [row["q"] for row in plan["rates"]] == [0.7, 0.9]
    for row in plan["rates"]:
        for test in ("mixture-e", "pprm-chernoff"):
            figures = row["tests"][test]
            assert 0 <= figures["detection_probability"] <= 1
            assert 0 < figures["expected_pairs"] <= 1000
    assert main(["plan", "--pairs", "1000", "--rates", "0.9"]) == 0
    out = capsys.readouterr().out
    assert "threshold T = 562" in out and "oracle SPRT" in out and "grid16-v1" in out


def test_plan_json_has_the_oracle_and_the_prior(capsys):
    """Issue #39: the SPRT that knows q beside the tests; the mixture prior chosen by name."""
    rates = ["0.5", "0.55", "0.99"]
    assert main(["plan", "--pairs", "5000", "--rates", *rates, "--json"]) == 0
    default, _ = _json_out(capsys)
    assert (
        main(["plan", "--pairs", "5000", "--rates", *rates, "--json", "--prior", "grid15-v1"]) == 0
    )
    old, _ = _json_out(capsys)
    assert (default["prior"], old["prior"]) == ("grid16-v1", "grid15-v1")
    assert default["rates"][0]["oracle_sprt"] is None  # no SPRT at q = 1/2
    low, high = default["rates"][1], default["rates"][2]
    assert 600 < low["oracle_sprt"]["expected_pairs"] < 615  # the 607
    assert high["oracle_sprt"]["expected_pairs"] < high["tests"]["mixture-e"]["expected_pairs"]
    # grid16-v1 opens fewer pairs than grid15-v1 at q = 0.55 (855 against 975).
    new_pairs = low["tests"]["mixture-e"]["expected_pairs"]
    old_pairs = old["rates"][1]["tests"]["mixture-e"]["expected_pairs"]
    assert 850 < new_pairs < 860 and 970 < old_pairs < 980
    assert old["rates"][1]["oracle_sprt"] == low["oracle_sprt"]
    with pytest.raises(SystemExit):
        main(["plan", "--pairs", "100", "--prior", "uniform"])


@pytest.mark.parametrize(
    "command",
    [
        ["plan"],
        ["owner", "escrow"],
        ["owner", "claim"],
        ["verifier", "check"],
        ["verifier", "replay"],
    ],
)
def test_help_states_the_exit_codes_and_json(command, capsys, monkeypatch):
    monkeypatch.setenv("TWINAUDIT_ARBITER", "127.0.0.1:7443")
    monkeypatch.setenv("TWINAUDIT_ARBITER_KEY", "arbiter.key.pub")
    with pytest.raises(SystemExit):
        main([*command, "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "exit status: 0" in out and "--json" in out
    if command == ["owner", "claim"]:
        assert f"{EXIT_NOT_DETECTED} NOT-DETECTED" in out and "--exit-code" in out
