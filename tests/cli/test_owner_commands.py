"""The owner's commands end to end on small inputs: mark, escrow, publish, inspect.

Resumability (an interrupted run, including a process killed mid-write, finishes with
exactly the bytes of an uninterrupted one), determinism, and the bad inputs of the
owner-side issue, each with its typed error and nothing written.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from tests.support.arbiter import sqlite_arbiter
from tests.support.data import synthetic_images
from tests.support.fake_oracle import FlakyOracle, LinearOracle
from tests.support.keys import KEY, OTHER
from twinaudit.cli.main import main
from twinaudit.owner.escrow_client import escrow_root
from twinaudit.owner.images.sources import open_source
from twinaudit.owner.inspect import inspect_vault
from twinaudit.owner.mark import mark, mark_path, secret_from_seed
from twinaudit.owner.marking import MarkingConfig
from twinaudit.owner.publish import publish
from twinaudit.owner.vault import (
    Vault,
    write_vault,
)
from twinaudit.practitioner.grpc_server import serve_oracle
from twinaudit.protocol.claim.verdict import check_verdict
from twinaudit.protocol.errors import (
    InputError,
    ParameterError,
    StateError,
    VaultStorageError,
    VerificationError,
)
from twinaudit.protocol.keys import public_key_pem
from twinaudit.protocol.seeds import publication_bits
from twinaudit.wire.transport import make_channel

ROOT = Path(__file__).resolve().parents[2]
SEED = secret_from_seed("owner tests")
PGD = MarkingConfig(
    marker="pgd",
    epsilon=10,
    extractor="tests.support.extractors:tiny_extractor",
    steps=2,
    step_size=4.0,
    batch_size=8,
    input_size=32,
)
GAUSSIAN = MarkingConfig(marker="gaussian", epsilon=10, batch_size=8)


def _files(vault: Path) -> dict[str, bytes]:
    """Every file of a vault, by relative name, with its SHA-256."""
    return {
        str(p.relative_to(vault)): hashlib.sha256(p.read_bytes()).digest()
        for p in sorted(vault.rglob("*"))
        if p.is_file()
    }


@pytest.fixture
def photos(tmp_path: Path) -> tuple[Path, Path, np.ndarray, np.ndarray]:
    raw, labels = synthetic_images(44, seed=7)
    np.save(tmp_path / "photos.npy", raw)
    (tmp_path / "labels.json").write_text(json.dumps([int(y) for y in labels]))
    return tmp_path / "photos.npy", tmp_path / "labels.json", raw, labels


# --- mark: determinism and resumability ---------------------------------------------------


@pytest.mark.slow
def test_same_seed_same_vault_bytes(photos, tmp_path):
    images, labels, raw, _ = photos
    first = mark_path(images, tmp_path / "a", PGD, labels=labels, secret=SEED, show_progress=False)
    mark_path(images, tmp_path / "b", PGD, labels=labels, secret=SEED, show_progress=False)
    assert _files(tmp_path / "a") == _files(tmp_path / "b")
    mark_path(images, tmp_path / "c", PGD, labels=labels, show_progress=False)  # fresh secret
    assert _files(tmp_path / "c")["journal"] != _files(tmp_path / "a")["journal"]
    vault = first.vault
    assert vault.n_pairs == 44
    assert vault.labels() == json.loads(labels.read_text())
    for _, v0, v1, _, _ in vault.chunks():
        assert not np.array_equal(v0, v1)
    assert first.marked_now == 44 and first.resumed_from == 0
    assert raw.shape == (44, 28, 28, 1)


def test_interrupted_mark_resumes_to_identical_bytes(photos, tmp_path, monkeypatch):
    images, labels, _, _ = photos
    mark_path(images, tmp_path / "whole", PGD, labels=labels, secret=SEED, show_progress=False)
    calls = {"n": 0}
    source = open_source(images, labels=labels)
    marker_cls = type(_marker(PGD))
    original = marker_cls.mark_with_fields

    def failing(self, pixels, first_index):
        calls["n"] += 1
        if calls["n"] == 3:
            raise KeyboardInterrupt  # the owner presses Ctrl-C during the third batch
        return original(self, pixels, first_index)

    monkeypatch.setattr(marker_cls, "mark_with_fields", failing)
    with pytest.raises(KeyboardInterrupt):
        mark(source, tmp_path / "cut", PGD, secret=SEED, show_progress=False)
    monkeypatch.undo()
    with pytest.raises(StateError):
        Vault.open(tmp_path / "cut")  # unfinished: no vault to use yet
    result = mark(source, tmp_path / "cut", PGD, secret=SEED, show_progress=False)
    assert result.resumed_from == 16 and result.marked_now == 28
    assert _files(tmp_path / "cut") == _files(tmp_path / "whole")


def _marker(config: MarkingConfig):
    from twinaudit.owner.marking import make_marker

    return make_marker(config, SEED)


@pytest.mark.slow
def test_killed_mark_process_resumes_to_identical_bytes(tmp_path):
    """SIGKILL at an arbitrary moment, then the same command again: the same vault."""
    raw, _ = synthetic_images(400, seed=8)
    np.save(tmp_path / "photos.npy", raw)
    command = [
        sys.executable,
        "-m",
        "twinaudit",
        "owner",
        "mark",
        str(tmp_path / "photos.npy"),
        "--marker",
        "gaussian",
        "--batch-size",
        "4",
        "--seed",
        "killed",
        "--quiet",
    ]
    subprocess.run([*command, "--out", str(tmp_path / "whole")], cwd=ROOT, check=True)
    process = subprocess.Popen([*command, "--out", str(tmp_path / "cut")], cwd=ROOT)
    chunks = tmp_path / "cut" / "chunks"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and len(list(chunks.glob("*.pairs"))) < 5:
        time.sleep(0.01)
    process.send_signal(signal.SIGKILL)
    process.wait()
    written = len(list(chunks.glob("*.pairs")))
    assert 5 <= written < 100, "the run was not killed mid-way"
    subprocess.run([*command, "--out", str(tmp_path / "cut")], cwd=ROOT, check=True)
    assert _files(tmp_path / "cut") == _files(tmp_path / "whole")


def test_mark_again_on_a_finished_vault(photos, tmp_path):
    images, labels, _, _ = photos
    mark_path(images, tmp_path / "v", GAUSSIAN, labels=labels, secret=SEED, show_progress=False)
    again = mark_path(
        images, tmp_path / "v", GAUSSIAN, labels=labels, secret=SEED, show_progress=False
    )
    assert again.marked_now == 0 and again.resumed_from == 44
    other = MarkingConfig(marker="gaussian", epsilon=11, batch_size=8)
    with pytest.raises(ParameterError, match="another config"):
        mark_path(images, tmp_path / "v", other, labels=labels, show_progress=False)


def test_disk_full_during_mark_is_resumable(photos, tmp_path, monkeypatch):
    images, labels, _, _ = photos
    mark_path(images, tmp_path / "whole", GAUSSIAN, labels=labels, secret=SEED, show_progress=False)
    from twinaudit.owner.vault import files as vault_files

    real = vault_files.write_all
    written = {"n": 0}

    def full_after_three(fd, data):
        written["n"] += 1
        if written["n"] > 3:
            raise OSError(errno.ENOSPC, "No space left on device")
        real(fd, data)

    monkeypatch.setattr(vault_files, "write_all", full_after_three)
    with pytest.raises(VaultStorageError, match="disk is full"):
        mark_path(images, tmp_path / "v", GAUSSIAN, labels=labels, secret=SEED, show_progress=False)
    monkeypatch.undo()
    mark_path(images, tmp_path / "v", GAUSSIAN, labels=labels, secret=SEED, show_progress=False)
    assert _files(tmp_path / "v") == _files(tmp_path / "whole")


# --- bad input through the console script -------------------------------------------------


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--epsilon", "0"], "epsilon"),
        (["--epsilon", "256"], "epsilon"),
        (["--extractor", "no.such.module:f"], "no.such.module"),
        (["--steps", "-1"], "steps"),
        (["--marker", "pgd", "--extractor-weights", "/nonexistent.pt"], "nonexistent"),
    ],
)
def test_bad_marking_options_write_nothing(photos, tmp_path, capsys, args, message):
    images, _, _, _ = photos
    code = main(["owner", "mark", str(images), "--out", str(tmp_path / "v"), "--quiet", *args])
    assert code == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "v").exists()


def test_bad_inputs_are_named_and_write_nothing(tmp_path, capsys):
    empty = tmp_path / "empty"
    empty.mkdir()
    folder = tmp_path / "folder"
    folder.mkdir()
    (folder / "a.png").write_bytes(b"\x89PNG\r\n\x1a\n" + b"garbage")
    cases = [
        (tmp_path / "missing.npy", "missing.npy"),
        (empty, "empty"),
        (folder, "a.png"),
    ]
    for path, name in cases:
        code = main(["owner", "mark", str(path), "--out", str(tmp_path / "v"), "--quiet"])
        err = capsys.readouterr().err
        assert code == 2 and name in err, err
        assert not (tmp_path / "v").exists()


# --- escrow, publish, inspect -------------------------------------------------------------


@pytest.fixture
def arbiter(tmp_path):
    with sqlite_arbiter(tmp_path, KEY) as address:
        yield address


def _store_receipt(vault: Vault, address: str) -> None:
    """Escrow the vault's root with the arbiter at ``address`` and store the receipt."""
    escrowed = escrow_root(
        make_channel(address),
        root=vault.root,
        n_pairs=vault.n_pairs,
        item_kind="image",
        owner="",
        claim_key=vault.claim_public_key(),
        arbiter_public_key=KEY.public_key(),
    )
    vault.store_receipt(escrowed.envelope, KEY.public_key(), escrowed.inclusion_proof)


def _escrowed(photos, tmp_path, address) -> Vault:
    images, labels, _, _ = photos
    vault = mark_path(
        images, tmp_path / "v", GAUSSIAN, labels=labels, secret=SEED, show_progress=False
    ).vault
    _store_receipt(vault, address)
    return Vault.open(tmp_path / "v")


def test_publish_writes_exactly_the_published_versions(photos, tmp_path, arbiter):
    vault = _escrowed(photos, tmp_path, arbiter)
    files = publish(vault, tmp_path / "pub", show_progress=False)
    # The published pixels and the labels (the same for both versions), nothing else.
    assert sorted(f.name for f in files) == ["labels.csv", "photos.npy"]
    assert sorted(p.name for p in (tmp_path / "pub").iterdir()) == ["labels.csv", "photos.npy"]
    published = np.load(tmp_path / "pub" / "photos.npy")
    bits = publication_bits(vault.root, vault.receipt.rho, vault.n_pairs)
    for index, bit in enumerate(bits):
        versions = vault.pair(index)
        assert np.array_equal(published[index], versions[int(bit)].pixels)
    with pytest.raises(InputError):
        publish(vault, tmp_path / "pub", show_progress=False)  # never overwrites


def test_inspect_checks_epsilon_against_the_original(photos, tmp_path, arbiter):
    images, labels, raw, _ = photos
    vault = _escrowed(photos, tmp_path, arbiter)
    report = inspect_vault(
        vault,
        source=open_source(images, labels=labels),
        distance_pairs=8,
        extractor="tests.support.extractors:tiny_extractor",
        sheet=tmp_path / "sheet.png",
        sheet_pairs=4,
    )
    assert report.epsilon is not None and report.epsilon.holds
    assert report.epsilon.pixels_checked == 2 * raw.size
    assert 0 < report.epsilon.max_deviation <= 10
    assert report.feature_distance is not None and report.feature_distance.pairs == 8
    assert report.receipt is not None and report.receipt.record == 0
    assert "holds" in report.to_text() and report.to_value()["n_pairs"] == 44
    assert os.stat(tmp_path / "sheet.png").st_mode & 0o077 == 0
    other = tmp_path / "other.npy"
    np.save(other, np.clip(raw.astype(int) + 1, 0, 255).astype(np.uint8))
    with pytest.raises(InputError, match="not the input"):
        inspect_vault(vault, source=open_source(other), distance_pairs=0)


def test_escrow_with_the_wrong_arbiter_key_stores_nothing(photos, tmp_path, arbiter, capsys):
    images, labels, _, _ = photos
    mark_path(images, tmp_path / "v", GAUSSIAN, labels=labels, secret=SEED, show_progress=False)
    before = _files(tmp_path / "v")
    (tmp_path / "other.key.pub").write_bytes(public_key_pem(OTHER.public_key()))
    code = main(
        [
            "owner",
            "escrow",
            str(tmp_path / "v"),
            "--arbiter",
            arbiter,
            "--arbiter-key",
            str(tmp_path / "other.key.pub"),
        ]
    )
    assert code == 1 and "signature" in capsys.readouterr().err.lower()
    assert _files(tmp_path / "v") == before


def test_escrow_to_an_unreachable_arbiter_stores_nothing(photos, tmp_path, capsys):
    images, labels, _, _ = photos
    mark_path(images, tmp_path / "v", GAUSSIAN, labels=labels, secret=SEED, show_progress=False)
    before = _files(tmp_path / "v")
    (tmp_path / "arbiter.key.pub").write_bytes(public_key_pem(KEY.public_key()))
    code = main(
        [
            "owner",
            "escrow",
            str(tmp_path / "v"),
            "--arbiter",
            "127.0.0.1:9",
            "--arbiter-key",
            str(tmp_path / "arbiter.key.pub"),
        ]
    )
    err = capsys.readouterr().err
    assert code == 1 and err.startswith(
        "twinaudit: error: [unavailable] the server at 127.0.0.1:9 could not be reached ("
    )
    assert "listening at 127.0.0.1:9 (--arbiter HOST:PORT)" in err and err.count("\n") == 1
    assert _files(tmp_path / "v") == before
    assert not any(p.name == "receipt.json" for p in (tmp_path / "v").iterdir())


def test_modified_vault_is_refused_by_every_command(photos, tmp_path, arbiter, capsys):
    vault = _escrowed(photos, tmp_path, arbiter)
    chunk = vault.path / "chunks" / "000001.pairs"
    data = bytearray(chunk.read_bytes())
    data[-1] ^= 0x01
    chunk.write_bytes(bytes(data))
    for command in (
        ["owner", "publish", str(vault.path), "--out", str(tmp_path / "pub")],
        ["owner", "inspect", str(vault.path), "--distance-pairs", "0"],
        [
            "owner",
            "escrow",
            str(vault.path),
            "--arbiter",
            arbiter,
            "--arbiter-key",
            str(tmp_path / "arbiter.key.pub"),
        ],
        ["owner", "vault-migrate", str(vault.path)],
    ):
        assert main(command) == 1
        assert "chunks/000001.pairs" in capsys.readouterr().err
    assert not (tmp_path / "pub").exists()
    with pytest.raises(VerificationError):
        Vault.open(vault.path)


# --- claim: the default knowledge condition -------------------------------------------------


def test_vault_migrate_rewrites_a_format_1_vault_compactly(photos, tmp_path, arbiter, capsys):
    """A vault written before format 2, escrowed: migrated, it publishes the same files."""
    images, labels, _, _ = photos
    marked = mark_path(images, tmp_path / "v2", GAUSSIAN, labels=labels, secret=SEED).vault
    chunks = list(marked.chunks())
    old = write_vault(
        tmp_path / "v",
        "image",
        np.concatenate([chunk[1] for chunk in chunks]),
        np.concatenate([chunk[2] for chunk in chunks]),
        marked.labels(),
        marked.names(),
        source=marked.source,
        config=marked.config,
        secret=SEED,
        batch_items=len(chunks[0][1]),
        format_version=1,
    )
    assert old.root == marked.root and old.format_version == 1
    _store_receipt(old, arbiter)
    assert main(["owner", "publish", str(old.path), "--out", str(tmp_path / "before"), "-q"]) == 0
    capsys.readouterr()
    assert main(["owner", "vault-migrate", str(old.path)]) == 0
    line = capsys.readouterr().out
    assert "format 1 -> 2" in line and "root, commitments and receipt unchanged" in line
    migrated = Vault.open(old.path)
    assert migrated.format_version == 2 and migrated.root == old.root
    # mark writes format 5 (an npy source has no JPEGs: every item keeps its midpoint);
    # moved to format 2, its chunks are the migrated vault's.
    assert marked.format_version == 5
    assert main(["owner", "vault-migrate", str(tmp_path / "v2"), "--to", "2"]) == 0
    assert "format 5 -> 2" in capsys.readouterr().out
    assert {n: d for n, d in _files(old.path).items() if n.startswith("chunks/")} == {
        n: d for n, d in _files(tmp_path / "v2").items() if n.startswith("chunks/")
    }
    assert main(["owner", "publish", str(old.path), "--out", str(tmp_path / "after"), "-q"]) == 0
    assert _files(tmp_path / "after") == _files(tmp_path / "before")
    assert main(["owner", "vault-migrate", str(old.path)]) == 0
    assert "nothing to do" in capsys.readouterr().out
    assert main(["owner", "vault-migrate", str(tmp_path / "absent")]) == 2  # bad input
    assert "no vault" in capsys.readouterr().err


def _escrowed_vault(photos, tmp_path, address, *, with_labels: bool) -> Path:
    images, labels, _, _ = photos
    vault = mark_path(
        images,
        tmp_path / "v",
        GAUSSIAN,
        labels=labels if with_labels else None,
        secret=SEED,
        show_progress=False,
    ).vault
    _store_receipt(vault, address)
    return tmp_path / "v"


def _owner_claim(vault: Path, arbiter: str, oracle: str, *options: str) -> int:
    return main(
        [
            "owner",
            "claim",
            str(vault),
            "--arbiter",
            arbiter,
            "--arbiter-key",
            str(vault.parent / "arbiter.key.pub"),
            "--oracle",
            oracle,
            "--max-pairs",
            "8",
            "--out",
            str(vault.parent / "verdict"),
            *options,
        ]
    )


@pytest.mark.parametrize(
    ("with_labels", "label_only", "condition", "word"),
    [
        (True, True, "C3", "labelled"),
        (True, False, "C3", "labelled"),
        (False, False, "C4", "unlabelled"),
        (False, True, "C4", "unlabelled"),
    ],
)
def test_claim_without_knowledge_takes_the_recommended_condition_the_oracle_supports(
    photos, tmp_path, arbiter, capsys, with_labels, label_only, condition, word
):
    vault = _escrowed_vault(photos, tmp_path, arbiter, with_labels=with_labels)
    oracle, port = serve_oracle(LinearOracle(label_only=label_only), "127.0.0.1:0")
    try:
        code = _owner_claim(vault, arbiter, f"127.0.0.1:{port}")
    finally:
        oracle.stop(None)
    out = capsys.readouterr().out
    assert code == 0, out
    assert f"knowledge {condition} (asked: {word})" in out
    verdict = check_verdict((tmp_path / "verdict" / "verdict.json").read_bytes(), KEY.public_key())
    score = verdict.claim.score
    assert score.knowledge == condition
    # With labels one dither copy a version; without them C4, with the copies it needs.
    family = ("dither", 1) if with_labels else ("pad-shift-flip-dither", 32)
    assert (score.perturbation, score.k) == family
    assert verdict.earlier_claims == 0


def test_the_owner_files_a_claim_as_a_library_call(photos, tmp_path, arbiter):
    """twinaudit.owner.claims: two calls from a vault to a checked, replayable verdict."""
    from twinaudit.owner.claims import claim_params, file_claim
    from twinaudit.verifier.replay import replay

    vault = Vault.open(_escrowed_vault(photos, tmp_path, arbiter, with_labels=True))
    oracle, port = serve_oracle(LinearOracle(), "127.0.0.1:0")
    accepted: list[str] = []
    try:
        params, score = claim_params(
            vault, KEY.public_key(), f"127.0.0.1:{port}", max_pairs=8, prior="grid15-v1"
        )
        assert score.knowledge == "labelled" and params.record_root == vault.root
        filed = file_claim(
            make_channel(arbiter), vault, params, KEY.public_key(), on_accepted=accepted.append
        )
    finally:
        oracle.stop(None)
    assert accepted == [filed.claim_id] and filed.verdict.claim_id == filed.claim_id
    assert filed.verdict == check_verdict(filed.signed, KEY.public_key())
    assert filed.verdict.claim.test_params["prior"] == "grid15-v1"
    replay(filed.verdict, filed.transcript)  # raises unless it replays
    with pytest.raises(InputError, match="another arbiter"):
        claim_params(vault, Ed25519PrivateKey.generate().public_key(), "127.0.0.1:9")


def test_unlabelled_with_one_copy_is_refused_before_the_arbiter(photos, tmp_path, arbiter, capsys):
    vault = _escrowed_vault(photos, tmp_path, arbiter, with_labels=False)
    options = ("--knowledge", "unlabelled", "--perturbation", "dither")
    assert _owner_claim(vault, arbiter, "127.0.0.1:9", *options) == 2
    err = capsys.readouterr().err
    assert "every pair would tie" in err and "--knowledge C2" in err
    assert not (tmp_path / "verdict").exists()


def test_claim_with_c1_on_an_unlabelled_vault_is_refused_before_the_arbiter(
    photos, tmp_path, arbiter, capsys
):
    vault = _escrowed_vault(photos, tmp_path, arbiter, with_labels=False)
    for knowledge in ("C1", "labelled"):
        assert _owner_claim(vault, arbiter, "127.0.0.1:9", "--knowledge", knowledge) == 2
        assert "not every item of this vault carries one" in capsys.readouterr().err
    assert not (tmp_path / "verdict").exists()


# --- who files, what counts (issue #40 N1; spec §10.7) ------------------------------------


def _record_claims(tmp_path: Path) -> list[object]:
    from twinaudit.verifier.escrow.sqlite_store import SqliteEscrowStore

    with SqliteEscrowStore(tmp_path / "escrow.db", KEY) as store:
        return store.claims_for_record(0)


def test_a_dry_run_files_nothing_and_says_the_bound_a_claim_would_carry(
    photos, tmp_path, arbiter, capsys
):
    vault = _escrowed_vault(photos, tmp_path, arbiter, with_labels=True)
    fits, port = serve_oracle(LinearOracle(), "127.0.0.1:0")  # takes the vault's 28x28x1
    refuses, other = serve_oracle(LinearOracle(shape=(32, 32, 3)), "127.0.0.1:0")
    try:
        assert _owner_claim(vault, arbiter, f"127.0.0.1:{port}", "--dry-run") == 0
        out = capsys.readouterr().out
        assert "nothing was filed, nothing counts" in out and "(0 + 1)·0.05 = 0.05" in out
        assert "probe 28x28x1: answered" in out and "every check holds" in out
        assert _owner_claim(vault, arbiter, f"127.0.0.1:{other}", "--dry-run", "--json") == 1
        report = json.loads(capsys.readouterr().out)
        assert report["filed"] is False and report["probes"][0]["ok"] is False
        assert report["problems"] and report["claims_authenticated"] is True
    finally:
        fits.stop(None)
        refuses.stop(None)
    assert _record_claims(tmp_path) == [] and not (tmp_path / "verdict").exists()


def test_a_claim_says_whether_its_failure_counts_and_its_verdict_leads_with_the_bound(
    photos, tmp_path, arbiter, capsys
):
    vault = _escrowed_vault(photos, tmp_path, arbiter, with_labels=True)
    # Unreachable: refused at the start, not filed.
    assert _owner_claim(vault, arbiter, "127.0.0.1:9") == 1
    assert "this attempt was not filed: it does not count" in capsys.readouterr().err
    # With --json: one object on stdout, whether the claim counts beside the error.
    assert _owner_claim(vault, arbiter, "127.0.0.1:9", "--json") == 1
    captured = capsys.readouterr()
    refused = json.loads(captured.out)
    assert {k: refused[k] for k in ("record", "counted", "claim_id", "restart")} == {
        "record": 0,
        "counted": False,
        "claim_id": None,
        "restart": False,
    }
    assert refused["error"]["code"] == "oracle-failed"
    assert "this attempt was not filed" in refused["error"]["hint"]
    assert captured.err.count("\n") == 1 and captured.err.startswith(
        "twinaudit: error: [oracle-failed] "
    )
    assert _record_claims(tmp_path) == []
    # A model that takes other images: filed, then failed on its first window; it counts.
    wrong, port = serve_oracle(LinearOracle(shape=(32, 32, 3)), "127.0.0.1:0")
    try:
        assert _owner_claim(vault, arbiter, f"127.0.0.1:{port}") == 1
    finally:
        wrong.stop(None)
    err = capsys.readouterr().err
    (failed,) = _record_claims(tmp_path)
    assert failed.status == "failed" and f"claim {failed.claim_id} was filed on record 0" in err
    # The next claim's verdict counts it, and its first line leads with the bound.
    right, port = serve_oracle(LinearOracle(), "127.0.0.1:0")
    try:
        assert _owner_claim(vault, arbiter, f"127.0.0.1:{port}") == 0
    finally:
        right.stop(None)
    first = capsys.readouterr().out.splitlines()[0]
    assert "false-detection bound 0.1 = (earlier claims + 1)·p = (1 + 1)·0.05" in first


def test_a_claim_that_failed_before_any_outcome_says_so_and_runs_again_with_resume(
    photos, tmp_path, arbiter, capsys
):
    """Spec §10.7, *Running a failed claim again*: counted once, and the CLI says how."""
    vault = _escrowed_vault(photos, tmp_path, arbiter, with_labels=True)
    model = FlakyOracle(failures=1)  # the model's host fails the first window's queries
    server, port = serve_oracle(model, "127.0.0.1:0")
    try:
        assert _owner_claim(vault, arbiter, f"127.0.0.1:{port}") == 1
        err = capsys.readouterr().err
        (failed,) = _record_claims(tmp_path)
        assert failed.status == "failed"
        assert f"claim {failed.claim_id} was filed on record 0 and counted once" in err
        assert "before any pair's outcome was computed" in err
        assert f"--resume {failed.claim_id} runs it again as the same claim" in err
        resume = ("--resume", failed.claim_id)
        assert _owner_claim(vault, arbiter, f"127.0.0.1:{port}", *resume) == 0
    finally:
        server.stop(None)
    first = capsys.readouterr().out.splitlines()[0]
    assert f"claim {failed.claim_id}" in first and "(0 + 1)·0.05" in first
    assert [(c.claim_id, c.status) for c in _record_claims(tmp_path)] == [
        (failed.claim_id, "finished")
    ]
    files, pub = tmp_path / "verdict", str(vault.parent / "arbiter.key.pub")
    assert main(["verifier", "check", str(files / "verdict.json"), "--pubkey", pub]) == 0
    replay = ["verifier", "replay", str(files / "verdict.json"), "--transcript"]
    assert main([*replay, str(files / "transcript.bin"), "--pubkey", pub]) == 0
